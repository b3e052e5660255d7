//! What the gateway hands clients, and what ends (issue #17 items 6 to 8):
//!
//! - every id a client gets (relayed request ids, the backend's and the gateway's own; list
//!   cursors; task ids; `requestState`) is opaque: as is, or decoded as base64 or base64url, it
//!   shows no backend URL or address, no upstream session id, no principal, no backend name; the
//!   relayed answers still work, and a tampered id is refused as before;
//! - a DELETEd sealed session is `404 Session not found` at once on the node that ended it, and
//!   on every node sharing the node bus (Redis); without a bus another node accepts it until it
//!   expires (the documented window); the principal's other sessions and other principals'
//!   sessions are untouched, another principal cannot end one, and a principal over its share of
//!   remembered revocations gets `429` (its session stays usable);
//! - `tool_post_invoke` hooks see a task's result: `tasks/get` of a finished task is redacted or
//!   denied by `secret_filter` exactly like the direct call, and untouched without the plugin.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{EventStream, RedisServer, TempDir, modern_meta_with};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    GatewayProcess, ISSUER, Reply, base_config, bearer, legacy_delete, legacy_initialize,
    legacy_initialize_with, legacy_post, modern, poll_until, rpc_error, users_json, workdir, write,
};

const SEALING: &str = "isolation-ids-sealing-secret-isolation-ids";
const RING: &str = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const WAIT: Duration = Duration::from_secs(10);
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// One gateway process and its working directory.
struct Node {
    _dir: TempDir,
    process: GatewayProcess,
}

impl Node {
    fn addr(&self) -> SocketAddr {
        self.process.addr
    }
}

/// A gateway with `users`, the shared sealing secret, and `extra` sections (`env` for them).
async fn start(name: &str, users: &str, extra: &str, env: &[(&str, &str)]) -> Node {
    let dir = workdir(name);
    write(dir.path(), "users.json", users);
    let config = base_config(&format!(
        "\n[router]\nsealing_secret_env = \"MCP_GATEWAY_SEALING_SECRET\"\n{extra}"
    ));
    let mut all = vec![("MCP_GATEWAY_SEALING_SECRET", SEALING)];
    all.extend_from_slice(env);
    let process = GatewayProcess::start(dir.path(), &config, &all).await;
    Node { _dir: dir, process }
}

/// The `[sessions]` section of sealed ids, with `more` keys.
fn sealed_sessions(more: &str) -> String {
    format!("\n[sessions]\nkind = \"sealed\"\nkeys_env = \"MCP_GATEWAY_SESSION_KEYS\"\n{more}")
}

/// The needles of `hidden` that `id` shows: as is, or decoded (whole, or each `.`-separated part,
/// the previous `payload.tag` shape) as base64 or base64url, padded or not.
fn revealed(id: &str, hidden: &[String]) -> Vec<String> {
    let mut views = vec![id.as_bytes().to_vec()];
    for part in std::iter::once(id).chain(id.split('.')) {
        for engine in [URL_SAFE_NO_PAD, URL_SAFE, STANDARD, STANDARD_NO_PAD] {
            if let Ok(bytes) = engine.decode(part) {
                views.push(bytes);
            }
        }
    }
    hidden
        .iter()
        .filter(|needle| {
            views
                .iter()
                .any(|view| view.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .cloned()
        .collect()
}

fn assert_opaque(what: &str, id: &str, hidden: &[String]) {
    assert!(!id.is_empty(), "{what}: empty");
    let shown = revealed(id, hidden);
    assert!(shown.is_empty(), "{what} {id} reveals {shown:?}");
}

/// A POST in `session` whose SSE answer is read while it stays open.
async fn legacy_stream(addr: SocketAddr, sub: &str, session: &str, body: Value) -> EventStream {
    let auth = bearer(sub);
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let stream =
        EventStream::open(addr, "POST", "/servers/vh/mcp", &headers, &body.to_string()).await;
    assert_eq!(stream.status, 200);
    stream
}

/// The client's answer `result` to request `id`, POSTed in `session`.
async fn answer(addr: SocketAddr, sub: &str, session: &str, id: &Value, result: Value) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
    legacy_post(addr, sub, "vh", Some(session), &body).await
}

/// The result of a successful JSON-RPC answer (JSON, or the last SSE message).
fn result_of(reply: &Reply) -> Value {
    assert_eq!(reply.status, 200, "{}", reply.text());
    let message = reply.messages().pop().expect("a message");
    assert!(message.get("error").is_none(), "{message}");
    message["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_handed_to_clients_reveal_no_backend_upstream_session_or_principal() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").tasks(true).page_size(2)).await;
    let beta =
        TestBackend::start(BackendSpec::legacy("beta").sampling_tool(true).page_size(2)).await;
    let backends = [("alpha", alpha.url()), ("beta", beta.url())];
    let gw = start(
        "ids-opaque",
        &users_json(&[("alice", "vh", &backends)]),
        "",
        &[],
    )
    .await;
    let addr = gw.addr();
    let session = legacy_initialize_with(
        addr,
        "alice",
        "vh",
        json!({"sampling": {}, "elicitation": {}}),
    )
    .await;
    let upstream_session = beta
        .requests()
        .iter()
        .find_map(|r| r.header("mcp-session-id").map(str::to_owned))
        .expect("beta minted an upstream session");
    let mut hidden: Vec<String> = vec![
        alpha.url(),
        beta.url(),
        alpha.addr().to_string(),
        beta.addr().to_string(),
        upstream_session,
        "alice".into(),
        ISSUER.into(),
        "issuer.test".into(),
        "alpha".into(),
        "beta".into(),
    ];
    // Control: the check finds a route in the shape relayed ids had (signed, not encrypted).
    let signed = format!(
        "{}.c2lnbmF0dXJl",
        URL_SAFE_NO_PAD.encode(json!({"b": "beta", "l": beta.url(), "s": hidden[4]}).to_string())
    );
    assert_eq!(
        revealed(&signed, &hidden),
        [
            beta.url(),
            beta.addr().to_string(),
            hidden[4].clone(),
            "beta".into()
        ]
    );

    // A 2025 list cursor.
    let list = legacy_post(
        addr,
        "alice",
        "vh",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let cursor = result_of(&list)["nextCursor"]
        .as_str()
        .expect("nextCursor")
        .to_owned();
    assert_opaque("2025 cursor", &cursor, &hidden);

    // A backend's sampling request relayed on the call's stream.
    let mut call = legacy_stream(
        addr,
        "alice",
        &session,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "beta-sample", "arguments": {"prompt": "hi"}}}),
    )
    .await;
    let sampling = call
        .next_message_where(WAIT, |m| m["method"] == "sampling/createMessage")
        .await;
    let relayed = sampling["id"].as_str().expect("a string id").to_owned();
    assert_opaque("relayed backend request id", &relayed, &hidden);
    let sampled =
        json!({"role": "assistant", "content": {"type": "text", "text": "fine"}, "model": "m"});
    let mut tampered = relayed.clone().into_bytes();
    tampered[relayed.len() / 2] = if tampered[relayed.len() / 2] == b'A' {
        b'B'
    } else {
        b'A'
    };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let refused = answer(addr, "alice", &session, &json!(tampered), sampled.clone()).await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(
        rpc_error(&refused).1,
        "Response to an unknown or expired request"
    );
    let delivered = answer(addr, "alice", &session, &sampling["id"], sampled).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
    let done = call.next_message_where(WAIT, |m| m["id"] == 2).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "beta: sampled fine",
        "{done}"
    );

    // The gateway's own request (a modern backend's MRTR input bridged into elicitation/create).
    let mut ask = legacy_stream(
        addr,
        "alice",
        &session,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "alpha-ask"}}),
    )
    .await;
    for round in 0..2 {
        let asked = ask
            .next_message_where(WAIT, |m| m["method"] == "elicitation/create")
            .await;
        let id = asked["id"].as_str().expect("a string id");
        assert_opaque("the gateway's own request id", id, &hidden);
        let field = if round == 0 { "name" } else { "color" };
        let value = if round == 0 { "Ada" } else { "teal" };
        let accepted = answer(
            addr,
            "alice",
            &session,
            &asked["id"],
            json!({"action": "accept", "content": {field: value}}),
        )
        .await;
        assert_eq!(accepted.status, 202, "{}", accepted.text());
    }
    let done = ask.next_message_where(WAIT, |m| m["id"] == 3).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "alpha: Ada likes teal",
        "{done}"
    );

    // 2026-07-28: a cursor, a task id, and the requestState of both MRTR kinds.
    let list = modern(addr, "alice", "vh", "tools/list", json!({}), &[]).await;
    let cursor = result_of(&list)["nextCursor"]
        .as_str()
        .expect("nextCursor")
        .to_owned();
    assert_opaque("2026 cursor", &cursor, &hidden);
    let next = modern(
        addr,
        "alice",
        "vh",
        "tools/list",
        json!({"cursor": cursor}),
        &[],
    )
    .await;
    assert!(
        result_of(&next)["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "the cursor works"
    );

    let task = modern(
        addr,
        "alice",
        "vh",
        "tools/call",
        json!({"name": "alpha-long_task",
        "arguments": {"delay_ms": 10}, "_meta": modern_meta_with(json!({"extensions": {TASKS: {}}}))}),
        &[],
    )
    .await;
    let task_id = result_of(&task)["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    hidden.extend(alpha.task_ids());
    assert_opaque("task id", &task_id, &hidden);

    let parked = json!({"name": "beta-sample", "arguments": {"prompt": "hi"},
                        "_meta": modern_meta_with(json!({"sampling": {}}))});
    let parked = request_state(addr, parked).await;
    assert_opaque("requestState of a parked call", &parked, &hidden);
    let asked = json!({"name": "alpha-ask", "_meta": modern_meta_with(json!({"elicitation": {}}))});
    let asked = request_state(addr, asked).await;
    assert_opaque("requestState of a backend", &asked, &hidden);
}

/// alice's `tools/call` with `params`, answered `input_required`: its `requestState`.
async fn request_state(addr: SocketAddr, params: Value) -> String {
    let reply = modern(addr, "alice", "vh", "tools/call", params, &[]).await;
    let result = result_of(&reply);
    assert_eq!(result["resultType"], "input_required", "{result}");
    result["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned()
}

/// `tools/list` in `session` of `sub` on `node`.
async fn list_in(node: &Node, sub: &str, session: &str) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    legacy_post(node.addr(), sub, "vh", Some(session), &body).await
}

fn assert_ended(reply: &Reply) {
    assert_eq!(reply.status, 404, "{}", reply.text());
    assert_eq!(rpc_error(reply).1, "Session not found");
}

fn assert_working(reply: &Reply) {
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(result_of(reply)["tools"].is_array(), "{}", reply.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_sealed_session_is_unknown_at_once_and_others_are_untouched() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let backends = [("beta", beta.url())];
    let users = users_json(&[("alice", "vh", &backends), ("bob", "vh", &backends)]);
    let node = start(
        "ids-revoke",
        &users,
        &sealed_sessions("max_per_principal = 2\n"),
        &[("MCP_GATEWAY_SESSION_KEYS", RING)],
    )
    .await;
    let addr = node.addr();
    let ended = legacy_initialize(addr, "alice", "vh").await;
    let kept = legacy_initialize(addr, "alice", "vh").await;
    let bobs = legacy_initialize(addr, "bob", "vh").await;
    assert_working(&list_in(&node, "alice", &ended).await);

    // Another principal cannot end alice's session (it is unknown to bob).
    assert_ended(&legacy_delete(addr, "bob", "vh", &ended).await);
    assert_working(&list_in(&node, "alice", &ended).await);

    let deleted = legacy_delete(addr, "alice", "vh", &ended).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_ended(&list_in(&node, "alice", &ended).await);
    assert_ended(&legacy_delete(addr, "alice", "vh", &ended).await);
    assert_working(&list_in(&node, "alice", &kept).await);
    assert_working(&list_in(&node, "bob", &bobs).await);

    // alice's share of remembered revocations (max_per_principal = 2) is spent on her own
    // DELETEs only: the third is refused and that session keeps working; bob's DELETE is not.
    let second = legacy_delete(addr, "alice", "vh", &kept).await;
    assert_eq!(second.status, 200, "{}", second.text());
    let third = legacy_initialize(addr, "alice", "vh").await;
    let refused = legacy_delete(addr, "alice", "vh", &third).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(
        rpc_error(&refused).1,
        "Cannot end the session: too many ended sessions of this principal not expired yet (it ends when it expires)"
    );
    assert_working(&list_in(&node, "alice", &third).await);
    let bob_deleted = legacy_delete(addr, "bob", "vh", &bobs).await;
    assert_eq!(bob_deleted.status, 200, "{}", bob_deleted.text());
    assert_ended(&list_in(&node, "bob", &bobs).await);
}

/// Subscribers of Redis channel `channel` (`PUBSUB NUMSUB`), over a raw RESP exchange.
async fn subscribers(redis: &RedisServer, channel: &str) -> i64 {
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", redis.port()))
        .await
        .expect("redis");
    let command = format!(
        "*3\r\n$6\r\nPUBSUB\r\n$6\r\nNUMSUB\r\n${}\r\n{channel}\r\n",
        channel.len()
    );
    conn.write_all(command.as_bytes()).await.expect("write");
    let mut reply = Vec::new();
    let mut buf = [0u8; 256];
    // `*2`, `$<n>`, `<channel>`, `:<count>`: four lines.
    while reply.windows(2).filter(|w| w == b"\r\n").count() < 4 {
        let n = conn.read(&mut buf).await.expect("read");
        assert!(n > 0, "redis closed: {}", String::from_utf8_lossy(&reply));
        reply.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&reply);
    text.lines()
        .nth(3)
        .and_then(|line| line.strip_prefix(':'))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("NUMSUB reply {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_node_bus_a_deleted_sealed_session_is_unknown_on_every_node() {
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let backends = [("beta", beta.url())];
    let users = users_json(&[("alice", "vh", &backends), ("bob", "vh", &backends)]);
    let sessions = sealed_sessions(&format!("url = \"{}\"\n", redis.url()));
    let env = [("MCP_GATEWAY_SESSION_KEYS", RING)];
    let a = start("ids-bus-a", &users, &sessions, &env).await;
    let b = start("ids-bus-b", &users, &sessions, &env).await;
    let ended = legacy_initialize(a.addr(), "alice", "vh").await;
    let kept = legacy_initialize(a.addr(), "alice", "vh").await;
    let bobs = legacy_initialize(b.addr(), "bob", "vh").await;
    // Both nodes serve 2025 requests (which starts their bus subscription) ...
    assert_working(&list_in(&b, "alice", &ended).await);
    assert_working(&list_in(&a, "bob", &bobs).await);
    // ... and are subscribed before the revocation is published (pub/sub keeps nothing).
    assert!(
        poll_until(WAIT, || async {
            subscribers(&redis, "mcpgw:bus:all").await == 2
        })
        .await,
        "both nodes subscribe to the bus"
    );

    let deleted = legacy_delete(a.addr(), "alice", "vh", &ended).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_ended(&list_in(&a, "alice", &ended).await);
    assert!(
        poll_until(WAIT, || async {
            list_in(&b, "alice", &ended).await.status == 404
        })
        .await,
        "node B still serves the session node A ended"
    );
    assert_ended(&list_in(&b, "alice", &ended).await);
    for node in [&a, &b] {
        assert_working(&list_in(node, "alice", &kept).await);
        assert_working(&list_in(node, "bob", &bobs).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_node_bus_another_node_accepts_an_ended_sealed_session_until_it_expires() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let backends = [("beta", beta.url())];
    let users = users_json(&[("alice", "vh", &backends)]);
    let sessions = sealed_sessions("");
    let env = [("MCP_GATEWAY_SESSION_KEYS", RING)];
    let a = start("ids-nobus-a", &users, &sessions, &env).await;
    let b = start("ids-nobus-b", &users, &sessions, &env).await;
    let ended = legacy_initialize(a.addr(), "alice", "vh").await;
    let deleted = legacy_delete(a.addr(), "alice", "vh", &ended).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_ended(&list_in(&a, "alice", &ended).await);
    // The documented window (book: docs/src/several-nodes.md and docs/src/security.md): nothing tells node B.
    assert_working(&list_in(&b, "alice", &ended).await);
}

const SECRET_FILTERS: &str = r#"
version = 1

[[plugins]]
name = "redact-done"
kind = "secret_filter"
hooks = ["tool_post_invoke"]
conditions = { virtual_hosts = ["redact"] }
config = { action = "redact", detectors = [], patterns = { done = "task done" } }

[[plugins]]
name = "deny-done"
kind = "secret_filter"
hooks = ["tool_post_invoke"]
conditions = { virtual_hosts = ["deny"] }
config = { detectors = [], patterns = { done = "task done" } }
"#;

/// `alpha-long_task` for `sub` on `vhost`, as a task or not.
async fn long_task(node: &Node, sub: &str, vhost: &str, as_task: bool) -> Reply {
    let capabilities = if as_task {
        json!({"extensions": {TASKS: {}}})
    } else {
        json!({})
    };
    let params = json!({"name": "alpha-long_task", "arguments": {"delay_ms": 10}, "_meta": modern_meta_with(capabilities)});
    modern(node.addr(), sub, vhost, "tools/call", params, &[]).await
}

/// `tasks/get` of `task_id` every 50 ms until the task is no longer `working`: that answer.
async fn finished_task(node: &Node, sub: &str, vhost: &str, task_id: &str) -> Reply {
    let params =
        json!({"taskId": task_id, "_meta": modern_meta_with(json!({"extensions": {TASKS: {}}}))});
    let deadline = Instant::now() + WAIT;
    loop {
        let reply = modern(
            node.addr(),
            sub,
            vhost,
            "tasks/get",
            params.clone(),
            &[("mcp-name", task_id)],
        )
        .await;
        let working = reply
            .messages()
            .pop()
            .is_some_and(|m| m["result"]["status"] == "working");
        if !working {
            return reply;
        }
        assert!(
            Instant::now() < deadline,
            "the task never finished: {}",
            reply.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_hooks_see_a_tasks_result_like_the_direct_calls() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").tasks(true)).await;
    let backends = [("alpha", alpha.url())];
    let users = users_json(&[
        ("alice", "redact", &backends),
        ("bob", "deny", &backends),
        ("carol", "plain", &backends),
    ]);
    let node = {
        let dir = workdir("ids-task-hooks");
        write(dir.path(), "users.json", &users);
        write(dir.path(), "plugins.toml", SECRET_FILTERS);
        let config = base_config("\n[plugins]\nconfig = \"plugins.toml\"\n");
        let process = GatewayProcess::start(dir.path(), &config, &[]).await;
        Node { _dir: dir, process }
    };
    let text = |reply: &Reply| result_of(reply)["content"][0]["text"].clone();
    let task = |reply: &Reply| {
        result_of(reply)["taskId"]
            .as_str()
            .expect("taskId")
            .to_owned()
    };

    // Redacted: the direct call, and the task's result.
    assert_eq!(
        text(&long_task(&node, "alice", "redact", false).await),
        "alpha: [REDACTED]"
    );
    let id = task(&long_task(&node, "alice", "redact", true).await);
    let done = finished_task(&node, "alice", "redact", &id).await;
    let result = result_of(&done);
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(
        result["result"]["content"][0]["text"], "alpha: [REDACTED]",
        "{result}"
    );
    assert!(!done.text().contains("task done"), "{}", done.text());

    // Denied: the same error for both.
    let denied = (
        "Blocked: result contains a secret (done)".to_owned(),
        -32600,
    );
    let direct = rpc_error(&long_task(&node, "bob", "deny", false).await);
    assert_eq!((direct.1.clone(), direct.0), denied);
    let id = task(&long_task(&node, "bob", "deny", true).await);
    let done = finished_task(&node, "bob", "deny", &id).await;
    let through_task = rpc_error(&done);
    assert_eq!((through_task.1, through_task.0), denied, "{}", done.text());
    assert!(!done.text().contains("task done"), "{}", done.text());

    // Control: without the plugin the result is there, directly and through the task.
    assert_eq!(
        text(&long_task(&node, "carol", "plain", false).await),
        "alpha: task done"
    );
    let id = task(&long_task(&node, "carol", "plain", true).await);
    let done = result_of(&finished_task(&node, "carol", "plain", &id).await);
    assert_eq!(
        done["result"]["content"][0]["text"], "alpha: task done",
        "{done}"
    );
}
