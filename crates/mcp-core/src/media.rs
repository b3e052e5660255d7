//! Media types in `Content-Type` / `Accept` values: the type without its parameters, compared
//! case-insensitively (RFC 9110 §8.3.1).

use http::HeaderValue;

/// `application/json`, the media type of every MCP POST body.
pub const JSON: &str = "application/json";

/// The media type of a header value without its parameters, trimmed:
/// `application/json; charset=utf-8` gives `application/json`.
///
/// ```
/// assert_eq!(mcp_core::media::essence(" Application/JSON ; charset=utf-8"), "Application/JSON");
/// assert_eq!(mcp_core::media::essence(""), "");
/// ```
pub fn essence(value: &str) -> &str {
    value.split(';').next().unwrap_or("").trim()
}

/// Whether a `Content-Type` value names `media_type` (parameters ignored, case-insensitive); a
/// value that is not visible ASCII never does.
///
/// ```
/// use http::HeaderValue;
/// use mcp_core::media::{JSON, is_media_type};
///
/// assert!(is_media_type(&HeaderValue::from_static("application/json; charset=utf-8"), JSON));
/// assert!(is_media_type(&HeaderValue::from_static("APPLICATION/JSON"), JSON));
/// assert!(!is_media_type(&HeaderValue::from_static("text/plain"), JSON));
/// assert!(!is_media_type(&HeaderValue::from_static("application/json-seq"), JSON));
/// ```
pub fn is_media_type(value: &HeaderValue, media_type: &str) -> bool {
    value
        .to_str()
        .is_ok_and(|v| essence(v).eq_ignore_ascii_case(media_type))
}
