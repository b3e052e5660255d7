//! Media types in `Content-Type` / `Accept` values: the type without its parameters, compared
//! case-insensitively (RFC 9110 §8.3.1).

use http::{HeaderMap, HeaderValue, header};

/// `application/json`, the media type of every MCP POST body.
pub const JSON: &str = "application/json";

/// `text/event-stream`, the media type of an SSE stream.
pub const EVENT_STREAM: &str = "text/event-stream";

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

/// What an MCP message body is, by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaKind {
    /// `application/json`: one JSON-RPC message (or a batch).
    Json,
    /// `text/event-stream`: an SSE stream of messages.
    EventStream,
    /// Anything else, or no (readable) `Content-Type`.
    Other,
}

/// The [`MediaKind`] of a message's `Content-Type` header (parameters ignored, case-insensitive).
///
/// ```
/// use http::{HeaderMap, HeaderValue, header};
/// use mcp_core::media::{MediaKind, media_kind};
///
/// let mut h = HeaderMap::new();
/// assert_eq!(media_kind(&h), MediaKind::Other);
/// h.insert(header::CONTENT_TYPE, HeaderValue::from_static("Text/Event-Stream; charset=utf-8"));
/// assert_eq!(media_kind(&h), MediaKind::EventStream);
/// h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
/// assert_eq!(media_kind(&h), MediaKind::Json);
/// ```
pub fn media_kind(headers: &HeaderMap) -> MediaKind {
    match headers.get(header::CONTENT_TYPE) {
        Some(v) if is_media_type(v, JSON) => MediaKind::Json,
        Some(v) if is_media_type(v, EVENT_STREAM) => MediaKind::EventStream,
        _ => MediaKind::Other,
    }
}
