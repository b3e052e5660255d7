//! The upstream side: one pooled HTTP client for every backend, backend era detection (probe once,
//! cache per credential scope, re-probe after failures), upstream sessions for legacy backends,
//! and sending one JSON-RPC request to a backend in the caller's era when the backend speaks it
//! (a dual-era backend gets 2025 sessions for 2025 callers), else in the backend's.
//!
//! Besides streamable HTTP, a backend may be a stdio child process ([`stdio`]) or speak the
//! deprecated 2024-11-05 HTTP+SSE transport ([`sse`]): `transport = "sse"` selects it, and with
//! the default transport the spec's backwards-compatibility rule applies — a legacy `initialize`
//! POST answered 400, 404 or 405 makes the gateway GET the URL, and an `endpoint` event marks the
//! URL as SSE until `era_ttl` passes. Both carry many callers over one connection ([`link`]).

mod deadline;
mod describe;
#[cfg(any(test, not(all(feature = "stdio", feature = "sse"))))]
mod disabled;
mod era;
mod error;
mod exchange;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod get_stream;
mod identity;
mod link;
mod meta;
mod options;
mod outcome;
mod request;
mod scope;
mod scoped_table;
mod send;
mod session;
mod session_life;
#[cfg(feature = "sse")]
mod sse;
#[cfg(not(feature = "sse"))]
use disabled as sse;
mod stack;
mod stdio;
mod target;
mod transport;

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use mcp_breaker::{BreakerConfig, BreakerRegistry, CircuitBreaker, Outcome, Permit};
use mcp_config_store::Transport;
use mcp_core::headers::{
    MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, MCP_SESSION_ID, encode_header_value,
};
use mcp_core::{Budget, Envelope, Era, MessageKind, ProtocolVersion, RawObject, RequestId};
use mcp_fallback::ToolHints;
use opentelemetry::KeyValue;
use opentelemetry::context::FutureExt as _;
use serde_json::value::RawValue;
use tokio::sync::OnceCell;
use tower_service::Service;
use url::Url;

use crate::node_id::IdMint;
use crate::telemetry::{self, ClientOp};
use era::{EraSlot, Route};
pub(crate) use outcome::Recorder;
use outcome::outcome_of;
use send::{checked, legacy_capabilities, modern_headers};

pub use error::UpstreamError;
pub use exchange::{UpstreamReply, UpstreamRequest};
pub(crate) use link::LinkWriter;
pub(crate) use meta::{CLIENT_CAPABILITIES, PROGRESS_TOKEN, PROTOCOL_VERSION};
pub use options::UpstreamOptions;
pub(crate) use scope::CredentialScope;
pub(crate) use scoped_table::ScopedTable;
pub(crate) use send::legacy_headers;
pub(crate) use session::LegacySession;
pub(crate) use stack::BackendLayer;
pub use stack::BackendService;
pub use stdio::catalog::{Refusal, StdioRules, StdioServer, is_loader_variable};
pub(crate) use target::Target;
pub(crate) use transport::MessageStream;
pub use transport::{DEFAULT_DENIED, DestinationError, DestinationPolicy, set_pool_lane};

use request::Outgoing;
use scope::digest_of as capability_digest;
use session::{SessionKey, SessionTable};
use transport::{Answer, HttpClient};

/// One JSON-RPC request to send.
pub(crate) struct Call<'a> {
    pub(crate) method: &'a str,
    /// Params without `_meta` (the upstream side writes `_meta` for the backend's era).
    pub(crate) params: RawObject<'a>,
    /// The upstream item name or URI, for `Mcp-Name`.
    pub(crate) name: Option<&'a str>,
    /// The gateway's progress token for this call, when the client asked for progress.
    pub(crate) progress_token: Option<&'a str>,
    /// The tool's `readOnlyHint`/`idempotentHint` (for `tools/call`): whether it may be sent to a
    /// replica after the primary might have received it (`mcp_fallback::may_replay`).
    pub(crate) hints: ToolHints,
    /// Headers plugins add to this request (`mcp_plugins::UpstreamExtras`).
    pub(crate) headers: Option<&'a HeaderMap>,
}

/// The breaker config of one breaker key: the defaults merged with the backend's overrides.
type MergedBreakerConfig = BreakerConfig;

/// Most entries of the era, breaker and HTTP+SSE-discovery tables (each principal holds at most
/// `max_sessions_per_principal` of them).
const MAX_SCOPED_ENTRIES: usize = 100_000;
/// How long an upstream session, breaker or HTTP+SSE discovery nobody uses is kept: a full
/// table drops such entries (of anyone) before it refuses a newcomer.
const SCOPED_IDLE: Duration = Duration::from_secs(30 * 60);

/// The upstream side of a router: the transport client and a stack per backend scope.
///
/// Dereferences to the [`Client`] for everything that is not one call (sessions, links, describing).
pub(crate) struct Upstream {
    client: Arc<Client>,
    /// One backend stack per breaker key of the primary address (see [`breaker_key`]).
    stacks: ScopedTable<String, Arc<stack::BackendStack>>,
    /// The integrator's layer around every backend stack.
    layer: Option<BackendLayer>,
}

impl std::ops::Deref for Upstream {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

/// `{}`: the result of a `ping`, and the stand-in for an object that cannot be read.
pub(crate) fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// The transport client shared by every backend stack of a router: pooled HTTP connections, eras,
/// upstream sessions, stdio processes and HTTP+SSE connections, all per credential scope.
pub(crate) struct Client {
    /// Keep-alive connections, one pool per credential scope.
    pools: Arc<transport::ScopedPools>,
    options: UpstreamOptions,
    /// Backend eras per credential scope: a tenant's probe (made with its credentials) and its
    /// failures (which forget the era) only ever touch its own entries.
    eras: ScopedTable<CredentialScope, EraSlot>,
    sessions: SessionTable,
    /// What linked backends' calls hold for clients that have not read it yet, per principal.
    link_buffers: Budget,
    /// Upstream request ids and progress tokens, unique across nodes and restarts: several nodes
    /// send on one shared upstream 2025 session (see `crate::node_id`).
    ids: IdMint,
    client_info: Box<RawValue>,
    breakers: BreakerRegistry,
    hubs: get_stream::Hubs,
    /// Merged breaker config per breaker key, so overrides are not re-merged on every call;
    /// also what bounds the breakers per principal (an evicted key's breaker leaves the registry).
    breaker_configs: ScopedTable<String, MergedBreakerConfig>,
    /// Child processes of stdio backends.
    stdio: stdio::StdioPool,
    /// Connections to HTTP+SSE (2024-11-05) backends.
    sse: sse::SsePool,
    /// Scopes whose URL was found to speak HTTP+SSE by the fallback rule, and when.
    sse_urls: ScopedTable<CredentialScope, Instant>,
    /// Whether `sse_urls` ever held an entry: until then no call takes its lock (every call to an
    /// HTTP backend asks).
    any_sse_url: std::sync::atomic::AtomicBool,
    /// Messages owed to backends after their call or session ended (a 2025 backend's
    /// `notifications/cancelled`, an upstream session's `DELETE`), sent in the background on the
    /// runtime that ended the call; tracked so that a server shutting down can let them go out
    /// (`McpRouter::settle`). Shared by every tenant, like the runtime: each send is bounded by
    /// its backend's timeout, and a settle by its own bound.
    pub(crate) owed: tokio_util::task::TaskTracker,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

const LEGACY_PROTOCOL: ProtocolVersion = ProtocolVersion::LATEST_LEGACY;

impl Upstream {
    /// The upstream side of a router on node `node` (its random id, in every request id and
    /// progress token it mints), marking its HTTP requests with `via` (`crate::hops`).
    pub(crate) fn new(
        options: UpstreamOptions,
        client_info: Box<RawValue>,
        layer: Option<BackendLayer>,
        node: &str,
        via: http::HeaderValue,
    ) -> Self {
        let stacks = ScopedTable::new(
            "backend_stacks",
            options.max_sessions_per_principal,
            MAX_SCOPED_ENTRIES,
            SCOPED_IDLE,
        );
        Self {
            client: Arc::new(Client::new(options, client_info, node, via)),
            stacks,
            layer,
        }
    }

    /// The budgets of what the upstream side keeps for callers, for metrics.
    pub(crate) fn budgets(&self) -> impl Iterator<Item = &Budget> {
        let c = &self.client;
        let links = [c.stdio.budget(), c.sse.budget()].into_iter().flatten();
        [
            self.stacks.budget(),
            &c.link_buffers,
            c.sessions.budget(),
            c.pools.budget(),
            c.eras.budget(),
            c.breaker_configs.budget(),
            c.sse_urls.budget(),
        ]
        .into_iter()
        .chain(links)
    }

    /// Sends `call` to the backend through its stack in the caller's scope: the primary address
    /// first, then the replicas in order when the primary fails and the call may go elsewhere (it
    /// never reached the primary, or it is replay-safe). Each address has its own circuit
    /// breaker: an open one fails at once without touching the network. The first failure is
    /// reported when every address fails.
    pub(crate) async fn send(
        &self,
        target: &Target<'_>,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let (mut reply, recorder) = self.send_observed(target, call).await?;
        reply.messages = recorder.recording(reply.messages);
        Ok(reply)
    }

    /// [`Self::send`] for a reader that parses every message of the answer anyway (the call's
    /// relay): it hands each to the [`Recorder`], which then records the call's outcome without
    /// parsing the message a second time.
    pub(crate) async fn send_observed(
        &self,
        target: &Target<'_>,
        call: &Call<'_>,
    ) -> Result<(UpstreamReply, Recorder), UpstreamError> {
        let mut op = ClientOp::start(call.method, call.name, target.name);
        let cx = op.context();
        // A listen is a stream that lasts as long as its listener, not a call: no deadline.
        let limit = (call.method != "subscriptions/listen").then(|| self.client.deadline(target));
        let at = limit.map(|limit| tokio::time::Instant::now() + limit);
        let sent = self.exchange(target, call);
        let sent = async move {
            match (at, limit) {
                (Some(at), Some(limit)) => tokio::time::timeout_at(at, sent)
                    .await
                    .unwrap_or(Err(UpstreamError::DeadlineExceeded(limit))),
                _ => sent.await,
            }
        };
        let result = match &cx {
            Some(cx) => sent.with_context(cx.clone()).await,
            None => sent.await,
        };
        match result {
            Ok(mut reply) => {
                if let (Some(at), Some(limit)) = (at, limit) {
                    reply.messages = deadline::until(reply.messages, at, limit);
                }
                ClientOp::annotate(
                    cx.as_ref(),
                    vec![KeyValue::new("jsonrpc.request.id", reply.id.to_string())],
                );
                let recorder = Recorder::new(reply.id.clone(), reply.permit.take(), op, cx);
                Ok((reply, recorder))
            }
            Err(e) => {
                op.finish(cx.as_ref(), Some(e.error_type()));
                Err(e)
            }
        }
    }

    /// [`Self::send`] without its span and metric: one call of the scope's stack.
    async fn exchange(
        &self,
        target: &Target<'_>,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let stack = self.stack(target)?;
        let request = UpstreamRequest::new(target, call, Arc::clone(&stack.config));
        let mut service = stack.service.clone();
        std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
        service.call(request).await
    }

    /// The backend stack of `target`'s scope, built on first use or when its config changed. A
    /// full table (the caller has no share left) builds one for this call only.
    fn stack(&self, target: &Target<'_>) -> Result<Arc<stack::BackendStack>, UpstreamError> {
        let scope = target.primary_scope();
        let key = breaker_key(target, scope);
        if let Some(stack) = self.stacks.get(&key)
            && *stack.config == *target.config
        {
            return Ok(stack);
        }
        let built = Arc::new(self.client.build_stack(target, self.layer.as_ref())?);
        if self.stacks.replace(&key, Arc::clone(&built)) {
            return Ok(built);
        }
        Ok(self
            .stacks
            .get_or_insert_with(&key, &scope.principal, || Arc::clone(&built))
            .value
            .unwrap_or(built))
    }
}

impl Client {
    fn new(
        options: UpstreamOptions,
        client_info: Box<RawValue>,
        node: &str,
        via: http::HeaderValue,
    ) -> Self {
        let link_buffers = options.link_buffers();
        let stdio = stdio::StdioPool::new(
            options.stdio.clone(),
            options.max_stdio_processes,
            client_info.clone(),
            link_buffers.clone(),
        );
        let pools = Arc::new(
            transport::ScopedPools::new(
                transport::build_connector(
                    options.connect_timeout,
                    options.destinations.clone(),
                    &options.tls,
                ),
                options.pool_lanes,
                options.max_sessions_per_principal,
                MAX_SCOPED_ENTRIES,
                SCOPED_IDLE,
            )
            .marking(via),
        );
        Self {
            sse: sse::SsePool::new(
                Arc::clone(&pools),
                client_info.clone(),
                link_buffers.clone(),
            ),
            link_buffers: link_buffers.budget,
            sse_urls: ScopedTable::new(
                "sse_endpoints",
                options.max_sessions_per_principal,
                MAX_SCOPED_ENTRIES,
                options.era_ttl,
            ),
            any_sse_url: std::sync::atomic::AtomicBool::new(false),
            pools,
            sessions: SessionTable::new(
                options.max_sessions,
                options.max_sessions_per_principal,
                options.session_bytes_per_principal,
                options.session_bytes,
            ),
            eras: ScopedTable::new(
                "backend_eras",
                options.max_sessions_per_principal,
                MAX_SCOPED_ENTRIES,
                options.era_ttl,
            ),
            breaker_configs: ScopedTable::new(
                "breaker_configs",
                options.max_sessions_per_principal,
                MAX_SCOPED_ENTRIES,
                SCOPED_IDLE,
            ),
            breakers: BreakerRegistry::new()
                .without_state_gauges()
                .max_metric_labels(options.max_breaker_labels),
            options,
            ids: IdMint::new(node),
            client_info,
            hubs: get_stream::Hubs::default(),
            stdio,
            owed: tokio_util::task::TaskTracker::new(),
        }
    }

    /// A fresh upstream request id, unique across this deployment's nodes and restarts, so
    /// concurrent calls on one upstream session never collide, whichever node sends them.
    pub(crate) fn next_id(&self) -> RequestId {
        self.ids.request_id()
    }

    /// A fresh progress token for one upstream call (unique like [`next_id`](Self::next_id)).
    pub(crate) fn next_progress_token(&self) -> String {
        self.ids.progress_token()
    }

    fn url<'a>(target: &Target<'a>) -> Result<&'a Url, UpstreamError> {
        target.config.url.as_ref().ok_or(UpstreamError::NoUrl)
    }

    fn timeout(target: &Target<'_>) -> Duration {
        Duration::from_millis(target.config.timeout_ms.max(1))
    }

    /// The total deadline of one call to `target`: its `deadline_ms` up to the operator's
    /// ceiling, else the operator's default (`crate::upstream::deadline`), and never shorter
    /// than the backend's `timeout_ms`: a silent backend fails its wait first, which its
    /// breaker counts (a deadline is not a backend failure).
    fn deadline(&self, target: &Target<'_>) -> Duration {
        target
            .config
            .deadline_ms
            .map_or(self.options.call_deadline, Duration::from_millis)
            .min(self.options.max_call_deadline)
            .max(Self::timeout(target))
    }

    /// The credential scope of `target` at `address` (a URL, or `stdio:` + its catalog entry or
    /// command).
    pub(crate) fn scope(target: &Target<'_>, address: &str) -> CredentialScope {
        CredentialScope::new(
            address,
            &target.config.headers,
            target.downstream,
            target.principal,
        )
    }

    /// The scope of `target` at `url`: the target's memoized [`Target::primary_scope`] when
    /// `url` is its primary address (it nearly always is), else digested now.
    pub(crate) fn scope_at<'t>(
        target: &'t Target<'_>,
        url: &Url,
    ) -> std::borrow::Cow<'t, CredentialScope> {
        if target.config.url.as_ref() == Some(url) {
            std::borrow::Cow::Borrowed(target.primary_scope())
        } else {
            std::borrow::Cow::Owned(Self::scope(target, url.as_str()))
        }
    }

    /// The scope of `target`'s primary address; callers use [`Target::primary_scope`], which
    /// computes it once.
    fn primary_scope(target: &Target<'_>) -> CredentialScope {
        let address = match (&target.config.url, stdio::label(target.config)) {
            (Some(url), _) => url.as_str().to_owned(),
            (None, Some(label)) => format!("stdio:{label}"),
            (None, None) => String::new(),
        };
        Self::scope(target, &address)
    }

    /// The breaker of one credential scope and the caller's breaker settings: registry key
    /// `<backend name>\0<opaque id>`, so a breaker is never shared between principals, and a
    /// caller's `timeout_ms` or overrides (which decide what counts as a failure) never trip or
    /// reset a breaker that another caller uses. `None` when the backend's `breaker` overrides
    /// are invalid (logged; config validation should have caught them) or the caller has no
    /// breaker share left in a full table.
    fn breaker(&self, target: &Target<'_>, scope: &CredentialScope) -> Option<CircuitBreaker> {
        let key = breaker_key(target, scope);
        let config = match self.breaker_configs.get(&key) {
            Some(config) => config,
            None => {
                let merged = match &target.config.breaker {
                    Some(overrides) => match self.options.breaker.with_overrides(overrides) {
                        Ok(merged) => merged,
                        Err(e) => {
                            tracing::warn!(backend = target.name, error = %e, "invalid breaker overrides; no breaker");
                            return None;
                        }
                    },
                    None => self.options.breaker.clone(),
                };
                let inserted =
                    self.breaker_configs
                        .get_or_insert_with(&key, &scope.principal, || merged);
                for (evicted, _) in inserted.evicted {
                    self.breakers.remove(&evicted);
                }
                inserted.value?
            }
        };
        self.breakers
            .get_or_insert_named(&key, target.name, &config)
            .ok()
    }

    /// Launches the next stdio processes under `rules` (a reload of the operator's catalog).
    pub(crate) fn replace_stdio_rules(&self, rules: StdioRules) {
        self.stdio.replace_rules(rules);
    }

    /// The breakers, for metrics and readiness detail.
    pub(crate) fn breakers(&self) -> &BreakerRegistry {
        &self.breakers
    }

    /// Whether the backend carries every caller over one link of the gateway's own (a stdio
    /// process or an HTTP+SSE connection): such a backend has no `subscriptions/listen` and no
    /// upstream session to show callers.
    pub(crate) fn is_linked(&self, target: &Target<'_>) -> bool {
        stdio::label(target.config).is_some()
            || target.config.transport == Transport::Sse
            // The scope (a digest) only when some scope was found to speak HTTP+SSE.
            || (self.any_sse_url.load(Ordering::Acquire)
                && Self::url(target)
                    .is_ok_and(|url| self.speaks_sse(target, &Self::scope_at(target, url))))
    }

    /// The link of a linked backend (see [`is_linked`](Self::is_linked)) as the caller's 2025
    /// GET stream follows it; `None` for other backends, or when the link cannot be had.
    pub(crate) async fn link_events(&self, target: &Target<'_>) -> Option<LinkEvents> {
        if stdio::label(target.config).is_some() {
            return self.stdio.listen(target).await.ok();
        }
        if !self.is_linked(target) {
            return None;
        }
        let url = Self::url(target).ok()?;
        self.sse
            .listen(target, url, &Self::scope_at(target, url))
            .await
            .ok()
    }
}

/// A backend link followed by a 2025 session's GET stream.
pub(crate) struct LinkEvents {
    /// The era the link speaks: a 2025 server takes `resources/subscribe` itself.
    pub(crate) era: Era,
    /// Every principal's calls share it (a shared stdio process).
    pub(crate) shared: bool,
    /// Its notifications of no call: resource updates, list changes.
    pub(crate) events: tokio::sync::broadcast::Receiver<Bytes>,
}

/// The `result` of the response to `reply`'s request (notifications skipped; an error response is
/// a malformed answer here, where only a result makes sense).
pub(super) async fn final_result(mut reply: UpstreamReply) -> Result<Bytes, UpstreamError> {
    let mut saw_invalid = false;
    while let Some(message) = reply.messages.next().await {
        let message = message?;
        let Ok(env) = Envelope::parse(&message) else {
            saw_invalid = true;
            continue;
        };
        if env.id() != Some(&reply.id) {
            continue;
        }
        return match env.result() {
            Some(result) => Ok(Bytes::copy_from_slice(result.get().as_bytes())),
            None => Err(UpstreamError::Malformed("backend answered with an error")),
        };
    }
    Err(UpstreamError::ended(saw_invalid))
}

/// Identifies a session table entry (for forgetting it).
pub(crate) type SessionKeyHandle = SessionKey;

/// The registry key of the breaker `target` uses in `scope`: the backend's name (shown on
/// `/readyz`), the scope's opaque id, then the caller's breaker settings (`timeout_ms` and a
/// digest of the overrides), which decide what counts as a failure.
fn breaker_key(target: &Target<'_>, scope: &CredentialScope) -> String {
    // The timeout is written as is; overrides (rare) as half a digest, to keep keys short.
    // Built by hand: every call looks its stack up by this key.
    let mut key = String::with_capacity(target.name.len() + 32 + 24);
    key.push_str(target.name);
    key.push('\u{0}');
    scope.push_opaque_id(&mut key);
    key.push('\u{0}');
    let _ = write!(key, "{}", target.config.timeout_ms);
    if let Some(overrides) = &target.config.breaker {
        let json = serde_json::to_string(overrides).unwrap_or_default();
        key.push('\u{0}');
        scope::push_hex(&mut key, &capability_digest(json.as_bytes())[..8]);
    }
    key
}
