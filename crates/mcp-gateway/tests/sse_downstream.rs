//! The 2024-11-05 HTTP+SSE transport for clients (`sse_downstream = true`) against the real
//! `mcp-gateway` process: the official Python SDK 1.x `sse_client` through a whole session, the
//! wire format of the stream, every refusal (status and body), and the inner session ending when
//! the client's stream closes.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use mcp_router::sse_bridge::{
    DETAIL_NOT_ENABLED, DETAIL_SESSION_NOT_FOUND, DETAIL_TOO_MANY_POSTS, DETAIL_TOO_MANY_SESSIONS,
};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::EventStream;
use serde_json::{Value, json};
use support::{
    GatewayProcess, Reply, base_config, bearer, poll_until, python_mcp1, send_body, token, workdir,
};

/// Longest wait for one event on a stream (a loaded 2-core machine; not a timing assertion).
const EVENT_WAIT: Duration = Duration::from_secs(20);
/// Longest run of the Python client, interpreter start-up included.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

/// `alice` and `bob` both have `vh` (SSE on, backends `alpha` modern and `beta` legacy), and
/// `alice` has `plain` (SSE off).
fn users(alpha: &TestBackend, beta: &TestBackend) -> String {
    let backends = json!({
        "alpha": {"url": alpha.url(), "timeout_ms": 10000},
        "beta": {"url": beta.url(), "timeout_ms": 10000},
    });
    json!({"users": {
        "alice": {"virtual_hosts": {
            "vh": {"sse_downstream": true, "backends": backends},
            "plain": {"backends": backends},
        }},
        "bob": {"virtual_hosts": {"vh": {"sse_downstream": true, "backends": backends}}},
    }})
    .to_string()
}

struct Setup {
    alpha: TestBackend,
    beta: TestBackend,
    gw: GatewayProcess,
    _dir: mcp_test_support::TempDir,
}

async fn setup(name: &str) -> Setup {
    setup_with(name, "").await
}

/// [`setup`] with more `[limits]` keys.
async fn setup_with(name: &str, limits: &str) -> Setup {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(
        BackendSpec::legacy("beta")
            .record_requests(true)
            .sampling_tool(true),
    )
    .await;
    let dir = workdir(name);
    support::write(dir.path(), "users.json", &users(&alpha, &beta));
    let config = base_config(&format!("\n[limits]\nmax_body_bytes = 4096\n{limits}"));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    Setup {
        alpha,
        beta,
        gw,
        _dir: dir,
    }
}

/// Opens `GET /servers/{vhost}/sse` for `sub` and reads the `endpoint` event.
async fn open(setup: &Setup, sub: &str, vhost: &str) -> (EventStream, String) {
    let auth = bearer(sub);
    let mut stream = EventStream::open(
        setup.gw.addr,
        "GET",
        &format!("/servers/{vhost}/sse"),
        &[("authorization", &auth), ("accept", "text/event-stream")],
        "",
    )
    .await;
    assert_eq!(stream.status, 200);
    assert_eq!(
        stream.headers.get("content-type").map(|v| v.as_bytes()),
        Some(&b"text/event-stream"[..])
    );
    let endpoint = stream.next_event(EVENT_WAIT).await.expect("endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"), "{endpoint:?}");
    (stream, endpoint.data)
}

/// POSTs `body` for `sub` to `path` (an endpoint path with its query).
async fn post(setup: &Setup, sub: Option<&str>, path: &str, body: &str) -> Reply {
    let auth = sub.map(bearer);
    let mut headers = vec![("content-type", "application/json")];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth));
    }
    send_body(setup.gw.addr, "POST", path, &headers, body).await
}

/// The next `event: message` on `stream` that answers request `id`.
async fn answer(stream: &mut EventStream, id: i64) -> Value {
    stream
        .next_message_where(EVENT_WAIT, |m| m["id"] == id)
        .await
}

/// Posts `initialize` and `notifications/initialized`; returns the initialize result.
async fn initialize(setup: &Setup, stream: &mut EventStream, endpoint: &str) -> Value {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {"sampling": {}},
        "clientInfo": {"name": "gateway-tests", "version": "0"}}});
    let accepted = post(setup, Some("alice"), endpoint, &init.to_string()).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    let result = answer(stream, 1).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = post(setup, Some("alice"), endpoint, &initialized.to_string()).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    result
}

fn beta_deletes(setup: &Setup) -> usize {
    setup
        .beta
        .requests()
        .iter()
        .filter(|r| r.method == http::Method::DELETE)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_over_the_stream_and_its_end_when_the_stream_closes() {
    let setup = setup("gw-sse-session").await;
    let (mut stream, endpoint) = open(&setup, "alice", "vh").await;
    let id = endpoint
        .strip_prefix("/servers/vh/messages?sessionId=")
        .unwrap_or_else(|| panic!("endpoint {endpoint}"));
    assert_eq!(id.len(), 32, "128 random bits in hex: {id}");
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");

    let init = initialize(&setup, &mut stream, &endpoint).await;
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05", "{init}");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "mcp-gateway",
        "{init}"
    );

    // A batch: both answers arrive on the stream, each as `event: message`.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "beta-echo", "arguments": {"text": "over sse"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]);
    let accepted = post(&setup, Some("alice"), &endpoint, &batch.to_string()).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let event = stream.next_event(EVENT_WAIT).await.expect("an answer");
        if event.data.is_empty() {
            continue;
        }
        assert_eq!(event.event.as_deref(), Some("message"), "{event:?}");
        let message: Value = serde_json::from_str(&event.data).expect("JSON message");
        if message.get("id").is_some() {
            answers.push(message);
        }
    }
    answers.sort_by_key(|m| m["id"].as_i64());
    assert_eq!(
        answers[0]["result"]["content"][0]["text"], "beta: over sse",
        "{answers:?}"
    );
    assert_eq!(answers[1], json!({"jsonrpc": "2.0", "id": 3, "result": {}}));

    // The client goes away: the inner session is deleted, which ends beta's upstream session.
    assert_eq!(beta_deletes(&setup), 0);
    drop(stream);
    assert!(
        poll_until(Duration::from_secs(20), || async {
            beta_deletes(&setup) == 1
        })
        .await,
        "no DELETE reached beta after the stream closed: {:?}",
        setup.beta.requests()
    );
    let ping = json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string();
    let gone = post(&setup, Some("alice"), &endpoint, &ping).await;
    gone.assert_detail(404, DETAIL_SESSION_NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_sampling_request_reaches_the_stream_and_the_posted_answer_routes_back() {
    let setup = setup("gw-sse-sampling").await;
    let (mut stream, endpoint) = open(&setup, "alice", "vh").await;
    initialize(&setup, &mut stream, &endpoint).await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "beta-sample", "arguments": {"prompt": "hi"}}});
    let accepted = post(&setup, Some("alice"), &endpoint, &call.to_string()).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    let request = stream
        .next_message_where(EVENT_WAIT, |m| m["method"] == "sampling/createMessage")
        .await;
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"], "hi",
        "{request}"
    );
    let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "model says: hi"},
        "model": "test-model"}});
    let accepted = post(&setup, Some("alice"), &endpoint, &reply.to_string()).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    let result = answer(&mut stream, 5).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "beta: sampled model says: hi",
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_have_their_status_and_body() {
    let setup = setup("gw-sse-refusals").await;
    let addr = setup.gw.addr;
    let alice = bearer("alice");
    let get = |path: &'static str, auth: Option<String>| async move {
        let mut headers = vec![("accept", "text/event-stream")];
        if let Some(auth) = &auth {
            headers.push(("authorization", auth.as_str()));
        }
        send_body(addr, "GET", path, &headers, "").await
    };

    // The virtual host did not opt in: both endpoints say so.
    get("/servers/plain/sse", Some(alice.clone()))
        .await
        .assert_detail(404, DETAIL_NOT_ENABLED);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    post(
        &setup,
        Some("alice"),
        "/servers/plain/messages?sessionId=00",
        &ping,
    )
    .await
    .assert_detail(404, DETAIL_NOT_ENABLED);
    // A virtual host the caller does not have, and no token at all: the layers in front answer.
    get("/servers/nope/sse", Some(alice.clone()))
        .await
        .assert_detail(404, "Server not found");
    let anonymous = get("/servers/vh/sse", None).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());
    assert!(
        anonymous
            .header("www-authenticate")
            .is_some_and(|c| c.starts_with("Bearer ")),
        "{:?}",
        anonymous.headers
    );
    let anonymous = post(&setup, None, "/servers/vh/messages?sessionId=00", &ping).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());
    let wrong_method = send_body(
        addr,
        "DELETE",
        "/servers/vh/sse",
        &[("authorization", &alice)],
        "",
    )
    .await;
    wrong_method.assert_detail(405, "Only GET opens the SSE stream");
    assert_eq!(wrong_method.header("allow"), Some("GET"));

    let (mut stream, endpoint) = open(&setup, "alice", "vh").await;
    // Unknown and missing ids, another principal's id, a body that is not JSON, an oversized one.
    let unknown = format!("/servers/vh/messages?sessionId={}", "0".repeat(32));
    post(&setup, Some("alice"), &unknown, &ping)
        .await
        .assert_detail(404, DETAIL_SESSION_NOT_FOUND);
    post(&setup, Some("alice"), "/servers/vh/messages", &ping)
        .await
        .assert_detail(400, "Missing sessionId query parameter");
    post(&setup, Some("bob"), &endpoint, &ping)
        .await
        .assert_detail(404, DETAIL_SESSION_NOT_FOUND);
    let malformed = post(&setup, Some("alice"), &endpoint, "{\"jsonrpc\": ").await;
    assert_eq!(malformed.status, 400, "{}", malformed.text());
    assert_eq!(malformed.header("content-type"), Some("application/json"));
    let error = malformed.json();
    assert_eq!(error["id"], Value::Null, "{error}");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Parse error: the body is not JSON")),
        "{error}"
    );
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(5000));
    post(&setup, Some("alice"), &endpoint, &big)
        .await
        .assert_detail(413, "Request body too large");

    // None of that disturbed the session: it still serves its owner.
    let init = initialize(&setup, &mut stream, &endpoint).await;
    assert_eq!(
        init["result"]["serverInfo"]["name"], "mcp-gateway",
        "{init}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_first_initialize_opens_an_inner_session() {
    let setup = setup("gw-sse-double-init").await;
    let (mut stream, endpoint) = open(&setup, "alice", "vh").await;
    let init = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {},
            "clientInfo": {"name": "gateway-tests", "version": "0"}}})
    };
    let batch = json!([init(1), init(2)]).to_string();
    let accepted = post(&setup, Some("alice"), &endpoint, &batch).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    // Both answers, in whatever order the concurrent forwards finish.
    let first = stream.next_message_where(EVENT_WAIT, |_| true).await;
    let second = stream.next_message_where(EVENT_WAIT, |_| true).await;
    let (won, lost) = if first.get("result").is_some() {
        (first, second)
    } else {
        (second, first)
    };
    assert_ne!(won["id"], lost["id"], "{won} {lost}");
    assert_eq!(won["result"]["protocolVersion"], "2024-11-05", "{won}");
    assert_eq!(lost["error"]["code"], -32600, "{lost}");
    assert_eq!(
        lost["error"]["message"],
        "SSE bridge: the session is already initialized"
    );
    // One inner session, so one upstream session at the legacy backend.
    let initializes = setup
        .beta
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .filter(|m| m["method"] == "initialize")
        .count();
    assert_eq!(initializes, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_has_a_bounded_number_of_posts_in_flight() {
    let setup = setup("gw-sse-posts").await;
    let (mut stream, endpoint) = open(&setup, "alice", "vh").await;
    initialize(&setup, &mut stream, &endpoint).await;
    let slow = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id + 10, "method": "tools/call", "params": {
            "name": "beta-slow", "arguments": {"steps": 2, "delay_ms": 5000}}})
        .to_string()
    };
    for id in 0..mcp_router::sse_bridge::MAX_POSTS_IN_FLIGHT {
        let accepted = post(&setup, Some("alice"), &endpoint, &slow(id)).await;
        assert_eq!(accepted.status, 202, "post {id}: {}", accepted.text());
    }
    let refused = post(&setup, Some("alice"), &endpoint, &slow(1000)).await;
    refused.assert_detail(429, DETAIL_TOO_MANY_POSTS);
    assert_eq!(refused.header("retry-after"), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_are_capped_and_a_closed_one_frees_its_slot() {
    let setup = setup_with("gw-sse-cap", "max_sse_sessions = 1\n").await;
    let alice = bearer("alice");
    let headers = [
        ("authorization", alice.as_str()),
        ("accept", "text/event-stream"),
    ];
    let (first, _) = open(&setup, "alice", "vh").await;
    assert_eq!(
        support::metric(&setup.gw, "mcp_gateway_sse_sessions_open").await,
        Some(1.0)
    );
    let refused = send_body(setup.gw.addr, "GET", "/servers/vh/sse", &headers, "").await;
    refused.assert_detail(503, DETAIL_TOO_MANY_SESSIONS);
    assert_eq!(refused.header("retry-after"), Some("5"));
    // Another principal shares the cap (it bounds the process, not a tenant).
    let bob = bearer("bob");
    let bobs = [
        ("authorization", bob.as_str()),
        ("accept", "text/event-stream"),
    ];
    let refused = send_body(setup.gw.addr, "GET", "/servers/vh/sse", &bobs, "").await;
    refused.assert_detail(503, DETAIL_TOO_MANY_SESSIONS);

    drop(first);
    let reopened = poll_until(Duration::from_secs(20), || async {
        let stream = EventStream::open(setup.gw.addr, "GET", "/servers/vh/sse", &headers, "").await;
        stream.status == 200
    })
    .await;
    assert!(reopened, "the closed stream's slot was never freed");
    // Every stream is closed again: the gauge says so at the next scrape.
    let zero = poll_until(Duration::from_secs(20), || async {
        support::metric(&setup.gw, "mcp_gateway_sse_sessions_open").await == Some(0.0)
    })
    .await;
    assert!(zero, "mcp_gateway_sse_sessions_open never went back to 0");
}

/// Runs `tests/interop/py_sse_client.py` to completion and returns its JSON line.
#[allow(clippy::print_stderr)]
async fn py_sse_client(python: &PathBuf, args: &[&str]) -> Value {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/py_sse_client.py");
    let run = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(CLIENT_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("py_sse_client.py did not finish within {CLIENT_TIMEOUT:?}"))
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- py_sse_client.py stderr (HTTP trace) ---\n{stderr}--- end ---");
    assert!(
        out.status.success(),
        "py_sse_client.py failed ({}): {stdout}",
        out.status
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line: {stdout}"));
    serde_json::from_str(line).expect("JSON summary")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_1x_sse_client_through_a_whole_session() {
    let Some(python) = python_mcp1() else { return };
    let setup = setup("gw-sse-python").await;
    let url = format!("http://{}/servers/vh/sse", setup.gw.addr);
    let token = token("alice");
    let summary = py_sse_client(
        &python,
        &[
            &url,
            &token,
            "beta-echo",
            r#"{"text": "hello over sse"}"#,
            "alpha-greet",
            "beta-slow",
            r#"{"steps": 3, "delay_ms": 20}"#,
        ],
    )
    .await;

    assert!(
        summary["sdk_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("1.")),
        "{summary}"
    );
    assert_eq!(summary["server_name"], "mcp-gateway", "{summary}");
    let version = summary["protocol_version"].as_str().unwrap_or_default();
    assert!(version.starts_with("202"), "{summary}");
    let tools: Vec<&str> = summary["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for expected in ["alpha-echo", "alpha-slow", "beta-echo", "beta-slow"] {
        assert!(tools.contains(&expected), "{expected} not in {tools:?}");
    }
    assert!(
        tools
            .iter()
            .all(|t| t.starts_with("alpha-") || t.starts_with("beta-")),
        "{tools:?}"
    );
    assert_eq!(
        summary["call"],
        json!({"tool": "beta-echo", "is_error": false, "text": ["beta: hello over sse"]})
    );
    let texts: Vec<&str> = summary["resources"]
        .as_object()
        .expect("resources")
        .values()
        .flat_map(|t| {
            t.as_array()
                .expect("texts")
                .iter()
                .filter_map(Value::as_str)
        })
        .collect();
    for expected in ["static from alpha", "static from beta"] {
        assert!(texts.contains(&expected), "{expected} not in {summary}");
    }
    assert_eq!(
        summary["prompt"],
        json!(["Hello python from alpha"]),
        "{summary}"
    );
    let call = &summary["progress_call"];
    assert_eq!(call["text"], json!(["beta: done"]), "{summary}");
    let steps: Vec<(f64, f64)> = call["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| Some((p["progress"].as_f64()?, p["total"].as_f64()?)))
        .collect();
    assert_eq!(steps, [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)], "{summary}");
    let logs: Vec<&str> = summary["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .filter_map(|l| l["data"]["message"].as_str())
        .collect();
    assert_eq!(
        logs,
        ["beta: step 1/3", "beta: step 2/3", "beta: step 3/3"],
        "{summary}"
    );
    assert_eq!(setup.beta.calls_finished("echo"), 1);
    assert_eq!(setup.alpha.calls_finished("echo"), 0);

    // The client closed its stream on exit: its inner session ended, and so did beta's.
    assert!(
        poll_until(Duration::from_secs(20), || async {
            beta_deletes(&setup) == 1
        })
        .await,
        "no DELETE reached beta after the client left"
    );
    let session = summary["session_ids"][0].as_str().expect("a session id");
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    post(
        &setup,
        Some("alice"),
        &format!("/servers/vh/messages?sessionId={session}"),
        &ping,
    )
    .await
    .assert_detail(404, DETAIL_SESSION_NOT_FOUND);
}
