//! Targeted calls (`tools/call`, `prompts/get`, `resources/read`, `completion/complete`): find the
//! owning backend from the public name, rewrite the name upstream, and relay the backend's answer.
//!
//! The backend's answer decides the response form: a plain JSON response is answered as JSON; when
//! the backend streams (SSE), the gateway streams too, relaying notifications of the call
//! (`notifications/progress` with the client's own progress token restored, `notifications/message`)
//! as they arrive, then the response. A modern client gets `notifications/message` only when its
//! `_meta` carries `io.modelcontextprotocol/logLevel`, and only at or above that level (2026-07-28
//! forbids log messages for a request without it; a legacy backend logs by default).
//!
//! Closing the response stream closes the upstream one: that is cancellation in 2026-07-28. A
//! legacy backend is sent `notifications/cancelled` instead, since its era does not take a closed
//! stream as cancellation (also when the gateway gives up on it after the backend's timeout).
//!
//! Rewrites on the way back: the response id, the backend's resource URIs in results and in
//! `notifications/resources/updated` (public URIs: resource links and embedded resources of tool
//! results, task results and prompt messages, `contents[].uri` of `resources/read`; see
//! [`public_uris`](crate::public_uris)), an MRTR `requestState` (wrapped, see
//! [`request_state`](super::request_state)), and a legacy backend's `-32002` resource-not-found
//! becomes `-32602` for a modern client. Everything else is passed through byte for byte.
//!
//! Input mid-call, across eras (book: docs/src/eras.md bridging):
//! - a modern backend's `input_required` for a 2025 client becomes real server-to-client requests on
//!   the call's stream, and the answers the backend's retry ([`Bridge`]);
//! - a 2025 backend's mid-call request (`sampling/createMessage`, `elicitation/create`,
//!   `roots/list`) for a 2026-07-28 client that declared the capability ends the client's exchange
//!   with an `input_required` result; the upstream call stays open ([`parked`](super::parked)) and
//!   the client's retry, carrying `inputResponses` and the gateway's `requestState`, answers the
//!   backend's request and relays the rest of the same call. Other backend requests (or a client
//!   without the capability, or a full parking table) are declined with `-32601`.
//! - a request of a backend behind a link (stdio, HTTP+SSE), which the link put on this call
//!   (see `upstream::link`), is handled the same way; since the link declared every relayed
//!   capability for all its callers, a 2025 client is asked only for what it declared itself,
//!   and its answer is written to the link (`forward_answer`).

mod bridge;
mod parking;
mod relay;
mod resolve;

use std::sync::Arc;

use mcp_core::{Era, ErrorObject, Method, RawObject, RequestId};

use super::parked::Resume;
use super::plugins::{self, Governed};
use super::scope::{OwnedCaller, Scope};
use super::task_id::Origin;
use crate::ops::client_meta::ClientMeta;
use crate::upstream::{Call, UpstreamError};
use bridge::Bridge;
pub(crate) use parking::{ParkedCalls, resume_here};
pub(crate) use relay::Relay;
use relay::{AnswerTask, Finish, OwnedTarget, Relayed};
use resolve::{Refused, Routed, prepare};

/// What a routed call comes to, for the front to render in its client's era.
pub(crate) enum Answer {
    /// Refused before the backend saw it, or the backend failed: a JSON-RPC error.
    Error(ErrorObject),
    /// Refused because several backends expose the name (a 2025 session then drops its
    /// backends' upstream sessions, see the failure contract).
    Ambiguous(ErrorObject),
    /// The backend's final message as the client gets it, with its error code when it is an
    /// error (a 2026-07-28 client gets some of them with `400`).
    Final {
        message: Vec<u8>,
        error_code: Option<i64>,
    },
    /// The answer streams: its first message, and the call relaying the rest.
    Stream { first: Vec<u8>, rest: Box<Relay> },
    /// A 2025 client cancelled the call before anything arrived: no answer is owed.
    Cancelled,
    /// A retry of a call parked on another gateway node (its `requestState` names the node): the
    /// front passes it on over the node bus when it has one, else answers [`round_over`].
    #[cfg(feature = "redis")]
    Elsewhere(Box<Elsewhere>),
}

/// A retry of a call parked on another node.
#[cfg(feature = "redis")]
pub(crate) struct Elsewhere {
    /// The node holding the call.
    pub(crate) node: String,
    /// The caller, whose budget the answer's wait is charged to.
    pub(crate) principal: mcp_core::Principal,
    pub(crate) resume: Resume,
    /// The retry's params, upstream form.
    pub(crate) params: RawObject<'static>,
    /// The retry's `_meta` (progress token, log level).
    pub(crate) meta: Option<Box<serde_json::value::RawValue>>,
}

/// The error for a retry whose parked call is not here (any more) and cannot be reached.
pub(crate) fn round_over() -> ErrorObject {
    ErrorObject::invalid_params(
        "Invalid requestState (its input round is over: answered already, expired, or held by \
         another gateway node); call again without requestState",
    )
}

/// Answers a targeted call.
pub(crate) async fn targeted(
    scope: &Scope<'_>,
    id: &RequestId,
    method: Method,
    params: RawObject<'_>,
) -> Answer {
    let (routed, mut params, public, parked) = match prepare(scope, method, params).await {
        Ok(prepared) => prepared,
        Err(Refused::Ambiguous(error)) => return Answer::Ambiguous(error),
        Err(Refused::Error(error)) => return Answer::Error(error),
    };
    if let Some(audit) = &scope.ctx.audit {
        audit.backend(routed.backend);
    }
    let governed = match &routed.task {
        // A task's result is its creating call's result: that call's post hook applies to it.
        Some(task) => plugins::task_post(scope, &task.origin, routed.backend),
        None => {
            plugins::pre(
                scope,
                method,
                routed.backend,
                &routed.upstream,
                &public,
                &mut params,
            )
            .await
        }
    };
    match (governed, parked) {
        (Ok(_), Some((token, node))) => {
            let binding = scope.binding(&[routed.backend, method.as_str(), &routed.upstream]);
            let parked = super::parked::Resume {
                token,
                node,
                binding: binding.into_iter().map(str::to_owned).collect(),
            };
            // Boxed: a retry is rare and its future large; inline, it would size every call's.
            Box::pin(resume(scope, id, parked, params)).await
        }
        (Ok(governed), None) => relay_call(scope, id, method, routed, params, governed).await,
        (Err(error), _) => Answer::Error(error),
    }
}

async fn relay_call(
    scope: &Scope<'_>,
    id: &RequestId,
    method: Method,
    routed: Routed<'_>,
    params: RawObject<'static>,
    governed: Option<Governed>,
) -> Answer {
    let ops = scope.ops;
    let Governed {
        headers: plugin_headers,
        meta: plugin_meta,
        post,
    } = governed.unwrap_or_default();
    let mut target = scope.target(routed.backend, routed.config);
    if plugin_meta.is_some() {
        target.meta = plugin_meta.as_deref();
    }
    let client = ClientMeta::of(scope);
    let progress = client
        .progress_token
        .map(|t| (ops.upstream.next_progress_token(), t));
    let call = Call {
        method: method.as_str(),
        params,
        name: Some(&routed.upstream),
        progress_token: progress.as_ref().map(|(t, _)| t.as_str()),
        // A tool call may have side effects: it goes to a replica after the primary might have
        // run it only when its annotations say it is read-only or idempotent.
        hints: ops.tool_hints(&target, &routed.upstream),
        headers: plugin_headers.as_ref(),
    };
    // A 2025 client may cancel the call (notifications/cancelled) before the backend even
    // answers the request head: register first, and give up the send when it fires.
    let registration = scope.session_id.map(|session| {
        let key = (session.to_owned(), id.to_json().into_owned());
        (ops.inflight.register(key.clone()), key)
    });
    let sending = ops.upstream.send_observed(&target, &call);
    let sent = match &registration {
        Some((cancel, _)) => {
            let notified = cancel.notified();
            futures_util::pin_mut!(sending, notified);
            match futures_util::future::select(sending, notified).await {
                futures_util::future::Either::Left((sent, _)) => Some(sent),
                futures_util::future::Either::Right(_) => None,
            }
        }
        None => Some(sending.await),
    };
    let (reply, recorder) = match sent {
        Some(Ok(sent)) => sent,
        Some(Err(e)) => {
            if let Some((_, key)) = &registration {
                ops.inflight.remove(key);
            }
            if let Some(audit) = &scope.ctx.audit {
                audit.transport_error();
            }
            return backend_error(routed.backend, &e);
        }
        None => {
            // Dropping the send closed the upstream request: a modern backend takes that as
            // cancellation; a legacy one had no upstream id yet to cancel.
            if let Some((_, key)) = &registration {
                ops.inflight.remove(key);
            }
            return Answer::Cancelled;
        }
    };
    let state_binding = scope
        .binding(&[routed.backend, method.as_str(), &routed.upstream])
        .into_iter()
        .map(str::to_owned)
        .collect();
    let bridge = (scope.era == Era::Legacy
        && scope.session_id.is_some()
        && reply.session.is_none())
    .then(|| Bridge {
        params: call.params.clone().into_owned(),
        name: routed.upstream.clone(),
        rounds: 0,
        queue: std::collections::VecDeque::new(),
        awaiting: Vec::new(),
        request_state: None,
    });
    // Boxed at once: a streamed answer keeps it boxed, and the call's future then holds a
    // pointer instead of the relay (twice: the argument and its binding in `answer`).
    let relay = Box::new(Relay {
        bridge,
        ops: Arc::clone(ops),
        downstream_id: id.clone(),
        upstream_id: reply.id,
        messages: reply.messages,
        recorder: Some(recorder),
        session: reply.session,
        link: reply.link,
        target: OwnedTarget {
            name: routed.backend.to_owned(),
            caller: OwnedCaller::of(scope),
        },
        progress,
        log_threshold: client.log_threshold,
        finish: Finish {
            method,
            backend: routed.backend.to_owned(),
            vhost: Arc::clone(&scope.ctx.vhost),
            era: scope.era,
            state_binding,
            task_binding: scope.binding(&[]).into_iter().map(str::to_owned).collect(),
            task: match routed.task.clone() {
                Some(task) => AnswerTask::Followed(task),
                None => AnswerTask::Created(Origin {
                    method,
                    name: routed.upstream.clone(),
                }),
            },
        },
        done: false,
        answered: false,
        downstream_session: scope.session_id.map(str::to_owned),
        cancel: registration.as_ref().map(|(cancel, _)| Arc::clone(cancel)),
        inflight_key: registration.map(|(_, key)| key),
        post,
        final_error: None,
        saw_invalid: false,
        asked: Vec::new(),
        audit: scope
            .ctx
            .audit
            .clone()
            .inspect(|audit| audit.expect_final()),
    });
    answer(relay).await
}

/// The call's answer from the relay's first message: final, or the start of a stream.
async fn answer(mut relay: Box<Relay>) -> Answer {
    match relay.next().await {
        Some(Relayed::Final(message)) => Answer::Final {
            message,
            error_code: relay.final_error,
        },
        Some(Relayed::Notification(first)) => Answer::Stream { first, rest: relay },
        None => Answer::Cancelled,
    }
}

/// A 2026-07-28 client's retry of a parked call: its `inputResponses` answer the backend's
/// requests, and the rest of the same upstream call is relayed (it may ask for input again). A
/// call parked on another node is [`Answer::Elsewhere`].
async fn resume(
    scope: &Scope<'_>,
    id: &RequestId,
    parked: Resume,
    params: RawObject<'static>,
) -> Answer {
    let client = ClientMeta::of(scope);
    let audit = scope.ctx.audit.clone();
    if let Some(answer) = resume_here(scope.ops, id, &parked, &params, client, audit).await {
        return answer;
    }
    #[cfg(feature = "redis")]
    if let Some(node) = parked.node.clone()
        && node != scope.ops.pending.node()
    {
        return Answer::Elsewhere(Box::new(Elsewhere {
            node,
            principal: scope.ctx.principal.clone(),
            resume: parked,
            params,
            meta: scope.meta.map(ToOwned::to_owned),
        }));
    }
    Answer::Error(round_over())
}

fn backend_error(backend: &str, e: &UpstreamError) -> Answer {
    tracing::info!(backend, error = %e, "routed call failed");
    Answer::Error(ErrorObject::internal(format!(
        "Backend {backend} failed: {e}"
    )))
}

/// A binding kept as owned strings, as the sealer takes it.
fn as_strs(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}
