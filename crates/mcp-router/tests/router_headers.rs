//! The upstream header policy end to end (crates/mcp-router `upstream/request.rs`): the client's
//! `Authorization` never reaches a backend unless `headers.passthrough` names it,
//! `headers.add`/`headers.remove` apply per backend, W3C trace context is propagated, and the
//! gateway's own MCP headers cannot be overridden by configuration.

use mcp_test_backends::{BackendSpec, RecordedRequest, TestBackend};
use mcp_test_support::stack::{Gateway, bearer, vhost_config};
use serde_json::{Value, json};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// `alpha` (modern) and `beta` (legacy) with the given per-backend header policies.
async fn gateway(alpha_headers: Value, beta_headers: Value) -> (TestBackend, TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = vhost_config(json!({"backends": {
        "alpha": {"url": alpha.url(), "timeout_ms": 5000, "headers": alpha_headers},
        "beta": {"url": beta.url(), "timeout_ms": 5000, "headers": beta_headers}}}));
    let gw = Gateway::start(&[("alice", config)]).await;
    (alpha, beta, gw)
}

/// Calls `<backend>-headers` with `extra` client headers; the headers the tool call arrived with.
async fn seen_by_tool(gw: &Gateway, backend: &str, extra: &[(&str, &str)]) -> Value {
    let params = json!({"name": format!("{backend}-headers"), "arguments": {}});
    let reply = gw
        .modern_with("alice", "vh", "tools/call", params, extra)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let headers = reply.json()["result"]["structuredContent"]["headers"].clone();
    assert!(headers.is_object(), "{}", reply.text());
    headers
}

fn every_request(backend: &TestBackend, check: impl Fn(&RecordedRequest) -> bool) -> bool {
    let requests = backend.requests();
    !requests.is_empty() && requests.iter().all(check)
}

#[tokio::test]
async fn the_client_token_never_reaches_a_backend_by_default() {
    let (alpha, beta, gw) = gateway(json!({}), json!({})).await;
    for backend in ["alpha", "beta"] {
        let headers = seen_by_tool(&gw, backend, &[("x-tenant", "t1"), ("cookie", "c=1")]).await;
        assert!(
            headers.get("authorization").is_none(),
            "{backend}: {headers}"
        );
        assert!(
            headers.get("x-tenant").is_none(),
            "{backend}: not named in passthrough: {headers}"
        );
        assert!(headers.get("cookie").is_none(), "{backend}: {headers}");
    }
    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert_eq!(list.status, 200);
    for backend in [&alpha, &beta] {
        assert!(
            every_request(backend, |r| !r.has_header("authorization")),
            "{}",
            backend.name()
        );
    }
}

#[tokio::test]
async fn passthrough_authorization_forwards_the_client_token_to_that_backend_only() {
    let (alpha, beta, gw) = gateway(
        json!({"passthrough": ["authorization", "x-tenant"]}),
        json!({}),
    )
    .await;
    let token = bearer("alice");
    let headers = seen_by_tool(&gw, "alpha", &[("x-tenant", "t1")]).await;
    assert_eq!(headers["authorization"], token.as_str());
    assert_eq!(headers["x-tenant"], "t1");
    let headers = seen_by_tool(&gw, "beta", &[("x-tenant", "t1")]).await;
    assert!(headers.get("authorization").is_none(), "{headers}");
    assert!(every_request(&alpha, |r| r.header("authorization")
        == Some(token.as_str())));
    assert!(every_request(&beta, |r| !r.has_header("authorization")));
}

#[tokio::test]
async fn headers_add_reaches_the_backend_but_cannot_override_mcp_headers() {
    let (alpha, beta, gw) = gateway(
        json!({"add": {"x-api-key": "alpha-key", "mcp-method": "evil", "content-type": "text/plain"}}),
        json!({"add": {"authorization": "Bearer backend-credential"}}),
    )
    .await;
    let headers = seen_by_tool(&gw, "alpha", &[]).await;
    assert_eq!(headers["x-api-key"], "alpha-key");
    assert_eq!(headers["mcp-method"], "tools/call");
    assert_eq!(headers["mcp-name"], "headers");
    assert_eq!(headers["content-type"], "application/json");
    let headers = seen_by_tool(&gw, "beta", &[]).await;
    assert_eq!(
        headers["authorization"], "Bearer backend-credential",
        "the backend's own credential, not the client's"
    );
    assert!(headers.get("x-api-key").is_none());
    assert!(every_request(&alpha, |r| r.header("x-api-key") == Some("alpha-key")));
    assert!(every_request(&beta, |r| r.header("authorization")
        == Some("Bearer backend-credential")));
}

#[tokio::test]
async fn trace_context_from_the_client_reaches_every_backend() {
    let (alpha, beta, gw) = gateway(json!({}), json!({})).await;
    let trace = [
        ("traceparent", TRACEPARENT),
        ("tracestate", "vendor=1"),
        ("baggage", "k=v"),
    ];
    for backend in ["alpha", "beta"] {
        let headers = seen_by_tool(&gw, backend, &trace).await;
        assert_eq!(headers["traceparent"], TRACEPARENT, "{backend}");
        assert_eq!(headers["tracestate"], "vendor=1", "{backend}");
        assert_eq!(headers["baggage"], "k=v", "{backend}");
    }
    alpha.clear_requests();
    beta.clear_requests();
    let list = gw
        .modern_with("alice", "vh", "tools/list", json!({}), &trace)
        .await;
    assert_eq!(list.status, 200);
    for backend in [&alpha, &beta] {
        assert!(
            every_request(backend, |r| r.header("traceparent") == Some(TRACEPARENT)),
            "{}",
            backend.name()
        );
    }
}

#[tokio::test]
async fn headers_remove_strips_what_would_otherwise_be_sent() {
    let (_alpha, _beta, gw) = gateway(json!({"remove": ["traceparent"]}), json!({})).await;
    let headers = seen_by_tool(&gw, "alpha", &[("traceparent", TRACEPARENT)]).await;
    assert!(headers.get("traceparent").is_none(), "{headers}");
    let headers = seen_by_tool(&gw, "beta", &[("traceparent", TRACEPARENT)]).await;
    assert_eq!(headers["traceparent"], TRACEPARENT);
}

#[tokio::test]
async fn mcp_param_headers_reach_a_modern_backend_on_tools_call() {
    let (_alpha, _beta, gw) = gateway(json!({}), json!({})).await;
    let headers = seen_by_tool(&gw, "alpha", &[("mcp-param-region", "eu")]).await;
    assert_eq!(headers["mcp-param-region"], "eu");
    assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
}
