//! One HTTP request to the endpoint: the browser origin checked, the body read within its
//! limit, the JSON-RPC envelope parsed, the server span opened, and the message served by its
//! era's engine ([`legacy`] for 2025 sessions, [`modern`] for 2026-07-28 requests).

use std::sync::Arc;

use bytes::Bytes;
use http::{Method as HttpMethod, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use mcp_core::{Envelope, ErrorObject, MessageKind};
use opentelemetry::context::FutureExt as _;

use super::respond::{self, JsonRpcErrorCode};
use super::{Front, legacy, modern};
use crate::audit;
use crate::body::{BoxError, McpBody};
use crate::telemetry::{self, ServerOp};

/// Serves one request.
pub(crate) async fn serve<B>(front: Arc<Front>, req: Request<B>) -> Response<McpBody>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    #[cfg(feature = "redis")]
    front.ensure_listening();
    let (mut parts, body) = req.into_parts();
    if let Err(refusal) = front.hops.check(&parts.headers) {
        return respond::loop_detected(refusal);
    }
    if let Some(origin) = parts.headers.get(header::ORIGIN)
        && !front.origins.allows(origin)
    {
        return respond::error(
            StatusCode::FORBIDDEN,
            None,
            &ErrorObject::invalid_request("Origin not allowed"),
        );
    }
    if parts.method != HttpMethod::POST {
        if parts
            .headers
            .contains_key(mcp_core::headers::MCP_SESSION_ID)
        {
            return Box::pin(legacy::serve(&front, &parts, None)).await;
        }
        return respond::method_not_allowed(
            "Only POST is served here without an Mcp-Session-Id (2025 sessions may GET or DELETE)",
        );
    }
    let bytes = match Limited::new(body, front.max_body_bytes).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return respond::error(
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                &ErrorObject::invalid_request("Request body too large"),
            );
        }
        Err(_) => {
            return respond::error(
                StatusCode::BAD_REQUEST,
                None,
                &ErrorObject::parse_error("Could not read the request body"),
            );
        }
    };
    let env = match Envelope::parse(&bytes) {
        Ok(env) => env,
        Err(e) => return respond::error(StatusCode::BAD_REQUEST, None, &e.to_error_object()),
    };
    let op = ServerOp::start(
        env.method(),
        env.id(),
        env.params(),
        &parts.headers,
        parts
            .extensions
            .get::<mcp_core::VirtualHostId>()
            .map(mcp_core::VirtualHostId::as_str),
    );
    let audit = start_audit(&front, &mut parts, &env, bytes.len(), &op);
    let served = serve_message(&front, &parts, &env);
    let mut response = match op.context() {
        Some(cx) => served.with_context(cx.clone()).await,
        None => served.await,
    };
    let error = response
        .extensions()
        .get::<JsonRpcErrorCode>()
        .map(|code| telemetry::error_type(code.0))
        .or_else(|| {
            let status = response.status();
            (status.is_client_error() || status.is_server_error())
                .then(|| status.canonical_reason().unwrap_or("http_error"))
        });
    response.extensions_mut().insert(op.operation().clone());
    op.finish(error);
    match audit {
        Some(handle) => {
            let code = response.extensions().get::<JsonRpcErrorCode>().map(|c| c.0);
            handle.head(response.status().as_u16(), code);
            response.map(|body| audit::audited(body, handle))
        }
        None => response,
    }
}

/// Starts the audit record of the message (with an audit trail), put in the request's
/// extensions for the operations to annotate; and names the message's trace on the current
/// `tracing` span (the gateway's `request` span declares a `trace_id` field, so that every log
/// line of the request carries it): the server span's trace, else (with an audit trail) the
/// `_meta` or header `traceparent`'s.
fn start_audit(
    front: &Front,
    parts: &mut http::request::Parts,
    env: &Envelope<'_>,
    bytes_in: usize,
    op: &ServerOp,
) -> Option<audit::AuditHandle> {
    let span_trace_id = op.trace_id();
    let (handle, trace_id) = match &front.audit {
        Some(audit) => {
            let started = audit::Started {
                parts,
                env,
                bytes_in,
                legacy: is_legacy(parts, env),
                span_trace_id,
            };
            match audit.start(&started) {
                Some((handle, trace_id)) => (Some(handle), trace_id),
                None => (None, started.span_trace_id),
            }
        }
        None => (None, span_trace_id),
    };
    if let Some(trace_id) = trace_id {
        tracing::Span::current().record("trace_id", trace_id.as_str());
    }
    if let Some(handle) = &handle {
        parts.extensions.insert(handle.clone());
    }
    handle
}

/// Serves one parsed message in its era's engine.
async fn serve_message(
    front: &Arc<Front>,
    parts: &http::request::Parts,
    env: &Envelope<'_>,
) -> Response<McpBody> {
    // The engines' futures are boxed: held inline they would make every request's future as
    // large as the largest of them, copied in full on each move before it is first polled. The
    // box is itself a copy of the whole future, so the engines keep theirs small by boxing
    // their rare, large branches where they await them (see the test below).
    if is_legacy(parts, env) {
        return Box::pin(legacy::serve(front, parts, Some(env))).await;
    }
    match env.kind() {
        MessageKind::Notification => respond::accepted(),
        MessageKind::Response | MessageKind::Error => respond::error(
            StatusCode::BAD_REQUEST,
            None,
            &ErrorObject::invalid_request("Clients must not POST responses to this endpoint"),
        ),
        MessageKind::Request => {
            let Some(id) = env.id().cloned() else {
                return respond::error(
                    StatusCode::BAD_REQUEST,
                    None,
                    &ErrorObject::invalid_request("Missing id"),
                );
            };
            Box::pin(modern::serve(front, parts, env, &id)).await
        }
    }
}

/// A 2025-era request: a session id, an `initialize` that does not declare 2026-07-28 (in
/// `_meta` or `MCP-Protocol-Version`: that revision removed `initialize`, so such a request gets
/// the modern engine's 404 `-32601`), or a body without the 2026-07-28 `_meta` protocol version
/// whose `MCP-Protocol-Version` is absent or a 2025 revision (a 2025 client that lost its session
/// is then told it needs one, instead of being told about 2026-07-28 headers).
fn is_legacy(parts: &http::request::Parts, env: &Envelope<'_>) -> bool {
    use mcp_core::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
    if parts.headers.contains_key(MCP_SESSION_ID) {
        return true;
    }
    let header_era = parts.headers.get(MCP_PROTOCOL_VERSION).map(|version| {
        version
            .to_str()
            .ok()
            .and_then(|v| v.parse::<mcp_core::ProtocolVersion>().ok())
            .map(|v| v.era())
    });
    // A 2026-07-28 header makes the request modern whatever its body says, so the body's
    // `_meta` is only scanned when the header leaves the era open (one pass over `params`
    // fewer on every 2026-07-28 request).
    if header_era == Some(Some(mcp_core::Era::Modern)) || has_modern_meta(env) {
        return false;
    }
    match header_era {
        None => true,
        Some(era) if env.method() == Some("initialize") => era != Some(mcp_core::Era::Modern),
        Some(era) => era == Some(mcp_core::Era::Legacy),
    }
}

/// Whether `params._meta` has the 2026-07-28 protocol version key. Read with a visitor that only
/// looks at that member: every request pays for this check, and collecting the params (as the
/// engines do later) would cost several times more.
fn has_modern_meta(env: &Envelope<'_>) -> bool {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        // Present with any value, `null` included; the engine validates it.
        #[serde(
            rename = "io.modelcontextprotocol/protocolVersion",
            default,
            deserialize_with = "present"
        )]
        version: bool,
    }
    fn present<'de, D: serde::Deserializer<'de>>(value: D) -> Result<bool, D::Error> {
        <serde::de::IgnoredAny as serde::Deserialize>::deserialize(value).map(|_| true)
    }
    env.params()
        .and_then(|p| serde_json::from_str::<Params>(p.get()).ok())
        .and_then(|p| p.meta)
        .is_some_and(|m| m.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy(session: bool, header: Option<&str>, method: &str, meta: bool) -> bool {
        let meta = if meta {
            r#","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#
        } else {
            ""
        };
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}"{meta}}}"#);
        let mut request = http::Request::builder();
        if session {
            request = request.header("mcp-session-id", "s");
        }
        if let Some(version) = header {
            request = request.header("mcp-protocol-version", version);
        }
        let (parts, ()) = request.body(()).expect("request").into_parts();
        is_legacy(&parts, &Envelope::parse(body.as_bytes()).expect("envelope"))
    }

    #[test]
    fn the_era_is_the_session_then_a_modern_header_or_meta_then_the_header() {
        for method in ["tools/call", "initialize"] {
            for meta in [false, true] {
                assert!(legacy(true, Some("2026-07-28"), method, meta), "{method}");
                assert!(!legacy(false, Some("2026-07-28"), method, meta), "{method}");
                assert!(!legacy(false, Some("2025-06-18"), method, true), "{method}");
                assert!(!legacy(false, Some("1999-01-01"), method, true), "{method}");
                assert!(!legacy(false, None, method, true), "{method}");
            }
            assert!(legacy(false, None, method, false), "{method}");
            assert!(legacy(false, Some("2025-06-18"), method, false), "{method}");
        }
        // An unknown version: a 2025 client's `initialize` negotiates, anything else is sent to
        // the modern engine to be told which versions there are.
        assert!(legacy(false, Some("1999-01-01"), "initialize", false));
        assert!(!legacy(false, Some("1999-01-01"), "tools/call", false));
    }

    fn modern_meta(body: &str) -> bool {
        has_modern_meta(&Envelope::parse(body.as_bytes()).expect("envelope"))
    }

    #[test]
    fn modern_meta_is_the_protocol_version_member_of_params_meta() {
        let with = |meta: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"cursor":"c","_meta":{meta},"x":[{{"_meta":1}}]}}}}"#
            )
        };
        assert!(modern_meta(&with(
            r#"{"a":[1,{"b":2}],"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#
        )));
        assert!(modern_meta(&with(
            r#"{"io.modelcontextprotocol/protocolVersion":null}"#
        )));
        assert!(!modern_meta(&with(r#"{"progressToken":1}"#)));
        assert!(!modern_meta(&with(
            r#"{"a":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#
        )));
        assert!(!modern_meta(&with(
            r#""io.modelcontextprotocol/protocolVersion""#
        )));
        assert!(!modern_meta(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#
        ));
        assert!(!modern_meta(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
    }
}

/// The engines' futures: their sizes, since each request copies one in full into its box.
#[cfg(test)]
mod future_sizes {
    use super::*;
    use mcp_core::RequestId;

    /// The size of the future `engine` returns, without building one.
    fn future_size<A, R: Future>(_: impl FnOnce(A) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// Before the rare branches were boxed where they are awaited, these futures were 11,008
    /// and 11,320 bytes with every feature (the node-bus forward of a parked call's retry and a
    /// session's GET stream were inlined in every call's), 4,680 and 4,992 without; now 3,152
    /// and at most 3,048. The bound fails when a large branch is inlined again, not when the
    /// compiler moves a field.
    #[test]
    fn the_engines_futures_stay_small() {
        type Modern = (
            &'static Arc<Front>,
            &'static http::request::Parts,
            &'static Envelope<'static>,
            &'static RequestId,
        );
        type Legacy = (
            &'static Arc<Front>,
            &'static http::request::Parts,
            Option<&'static Envelope<'static>>,
        );
        let modern =
            future_size(|(front, parts, env, id): Modern| modern::serve(front, parts, env, id));
        let legacy = future_size(|(front, parts, env): Legacy| legacy::serve(front, parts, env));
        assert!(
            modern <= 4096,
            "the 2026-07-28 engine's future is {modern} bytes"
        );
        assert!(legacy <= 4096, "the 2025 engine's future is {legacy} bytes");
    }
}
