//! What the gateway relays from a backend's call stream to a 2026-07-28 client, checked against a
//! scripted backend that sends more than it should (a real rmcp backend is too well-behaved to
//! show it): log notifications only when the client set `_meta` `logLevel`, and only at or above
//! that level (2026-07-28: "MUST NOT emit notifications/message for a request without it"),
//! progress only for the call's own token, `-32002` from any backend becomes `-32602`, and the
//! backend's URIs on a streamed call (an update notification, resource links and embedded
//! resources of the result) reach the client public.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mcp_test_support::stack::{Gateway, modern_meta, user_config};
use serde_json::{Value, json};

const LEVELS: [&str; 3] = ["debug", "info", "error"];

/// A scripted modern backend: `server/discover` answers modern (with the tasks extension);
/// `tools/call` of `tasked` creates task `raw-1`, which `tasks/get` shows completed with a resource
/// link in its result; `tools/call` of `linked` streams a
/// `notifications/resources/updated`, then a result with resource links; every other `tools/call`
/// streams a log message at each of [`LEVELS`], a progress notification for a token that is not
/// the call's, one for the call's own token (if any), then the result; `resources/read` answers
/// `-32002`.
async fn chatty_backend() -> String {
    let service = tower::service_fn(|req: Request<Incoming>| async move {
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let id = message["id"].clone();
        let reply = match message["method"].as_str() {
            _ if id.is_null() => Response::builder()
                .status(StatusCode::ACCEPTED)
                .body(Full::new(Bytes::new())),
            Some("server/discover") => json_reply(json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "resources": {}, "logging": {},
                    "extensions": {TASKS: {}}},
                "serverInfo": {"name": "chatty", "version": "0"}}})),
            Some("tools/call") if message["params"]["name"] == "tasked" => {
                json_reply(json!({"jsonrpc": "2.0", "id": id, "result": task("working", None)}))
            }
            Some("tasks/get") => json_reply(json!({"jsonrpc": "2.0", "id": id, "result": task(
                "completed",
                Some(json!({"content": [{"type": "resource_link", "uri": "file:///done", "name": "done"}]})),
            )})),
            Some("tools/call") if message["params"]["name"] == "linked" => {
                // A 2025-style backend may send related notifications on the call's stream.
                let events = [
                    json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                        "params": {"uri": "file:///watched"}}),
                    json!({"jsonrpc": "2.0", "id": id, "result": {
                        "content": [
                            {"type": "text", "text": "see file:///a"},
                            {"type": "resource_link", "uri": "file:///a", "name": "a"},
                            {"type": "resource", "resource": {"uri": "https://example.com/b", "text": "b"}}],
                        "structuredContent": {"uri": "file:///a"}}}),
                ];
                let sse: String = events
                    .iter()
                    .map(|e| format!("event: message\ndata: {e}\n\n"))
                    .collect();
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Full::new(Bytes::from(sse)))
            }
            Some("tools/call") => {
                let mut events: Vec<Value> = LEVELS
                    .iter()
                    .map(|level| {
                        json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": level, "logger": "chatty", "data": {"message": level}}})
                    })
                    .collect();
                events.push(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "someone-else", "progress": 1}}));
                let token = &message["params"]["_meta"]["progressToken"];
                if !token.is_null() {
                    events.push(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 1, "total": 1}}));
                }
                events.push(json!({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": "chatty: done"}]}}));
                let sse: String = events
                    .iter()
                    .map(|e| format!("event: message\ndata: {e}\n\n"))
                    .collect();
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Full::new(Bytes::from(sse)))
            }
            Some("resources/read") => json_reply(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32002, "message": "Resource not found", "data": {"uri": message["params"]["uri"]}}})),
            _ => json_reply(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            ),
        };
        Ok::<_, Infallible>(reply.expect("static response parts"))
    });
    let addr = mcp_test_support::serve(service).await;
    format!("http://{addr}/mcp")
}

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The backend's one task `raw-1` with `status` (and its `result` once completed).
fn task(status: &str, result: Option<Value>) -> Value {
    let mut task = json!({"resultType": if result.is_some() { "complete" } else { "task" },
        "taskId": "raw-1", "status": status, "ttlMs": null,
        "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"});
    if let Some(result) = result {
        task["result"] = result;
    }
    task
}

fn json_reply(body: Value) -> http::Result<Response<Full<Bytes>>> {
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
}

async fn gateway() -> Gateway {
    let url = chatty_backend().await;
    Gateway::start(&[("alice", user_config(&[("chatty", url)]))]).await
}

/// Calls `chatty-anything` with `meta`; every relayed message, the final one last.
async fn call(gw: &Gateway, meta: Value) -> Vec<Value> {
    let params = json!({"name": "chatty-anything", "arguments": {}, "_meta": meta});
    let reply = gw.modern("alice", "vh", "tools/call", params).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let messages = if reply.header("content-type") == Some("text/event-stream") {
        reply.sse_messages()
    } else {
        vec![reply.json()]
    };
    let last = messages.last().expect("a final message");
    assert_eq!(last["id"], 1);
    assert_eq!(
        last["result"]["content"][0]["text"], "chatty: done",
        "{messages:?}"
    );
    messages
}

fn log_levels(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["level"].as_str().expect("level").to_owned())
        .collect()
}

#[tokio::test]
async fn no_log_notifications_without_a_log_level() {
    let gw = gateway().await;
    let messages = call(&gw, modern_meta()).await;
    assert_eq!(log_levels(&messages), Vec::<String>::new(), "{messages:?}");
    assert_eq!(messages.len(), 1, "nothing but the result: {messages:?}");
}

#[tokio::test]
async fn log_notifications_at_or_above_the_requested_level_only() {
    let gw = gateway().await;
    for (level, expected) in [
        ("debug", vec!["debug", "info", "error"]),
        ("info", vec!["info", "error"]),
        ("error", vec!["error"]),
    ] {
        let mut meta = modern_meta();
        meta["io.modelcontextprotocol/logLevel"] = json!(level);
        let messages = call(&gw, meta).await;
        assert_eq!(
            log_levels(&messages),
            expected,
            "logLevel {level}: {messages:?}"
        );
    }
}

#[tokio::test]
async fn only_the_calls_own_progress_is_relayed() {
    let gw = gateway().await;
    let mut meta = modern_meta();
    meta["progressToken"] = json!(42);
    let messages = call(&gw, meta).await;
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 1, "{messages:?}");
    assert_eq!(progress[0]["params"]["progressToken"], 42);
    assert_eq!(progress[0]["params"]["total"], 1);
}

#[tokio::test]
async fn resource_not_found_from_any_backend_is_invalid_params() {
    let gw = gateway().await;
    let reply = gw
        .modern(
            "alice",
            "vh",
            "resources/read",
            json!({"uri": "chatty-file:///gone"}),
        )
        .await;
    let body = reply.json();
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert_eq!(body["error"]["message"], "Resource not found");
    assert_eq!(body["error"]["data"], json!({"uri": "file:///gone"}));
}

#[tokio::test]
async fn uris_on_a_streamed_call_reach_the_client_public() {
    let gw = gateway().await;
    let params = json!({"name": "chatty-linked", "arguments": {}});
    let reply = gw.modern("alice", "vh", "tools/call", params).await;
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let messages = reply.sse_messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/resources/updated");
    assert_eq!(messages[0]["params"]["uri"], "chatty-file:///watched");
    let result = &messages[1]["result"];
    assert_eq!(
        result["content"],
        json!([
            {"type": "text", "text": "see file:///a"},
            {"type": "resource_link", "uri": "chatty-file:///a", "name": "a"},
            {"type": "resource", "resource": {"uri": "chatty-https://example.com/b", "text": "b"}}]),
        "links and embedded resources public, text untouched"
    );
    assert_eq!(
        result["structuredContent"],
        json!({"uri": "file:///a"}),
        "tool-defined data is not rewritten"
    );
}

#[tokio::test]
async fn a_completed_tasks_result_carries_public_uris() {
    let gw = gateway().await;
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {TASKS: {}}});
    let params = json!({"name": "chatty-tasked", "arguments": {}, "_meta": meta.clone()});
    let created = gw.modern("alice", "vh", "tools/call", params).await.json();
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"].as_str().expect("a task id");
    let name = mcp_core::headers::encode_header_value(task_id);
    let name = name.to_str().expect("ascii header value");
    let params = json!({"taskId": task_id, "_meta": meta});
    let got = gw
        .modern_with("alice", "vh", "tasks/get", params, &[("mcp-name", name)])
        .await
        .json();
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["taskId"], task_id, "{got}");
    assert_eq!(
        got["result"]["result"]["content"][0]["uri"], "chatty-file:///done",
        "{got}"
    );
}
