//! `requests()` records every HTTP request as it arrived; the `headers` tool echoes them.

use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::json;

use crate::{clients, eras::call, raw_http};

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

#[tokio::test]
async fn modern_calls_are_recorded_with_their_routing_headers() {
    let backend = TestBackend::start(BackendSpec::modern("rec").extra_tools(1)).await;
    let (client, _) =
        clients::modern_with_headers(&backend.url(), &[("traceparent", TRACEPARENT)]).await;
    client
        .call_tool(call("get-sum", json!({ "a": 1, "b": 2 })))
        .await
        .expect("get-sum");

    let requests = backend.requests();
    assert_eq!(
        requests[0].jsonrpc_method().as_deref(),
        Some("server/discover")
    );
    let calls = backend.requests_for("tools/call");
    assert_eq!(calls.len(), 1);
    let recorded = &calls[0];
    assert_eq!(recorded.method, http::Method::POST);
    assert_eq!(recorded.path(), "/mcp");
    assert_eq!(recorded.called_name().as_deref(), Some("get-sum"));
    assert_eq!(recorded.header("mcp-method"), Some("tools/call"));
    assert_eq!(recorded.header("Mcp-Name"), Some("get-sum"));
    assert_eq!(recorded.header("MCP-Protocol-Version"), Some("2026-07-28"));
    assert_eq!(recorded.header("traceparent"), Some(TRACEPARENT));
    assert!(
        requests
            .iter()
            .all(|request| !request.has_header("authorization"))
    );
    assert!(
        requests
            .iter()
            .all(|request| !request.has_header("mcp-session-id"))
    );

    backend.clear_requests();
    assert!(backend.requests().is_empty());
    client.cancel().await.expect("cancel");
}

#[tokio::test]
async fn authorization_is_visible_when_sent() {
    let backend = TestBackend::start(BackendSpec::both("auth")).await;
    raw_http::post(
        &backend.url(),
        &[("authorization", "Bearer leaked")],
        &json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }),
    )
    .await;
    let requests = backend.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].header("Authorization"), Some("Bearer leaked"));
    assert_eq!(requests[0].jsonrpc_method().as_deref(), Some("ping"));
}

#[tokio::test]
async fn headers_tool_returns_the_call_headers() {
    let backend = TestBackend::start(BackendSpec::both("hdr")).await;
    let (client, _) =
        clients::modern_with_headers(&backend.url(), &[("x-test-marker", "m-1")]).await;
    let result = client
        .call_tool(call("headers", json!({})))
        .await
        .expect("headers");
    let text = crate::eras::first_text(&result);
    assert!(text.starts_with("hdr: {"), "{text}");
    let headers = &result.structured_content.expect("structured")["headers"];
    assert_eq!(headers["x-test-marker"], "m-1");
    assert_eq!(headers["mcp-name"], "headers");
    assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
    client.cancel().await.expect("cancel");
}

#[tokio::test]
async fn recording_can_be_turned_off() {
    let backend = TestBackend::start(BackendSpec::modern("quiet").record_requests(false)).await;
    let response = raw_http::modern_request(&backend.url(), 1, "tools/list", json!({})).await;
    assert_eq!(response.reply()["result"]["tools"][0]["name"], "echo");
    assert!(backend.requests().is_empty());
}

#[test]
fn backend_handles_can_be_shared_between_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<TestBackend>();
    assert_send_sync::<mcp_test_backends::RecordedRequest>();
}
