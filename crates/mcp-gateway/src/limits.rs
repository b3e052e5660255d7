//! Request checks the gateway makes before any layer runs: `Origin` (403), `Mcp-*` header count
//! and size (431), declared body size (413). A body without `Content-Length` that grows past the
//! limit is cut by the router, which answers 413 as well.

use http::{HeaderMap, StatusCode, header};
use mcp_router::OriginPolicy;

use crate::config::GatewayConfig;

/// Detail of the 403 for a refused `Origin`.
pub const DETAIL_ORIGIN: &str = "Origin not allowed";
/// Detail of the 413 for a declared body over the limit.
pub const DETAIL_BODY_TOO_LARGE: &str = "Request body too large";
/// Detail of the 431 for too many `Mcp-*` headers.
pub const DETAIL_TOO_MANY_MCP_HEADERS: &str = "Too many Mcp-* headers";
/// Detail of the 431 for an `Mcp-*` header value over the limit.
pub const DETAIL_MCP_HEADER_TOO_LARGE: &str = "Mcp-* header too large";

/// The request limits of `[limits]` and `[security]`.
#[derive(Clone, Debug)]
pub(crate) struct RequestLimits {
    pub(crate) origins: OriginPolicy,
    pub(crate) max_body_bytes: u64,
    pub(crate) max_mcp_headers: usize,
    pub(crate) max_mcp_header_bytes: usize,
}

impl RequestLimits {
    pub(crate) fn from_config(config: &GatewayConfig) -> Self {
        Self {
            origins: origin_policy(&config.security.allowed_origins),
            max_body_bytes: u64::try_from(config.limits.max_body_bytes).unwrap_or(u64::MAX),
            max_mcp_headers: config.limits.max_mcp_headers,
            max_mcp_header_bytes: config.limits.max_mcp_header_bytes,
        }
    }

    /// The refusal for a request head, if any: `(status, detail)`.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Option<(StatusCode, &'static str)> {
        if let Some(origin) = headers.get(header::ORIGIN)
            && !self.origins.allows(origin)
        {
            return Some((StatusCode::FORBIDDEN, DETAIL_ORIGIN));
        }
        let mut count = 0usize;
        for (name, value) in headers {
            if name.as_str().starts_with("mcp-") {
                count += 1;
                if value.len() > self.max_mcp_header_bytes {
                    return Some((
                        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                        DETAIL_MCP_HEADER_TOO_LARGE,
                    ));
                }
            }
        }
        if count > self.max_mcp_headers {
            return Some((
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                DETAIL_TOO_MANY_MCP_HEADERS,
            ));
        }
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|len| len > self.max_body_bytes) {
            return Some((StatusCode::PAYLOAD_TOO_LARGE, DETAIL_BODY_TOO_LARGE));
        }
        None
    }
}

/// `["*"]` accepts every origin; anything else is an allow-list.
pub(crate) fn origin_policy(allowed: &[String]) -> OriginPolicy {
    if allowed.iter().any(|o| o == "*") {
        OriginPolicy::any()
    } else {
        OriginPolicy::allow(allowed)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn limits() -> RequestLimits {
        RequestLimits {
            origins: origin_policy(&["http://localhost".to_owned()]),
            max_body_bytes: 10,
            max_mcp_headers: 2,
            max_mcp_header_bytes: 5,
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    http::HeaderName::from_static(k),
                    HeaderValue::from_static(v),
                )
            })
            .collect()
    }

    #[test]
    fn each_limit() {
        let l = limits();
        assert_eq!(
            l.check(&headers(&[("origin", "http://localhost:3000")])),
            None
        );
        assert_eq!(
            l.check(&headers(&[("origin", "https://evil.example")])),
            Some((StatusCode::FORBIDDEN, DETAIL_ORIGIN))
        );
        assert_eq!(
            l.check(&headers(&[("mcp-method", "tools/list")])),
            Some((
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                DETAIL_MCP_HEADER_TOO_LARGE
            ))
        );
        assert_eq!(
            l.check(&headers(&[("mcp-a", "1"), ("mcp-b", "2"), ("mcp-c", "3")])),
            Some((
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                DETAIL_TOO_MANY_MCP_HEADERS
            ))
        );
        assert_eq!(
            l.check(&headers(&[("content-length", "11")])),
            Some((StatusCode::PAYLOAD_TOO_LARGE, DETAIL_BODY_TOO_LARGE))
        );
        assert_eq!(l.check(&headers(&[("content-length", "10")])), None);
        assert!(
            origin_policy(&["*".to_owned()]).allows(&HeaderValue::from_static("https://x.example"))
        );
    }
}
