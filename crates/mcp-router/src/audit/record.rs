//! [`AuditRecord`], its outcome levels, and the pure helpers that fill it: the classification of
//! a final JSON-RPC message, RFC 3339 time, and the caps on client-chosen text.

use std::time::SystemTime;

use mcp_core::{Envelope, MessageKind};
use serde::Serialize;
use serde_json::value::RawValue;

/// How an operation ended, for its client (a record not finished yet reads `Cancelled`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditOutcome {
    /// A result (for a `tools/call`, one without `isError: true`).
    Ok,
    /// A `tools/call` result with `isError: true` (the tool ran and reported a failure).
    ToolError,
    /// A JSON-RPC error, from the backend or the gateway (`code` says which).
    JsonrpcError,
    /// The backend could not be reached or failed at the transport level (refused connection,
    /// timeout, open circuit breaker, a broken or malformed answer): the client got `-32603`.
    TransportError,
    /// The client went away (or cancelled) before the answer: nothing was answered.
    #[default]
    Cancelled,
}

/// What kind of exchange a record describes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditKind {
    /// A client's request.
    #[default]
    Request,
    /// A backend's request relayed to a 2025 client, recorded when its answer arrives.
    ServerRequest,
}

/// One audited MCP operation; serialised as one JSON object (absent fields left out). See the
/// book (docs/src/telemetry.md, "Audit trail") for the schema.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct AuditRecord {
    /// When the request reached the router, RFC 3339 in UTC with milliseconds.
    pub time: String,
    /// The W3C trace id (32 hex digits) of the operation, when there is a trace context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The caller's token issuer (`iss`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The caller's subject (`sub`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The virtual host id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vhost: Option<String>,
    /// The client's era: `2025` (sessions) or `2026-07-28` (stateless).
    pub era: &'static str,
    /// The protocol version the request declared, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// A client's request, or a backend's request relayed to the client.
    pub kind: AuditKind,
    /// The MCP method (a method the gateway does not know is `other`).
    pub method: &'static str,
    /// The tool or prompt name, or the resource URI, as the client named it (at most 1024
    /// bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The backend a routed call went to (or that asked, for a server request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// A fan-out's backends whose fresh answers were merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<String>>,
    /// A fan-out's backends left out (failed) or answered from a stale copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_backends: Option<Vec<String>>,
    /// How the operation ended.
    pub outcome: AuditOutcome,
    /// The JSON-RPC error code the client got (`jsonrpc_error`, `transport_error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// The HTTP status of the answer (absent when the client left before it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Milliseconds from the request reaching the router to its final answer.
    pub latency_ms: f64,
    /// Bytes of the request body.
    pub bytes_in: u64,
    /// Bytes of the response body the gateway wrote (SSE framing included).
    pub bytes_out: u64,
    /// The request's `params.arguments` (payload recording only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Box<RawValue>>,
    /// `arguments` was cut: it is a string holding the first bytes of its JSON text.
    #[serde(skip_serializing_if = "is_false")]
    pub arguments_truncated: bool,
    /// The final answer's `result` (or `error`) member (payload recording only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// `result` was cut, as `arguments_truncated`.
    #[serde(skip_serializing_if = "is_false")]
    pub result_truncated: bool,
}

// serde's skip_serializing_if passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// The most bytes of a client-chosen name or URI kept in a record.
pub(crate) const MAX_NAME_BYTES: usize = 1024;

/// How a final JSON-RPC message ends its operation: an error is `jsonrpc_error` with its code, a
/// result with `isError: true` is `tool_error`, any other result `ok`.
pub(crate) fn classify(env: &Envelope<'_>) -> (AuditOutcome, Option<i64>) {
    if env.kind() == MessageKind::Error {
        return (AuditOutcome::JsonrpcError, env.error().map(|e| e.code));
    }
    match env.result() {
        Some(result) if is_error_result(result) => (AuditOutcome::ToolError, None),
        _ => (AuditOutcome::Ok, None),
    }
}

/// Whether a result says `isError: true` (read with a visitor that skips everything else).
fn is_error_result(result: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Flag {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    result.get().starts_with('{')
        && serde_json::from_str::<Flag>(result.get())
            .ok()
            .and_then(|f| f.is_error)
            == Some(true)
}

/// `text` cut to at most `max` bytes on a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `raw` as recorded under a cap of `max` bytes: itself, or a JSON string of its first bytes
/// (at most `max` bytes once escaped, quotes included; at least `""`) and `true` (truncated).
pub(crate) fn capped(raw: &RawValue, max: usize) -> (Box<RawValue>, bool) {
    let text = raw.get();
    if text.len() <= max {
        return (raw.to_owned(), false);
    }
    let mut take = max;
    let encoded = loop {
        let encoded = serde_json::to_string(cut(text, take)).unwrap_or_else(|_| "\"\"".to_owned());
        // Escaping (quotes, backslashes, control characters) makes the string longer than the
        // prefix: take less until it fits.
        if encoded.len() <= max || take == 0 {
            break encoded;
        }
        take = take.saturating_sub((encoded.len() - max).max(1));
    };
    let value = RawValue::from_string(encoded).unwrap_or_else(|_| RawValue::NULL.to_owned());
    (value, true)
}

/// `time` as RFC 3339 in UTC with milliseconds (`2026-12-08T09:30:00.250Z`); the civil date from
/// the day count (Howard Hinnant's algorithm), so no date crate for one timestamp.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn outcome(message: &str) -> (AuditOutcome, Option<i64>) {
        classify(&Envelope::parse(message.as_bytes()).expect("envelope"))
    }

    #[test]
    fn final_messages_are_classified_by_error_code_and_is_error() {
        assert_eq!(
            outcome(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#),
            (AuditOutcome::Ok, None)
        );
        assert_eq!(
            outcome(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}"#),
            (AuditOutcome::Ok, None)
        );
        assert_eq!(
            outcome(
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"isError":true}}"#
            ),
            (AuditOutcome::ToolError, None)
        );
        assert_eq!(
            outcome(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"wrong tool name"}}"#
            ),
            (AuditOutcome::JsonrpcError, Some(-32602))
        );
        // `isError` only counts as the boolean of a result object.
        assert_eq!(
            outcome(r#"{"jsonrpc":"2.0","id":1,"result":{"isError":"yes"}}"#),
            (AuditOutcome::Ok, None)
        );
        assert_eq!(
            outcome(r#"{"jsonrpc":"2.0","id":1,"result":[{"isError":true}]}"#),
            (AuditOutcome::Ok, None)
        );
        assert_eq!(
            outcome(r#"{"jsonrpc":"2.0","id":1,"result":{"nested":{"isError":true}}}"#),
            (AuditOutcome::Ok, None)
        );
    }

    #[test]
    fn outcomes_and_kinds_serialise_as_documented() {
        let names: Vec<String> = [
            AuditOutcome::Ok,
            AuditOutcome::ToolError,
            AuditOutcome::JsonrpcError,
            AuditOutcome::TransportError,
            AuditOutcome::Cancelled,
        ]
        .iter()
        .map(|o| serde_json::to_string(o).expect("json"))
        .collect();
        assert_eq!(
            names,
            [
                "\"ok\"",
                "\"tool_error\"",
                "\"jsonrpc_error\"",
                "\"transport_error\"",
                "\"cancelled\""
            ]
        );
        assert_eq!(
            serde_json::to_string(&AuditKind::ServerRequest).expect("json"),
            "\"server_request\""
        );
    }

    #[test]
    fn payloads_over_the_cap_become_a_marked_prefix() {
        let raw = RawValue::from_string(r#"{"text":"héllo"}"#.to_owned()).expect("raw");
        let (kept, cut_short) = capped(&raw, 100);
        assert_eq!((kept.get(), cut_short), (r#"{"text":"héllo"}"#, false));
        // Escaped, the prefix fits the cap, quotes included.
        let (kept, cut_short) = capped(&raw, 16);
        assert!(cut_short);
        assert_eq!(kept.get(), r#""{\"text\":\"h""#);
        // A cut never splits a character: 11 bytes would split the two-byte `é`.
        assert_eq!(cut(r#"{"text":"héllo"}"#, 11), r#"{"text":"h"#);
        assert_eq!(cut("abc", 0), "");
        assert_eq!(capped(&raw, 0).0.get(), r#""""#);
    }

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.789Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(4_102_444_799);
        assert_eq!(rfc3339(t), "2099-12-31T23:59:59.000Z");
    }
}
