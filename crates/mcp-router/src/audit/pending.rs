//! [`AuditHandle`]: one operation's record while it is under way. The front starts it when a
//! message arrives ([`Audit::start`]) and puts it in the request's extensions, from where the
//! operations annotate it (the backend a call went to, a fan-out's backends, the final message of
//! a relayed answer, a transport failure); the response body counts the bytes written
//! ([`audited`]). The record goes to the sink when the last holder lets go: the answer written to
//! its end (or dropped), and the relay of a streamed answer finished.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::Extensions;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use mcp_config_store::{UserConfig, VirtualHost};
use mcp_core::{Envelope, MessageKind, Principal, VirtualHostId};
use serde_json::value::RawValue;

use super::record::{self, AuditKind, AuditOutcome, AuditRecord, MAX_NAME_BYTES, capped, cut};
use super::{Audit, AuditPayloads, AuditSink};
use crate::body::{BoxError, McpBody};

/// What the front knows of a message when it starts serving it.
pub(crate) struct Started<'a> {
    pub(crate) parts: &'a http::request::Parts,
    pub(crate) env: &'a Envelope<'a>,
    pub(crate) bytes_in: usize,
    /// The message is served by the 2025 session engine.
    pub(crate) legacy: bool,
    /// The trace id of the router's server span, when spans are on.
    pub(crate) span_trace_id: Option<String>,
}

/// What a message's `params` say that a record shows, read with a visitor that skips the rest.
#[derive(Default, serde::Deserialize)]
struct Facts<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "protocolVersion")]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<Meta<'a>>,
}

#[derive(Default, serde::Deserialize)]
struct Meta<'a> {
    #[serde(borrow, default)]
    traceparent: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<Cow<'a, str>>,
}

impl Audit {
    /// Starts the record of `started`'s message, and says its trace id; `None` for a message
    /// that gets no record (a notification).
    pub(crate) fn start(&self, started: &Started<'_>) -> Option<(AuditHandle, Option<String>)> {
        let env = started.env;
        let kind = match env.kind() {
            MessageKind::Request => AuditKind::Request,
            // A client's answer: recorded only once it is known to answer a relayed request.
            MessageKind::Response | MessageKind::Error => AuditKind::ServerRequest,
            MessageKind::Notification => return None,
        };
        let ext = &started.parts.extensions;
        let headers = &started.parts.headers;
        let facts: Facts<'_> = env
            .params()
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let method = crate::telemetry::method_label(env.method());
        let name = match method {
            "tools/call" | "prompts/get" => facts.name.as_deref(),
            m if m.starts_with("resources/") => facts.uri.as_deref(),
            _ => None,
        };
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let trace_id = started
            .span_trace_id
            .clone()
            .or_else(|| {
                let meta = facts.meta.as_ref()?.traceparent.as_deref()?;
                crate::telemetry::traceparent_trace_id(meta).map(str::to_owned)
            })
            .or_else(|| {
                crate::telemetry::traceparent_trace_id(header("traceparent")?).map(str::to_owned)
            });
        let protocol_version = facts
            .meta
            .as_ref()
            .and_then(|m| m.protocol_version.as_deref())
            .or(header(mcp_core::headers::MCP_PROTOCOL_VERSION.as_str()))
            .or(facts.protocol_version.as_deref())
            .map(|v| cut(v, 64).to_owned());
        let payloads = self.payloads == AuditPayloads::PerVhost && vhost_asks_payloads(ext);
        let (arguments, arguments_truncated) = match facts.arguments {
            Some(raw) if payloads && kind == AuditKind::Request => {
                let (kept, truncated) = capped(raw, self.max_payload_bytes);
                (Some(kept), truncated)
            }
            _ => (None, false),
        };
        let principal = ext.get::<Principal>();
        let record = AuditRecord {
            time: record::rfc3339(SystemTime::now()),
            trace_id: trace_id.clone(),
            issuer: principal.map(|p| p.issuer().to_owned()),
            subject: principal.map(|p| p.subject().to_owned()),
            vhost: ext.get::<VirtualHostId>().map(|v| v.as_str().to_owned()),
            era: if started.legacy { "2025" } else { "2026-07-28" },
            protocol_version,
            kind,
            method,
            name: name.map(|n| cut(n, MAX_NAME_BYTES).to_owned()),
            bytes_in: started.bytes_in as u64,
            arguments,
            arguments_truncated,
            // Filled as the operation goes: backend, outcome, code, status, latency, bytes out.
            ..AuditRecord::default()
        };
        let pending = Pending {
            sink: Arc::clone(&self.sink),
            started: Instant::now(),
            payloads,
            max_payload_bytes: self.max_payload_bytes,
            bytes_out: AtomicU64::new(0),
            draft: Mutex::new(Draft {
                record,
                settled: None,
                head: None,
                awaiting_final: false,
                discard: kind == AuditKind::ServerRequest,
            }),
        };
        Some((AuditHandle(Arc::new(pending)), trace_id))
    }
}

/// Whether the request's virtual host asks for payload recording (`audit_payloads`).
fn vhost_asks_payloads(ext: &Extensions) -> bool {
    let Some(id) = ext.get::<VirtualHostId>() else {
        return false;
    };
    match ext.get::<VirtualHost>() {
        Some(vhost) if vhost.id == *id => vhost.config.audit_payloads,
        _ => ext
            .get::<Arc<UserConfig>>()
            .and_then(|config| config.virtual_hosts.get(id.as_str()))
            .is_some_and(|vhost| vhost.audit_payloads),
    }
}

/// One operation's record while it is under way; cheap to clone. The record is sent when the
/// last clone is dropped.
#[derive(Clone)]
pub(crate) struct AuditHandle(Arc<Pending>);

impl std::fmt::Debug for AuditHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditHandle").finish_non_exhaustive()
    }
}

struct Pending {
    sink: Arc<dyn AuditSink>,
    started: Instant,
    /// Arguments and results are recorded.
    payloads: bool,
    max_payload_bytes: usize,
    bytes_out: AtomicU64,
    draft: Mutex<Draft>,
}

struct Draft {
    record: AuditRecord,
    /// How the operation ended, as the operations saw it (first one wins), and when.
    settled: Option<(AuditOutcome, Option<i64>, Instant)>,
    /// The response head the front answered: its status, the JSON-RPC error code it carries,
    /// and when.
    head: Option<(u16, Option<i64>, Instant)>,
    /// A relay owes the final message: without it, the client went away first.
    awaiting_final: bool,
    /// Nothing to record (a client's answer that answers no relayed request).
    discard: bool,
}

impl AuditHandle {
    fn draft(&self) -> std::sync::MutexGuard<'_, Draft> {
        self.0.draft.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The backend a routed call goes to.
    pub(crate) fn backend(&self, name: &str) {
        self.draft().record.backend = Some(name.to_owned());
    }

    /// A fan-out's backends: those whose fresh answers were merged, and those left out or
    /// answered stale.
    pub(crate) fn fanout(&self, answered: Vec<String>, degraded: Vec<String>) {
        let mut draft = self.draft();
        draft.record.backends = Some(answered);
        draft.record.degraded_backends = (!degraded.is_empty()).then_some(degraded);
    }

    /// A relay owes the client its final message (the operation settles with it).
    pub(crate) fn expect_final(&self) {
        self.draft().awaiting_final = true;
    }

    /// The operation ended with `outcome` (the first call wins).
    pub(crate) fn settle(&self, outcome: AuditOutcome, code: Option<i64>) {
        let mut draft = self.draft();
        if draft.settled.is_none() {
            draft.settled = Some((outcome, code, Instant::now()));
        }
    }

    /// The backend failed at the transport level: the client gets `-32603`.
    pub(crate) fn transport_error(&self) {
        self.settle(
            AuditOutcome::TransportError,
            Some(mcp_core::error_code::INTERNAL_ERROR),
        );
    }

    /// The final message the client gets (a relayed call's answer): classified, and its result
    /// kept when payloads are recorded.
    pub(crate) fn settle_final(&self, message: &[u8]) {
        match Envelope::parse(message) {
            Ok(env) => self.settle_with(&env),
            Err(_) => self.transport_error(),
        }
    }

    /// Settles with the classification of `env` (a final answer), keeping its result or error
    /// when payloads are recorded.
    pub(crate) fn settle_with(&self, env: &Envelope<'_>) {
        let (outcome, code) = record::classify(env);
        let payload = if self.0.payloads {
            env.result().or_else(|| env.error_raw())
        } else {
            None
        };
        let mut draft = self.draft();
        if draft.settled.is_some() {
            return;
        }
        draft.settled = Some((outcome, code, Instant::now()));
        if let Some(raw) = payload {
            let (kept, truncated) = capped(raw, self.0.max_payload_bytes);
            draft.record.result = Some(kept);
            draft.record.result_truncated = truncated;
        }
    }

    /// The client's answer POSTed answers a relayed request (`method`, asked by `backend`): the
    /// record is kept.
    pub(crate) fn server_request(&self, method: Option<&str>, backend: Option<&str>) {
        let mut draft = self.draft();
        draft.discard = false;
        draft.record.method = crate::telemetry::method_label(method);
        draft.record.backend = backend.map(str::to_owned);
    }

    /// The front's response head: `status`, with the JSON-RPC error `code` it carries.
    pub(crate) fn head(&self, status: u16, code: Option<i64>) {
        self.draft().head = Some((status, code, Instant::now()));
    }

    fn add_bytes_out(&self, bytes: usize) {
        self.0.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let draft = self.draft.get_mut().unwrap_or_else(PoisonError::into_inner);
        if draft.discard {
            return;
        }
        let now = Instant::now();
        // The operations' word first; then an error the front answered; then a relay that never
        // gave its final message (the client left); then the head's success.
        let (outcome, code, at) = match (draft.settled, draft.head) {
            (Some(settled), _) => settled,
            (None, Some((_, Some(code), at))) => (AuditOutcome::JsonrpcError, Some(code), at),
            (None, Some((_, None, at))) if !draft.awaiting_final => (AuditOutcome::Ok, None, at),
            _ => (AuditOutcome::Cancelled, None, now),
        };
        let mut record = std::mem::take(&mut draft.record);
        record.outcome = outcome;
        record.code = code;
        record.status = draft.head.map(|(status, _, _)| status);
        record.latency_ms = at.saturating_duration_since(self.started).as_secs_f64() * 1000.0;
        record.bytes_out = self.bytes_out.load(Ordering::Relaxed);
        self.sink.record(record);
    }
}

/// `body`, counting the bytes written into the record of `handle`, which it holds until the body
/// ends or is dropped.
pub(crate) fn audited(body: McpBody, handle: AuditHandle) -> McpBody {
    Audited {
        inner: body,
        handle: Some(handle),
    }
    .boxed_unsync()
}

struct Audited {
    inner: McpBody,
    handle: Option<AuditHandle>,
}

impl Body for Audited {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(handle)) = (frame.data_ref(), &self.handle) {
                    handle.add_bytes_out(data.len());
                }
            }
            Poll::Ready(_) => self.handle = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect() -> (Audit, Arc<Mutex<Vec<AuditRecord>>>) {
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&records);
        let audit = Audit::new(move |r: AuditRecord| sink.lock().expect("records").push(r));
        (audit, records)
    }

    fn start(audit: &Audit, body: &str) -> Option<AuditHandle> {
        let mut parts = http::Request::post("/servers/vh/mcp")
            .header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
            .body(())
            .expect("request")
            .into_parts()
            .0;
        parts
            .extensions
            .insert(Principal::new("https://iss", "alice"));
        parts.extensions.insert(VirtualHostId::new("vh"));
        let env = Envelope::parse(body.as_bytes()).expect("envelope");
        let started = Started {
            parts: &parts,
            env: &env,
            bytes_in: body.len(),
            legacy: false,
            span_trace_id: None,
        };
        audit.start(&started).map(|(handle, _)| handle)
    }

    #[test]
    fn the_record_goes_out_with_the_last_holder_and_the_operations_word_wins() {
        let (audit, records) = collect();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a-echo","arguments":{"text":"secret"}}}"#;
        let handle = start(&audit, body).expect("a request is recorded");
        handle.backend("a");
        handle.expect_final();
        handle.head(200, None);
        let relay = handle.clone();
        drop(handle);
        assert!(records.lock().expect("records").is_empty(), "still held");
        relay.settle_final(br#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#);
        drop(relay);
        let records = records.lock().expect("records");
        let r = &records[0];
        assert_eq!(
            (r.outcome, r.code, r.status),
            (AuditOutcome::ToolError, None, Some(200))
        );
        assert_eq!(r.method, "tools/call");
        assert_eq!(r.name.as_deref(), Some("a-echo"));
        assert_eq!(r.backend.as_deref(), Some("a"));
        assert_eq!(r.subject.as_deref(), Some("alice"));
        assert_eq!(
            r.trace_id.as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(r.bytes_in, body.len() as u64);
        // Payloads are off unless both the operator and the virtual host turn them on.
        assert!(r.arguments.is_none() && r.result.is_none());
    }

    #[test]
    fn a_relay_that_never_answered_is_cancelled_and_an_answered_error_is_the_heads() {
        let (audit, records) = collect();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a-slow"}}"#;
        let handle = start(&audit, body).expect("recorded");
        handle.expect_final();
        handle.head(200, None);
        drop(handle);
        let handle = start(&audit, body).expect("recorded");
        handle.expect_final();
        handle.head(200, Some(-32600));
        drop(handle);
        let handle = start(&audit, body).expect("recorded");
        handle.transport_error();
        handle.head(200, Some(-32603));
        drop(handle);
        let outcomes: Vec<_> = records
            .lock()
            .expect("records")
            .iter()
            .map(|r| (r.outcome, r.code))
            .collect();
        assert_eq!(
            outcomes,
            [
                (AuditOutcome::Cancelled, None),
                (AuditOutcome::JsonrpcError, Some(-32600)),
                (AuditOutcome::TransportError, Some(-32603)),
            ]
        );
    }

    #[test]
    fn notifications_get_no_record_and_stray_answers_are_discarded() {
        let (audit, records) = collect();
        assert!(
            start(
                &audit,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )
            .is_none()
        );
        let answer = start(&audit, r#"{"jsonrpc":"2.0","id":"x","result":{}}"#).expect("handle");
        answer.head(202, None);
        drop(answer);
        assert!(records.lock().expect("records").is_empty());
        let answer = start(&audit, r#"{"jsonrpc":"2.0","id":"x","result":{}}"#).expect("handle");
        answer.server_request(Some("elicitation/create"), Some("a"));
        answer.head(202, None);
        drop(answer);
        let records = records.lock().expect("records");
        assert_eq!(records[0].kind, AuditKind::ServerRequest);
        assert_eq!(records[0].method, "elicitation/create");
        assert_eq!(records[0].outcome, AuditOutcome::Ok);
    }
}
