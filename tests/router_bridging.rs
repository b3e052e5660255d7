//! Features that cannot cross eras as they are, decided and tested (DESIGN §4): a legacy
//! backend's mid-call request to a 2026-07-28 client is declined, so the call ends instead of
//! hanging.

mod support;

use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::{Value, json};
use support::gateway::{Gateway, user_config};

#[tokio::test]
async fn a_legacy_backends_elicitation_is_declined_for_a_modern_client() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = Gateway::start(&[("alice", user_config(&[("beta", beta.url())]))]).await;
    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-ask", "arguments": {}}),
        )
        .await;
    assert_eq!(reply.status, 200);
    let last: Value = if reply.header("content-type") == Some("text/event-stream") {
        reply.sse_messages().pop().expect("a final message")
    } else {
        reply.json()
    };
    assert_eq!(last["id"], 1, "the call ends with its response: {last}");
    // The backend got a clear refusal for its elicitation request, in its own session.
    let refusal = beta
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .find(|m| m.get("error").is_some() && m.get("method").is_none())
        .expect("the gateway answered the backend's request");
    assert_eq!(refusal["error"]["code"], -32601);
    assert_eq!(
        refusal["error"]["message"],
        "Method not found: server-to-client requests are not relayed to 2026-07-28 clients by the gateway"
    );
}

#[tokio::test]
async fn a_legacy_backends_results_get_the_fields_a_modern_client_requires() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = Gateway::start(&[("alice", user_config(&[("beta", beta.url())]))]).await;
    let call = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "x"}}),
        )
        .await;
    let result = &call.json()["result"];
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(result["content"][0]["text"], "beta: x");
    let read = gw
        .modern(
            "alice",
            "vh",
            "resources/read",
            json!({"uri": "beta-test://beta/static"}),
        )
        .await;
    let result = &read.json()["result"];
    assert_eq!(
        (
            result["resultType"].clone(),
            result["ttlMs"].clone(),
            result["cacheScope"].clone()
        ),
        (json!("complete"), json!(0), json!("private")),
        "{result}"
    );
    assert_eq!(result["contents"][0]["uri"], "beta-test://beta/static");
}
