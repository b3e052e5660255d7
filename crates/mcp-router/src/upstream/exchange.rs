//! One upstream exchange as a value: [`UpstreamRequest`] (what a backend stack is called with)
//! and [`UpstreamReply`] (what it answers: the backend's message stream).
//!
//! The request is owned (a backend stack is a `tower::Service`, whose futures outlive the
//! router's borrows) but cheap to clone: the fallback layer clones it for every attempt, so it is
//! one `Arc`. The backend's config is the `Arc` its stack was built with, not a copy per call.

use std::fmt;
use std::sync::Arc;

use http::HeaderMap;
use mcp_breaker::{CarryPermit, Permit};
use mcp_config_store::BackendConfig;
use mcp_core::{Era, Principal, RawObject, RequestId};
use mcp_fallback::{McpCall, ToolHints};
use serde_json::value::RawValue;

use super::{Call, LegacySession, LinkWriter, MessageStream, Target};

/// One JSON-RPC request to one backend, for one caller: what every backend stack
/// (`tower::Service<UpstreamRequest>`) is called with.
///
/// Built by the router; a layer reads what it needs to decide ([`backend`](Self::backend),
/// [`method`](Self::method), [`name`](Self::name)) and passes it on. Clones share one allocation.
#[derive(Clone)]
pub struct UpstreamRequest {
    inner: Arc<Exchange>,
}

/// The owned form of a [`Target`] and a [`Call`].
struct Exchange {
    backend: String,
    config: Arc<BackendConfig>,
    downstream: HeaderMap,
    principal: Principal,
    client_caps: Box<RawValue>,
    meta: Option<Box<RawValue>>,
    era: Era,
    method: String,
    params: RawObject<'static>,
    name: Option<String>,
    progress_token: Option<String>,
    hints: ToolHints,
    headers: Option<HeaderMap>,
    /// Asks what the backend says about itself (see [`UpstreamRequest::describe`]).
    describe: bool,
}

impl UpstreamRequest {
    /// `call` to `target`, whose config is `config` (the `Arc` of the backend's stack).
    pub(crate) fn new(target: &Target<'_>, call: &Call<'_>, config: Arc<BackendConfig>) -> Self {
        Self::build(target, call, config, false)
    }

    /// What `target`'s backend says about itself: its `DiscoverResult`, or for a 2025 backend
    /// the `InitializeResult` of the caller's upstream session (opened if needed). Layers see it
    /// as a `server/discover` request; it is read-only, so it may go to a replica.
    pub(crate) fn describe(target: &Target<'_>, config: Arc<BackendConfig>) -> Self {
        let call = Call {
            method: "server/discover",
            params: RawObject::new(),
            name: None,
            progress_token: None,
            hints: ToolHints::NONE,
            headers: None,
        };
        Self::build(target, &call, config, true)
    }

    fn build(
        target: &Target<'_>,
        call: &Call<'_>,
        config: Arc<BackendConfig>,
        describe: bool,
    ) -> Self {
        Self {
            inner: Arc::new(Exchange {
                backend: target.name.to_owned(),
                config,
                downstream: target.downstream.clone(),
                principal: target.principal.clone(),
                client_caps: target.client_caps.to_owned(),
                meta: target.meta.map(ToOwned::to_owned),
                era: target.era,
                method: call.method.to_owned(),
                params: call.params.clone().into_owned(),
                name: call.name.map(str::to_owned),
                progress_token: call.progress_token.map(str::to_owned),
                hints: call.hints,
                headers: call.headers.cloned(),
                describe,
            }),
        }
    }

    /// Whether this asks the backend to describe itself (see [`Self::describe`]).
    pub(crate) fn is_describe(&self) -> bool {
        self.inner.describe
    }

    /// The backend's configured name.
    pub fn backend(&self) -> &str {
        &self.inner.backend
    }

    /// The JSON-RPC method.
    pub fn method(&self) -> &str {
        &self.inner.method
    }

    /// The upstream item name or URI (`Mcp-Name`), when the method names one.
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// The borrowed target the transports take.
    pub(crate) fn target(&self) -> Target<'_> {
        let e = &*self.inner;
        Target::new(
            &e.backend,
            &e.config,
            &e.downstream,
            &e.principal,
            &e.client_caps,
            e.meta.as_deref(),
            e.era,
        )
    }

    /// The borrowed call the transports take (its params borrowed, not copied).
    pub(crate) fn call(&self) -> Call<'_> {
        let e = &*self.inner;
        Call {
            method: &e.method,
            params: e.params.borrowed(),
            name: e.name.as_deref(),
            progress_token: e.progress_token.as_deref(),
            hints: e.hints,
            headers: e.headers.as_ref(),
        }
    }
}

impl fmt::Debug for UpstreamRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamRequest")
            .field("backend", &self.inner.backend)
            .field("method", &self.inner.method)
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

/// The MCP replay rule of the fallback layer reads the method and the tool's hints from here.
impl McpCall for UpstreamRequest {
    fn mcp_method(&self) -> Option<&str> {
        Some(&self.inner.method)
    }

    fn tool_hints(&self) -> ToolHints {
        self.inner.hints
    }
}

/// What a backend answered to one [`UpstreamRequest`]: the head arrived; the messages stream.
///
/// Opaque to layers: the router reads it. It carries the breaker permit of its call until the
/// answer's outcome is known (the response with the call's id, or a broken stream): a 200 whose
/// stream then breaks or stalls is a failure.
pub struct UpstreamReply {
    /// The id the gateway used upstream.
    pub(crate) id: RequestId,
    /// The messages: notifications related to the call, server-to-client requests (legacy),
    /// then the response.
    pub(crate) messages: MessageStream,
    /// The legacy session the call ran in.
    pub(crate) session: Option<Arc<LegacySession>>,
    /// The link the call ran on (stdio, HTTP+SSE): where answers to the backend's requests go.
    pub(crate) link: Option<LinkWriter>,
    /// The breaker permit, recorded when the answer's outcome is known.
    pub(crate) permit: Option<Permit>,
}

impl fmt::Debug for UpstreamReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamReply")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl CarryPermit for UpstreamReply {
    fn carry_permit(&mut self, permit: Permit) {
        self.permit = Some(permit);
    }
}
