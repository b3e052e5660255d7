//! A 2025 session's log level: `logging/setLevel` keeps it in the session record and sends it
//! to the legacy backends; modern backends get it on every request as `_meta`.

use http::{Response, StatusCode};
use mcp_core::{ErrorObject, RawObject, RequestId, encode_result};
use mcp_fallback::ToolHints;
use serde_json::value::RawValue;

use crate::body::McpBody;
use crate::front::{Front, respond};
use crate::log_level;
use crate::ops::scope::Scope;
use crate::session::SessionRecord;
use crate::upstream::empty_object;

/// The log level a 2025 session asks modern backends for before `logging/setLevel`.
pub(super) const BRIDGED_LOG_LEVEL: &str = "debug";

/// The session's `_meta` for upstream calls: the client's, plus the session's log level as the
/// 2026-07-28 `logLevel` (modern backends need it on every request to send log messages; legacy
/// backends never see `io.modelcontextprotocol/*` keys).
pub(super) fn with_log_level(
    meta: Option<&RawValue>,
    level: Option<&str>,
) -> Option<Box<RawValue>> {
    let Some(level) = level else {
        return meta.map(ToOwned::to_owned);
    };
    let mut obj = meta
        .and_then(|m| RawObject::from_raw(m).ok())
        .unwrap_or_default();
    obj.set_str(log_level::META_KEY, level);
    Some(obj.to_raw())
}

/// `logging/setLevel`: kept in the session (stamped on modern backends' requests) and sent to the
/// legacy backends (their upstream session is shared by the caller's sessions, so the last level
/// set wins there).
pub(super) async fn set_level(
    front: &Front,
    scope: &Scope<'_>,
    record: &SessionRecord,
    session_id: &str,
    params: &RawObject<'_>,
    id: &RequestId,
) -> Response<McpBody> {
    let Some(level) = params
        .get_str("level")
        .filter(|l| log_level::severity(l).is_some())
    else {
        return respond::error(
            StatusCode::OK,
            Some(id),
            &ErrorObject::invalid_params("Invalid log level"),
        );
    };
    let mut updated = record.clone();
    updated.log_level = Some(level.clone());
    match front.sessions.update(session_id, updated).await {
        Err(e @ crate::session::SessionStoreError::Limit(_)) => {
            let error = format!("Cannot keep the log level: {}", e.client_message());
            return respond::error(StatusCode::OK, Some(id), &ErrorObject::internal(error));
        }
        Err(e) => tracing::warn!(error = %e, "session store failure on setLevel"),
        Ok(_) => {}
    }
    let legacy = record
        .backends
        .iter()
        .filter(|b| b.era == Some(crate::session::BackendEra::Legacy))
        .filter_map(|b| scope.ctx.vhost.backends.get_key_value(&b.name));
    let sends = legacy.map(|(name, config)| {
        let level = level.clone();
        async move {
            let target = scope.target(name, config);
            let mut params = RawObject::new();
            params.set_str("level", &level);
            let call = crate::upstream::Call {
                method: "logging/setLevel",
                params,
                name: None,
                progress_token: None,
                hints: ToolHints::NONE,
                headers: None,
            };
            if let Err(e) = crate::ops::scope::final_response(scope, &target, &call, scope.fanout_deadline(config)).await {
                tracing::debug!(backend = %name, reason = %e.reason(), "logging/setLevel not applied upstream");
            }
        }
    });
    futures_util::future::join_all(sends).await;
    respond::json(StatusCode::OK, encode_result(id, &empty_object()))
}
