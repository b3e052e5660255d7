//! `initialize` of a legacy (2025) client: every backend is brought up concurrently under the
//! fan-out deadline, capabilities are merged, and the downstream session is minted.
//!
//! Legacy backends join through the caller's upstream session (shared per principal, backend and
//! client capability set, see the upstream module); modern backends need none and are asked
//! `server/discover`. A backend that fails is recorded unavailable, and `initialize` still
//! succeeds with the others (it is retried lazily on use).

use futures_util::future::join_all;
use mcp_core::{Era, ErrorObject, ProtocolVersion, RawObject};
use serde_json::{Map, Value};

use crate::front::Front;
use crate::ops::discover::merge_capabilities;
use crate::ops::scope::{BackendFailure, Scope};
use crate::ops::task_id::TASKS_EXTENSION;
use crate::session::{BackendEra, BackendSession, SessionRecord};

/// A 2025 client's capabilities as the gateway passes them on: without the tasks extension (see
/// [`initialize`]), so no backend answers it with a task.
pub(crate) fn without_tasks(
    caps: &serde_json::value::RawValue,
) -> Box<serde_json::value::RawValue> {
    let Ok(mut obj) = RawObject::from_raw(caps) else {
        return caps.to_owned();
    };
    let Some(mut extensions) = obj
        .get("extensions")
        .and_then(|e| RawObject::from_raw(e).ok())
    else {
        return caps.to_owned();
    };
    if !extensions.remove(TASKS_EXTENSION) {
        return caps.to_owned();
    }
    if extensions.keys().next().is_some() {
        let raw = extensions.to_raw();
        obj.set_raw("extensions", raw);
    } else {
        obj.remove("extensions");
    }
    obj.to_raw()
}

/// The version the gateway answers a legacy client with: the client's own when the gateway
/// speaks it, else the newest legacy revision. 2024-11-05 is the revision of the HTTP+SSE
/// transport, so only a client of the SSE bridge (`sse_transport`) gets it.
pub(crate) fn negotiate(requested: Option<&str>, sse_transport: bool) -> ProtocolVersion {
    requested
        .and_then(|v| v.parse::<ProtocolVersion>().ok())
        .filter(|v| v.era() == Era::Legacy && (sse_transport || *v != ProtocolVersion::V2024_11_05))
        .unwrap_or(ProtocolVersion::LATEST_LEGACY)
}

struct Joined {
    entry: BackendSession,
    capabilities: Value,
    instructions: Option<String>,
}

async fn join_backend(
    scope: &Scope<'_>,
    name: &str,
    config: &mcp_config_store::BackendConfig,
) -> Result<Joined, BackendFailure> {
    let target = scope.target(name, config);
    let deadline = scope.fanout_deadline(config);
    let description = tokio::time::timeout(deadline, scope.ops.upstream.describe(&target))
        .await
        .map_err(|_| BackendFailure::Deadline(deadline))?
        .map_err(BackendFailure::Upstream)?;
    let text = std::str::from_utf8(&description.result).unwrap_or("{}");
    let result = RawObject::parse(text).unwrap_or_default();
    let entry = match (description.era, &description.session) {
        (Era::Legacy, Some(session)) => {
            scope.ops.upstream.attach(&target, &session.url);
            BackendSession {
                name: name.to_owned(),
                era: Some(BackendEra::Legacy),
                upstream_session_id: session
                    .id
                    .as_ref()
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                version: Some(session.version.clone()),
                url: Some(session.url.as_str().to_owned()),
            }
        }
        _ => BackendSession {
            name: name.to_owned(),
            era: Some(BackendEra::Modern),
            upstream_session_id: None,
            version: Some(ProtocolVersion::LATEST.as_str().to_owned()),
            url: None,
        },
    };
    Ok(Joined {
        entry,
        capabilities: result.get_as("capabilities").unwrap_or(Value::Null),
        instructions: result.get_str("instructions"),
    })
}

/// Retries, lazily, the backends a session recorded unavailable (failed at initialize, or
/// cleaned up after an ambiguous call): those that answer now join the session record.
pub(crate) async fn revive(
    front: &Front,
    scope: &Scope<'_>,
    record: &SessionRecord,
    session_id: &str,
) {
    let missing: Vec<&str> = record
        .backends
        .iter()
        .filter(|b| !b.is_available())
        .map(|b| b.name.as_str())
        .collect();
    if missing.is_empty() {
        return;
    }
    let joined = join_all(missing.iter().filter_map(|name| {
        let (name, config) = scope.ctx.vhost.backends.get_key_value(*name)?;
        Some(async move { join_backend(scope, name, config).await })
    }))
    .await;
    let revived: Vec<BackendSession> = joined
        .into_iter()
        .filter_map(Result::ok)
        .map(|j| j.entry)
        .collect();
    if revived.is_empty() {
        return;
    }
    let mut updated = record.clone();
    for entry in revived {
        if let Some(slot) = updated.backends.iter_mut().find(|b| b.name == entry.name) {
            *slot = entry;
        }
    }
    match front.sessions.update(session_id, updated).await {
        // The principal's records hold their budget: the backends stay unrecorded, and are
        // joined again (their upstream sessions are kept apart, in their own budget).
        Err(e @ crate::session::SessionStoreError::Limit(_)) => {
            tracing::debug!(error = %e, "a revived backend is not recorded");
        }
        Err(e) => tracing::warn!(error = %e, "session store failure while reviving backends"),
        Ok(_) => {}
    }
}

/// What `initialize` produced: the session record and the `InitializeResult`.
pub(crate) struct Initialized {
    pub(crate) record: SessionRecord,
    pub(crate) result: RawObject<'static>,
}

/// Brings up every backend and builds the session record and the result.
pub(crate) async fn initialize(
    scope: &Scope<'_>,
    params: &RawObject<'_>,
    sse_transport: bool,
) -> Result<Initialized, ErrorObject> {
    let version = negotiate(params.get_str("protocolVersion").as_deref(), sse_transport);
    let backends = &scope.ctx.vhost.backends;
    let joined = join_all(
        backends
            .iter()
            .map(|(name, config)| async move { (name, join_backend(scope, name, config).await) }),
    )
    .await;
    let mut capabilities = Map::new();
    let mut instructions = Vec::new();
    if let Some(own) = &scope.ops.instructions {
        instructions.push(own.clone());
    }
    let mut entries = Vec::with_capacity(joined.len());
    for (name, outcome) in joined {
        match outcome {
            Ok(joined) => {
                merge_capabilities(&mut capabilities, &joined.capabilities);
                if let Some(text) = joined.instructions.filter(|t| !t.trim().is_empty()) {
                    instructions.push(format!("## {name}\n{text}"));
                }
                entries.push(joined.entry);
            }
            Err(failure) => {
                tracing::warn!(backend = %name, reason = %failure.reason(), "backend unavailable at initialize");
                entries.push(BackendSession {
                    name: name.clone(),
                    era: None,
                    upstream_session_id: None,
                    version: None,
                    url: None,
                });
            }
        }
    }
    // The gateway itself answers `ping` and `logging/setLevel` for every session.
    capabilities.insert("logging".to_owned(), Value::Object(Map::new()));
    // The 2026-07-28 tasks extension is not bridged to 2025 clients (nor their experimental
    // tasks to 2026 backends): a task they could not follow up must never reach them.
    if let Some(Value::Object(extensions)) = capabilities.get_mut("extensions") {
        extensions.remove(TASKS_EXTENSION);
        if extensions.is_empty() {
            capabilities.remove("extensions");
        }
    }
    let mut result = RawObject::new();
    result.set_str("protocolVersion", version.as_str());
    result.set_json("capabilities", &capabilities);
    result.set_borrowed("serverInfo", &scope.ops.server_info);
    if !instructions.is_empty() {
        result.set_str("instructions", &instructions.join("\n\n"));
    }
    let record = SessionRecord {
        issuer: scope.ctx.principal.issuer().to_owned(),
        subject: scope.ctx.principal.subject().to_owned(),
        vhost: scope.ctx.vhost_id.as_str().to_owned(),
        protocol_version: version.as_str().to_owned(),
        client_capabilities: scope.client_caps.get().to_owned(),
        log_level: None,
        backends: entries,
        subscriptions: Vec::new(),
        created_at_ms: Some(crate::telemetry::unix_millis()),
    };
    Ok(Initialized {
        record,
        result: result.into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tasks_extension_is_not_passed_on_for_2025_clients() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).expect("raw");
        let caps = raw(r#"{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#);
        assert_eq!(without_tasks(&caps).get(), r#"{"elicitation":{}}"#);
        let other = raw(r#"{"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{}}}"#);
        assert_eq!(without_tasks(&other).get(), r#"{"extensions":{"x/y":{}}}"#);
        let plain = raw(r#"{"roots":{}}"#);
        assert_eq!(without_tasks(&plain).get(), r#"{"roots":{}}"#);
    }

    #[test]
    fn negotiation_echoes_supported_legacy_versions() {
        let streamable = |v| negotiate(v, false);
        assert_eq!(streamable(Some("2025-06-18")), ProtocolVersion::V2025_06_18);
        assert_eq!(streamable(Some("2025-03-26")), ProtocolVersion::V2025_03_26);
        assert_eq!(streamable(Some("2099-01-01")), ProtocolVersion::V2025_11_25);
        assert_eq!(streamable(Some("2026-07-28")), ProtocolVersion::V2025_11_25);
        assert_eq!(streamable(Some("2024-11-05")), ProtocolVersion::V2025_11_25);
        assert_eq!(streamable(None), ProtocolVersion::V2025_11_25);
        // Over the SSE bridge, the HTTP+SSE transport's own revision is spoken too.
        assert_eq!(
            negotiate(Some("2024-11-05"), true),
            ProtocolVersion::V2024_11_05
        );
        assert_eq!(
            negotiate(Some("2026-07-28"), true),
            ProtocolVersion::V2025_11_25
        );
    }
}
