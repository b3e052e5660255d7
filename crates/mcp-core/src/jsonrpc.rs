//! The JSON-RPC 2.0 envelope: parse a message without touching its payload, and write replies.
//!
//! [`Envelope::parse`] reads only `jsonrpc`, `id`, `method` and the *positions* of `params`,
//! `result` and `error`: those stay [`RawValue`] slices of the original bytes, so a proxy can
//! forward them byte for byte (unknown fields, `_meta`, structured content). The `encode_*`
//! functions write raw payloads back verbatim.

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::{ErrorObject, RawObject};

/// A JSON-RPC request id: a number or a string, kept exactly as received.
///
/// Numbers keep their original text (`1`, `1.0` and `1e0` stay distinct and are echoed unchanged),
/// so a reply always carries the id the peer sent.
///
/// ```
/// use mcp_core::RequestId;
///
/// let id: RequestId = serde_json::from_str("12345678901234567890").unwrap();
/// assert_eq!(serde_json::to_string(&id).unwrap(), "12345678901234567890");
/// let id: RequestId = serde_json::from_str(r#""abc""#).unwrap();
/// assert_eq!(id, RequestId::from("abc"));
/// ```
#[derive(Clone, Debug)]
pub enum RequestId {
    /// A numeric id, as its original JSON text.
    Number(Arc<RawValue>),
    /// A string id (unescaped).
    String(Arc<str>),
}

impl RequestId {
    /// A numeric id from an integer.
    pub fn number(n: i64) -> Self {
        let raw = RawValue::from_string(n.to_string()).map(Arc::from);
        // An integer's decimal text is always valid JSON.
        Self::Number(raw.unwrap_or_else(|_| Arc::from(RawValue::NULL.to_owned())))
    }

    /// The id as it appears in JSON, e.g. `7` or `"abc"` (for keys and logs).
    pub fn to_json(&self) -> Cow<'_, str> {
        match self {
            Self::Number(raw) => Cow::Borrowed(raw.get()),
            Self::String(s) => Cow::Owned(serde_json::Value::from(&**s).to_string()),
        }
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(Arc::from(s))
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        Self::number(n)
    }
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Number(a), Self::Number(b)) => a.get() == b.get(),
            (Self::String(a), Self::String(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for RequestId {}

impl Hash for RequestId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Self::Number(raw) => (0u8, raw.get()).hash(state),
            Self::String(s) => (1u8, &**s).hash(state),
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Number(raw) => raw.serialize(serializer),
            Self::String(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        RequestId::from_raw(&raw).map_err(D::Error::custom)
    }
}

impl RequestId {
    fn from_raw(raw: &RawValue) -> Result<Self, &'static str> {
        let text = raw.get();
        match text.as_bytes().first() {
            Some(b'"') => serde_json::from_str::<String>(text)
                .map(|s| Self::String(Arc::from(s)))
                .map_err(|_| "invalid string id"),
            Some(b'-' | b'0'..=b'9') => Ok(Self::Number(Arc::from(raw.to_owned()))),
            _ => Err("id must be a number or a string"),
        }
    }
}

/// What kind of JSON-RPC message an [`Envelope`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    /// A request: `method` and `id`.
    Request,
    /// A notification: `method`, no `id`.
    Notification,
    /// A successful response: `id` and `result`.
    Response,
    /// An error response: `error`, and `id` (null when the request could not be read).
    Error,
}

/// Why a body is not a usable JSON-RPC message; maps onto a JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The body is not JSON (-32700).
    #[error("Parse error: {0}")]
    Parse(String),
    /// The body is JSON but not a valid JSON-RPC 2.0 message (-32600).
    #[error("Invalid request: {0}")]
    Invalid(&'static str),
}

impl EnvelopeError {
    /// The JSON-RPC error object to answer with.
    pub fn to_error_object(&self) -> ErrorObject {
        match self {
            Self::Parse(_) => ErrorObject::parse_error(self.to_string()),
            Self::Invalid(_) => ErrorObject::invalid_request(self.to_string()),
        }
    }
}

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// Keeps an explicit `null` as `Some("null")` so "absent" and "null" stay distinct.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// A parsed JSON-RPC 2.0 message whose payload stays raw.
///
/// ```
/// use mcp_core::{Envelope, MessageKind, RequestId};
///
/// let body = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a-echo","x":{"y":1}}}"#;
/// let env = Envelope::parse(body).unwrap();
/// assert_eq!(env.kind(), MessageKind::Request);
/// assert_eq!(env.method(), Some("tools/call"));
/// assert_eq!(env.id(), Some(&RequestId::from(7)));
/// // params is a slice of the original bytes, not a re-serialisation
/// assert_eq!(env.params().unwrap().get(), r#"{"name":"a-echo","x":{"y":1}}"#);
/// ```
#[derive(Debug, Clone)]
pub struct Envelope<'a> {
    kind: MessageKind,
    id: Option<RequestId>,
    method: Option<Cow<'a, str>>,
    params: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
}

impl<'a> Envelope<'a> {
    /// Parses one JSON-RPC message. Batches (JSON arrays) are rejected as invalid: they were removed
    /// from MCP in 2025-06-18 and are never needed by a gateway.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, EnvelopeError> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'[') {
            // Still tell a parse error from a batch: invalid JSON must be -32700.
            serde_json::from_slice::<&RawValue>(bytes)
                .map_err(|e| EnvelopeError::Parse(e.to_string()))?;
            return Err(EnvelopeError::Invalid("batch requests are not supported"));
        }
        let wire: Wire<'a> = match serde_json::from_slice(bytes) {
            Ok(wire) => wire,
            Err(e) if e.is_data() => return Err(EnvelopeError::Invalid("not a JSON-RPC object")),
            Err(e) => return Err(EnvelopeError::Parse(e.to_string())),
        };
        Self::from_wire(wire)
    }

    fn from_wire(wire: Wire<'a>) -> Result<Self, EnvelopeError> {
        if wire.jsonrpc.as_deref() != Some("2.0") {
            return Err(EnvelopeError::Invalid("jsonrpc must be \"2.0\""));
        }
        let id = match wire.id {
            Some(raw) if raw.get() == "null" => None,
            Some(raw) => {
                Some(RequestId::from_raw(raw).map_err(|_| EnvelopeError::Invalid("invalid id"))?)
            }
            None => None,
        };
        let kind = match (&wire.method, wire.result, wire.error) {
            (Some(_), None, None) if id.is_some() => MessageKind::Request,
            (Some(_), None, None) if wire.id.is_none() => MessageKind::Notification,
            (Some(_), None, None) => return Err(EnvelopeError::Invalid("request id is null")),
            (None, Some(_), None) if id.is_some() => MessageKind::Response,
            (None, None, Some(_)) if wire.id.is_some() => MessageKind::Error,
            (None, Some(_), None) => return Err(EnvelopeError::Invalid("response without id")),
            (None, None, Some(_)) => return Err(EnvelopeError::Invalid("error without id")),
            _ => {
                return Err(EnvelopeError::Invalid(
                    "not a request, notification or response",
                ));
            }
        };
        if wire
            .params
            .is_some_and(|p| !matches!(p.get().as_bytes().first(), Some(b'{' | b'[')))
        {
            return Err(EnvelopeError::Invalid(
                "params must be an object or an array",
            ));
        }
        Ok(Self {
            kind,
            id,
            method: wire.method,
            params: wire.params,
            result: wire.result,
            error: wire.error,
        })
    }

    /// The message kind.
    pub fn kind(&self) -> MessageKind {
        self.kind
    }

    /// The id of a request or response (`None` for notifications and null-id errors).
    pub fn id(&self) -> Option<&RequestId> {
        self.id.as_ref()
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// `params`, verbatim.
    pub fn params(&self) -> Option<&'a RawValue> {
        self.params
    }

    /// `result`, verbatim.
    pub fn result(&self) -> Option<&'a RawValue> {
        self.result
    }

    /// `error`, verbatim.
    pub fn error_raw(&self) -> Option<&'a RawValue> {
        self.error
    }

    /// `error`, decoded.
    pub fn error(&self) -> Option<ErrorObject> {
        self.error
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
    }
}

#[derive(Serialize)]
struct OutRequest<'a, P: Serialize + ?Sized = RawValue> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Serialize)]
struct OutResult<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a RawValue,
}

#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    error: &'a ErrorObject,
}

fn to_vec(value: &impl Serialize) -> Vec<u8> {
    // Serialising these borrowed structs cannot fail: every field is a string, a number or
    // already-valid raw JSON.
    serde_json::to_vec(value).unwrap_or_default()
}

/// `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`, with `params` written verbatim.
pub fn encode_request(id: &RequestId, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    to_vec(&OutRequest {
        jsonrpc: "2.0",
        id: Some(id),
        method,
        params,
    })
}

/// [`encode_request`] with `params` given as an object being edited: written straight into the
/// message, with no intermediate raw value (the router's upstream requests, on every call). An
/// empty object is left out (`params` is optional in JSON-RPC, and some servers refuse `{}` on
/// methods that take none).
///
/// ```
/// use mcp_core::{RawObject, RequestId, encode_request_object};
///
/// let mut params = RawObject::parse(r#"{"name":"echo","arguments":{"a":1}}"#).unwrap();
/// params.set_str("name", "upstream-echo");
/// let bytes = encode_request_object(&RequestId::from(3), "tools/call", &params);
/// assert_eq!(
///     std::str::from_utf8(&bytes).unwrap(),
///     r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"upstream-echo","arguments":{"a":1}}}"#
/// );
/// let bytes = encode_request_object(&RequestId::from(4), "ping", &RawObject::new());
/// assert_eq!(std::str::from_utf8(&bytes).unwrap(), r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#);
/// ```
pub fn encode_request_object(id: &RequestId, method: &str, params: &RawObject<'_>) -> Vec<u8> {
    to_vec(&OutRequest {
        jsonrpc: "2.0",
        id: Some(id),
        method,
        params: params.keys().next().is_some().then_some(params),
    })
}

/// `{"jsonrpc":"2.0","method":…,"params":…}`, with `params` written verbatim.
pub fn encode_notification(method: &str, params: Option<&RawValue>) -> Vec<u8> {
    to_vec(&OutRequest {
        jsonrpc: "2.0",
        id: None,
        method,
        params,
    })
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`, with `result` written verbatim.
///
/// ```
/// use mcp_core::{RequestId, encode_result};
/// use serde_json::value::RawValue;
///
/// let result = RawValue::from_string(r#"{"tools":[ ]}"#.to_owned()).unwrap();
/// let out = encode_result(&RequestId::from("a"), &result);
/// assert_eq!(out, br#"{"jsonrpc":"2.0","id":"a","result":{"tools":[ ]}}"#);
/// ```
pub fn encode_result(id: &RequestId, result: &RawValue) -> Vec<u8> {
    to_vec(&OutResult {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// `{"jsonrpc":"2.0","id":…,"error":{…}}`; `id` is `null` when the request could not be read.
///
/// ```
/// use mcp_core::{ErrorObject, encode_error};
///
/// let out = encode_error(None, &ErrorObject::parse_error("Parse error"));
/// assert_eq!(out, br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#);
/// ```
pub fn encode_error(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    to_vec(&OutError {
        jsonrpc: "2.0",
        id,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Envelope<'_>, EnvelopeError> {
        Envelope::parse(s.as_bytes())
    }

    #[test]
    fn classifies_every_kind() {
        let n = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).expect("ok");
        assert_eq!(n.kind(), MessageKind::Notification);
        let r = parse(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#).expect("ok");
        assert_eq!(r.kind(), MessageKind::Response);
        let e =
            parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}"#).expect("ok");
        assert_eq!(e.kind(), MessageKind::Error);
        assert_eq!(e.id(), None);
        assert_eq!(e.error().map(|e| e.code), Some(-1));
    }

    #[test]
    fn rejects_invalid_messages_with_the_right_error() {
        assert!(matches!(parse("{not json"), Err(EnvelopeError::Parse(_))));
        assert!(matches!(parse("[1,"), Err(EnvelopeError::Parse(_))));
        let invalid = [
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#""just a string""#,
        ];
        for body in invalid {
            let err = parse(body).expect_err(body);
            assert!(matches!(err, EnvelopeError::Invalid(_)), "{body}: {err:?}");
            assert_eq!(err.to_error_object().code, -32600);
        }
    }

    #[test]
    fn ids_round_trip_exactly() {
        for id in [
            "0",
            "-5",
            "1.0",
            "1e3",
            "18446744073709551616",
            r#""ab\"c""#,
            r#""""#,
        ] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let env = Envelope::parse(body.as_bytes()).expect("parses");
            let out = encode_result(
                env.id().expect("has id"),
                &RawValue::from_string("{}".into()).expect("raw"),
            );
            let expected = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
            assert_eq!(String::from_utf8(out).expect("utf8"), expected);
        }
        assert_ne!(RequestId::from(1), RequestId::from("1"));
    }

    #[test]
    fn method_with_escapes_is_decoded() {
        let env = parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools\/list"}"#).expect("ok");
        assert_eq!(env.method(), Some("tools/list"));
    }

    #[test]
    fn encoders_keep_payload_bytes() {
        let params = RawValue::from_string(r#"{ "z":1 ,"a" : [ ] }"#.into()).expect("raw");
        let out = encode_request(&RequestId::from(3), "tools/call", Some(&params));
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{ "z":1 ,"a" : [ ] }}"#
        );
        let out = encode_notification("notifications/initialized", None);
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        );
    }
}
