//! The stateless 2026-07-28 endpoint end to end: foundation layers + router in front of real rmcp
//! backends (modern and legacy), driven over real sockets with raw HTTP.

mod support;

use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::{Value, json};
use support::gateway::{Gateway, user_config};

fn text_of(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

/// One modern and one legacy backend behind one virtual host.
async fn two_backends() -> (TestBackend, TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config)]).await;
    (alpha, beta, gw)
}

#[tokio::test]
async fn lists_merge_with_prefixes_and_calls_route_to_either_era() {
    let (alpha, beta, gw) = two_backends().await;

    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let result = &list.json()["result"];
    let names = tool_names(result);
    for expected in ["alpha-echo", "alpha-get-sum", "beta-echo", "beta-get-sum"] {
        assert!(names.contains(&expected.to_owned()), "{expected} missing from {names:?}");
    }
    // Deterministic order: every alpha item before every beta item.
    let first_beta = names.iter().position(|n| n.starts_with("beta-")).expect("beta items");
    assert!(names[..first_beta].iter().all(|n| n.starts_with("alpha-")));
    assert_eq!(result["cacheScope"], "private");
    assert_eq!(result["ttlMs"], 0, "a legacy backend contributes ttlMs 0");
    assert_eq!(result["resultType"], "complete");
    assert!(result["_meta"]["mcp-gateway/degraded"].is_null(), "{result}");

    let modern = gw.modern("alice", "vh", "tools/call", json!({"name": "alpha-echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(modern.status, 200, "{}", modern.text());
    assert_eq!(text_of(&modern.json()["result"]), "alpha: hi");
    let legacy = gw.modern("alice", "vh", "tools/call", json!({"name": "beta-get-sum", "arguments": {"a": 2, "b": 3}})).await;
    assert_eq!(legacy.json()["result"]["structuredContent"]["sum"], 5, "{}", legacy.text());

    // The backends saw un-prefixed names and never the client's token.
    let called: Vec<String> = alpha.requests().iter().filter_map(|r| r.called_name()).collect();
    assert!(called.contains(&"echo".to_owned()), "{called:?}");
    for backend in [&alpha, &beta] {
        assert!(backend.requests().iter().all(|r| !r.has_header("authorization")));
    }
    let modern_call = alpha.requests_for("tools/call").pop().expect("a tools/call at alpha");
    assert_eq!(modern_call.header("mcp-name"), Some("echo"));
    assert_eq!(modern_call.header("mcp-protocol-version"), Some("2026-07-28"));
    assert!(beta.requests_for("tools/call").iter().all(|r| r.has_header("mcp-session-id")));
}

#[tokio::test]
async fn discover_merges_capabilities_and_names_the_gateway() {
    let (_alpha, _beta, gw) = two_backends().await;
    let reply = gw.modern("alice", "vh", "server/discover", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let result = &reply.json()["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    for family in ["tools", "prompts", "resources", "completions"] {
        assert!(result["capabilities"][family].is_object(), "{family}: {result}");
    }
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcp-gateway");
    assert_eq!(result["cacheScope"], "private");
}

#[tokio::test]
async fn a_down_backend_is_left_out_of_lists_and_fails_only_its_own_calls() {
    let (alpha, beta, gw) = two_backends().await;
    beta.stop().await;

    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert_eq!(list.status, 200);
    let result = &list.json()["result"];
    assert!(tool_names(result).iter().all(|n| n.starts_with("alpha-")));
    assert_eq!(result["_meta"]["mcp-gateway/degraded"]["backends"][0]["name"], "beta");

    let discover = gw.modern("alice", "vh", "server/discover", json!({})).await;
    assert_eq!(discover.json()["result"]["_meta"]["mcp-gateway/degraded"]["backends"][0]["name"], "beta");

    let failed = gw.modern("alice", "vh", "tools/call", json!({"name": "beta-echo", "arguments": {"text": "x"}})).await;
    assert_eq!(failed.status, 200);
    let error = &failed.json()["error"];
    assert_eq!(error["code"], -32603);
    assert!(error["message"].as_str().expect("message").contains("beta"), "{error}");

    let ok = gw.modern("alice", "vh", "tools/call", json!({"name": "alpha-echo", "arguments": {"text": "still"}})).await;
    assert_eq!(text_of(&ok.json()["result"]), "alpha: still");
    drop(alpha);
}

#[tokio::test]
async fn routing_errors_follow_the_contract() {
    let (_alpha, _beta, gw) = two_backends().await;
    let wrong = gw.modern("alice", "vh", "tools/call", json!({"name": "zeta-echo", "arguments": {}})).await;
    let error = &wrong.json()["error"];
    assert_eq!(error["code"], -32602);
    assert_eq!(error["message"], "wrong tool name: zeta-echo");
    let prompt = gw.modern("alice", "vh", "prompts/get", json!({"name": "nope"})).await;
    assert_eq!(prompt.json()["error"]["message"], "wrong prompt name: nope");
    let resource = gw.modern("alice", "vh", "resources/read", json!({"uri": "test://x"})).await;
    assert_eq!(resource.json()["error"]["message"], "wrong resource name: test://x");
}

#[tokio::test]
async fn progress_notifications_stream_before_the_result() {
    let (_alpha, _beta, gw) = two_backends().await;
    let mut params = json!({"name": "alpha-slow", "arguments": {"steps": 3, "delay_ms": 10}});
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "client-token-7",
    });
    let reply = gw.modern("alice", "vh", "tools/call", params).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"), "{}", reply.text());
    let messages = reply.sse_messages();
    let progress: Vec<&Value> = messages.iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert_eq!(progress.len(), 3, "{messages:?}");
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "client-token-7"));
    let last = messages.last().expect("final");
    assert_eq!(last["id"], 1);
    assert_eq!(text_of(&last["result"]), "alpha: done");
    let _ = Duration::ZERO;
}
