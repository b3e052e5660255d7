//! The tasks extension (`BackendSpec::tasks(true)`): `long_task` as a task when the request
//! declares the extension, synchronously otherwise; `tasks/get`, `tasks/cancel`; raw ids recorded.

use std::time::{Duration, Instant};

use mcp_test_backends::{BackendSpec, Era, TestBackend, ToolCalls};
use rmcp::{
    ClientLifecycleMode, ClientServiceExt,
    model::{
        CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, ClientConfig,
        GetTaskParams, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
    },
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};

use crate::{
    clients,
    eras::{call, first_text},
    raw_http::{self, MODERN, RawResponse},
};

const TASKS: &str = "io.modelcontextprotocol/tasks";
const PATIENCE: Duration = Duration::from_secs(5);

/// 2026-07-28 `_meta` whose client capabilities declare the tasks extension (or nothing).
fn meta(declare_tasks: bool) -> Value {
    let capabilities = if declare_tasks {
        json!({ "extensions": { TASKS: {} } })
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": { "name": "raw-test-client", "version": "0.0.0" },
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

async fn long_task(url: &str, id: u64, delay_ms: u64, declare_tasks: bool) -> RawResponse {
    let params = json!({
        "name": "long_task",
        "arguments": { "delay_ms": delay_ms },
        "_meta": meta(declare_tasks),
    });
    raw_http::modern_request(url, id, "tools/call", params).await
}

/// `tasks/get|update|cancel` for `task_id`, with `Mcp-Name: <task_id>`.
async fn task_request(
    url: &str,
    id: u64,
    method: &str,
    task_id: &str,
    declare_tasks: bool,
) -> RawResponse {
    let mut params = json!({ "taskId": task_id, "_meta": meta(declare_tasks) });
    if method == "tasks/update" {
        params["inputResponses"] = json!({});
    }
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    let headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", method),
        ("mcp-name", task_id),
    ];
    raw_http::post(url, &headers, &body).await
}

/// The `CreateTaskResult` of a task-mode call: its task id.
fn created_task(response: &RawResponse) -> String {
    let result = &response.reply()["result"];
    assert_eq!(result["resultType"], "task", "{}", response.text());
    assert_eq!(result["status"], "working", "{result}");
    assert_eq!(result["pollIntervalMs"], 50, "{result}");
    assert!(result["ttlMs"].is_u64(), "{result}");
    assert!(result["createdAt"].is_string() && result["lastUpdatedAt"].is_string());
    result["taskId"].as_str().expect("taskId").to_owned()
}

fn error_code(response: &RawResponse) -> i64 {
    response.reply()["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {}", response.text()))
}

/// Polls `tasks/get` every 20 ms until the status is `status`; returns that result.
async fn wait_for_status(url: &str, task_id: &str, status: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    let mut last = Value::Null;
    while Instant::now() < deadline {
        let response = task_request(url, 100, "tasks/get", task_id, true).await;
        last = response.reply();
        if last["result"]["status"] == status {
            return last["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {task_id} never reached {status}; last tasks/get: {last}");
}

#[tokio::test]
async fn discover_advertises_tasks_only_when_enabled() {
    for era in [Era::Modern, Era::Both] {
        for enabled in [false, true] {
            let backend =
                TestBackend::start(BackendSpec::new(format!("d-{era}"), era).tasks(enabled)).await;
            let response = raw_http::modern_request(
                &backend.url(),
                1,
                "server/discover",
                json!({ "_meta": meta(true) }),
            )
            .await;
            let capabilities = &response.reply()["result"]["capabilities"];
            assert_eq!(
                capabilities["extensions"].get(TASKS).is_some(),
                enabled,
                "{era} tasks({enabled}): {capabilities}"
            );
            let tools = raw_http::modern_request(&backend.url(), 2, "tools/list", json!({})).await;
            let listed = tools.reply()["result"]["tools"]
                .as_array()
                .expect("tools")
                .iter()
                .any(|tool| tool["name"] == "long_task");
            assert_eq!(listed, enabled, "{era} tasks({enabled})");
        }
    }
}

#[tokio::test]
async fn raw_long_task_runs_as_a_task_and_completes() {
    for era in [Era::Modern, Era::Both] {
        let name = format!("t-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era).tasks(true)).await;
        let url = backend.url();

        let response = long_task(&url, 1, 1_000, true).await;
        let task_id = created_task(&response);
        assert_eq!(backend.task_ids(), vec![task_id.clone()], "{era}");
        assert_eq!(backend.running_tasks(), 1, "{era}");

        let working = task_request(&url, 2, "tasks/get", &task_id, true).await;
        let working = &working.reply()["result"];
        assert_eq!(working["resultType"], "complete", "{working}");
        assert_eq!(working["taskId"], task_id.as_str());
        assert_eq!(working["status"], "working", "{era}: still within delay_ms");
        assert!(working.get("result").is_none(), "{working}");

        let done = wait_for_status(&url, &task_id, "completed").await;
        assert_eq!(done["taskId"], task_id.as_str());
        assert_eq!(done["resultType"], "complete");
        assert_eq!(
            done["result"]["content"][0]["text"],
            format!("{name}: task done"),
            "{done}"
        );
        assert_eq!(
            backend.calls("long_task"),
            ToolCalls {
                started: 1,
                finished: 1,
                cancelled: 0
            },
            "{era}"
        );
        assert_eq!(backend.running_tasks(), 0);

        // The follow-ups arrived with the id in the body and in Mcp-Name.
        let gets = backend.requests_for("tasks/get");
        assert!(gets.len() >= 2);
        for get in gets {
            assert_eq!(get.header("mcp-name"), Some(task_id.as_str()));
            assert_eq!(
                get.json().expect("json")["params"]["taskId"],
                task_id.as_str()
            );
        }

        // tasks/update is acknowledged (long_task asks for nothing; unknown keys are ignored).
        let update = task_request(&url, 3, "tasks/update", &task_id, true).await;
        assert_eq!(
            update.reply()["result"],
            json!({ "resultType": "complete" }),
            "{}",
            update.text()
        );
    }
}

#[tokio::test]
async fn raw_long_task_without_the_extension_is_synchronous() {
    for era in [Era::Modern, Era::Both] {
        let name = format!("s-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era).tasks(true)).await;
        let started = Instant::now();
        let response = long_task(&backend.url(), 1, 150, false).await;
        let result = &response.reply()["result"];
        assert_eq!(result["resultType"], "complete", "{}", response.text());
        assert_eq!(result["content"][0]["text"], format!("{name}: task done"));
        assert!(result.get("taskId").is_none(), "{result}");
        assert!(
            started.elapsed() >= Duration::from_millis(150),
            "the call waited delay_ms"
        );
        assert!(backend.task_ids().is_empty(), "{era}: no task was minted");
        assert_eq!(backend.calls_finished("long_task"), 1);
    }
}

#[tokio::test]
async fn raw_tasks_cancel_ends_the_task_as_cancelled() {
    for era in [Era::Modern, Era::Both] {
        let backend =
            TestBackend::start(BackendSpec::new(format!("c-{era}"), era).tasks(true)).await;
        let url = backend.url();
        let task_id = created_task(&long_task(&url, 1, 30_000, true).await);

        let ack = task_request(&url, 2, "tasks/cancel", &task_id, true).await;
        assert_eq!(
            ack.reply()["result"],
            json!({ "resultType": "complete" }),
            "{}",
            ack.text()
        );
        let cancelled = wait_for_status(&url, &task_id, "cancelled").await;
        assert_eq!(cancelled["taskId"], task_id.as_str());
        assert!(cancelled.get("result").is_none(), "{cancelled}");
        assert!(
            backend
                .wait_for_calls("long_task", PATIENCE, |calls| calls.cancelled == 1)
                .await,
            "{era}: {:?}",
            backend.calls("long_task")
        );
        assert_eq!(backend.calls_finished("long_task"), 0);
        assert_eq!(backend.running_tasks(), 0);
    }
}

#[tokio::test]
async fn raw_unknown_ids_and_undeclared_clients_are_refused() {
    let backend = TestBackend::start(BackendSpec::modern("u").tasks(true)).await;
    let url = backend.url();
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let response = task_request(&url, 1, method, "no-such-task", true).await;
        assert_eq!(
            error_code(&response),
            -32602,
            "{method}: {}",
            response.text()
        );
    }

    let task_id = created_task(&long_task(&url, 2, 10_000, true).await);
    let undeclared = task_request(&url, 3, "tasks/get", &task_id, false).await;
    assert_eq!(error_code(&undeclared), -32021, "{}", undeclared.text());

    // Without tasks(true) the methods do not exist.
    let plain = TestBackend::start(BackendSpec::modern("p")).await;
    let response = task_request(&plain.url(), 4, "tasks/get", "x", true).await;
    assert_eq!(error_code(&response), -32601, "{}", response.text());
    let unlisted = long_task(&plain.url(), 5, 10, true).await;
    assert_eq!(error_code(&unlisted), -32602, "{}", unlisted.text());
}

#[tokio::test]
async fn stop_aborts_and_forgets_tasks() {
    let backend = TestBackend::start(BackendSpec::modern("r").tasks(true)).await;
    let task_id = created_task(&long_task(&backend.url(), 1, 30_000, true).await);
    backend.restart().await;
    assert!(
        backend
            .wait_for_calls("long_task", PATIENCE, |calls| calls.cancelled == 1)
            .await
    );
    let response = task_request(&backend.url(), 2, "tasks/get", &task_id, true).await;
    assert_eq!(error_code(&response), -32602, "{}", response.text());
    assert_eq!(
        backend.task_ids(),
        [task_id],
        "ids are kept across restarts"
    );
}

/// An rmcp 2026-07-28 client declaring the tasks extension.
async fn tasks_client(url: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ClientConfig> {
    ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("backend-tests", "0.0.0"),
    )
    .with_protocol_version(ProtocolVersion::V_2026_07_28)
    .serve_with_lifecycle(
        StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(
            url.to_owned(),
        )),
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("modern client should start")
}

#[tokio::test]
async fn rmcp_client_gets_a_task_and_polls_it() {
    for era in [Era::Modern, Era::Both] {
        let name = format!("rc-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era).tasks(true)).await;
        let client = tasks_client(&backend.url()).await;
        assert!(
            client
                .peer_info()
                .expect("discovered")
                .capabilities
                .supports_tasks(),
            "{era}"
        );

        let response = client
            .call_tool_once(call("long_task", json!({ "delay_ms": 100 })))
            .await
            .expect("tools/call");
        let CallToolResponse::Task(created) = response else {
            panic!("{era}: expected a task, got {response:?}");
        };
        assert_eq!(backend.task_ids(), vec![created.task.task_id.clone()]);

        let deadline = Instant::now() + PATIENCE;
        let done = loop {
            let got = client
                .peer()
                .get_task(GetTaskParams::new(created.task.task_id.clone()))
                .await
                .expect("tasks/get");
            if got.task.status().is_terminal() {
                break got.task;
            }
            assert!(Instant::now() < deadline, "{era}: task never finished");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let TaskPayload::Completed { result } = done.payload else {
            panic!("{era}: expected completed, got {done:?}");
        };
        let result: CallToolResult =
            serde_json::from_value(Value::Object(result)).expect("a CallToolResult");
        assert_eq!(first_text(&result), format!("{name}: task done"));

        // A second task, cancelled.
        let response = client
            .call_tool_once(call("long_task", json!({ "delay_ms": 30_000 })))
            .await
            .expect("tools/call");
        let CallToolResponse::Task(created) = response else {
            panic!("{era}: expected a task, got {response:?}");
        };
        client
            .peer()
            .cancel_task(CancelTaskParams::new(created.task.task_id.clone()))
            .await
            .expect("tasks/cancel");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let got = client
                .peer()
                .get_task(GetTaskParams::new(created.task.task_id.clone()))
                .await
                .expect("tasks/get");
            if got.task.status() == TaskStatus::Cancelled {
                break;
            }
            assert!(Instant::now() < deadline, "{era}: never cancelled: {got:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(backend.task_ids().len(), 2);
        client.cancel().await.expect("client stops");
    }
}

#[tokio::test]
async fn plain_clients_get_long_task_synchronously() {
    // A modern rmcp client that does not declare the extension, and a legacy session.
    let both = TestBackend::start(BackendSpec::both("plain").tasks(true)).await;
    let (modern, _) = clients::modern(&both.url()).await;
    let result = modern
        .call_tool(call("long_task", json!({ "delay_ms": 20 })))
        .await
        .expect("tools/call");
    assert_eq!(first_text(&result), "plain: task done");

    for era in [Era::Both, Era::Legacy] {
        let backend = TestBackend::start(BackendSpec::new("old", era).tasks(true)).await;
        let (legacy, _) = clients::legacy(&backend.url())
            .await
            .expect("legacy client");
        let info = legacy.peer_info().expect("initialized");
        assert_eq!(
            info.capabilities.supports_tasks(),
            era == Era::Both,
            "{era}: only dual-era backends advertise the extension"
        );
        let result = legacy
            .call_tool(call("long_task", json!({ "delay_ms": 20 })))
            .await
            .expect("tools/call");
        assert_eq!(first_text(&result), "old: task done", "{era}");
        assert!(backend.task_ids().is_empty(), "{era}");
        legacy.cancel().await.expect("client stops");
    }
    assert!(both.task_ids().is_empty());
    modern.cancel().await.expect("client stops");
}
