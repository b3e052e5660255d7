//! Relayed requests: a backend's server requests waiting for a 2025 client's answer
//! (`limits.max_relayed_requests_per_principal`), a backend's pings (answered by the gateway),
//! and the rest of the first budget round (idle sessions, initialize results, backends per
//! virtual host). The stdio backend is `tests/interop/py_stdio_server.py` (Python SDK 1.x)
//! from the operator's stdio catalog, one process per principal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support;
use crate::support::{
    GatewayProcess, base_config, bearer, legacy_initialize_with, legacy_post, python_mcp1, workdir,
};
use mcp_test_support::{EventStream, legacy_headers};
use serde_json::{Value, json};

/// Every wait of these tests: seconds of margin on a loaded machine.
const WAIT: Duration = Duration::from_secs(30);
/// The per-principal share of relayed requests the gateway is started with.
const SHARE: usize = 4;

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop")
        .join(name)
}

/// A gateway whose `alice` and `bob` each have virtual host `vh` with the stdio backend `io`.
async fn gateway(python: &Path) -> (mcp_test_support::TempDir, GatewayProcess) {
    let dir = workdir("gw-budgets");
    let backends = json!({"io": {"stdio": "io", "timeout_ms": 30000}});
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"vh": {"backends": backends}}},
        "bob": {"virtual_hosts": {"vh": {"backends": backends}}},
    }});
    support::write(dir.path(), "users.json", &users.to_string());
    let config = base_config(&format!(
        "\n[limits]\nmax_relayed_requests_per_principal = {SHARE}\n\n\
         [stdio_servers.io]\ncommand = {:?}\nargs = [{:?}]\n",
        python.to_str().expect("utf-8 path"),
        script("py_stdio_server.py").to_str().expect("utf-8 path")
    ));
    let process = GatewayProcess::start(dir.path(), &config, &[]).await;
    (dir, process)
}

/// A 2025 session of `sub` whose client can be asked for samples.
async fn session(gw: &GatewayProcess, sub: &str) -> String {
    legacy_initialize_with(gw.addr, sub, "vh", json!({"sampling": {}})).await
}

/// A `tools/call` of `sub` whose SSE answer is read as it arrives.
async fn call(
    gw: &GatewayProcess,
    sub: &str,
    session: &str,
    id: u64,
    tool: &str,
    arguments: Value,
) -> EventStream {
    let auth = bearer(sub);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments}});
    let stream = EventStream::open(
        gw.addr,
        "POST",
        "/servers/vh/mcp",
        &legacy_headers(Some(&auth), Some(session)),
        &body.to_string(),
    )
    .await;
    assert_eq!(stream.status, 200);
    stream
}

/// The next sampling request of the backend on `stream`.
async fn next_question(stream: &mut EventStream) -> Value {
    stream
        .next_message_where(WAIT, |m| m["method"] == "sampling/createMessage")
        .await
}

/// Answers a sampling request as `sub`'s client.
async fn answer(gw: &GatewayProcess, sub: &str, session: &str, question: &Value) {
    let reply = json!({"jsonrpc": "2.0", "id": question["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}});
    let delivered = legacy_post(gw.addr, sub, "vh", Some(session), &reply).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
}

/// Asks `sub`'s client `count` questions through `io-ask_many` and answers them all: the call
/// must complete.
async fn ask_and_answer(gw: &GatewayProcess, sub: &str, session: &str, id: u64, count: usize) {
    let mut stream = call(gw, sub, session, id, "io-ask_many", json!({"count": count})).await;
    for _ in 0..count {
        let question = next_question(&mut stream).await;
        answer(gw, sub, session, &question).await;
    }
    let done = stream.next_message_where(WAIT, |m| m["id"] == id).await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        format!("py: answered {count}"),
        "{sub}: {done}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_asking_past_its_principals_share_fails_its_own_call_only() {
    let Some(python) = python_mcp1() else { return };
    let (_dir, gw) = gateway(&python).await;
    let alice = session(&gw, "alice").await;
    let bob = session(&gw, "bob").await;

    // The control: questions within the share are shown and answered.
    ask_and_answer(&gw, "alice", &alice, 1, SHARE - 1).await;

    // Alice's backend holds her whole share (four questions shown, none answered yet) ...
    let mut held = call(
        &gw,
        "alice",
        &alice,
        2,
        "io-ask_many",
        json!({"count": SHARE}),
    )
    .await;
    let mut questions = Vec::new();
    for _ in 0..SHARE {
        questions.push(next_question(&mut held).await);
    }
    // ... and bob's backend still reaches bob.
    ask_and_answer(&gw, "bob", &bob, 3, 2).await;
    for question in &questions {
        answer(&gw, "alice", &alice, question).await;
    }
    let done = held.next_message_where(WAIT, |m| m["id"] == 2).await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        format!("py: answered {SHARE}")
    );

    // One question more than the share at once: the share's worth is shown, then the call fails,
    // naming the limit. (Exactly one more: a stdio backend's requests name no call, and what it
    // had written past the refused one would reach the principal's next call on that process.)
    let mut flood = call(
        &gw,
        "alice",
        &alice,
        4,
        "io-ask_many",
        json!({"count": SHARE + 1}),
    )
    .await;
    let mut shown = 0;
    let end = loop {
        let message = flood
            .next_message_where(WAIT, |m| {
                m["method"] == "sampling/createMessage" || m["id"] == 4
            })
            .await;
        if message["id"] == 4 {
            break message;
        }
        shown += 1;
    };
    assert_eq!(shown, SHARE, "{end}");
    assert_eq!(end["error"]["code"], -32603, "{end}");
    let message = end["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "Backend io failed: too many backend requests wait for this caller's answers"
        ) && message.contains("limits.max_relayed_requests_per_principal"),
        "{end}"
    );

    // The failed call left nothing charged: alice is asked again at once.
    ask_and_answer(&gw, "alice", &alice, 5, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_pings_are_answered_by_the_gateway_not_relayed() {
    let Some(python) = python_mcp1() else { return };
    let (_dir, gw) = gateway(&python).await;
    let alice = session(&gw, "alice").await;

    // The answer is read whole (JSON, or SSE when anything came before the result).
    let reply = legacy_post(
        gw.addr,
        "alice",
        "vh",
        Some(&alice),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "io-ping_many", "arguments": {"count": 200}}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let messages = reply.messages();
    let relayed_pings = messages.iter().filter(|m| m["method"] == "ping").count();
    let done = messages
        .iter()
        .find(|m| m["id"] == 1)
        .unwrap_or_else(|| panic!("no result: {}", reply.text()));
    // Every ping was answered (the tool returns only then), and none reached the client.
    assert_eq!(
        done["result"]["content"][0]["text"], "py: pinged 200",
        "{done}"
    );
    assert_eq!(relayed_pings, 0);
    // The control: the same session's backend still reaches the client with a real question.
    ask_and_answer(&gw, "alice", &alice, 2, 1).await;
}

/// A 2025 `initialize` of `sub` on `addr`'s `vh`: the reply.
async fn initialize(addr: std::net::SocketAddr, sub: &str) -> support::Reply {
    support::legacy_initialize_reply(addr, sub, "vh", json!({})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_stop_counting_against_their_principals_share() {
    idle_sessions_stop_counting("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_stop_counting_against_their_principals_share_in_redis() {
    let Some(redis) = mcp_test_support::RedisServer::start().await else {
        return;
    };
    idle_sessions_stop_counting(&format!("kind = \"redis\"\nurl = \"{}\"\n", redis.url())).await;
}

/// A legacy backend `alpha` that alice and bob both have in their virtual host `vh`, and the
/// directory (named `name`) of their configuration.
async fn alice_and_bob_on_a_legacy_backend(
    name: &str,
) -> (mcp_test_backends::TestBackend, mcp_test_support::TempDir) {
    let backend =
        mcp_test_backends::TestBackend::start(mcp_test_backends::BackendSpec::legacy("alpha"))
            .await;
    let dir = workdir(name);
    let backends = json!({"alpha": {"url": backend.url()}});
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"vh": {"backends": backends}}},
        "bob": {"virtual_hosts": {"vh": {"backends": backends}}},
    }});
    support::write(dir.path(), "users.json", &users.to_string());
    (backend, dir)
}

/// Two principals, `sessions.max_per_principal = 2` in the store `store` configures (local
/// when empty): the third session is refused, bob is not, and idle sessions stop counting.
async fn idle_sessions_stop_counting(store: &str) {
    let (_backend, dir) = alice_and_bob_on_a_legacy_backend("gw-budgets-sessions").await;
    // Five seconds: the three initializes before the refusal fit in them on a loaded machine.
    let config = base_config(&format!(
        "\n[sessions]\n{store}idle_timeout_s = 5\nmax_per_principal = 2\n"
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;

    // Two sessions that the client never ends (most SDK clients never DELETE).
    for _ in 0..2 {
        let reply = initialize(gw.addr, "alice").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let refused = initialize(gw.addr, "alice").await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(
        refused.json()["error"]["message"],
        "Cannot create a session: session limit reached: too many sessions for this principal"
    );
    assert_eq!(
        initialize(gw.addr, "bob").await.status,
        200,
        "bob is not refused"
    );

    // Once they are idle past the timeout they no longer count (the table is far from full).
    let accepted = support::poll_until(WAIT, || async {
        initialize(gw.addr, "alice").await.status == 200
    })
    .await;
    assert!(accepted, "alice stayed locked out by her idle sessions");
}

/// `sessions.record_bytes_per_principal`: what a session record weighs (here mostly the
/// capabilities its client declared) is charged to its principal. Alice spends her share in
/// bytes long before her count; a light session of hers still fits (the control), bob is not
/// refused, and a session she ends gives its bytes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_records_are_charged_in_bytes_to_their_own_principal() {
    let (_backend, dir) = alice_and_bob_on_a_legacy_backend("gw-budgets-records").await;
    let config = base_config("\n[sessions]\nrecord_bytes_per_principal = 32768\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let heavy = || json!({"experimental": {"blob": "x".repeat(12 * 1024)}});

    let mut sessions = Vec::new();
    for _ in 0..2 {
        let reply = support::legacy_initialize_reply(gw.addr, "alice", "vh", heavy()).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        sessions.push(
            reply.headers["mcp-session-id"]
                .to_str()
                .expect("ascii")
                .to_owned(),
        );
    }
    let refused = support::legacy_initialize_reply(gw.addr, "alice", "vh", heavy()).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(
        refused.json()["error"]["message"],
        "Cannot create a session: session limit reached: the session records of this principal \
         weigh their whole share (sessions.record_bytes_per_principal)"
    );
    assert_eq!(
        initialize(gw.addr, "alice").await.status,
        200,
        "the control: a light session of alice's still fits"
    );
    let bobs = support::legacy_initialize_reply(gw.addr, "bob", "vh", heavy()).await;
    assert_eq!(bobs.status, 200, "bob is not refused: {}", bobs.text());

    let ended = support::legacy_delete(gw.addr, "alice", "vh", &sessions[0]).await;
    assert!(ended.status.is_success(), "{}", ended.status);
    let again = support::legacy_initialize_reply(gw.addr, "alice", "vh", heavy()).await;
    assert_eq!(again.status, 200, "the ended session gave its bytes back");
    assert_eq!(
        support::metric(
            &gw,
            r#"mcp_gateway_budget_refusals_total{budget="session_records",limit="share"}"#
        )
        .await,
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_oversized_initialize_result_is_refused_not_kept() {
    use mcp_test_backends::{BackendSpec, TestBackend};
    // 300 KiB of instructions: over the 256 KiB the gateway keeps of an InitializeResult.
    let big =
        TestBackend::start(BackendSpec::legacy("big").instructions("x".repeat(300 * 1024))).await;
    let small = TestBackend::start(BackendSpec::legacy("small").instructions("short")).await;
    let dir = workdir("gw-budgets-initialize");
    let users = json!({"users": {"alice": {"virtual_hosts": {"vh": {"backends": {
        "big": {"url": big.url()},
        "small": {"url": small.url()},
    }}}}}});
    support::write(dir.path(), "users.json", &users.to_string());
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;

    let echo = |tool: &'static str| {
        support::modern(
            gw.addr,
            "alice",
            "vh",
            "tools/call",
            json!({"name": tool, "arguments": {"text": "hi"}}),
            &[],
        )
    };
    let refused = echo("big-echo").await.json();
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("initialize result larger than 256 KiB")),
        "{refused}"
    );
    // The control: the same kind of backend with a small result works.
    let served = echo("small-echo").await;
    assert_eq!(served.result_text(), "small: hi", "{}", served.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtual_host_with_more_backends_than_the_operator_allows_is_refused() {
    use mcp_test_backends::{BackendSpec, TestBackend};
    let backend = TestBackend::start(BackendSpec::modern("a")).await;
    let url = backend.url();
    let dir = workdir("gw-budgets-fanout");
    let users = |alice_backends: Value| {
        json!({"users": {
            "alice": {"virtual_hosts": {"vh": {"backends": alice_backends}}},
            "bob": {"virtual_hosts": {"vh": {"backends": {"a": {"url": url}, "b": {"url": url}}}}},
        }})
        .to_string()
    };
    let two = json!({"a": {"url": url}, "b": {"url": url}});
    let three = json!({"a": {"url": url}, "b": {"url": url}, "c": {"url": url}});
    support::write(dir.path(), "users.json", &users(two));
    let config = base_config("\n[limits]\nmax_backends_per_vhost = 2\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let list =
        |sub: &'static str| support::modern(gw.addr, sub, "vh", "tools/list", json!({}), &[]);
    // The control: two backends are within the limit.
    let within = list("alice").await;
    assert_eq!(within.status, 200, "{}", within.text());

    // The file edited while the gateway runs (a file with too many at the start is refused
    // at start, like any finding): alice's configuration is refused when next loaded.
    support::write(dir.path(), "users.json", &users(three));
    let refused = support::poll_until(WAIT, || async { list("alice").await.status == 500 }).await;
    assert!(
        refused,
        "alice's configuration with three backends was served"
    );
    list("alice")
        .await
        .assert_detail(500, "User configuration could not be loaded");
    let bob = list("bob").await;
    assert_eq!(bob.status, 200, "{}", bob.text());
    assert!(
        gw.logs().contains(
            "virtual_hosts.vh.backends: 3 backends; the operator allows at most 2 in one virtual host (limits.max_backends_per_vhost)"
        ),
        "{}",
        gw.logs()
    );
    let path = support::write(dir.path(), "check.toml", &config);
    let (code, _, err) = support::run_cli(
        &[
            "check-config",
            "--config",
            path.to_str().expect("utf-8 path"),
        ],
        &[("MCP_GATEWAY_JWT_SECRET", support::SECRET)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("limits.max_backends_per_vhost"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridged_input_past_the_callers_share_fails_that_call_only() {
    use mcp_test_backends::{BackendSpec, TestBackend};
    // A 2026-07-28 backend's input_required rounds become real elicitation requests for a 2025
    // client: each waits in the relayed-request table, one place for alice here.
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("gw-budgets-bridged");
    let users = json!({"users": {"alice": {"virtual_hosts": {"vh": {"backends": {
        "alpha": {"url": alpha.url()}}}}}}});
    support::write(dir.path(), "users.json", &users.to_string());
    let config = base_config("\n[limits]\nmax_relayed_requests_per_principal = 1\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let alice = legacy_initialize_with(gw.addr, "alice", "vh", json!({"elicitation": {}})).await;

    // The first call's question holds alice's one place ...
    let mut first = call(&gw, "alice", &alice, 1, "alpha-ask", json!({})).await;
    let name = first
        .next_message_where(WAIT, |m| m["method"] == "elicitation/create")
        .await;
    // ... so a second call's question does not fit: that call fails, naming the limit.
    let second = legacy_post(
        gw.addr,
        "alice",
        "vh",
        Some(&alice),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "alpha-ask", "arguments": {}}}),
    )
    .await;
    let refused = second
        .messages()
        .into_iter()
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no answer: {}", second.text()));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("limits.max_relayed_requests_per_principal")),
        "{refused}"
    );

    // The control: the first call, asking one question at a time, goes on to its answer.
    let accept = |question: &Value, key: &str, value: &str| {
        json!({"jsonrpc": "2.0", "id": question["id"],
               "result": {"action": "accept", "content": {key: value}}})
    };
    let delivered = legacy_post(
        gw.addr,
        "alice",
        "vh",
        Some(&alice),
        &accept(&name, "name", "Ada"),
    )
    .await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
    let color = first
        .next_message_where(WAIT, |m| m["method"] == "elicitation/create")
        .await;
    let delivered = legacy_post(
        gw.addr,
        "alice",
        "vh",
        Some(&alice),
        &accept(&color, "color", "teal"),
    )
    .await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
    let done = first.next_message_where(WAIT, |m| m["id"] == 1).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "alpha: Ada likes teal",
        "{done}"
    );
}
