//! The stateless endpoint's request validation (2026-07-28 "Server Validation", book: docs/src/failure-modes.md Origin
//! row, era detection, docs/src/eras.md), driven with raw requests through the whole gateway stack: every row
//! asserts the HTTP status, the JSON-RPC code and message, and that no backend was asked.

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::Reply;
use mcp_test_support::stack::{Gateway, modern_request, user_config};
use serde_json::{Value, json};

/// One modern backend behind `vh`; the backend is kept to check nothing reached it.
async fn gateway() -> (TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let gw = Gateway::start(&[("alice", user_config(&[("alpha", alpha.url())]))]).await;
    (alpha, gw)
}

/// The headers and body of a well-formed request, as owned strings to edit.
fn request(method: &str, params: Value) -> (Vec<(String, String)>, String) {
    let (headers, body) = modern_request(method, params);
    (
        headers
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        body,
    )
}

fn without(headers: &[(String, String)], name: &str) -> Vec<(String, String)> {
    headers.iter().filter(|(k, _)| k != name).cloned().collect()
}

fn with(headers: &[(String, String)], name: &str, value: &str) -> Vec<(String, String)> {
    let mut out = without(headers, name);
    out.push((name.to_owned(), value.to_owned()));
    out
}

async fn post(gw: &Gateway, headers: &[(String, String)], body: &str) -> Reply {
    let refs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    gw.raw("alice", "vh", "POST", &refs, body).await
}

/// Asserts status, JSON-RPC code and message, and the echoed id.
fn assert_rejected(reply: &Reply, status: u16, code: i64, message: &str, id: Value) {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["message"], message, "{body}");
    assert_eq!(body["id"], id, "{body}");
    assert!(body.get("result").is_none());
}

fn assert_untouched(alpha: &TestBackend) {
    assert!(alpha.requests().is_empty(), "{:?}", alpha.requests());
}

#[tokio::test]
async fn a_well_formed_request_passes() {
    let (_alpha, gw) = gateway().await;
    let (headers, body) = request(
        "tools/call",
        json!({"name": "alpha-echo", "arguments": {"text": "ok"}}),
    );
    let reply = post(&gw, &headers, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["result"]["content"][0]["text"], "alpha: ok");
}

#[tokio::test]
async fn a_missing_protocol_version_header_is_a_header_mismatch() {
    let (alpha, gw) = gateway().await;
    let (headers, body) = request("tools/list", json!({}));
    let reply = post(&gw, &without(&headers, "mcp-protocol-version"), &body).await;
    assert_rejected(
        &reply,
        400,
        -32020,
        "missing required MCP-Protocol-Version header",
        json!(1),
    );
    assert_untouched(&alpha);
}

#[tokio::test]
async fn a_protocol_version_header_that_differs_from_meta_is_a_header_mismatch() {
    let (alpha, gw) = gateway().await;
    let mut meta = mcp_test_support::stack::modern_meta();
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let (headers, body) = request("tools/list", json!({"_meta": meta}));
    let reply = post(&gw, &headers, &body).await;
    assert_rejected(
        &reply,
        400,
        -32020,
        "MCP-Protocol-Version header `2026-07-28` does not match _meta protocolVersion `2025-11-25`",
        json!(1),
    );
    assert_untouched(&alpha);
}

#[tokio::test]
async fn a_missing_or_different_method_header_is_a_header_mismatch() {
    let (alpha, gw) = gateway().await;
    let (headers, body) = request("tools/list", json!({}));
    let reply = post(&gw, &without(&headers, "mcp-method"), &body).await;
    assert_rejected(
        &reply,
        400,
        -32020,
        "missing required Mcp-Method header",
        json!(1),
    );
    let reply = post(&gw, &with(&headers, "mcp-method", "prompts/list"), &body).await;
    assert_rejected(
        &reply,
        400,
        -32020,
        "Mcp-Method header `prompts/list` does not match body method `tools/list`",
        json!(1),
    );
    let mut repeated = headers.clone();
    repeated.push(("mcp-method".to_owned(), "tools/list".to_owned()));
    let reply = post(&gw, &repeated, &body).await;
    assert_rejected(&reply, 400, -32020, "duplicate mcp-method header", json!(1));
    assert_untouched(&alpha);
}

#[tokio::test]
async fn a_missing_or_different_name_header_is_a_header_mismatch() {
    let (alpha, gw) = gateway().await;
    let (headers, body) = request(
        "tools/call",
        json!({"name": "alpha-echo", "arguments": {"text": "x"}}),
    );
    let reply = post(&gw, &without(&headers, "mcp-name"), &body).await;
    assert_rejected(
        &reply,
        400,
        -32020,
        "missing required Mcp-Name header for `tools/call`",
        json!(1),
    );
    let reply = post(&gw, &with(&headers, "mcp-name", "alpha-add"), &body).await;
    assert_rejected(
        &reply,
        400,
        -32020,
        "Mcp-Name header `alpha-add` does not match body value `alpha-echo`",
        json!(1),
    );
    // resources/read names the URI.
    let (headers, body) = request(
        "resources/read",
        json!({"uri": "alpha-test://alpha/static"}),
    );
    let reply = post(
        &gw,
        &with(&headers, "mcp-name", "alpha-test://alpha/other"),
        &body,
    )
    .await;
    assert_rejected(
        &reply,
        400,
        -32020,
        "Mcp-Name header `alpha-test://alpha/other` does not match body value `alpha-test://alpha/static`",
        json!(1),
    );
    assert_untouched(&alpha);
}

#[tokio::test]
async fn an_unsupported_protocol_version_names_the_supported_ones() {
    let (alpha, gw) = gateway().await;
    let (headers, body) = request("tools/list", json!({}));
    for requested in ["2099-01-01", "2025-11-25"] {
        let reply = post(
            &gw,
            &with(&headers, "mcp-protocol-version", requested),
            &body,
        )
        .await;
        assert_rejected(
            &reply,
            400,
            -32022,
            &format!("Unsupported protocol version: {requested}"),
            json!(1),
        );
        assert_eq!(
            reply.json()["error"]["data"],
            json!({"supported": ["2026-07-28"], "requested": requested})
        );
    }
    assert_untouched(&alpha);
}

#[tokio::test]
async fn missing_required_meta_keys_are_invalid_params() {
    let (alpha, gw) = gateway().await;
    let cases = [
        (
            json!({}),
            "Missing required _meta field: io.modelcontextprotocol/protocolVersion",
        ),
        (
            json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
            "Missing required _meta field: io.modelcontextprotocol/protocolVersion",
        ),
        (
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
            "Missing required _meta field: io.modelcontextprotocol/clientCapabilities",
        ),
    ];
    for (params, message) in cases {
        let (headers, _) = request("tools/list", json!({}));
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": params})
            .to_string();
        let reply = post(&gw, &headers, &body).await;
        assert_rejected(&reply, 400, -32602, message, json!(7));
    }
    // No params at all.
    let (headers, _) = request("tools/list", json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}).to_string();
    let reply = post(&gw, &headers, &body).await;
    assert_rejected(
        &reply,
        400,
        -32602,
        "Missing required _meta field: io.modelcontextprotocol/protocolVersion",
        json!(8),
    );
    assert_untouched(&alpha);
}

#[tokio::test]
async fn an_unknown_method_is_not_found() {
    let (alpha, gw) = gateway().await;
    for method in ["foo/bar", "ping"] {
        let (headers, body) = request(method, json!({}));
        let reply = post(&gw, &headers, &body).await;
        assert_rejected(
            &reply,
            404,
            -32601,
            &format!("Method not found: {method}"),
            json!(1),
        );
    }
    assert_untouched(&alpha);
}

#[tokio::test]
async fn get_and_delete_are_method_not_allowed() {
    let (alpha, gw) = gateway().await;
    let (headers, _) = request("tools/list", json!({}));
    for method in ["GET", "DELETE"] {
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let reply = gw.raw("alice", "vh", method, &refs, "").await;
        assert_eq!(reply.status, 405, "{method}: {}", reply.text());
        assert_eq!(reply.header("allow"), Some("POST"), "{method}");
        assert_eq!(reply.json()["error"]["code"], -32600, "{method}");
    }
    assert_untouched(&alpha);
}

#[tokio::test]
async fn a_foreign_origin_is_forbidden_by_default() {
    let (alpha, gw) = gateway().await;
    let (headers, body) = request("tools/list", json!({}));
    let reply = post(
        &gw,
        &with(&headers, "origin", "https://evil.example"),
        &body,
    )
    .await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert_eq!(
        reply.json()["error"],
        json!({"code": -32600, "message": "Origin not allowed"})
    );
    // Also before the method check: a browser GET gets 403, not 405.
    let reply = gw
        .raw(
            "alice",
            "vh",
            "GET",
            &[("origin", "https://evil.example")],
            "",
        )
        .await;
    assert_eq!(reply.status, 403);
    assert_untouched(&alpha);
}

#[tokio::test]
async fn malformed_json_is_a_parse_error() {
    let (alpha, gw) = gateway().await;
    let (headers, _) = request("tools/list", json!({}));
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list""#,
        "not json",
        "",
    ] {
        let reply = post(&gw, &headers, body).await;
        assert_eq!(reply.status, 400, "{body:?}: {}", reply.text());
        let reply_body = reply.json();
        assert_eq!(
            reply_body["error"]["code"], -32700,
            "{body:?}: {reply_body}"
        );
        assert_eq!(reply_body["id"], Value::Null);
    }
    assert_untouched(&alpha);
}

#[tokio::test]
async fn a_legacy_initialize_opens_a_session_instead_of_failing_validation() {
    let (_alpha, gw) = gateway().await;
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}})
    .to_string();
    let headers = [
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("content-type".to_owned(), "application/json".to_owned()),
    ];
    let reply = post(&gw, &headers, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let reply_body = reply.json();
    assert_eq!(reply_body["id"], 0);
    assert_eq!(
        reply_body["result"]["protocolVersion"], "2025-11-25",
        "{reply_body}"
    );
    assert!(
        reply
            .header("mcp-session-id")
            .is_some_and(|id| id.len() >= 32)
    );
}

#[tokio::test]
async fn an_initialize_declaring_2026_07_28_is_an_unknown_method() {
    let (alpha, gw) = gateway().await;
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
        "protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "new", "version": "1"}}})
    .to_string();
    let headers = [
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("content-type".to_owned(), "application/json".to_owned()),
        ("mcp-protocol-version".to_owned(), "2026-07-28".to_owned()),
        ("mcp-method".to_owned(), "initialize".to_owned()),
    ];
    let reply = post(&gw, &headers, &body).await;
    assert_eq!(reply.status, 404, "{}", reply.text());
    assert!(reply.header("mcp-session-id").is_none(), "no session");
    let reply_body = reply.json();
    assert_eq!(reply_body["id"], 3);
    assert_eq!(reply_body["error"]["code"], -32601, "{reply_body}");
    assert_untouched(&alpha);
}
