//! Dropping a request mid-`slow` cancels the handler, and the counters show it.

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use mcp_test_backends::{BackendSpec, Era, TestBackend, ToolCalls};
use serde_json::json;

use crate::{clients, eras::call, raw_http};

const PATIENCE: Duration = Duration::from_secs(5);

fn long_slow() -> rmcp::model::CallToolRequestParams {
    call("slow", json!({ "steps": 200, "delay_ms": 50 }))
}

async fn assert_cancelled_once(backend: &TestBackend) {
    let cancelled = backend
        .wait_for_calls("slow", PATIENCE, |calls| calls.cancelled >= 1)
        .await;
    assert!(
        cancelled,
        "slow was not cancelled: {:?}",
        backend.calls("slow")
    );
    assert_eq!(
        backend.calls("slow"),
        ToolCalls {
            started: 1,
            finished: 0,
            cancelled: 1
        }
    );
    assert_eq!(backend.calls_cancelled("slow"), 1);
}

#[tokio::test]
async fn dropping_an_rmcp_call_cancels_slow_in_every_era() {
    for era in [Era::Modern, Era::Legacy, Era::Both] {
        let backend = TestBackend::start(BackendSpec::new(format!("c-{era}"), era)).await;
        let (client, _) = if era == Era::Legacy {
            clients::legacy(&backend.url())
                .await
                .expect("legacy client")
        } else {
            clients::modern(&backend.url()).await
        };
        let outcome =
            tokio::time::timeout(Duration::from_millis(300), client.call_tool(long_slow())).await;
        assert!(
            outcome.is_err(),
            "{era}: slow must still be running when dropped"
        );
        assert_eq!(backend.calls_started("slow"), 1, "{era}");
        assert_cancelled_once(&backend).await;

        // The backend still serves after the cancellation, and counts a normal finish.
        client
            .call_tool(call("slow", json!({ "steps": 1, "delay_ms": 0 })))
            .await
            .expect("slow after cancel");
        assert_eq!(backend.calls_finished("slow"), 1, "{era}");
        client.cancel().await.expect("cancel");
    }
}

#[tokio::test]
async fn closing_a_raw_modern_stream_cancels_slow() {
    let backend = TestBackend::start(BackendSpec::modern("raw-cancel")).await;
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "slow",
            "arguments": { "steps": 200, "delay_ms": 50 },
            "_meta": {
                "progressToken": 1,
                "io.modelcontextprotocol/protocolVersion": raw_http::MODERN,
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    let request = Request::post(backend.url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", raw_http::MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "slow")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let response = raw_http::client()
        .request(request)
        .await
        .expect("response head");
    assert_eq!(response.status(), 200);
    assert_eq!(backend.calls_started("slow"), 1);
    drop(response);
    assert_cancelled_once(&backend).await;
}

#[tokio::test]
async fn stopping_the_backend_cancels_running_calls() {
    let backend = TestBackend::start(BackendSpec::both("stop-cancel")).await;
    let (client, _) = clients::modern(&backend.url()).await;
    let call = tokio::spawn(async move { client.call_tool(long_slow()).await });
    assert!(
        backend
            .wait_for_calls("slow", PATIENCE, |calls| calls.started == 1)
            .await
    );
    backend.stop().await;
    assert_cancelled_once(&backend).await;
    let outcome = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("the client call ends once the backend is gone")
        .expect("task");
    assert!(outcome.is_err(), "the call cannot succeed: {outcome:?}");
}
