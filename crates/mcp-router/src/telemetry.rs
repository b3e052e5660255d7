//! OpenTelemetry spans and metrics after the semantic conventions for MCP (status Development):
//! a server span per downstream MCP message, a client span per upstream request, and the
//! `mcp.server.operation.duration`, `mcp.client.operation.duration` and
//! `mcp.client.session.duration` histograms. (`mcp.server.session.duration` is not recorded: a
//! downstream 2025 session may end on another node than the one that opened it, and its record
//! keeps no start time.)
//!
//! Spans are made only after [`enable_tracing`] (the gateway calls it once it installed a tracer
//! provider): until then no span, attribute or context is built, so a gateway without a collector
//! pays one atomic load per message. The metrics go to the process's `metrics` recorder either way
//! (handles are cached per label set, as the gateway's own request metrics are).
//!
//! Trace context: a downstream message's parent is `params._meta.traceparent`/`tracestate` when
//! present (the convention's recommendation), else the `traceparent`/`tracestate` HTTP headers.
//! The server span is the current OpenTelemetry context while the router serves the message; each
//! upstream request starts a client span under it and carries that span's context in its
//! `traceparent`/`tracestate` headers and its `params._meta`, so the client's trace goes on in
//! every backend. Attributes never hold tokens or argument values: names, the resource URI, ids
//! and the gateway's own facts only.
//!
//! Log lines: the trace id of a message ([`traceparent_trace_id`] of its trace context, or the
//! server span's) is recorded on the current `tracing` span's `trace_id` field (the gateway's
//! `request` span declares it), so that every line logged while the message is served names it.
//!
//! Why this file is long: the semantic conventions' attribute names, the span helpers and the
//! metric handles belong together, so that one place says what the gateway reports; a tenth of
//! the file is tests.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{OnceLock, PoisonError, RwLock};
use std::time::Instant;

use http::HeaderMap;
use metrics::Histogram;
use opentelemetry::global::{self, BoxedSpan, BoxedTracer};
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use serde_json::value::RawValue;

/// `mcp.server.operation.duration`, in Prometheus naming.
pub const SERVER_OPERATION_DURATION: &str = "mcp_server_operation_duration_seconds";
/// `mcp.client.operation.duration`, in Prometheus naming.
pub const CLIENT_OPERATION_DURATION: &str = "mcp_client_operation_duration_seconds";
/// `mcp.client.session.duration` (upstream 2025 sessions this node opened), in Prometheus naming.
pub const CLIENT_SESSION_DURATION: &str = "mcp_client_session_duration_seconds";
/// `mcp.server.session.duration` (downstream 2025 sessions, from `initialize` to the DELETE that
/// ended them), in Prometheus naming.
pub const SERVER_SESSION_DURATION: &str = "mcp_server_session_duration_seconds";

/// The span attribute naming the virtual host (the gateway's own).
pub const ATTR_VHOST: &str = "mcp_gateway.vhost";
/// The span attribute naming the backend of a client span.
pub const ATTR_BACKEND: &str = "mcp_gateway.backend";
/// The span attribute with a backend breaker's state when it refused the call (`open`).
pub const ATTR_BREAKER_STATE: &str = "mcp_gateway.breaker.state";
/// The span attribute listing the backends a fan-out left out.
pub const ATTR_DEGRADED: &str = "mcp_gateway.degraded_backends";

const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

static TRACER: OnceLock<BoxedTracer> = OnceLock::new();

/// Turns spans on, with the process's global tracer provider and text map propagator (which the
/// caller installed before). Idempotent; there is no turning them off.
pub fn enable_tracing() {
    let _ = TRACER.get_or_init(|| global::tracer("mcp-gateway"));
}

fn tracer() -> Option<&'static BoxedTracer> {
    TRACER.get()
}

/// Whether spans are made.
pub(crate) fn tracing_on() -> bool {
    TRACER.get().is_some()
}

/// The facts of one MCP message that name it in spans, metrics and the access log.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Operation {
    /// `mcp.method.name`: a method the gateway knows, or `other` (never the client's own text:
    /// it becomes a metric label).
    pub method: &'static str,
    /// The tool or prompt name (`gen_ai.tool.name` / `gen_ai.prompt.name`), when the method has one.
    pub target: Option<Box<str>>,
}

impl Operation {
    /// The span name: `{mcp.method.name} {target}`, or the method alone.
    pub fn span_name(&self) -> Cow<'static, str> {
        match &self.target {
            Some(target) => Cow::Owned(format!("{} {target}", self.method)),
            None => Cow::Borrowed(self.method),
        }
    }
}

/// The method as a bounded label: a known MCP method's name, else `other`.
pub(crate) fn method_label(method: Option<&str>) -> &'static str {
    method
        .and_then(mcp_core::Method::from_name)
        .map_or("other", mcp_core::Method::as_str)
}

/// What a downstream message says about itself, read from `params` with a visitor that only
/// looks at `name`, `uri` and the trace and version members of `_meta`.
#[derive(Default, serde::Deserialize)]
pub(crate) struct ParamFacts<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "protocolVersion")]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<MetaFacts<'a>>,
}

#[derive(Default, serde::Deserialize)]
struct MetaFacts<'a> {
    #[serde(borrow, default)]
    traceparent: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tracestate: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<Cow<'a, str>>,
}

impl<'a> ParamFacts<'a> {
    pub(crate) fn read(params: Option<&'a RawValue>) -> Self {
        params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default()
    }
}

/// Whether `method` names its target by `params.name` (tools and prompts).
fn named_target(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get")
}

/// The server side of one downstream message: its metric and, with tracing on, its span.
pub(crate) struct ServerOp {
    started: Instant,
    operation: Operation,
    protocol_version: Option<Box<str>>,
    cx: Option<Context>,
}

impl ServerOp {
    /// Starts the operation of a message with `method` and `params`, posted with `headers`.
    pub(crate) fn start(
        method: Option<&str>,
        id: Option<&mcp_core::RequestId>,
        params: Option<&RawValue>,
        headers: &HeaderMap,
        vhost: Option<&str>,
    ) -> Self {
        let label = method_label(method);
        let header = |name: http::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        // A 2026-07-28 request names its tool or prompt in `Mcp-Name` (the engine rejects one
        // that differs from the body). Without spans, `params` is only read for what the access
        // log shows and the headers do not say (a 2025 request's name, `initialize`'s version).
        let header_name = named_target(label)
            .then(|| header(mcp_core::headers::MCP_NAME))
            .flatten();
        let facts = if tracing_on()
            || label == "initialize"
            || (named_target(label) && header_name.is_none())
        {
            ParamFacts::read(params)
        } else {
            ParamFacts::default()
        };
        let target = if named_target(label) {
            facts.name.as_deref().or(header_name).map(Box::from)
        } else {
            None
        };
        let protocol_version: Option<Box<str>> = facts
            .meta
            .as_ref()
            .and_then(|m| m.protocol_version.as_deref())
            .or(header(mcp_core::headers::MCP_PROTOCOL_VERSION))
            .or(facts.protocol_version.as_deref())
            .map(Box::from);
        let operation = Operation {
            method: label,
            target,
        };
        let cx = tracer().map(|tracer| {
            let parent = parent_context(facts.meta.as_ref(), headers);
            let mut attributes = vec![KeyValue::new("mcp.method.name", label)];
            if let Some(version) = &protocol_version {
                attributes.push(KeyValue::new("mcp.protocol.version", version.to_string()));
            }
            if let Some(session) = header(mcp_core::headers::MCP_SESSION_ID) {
                attributes.push(KeyValue::new("mcp.session.id", session.to_owned()));
            }
            if let Some(id) = id {
                attributes.push(KeyValue::new("jsonrpc.request.id", id.to_string()));
            }
            push_target(&mut attributes, label, operation.target.as_deref());
            if let Some(uri) = facts.uri.as_deref()
                && label.starts_with("resources/")
            {
                attributes.push(KeyValue::new("mcp.resource.uri", uri.to_owned()));
            }
            attributes.push(KeyValue::new("network.transport", "tcp"));
            attributes.push(KeyValue::new("network.protocol.name", "http"));
            if let Some(vhost) = vhost {
                attributes.push(KeyValue::new(ATTR_VHOST, vhost.to_owned()));
            }
            let span = tracer
                .span_builder(operation.span_name())
                .with_kind(SpanKind::Server)
                .with_attributes(attributes)
                .start_with_context(tracer, &parent);
            parent.with_span(span)
        });
        Self {
            started: Instant::now(),
            operation,
            protocol_version,
            cx,
        }
    }

    /// The context to serve the message in (the server span), with tracing on.
    pub(crate) fn context(&self) -> Option<&Context> {
        self.cx.as_ref()
    }

    /// What names the operation.
    pub(crate) fn operation(&self) -> &Operation {
        &self.operation
    }

    /// The trace id of the server span (32 hex digits), with tracing on.
    pub(crate) fn trace_id(&self) -> Option<String> {
        let cx = self.cx.as_ref()?;
        let span = cx.span();
        let context = span.span_context();
        context.is_valid().then(|| context.trace_id().to_string())
    }

    /// Ends the span and records the duration; `error` is the `error.type` of a failed answer.
    pub(crate) fn finish(self, error: Option<&'static str>) {
        SERVER_METRICS.record(
            self.operation.method,
            self.protocol_version.as_deref(),
            error,
            self.started,
        );
        if let Some(cx) = self.cx {
            let span = cx.span();
            if let Some(error) = error {
                span.set_attribute(KeyValue::new("error.type", error.to_owned()));
                span.set_status(Status::error(error.to_owned()));
            }
            span.end();
        }
    }
}

fn push_target(attributes: &mut Vec<KeyValue>, method: &str, target: Option<&str>) {
    let Some(target) = target else {
        return;
    };
    match method {
        "tools/call" => {
            attributes.push(KeyValue::new("gen_ai.tool.name", target.to_owned()));
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        "prompts/get" => attributes.push(KeyValue::new("gen_ai.prompt.name", target.to_owned())),
        _ => {}
    }
}

/// The parent of a downstream message: its `_meta` trace context, else its HTTP headers'.
fn parent_context(meta: Option<&MetaFacts<'_>>, headers: &HeaderMap) -> Context {
    let from_meta = meta.and_then(|m| {
        m.traceparent.as_deref().map(|parent| {
            let mut carrier = HashMap::with_capacity(2);
            carrier.insert(TRACEPARENT.to_owned(), parent.to_owned());
            if let Some(state) = m.tracestate.as_deref() {
                carrier.insert(TRACESTATE.to_owned(), state.to_owned());
            }
            global::get_text_map_propagator(|p| p.extract(&carrier))
        })
    });
    match from_meta {
        Some(cx) if cx.span().span_context().is_valid() => cx,
        _ => global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers))),
    }
}

/// The trace id of a W3C `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`), when it is a
/// valid one (not all zeros): what the gateway's logs and audit records name a trace by.
pub fn traceparent_trace_id(traceparent: &str) -> Option<&str> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = hex(version, 2)
        && version != "ff"
        && (version != "00" || parts.next().is_none())
        && hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(parent, 16)
        && parent.bytes().any(|b| b != b'0')
        && hex(flags, 2);
    valid.then_some(trace)
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The client side of one upstream request: its metric and, with tracing on, its span (a child
/// of the current context, which is the downstream message's server span).
pub(crate) struct ClientOp {
    started: Instant,
    method: &'static str,
    span: Option<BoxedSpan>,
}

impl ClientOp {
    /// Starts the upstream request `method` (naming `name`) to `backend`.
    pub(crate) fn start(method: &str, name: Option<&str>, backend: &str) -> Self {
        let label = method_label(Some(method));
        let span = tracer().map(|tracer| {
            let target = named_target(label).then_some(name).flatten();
            let span_name = match target {
                Some(target) => Cow::Owned(format!("{label} {target}")),
                None => Cow::Borrowed(label),
            };
            let mut attributes = vec![
                KeyValue::new("mcp.method.name", label),
                KeyValue::new(ATTR_BACKEND, backend.to_owned()),
            ];
            push_target(&mut attributes, label, target);
            if let Some(uri) = name
                && label.starts_with("resources/")
            {
                attributes.push(KeyValue::new("mcp.resource.uri", uri.to_owned()));
            }
            tracer
                .span_builder(span_name)
                .with_kind(SpanKind::Client)
                .with_attributes(attributes)
                .start(tracer)
        });
        Self {
            started: Instant::now(),
            method: label,
            span,
        }
    }

    /// The context an upstream request is sent in: the client span under the current context.
    /// `None` with tracing off (then the client's own trace headers are passed on as they came).
    pub(crate) fn context(&mut self) -> Option<Context> {
        let span = self.span.take()?;
        Some(Context::current_with_span(span))
    }

    /// Records facts learnt on the way (the upstream request id, the backend's protocol version).
    pub(crate) fn annotate(cx: Option<&Context>, attributes: Vec<KeyValue>) {
        if let Some(cx) = cx {
            cx.span().set_attributes(attributes);
        }
    }

    /// Ends the span of `cx` and records the duration; `error` is the `error.type` of a failure.
    pub(crate) fn finish(self, cx: Option<&Context>, error: Option<&'static str>) {
        CLIENT_METRICS.record(self.method, None, error, self.started);
        if let Some(cx) = cx {
            let span = cx.span();
            if let Some(error) = error {
                span.set_attribute(KeyValue::new("error.type", error.to_owned()));
                span.set_status(Status::error(error.to_owned()));
            }
            span.end();
        }
    }
}

/// Adds an attribute to the current span (the server span while a message is served, a client
/// span while an upstream request is sent), with tracing on.
pub(crate) fn annotate_current(attribute: impl FnOnce() -> KeyValue) {
    if tracing_on() {
        Context::map_current(|cx| cx.span().set_attribute(attribute()));
    }
}

/// The current span's trace context as `traceparent`/`tracestate` pairs, with tracing on and a
/// valid span current.
pub(crate) fn current_trace_context() -> Option<Vec<(&'static str, String)>> {
    if !tracing_on() {
        return None;
    }
    Context::map_current(|cx| {
        if !cx.span().span_context().is_valid() {
            return None;
        }
        let mut carrier = Carrier::default();
        global::get_text_map_propagator(|p| p.inject_context(cx, &mut carrier));
        Some(carrier.0)
    })
}

#[derive(Default)]
struct Carrier(Vec<(&'static str, String)>);

impl Injector for Carrier {
    fn set(&mut self, key: &str, value: String) {
        let key = match key {
            TRACEPARENT => TRACEPARENT,
            TRACESTATE => TRACESTATE,
            // Only the W3C trace context travels (baggage is the client's, passed on as is).
            _ => return,
        };
        self.0.push((key, value));
    }
}

/// Records `mcp.client.session.duration` when an upstream 2025 session this node opened is let
/// go of (ended, forgotten after the backend lost it, evicted): dropped with the session. A
/// session adopted from another node's record has no clock (its start is not known here).
#[derive(Debug)]
pub(crate) struct SessionClock(Option<(Instant, Option<&'static str>)>);

impl SessionClock {
    /// A session initialised just now, in protocol `version`.
    pub(crate) fn opened(version: &str) -> Self {
        let version = version
            .parse::<mcp_core::ProtocolVersion>()
            .ok()
            .map(mcp_core::ProtocolVersion::as_str);
        Self(Some((Instant::now(), version)))
    }

    /// A session whose start is not known on this node.
    pub(crate) fn unknown() -> Self {
        Self(None)
    }
}

impl Drop for SessionClock {
    fn drop(&mut self) {
        if let Some((started, version)) = self.0.take() {
            CLIENT_SESSIONS.record("", version, None, started);
        }
    }
}

/// The `error.type` of a JSON-RPC error code: the code itself for the codes MCP and JSON-RPC
/// define, `jsonrpc_error` for any other (a backend's own codes would be unbounded labels).
pub(crate) fn error_type(code: i64) -> &'static str {
    use mcp_core::error_code as c;
    match code {
        c::PARSE_ERROR => "-32700",
        c::INVALID_REQUEST => "-32600",
        c::METHOD_NOT_FOUND => "-32601",
        c::INVALID_PARAMS => "-32602",
        c::INTERNAL_ERROR => "-32603",
        c::RESOURCE_NOT_FOUND_LEGACY => "-32002",
        c::URL_ELICITATION_REQUIRED => "-32042",
        c::HEADER_MISMATCH => "-32020",
        c::MISSING_REQUIRED_CLIENT_CAPABILITY => "-32021",
        c::UNSUPPORTED_PROTOCOL_VERSION => "-32022",
        _ => "jsonrpc_error",
    }
}

/// A duration histogram by (method, protocol version, error type), handles registered once per
/// label set (looking a metric up in the recorder per call costs several times more). Every
/// label value is a `&'static str` from a bounded set: known methods, the revisions this gateway
/// speaks, [`error_type`] and the upstream failure kinds.
struct Durations {
    name: &'static str,
    series: OnceLock<RwLock<HashMap<SeriesKey, Histogram>>>,
}

type SeriesKey = (&'static str, Option<&'static str>, Option<&'static str>);

static SERVER_METRICS: Durations = Durations::new(SERVER_OPERATION_DURATION);
static CLIENT_METRICS: Durations = Durations::new(CLIENT_OPERATION_DURATION);
static CLIENT_SESSIONS: Durations = Durations::new(CLIENT_SESSION_DURATION);
static SERVER_SESSIONS: Durations = Durations::new(SERVER_SESSION_DURATION);

/// Now in Unix milliseconds (0 before 1970): a session's start must survive in its record, read
/// by whichever node ends it, so it cannot be an `Instant`.
pub(crate) fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Records `mcp.server.session.duration` for a downstream session of protocol `version` that was
/// initialised at `created_at_ms` (Unix milliseconds) and ended now. A clock that went back
/// records zero rather than nothing.
pub(crate) fn server_session_ended(version: &str, created_at_ms: u64) {
    let millis = unix_millis().saturating_sub(created_at_ms);
    // Precision: f64 holds every millisecond count below 2^53 exactly.
    #[allow(clippy::cast_precision_loss)]
    let seconds = millis as f64 / 1000.0;
    SERVER_SESSIONS.record_seconds("", Some(version), None, seconds);
}

impl Durations {
    const fn new(name: &'static str) -> Self {
        Self {
            name,
            series: OnceLock::new(),
        }
    }

    fn record(
        &self,
        method: &'static str,
        version: Option<&str>,
        error: Option<&'static str>,
        started: Instant,
    ) {
        self.record_seconds(method, version, error, started.elapsed().as_secs_f64());
    }

    fn record_seconds(
        &self,
        method: &'static str,
        version: Option<&str>,
        error: Option<&'static str>,
        seconds: f64,
    ) {
        let version = version
            .and_then(|v| v.parse::<mcp_core::ProtocolVersion>().ok())
            .map(mcp_core::ProtocolVersion::as_str);
        let key: SeriesKey = (method, version, error);
        let series = self.series.get_or_init(RwLock::default);
        if let Some(histogram) = series
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            histogram.record(seconds);
            return;
        }
        series
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_insert_with(|| self.register(key))
            .record(seconds);
    }

    fn register(&self, (method, version, error): SeriesKey) -> Histogram {
        let mut labels = Vec::with_capacity(3);
        if !method.is_empty() {
            labels.push(metrics::Label::new("mcp_method_name", method));
        }
        if let Some(version) = version {
            labels.push(metrics::Label::new("mcp_protocol_version", version));
        }
        if let Some(error) = error {
            labels.push(metrics::Label::new("error_type", error));
        }
        metrics::histogram!(self.name, labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_bounded() {
        assert_eq!(method_label(Some("tools/call")), "tools/call");
        assert_eq!(method_label(Some("x/anything-a-client-says")), "other");
        assert_eq!(method_label(None), "other");
        assert_eq!(error_type(mcp_core::error_code::INVALID_PARAMS), "-32602");
        assert_eq!(error_type(-31999), "jsonrpc_error");
    }

    #[test]
    fn span_names_use_the_tool_or_prompt_never_a_uri() {
        let call = Operation {
            method: "tools/call",
            target: Some("alpha-echo".into()),
        };
        assert_eq!(call.span_name(), "tools/call alpha-echo");
        let list = Operation {
            method: "tools/list",
            target: None,
        };
        assert_eq!(list.span_name(), "tools/list");
        assert!(named_target("prompts/get"));
        assert!(!named_target("resources/read"));
    }

    #[test]
    fn params_facts_read_only_names_and_trace_context() {
        let raw = RawValue::from_string(
            r#"{"name":"a-echo","arguments":{"token":"s"},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"k=v","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#
                .to_owned(),
        )
        .expect("raw");
        let facts = ParamFacts::read(Some(&raw));
        assert_eq!(facts.name.as_deref(), Some("a-echo"));
        let meta = facts.meta.expect("meta");
        assert_eq!(meta.tracestate.as_deref(), Some("k=v"));
        assert_eq!(meta.protocol_version.as_deref(), Some("2026-07-28"));
        // Params that are not an object give no facts rather than an error.
        let odd = RawValue::from_string("[1]".to_owned()).expect("raw");
        assert!(ParamFacts::read(Some(&odd)).name.is_none());
    }

    #[test]
    fn trace_ids_come_from_valid_traceparents_only() {
        let id = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(
            traceparent_trace_id(&format!("00-{id}-00f067aa0ba902b7-01")),
            Some(id)
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(traceparent_trace_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_the_w3c_trace_context_is_injected() {
        let mut carrier = Carrier::default();
        carrier.set("traceparent", "tp".to_owned());
        carrier.set("tracestate", "ts".to_owned());
        carrier.set("baggage", "user=alice".to_owned());
        assert_eq!(
            carrier.0,
            [
                ("traceparent", "tp".to_owned()),
                ("tracestate", "ts".to_owned())
            ]
        );
        // Without enable_tracing() nothing is made or injected.
        assert!(!tracing_on());
        assert!(current_trace_context().is_none());
    }
}
