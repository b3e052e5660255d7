//! A 2025 client's notifications about a backend's request the gateway relayed to it:
//! `notifications/progress` for the request's progress token and `notifications/cancelled` naming
//! its id (both the sealed gateway id, see [`crate::ops::pending`]) go into the asking backend's session
//! with the backend's own token and id; for a request a linked backend (stdio process, HTTP+SSE
//! connection) asked, the client's progress goes to the link under the backend's own token.

use std::sync::Arc;

use http::request::Parts;
use http::{Response, StatusCode};
use mcp_core::{Envelope, ErrorObject, RawObject, RequestId};
use serde_json::value::RawValue;

use crate::body::McpBody;
use crate::context::RequestContext;
use crate::front::{Front, respond};
use crate::session::SessionRecord;
use crate::upstream::empty_object;

/// The backend request a client's `notifications/progress` (by its `progressToken`) or
/// `notifications/cancelled` (by its `requestId`) is about, when the gateway relayed it to this
/// session (see [`crate::ops::pending`]); `None` for anything else, e.g. the client cancelling its own
/// call.
pub(super) fn backend_request(
    front: &Front,
    session_id: &str,
    env: &Envelope<'_>,
) -> Option<crate::ops::pending::Relayed> {
    let key = match env.method()? {
        "notifications/progress" => "progressToken",
        "notifications/cancelled" => "requestId",
        _ => return None,
    };
    let params = RawObject::from_raw(env.params()?).ok()?;
    // Gateway ids are strings; a number names something else.
    let id = params.get_str(key)?;
    let relayed = front.ops.pending.relayed(&id, session_id)?;
    (key == "requestId" || relayed.progress_token.is_some()).then_some(relayed)
}

/// Posts the client's notification `env` about a relayed backend request into that backend's
/// session, with the backend's own progress token or request id restored.
pub(super) async fn to_backend(
    front: &Front,
    parts: &Parts,
    ctx: &RequestContext,
    record: &SessionRecord,
    relayed: crate::ops::pending::Relayed,
    env: &Envelope<'_>,
) {
    let (Some(method), Some(config)) = (env.method(), ctx.vhost.backends.get(&relayed.backend))
    else {
        return;
    };
    let mut params = env
        .params()
        .and_then(|p| RawObject::from_raw(p).ok())
        .unwrap_or_default();
    if method == "notifications/progress" {
        let Some(token) = relayed
            .progress_token
            .and_then(|t| RawValue::from_string(t).ok())
        else {
            return;
        };
        params.set_raw("progressToken", token);
    } else {
        params.set_json("requestId", &relayed.upstream_id);
    }
    let message = mcp_core::encode_notification(method, Some(&params.to_raw()));
    let caps = RawValue::from_string(record.client_capabilities.clone())
        .unwrap_or_else(|_| empty_object());
    let target = crate::upstream::Target::of_session(
        &relayed.backend,
        config,
        &parts.headers,
        &ctx.principal,
        &caps,
    );
    if let Err(e) = front
        .ops
        .upstream
        .post_to_session(&target, &relayed.session, message)
        .await
    {
        tracing::info!(backend = %relayed.backend, error = %e, "could not pass on a client's notification");
    }
}

/// Passes a client's `notifications/progress` for a linked backend's request (stdio process,
/// HTTP+SSE connection) it was relayed to the link, under the backend's own token; `false` when
/// the notification is about no such request waiting on this node.
pub(super) fn to_link(front: &Front, session_id: &str, env: &Envelope<'_>) -> bool {
    if env.method() != Some("notifications/progress") {
        return false;
    }
    let Some(mut params) = env
        .params()
        .and_then(|p| RawObject::from_raw(p).ok())
        .map(RawObject::into_owned)
    else {
        return false;
    };
    let Some(progress) = params
        .get_str("progressToken")
        .and_then(|token| front.ops.pending.link_progress(&token, session_id))
    else {
        return false;
    };
    let Ok(token) = RawValue::from_string(progress.token) else {
        return false;
    };
    params.set_raw("progressToken", token);
    progress.link.send(mcp_core::encode_notification(
        "notifications/progress",
        Some(&params.to_raw()),
    ));
    true
}

/// The client's whole answer as JSON text (result or error), for the gateway's own requests.
pub(super) fn env_bytes(env: &Envelope<'_>) -> String {
    match (env.result(), env.error_raw()) {
        (Some(result), _) => format!("{{\"result\":{}}}", result.get()),
        (None, Some(error)) => format!("{{\"error\":{}}}", error.get()),
        (None, None) => "{}".to_owned(),
    }
}

/// A client's answer to a relayed backend request: back to the backend under its own id.
pub(super) async fn answer_backend(
    front: &Arc<Front>,
    parts: &Parts,
    ctx: &RequestContext,
    record: &SessionRecord,
    session_id: &str,
    env: &Envelope<'_>,
) -> Response<McpBody> {
    let unknown = || {
        respond::error(
            StatusCode::BAD_REQUEST,
            None,
            &ErrorObject::invalid_request("Response to an unknown or expired request"),
        )
    };
    let Some(RequestId::String(id)) = env.id() else {
        return unknown();
    };
    let Some(pending) = front.ops.pending.take(id, session_id) else {
        return unknown();
    };
    // The relayed request's record: the client's answer settles it, unless delivering the
    // answer fails first.
    let audit = ctx.audit.as_ref();
    if let Some(audit) = audit {
        let asked = &pending.asked;
        audit.server_request(asked.method.as_deref(), asked.backend.as_deref());
    }
    let settle = || {
        if let Some(audit) = audit {
            audit.settle_with(env);
        }
    };
    let (backend, upstream_id, upstream_session) = match pending.route {
        crate::ops::pending::Route::Local(answer) => {
            // An MRTR input request the gateway asked on a modern backend's behalf.
            let _ = answer.send(bytes::Bytes::copy_from_slice(env_bytes(env).as_bytes()));
            settle();
            return respond::accepted();
        }
        crate::ops::pending::Route::Remote { node } => {
            settle();
            return pass_on(front, &node, session_id, id, env).await;
        }
        crate::ops::pending::Route::Backend {
            backend,
            upstream_id,
            session,
        } => (backend, upstream_id, session),
    };
    let Some(config) = ctx.vhost.backends.get(&backend) else {
        return unknown();
    };
    let message = match (env.result(), env.error()) {
        (Some(result), _) => mcp_core::encode_result(&upstream_id, result),
        (None, Some(error)) => mcp_core::encode_error(Some(&upstream_id), &error),
        (None, None) => return unknown(),
    };
    let caps = RawValue::from_string(record.client_capabilities.clone())
        .unwrap_or_else(|_| empty_object());
    let target = crate::upstream::Target::of_session(
        &backend,
        config,
        &parts.headers,
        &ctx.principal,
        &caps,
    );
    if let Err(e) = front
        .ops
        .upstream
        .post_to_session(&target, &upstream_session, message)
        .await
    {
        tracing::info!(backend = %backend, error = %e, "could not deliver a client's answer");
        if let Some(audit) = audit {
            audit.transport_error();
        }
        return respond::error(
            StatusCode::BAD_GATEWAY,
            None,
            &ErrorObject::internal(format!("Backend {backend} failed: {e}")),
        );
    }
    settle();
    respond::accepted()
}

/// `notifications/cancelled` for a call this node does not run: it may run on another node,
/// told over the node bus when there is one (feature `redis`).
#[cfg_attr(not(feature = "redis"), allow(unused_variables))]
pub(super) async fn cancel_elsewhere(front: &Front, key: (String, String)) {
    #[cfg(feature = "redis")]
    if let Some(bus) = &front.bus {
        let (session, request) = key;
        let cancel = crate::front::bus::BusMessage::Cancel { session, request };
        bus.publish("all", &cancel).await;
    }
}

/// A client's answer to a request another node asked (bridged MRTR input): passed on over the
/// node bus when there is one (feature `redis`).
#[cfg_attr(not(feature = "redis"), allow(unused_variables))]
pub(super) async fn pass_on(
    front: &Front,
    node: &str,
    session_id: &str,
    id: &str,
    env: &Envelope<'_>,
) -> Response<McpBody> {
    #[cfg(feature = "redis")]
    if let Some(bus) = &front.bus {
        let message = crate::front::bus::BusMessage::Answer {
            session: session_id.to_owned(),
            id: id.to_owned(),
            answer: env_bytes(env),
        };
        return if bus.publish(node, &message).await {
            respond::accepted()
        } else {
            respond::error(
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                &ErrorObject::internal("Node bus unavailable"),
            )
        };
    }
    respond::error(
        StatusCode::BAD_REQUEST,
        None,
        &ErrorObject::invalid_request(
            "Response to a request of another gateway node (no node bus configured)",
        ),
    )
}
