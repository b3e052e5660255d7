//! [`Scope`]: everything one downstream request needs to talk to its backends, and
//! [`final_response`] / [`final_result`]: one backend call reduced to its final JSON-RPC
//! response or that response's result.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::HeaderMap;
use mcp_config_store::BackendConfig;
use mcp_core::{Envelope, Era, ErrorObject, MessageKind, RequestId, encode_error};
use serde_json::value::RawValue;

use crate::context::RequestContext;
use crate::naming::Namer;
use crate::ops::Ops;
use crate::ops::client_meta::ClientMeta;
use crate::upstream::{Call, LegacySession, Target, UpstreamError};

/// One downstream request's view of its virtual host.
pub(crate) struct Scope<'a> {
    pub(crate) ops: &'a std::sync::Arc<Ops>,
    pub(crate) ctx: &'a RequestContext,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) client_caps: &'a RawValue,
    pub(crate) meta: Option<&'a RawValue>,
    /// What `meta` asks of a call, when the front already read it (the modern engine parses
    /// `_meta` once, to validate it); `None`: read from `meta` when a call needs it.
    pub(crate) client_meta: Option<&'a ClientMeta>,
    /// The downstream client's era (decides error codes).
    pub(crate) era: Era,
    /// The downstream legacy session, for 2025 clients.
    pub(crate) session_id: Option<&'a str>,
}

impl<'a> Scope<'a> {
    /// The upstream target for one backend of the virtual host.
    pub(crate) fn target(&self, name: &'a str, config: &'a BackendConfig) -> Target<'a> {
        Target::new(
            name,
            config,
            self.headers,
            &self.ctx.principal,
            self.client_caps,
            self.meta,
            self.era,
        )
    }

    /// The naming rules of the virtual host.
    pub(crate) fn namer(&self) -> Namer<'a> {
        Namer::new(&self.ctx.vhost)
    }

    /// What handles minted for this request are bound to: the caller, the virtual host and
    /// `purpose` (a method, or a method plus backend and name).
    pub(crate) fn binding<'b>(&'b self, extra: &[&'b str]) -> Vec<&'b str> {
        let mut binding = vec![
            self.ctx.principal.issuer(),
            self.ctx.principal.subject(),
            self.ctx.vhost_id.as_str(),
        ];
        binding.extend_from_slice(extra);
        binding
    }

    /// The per-backend deadline of a fan-out: the backend's own timeout, capped by the router's.
    pub(crate) fn fanout_deadline(&self, config: &BackendConfig) -> Duration {
        Duration::from_millis(config.timeout_ms).min(self.ops.fanout_deadline)
    }
}

/// An owned copy of a request's caller-side facts, for work that outlives its handler (a relayed
/// stream, a GET stream following backends).
#[derive(Clone)]
pub(crate) struct OwnedCaller {
    /// The virtual host (shared, so no per-call copy of its config).
    pub(crate) vhost: std::sync::Arc<mcp_config_store::VirtualHostConfig>,
    pub(crate) headers: HeaderMap,
    pub(crate) principal: mcp_core::Principal,
    pub(crate) client_caps: Box<RawValue>,
    /// The era the caller speaks (what a dual-era backend is talked to in).
    pub(crate) era: Era,
}

impl OwnedCaller {
    /// The caller of `scope`.
    pub(crate) fn of(scope: &Scope<'_>) -> Self {
        Self {
            vhost: std::sync::Arc::clone(&scope.ctx.vhost),
            headers: scope.headers.clone(),
            principal: scope.ctx.principal.clone(),
            client_caps: scope.client_caps.to_owned(),
            era: scope.era,
        }
    }

    /// The upstream target for backend `name`, if the virtual host has it.
    pub(crate) fn target<'a>(&'a self, name: &'a str) -> Option<Target<'a>> {
        Some(Target::new(
            name,
            self.vhost.backends.get(name)?,
            &self.headers,
            &self.principal,
            &self.client_caps,
            None,
            self.era,
        ))
    }
}

/// Why a backend contributed nothing to a fan-out or a routed call failed.
#[derive(Debug, Clone)]
pub(crate) enum BackendFailure {
    /// Transport-level failure.
    Upstream(UpstreamError),
    /// The backend answered with a JSON-RPC error.
    Error(ErrorObject),
    /// The fan-out deadline passed.
    Deadline(Duration),
}

impl BackendFailure {
    /// A short reason for degraded markers and error messages (never an address).
    pub(crate) fn reason(&self) -> String {
        match self {
            Self::Upstream(e) => e.to_string(),
            Self::Error(e) => format!("error {}: {}", e.code, e.message),
            Self::Deadline(d) => format!("no answer within {d:?}"),
        }
    }
}

/// Sends `call` and waits for the response with its id, skipping notifications. Server-to-client
/// requests from a legacy backend are declined (a fan-out has no client to ask).
pub(crate) async fn final_response(
    scope: &Scope<'_>,
    target: &Target<'_>,
    call: &Call<'_>,
    deadline: Duration,
) -> Result<Bytes, BackendFailure> {
    final_message(scope, target, call, deadline, |message, _| {
        Ok(message.clone())
    })
    .await
}

/// Like [`final_response`], reduced to the response's `result` object (or the backend's error)
/// from the one parse that found the response: a list page is read once, not three times.
pub(crate) async fn final_result(
    scope: &Scope<'_>,
    target: &Target<'_>,
    call: &Call<'_>,
    deadline: Duration,
) -> Result<Box<RawValue>, BackendFailure> {
    final_message(scope, target, call, deadline, |_, env| {
        result_in(env).map(ToOwned::to_owned)
    })
    .await
}

/// The loop of [`final_response`] and [`final_result`]: `take` turns the final response
/// (and its parse) into the answer.
async fn final_message<T>(
    scope: &Scope<'_>,
    target: &Target<'_>,
    call: &Call<'_>,
    deadline: Duration,
    take: impl FnOnce(&Bytes, &Envelope<'_>) -> Result<T, BackendFailure>,
) -> Result<T, BackendFailure> {
    let work = async {
        let mut reply = scope
            .ops
            .upstream
            .send(target, call)
            .await
            .map_err(BackendFailure::Upstream)?;
        let mut saw_invalid = false;
        while let Some(message) = reply.messages.next().await {
            let message = message.map_err(BackendFailure::Upstream)?;
            let env = Envelope::parse(&message).ok();
            saw_invalid |= env.is_none();
            match (classify(env.as_ref(), &reply.id), &env) {
                // `classify` calls only a parsed message final.
                (Incoming::Final, Some(env)) => return take(&message, env),
                (Incoming::ServerRequest(id), _) => {
                    decline(scope, target, reply.session.as_deref(), id).await
                }
                _ => {}
            }
        }
        Err(BackendFailure::Upstream(UpstreamError::ended(saw_invalid)))
    };
    tokio::time::timeout(deadline, work)
        .await
        .map_err(|_| BackendFailure::Deadline(deadline))?
}

/// How a message on a call's stream relates to the call.
pub(crate) enum Incoming {
    /// The response (or error) for the call.
    Final,
    /// A server-to-client request, with its id.
    ServerRequest(RequestId),
    /// A notification or anything unrelated.
    Other,
}

/// How a parsed message relates to the call `id` (`None`: not a JSON-RPC message).
pub(crate) fn classify(env: Option<&Envelope<'_>>, id: &RequestId) -> Incoming {
    let Some(env) = env else {
        return Incoming::Other;
    };
    match env.kind() {
        MessageKind::Response | MessageKind::Error if env.id() == Some(id) => Incoming::Final,
        MessageKind::Request => env
            .id()
            .cloned()
            .map_or(Incoming::Other, Incoming::ServerRequest),
        _ => Incoming::Other,
    }
}

/// Answers a legacy backend's server-to-client request with an error: this client cannot be
/// asked mid-call (modern clients get MRTR instead, which legacy backends do not speak).
pub(crate) async fn decline(
    scope: &Scope<'_>,
    target: &Target<'_>,
    session: Option<&LegacySession>,
    id: RequestId,
) {
    let Some(session) = session else {
        return;
    };
    let error = ErrorObject::method_not_found(
        "server-to-client requests are not relayed to this client by the gateway",
    );
    post(scope, target, session, encode_error(Some(&id), &error)).await;
}

async fn post(scope: &Scope<'_>, target: &Target<'_>, session: &LegacySession, message: Vec<u8>) {
    if let Err(e) = scope
        .ops
        .upstream
        .post_to_session(target, session, message)
        .await
    {
        tracing::debug!(backend = target.name, error = %e, "could not answer a backend request");
    }
}

/// The `result` object of a parsed final response, or the backend's error.
fn result_in<'m>(env: &Envelope<'m>) -> Result<&'m RawValue, BackendFailure> {
    if let Some(error) = env.error() {
        return Err(BackendFailure::Error(error));
    }
    env.result()
        .filter(|r| r.get().starts_with('{'))
        .ok_or(BackendFailure::Upstream(UpstreamError::Malformed(
            "result is not an object",
        )))
}
