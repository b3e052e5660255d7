//! Several gateway *processes* behind no sticky routing (book: docs/src/several-nodes.md, issue "several
//! nodes"): a 2025 client's session initialised on node A goes on through node B — lists, a call
//! with progress, a subscription whose update arrives on a GET stream opened on the other node, a
//! backend's sampling request answered through the other node — then node A is killed and the
//! session goes on through B without a single client-visible error, and finally both nodes are
//! replaced by new processes and the session still goes on, on the same backend session.
//!
//! Run with the `redis` session store (one private `redis-server`) and with the `sealed` store
//! (the nodes share nothing but the key ring), plus key rotation in `sealed`: an id sealed with
//! the old key keeps working once a new key leads the ring, and is unknown (404) once the old key
//! is removed.

mod support;

use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{EventStream, RedisServer, TempDir, legacy_headers, rpc_request};
use serde_json::{Value, json};
use support::{GatewayProcess, Reply, base_config, bearer, send_body, users_json, workdir, write};

const SEALING: &str = "two-nodes-sealing-secret-two-nodes-sealing";
const OLD_KEY: &str = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const NEW_KEY: &str = "k2:ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";
const PATH: &str = "/servers/vh/mcp";
const WAIT: Duration = Duration::from_secs(10);
/// The public URI of beta's static resource (naming = prefix).
const BETA_STATIC: &str = "beta-test://beta/static";

/// One node's working directory (its own `gateway.toml`, the shared user config) and process.
struct Node {
    dir: TempDir,
    process: GatewayProcess,
}

/// How the nodes keep sessions: the `[sessions]` section and the environment they need.
struct Sessions {
    section: String,
    env: Vec<(&'static str, String)>,
}

impl Sessions {
    fn redis(url: &str) -> Self {
        Self {
            section: format!("[sessions]\nkind = \"redis\"\nurl = \"{url}\"\n"),
            env: Vec::new(),
        }
    }

    fn sealed(ring: &str) -> Self {
        Self {
            section: "[sessions]\nkind = \"sealed\"\nkeys_env = \"MCP_GATEWAY_SESSION_KEYS\"\n"
                .to_owned(),
            env: vec![("MCP_GATEWAY_SESSION_KEYS", ring.to_owned())],
        }
    }
}

async fn start_node(name: &str, backend: &TestBackend, sessions: &Sessions) -> Node {
    start_node_with(name, &[(backend.name(), backend.url())], sessions).await
}

async fn start_node_with(name: &str, backends: &[(&str, String)], sessions: &Sessions) -> Node {
    let dir = workdir(name);
    write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh", backends)]),
    );
    let config = base_config(&format!(
        "\n[router]\nsealing_secret_env = \"MCP_GATEWAY_SEALING_SECRET\"\n\n{}",
        sessions.section
    ));
    let mut env = vec![("MCP_GATEWAY_SEALING_SECRET", SEALING)];
    env.extend(sessions.env.iter().map(|(k, v)| (*k, v.as_str())));
    let process = GatewayProcess::start(dir.path(), &config, &env).await;
    Node { dir, process }
}

async fn post(node: &Node, session: Option<&str>, body: Value) -> Reply {
    let auth = bearer("alice");
    send_body(
        node.process.addr,
        "POST",
        PATH,
        &legacy_headers(Some(&auth), session),
        &body.to_string(),
    )
    .await
}

/// A request whose SSE answer is read while it stays open.
async fn post_stream(node: &Node, session: &str, body: Value) -> EventStream {
    let auth = bearer("alice");
    let stream = EventStream::open(
        node.process.addr,
        "POST",
        PATH,
        &legacy_headers(Some(&auth), Some(session)),
        &body.to_string(),
    )
    .await;
    assert_eq!(stream.status, 200);
    stream
}

/// The response to request `id` in `reply` (JSON or SSE), asserting HTTP 200 and no error.
fn answer(reply: &Reply, id: u64) -> Value {
    assert_eq!(reply.status, 200, "{}", reply.text());
    let message = reply
        .messages()
        .into_iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no response to {id}: {}", reply.text()));
    assert!(message.get("error").is_none(), "{message}");
    message
}

async fn initialize(node: &Node) -> String {
    let init = post(
        node,
        None,
        rpc_request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}, "elicitation": {}},
                   "clientInfo": {"name": "two-processes", "version": "1"}}),
        ),
    )
    .await;
    answer(&init, 0);
    let session = init
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let initialized = post(
        node,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status, 202, "{}", initialized.text());
    session
}

async fn call_tool(node: &Node, session: &str, id: u64, params: Value) -> Reply {
    post(node, Some(session), rpc_request(id, "tools/call", params)).await
}

async fn echo(node: &Node, session: &str, id: u64, text: &str) {
    let params = json!({"name": "beta-echo", "arguments": {"text": text}});
    let call = call_tool(node, session, id, params).await;
    let expected = format!("beta: {text}");
    assert_eq!(
        answer(&call, id)["result"]["content"][0]["text"],
        expected.as_str()
    );
}

async fn list_tools(node: &Node, session: &str, id: u64) -> Vec<String> {
    let list = post(
        node,
        Some(session),
        rpc_request(id, "tools/list", json!({})),
    )
    .await;
    answer(&list, id)["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// A call with a progress token on `node`: every progress notification arrives, then the result.
async fn call_with_progress(node: &Node, session: &str, id: u64) {
    let params = json!({"name": "beta-slow", "arguments": {"steps": 3, "delay_ms": 20},
                        "_meta": {"progressToken": "p-two-nodes"}});
    let call = call_tool(node, session, id, params).await;
    let progress: Vec<Option<f64>> = call
        .messages()
        .into_iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64())
        .collect();
    assert_eq!(
        progress,
        [Some(1.0), Some(2.0), Some(3.0)],
        "{}",
        call.text()
    );
    assert_eq!(
        answer(&call, id)["result"]["content"][0]["text"],
        "beta: done"
    );
}

/// Subscribes through `subscriber`, opens the GET stream on `listener`, and touches the resource
/// until its update arrives there with its public URI (a touch sent before the backend attached
/// the GET stream is lost, hence the retries).
async fn update_reaches_the_other_node(
    subscriber: &Node,
    listener: &Node,
    backend: &TestBackend,
    session: &str,
) {
    let subscribe = post(
        subscriber,
        Some(session),
        rpc_request(10, "resources/subscribe", json!({"uri": BETA_STATIC})),
    )
    .await;
    answer(&subscribe, 10);
    let auth = bearer("alice");
    let get_headers = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let mut stream = EventStream::open(listener.process.addr, "GET", PATH, &get_headers, "").await;
    assert_eq!(stream.status, 200);
    assert!(
        backend
            .wait_until(WAIT, |b| b
                .requests()
                .iter()
                .any(|r| r.method == http::Method::GET))
            .await,
        "the backend never saw the GET stream opened through {listener:?}"
    );
    for _ in 0..10 {
        backend.touch(Some("test://beta/static")).await;
        if let Some(update) = next_update(&mut stream).await {
            assert_eq!(
                update["params"]["uri"], BETA_STATIC,
                "the update of the resource subscribed through the other node: {update}"
            );
            return;
        }
    }
    panic!("no resources/updated on the GET stream opened through {listener:?}");
}

/// The next `resources/updated` within a second, or `None` (`tools/list_changed`, which `touch`
/// sends last, or silence: the touch did not reach an attached GET stream).
async fn next_update(stream: &mut EventStream) -> Option<Value> {
    while let Some(event) = stream.next_event(Duration::from_secs(1)).await {
        let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
            continue;
        };
        match message["method"].as_str() {
            Some("notifications/resources/updated") => return Some(message),
            Some("notifications/tools/list_changed") => return None,
            _ => {}
        }
    }
    None
}

/// A sampling request relayed on `caller`'s POST stream, answered through `answerer`.
async fn sampling_answered_elsewhere(caller: &Node, answerer: &Node, session: &str, id: u64) {
    let mut stream = post_stream(
        caller,
        session,
        rpc_request(
            id,
            "tools/call",
            json!({"name": "beta-sample", "arguments": {"prompt": "two processes"}}),
        ),
    )
    .await;
    let sampling = stream
        .next_message_where(WAIT, |m| m["method"] == "sampling/createMessage")
        .await;
    let reply = json!({"jsonrpc": "2.0", "id": sampling["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "answered elsewhere"}, "model": "m"}});
    let delivered = post(answerer, Some(session), reply).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
    let done = stream.next_message_where(WAIT, |m| m["id"] == id).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "beta: sampled answered elsewhere",
        "{done}"
    );
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {} ({})",
            self.process.addr,
            self.dir.path().display()
        )
    }
}

/// The whole story of the module docs, for one session store.
async fn a_session_survives_its_nodes(sessions: Sessions) {
    let beta = TestBackend::start(
        BackendSpec::legacy("beta")
            .sampling_tool(true)
            .touch_tool(true),
    )
    .await;
    let a = start_node("node-a", &beta, &sessions).await;
    let mut b = start_node("node-b", &beta, &sessions).await;

    let session = initialize(&a).await;
    let names = list_tools(&b, &session, 1).await;
    for tool in ["beta-echo", "beta-slow", "beta-sample"] {
        assert!(names.iter().any(|n| n == tool), "{tool} in {names:?}");
    }
    echo(&b, &session, 2, "on b").await;
    call_with_progress(&b, &session, 3).await;
    update_reaches_the_other_node(&a, &b, &beta, &session).await;
    sampling_answered_elsewhere(&a, &b, &session, 4).await;
    sampling_answered_elsewhere(&b, &a, &session, 5).await;

    // Node A dies: the client (or its load balancer) just goes on with B.
    let mut a = a;
    a.process.kill().await;
    echo(&b, &session, 6, "after a died").await;
    call_with_progress(&b, &session, 7).await;
    assert_eq!(list_tools(&b, &session, 8).await, names);

    // Both nodes are replaced by new processes: the session still goes on.
    b.process.kill().await;
    let c = start_node("node-c", &beta, &sessions).await;
    let d = start_node("node-d", &beta, &sessions).await;
    echo(&c, &session, 9, "on a new node").await;
    sampling_answered_elsewhere(&d, &c, &session, 11).await;
    assert_eq!(list_tools(&d, &session, 12).await, names);

    // Every node continued the one backend session `initialize` created on A.
    assert_eq!(
        beta.requests_for("initialize").len(),
        1,
        "one backend session for the whole story"
    );
    let delete = send_body(
        d.process.addr,
        "DELETE",
        PATH,
        &[
            ("authorization", &bearer("alice")),
            ("mcp-session-id", &session),
        ],
        "",
    )
    .await;
    assert_eq!(delete.status, 200, "{}", delete.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_its_nodes_with_the_redis_store() {
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    a_session_survives_its_nodes(Sessions::redis(&redis.url())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_its_nodes_with_sealed_ids() {
    a_session_survives_its_nodes(Sessions::sealed(OLD_KEY)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_key_rotation_keeps_old_sessions_until_their_key_is_removed() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let mut old = start_node("rotation-old", &beta, &Sessions::sealed(OLD_KEY)).await;
    let session = initialize(&old).await;
    old.process.kill().await;

    // Rotation step 1: the new key leads the ring, the old one still opens.
    let both = format!("{NEW_KEY},{OLD_KEY}");
    let mut rotated = start_node("rotation-both", &beta, &Sessions::sealed(&both)).await;
    echo(&rotated, &session, 1, "old id, rotated ring").await;
    let fresh = initialize(&rotated).await;
    assert!(
        fresh.starts_with("k2."),
        "new ids use the newest key: {fresh}"
    );
    assert!(session.starts_with("k1."), "{session}");
    rotated.process.kill().await;

    // Rotation step 2: the old key is retired; its sessions are unknown, the new ones go on.
    let retired = start_node("rotation-new", &beta, &Sessions::sealed(NEW_KEY)).await;
    let gone = post(
        &retired,
        Some(&session),
        rpc_request(2, "tools/list", json!({})),
    )
    .await;
    assert_eq!(gone.status, 404, "{}", gone.text());
    assert_eq!(gone.json()["error"]["message"], "Session not found");
    echo(&retired, &fresh, 3, "new id, new ring").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_two_node_example_configuration_is_valid() {
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/two-nodes/gateway.toml"
    );
    let url = redis.url();
    let (code, out, err) = support::run_cli(
        &["check-config", "--config", path],
        &[
            ("MCP_GATEWAY_JWT_SECRET", support::SECRET),
            ("MCP_GATEWAY_SEALING_SECRET", SEALING),
            ("MCP_GATEWAY_CONFIG_STORE_URL", &url),
            ("MCP_GATEWAY_SESSIONS_URL", &url),
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
}

/// `alpha-ask` (a modern backend's MRTR input, bridged into real `elicitation/create` requests
/// on `caller`'s POST stream), each answered through `answerer`: the final text, or the first
/// refused answer.
async fn ask_answering_through(
    caller: &Node,
    answerer: &Node,
    session: &str,
    id: u64,
) -> Result<Value, Reply> {
    let mut stream = post_stream(
        caller,
        session,
        rpc_request(id, "tools/call", json!({"name": "alpha-ask"})),
    )
    .await;
    for _ in 0..2 {
        let asked = stream
            .next_message_where(WAIT, |m| m["method"] == "elicitation/create")
            .await;
        let field = asked["params"]["requestedSchema"]["properties"]
            .as_object()
            .and_then(|p| p.keys().next().cloned())
            .expect("a form with one property");
        let value = if field == "name" { "Ada" } else { "teal" };
        let reply = json!({"jsonrpc": "2.0", "id": asked["id"],
                           "result": {"action": "accept", "content": {field: value}}});
        let delivered = post(answerer, Some(session), reply).await;
        if delivered.status != 202 {
            return Err(delivered);
        }
    }
    Ok(stream.next_message_where(WAIT, |m| m["id"] == id).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_redis_store_answers_and_cancellations_reach_the_node_running_the_call() {
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let sessions = Sessions::redis(&redis.url());
    let backends = [("alpha", alpha.url())];
    let a = start_node_with("bus-a", &backends, &sessions).await;
    let b = start_node_with("bus-b", &backends, &sessions).await;
    let session = initialize(&a).await;

    // The gateway's own requests (bridged MRTR input) run on A; B passes the answers on.
    let done = ask_answering_through(&a, &b, &session, 1)
        .await
        .unwrap_or_else(|refused| panic!("answer refused: {}", refused.text()));
    assert_eq!(
        done["result"]["content"][0]["text"], "alpha: Ada likes teal",
        "{done}"
    );

    // A call running on A, cancelled through B.
    let params = json!({"name": "alpha-slow", "arguments": {"steps": 50, "delay_ms": 100}});
    let call = call_tool(&a, &session, 2, params);
    let cancel = async {
        assert!(
            alpha
                .wait_until(WAIT, |b| b.calls_started("slow") == 1)
                .await,
            "the call started"
        );
        let cancelled = post(
            &b,
            Some(&session),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 2, "reason": "changed my mind"}}),
        )
        .await;
        assert_eq!(cancelled.status, 202, "{}", cancelled.text());
    };
    let (reply, ()) = tokio::join!(call, cancel);
    assert!(
        alpha
            .wait_until(WAIT, |b| b.calls_cancelled("slow") == 1)
            .await,
        "the backend saw no cancellation: {:?}",
        alpha.calls("slow")
    );
    assert!(reply.status.is_success(), "{}", reply.text());
    assert!(
        reply.body.is_empty() || reply.messages().iter().all(|m| m["id"] != 2),
        "no response follows a cancellation: {}",
        reply.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_node_bus_an_answer_for_another_nodes_request_is_refused_clearly() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let sessions = Sessions::sealed(OLD_KEY);
    let backends = [("alpha", alpha.url())];
    let a = start_node_with("nobus-a", &backends, &sessions).await;
    let b = start_node_with("nobus-b", &backends, &sessions).await;
    let session = initialize(&a).await;
    let Err(refused) = ask_answering_through(&a, &b, &session, 1).await else {
        panic!("node B cannot reach node A's waiting call without a bus");
    };
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(
        refused.json()["error"]["message"],
        "Response to a request of another gateway node (no node bus configured)"
    );
    // The same flow answered on the node that asked works.
    let done = ask_answering_through(&a, &a, &session, 2)
        .await
        .unwrap_or_else(|refused| panic!("answer refused: {}", refused.text()));
    assert_eq!(
        done["result"]["content"][0]["text"],
        "alpha: Ada likes teal"
    );
}
