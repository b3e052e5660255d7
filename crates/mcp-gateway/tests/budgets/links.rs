//! Links (book: docs/src/security.md, "Budgets"): a linked backend that floods a call whose client
//! does not read costs the gateway that call's share of messages not taken yet (1 MiB), not the
//! flood; the call fails naming the share and is cancelled upstream. The backend is
//! `tests/interop/py_stdio_server.py` (Python SDK 1.x) from the operator's stdio catalog, one
//! process per principal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{self, GatewayProcess, base_config, bearer, python_mcp1, workdir};
use mcp_test_support::{EventStream, legacy_headers};
use serde_json::json;

/// Every wait of these tests: seconds of margin on a loaded machine.
const WAIT: Duration = Duration::from_secs(30);
/// The flood nobody reads: 2,048 progress notifications of 64 KiB (128 MiB), sent as fast as
/// the backend can; it ends by itself, or sooner when cancelled.
const FLOOD: u64 = 2048;
const FLOOD_SIZE: u64 = 64 * 1024;
/// A flood well within a call's share: 16 notifications of 1 KiB.
const SMALL: u64 = 16;
/// How much the gateway may grow while it holds the call nobody reads: its share (1 MiB), the
/// messages on their way to the client, and the allocator's slack, far below the flood.
const GROWTH_KIB: u64 = 48 * 1024;

/// A gateway with `extra` process configuration whose `alice` and `bob` each have virtual host
/// `vh` with the stdio backend `io`, and a 2025 session of each: `(dir, gateway, alice's, bob's)`.
async fn sessions(
    python: &Path,
    extra: &str,
) -> (mcp_test_support::TempDir, GatewayProcess, String, String) {
    let dir = workdir("gw-budgets-links");
    let backends = json!({"io": {"stdio": "io", "timeout_ms": 30000}});
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"vh": {"backends": backends}}},
        "bob": {"virtual_hosts": {"vh": {"backends": backends}}},
    }});
    support::write(dir.path(), "users.json", &users.to_string());
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/py_stdio_server.py");
    let config = base_config(&format!(
        "\n{extra}\n[stdio_servers.io]\ncommand = {:?}\nargs = [{:?}]\n",
        python.to_str().expect("utf-8 path"),
        script.to_str().expect("utf-8 path")
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let alice = support::legacy_initialize(gw.addr, "alice", "vh").await;
    let bob = support::legacy_initialize(gw.addr, "bob", "vh").await;
    (dir, gw, alice, bob)
}

/// `io-flood` as `sub`, asking for progress; `done` is the file the backend says how it ended in.
/// The answer's head is read, its body is not.
async fn flood(
    gw: &GatewayProcess,
    sub: &str,
    session: &str,
    id: u64,
    count: u64,
    done: Option<&Path>,
) -> EventStream {
    let size = if count == FLOOD { FLOOD_SIZE } else { 1024 };
    flood_of(gw, sub, session, (id, count, size), done).await
}

/// [`flood`] of `count` notifications of `size` bytes, as call `id`.
async fn flood_of(
    gw: &GatewayProcess,
    sub: &str,
    session: &str,
    (id, count, size): (u64, u64, u64),
    done: Option<&Path>,
) -> EventStream {
    let done = done.map_or(String::new(), |p| p.display().to_string());
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "io-flood",
        "arguments": {"count": count, "size": size, "done": done},
        "_meta": {"progressToken": format!("p{id}")}}});
    let auth = bearer(sub);
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

/// A small flood read as it comes: every notification arrives, then the result.
async fn read_small_flood(gw: &GatewayProcess, sub: &str, session: &str, id: u64) {
    let mut stream = flood(gw, sub, session, id, SMALL, None).await;
    let mut progress = 0;
    let done = stream
        .next_message_where(WAIT, |m| {
            progress += u64::from(m["method"] == "notifications/progress");
            m["id"] == id
        })
        .await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        format!("py: flooded {SMALL}"),
        "{sub}: {done}"
    );
    assert_eq!(
        progress, SMALL,
        "{sub}: nothing within the share is dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_its_client_does_not_read_costs_the_gateway_one_calls_share() {
    let Some(python) = python_mcp1() else { return };
    let (dir, gw, alice, bob) = sessions(&python, "").await;

    // The control, which also starts both processes: a small flood read as it comes completes.
    read_small_flood(&gw, "alice", &alice, 1).await;
    read_small_flood(&gw, "bob", &bob, 2).await;
    let before = support::rss_kib(gw.pid());

    // Alice's client asks for 128 MiB and reads none of it ...
    let marker = dir.path().join("alice-flood");
    let mut stalled = flood(&gw, "alice", &alice, 3, FLOOD, Some(&marker)).await;
    // ... while bob, on his own process, is served.
    read_small_flood(&gw, "bob", &bob, 4).await;
    let ended = support::poll_until(WAIT, || async { marker.exists() }).await;
    assert!(ended, "alice's flood neither ended nor was cancelled");

    // The gateway kept alice's share, not her flood, and cancelled the call upstream.
    let grown = support::rss_kib(gw.pid()).saturating_sub(before);
    assert!(
        grown < GROWTH_KIB,
        "the gateway grew by {grown} KiB holding a call nobody reads"
    );
    let outcome = std::fs::read_to_string(&marker).expect("the flood's marker");
    let sent: u64 = outcome
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(FLOOD);
    assert!(
        outcome.ends_with("cancelled") && sent < FLOOD,
        "the backend was not cancelled: {outcome}"
    );

    // When alice's client reads at last: what was kept, then the error naming the share.
    let end = stalled.next_message_where(WAIT, |m| m["id"] == 3).await;
    assert_eq!(end["error"]["code"], -32603, "{end}");
    assert_eq!(
        end["error"]["message"],
        "Backend io failed: backend sent more than 1 MiB that its client has not read yet (the \
         per-call buffer of a linked backend, limits.link_call_buffer_bytes)"
    );

    // The failed call left nothing behind: alice's next flood within the share completes.
    read_small_flood(&gw, "alice", &alice, 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_unread_calls_draw_from_its_own_budget() {
    let Some(python) = python_mcp1() else { return };
    // 256 KiB for all of a principal's calls, below one call's own 1 MiB.
    let (dir, gw, alice, bob) = sessions(
        &python,
        "[limits]\nlink_buffer_bytes_per_principal = 262144\n",
    )
    .await;
    read_small_flood(&gw, "alice", &alice, 1).await;
    read_small_flood(&gw, "bob", &bob, 2).await;
    // What the two links keep for their life: their backends' descriptions of themselves.
    let idle = support::metric(&gw, "mcp_gateway_link_buffer_bytes").await;

    // Alice's flood nobody reads fails at her principal's budget, not at the call's 1 MiB,
    // and is cancelled upstream; bob is served meanwhile.
    let marker = dir.path().join("alice-flood");
    let mut stalled = flood(&gw, "alice", &alice, 3, FLOOD, Some(&marker)).await;
    read_small_flood(&gw, "bob", &bob, 4).await;
    let ended = support::poll_until(WAIT, || async { marker.exists() }).await;
    assert!(ended, "alice's flood was not cancelled");
    let end = stalled.next_message_where(WAIT, |m| m["id"] == 3).await;
    assert_eq!(end["error"]["code"], -32603, "{end}");
    assert_eq!(
        end["error"]["message"],
        "Backend io failed: backend messages not read yet by this caller's clients reached \
         256 KiB (limits.link_buffer_bytes_per_principal)"
    );
    drop(stalled);

    // What the failed call held went back to her account: the node holds what it held before
    // the flood, and her next call within budget is served whole.
    let released = support::poll_until(WAIT, || async {
        support::metric(&gw, "mcp_gateway_link_buffer_bytes").await == idle
    })
    .await;
    assert!(released, "the unread bytes were given back");
    read_small_flood(&gw, "alice", &alice, 5).await;
}

/// A linked backend whose `initialize` result carries `bytes` of instructions, from the catalog
/// entry `io` of a gateway whose `alice` and `bob` each have `vh` with backend `io`: alice's
/// describes itself with `alice_bytes`, bob's with `bob_bytes`. `server` is `(python, script)`:
/// the interpreter and the file name in `tests/interop`.
async fn described_gateway(
    (python, script): (&Path, &str),
    alice_bytes: usize,
    bob_bytes: usize,
    extra: &str,
) -> (mcp_test_support::TempDir, GatewayProcess) {
    let dir = workdir("gw-budgets-identity");
    let backend = |server: &str| json!({"vh": {"backends": {"io": {"stdio": server}}}});
    let users = json!({"users": {
        "alice": {"virtual_hosts": backend("alice-io")},
        "bob": {"virtual_hosts": backend("bob-io")},
    }});
    support::write(dir.path(), "users.json", &users.to_string());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop")
        .join(script);
    let entry = |name: &str, bytes: usize| {
        format!(
            "\n[stdio_servers.{name}]\ncommand = {:?}\nargs = [{:?}]\n\
             env = {{ PY_STDIO_INSTRUCTIONS_BYTES = \"{bytes}\" }}\n",
            python.to_str().expect("utf-8 path"),
            script.to_str().expect("utf-8 path"),
        )
    };
    let config = base_config(&format!(
        "\n{extra}\n{}{}",
        entry("alice-io", alice_bytes),
        entry("bob-io", bob_bytes)
    ));
    let process = GatewayProcess::start(dir.path(), &config, &[]).await;
    (dir, process)
}

/// `io-echo` for `sub`, as a 2026-07-28 call.
async fn echo(gw: &GatewayProcess, sub: &str) -> serde_json::Value {
    let params = json!({"name": "io-echo", "arguments": {"text": sub}});
    let reply = support::modern(gw.addr, sub, "vh", "tools/call", params, &[]).await;
    assert_eq!(reply.status, 200, "{sub}: {}", reply.text());
    reply.json()
}

/// Alice's backend (`script`, texts prefixed `prefix`) describes itself in `alice_bytes`, past the
/// 256 KiB bound the link would otherwise keep for as long as it lives; bob's in 16 KiB, within
/// it: alice's handshake fails with `message`, bob's link is served throughout.
async fn refused_at_handshake(
    server: (&Path, &str),
    prefix: &str,
    alice_bytes: usize,
    message: &str,
) {
    let (_dir, gw) = described_gateway(server, alice_bytes, 16 << 10, "").await;
    let bobs = format!("{prefix}: bob");
    let control = echo(&gw, "bob").await;
    assert_eq!(
        control["result"]["content"][0]["text"],
        bobs.as_str(),
        "{control}"
    );
    let refused = echo(&gw, "alice").await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(refused["error"]["message"], message);
    // Bob's link is untouched by alice's refusal.
    let again = echo(&gw, "bob").await;
    assert_eq!(
        again["result"]["content"][0]["text"],
        bobs.as_str(),
        "{again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_backend_describing_itself_past_the_bound_is_refused_at_its_handshake() {
    let Some(python) = python_mcp1() else { return };
    refused_at_handshake(
        (&python, "py_stdio_server.py"),
        "py",
        4 << 20,
        "Backend io failed: malformed backend response: initialize result larger than 256 KiB",
    )
    .await;
}

/// A gateway with `extra` where alice's and bob's small floods read as they come are whole (the
/// control), then alice's flood nobody reads is cancelled upstream and ends with `message`; once
/// it gave back what it held, bob is served whole.
async fn an_unread_flood_fails_with(python: &Path, extra: &str, message: &str) {
    let (dir, gw, alice, bob) = sessions(python, extra).await;
    read_small_flood(&gw, "alice", &alice, 1).await;
    read_small_flood(&gw, "bob", &bob, 2).await;

    let marker = dir.path().join("alice-flood");
    let mut stalled = flood(&gw, "alice", &alice, 3, FLOOD, Some(&marker)).await;
    let ended = support::poll_until(WAIT, || async { marker.exists() }).await;
    assert!(ended, "alice's flood was not cancelled");
    let end = stalled.next_message_where(WAIT, |m| m["id"] == 3).await;
    assert_eq!(end["error"]["code"], -32603, "{end}");
    assert_eq!(end["error"]["message"], message);
    drop(stalled);
    read_small_flood(&gw, "bob", &bob, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_per_call_share_is_the_one_a_flood_meets() {
    let Some(python) = python_mcp1() else { return };
    an_unread_flood_fails_with(
        &python,
        "[limits]\nlink_call_buffer_bytes = 131072\n",
        "Backend io failed: backend sent more than 128 KiB that its client has not read yet (the \
         per-call buffer of a linked backend, limits.link_call_buffer_bytes)",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_backends_description_is_charged_to_its_principals_link_budget() {
    let Some(python) = python_mcp1() else { return };
    // Both within the 256 KiB bound; alice's (128 KiB) is past her 64 KiB share of the links'
    // budget, bob's (16 KiB) is not.
    let (_dir, gw) = described_gateway(
        (&python, "py_stdio_server.py"),
        128 << 10,
        16 << 10,
        "[limits]\nlink_buffer_bytes_per_principal = 65536\n",
    )
    .await;
    let held = r#"mcp_gateway_budget_held{budget="link_buffers",unit="bytes"}"#;

    let control = echo(&gw, "bob").await;
    assert_eq!(
        control["result"]["content"][0]["text"], "py: bob",
        "{control}"
    );
    // Bob's link keeps his backend's description on his account for as long as it lives.
    let kept = support::metric(&gw, held).await.unwrap_or(0.0);
    assert!(
        kept >= f64::from(16u32 << 10),
        "bob's description is charged: {kept}"
    );

    let refused = echo(&gw, "alice").await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "Backend io failed: the backend's description of itself, with the messages not read yet \
         by this caller's clients, passes 64 KiB (limits.link_buffer_bytes_per_principal)"
    );
    // Nothing of alice's refused link stays charged, and bob's link is untouched.
    assert_eq!(support::metric(&gw, held).await.unwrap_or(0.0), kept);
    let again = echo(&gw, "bob").await;
    assert_eq!(again["result"]["content"][0]["text"], "py: bob", "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_nodes_link_budget_fails_naming_the_ceiling() {
    let Some(python) = python_mcp1() else { return };
    // The node's ceiling (256 KiB) below alice's own share and below one call's 1 MiB.
    an_unread_flood_fails_with(
        &python,
        "[limits]\nlink_buffer_bytes = 262144\n",
        "Backend io failed: backend messages not read yet by the clients of every caller on this \
         node reached 256 KiB (limits.link_buffer_bytes)",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_backend_discovering_itself_past_the_bound_is_refused_at_its_handshake() {
    let Some(python) = support::python_mcp2() else {
        return;
    };
    // A backend of the Python SDK 2.x answers the link's `server/discover`.
    refused_at_handshake(
        (&python, "py2_stdio_server.py"),
        "py2",
        400 << 10,
        "Backend io failed: malformed backend response: server/discover result larger than 256 KiB",
    )
    .await;
}

/// `io-echo` of `text` for `sub` in its 2025 `session`, as call `id`: the result's text, or the
/// error's message.
async fn legacy_echo(
    addr: std::net::SocketAddr,
    sub: &str,
    session: &str,
    id: u64,
    text: &str,
) -> Result<String, String> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "io-echo", "arguments": {"text": text}}});
    let reply = support::legacy_post(addr, sub, "vh", Some(session), &body).await;
    let message = reply.last_message();
    match message["result"]["content"][0]["text"].as_str() {
        Some(text) => Ok(text.to_owned()),
        None => Err(message["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_for_a_stalled_backend_draw_from_their_principals_budget() {
    let Some(python) = python_mcp1() else { return };
    let (dir, gw, alice, bob) = sessions(
        &python,
        "[limits]\nlink_buffer_bytes_per_principal = 65536\n",
    )
    .await;
    assert_eq!(
        legacy_echo(gw.addr, "alice", &alice, 1, "hi").await,
        Ok("py: hi".to_owned())
    );

    // Alice's process stops reading for 8 s; her requests then wait to be written, first in
    // the pipe, then in the link's queue, on her account.
    let started = dir.path().join("stalled");
    let stall = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "io-stall", "arguments": {"seconds": 8, "started": started.display().to_string()}}});
    let addr = gw.addr;
    let (stall_session, stall_body) = (alice.clone(), stall.clone());
    let stalling = tokio::spawn(async move {
        support::legacy_post(addr, "alice", "vh", Some(&stall_session), &stall_body).await
    });
    assert!(
        support::poll_until(WAIT, || async { started.exists() }).await,
        "the stall began"
    );
    // 20 requests of 64 KiB: more than the pipe, the backend's reader and the share together.
    let text = "x".repeat(64 * 1024);
    let waiting: Vec<_> = (10..30)
        .map(|id| {
            let (session, text) = (alice.clone(), text.clone());
            tokio::spawn(async move { legacy_echo(addr, "alice", &session, id, &text).await })
        })
        .collect();
    // Bob, on his own process, is served meanwhile.
    assert_eq!(
        legacy_echo(gw.addr, "bob", &bob, 3, "hi").await,
        Ok("py: hi".to_owned())
    );

    let mut answered = 0;
    let mut refused = Vec::new();
    for call in waiting {
        match call.await.expect("the call") {
            Ok(echoed) => {
                assert_eq!(echoed.len(), text.len() + 4, "py: + the text");
                answered += 1;
            }
            Err(message) => refused.push(message),
        }
    }
    assert!(
        answered >= 1,
        "what fitted was sent once the backend read again"
    );
    assert!(
        !refused.is_empty(),
        "nothing past alice's budget was refused"
    );
    for message in refused {
        assert_eq!(
            message,
            "Backend io failed: messages for the backend waiting to be written, with those not \
             read yet by this caller's clients, reached 64 KiB \
             (limits.link_buffer_bytes_per_principal)"
        );
    }
    let stalled = stalling.await.expect("the stall").last_message();
    assert_eq!(
        stalled["result"]["content"][0]["text"], "py: stalled 8",
        "{stalled}"
    );
    // Everything went back to her account: her next calls are sent.
    assert_eq!(
        legacy_echo(gw.addr, "alice", &alice, 4, "again").await,
        Ok("py: again".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_per_call_share_of_messages_is_the_one_a_flood_meets() {
    let Some(python) = python_mcp1() else { return };
    // 64 messages per call (4 MiB of the flood's 64 KiB ones), before the bytes share of 16 MiB.
    an_unread_flood_fails_with(
        &python,
        "[limits]\nlink_call_buffer_bytes = 16777216\nlink_call_buffer_messages = 64\n",
        "Backend io failed: backend sent more than 64 messages that its client has not read yet \
         (the per-call buffer of a linked backend, limits.link_call_buffer_messages)",
    )
    .await;
}
