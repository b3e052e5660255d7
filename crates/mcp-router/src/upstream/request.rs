//! Building the HTTP request for a backend: the per-backend header policy, trace context, and the
//! MCP headers the gateway owns.
//!
//! Order of precedence, lowest first: `headers.passthrough` (copied from the client's request),
//! `headers.add` (static values from the config, e.g. the backend's own credential), the W3C trace
//! context (`traceparent`, `tracestate`, `baggage`) and, for modern backends, the client's
//! `Mcp-Param-*` headers, then `headers.remove`, and last the headers the gateway owns
//! (`Content-Type`, `Accept`, `User-Agent`, `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`,
//! `Mcp-Session-Id`, and `Via`: the client request's entries, then this deployment's, appended
//! by the pool, see `crate::hops`), which neither passthrough nor add can override. The client's
//! `Authorization` header is only forwarded when the backend's `passthrough` names it (the spec
//! forbids token passthrough; an operator must opt in per backend). Hop-by-hop headers are never
//! copied.

use bytes::Bytes;
use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue, Request};
use http_body_util::Full;
use mcp_config_store::HeaderPolicy;
use url::Url;

const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// Parsed once: a lookup by `&str` would parse the name on every request.
static TRACE_CONTEXT: [HeaderName; 3] = [
    HeaderName::from_static("traceparent"),
    HeaderName::from_static("tracestate"),
    HeaderName::from_static("baggage"),
];

/// Headers the gateway sets itself on every upstream request.
fn gateway_owned(name: &HeaderName) -> bool {
    name == header::CONTENT_TYPE
        || name == header::ACCEPT
        || name == header::USER_AGENT
        || name == header::VIA
        || name.as_str() == "last-event-id"
        || mcp_core::headers::is_mcp_header(name)
}

/// Sets `extra` (headers plugins asked for) on `request`, replacing same-named ones; hop-by-hop
/// and gateway-owned headers (content type, `Mcp-*`, …) are never a plugin's to set.
pub(crate) fn add_headers(request: &mut Request<Full<Bytes>>, extra: Option<&HeaderMap>) {
    for (name, value) in extra.into_iter().flatten() {
        if HOP_BY_HOP.contains(&name.as_str()) || gateway_owned(name) {
            continue;
        }
        request.headers_mut().insert(name.clone(), value.clone());
    }
}

/// What to send: the URL, the body and the gateway-owned MCP headers for this message.
pub(crate) struct Outgoing<'a> {
    pub(crate) url: &'a Url,
    pub(crate) body: Vec<u8>,
    pub(crate) mcp_headers: Vec<(HeaderName, HeaderValue)>,
    /// Forward the client's `Mcp-Param-*` headers (modern backends, `tools/call`).
    pub(crate) forward_param_headers: bool,
}

/// Builds the request for `out`, applying `policy` to the client's `downstream` headers.
pub(crate) fn build(
    out: Outgoing<'_>,
    downstream: &HeaderMap,
    policy: &HeaderPolicy,
) -> Request<Full<Bytes>> {
    let mut headers = HeaderMap::new();
    for name in &policy.passthrough {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        if HOP_BY_HOP.contains(&name.as_str()) || gateway_owned(&name) {
            continue;
        }
        for value in downstream.get_all(&name) {
            headers.append(name.clone(), value.clone());
        }
    }
    for (name, value) in &policy.add {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) && !HOP_BY_HOP.contains(&name.as_str())
            && !gateway_owned(&name)
        {
            headers.insert(name, value);
        }
    }
    for name in &TRACE_CONTEXT {
        if let Some(value) = downstream.get(name) {
            headers.insert(name.clone(), value.clone());
        }
    }
    // With spans on, the backend's parent is the gateway's client span, not the client's span.
    if let Some(context) = crate::telemetry::current_trace_context() {
        headers.remove(&TRACE_CONTEXT[1]);
        for (name, value) in context {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
    }
    if out.forward_param_headers {
        for (name, value) in downstream {
            if name
                .as_str()
                .starts_with(mcp_core::headers::MCP_PARAM_PREFIX)
            {
                headers.append(name.clone(), value.clone());
            }
        }
    }
    for name in &policy.remove {
        if let Ok(name) = HeaderName::from_bytes(name.as_bytes())
            && !name
                .as_str()
                .starts_with(mcp_core::headers::MCP_PARAM_PREFIX)
        {
            headers.remove(name);
        }
    }
    // The intermediaries the client's request passed: with ours after them, the next gateway
    // counts the whole chain (`crate::hops`).
    for value in downstream.get_all(header::VIA) {
        headers.append(header::VIA, value.clone());
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static(concat!("mcp-router/", env!("CARGO_PKG_VERSION"))),
    );
    for (name, value) in out.mcp_headers {
        headers.insert(name, value);
    }
    let mut request = Request::new(Full::new(Bytes::from(out.body)));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = out
        .url
        .as_str()
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("http://invalid.invalid/"));
    *request.headers_mut() = headers;
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(json: &str) -> HeaderPolicy {
        serde_json::from_str(json).expect("policy")
    }

    fn downstream() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer client-token"),
        );
        h.insert("x-tenant", HeaderValue::from_static("t1"));
        h.insert(
            "traceparent",
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        h.insert("mcp-param-region", HeaderValue::from_static("eu"));
        h.insert("mcp-session-id", HeaderValue::from_static("client-session"));
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        h
    }

    fn out(url: &Url, forward: bool) -> Outgoing<'_> {
        Outgoing {
            url,
            body: b"{}".to_vec(),
            mcp_headers: vec![(
                mcp_core::headers::MCP_METHOD,
                HeaderValue::from_static("tools/call"),
            )],
            forward_param_headers: forward,
        }
    }

    #[test]
    fn never_forwards_authorization_by_default() {
        let url = Url::parse("http://127.0.0.1:1/mcp").expect("url");
        let req = build(out(&url, true), &downstream(), &HeaderPolicy::default());
        let h = req.headers();
        assert!(h.get(header::AUTHORIZATION).is_none());
        assert!(h.get("x-tenant").is_none());
        assert!(
            h.get("mcp-session-id").is_none(),
            "client MCP headers are never copied"
        );
        assert!(h.get(header::CONNECTION).is_none());
        assert_eq!(
            h["traceparent"],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(h["mcp-param-region"], "eu");
        assert_eq!(h["mcp-method"], "tools/call");
        assert_eq!(h[header::ACCEPT], "application/json, text/event-stream");
        assert_eq!(req.uri(), "http://127.0.0.1:1/mcp");
    }

    #[test]
    fn policy_passthrough_add_remove() {
        let url = Url::parse("http://127.0.0.1:1/mcp").expect("url");
        let p = policy(
            r#"{"passthrough":["Authorization","x-tenant","mcp-session-id"],
                "add":{"x-api-key":"k","mcp-method":"evil","content-type":"text/plain"},
                "remove":["traceparent","x-tenant"]}"#,
        );
        let req = build(out(&url, false), &downstream(), &p);
        let h = req.headers();
        assert_eq!(h[header::AUTHORIZATION], "Bearer client-token");
        assert_eq!(h["x-api-key"], "k");
        assert!(h.get("x-tenant").is_none());
        assert!(h.get("traceparent").is_none());
        assert!(
            h.get("mcp-param-region").is_none(),
            "not forwarded when not asked"
        );
        assert!(h.get("mcp-session-id").is_none());
        assert_eq!(h["mcp-method"], "tools/call");
        assert_eq!(h[header::CONTENT_TYPE], "application/json");
    }
}
