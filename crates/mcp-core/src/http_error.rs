//! Locally generated HTTP error responses with the gateway's short JSON body.

use http::{HeaderValue, Response, StatusCode, header};

use crate::ResponseBody;

/// `application/json`, the content type of every locally generated error body.
pub const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");

/// An HTTP error response whose body is `{"detail":"<detail>"}` (`application/json`).
///
/// Every HTTP-level failure that a gateway layer answers by itself uses this shape, so clients can
/// read one format; the text is short and never contains token contents or backend addresses.
///
/// ```
/// use http::StatusCode;
/// use http_body_util::Empty;
/// use bytes::Bytes;
///
/// let res = mcp_core::detail_response::<Empty<Bytes>>(StatusCode::NOT_FOUND, "Server not found");
/// assert_eq!(res.status(), StatusCode::NOT_FOUND);
/// assert_eq!(res.headers()["content-type"], "application/json");
/// ```
pub fn detail_response<B>(status: StatusCode, detail: &str) -> Response<ResponseBody<B>> {
    let body = detail_body(detail);
    let mut res = Response::new(ResponseBody::local(body));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, APPLICATION_JSON);
    res
}

/// The bytes of `{"detail":"<detail>"}`, with `detail` JSON-escaped.
pub fn detail_body(detail: &str) -> Vec<u8> {
    // serde_json escapes quotes and control characters; a `&str` cannot fail to serialise.
    let escaped = serde_json::to_string(detail).unwrap_or_else(|_| String::from("\"\""));
    format!("{{\"detail\":{escaped}}}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_body_is_exact_and_escaped() {
        assert_eq!(
            detail_body("Server not found"),
            br#"{"detail":"Server not found"}"#
        );
        assert_eq!(detail_body("a\"b"), br#"{"detail":"a\"b"}"#);
    }
}
