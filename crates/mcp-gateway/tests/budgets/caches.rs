//! Caches in bytes (book: docs/src/security.md, "Budgets"): the last good list answers kept for
//! stale-if-error, and the upstream 2025 sessions (with the backends' `initialize` results), are
//! charged to their principal in bytes; a principal storing many large ones pays with its own
//! oldest, and another principal's are still there.

use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::json;

use crate::support::{self, GatewayProcess, base_config, workdir};

/// The byte share each principal's stale answers get in this test.
const SHARE: usize = 128 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_answers_are_charged_in_bytes_to_their_own_principal() {
    // About 40 KiB per tools/list page.
    let alices = TestBackend::start(BackendSpec::modern("a").extra_tools(300)).await;
    let bobs = TestBackend::start(BackendSpec::modern("b").extra_tools(300)).await;
    let vhosts: Vec<String> = (0..8).map(|n| format!("v{n}")).collect();
    let mut alice = serde_json::Map::new();
    for vhost in &vhosts {
        alice.insert(
            vhost.clone(),
            json!({"backends": {"a": {"url": alices.url()}}}),
        );
    }
    let users = json!({"users": {
        "alice": {"virtual_hosts": alice},
        "bob": {"virtual_hosts": {"vh": {"backends": {"b": {"url": bobs.url()}}}}},
    }});
    let dir = workdir("gw-budgets-stale");
    support::write(dir.path(), "users.json", &users.to_string());
    let config = base_config(&format!(
        "\n[limits]\nstale_answer_bytes_per_principal = {SHARE}\n\n[router]\nstale_if_error_s = 600\n"
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let addr = gw.addr;
    let list = move |sub: &'static str, vhost: String| async move {
        support::modern(addr, sub, &vhost, "tools/list", json!({}), &[]).await
    };

    let bob_page = list("bob", "vh".into()).await;
    assert_eq!(bob_page.status, 200, "{}", bob_page.text());
    let page_bytes = bob_page.body.len();
    assert!(page_bytes > 30 * 1024, "pages are large: {page_bytes}");
    // Alice stores eight pages, about 2.5 times her share.
    for vhost in &vhosts {
        let page = list("alice", vhost.clone()).await;
        assert_eq!(page.status, 200, "{}", page.text());
    }
    let kept = support::metric(&gw, "mcp_gateway_stale_answer_bytes")
        .await
        .expect("the stale answer gauge");
    assert!(
        kept <= (SHARE + page_bytes) as f64,
        "alice's share plus bob's page at most: {kept}"
    );
    assert!(
        kept >= page_bytes as f64,
        "the gauge counts what is kept: {kept}"
    );

    // Both backends fail: bob's answer is still served, as are alice's newest; her oldest is
    // gone (the control that the share is real).
    alices.stop().await;
    bobs.stop().await;
    let bob = list("bob", "vh".into()).await;
    assert!(
        bob.tool_names().contains(&"b-echo".to_owned()),
        "bob's stale answer is served: {}",
        bob.text()
    );
    let newest = list("alice", vhosts[7].clone()).await;
    assert!(
        newest.tool_names().contains(&"a-echo".to_owned()),
        "{}",
        newest.text()
    );
    let oldest = list("alice", vhosts[0].clone()).await;
    assert!(
        !oldest.tool_names().contains(&"a-echo".to_owned()),
        "alice paid with her own oldest page: {}",
        oldest.text()
    );
}

/// A 2025 session of `sub` whose client declares capabilities of its own (`n`: each set is its
/// own upstream session), and a call of `tool` (`echo`) in it.
async fn echo_in_a_new_session(
    addr: std::net::SocketAddr,
    sub: &str,
    n: usize,
    tool: &str,
) -> support::Reply {
    let capabilities = json!({"experimental": {"n": {"value": n}}});
    let session = support::legacy_initialize_with(addr, sub, "vh", capabilities).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": {"text": "hi"}}});
    support::legacy_post(addr, sub, "vh", Some(&session), &body).await
}

/// The byte share of each principal's upstream 2025 sessions in this test.
const SESSION_SHARE: usize = 512 * 1024;
/// What each backend's `initialize` result carries in instructions: two sessions fit the share.
const INSTRUCTIONS: usize = 200 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_sessions_are_charged_in_bytes_to_their_own_principal() {
    let long = "x".repeat(INSTRUCTIONS);
    let alices = TestBackend::start(BackendSpec::legacy("a").instructions(long.clone())).await;
    let bobs = TestBackend::start(
        BackendSpec::legacy("b")
            .instructions(long)
            .record_requests(true),
    )
    .await;
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"vh": {"backends": {"a": {"url": alices.url()}}}}},
        "bob": {"virtual_hosts": {"vh": {"backends": {"b": {"url": bobs.url()}}}}},
    }});
    let dir = workdir("gw-budgets-upstream-sessions");
    support::write(dir.path(), "users.json", &users.to_string());
    let config = base_config(&format!(
        "\n[limits]\nupstream_session_bytes_per_principal = {SESSION_SHARE}\n"
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let kept = || async {
        support::metric(&gw, "mcp_gateway_upstream_session_bytes")
            .await
            .expect("the upstream session gauge")
    };
    let call = |sub: &'static str, n: usize| {
        let addr = gw.addr;
        async move {
            let tool = format!("{}-echo", &sub[..1]);
            let reply = echo_in_a_new_session(addr, sub, n, &tool).await;
            assert_eq!(reply.status, 200, "{sub} {n}: {}", reply.text());
            assert!(
                reply.text().contains("hi"),
                "{sub} {n}: the call is served: {}",
                reply.text()
            );
        }
    };

    // The control: bob's one session is kept, and the gauge weighs it.
    call("bob", 0).await;
    let bobs_session = kept().await;
    assert!(
        bobs_session > INSTRUCTIONS as f64,
        "the gauge weighs the initialize result: {bobs_session}"
    );
    // Alice opens eight upstream sessions, about three times her share: every call is still
    // served, and what stays is her share at most, beside bob's untouched session.
    for n in 0..8 {
        call("alice", n).await;
    }
    let after = kept().await;
    assert!(
        after <= bobs_session + SESSION_SHARE as f64,
        "alice's share plus bob's session at most: {after}"
    );
    assert!(
        after >= 2.0 * bobs_session,
        "alice keeps sessions within her share: {after}"
    );
    call("bob", 0).await;
    assert_eq!(
        bobs.requests_for("initialize").len(),
        1,
        "bob's upstream session was never given up"
    );
}

/// `limits.upstream_session_bytes`: when the node's bytes have no room left for a session of
/// the largest kind (256 KiB of result and its id), a principal holding no session to give back
/// is refused before its `initialize`; one holding sessions gives its own way instead, and the
/// sessions already kept are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_is_refused_when_the_nodes_session_bytes_have_no_room() {
    let long = "x".repeat(INSTRUCTIONS);
    let backend = TestBackend::start(
        BackendSpec::legacy("a")
            .instructions(long)
            .record_requests(true),
    )
    .await;
    let backends = json!({"a": {"url": backend.url()}});
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"vh": {"backends": backends}}},
        "bob": {"virtual_hosts": {"vh": {"backends": backends}}},
        "carol": {"virtual_hosts": {"vh": {"backends": backends}}},
    }});
    let dir = workdir("gw-budgets-session-newcomer");
    support::write(dir.path(), "users.json", &users.to_string());
    // The node holds what one principal may: two sessions of about 200 KiB leave less than the
    // 256 KiB a newcomer's session may come to.
    let config = base_config(&format!(
        "\n[limits]\nupstream_session_bytes_per_principal = {SESSION_SHARE}\n\
         upstream_session_bytes = {SESSION_SHARE}\n"
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let call = |sub: &'static str, n: usize| echo_in_a_new_session(gw.addr, sub, n, "a-echo");
    // Bob, then alice (the control: a newcomer while the node has room), are served.
    for sub in ["bob", "alice"] {
        let reply = call(sub, 0).await;
        assert!(reply.text().contains("hi"), "{sub}: {}", reply.text());
    }
    let initializes = backend.requests_for("initialize").len();
    // Carol holds nothing to give back: refused before any upstream initialize.
    let refused = call("carol", 0).await;
    assert_eq!(
        refused.json()["error"]["code"],
        -32603,
        "{}",
        refused.text()
    );
    assert_eq!(
        refused.json()["error"]["message"],
        "Backend a failed: too many upstream sessions"
    );
    assert_eq!(backend.requests_for("initialize").len(), initializes);
    // Alice holds a session: her new one is served, her own oldest gives way.
    let again = call("alice", 1).await;
    assert!(again.text().contains("hi"), "{}", again.text());
    // Bob's session was never given up: his next call initialises nothing.
    let initializes = backend.requests_for("initialize").len();
    let bob = call("bob", 0).await;
    assert!(bob.text().contains("hi"), "{}", bob.text());
    assert_eq!(backend.requests_for("initialize").len(), initializes);
}
