//! The tasks extension (`io.modelcontextprotocol/tasks`) through the gateway, for 2026-07-28
//! clients over raw HTTP: `server/discover` advertises it when a backend does; a task created by a
//! backend reaches the client under a gateway task id (never the backend's raw id) bound to the
//! caller and the virtual host; `tasks/get|update|cancel` with that id (`params.taskId` and
//! `Mcp-Name`) reach the owning backend with its raw id restored, and their results carry the
//! gateway id again; a tampered, made-up, raw or foreign id is refused with -32602 before anything
//! reaches a backend. 2025 clients get no tasks.

use std::time::{Duration, Instant};

use mcp_test_backends::{BackendSpec, RecordedRequest, TestBackend};
use mcp_test_support::Reply;
use mcp_test_support::stack::{Gateway, user_config};
use serde_json::{Value, json};

const TASKS: &str = "io.modelcontextprotocol/tasks";
/// How long a test waits for a task to change state.
const PATIENCE: Duration = Duration::from_secs(10);
/// Long enough that the task is still `working` when the test looks, short enough for a test.
const WORKING_MS: u64 = 3_000;
/// Never reached: the task is cancelled first.
const FOREVER_MS: u64 = 60_000;

async fn setup() -> (TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").tasks(true)).await;
    let config = user_config(&[("alpha", alpha.url())]);
    let gw = Gateway::start(&[("alice", config.clone()), ("bob", config)]).await;
    (alpha, gw)
}

/// Request `_meta` of a 2026-07-28 client, declaring the tasks extension or not.
fn meta(declare_tasks: bool) -> Value {
    let capabilities = if declare_tasks {
        json!({ "extensions": { TASKS: {} } })
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": { "name": "tasks-e2e", "version": "0" },
    })
}

/// The JSON-RPC message answering the request (a JSON body, or the last SSE message).
fn message(reply: &Reply) -> Value {
    assert!(
        reply.status.is_success() || reply.status.is_client_error(),
        "{} {}",
        reply.status,
        reply.text()
    );
    let sse = reply
        .header("content-type")
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if sse {
        reply
            .sse_messages()
            .into_iter()
            .rfind(|m| m.get("result").is_some() || m.get("error").is_some())
            .unwrap_or_else(|| panic!("no reply in the stream: {}", reply.text()))
    } else {
        reply.json()
    }
}

fn result_of(reply: &Reply) -> Value {
    let message = message(reply);
    assert_eq!(reply.status, 200, "{message}");
    assert!(message.get("error").is_none(), "{message}");
    message["result"].clone()
}

fn error_code(reply: &Reply) -> i64 {
    let message = message(reply);
    message["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error ({}): {message}", reply.status))
}

/// `alpha-long_task {delay_ms}` for `sub`.
async fn long_task(gw: &Gateway, sub: &str, delay_ms: u64, declare_tasks: bool) -> Reply {
    let params = json!({
        "name": "alpha-long_task",
        "arguments": { "delay_ms": delay_ms },
        "_meta": meta(declare_tasks),
    });
    gw.modern(sub, "vh", "tools/call", params).await
}

/// `tasks/get|update|cancel` for `task_id` with `Mcp-Name: <task_id>`, declaring the extension.
async fn task_request(gw: &Gateway, sub: &str, vhost: &str, method: &str, task_id: &str) -> Reply {
    let mut params = json!({ "taskId": task_id, "_meta": meta(true) });
    if method == "tasks/update" {
        params["inputResponses"] = json!({});
    }
    let name = mcp_core::headers::encode_header_value(task_id);
    let name = name.to_str().expect("ascii header value");
    gw.modern_with(sub, vhost, method, params, &[("mcp-name", name)])
        .await
}

/// The gateway task id of a `CreateTaskResult`.
fn created_task(reply: &Reply) -> String {
    let result = result_of(reply);
    assert_eq!(result["resultType"], "task", "{result}");
    assert_eq!(result["status"], "working", "{result}");
    assert!(
        result["createdAt"].is_string() && result["lastUpdatedAt"].is_string(),
        "{result}"
    );
    assert!(result.get("ttlMs").is_some(), "{result}");
    result["taskId"].as_str().expect("taskId").to_owned()
}

/// The gateway id is none of the backend's raw ids, and does not show one as is.
fn assert_not_raw(gateway_id: &str, alpha: &TestBackend) {
    let raw_ids = alpha.task_ids();
    assert!(!raw_ids.is_empty());
    for raw in &raw_ids {
        assert_ne!(gateway_id, raw, "the client got a raw backend task id");
        assert!(
            !gateway_id.contains(raw.as_str()),
            "{gateway_id} shows the raw id {raw}"
        );
    }
}

/// Polls `tasks/get` every 50 ms until the task has `status`; returns that result.
async fn wait_for_status(gw: &Gateway, task_id: &str, status: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    let mut last = Value::Null;
    while Instant::now() < deadline {
        let reply = task_request(gw, "alice", "vh", "tasks/get", task_id).await;
        last = result_of(&reply);
        if last["status"] == status {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task never reached {status}; last tasks/get result: {last}");
}

/// The upstream `tasks/*` requests alpha received for `method`.
fn upstream(alpha: &TestBackend, method: &str) -> Vec<RecordedRequest> {
    alpha.requests_for(method)
}

/// Every upstream request for `method` named the raw id, in `params.taskId` and `Mcp-Name`.
fn assert_upstream_raw(alpha: &TestBackend, method: &str, raw: &str) {
    let requests = upstream(alpha, method);
    assert!(!requests.is_empty(), "no {method} reached alpha");
    for request in requests {
        let body = request.json().expect("JSON body");
        assert_eq!(
            body["params"]["taskId"], raw,
            "{method} upstream body: {body}"
        );
        assert_eq!(
            request.header("mcp-name"),
            Some(raw),
            "{method} upstream Mcp-Name"
        );
        assert_eq!(request.header("mcp-method"), Some(method));
    }
}

fn tasks_declared(request: &RecordedRequest) -> bool {
    let body = request.json().expect("JSON body");
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
        .get(TASKS)
        .is_some()
}

#[tokio::test]
async fn discover_advertises_the_extension_only_when_a_backend_does() {
    let (_alpha, gw) = setup().await;
    let reply = gw
        .modern(
            "alice",
            "vh",
            "server/discover",
            json!({ "_meta": meta(true) }),
        )
        .await;
    let result = result_of(&reply);
    assert!(
        result["capabilities"]["extensions"].get(TASKS).is_some(),
        "{result}"
    );

    let plain = TestBackend::start(BackendSpec::modern("plain")).await;
    let config = user_config(&[("plain", plain.url())]);
    let plain_gw = Gateway::start(&[("alice", config)]).await;
    let reply = plain_gw
        .modern(
            "alice",
            "vh",
            "server/discover",
            json!({ "_meta": meta(true) }),
        )
        .await;
    let result = result_of(&reply);
    assert!(
        result["capabilities"]["extensions"].get(TASKS).is_none(),
        "no backend offers tasks: {result}"
    );
}

#[tokio::test]
async fn a_task_gets_a_gateway_id_and_completes_through_tasks_get() {
    let (alpha, gw) = setup().await;
    let reply = long_task(&gw, "alice", WORKING_MS, true).await;
    let task_id = created_task(&reply);
    let raw_ids = alpha.task_ids();
    assert_eq!(raw_ids.len(), 1, "alpha made one task");
    let raw = raw_ids[0].clone();
    assert_not_raw(&task_id, &alpha);
    assert!(!reply.text().contains(&raw), "{}", reply.text());

    // The call reached alpha under its own name, declaring the extension the client declared.
    let calls = upstream(&alpha, "tools/call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].called_name().as_deref(), Some("long_task"));
    assert!(
        tasks_declared(&calls[0]),
        "the client's declaration is forwarded"
    );

    let working = task_request(&gw, "alice", "vh", "tasks/get", &task_id).await;
    assert!(!working.text().contains(&raw), "{}", working.text());
    let working = result_of(&working);
    assert_eq!(working["resultType"], "complete", "{working}");
    assert_eq!(working["status"], "working", "{working}");
    assert_eq!(working["taskId"], task_id.as_str(), "{working}");
    assert!(working.get("result").is_none(), "{working}");

    // tasks/update is routed too (long_task asks for nothing: an empty acknowledgement).
    let update = task_request(&gw, "alice", "vh", "tasks/update", &task_id).await;
    let update = result_of(&update);
    assert_eq!(update["resultType"], "complete", "{update}");
    assert_upstream_raw(&alpha, "tasks/update", &raw);

    let done = wait_for_status(&gw, &task_id, "completed").await;
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["taskId"], task_id.as_str(), "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "alpha: task done",
        "{done}"
    );
    assert_eq!(alpha.calls_finished("long_task"), 1);

    assert_upstream_raw(&alpha, "tasks/get", &raw);
    assert_eq!(alpha.task_ids().len(), 1, "follow-ups create no tasks");
}

#[tokio::test]
async fn tasks_cancel_reaches_the_backend_and_the_task_ends_cancelled() {
    let (alpha, gw) = setup().await;
    // A first task that completes, then a second one to cancel.
    let first = created_task(&long_task(&gw, "alice", 10, true).await);
    wait_for_status(&gw, &first, "completed").await;

    let second = created_task(&long_task(&gw, "alice", FOREVER_MS, true).await);
    assert_ne!(first, second);
    let raw_ids = alpha.task_ids();
    assert_eq!(raw_ids.len(), 2);
    let raw = raw_ids[1].clone();
    assert_not_raw(&second, &alpha);

    let ack = task_request(&gw, "alice", "vh", "tasks/cancel", &second).await;
    assert!(!ack.text().contains(&raw), "{}", ack.text());
    let ack = result_of(&ack);
    assert_eq!(ack["resultType"], "complete", "{ack}");
    let cancels = upstream(&alpha, "tasks/cancel");
    assert_eq!(cancels.len(), 1);
    assert_upstream_raw(&alpha, "tasks/cancel", &raw);

    let cancelled = wait_for_status(&gw, &second, "cancelled").await;
    assert_eq!(cancelled["taskId"], second.as_str(), "{cancelled}");
    assert!(cancelled.get("result").is_none(), "{cancelled}");
    assert!(
        alpha
            .wait_for_calls("long_task", PATIENCE, |calls| calls.cancelled == 1)
            .await,
        "{:?}",
        alpha.calls("long_task")
    );
    assert_eq!(alpha.running_tasks(), 0);

    // The first task is untouched by the cancel.
    let first = wait_for_status(&gw, &first, "completed").await;
    assert_eq!(first["result"]["content"][0]["text"], "alpha: task done");
}

#[tokio::test]
async fn bad_and_foreign_task_ids_are_refused_before_the_backend() {
    let (alpha, gw) = setup().await;
    let task_id = created_task(&long_task(&gw, "alice", FOREVER_MS, true).await);
    let raw = alpha.task_ids()[0].clone();
    // Sanity: the id works for alice.
    let ok = task_request(&gw, "alice", "vh", "tasks/get", &task_id).await;
    assert_eq!(result_of(&ok)["status"], "working");

    let before = alpha.requests().len();
    let mut tampered = task_id.clone().into_bytes();
    let at = tampered.len() - 3;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let mut tampered_payload = task_id.clone().into_bytes();
    tampered_payload[1] = if tampered_payload[1] == b'x' {
        b'y'
    } else {
        b'x'
    };
    let tampered_payload = String::from_utf8(tampered_payload).expect("ascii");
    let cases = [
        ("tampered tag", "alice", tampered.as_str()),
        ("tampered payload", "alice", tampered_payload.as_str()),
        ("made up", "alice", "task-1234"),
        (
            "made up, sealed-looking",
            "alice",
            "eyJiIjoiYWxwaGEifQ.AAAA",
        ),
        ("alpha's raw id", "alice", raw.as_str()),
        ("alice's id used by bob", "bob", task_id.as_str()),
    ];
    for (what, sub, id) in cases {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let reply = task_request(&gw, sub, "vh", method, id).await;
            assert_eq!(
                error_code(&reply),
                -32602,
                "{what}, {method}: {} {}",
                reply.status,
                reply.text()
            );
        }
    }
    let after = alpha.requests();
    assert_eq!(
        after.len(),
        before,
        "nothing reached alpha: {:?}",
        after[before..].iter().map(|r| r.json()).collect::<Vec<_>>()
    );

    // alice's task is still hers, and still running: bob's cancel did nothing.
    let still = task_request(&gw, "alice", "vh", "tasks/get", &task_id).await;
    assert_eq!(result_of(&still)["status"], "working");
    assert_eq!(alpha.calls_cancelled("long_task"), 0);
}

#[tokio::test]
async fn mcp_name_must_mirror_the_task_id() {
    let (alpha, gw) = setup().await;
    let task_id = created_task(&long_task(&gw, "alice", FOREVER_MS, true).await);
    let raw = alpha.task_ids()[0].clone();
    let before = alpha.requests().len();
    let params = json!({ "taskId": task_id, "_meta": meta(true) });
    for (what, extra) in [
        ("no Mcp-Name", vec![]),
        ("Mcp-Name of the raw id", vec![("mcp-name", raw.as_str())]),
        ("another Mcp-Name", vec![("mcp-name", "other")]),
    ] {
        let reply = gw
            .modern_with("alice", "vh", "tasks/get", params.clone(), &extra)
            .await;
        assert_eq!(reply.status, 400, "{what}: {}", reply.text());
        assert_eq!(error_code(&reply), -32020, "{what}: {}", reply.text());
    }
    assert_eq!(alpha.requests().len(), before, "nothing reached alpha");
}

#[tokio::test]
async fn a_task_id_is_bound_to_its_virtual_host() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").tasks(true)).await;
    let backends = json!({ "alpha": { "url": alpha.url(), "timeout_ms": 5000 } });
    let config = json!({ "virtual_hosts": {
        "vh": { "backends": backends.clone() },
        "vh2": { "backends": backends },
    }});
    let gw = Gateway::start(&[("alice", config)]).await;
    let task_id = created_task(&long_task(&gw, "alice", FOREVER_MS, true).await);
    let before = alpha.requests().len();
    let reply = task_request(&gw, "alice", "vh2", "tasks/get", &task_id).await;
    assert_eq!(error_code(&reply), -32602, "{}", reply.text());
    assert_eq!(alpha.requests().len(), before, "nothing reached alpha");
}

#[tokio::test]
async fn a_call_without_the_tasks_capability_gets_a_normal_result() {
    let (alpha, gw) = setup().await;
    let started = Instant::now();
    let reply = long_task(&gw, "alice", 200, false).await;
    let result = result_of(&reply);
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(result["content"][0]["text"], "alpha: task done", "{result}");
    assert!(result.get("taskId").is_none(), "{result}");
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(alpha.task_ids().is_empty(), "alpha made no task");
    let calls = upstream(&alpha, "tools/call");
    assert_eq!(calls.len(), 1);
    assert!(
        !tasks_declared(&calls[0]),
        "the gateway declared tasks the client did not declare"
    );
}

#[tokio::test]
async fn tasks_get_without_the_declaration_is_missing_capability() {
    let (alpha, gw) = setup().await;
    let task_id = created_task(&long_task(&gw, "alice", FOREVER_MS, true).await);
    let name = mcp_core::headers::encode_header_value(&task_id);
    let params = json!({ "taskId": task_id, "_meta": meta(false) });
    let reply = gw
        .modern_with(
            "alice",
            "vh",
            "tasks/get",
            params,
            &[("mcp-name", name.to_str().expect("ascii"))],
        )
        .await;
    assert_eq!(
        error_code(&reply),
        -32021,
        "{} {}",
        reply.status,
        reply.text()
    );
    assert_eq!(
        reply.status, 400,
        "2026-07-28 ties -32021 to HTTP 400, through the gateway too"
    );
    assert_eq!(alpha.calls_cancelled("long_task"), 0);
}

/// POSTs `body` in a 2025 session (`initialize` when `session` is `None`).
async fn legacy_post(gw: &Gateway, session: Option<&str>, body: Value) -> Reply {
    gw.legacy_post("alice", "vh", session, body).await
}

/// Opens a 2025 session declaring `capabilities` at `initialize`; returns the session id and the
/// `initialize` result.
async fn legacy_session(gw: &Gateway, capabilities: &Value) -> (String, Value) {
    let init = legacy_post(
        gw,
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": { "name": "legacy-tasks-e2e", "version": "1" }
        }}),
    )
    .await;
    let session = init
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("no session: {} {}", init.status, init.text()))
        .to_owned();
    let result = result_of(&init);
    let initialized = legacy_post(
        gw,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status, 202);
    (session, result)
}

/// 2025 clients, with or without `extensions` in their `initialize` capabilities (rmcp's
/// `enable_tasks()` puts it there), are not offered tasks, get `long_task` synchronously, and
/// cannot use `tasks/get`.
#[tokio::test]
async fn a_2025_client_gets_no_tasks() {
    let (alpha, gw) = setup().await;
    let task_id = created_task(&long_task(&gw, "alice", FOREVER_MS, true).await);

    let mut problems = Vec::new();
    for capabilities in [json!({}), json!({ "extensions": { TASKS: {} } })] {
        let (session, init) = legacy_session(&gw, &capabilities).await;
        let offered = &init["capabilities"]["extensions"];
        if offered.get(TASKS).is_some() {
            problems.push(format!(
                "initialize ({capabilities}) offers the tasks extension to a 2025 client: {init}"
            ));
        }

        // long_task must run synchronously for it: no task is made upstream.
        let before_tasks = alpha.task_ids().len();
        let before_calls = upstream(&alpha, "tools/call").len();
        let call = legacy_post(
            &gw,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "alpha-long_task", "arguments": { "delay_ms": 50 }
            }}),
        )
        .await;
        let result = result_of(&call);
        if result["content"][0]["text"] != "alpha: task done" || result.get("taskId").is_some() {
            let upstream_call = upstream(&alpha, "tools/call")
                .get(before_calls)
                .map(|r| String::from_utf8_lossy(&r.body).into_owned());
            problems.push(format!(
                "tools/call from a 2025 session ({capabilities}) answered {result}; \
                 upstream request: {upstream_call:?}"
            ));
        }
        if alpha.task_ids().len() != before_tasks {
            problems.push(format!(
                "alpha made a task for a 2025 session ({capabilities})"
            ));
        }

        // tasks/get is not bridged, not even with a valid gateway id of the same caller.
        let before = upstream(&alpha, "tasks/get").len();
        let get = legacy_post(
            &gw,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": { "taskId": task_id }}),
        )
        .await;
        let message = message(&get);
        assert!(message.get("error").is_some(), "{message}");
        assert_eq!(upstream(&alpha, "tasks/get").len(), before);
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Opens a 2026-07-28 `subscriptions/listen` (JSON-RPC id 9) for `sub` naming `task_ids`,
/// declaring the tasks extension or not; returns the stream (its HTTP status unchecked).
async fn listen_for_tasks(
    gw: &Gateway,
    sub: &str,
    task_ids: &[&str],
    declare_tasks: bool,
) -> mcp_test_support::EventStream {
    let params = json!({ "notifications": { "taskIds": task_ids }, "_meta": meta(declare_tasks) });
    let (headers, body) =
        mcp_test_support::stack::modern_request_with_id(json!(9), "subscriptions/listen", params);
    let auth = mcp_test_support::stack::bearer(sub);
    let mut all: Vec<(&str, &str)> = vec![("authorization", &auth)];
    all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
    mcp_test_support::EventStream::open(gw.addr, "POST", "/servers/vh/mcp", &all, &body).await
}

/// The next JSON-RPC message on a listen stream, `None` after `wait`.
async fn next_message(stream: &mut mcp_test_support::EventStream, wait: Duration) -> Option<Value> {
    loop {
        let event = stream.next_event(wait).await?;
        if !event.data.trim().is_empty() {
            return Some(serde_json::from_str(&event.data).expect("SSE data is JSON"));
        }
    }
}

#[tokio::test]
async fn listen_task_ids_get_the_named_tasks_notifications_under_gateway_ids() {
    let (alpha, gw) = setup().await;
    let watched = created_task(&long_task(&gw, "alice", FOREVER_MS, true).await);
    let other = created_task(&long_task(&gw, "alice", FOREVER_MS, true).await);
    let bobs = created_task(&long_task(&gw, "bob", FOREVER_MS, true).await);
    assert_not_raw(&watched, &alpha);

    // Bob's id, a raw backend id and a made-up one are not honoured: the ack names only alice's.
    let raw = alpha.task_ids()[0].clone();
    let mut stream = listen_for_tasks(&gw, "alice", &[&watched, &bobs, &raw, "nope"], true).await;
    assert_eq!(stream.status, 200);
    let ack = next_message(&mut stream, PATIENCE).await.expect("ack");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({ "taskIds": [watched] }),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    // The backend was asked with the raw id only.
    let listens = upstream(&alpha, "subscriptions/listen");
    let asked = listens
        .iter()
        .filter_map(|r| r.json())
        .find(|b| b["params"]["notifications"].get("taskIds").is_some())
        .expect("a listen naming task ids reached alpha");
    assert_eq!(
        asked["params"]["notifications"]["taskIds"],
        json!([raw]),
        "{asked}"
    );

    // Another task of alice's and bob's task change: nothing for this stream.
    for (sub, task) in [("alice", &other), ("bob", &bobs)] {
        let reply = task_request(&gw, sub, "vh", "tasks/cancel", task).await;
        result_of(&reply);
    }
    let reply = task_request(&gw, "alice", "vh", "tasks/cancel", &watched).await;
    result_of(&reply);
    let notification = next_message(&mut stream, PATIENCE)
        .await
        .expect("a notifications/tasks for the watched task");
    assert_eq!(
        notification["method"], "notifications/tasks",
        "{notification}"
    );
    assert_eq!(notification["params"]["taskId"], watched, "{notification}");
    assert_eq!(
        notification["params"]["status"], "cancelled",
        "{notification}"
    );
    assert_eq!(
        notification["params"]["_meta"],
        json!({ "io.modelcontextprotocol/subscriptionId": 9 }),
        "{notification}"
    );
    // The other two changed before the watched one (their cancels were answered first): had
    // anything of theirs reached this stream, it would have come first. Nothing else comes.
    assert!(
        next_message(&mut stream, Duration::from_millis(500))
            .await
            .is_none(),
        "only the watched task's change reaches this stream"
    );
}

#[tokio::test]
async fn listen_task_ids_without_the_tasks_extension_are_refused() {
    let (alpha, gw) = setup().await;
    let task = created_task(&long_task(&gw, "alice", WORKING_MS, true).await);
    let params = json!({ "notifications": { "taskIds": [task] }, "_meta": meta(false) });
    let reply = gw
        .modern("alice", "vh", "subscriptions/listen", params)
        .await;
    assert_eq!(reply.status, 400, "{}", reply.text());
    let error = reply.json();
    assert_eq!(error["error"]["code"], -32021, "{error}");
    assert_eq!(
        error["error"]["data"]["requiredCapabilities"],
        json!({ "extensions": { TASKS: {} } })
    );
    assert!(upstream(&alpha, "subscriptions/listen").is_empty());
}

/// The `notifications/tasks` that reports `task` completed, through `gw` for alice.
#[cfg(feature = "plugins")]
async fn completion_notification(gw: &Gateway) -> Value {
    let task = created_task(&long_task(gw, "alice", WORKING_MS, true).await);
    let mut stream = listen_for_tasks(gw, "alice", &[&task], true).await;
    assert_eq!(stream.status, 200);
    let ack = next_message(&mut stream, PATIENCE).await.expect("ack");
    assert_eq!(
        ack["params"]["notifications"],
        json!({ "taskIds": [task] }),
        "{ack}"
    );
    loop {
        let message = next_message(&mut stream, PATIENCE)
            .await
            .expect("the task's notifications until it completes");
        assert_eq!(message["method"], "notifications/tasks", "{message}");
        assert_eq!(message["params"]["taskId"], task, "{message}");
        if message["params"]["status"] == "completed" {
            return message;
        }
    }
}

// Plugin post hooks: only with the router's `plugins` feature.
#[cfg(feature = "plugins")]
#[tokio::test]
async fn a_task_notification_carries_its_result_unless_a_post_hook_governs_the_call() {
    let (_alpha, gw) = setup().await;
    let plain = completion_notification(&gw).await;
    assert_eq!(
        plain["params"]["result"]["content"][0]["text"], "alpha: task done",
        "the full DetailedTask: {plain}"
    );

    let governed_backend = TestBackend::start(BackendSpec::modern("alpha").tasks(true)).await;
    let document = r#"
version = 1

[[plugins]]
name = "redact-tasks"
kind = "secret_filter"
hooks = ["tool_post_invoke"]
conditions = { tools = ["long_task"] }
config = { action = "redact" }
"#;
    let runtime = mcp_plugins::PluginRuntime::builder()
        .load_str(document, mcp_plugins::Format::Toml, "test document")
        .expect("valid document");
    let router = mcp_router::McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .plugins(std::sync::Arc::new(runtime))
        .build();
    let config = user_config(&[("alpha", governed_backend.url())]);
    let governed_gw = Gateway::start_with(&[("alice", config)], router).await;
    let governed = completion_notification(&governed_gw).await;
    assert!(
        governed["params"].get("result").is_none(),
        "the hooked result only comes through tasks/get: {governed}"
    );
}
