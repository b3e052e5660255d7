//! Multi-round-trip requests (2026-07-28 MRTR) through the gateway: `input_required` results carry
//! a `requestState` the gateway wraps in its own sealed envelope bound to the caller, the virtual
//! host, the backend and the tool; a retry with a modified, expired or foreign state is refused
//! with -32602 before anything reaches the backend.

use mcp_test_support::rpc_error;
use std::time::Duration;

use mcp_router::{McpRouter, WallClock};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::stack::{Gateway, user_config};
use mcp_test_support::{Reply, ShiftedClock};
use serde_json::{Value, json};

async fn gateway_with(router: McpRouter) -> (TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let config = user_config(&[("alpha", alpha.url())]);
    let gw = Gateway::start_with(&[("alice", config.clone()), ("bob", config)], router).await;
    (alpha, gw)
}

async fn gateway() -> (TestBackend, Gateway) {
    gateway_with(
        McpRouter::builder()
            .fanout_deadline(Duration::from_secs(5))
            .build(),
    )
    .await
}

fn accept(key: &str, value: &str) -> Value {
    json!({ key: { "action": "accept", "content": { key: value } } })
}

async fn ask(gw: &Gateway, sub: &str, id: u64, extra: Value) -> Reply {
    let mut params = json!({"name": "alpha-ask", "arguments": {}});
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    let reply = gw
        .modern_id(sub, "vh", json!(id), "tools/call", params)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.json()["id"],
        id,
        "the client's id comes back: {}",
        reply.text()
    );
    reply
}

/// The (gateway) `requestState` of an `input_required` result asking for `key`.
fn input_required(reply: &Reply, key: &str) -> String {
    let result = &reply.json()["result"];
    assert_eq!(result["resultType"], "input_required", "{}", reply.text());
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), [key], "{result}");
    assert_eq!(requests[key]["method"], "elicitation/create");
    assert_eq!(
        requests[key]["params"]["message"],
        format!("alpha asks for your {key}")
    );
    result["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned()
}

fn upstream_calls(alpha: &TestBackend) -> usize {
    alpha.requests_for("tools/call").len()
}

#[tokio::test]
async fn ask_completes_after_two_input_rounds_with_new_ids() {
    let (alpha, gw) = gateway().await;
    let first = ask(&gw, "alice", 1, json!({})).await;
    let state1 = input_required(&first, "name");

    let second = ask(
        &gw,
        "alice",
        2,
        json!({"inputResponses": accept("name", "Ada"), "requestState": state1}),
    )
    .await;
    let state2 = input_required(&second, "color");
    assert_ne!(state1, state2);

    let third = ask(
        &gw,
        "alice",
        3,
        json!({"inputResponses": accept("color", "teal"), "requestState": state2}),
    )
    .await;
    let result = &third.json()["result"];
    assert_eq!(
        result["content"][0]["text"],
        "alpha: Ada likes teal",
        "{}",
        third.text()
    );
    assert_ne!(result["resultType"], "input_required");
    assert_eq!(alpha.calls("ask").finished, 3);

    // The backend got its own state back, never the gateway's envelope.
    let calls = alpha.requests_for("tools/call");
    assert_eq!(calls.len(), 3);
    let sent_states: Vec<Value> = calls
        .iter()
        .map(|c| c.json().expect("json")["params"]["requestState"].clone())
        .collect();
    assert!(sent_states[0].is_null());
    assert_ne!(
        sent_states[1],
        json!(state1),
        "the gateway unwraps its envelope"
    );
    assert_ne!(sent_states[2], json!(state2));
    assert!(sent_states[1].is_string() && sent_states[2].is_string());
    assert_eq!(
        calls[1].json().expect("json")["params"]["inputResponses"],
        accept("name", "Ada")
    );
}

#[tokio::test]
async fn a_modified_request_state_is_refused_before_the_backend() {
    let (alpha, gw) = gateway().await;
    let state = input_required(&ask(&gw, "alice", 1, json!({})).await, "name");
    let before = upstream_calls(&alpha);

    let mut modified = state.clone().into_bytes();
    modified[2] = if modified[2] == b'A' { b'B' } else { b'A' };
    let modified = String::from_utf8(modified).expect("ascii");
    for bad in [
        modified,
        format!("{state}x"),
        "backend-state".to_owned(),
        String::new(),
    ] {
        let reply = ask(
            &gw,
            "alice",
            2,
            json!({"inputResponses": accept("name", "Eve"), "requestState": bad}),
        )
        .await;
        assert_eq!(
            rpc_error(&reply),
            (
                -32602,
                "Invalid requestState (invalid or foreign handle)".to_owned()
            ),
            "{bad:?}"
        );
    }
    assert_eq!(
        upstream_calls(&alpha),
        before,
        "nothing reached the backend"
    );
}

#[tokio::test]
async fn a_request_state_for_another_tool_is_refused_before_the_backend() {
    let (alpha, gw) = gateway().await;
    let state = input_required(&ask(&gw, "alice", 1, json!({})).await, "name");
    let before = upstream_calls(&alpha);
    let params = json!({"name": "alpha-echo", "arguments": {"text": "x"}, "requestState": state});
    let reply = gw
        .modern_id("alice", "vh", json!(2), "tools/call", params)
        .await;
    assert_eq!(
        rpc_error(&reply),
        (
            -32602,
            "Invalid requestState (invalid or foreign handle)".to_owned()
        )
    );
    assert_eq!(upstream_calls(&alpha), before);
}

#[tokio::test]
async fn an_expired_request_state_is_refused_before_the_backend() {
    let clock = ShiftedClock::new();
    let router = McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .request_state_ttl(Duration::from_secs(60))
        .wall_clock({
            let clock = clock.clone();
            WallClock::from_fn(move || clock.now())
        })
        .build();
    let (alpha, gw) = gateway_with(router).await;
    let state = input_required(&ask(&gw, "alice", 1, json!({})).await, "name");
    let before = upstream_calls(&alpha);
    // Past the state's lifetime on the router's clock: no sleep, whatever the machine's load.
    clock.advance(Duration::from_secs(61));
    let reply = ask(
        &gw,
        "alice",
        2,
        json!({"inputResponses": accept("name", "Ada"), "requestState": state}),
    )
    .await;
    assert_eq!(
        rpc_error(&reply),
        (-32602, "Invalid requestState (expired handle)".to_owned())
    );
    assert_eq!(upstream_calls(&alpha), before);
}

#[tokio::test]
async fn another_principals_request_state_is_refused_before_the_backend() {
    let (alpha, gw) = gateway().await;
    let state = input_required(&ask(&gw, "alice", 1, json!({})).await, "name");
    let before = upstream_calls(&alpha);
    let reply = ask(
        &gw,
        "bob",
        2,
        json!({"inputResponses": accept("name", "Mallory"), "requestState": state}),
    )
    .await;
    assert_eq!(
        rpc_error(&reply),
        (
            -32602,
            "Invalid requestState (invalid or foreign handle)".to_owned()
        )
    );
    assert_eq!(upstream_calls(&alpha), before);
    // Alice's state still works for alice.
    let reply = ask(
        &gw,
        "alice",
        3,
        json!({"inputResponses": accept("name", "Ada"), "requestState": state}),
    )
    .await;
    input_required(&reply, "color");
}
