//! What a legacy-only (2025-11-25) backend answers to modern-shaped requests.
//!
//! rmcp always serves `server/discover` and per-request 2026-07-28 metadata, even when the
//! handler supports only legacy versions (it then answers the modern error `-32022`, which tells
//! a client the server *is* modern). A real legacy-only server knows none of that: it looks for a
//! session, finds none and answers `400`. This filter, in front of rmcp for [`Era::Legacy`]
//! backends, gives exactly that answer.
//!
//! [`Era::Legacy`]: crate::Era::Legacy

use bytes::Bytes;
use http::{Method, Response, StatusCode, header::CONTENT_TYPE};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use serde_json::Value;

/// The body a [`Era::Legacy`](crate::Era::Legacy) backend sends with its `400` to any
/// modern-shaped POST.
pub const LEGACY_REJECTION_BODY: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: missing session"}}"#;

const FIRST_MODERN_VERSION: &str = "2026-07-28";
const MODERN_ONLY_METHODS: [&str; 2] = ["server/discover", "subscriptions/listen"];
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// True when a legacy-only server would not understand this request as one of its own.
pub(crate) fn is_modern_request(method: &Method, headers: &http::HeaderMap, body: &[u8]) -> bool {
    if method != Method::POST {
        return false;
    }
    let header_is_modern = headers
        .get_all(PROTOCOL_VERSION_HEADER)
        .iter()
        .any(|value| value.to_str().is_ok_and(is_modern_version));
    if header_is_modern {
        return true;
    }
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let method_is_modern = message
        .get("method")
        .and_then(Value::as_str)
        .is_some_and(|method| MODERN_ONLY_METHODS.contains(&method));
    let meta_is_modern = message
        .get("params")
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get(PROTOCOL_VERSION_META))
        .and_then(Value::as_str)
        .is_some_and(is_modern_version);
    method_is_modern || meta_is_modern
}

/// ISO dates compare lexically in date order.
fn is_modern_version(version: &str) -> bool {
    version.trim() >= FIRST_MODERN_VERSION
}

/// `400` with [`LEGACY_REJECTION_BODY`].
pub(crate) fn rejection() -> Response<BoxBody<Bytes, std::convert::Infallible>> {
    Response::builder()
        .status(StatusCode::BAD_REQUEST)
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(LEGACY_REJECTION_BODY.as_bytes())).boxed())
        .expect("static response parts are valid")
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;

    use super::*;

    fn headers(version: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(version) = version {
            headers.insert(
                PROTOCOL_VERSION_HEADER,
                version.parse().expect("header value"),
            );
        }
        headers
    }

    #[test]
    fn discover_and_modern_headers_are_modern() {
        let discover = br#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#;
        assert!(is_modern_request(&Method::POST, &headers(None), discover));
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert!(is_modern_request(
            &Method::POST,
            &headers(Some("2026-07-28")),
            list
        ));
        let meta = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(is_modern_request(&Method::POST, &headers(None), meta));
    }

    #[test]
    fn legacy_traffic_passes() {
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;
        assert!(!is_modern_request(&Method::POST, &headers(None), init));
        let list = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        assert!(!is_modern_request(
            &Method::POST,
            &headers(Some("2025-11-25")),
            list
        ));
        assert!(!is_modern_request(
            &Method::GET,
            &headers(Some("2026-07-28")),
            b""
        ));
        assert!(!is_modern_request(
            &Method::POST,
            &headers(None),
            b"not json"
        ));
    }

    #[test]
    fn rejection_body_is_a_plain_invalid_request() {
        let body: Value = serde_json::from_str(LEGACY_REJECTION_BODY).expect("valid JSON");
        assert_eq!(body["error"]["code"], -32600);
        assert!(body["id"].is_null());
    }
}
