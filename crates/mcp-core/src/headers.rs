//! MCP HTTP header names and the `=?base64?…?=` value codec of the 2026-07-28 standard headers.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderName, HeaderValue};

/// `MCP-Protocol-Version`: the request's protocol revision.
pub const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Session-Id`: the legacy session id.
pub const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `Mcp-Method`: mirrors the JSON-RPC `method` (2026-07-28).
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name`: mirrors `params.name` / `params.uri` / `params.taskId` (2026-07-28).
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// `Last-Event-ID`: SSE resumption (legacy revisions only).
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// Prefix of the `Mcp-Param-{Name}` headers that mirror annotated tool arguments (lowercase, as
/// [`HeaderName`]s are stored).
pub const MCP_PARAM_PREFIX: &str = "mcp-param-";

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Whether a header name is one of the MCP headers the gateway owns or mirrors
/// (`MCP-Protocol-Version`, `Mcp-Session-Id`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`).
pub fn is_mcp_header(name: &HeaderName) -> bool {
    let s = name.as_str();
    s.starts_with("mcp-")
}

fn needs_base64(value: &str) -> bool {
    !value.is_ascii()
        || value.bytes().any(|b| b.is_ascii_control())
        || value.starts_with([' ', '\t'])
        || value.ends_with([' ', '\t'])
        || is_sentinel(value)
}

fn is_sentinel(value: &str) -> bool {
    value.len() >= SENTINEL_START.len() + SENTINEL_END.len()
        && value.starts_with(SENTINEL_START)
        && value.ends_with(SENTINEL_END)
}

/// Encodes a value for an MCP standard header (`Mcp-Name`, `Mcp-Param-*`).
///
/// Plain ASCII is sent as is; a value that is non-ASCII, contains control characters, has leading
/// or trailing whitespace, or itself looks like the sentinel is sent as `=?base64?<base64>?=`.
///
/// ```
/// use mcp_core::headers::{decode_header_value, encode_header_value};
///
/// assert_eq!(encode_header_value("get_weather"), "get_weather");
/// let v = encode_header_value("météo");
/// assert_eq!(v, "=?base64?bcOpdMOpbw==?=");
/// assert_eq!(decode_header_value(&v).unwrap(), "météo");
/// ```
pub fn encode_header_value(value: &str) -> HeaderValue {
    if !needs_base64(value)
        && let Ok(v) = HeaderValue::from_str(value)
    {
        return v;
    }
    let encoded = format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(value));
    // base64 output and the sentinel are visible ASCII, always a valid header value.
    HeaderValue::from_str(&encoded).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Why a received MCP header value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderValueError {
    /// Bytes outside visible ASCII, space and tab.
    #[error("header value has invalid characters")]
    InvalidCharacters,
    /// The sentinel wraps something that is not base64 of UTF-8.
    #[error("header value has an invalid base64 encoding")]
    InvalidBase64,
}

/// Decodes an MCP standard header value, undoing the base64 sentinel form.
///
/// Servers must decode before comparing a header with the body (2026-07-28).
pub fn decode_header_value(value: &HeaderValue) -> Result<Cow<'_, str>, HeaderValueError> {
    let text = value
        .to_str()
        .map_err(|_| HeaderValueError::InvalidCharacters)?;
    if !is_sentinel(text) {
        return Ok(Cow::Borrowed(text));
    }
    let inner = &text[SENTINEL_START.len()..text.len() - SENTINEL_END.len()];
    let bytes = STANDARD
        .decode(inner)
        .map_err(|_| HeaderValueError::InvalidBase64)?;
    String::from_utf8(bytes)
        .map(Cow::Owned)
        .map_err(|_| HeaderValueError::InvalidBase64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_only_what_needs_it() {
        assert_eq!(encode_header_value("a-b.c_d"), "a-b.c_d");
        assert_eq!(encode_header_value("file:///x y"), "file:///x y");
        for tricky in [
            " lead",
            "trail ",
            "tab\tin",
            "new\nline",
            "ünï",
            "=?base64?eA==?=",
        ] {
            let v = encode_header_value(tricky);
            assert!(
                v.to_str().expect("ascii").starts_with("=?base64?"),
                "{tricky}"
            );
            assert_eq!(decode_header_value(&v).expect("decodes"), tricky);
        }
    }

    #[test]
    fn rejects_bad_sentinels_and_bytes() {
        let bad = HeaderValue::from_static("=?base64?***?=");
        assert_eq!(
            decode_header_value(&bad),
            Err(HeaderValueError::InvalidBase64)
        );
        let not_utf8 = HeaderValue::from_static("=?base64?/w==?=");
        assert_eq!(
            decode_header_value(&not_utf8),
            Err(HeaderValueError::InvalidBase64)
        );
        let opaque = HeaderValue::from_bytes(b"caf\xe9").expect("obs-text is allowed by http");
        assert_eq!(
            decode_header_value(&opaque),
            Err(HeaderValueError::InvalidCharacters)
        );
    }

    #[test]
    fn recognises_mcp_headers() {
        assert!(is_mcp_header(&MCP_NAME));
        assert!(is_mcp_header(&HeaderName::from_static("mcp-param-region")));
        assert!(!is_mcp_header(&http::header::AUTHORIZATION));
    }
}
