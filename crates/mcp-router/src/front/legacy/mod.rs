//! The session engine for legacy (2025-03-26 … 2025-11-25) clients on the same endpoint.
//!
//! `initialize` mints a downstream `Mcp-Session-Id` bound to the principal (issuer + subject) and
//! the virtual host; the same id presented with another principal's token, or on another virtual
//! host, is unknown (404). Every later request needs the id (400 without, 404 when unknown or
//! ended). `MCP-Protocol-Version` is checked when present (absent means 2025-03-26).
//!
//! | request | handling |
//! |---|---|
//! | `ping` | answered by the gateway |
//! | `logging/setLevel` | stored in the session, answered by the gateway |
//! | list methods | fan-out and merge, as for modern clients |
//! | `tools/call`, `prompts/get`, `resources/read`, `completion/complete`, `resources/subscribe`, `resources/unsubscribe` | routed to the owning backend |
//! | `notifications/cancelled` | cancels the named call: its backend is told (legacy) or its upstream stream closed (modern), and no response follows |
//! | other `notifications/*` | accepted (202) |
//! | DELETE | ends the session (then 404) and every upstream session no other session of the caller uses |
//! | GET | the server-to-client stream: see [`stream`] |
//!
//! Backends are reached through the caller's shared upstream session per backend; a backend that
//! forgot its session (404) is re-initialised once and the call retried, transparently.

mod adopted;
pub(crate) use adopted::AdoptedRecords;
mod follow;
mod initialize;
mod relayed;
mod set_level;
mod stream;
mod subscriptions;

use std::sync::Arc;

use http::request::Parts;
use http::{HeaderValue, Method as HttpMethod, Response, StatusCode};
use mcp_core::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use mcp_core::{
    Envelope, Era, ErrorObject, MessageKind, Method, MethodKind, ProtocolVersion, RawObject,
    RequestId, encode_result,
};
use serde_json::value::RawValue;

use super::answer;
use super::{Front, respond};
use crate::body::McpBody;
use crate::context::{self, RequestContext};
use crate::ops::scope::Scope;
use crate::ops::{call, list};
use crate::session::SessionRecord;
use crate::upstream::empty_object;
use relayed::{answer_backend, cancel_elsewhere};
use set_level::{BRIDGED_LOG_LEVEL, set_level, with_log_level};
use subscriptions::{
    linked_backend, owned, owned_by_modern_backend, refused_subscription, track_subscription,
};

/// Serves a legacy request: a POST whose envelope is `env`, or a GET/DELETE (`env` is `None`).
pub(crate) async fn serve(
    front: &Arc<Front>,
    parts: &Parts,
    env: Option<&Envelope<'_>>,
) -> Response<McpBody> {
    let ctx = match context::extract(&parts.extensions, Era::Legacy) {
        Ok(ctx) => ctx,
        Err(error) => {
            return respond::error(StatusCode::BAD_REQUEST, env.and_then(|e| e.id()), &error);
        }
    };
    if let Some(env) = env
        && env.method() == Some("initialize")
        && !parts.headers.contains_key(MCP_SESSION_ID)
    {
        return initialize(front, parts, &ctx, env).await;
    }
    let id = env.and_then(|e| e.id());
    let Some(session_id) = parts
        .headers
        .get(MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok())
    else {
        return respond::error(
            StatusCode::BAD_REQUEST,
            id,
            &ErrorObject::invalid_request("Bad Request: missing Mcp-Session-Id header"),
        );
    };
    let record = match front.sessions.get(session_id).await {
        Ok(Some(record)) if record.belongs_to(&ctx.principal, &ctx.vhost_id) => record,
        Ok(_) => return session_not_found(id),
        Err(e) => {
            log_store_failure(&e, "session store failure");
            return respond::store_unavailable(id, "Session store unavailable".to_owned());
        }
    };
    if let Some(version) = parts.headers.get(MCP_PROTOCOL_VERSION) {
        let supported = version
            .to_str()
            .ok()
            .and_then(|v| v.parse::<ProtocolVersion>().ok())
            .is_some_and(|v| v.era() == Era::Legacy);
        if !supported {
            let requested = version.to_str().unwrap_or("");
            let error = ErrorObject::unsupported_protocol_version(
                &ProtocolVersion::supported_strings(Era::Legacy),
                requested,
            );
            return respond::error(StatusCode::BAD_REQUEST, id, &error);
        }
    }
    // A session's GET stream and its DELETE are boxed: their futures are large, and held inline
    // every POST's future would be as large, copied in full into its box (book:
    // docs/src/performance.md).
    match (&parts.method, env) {
        (&HttpMethod::DELETE, _) => Box::pin(end_session(front, parts, &ctx, session_id)).await,
        (&HttpMethod::POST, Some(env)) => {
            in_session(front, parts, &ctx, &record, session_id, env).await
        }
        (&HttpMethod::GET, _) => {
            Box::pin(stream::get_stream(front, parts, &ctx, &record, session_id)).await
        }
        _ => respond::method_not_allowed("POST, GET and DELETE are served for 2025 sessions"),
    }
}

/// Whether a session that negotiated `version` gets priming events: 2025-11-25 introduced them
/// (an SSE event with an id and no data first on every stream, GET and POST); earlier clients
/// never saw one and some would take an empty `data` for a malformed message.
pub(crate) fn primes_streams(version: &str) -> bool {
    version >= "2025-11-25"
}

/// Logs a session store failure: at warn, except an outage, whose cause the store logged at
/// warn already (the Redis store names the Redis error) and which repeats on every request.
fn log_store_failure(e: &crate::session::SessionStoreError, what: &'static str) {
    if matches!(e, crate::session::SessionStoreError::Unavailable) {
        tracing::debug!(error = %e, "{what}");
    } else {
        tracing::warn!(error = %e, "{what}");
    }
}

fn session_not_found(id: Option<&RequestId>) -> Response<McpBody> {
    respond::error(
        StatusCode::NOT_FOUND,
        id,
        &ErrorObject::invalid_request("Session not found"),
    )
}

async fn initialize(
    front: &Arc<Front>,
    parts: &Parts,
    ctx: &RequestContext,
    env: &Envelope<'_>,
) -> Response<McpBody> {
    let Some(id) = env.id() else {
        return respond::error(
            StatusCode::BAD_REQUEST,
            None,
            &ErrorObject::invalid_request("initialize must be a request"),
        );
    };
    let params = env
        .params()
        .and_then(|p| RawObject::from_raw(p).ok())
        .unwrap_or_default();
    if let Some(error) = params
        .get("capabilities")
        .and_then(crate::context::oversize_capabilities)
    {
        return respond::error(StatusCode::BAD_REQUEST, Some(id), &error);
    }
    let caps: Box<RawValue> = params
        .get("capabilities")
        .filter(|c| c.get().starts_with('{'))
        .map(initialize::without_tasks)
        .unwrap_or_else(empty_object);
    let scope = Scope {
        ops: &front.ops,
        ctx,
        headers: &parts.headers,
        client_caps: &caps,
        meta: None,
        client_meta: None,
        era: Era::Legacy,
        session_id: None,
    };
    let sse_transport = parts
        .extensions
        .get::<crate::front::sse_bridge::SseTransport>()
        .is_some();
    let initialized = match initialize::initialize(&scope, &params, sse_transport).await {
        Ok(initialized) => initialized,
        Err(error) => return respond::error(StatusCode::OK, Some(id), &error),
    };
    let session_id = match front.sessions.create(initialized.record).await {
        Ok(session_id) => session_id,
        Err(e) => {
            log_store_failure(&e, "cannot create a session");
            return respond::store_unavailable(
                Some(id),
                format!("Cannot create a session: {}", e.client_message()),
            );
        }
    };
    let mut res = respond::json(
        StatusCode::OK,
        encode_result(id, &initialized.result.to_raw()),
    );
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        res.headers_mut().insert(MCP_SESSION_ID, value);
    }
    res
}

/// The upstream URL a session record names for the backend configured as `config`: the
/// configured URL itself when the record names that one (nearly always; no parse per request),
/// else the recorded text parsed (a URL changed since the session began). `None` when nothing
/// is recorded or it does not parse.
pub(crate) fn recorded_url(
    config: &mcp_config_store::BackendConfig,
    recorded: Option<&str>,
) -> Option<url::Url> {
    let recorded = recorded?;
    match &config.url {
        Some(url) if url.as_str() == recorded => Some(url.clone()),
        _ => url::Url::parse(recorded).ok(),
    }
}

/// book: docs/src/failure-modes.md: a call on a name that several backends expose is refused, and the session's
/// backend entries are cleaned up: each is released (its upstream session ends when no other
/// session of the caller uses it) and recorded unavailable, so the next call re-establishes it.
async fn clean_up_backends(front: &Front, scope: &Scope<'_>, session_id: &str) {
    let Ok(Some(record)) = front.sessions.get(session_id).await else {
        return;
    };
    let mut cleaned = (*record).clone();
    for entry in &mut cleaned.backends {
        if let Some(config) = scope.ctx.vhost.backends.get(&entry.name)
            && let Some(url) = recorded_url(config, entry.url.as_deref())
        {
            scope
                .ops
                .upstream
                .release(&scope.target(&entry.name, config), &url)
                .await;
        }
        entry.era = None;
        entry.upstream_session_id = None;
        entry.url = None;
    }
    if let Err(e) = front.sessions.update(session_id, cleaned).await {
        tracing::warn!(error = %e, "session store failure while cleaning up backends");
    }
}

/// DELETE: ends the downstream session, and every upstream session no other downstream session
/// of this caller still uses.
async fn end_session(
    front: &Arc<Front>,
    parts: &Parts,
    ctx: &RequestContext,
    session_id: &str,
) -> Response<McpBody> {
    let record = match front.sessions.remove(session_id).await {
        Ok(record) => record,
        Err(crate::session::SessionStoreError::Limit(why)) => {
            return respond::error(
                StatusCode::TOO_MANY_REQUESTS,
                None,
                &ErrorObject::invalid_request(format!(
                    "Cannot end the session: {why} (it ends when it expires)"
                )),
            );
        }
        Err(e) => {
            log_store_failure(&e, "session store failure on DELETE");
            return respond::store_unavailable(None, "Session store unavailable".to_owned());
        }
    };
    // Its GET streams, replay buffers (and the SSE bridge session on them) go with it.
    front.session_ended(session_id);
    #[cfg(feature = "redis")]
    if let (Some(bus), Some(revocation)) = (&front.bus, front.sessions.revocation(session_id)) {
        // A sealed id cannot be invalidated: every node must refuse it.
        bus.publish("all", &crate::front::bus::BusMessage::Revoke(revocation))
            .await;
    }
    if let Some(record) = record {
        if let Some(created) = record.created_at_ms {
            crate::telemetry::server_session_ended(&record.protocol_version, created);
        }
        let caps = RawValue::from_string(record.client_capabilities.clone())
            .unwrap_or_else(|_| empty_object());
        let releases = record.backends.iter().filter_map(|entry| {
            let config = ctx.vhost.backends.get(&entry.name)?;
            let url = recorded_url(config, entry.url.as_deref())?;
            let caps = &caps;
            Some(async move {
                let target = crate::upstream::Target::of_session(
                    &entry.name,
                    config,
                    &parts.headers,
                    &ctx.principal,
                    caps,
                );
                front.ops.upstream.release(&target, &url).await;
            })
        });
        futures_util::future::join_all(releases).await;
    }
    let mut res = Response::new(McpBody::default());
    *res.status_mut() = StatusCode::OK;
    res
}

async fn in_session(
    front: &Arc<Front>,
    parts: &Parts,
    ctx: &RequestContext,
    record: &SessionRecord,
    session_id: &str,
    env: &Envelope<'_>,
) -> Response<McpBody> {
    // The rare branches' futures are boxed where they are awaited, so that every routed call's
    // future is not as large as the largest of them (book: docs/src/performance.md).
    if matches!(env.kind(), MessageKind::Response | MessageKind::Error) {
        return Box::pin(answer_backend(front, parts, ctx, record, session_id, env)).await;
    }
    if let Some(relayed) = relayed::backend_request(front, session_id, env) {
        // The client's progress for, or cancellation of, a backend's request it was relayed.
        Box::pin(relayed::to_backend(front, parts, ctx, record, relayed, env)).await;
        return respond::accepted();
    }
    if relayed::to_link(front, session_id, env) {
        return respond::accepted();
    }
    if env.method() == Some("notifications/cancelled") {
        let request_id = env
            .params()
            .and_then(|p| RawObject::from_raw(p).ok())
            .and_then(|p| p.get("requestId").map(|id| id.get().to_owned()));
        if let Some(request) = request_id {
            let key = (session_id.to_owned(), request);
            if !front.ops.inflight.cancel(&key) {
                Box::pin(cancel_elsewhere(front, key)).await;
            }
        }
        return respond::accepted();
    }
    let Some(id) = env.id() else {
        // Other notifications (initialized, roots/list_changed) are accepted.
        return respond::accepted();
    };
    let method_name = env.method().unwrap_or_default();
    let Some(method) = Method::from_name(method_name).filter(|m| m.exists_in(Era::Legacy)) else {
        return respond::error(
            StatusCode::OK,
            Some(id),
            &ErrorObject::method_not_found(method_name),
        );
    };
    let mut params = env
        .params()
        .and_then(|p| RawObject::from_raw(p).ok())
        .unwrap_or_default();
    // A 2025 server logs without being asked; a 2026-07-28 backend only when a request carries
    // a level: until the client sets one, its session asks for everything.
    let level = record.log_level.as_deref().unwrap_or(BRIDGED_LOG_LEVEL);
    let meta = with_log_level(params.get_borrowed("_meta"), Some(level));
    params.remove("_meta");
    let caps = RawValue::from_string(record.client_capabilities.clone())
        .unwrap_or_else(|_| empty_object());
    let scope = Scope {
        ops: &front.ops,
        ctx,
        headers: &parts.headers,
        client_caps: &caps,
        meta: meta.as_deref(),
        client_meta: None,
        era: Era::Legacy,
        session_id: Some(session_id),
    };
    if method != Method::Ping {
        let generation = front.ops.upstream.session_generation();
        if let Some(fingerprint) = front.adopted.first_sight(session_id, record, generation)
            && !adopt_recorded(&scope, record)
        {
            front.adopted.forget(fingerprint);
        }
        initialize::revive(front, &scope, record, session_id).await;
    }
    match method {
        Method::Ping => respond::json(StatusCode::OK, encode_result(id, &empty_object())),
        Method::LoggingSetLevel => {
            Box::pin(set_level(front, &scope, record, session_id, &params, id)).await
        }
        _ if method.kind() == MethodKind::List => match list::list(&scope, method, &params).await {
            Ok(result) => respond::json(StatusCode::OK, encode_result(id, &result.to_raw())),
            Err(error) => respond::error(StatusCode::OK, Some(id), &error),
        },
        Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
            if method == Method::ResourcesSubscribe {
                if let Some(error) = refused_subscription(front, record, &params) {
                    return respond::error(StatusCode::OK, Some(id), &error);
                }
                if !owned(&scope, &params) {
                    // Not kept: the routed call answers with the error naming the URI.
                    return routed(front, &scope, record, id, method, params).await;
                }
            }
            if let Err(error) =
                Box::pin(track_subscription(front, session_id, method, &params)).await
            {
                return respond::error(StatusCode::OK, Some(id), &error);
            }
            if let Some(link) = Box::pin(linked_backend(&scope, &params)).await
                && link.era == Era::Legacy
            {
                // A 2025 server behind a link takes the subscription itself; its updates come
                // back on the link to the GET streams of the sessions that subscribed (`stream`).
                if method == Method::ResourcesUnsubscribe && link.shared {
                    // Sessions of other principals may still follow the URI on this process:
                    // this session's updates stop here (its own list), the process's do not.
                    return respond::json(StatusCode::OK, encode_result(id, &empty_object()));
                }
                return routed(front, &scope, record, id, method, params).await;
            }
            if owned_by_modern_backend(&scope, record, &params) {
                // 2026-07-28 removed these methods: the session's GET stream follows the URI
                // through a `subscriptions/listen` to the backend instead (see `stream`).
                front.subscriptions_changed(session_id);
                return respond::json(StatusCode::OK, encode_result(id, &empty_object()));
            }
            routed(front, &scope, record, id, method, params).await
        }
        // The session was offered no `tasks`: a task it asks for anyway could never be
        // followed up (`tasks/*` is not routed for 2025 sessions), so the call is refused before
        // it runs.
        Method::ToolsCall if params.contains("task") => respond::error(
            StatusCode::OK,
            Some(id),
            &ErrorObject::invalid_params(
                "Task-augmented calls are not supported: this gateway offers no tasks to 2025 sessions",
            ),
        ),
        Method::ToolsCall
        | Method::PromptsGet
        | Method::ResourcesRead
        | Method::CompletionComplete => routed(front, &scope, record, id, method, params).await,
        _ => respond::error(
            StatusCode::OK,
            Some(id),
            &ErrorObject::method_not_found(method_name),
        ),
    }
}

/// A routed call of the session, answered on its stream.
async fn routed(
    front: &Arc<Front>,
    scope: &Scope<'_>,
    record: &SessionRecord,
    id: &RequestId,
    method: Method,
    params: RawObject<'_>,
) -> Response<McpBody> {
    let answer = call::targeted(scope, id, method, params).await;
    if let (call::Answer::Ambiguous(_), Some(session_id)) = (&answer, scope.session_id) {
        clean_up_backends(front, scope, session_id).await;
    }
    let primes = primes_streams(&record.protocol_version);
    answer::render(front, id, answer, Era::Legacy, primes).await
}

/// Continues the upstream sessions the record names, when this node holds none for the caller
/// yet (the session was created on another node, or before a restart): see
/// `Upstream::adopt`.
/// Returns false when a recorded backend is missing from the virtual host (a configuration
/// change not seen here yet): the record is adopted again on its next request.
fn adopt_recorded(scope: &Scope<'_>, record: &SessionRecord) -> bool {
    let mut complete = true;
    for entry in &record.backends {
        let (Some(crate::session::BackendEra::Legacy), Some(id), Some(version), Some(recorded)) = (
            entry.era,
            entry.upstream_session_id.as_deref(),
            entry.version.as_deref(),
            entry.url.as_deref(),
        ) else {
            continue;
        };
        let Some(config) = scope.ctx.vhost.backends.get(&entry.name) else {
            // An entry whose URL does not parse is skipped, not waited for.
            if url::Url::parse(recorded).is_ok() {
                complete = false;
            }
            continue;
        };
        if let Some(url) = recorded_url(config, Some(recorded)) {
            let target = scope.target(&entry.name, config);
            scope.ops.upstream.adopt(&target, &url, id, version);
        }
    }
    complete
}

#[cfg(test)]
mod tests {
    use super::recorded_url;
    use mcp_config_store::BackendConfig;

    #[test]
    fn a_recorded_url_is_the_configured_one_or_parsed() {
        let configured = url::Url::parse("http://127.0.0.1:9/mcp").expect("url");
        let config = BackendConfig::http(configured.clone());
        assert_eq!(
            recorded_url(&config, Some("http://127.0.0.1:9/mcp")),
            Some(configured)
        );
        // A replica's (or a since-changed) URL is parsed from the record.
        assert_eq!(
            recorded_url(&config, Some("http://127.0.0.1:10/mcp")).map(String::from),
            Some("http://127.0.0.1:10/mcp".to_owned())
        );
        assert_eq!(recorded_url(&config, Some("not a url")), None);
        assert_eq!(recorded_url(&config, None), None);
        assert_eq!(
            recorded_url(&BackendConfig::default(), Some("http://h/")).map(String::from),
            Some("http://h/".to_owned())
        );
    }
}
