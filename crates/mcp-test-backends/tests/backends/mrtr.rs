//! `ask`: MRTR rounds for modern clients, real elicitation for legacy sessions.

use http::StatusCode;
use mcp_test_backends::{BackendSpec, Era, TestBackend};
use serde_json::{Value, json};

use crate::{
    clients,
    eras::{call, first_text},
    raw_http::{self, RawResponse},
};

async fn ask(url: &str, id: u64, extra: Value) -> RawResponse {
    let mut params = json!({ "name": "ask", "arguments": {} });
    if let (Value::Object(params), Value::Object(extra)) = (&mut params, extra) {
        params.extend(extra);
    }
    raw_http::modern_request(url, id, "tools/call", params).await
}

fn accept(key: &str, value: &str) -> Value {
    json!({ key: { "action": "accept", "content": { key: value } } })
}

/// The `requestState` of an `input_required` result asking for `key`.
fn expect_input_required(response: &RawResponse, key: &str) -> String {
    let result = &response.reply()["result"];
    assert_eq!(
        result["resultType"],
        "input_required",
        "{}",
        response.text()
    );
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), [key]);
    assert_eq!(requests[key]["method"], "elicitation/create");
    assert_eq!(requests[key]["params"]["mode"], "form");
    assert!(
        requests[key]["params"]["requestedSchema"]["properties"]
            .get(key)
            .is_some()
    );
    result["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned()
}

#[tokio::test]
async fn raw_ask_completes_after_two_input_rounds() {
    for era in [Era::Modern, Era::Both] {
        let name = format!("ask-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era)).await;
        let url = backend.url();

        let first = ask(&url, 1, json!({})).await;
        let state1 = expect_input_required(&first, "name");

        let second = ask(
            &url,
            2,
            json!({ "inputResponses": accept("name", "Ada"), "requestState": state1 }),
        )
        .await;
        let state2 = expect_input_required(&second, "color");
        assert_ne!(state1, state2, "the new state carries the first answer");

        let third = ask(
            &url,
            3,
            json!({ "inputResponses": accept("color", "teal"), "requestState": state2 }),
        )
        .await;
        let result = &third.reply()["result"];
        assert_eq!(result["resultType"], "complete", "{}", third.text());
        assert_eq!(
            result["content"][0]["text"],
            format!("{name}: Ada likes teal")
        );
        assert_eq!(backend.calls("ask").finished, 3);
    }
}

#[tokio::test]
async fn tampered_missing_or_foreign_state_is_an_error() {
    let backend = TestBackend::start(BackendSpec::modern("guard")).await;
    let other = TestBackend::start(BackendSpec::modern("other")).await;
    let url = backend.url();
    let state = expect_input_required(&ask(&url, 1, json!({})).await, "name");

    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let foreign = expect_input_required(&ask(&other.url(), 1, json!({})).await, "name");

    for (label, extra) in [
        (
            "tampered",
            json!({ "inputResponses": accept("name", "Eve"), "requestState": tampered }),
        ),
        (
            "missing",
            json!({ "inputResponses": accept("name", "Eve") }),
        ),
        (
            "foreign",
            json!({ "inputResponses": accept("name", "Eve"), "requestState": foreign }),
        ),
        (
            "garbage",
            json!({ "inputResponses": accept("name", "Eve"), "requestState": "x.y.z" }),
        ),
    ] {
        let response = ask(&url, 2, extra).await;
        let reply = response.reply();
        assert_eq!(
            reply["error"]["code"],
            -32602,
            "{label}: {}",
            response.text()
        );
        assert!(reply.get("result").is_none(), "{label}");
    }
}

#[tokio::test]
async fn missing_answer_asks_again_and_decline_is_a_tool_error() {
    let backend = TestBackend::start(BackendSpec::modern("again")).await;
    let url = backend.url();
    let state = expect_input_required(&ask(&url, 1, json!({})).await, "name");

    let again = ask(
        &url,
        2,
        json!({ "inputResponses": {}, "requestState": state }),
    )
    .await;
    let state = expect_input_required(&again, "name");

    let declined = ask(
        &url,
        3,
        json!({ "inputResponses": { "name": { "action": "decline" } }, "requestState": state }),
    )
    .await;
    let result = &declined.reply()["result"];
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["text"], "again: ask was declined");
}

#[tokio::test]
async fn ask_requires_declared_elicitation() {
    let backend = TestBackend::start(BackendSpec::modern("nocap")).await;
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "ask", "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": raw_http::MODERN,
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    let response = raw_http::post(
        &backend.url(),
        &[
            ("mcp-protocol-version", raw_http::MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", "ask"),
        ],
        &body,
    )
    .await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    assert_eq!(response.reply()["error"]["code"], -32021);
}

#[tokio::test]
async fn rmcp_clients_complete_ask_in_every_era() {
    for era in [Era::Modern, Era::Legacy, Era::Both] {
        let name = format!("ask-rmcp-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era)).await;
        let (client, handler) = if era == Era::Legacy {
            clients::legacy(&backend.url())
                .await
                .expect("legacy client")
        } else {
            clients::modern(&backend.url()).await
        };
        let result = client
            .call_tool(call("ask", json!({})))
            .await
            .expect("ask completes");
        assert_eq!(first_text(&result), format!("{name}: Ferris likes orange"));
        assert_eq!(
            *handler.elicitations.lock().expect("lock"),
            ["name", "color"],
            "{era}"
        );
        // Modern: one tools/call per round; legacy: one call answered over two elicitations.
        let expected_calls = if era == Era::Legacy { 1 } else { 3 };
        assert_eq!(
            backend.requests_for("tools/call").len(),
            expected_calls,
            "{era}"
        );
        client.cancel().await.expect("cancel");
    }
}
