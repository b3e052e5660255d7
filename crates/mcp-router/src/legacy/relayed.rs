//! A 2025 client's notifications about a backend's request the gateway relayed to it:
//! `notifications/progress` for the request's progress token and `notifications/cancelled` naming
//! its id (both the sealed gateway id, see [`crate::pending`]) go into the asking backend's session
//! with the backend's own token and id; for a request a linked backend (stdio process, HTTP+SSE
//! connection) asked, the client's progress goes to the link under the backend's own token.

use http::request::Parts;
use mcp_core::{Envelope, RawObject};
use serde_json::value::RawValue;

use super::empty_object;
use crate::context::RequestContext;
use crate::router::RouterInner;
use crate::session::SessionRecord;

/// The backend request a client's `notifications/progress` (by its `progressToken`) or
/// `notifications/cancelled` (by its `requestId`) is about, when the gateway relayed it to this
/// session (see [`crate::pending`]); `None` for anything else, e.g. the client cancelling its own
/// call.
pub(super) fn backend_request(
    inner: &RouterInner,
    session_id: &str,
    env: &Envelope<'_>,
) -> Option<crate::pending::Relayed> {
    let key = match env.method()? {
        "notifications/progress" => "progressToken",
        "notifications/cancelled" => "requestId",
        _ => return None,
    };
    let params = RawObject::from_raw(env.params()?).ok()?;
    // Gateway ids are strings; a number names something else.
    let id = params.get_str(key)?;
    let relayed = inner.pending.relayed(&id, session_id)?;
    (key == "requestId" || relayed.progress_token.is_some()).then_some(relayed)
}

/// Posts the client's notification `env` about a relayed backend request into that backend's
/// session, with the backend's own progress token or request id restored.
pub(super) async fn to_backend(
    inner: &RouterInner,
    parts: &Parts,
    ctx: &RequestContext,
    record: &SessionRecord,
    relayed: crate::pending::Relayed,
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
    if let Err(e) = inner
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
pub(super) fn to_link(inner: &RouterInner, session_id: &str, env: &Envelope<'_>) -> bool {
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
        .and_then(|token| inner.pending.link_progress(&token, session_id))
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
