//! Time and connections (book: docs/src/security.md, "Budgets"): a call ends at its total
//! deadline however steadily its backend trickles, and one principal's requests in flight cannot
//! hold every connection.

use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{EventStream, poll_until, rpc_error};
use serde_json::{Value, json};

use crate::support::{self, GatewayProcess, base_config, bearer, modern_request, workdir};

/// Every wait of these tests: seconds of margin on a loaded machine.
const WAIT: Duration = Duration::from_secs(30);

/// `tools/call` of `tool` with `arguments` as `sub` on `vhost`, asking for progress (so a slow
/// tool trickles a notification per step and no wait for the backend is long).
async fn call(
    gw: &GatewayProcess,
    sub: &str,
    vhost: &str,
    tool: &str,
    arguments: Value,
) -> support::Reply {
    let mut meta = mcp_test_support::modern_meta_with(json!({}));
    meta["progressToken"] = json!("p1");
    support::modern(
        gw.addr,
        sub,
        vhost,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": meta}),
        &[],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_trickles_past_its_deadline_is_cancelled() {
    let backend = TestBackend::start(BackendSpec::modern("t")).await;
    let url = backend.url();
    // Each gap (0.5 s) is well within timeout_ms; the whole call (15 s) is not within 3 s. (A
    // deadline is never shorter than timeout_ms.)
    let users = json!({"users": {"alice": {"virtual_hosts": {
        "own": {"backends": {"t": {"url": url, "timeout_ms": 2500, "deadline_ms": 3000}}},
        "greedy": {"backends": {"t": {"url": url, "timeout_ms": 2500, "deadline_ms": 600000}}},
    }}}});
    let dir = workdir("gw-budgets-deadline");
    support::write(dir.path(), "users.json", &users.to_string());
    let config = base_config("\n[router]\nmax_call_deadline_ms = 4000\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let trickle = json!({"steps": 30, "delay_ms": 500});

    // The control: a call within its deadline completes.
    let quick = call(
        &gw,
        "alice",
        "own",
        "t-slow",
        json!({"steps": 2, "delay_ms": 100}),
    )
    .await;
    assert_eq!(quick.result_text(), "t: done", "{}", quick.text());

    let cut = call(&gw, "alice", "own", "t-slow", trickle.clone()).await;
    let (code, message) = rpc_error(&cut);
    assert_eq!(code, -32603, "{}", cut.text());
    assert!(
        message.contains("call exceeded its deadline of 3s (deadline_ms)"),
        "{message}"
    );
    // The operator's ceiling caps what a configuration asks for.
    let capped = call(&gw, "alice", "greedy", "t-slow", trickle).await;
    let (_, message) = rpc_error(&capped);
    assert!(message.contains("deadline of 4s"), "{message}");
    // Both were cancelled upstream, not left running.
    let cancelled = poll_until(WAIT, || async { backend.calls_cancelled("slow") == 2 }).await;
    assert!(
        cancelled,
        "cancelled upstream: {}",
        backend.calls_cancelled("slow")
    );
    assert_eq!(
        backend.calls_finished("slow"),
        1,
        "only the control finished"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_slow_calls_leave_connections_for_another() {
    let backend = TestBackend::start(BackendSpec::modern("t")).await;
    let dir = workdir("gw-budgets-connections");
    let users = support::users_json(&[
        ("alice", "vh", &[("t", backend.url())]),
        ("bob", "vh", &[("t", backend.url())]),
    ]);
    support::write(dir.path(), "users.json", &users);
    // A share of 2 (a quarter of 8, the default rule).
    let config = base_config("\n[limits]\nmax_connections = 8\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;

    // Alice starts as many slow calls as the node has connections, each on its own connection.
    let (done, mut answers) = tokio::sync::mpsc::unbounded_channel();
    let mut alice = Vec::new();
    for _ in 0..8 {
        let done = done.clone();
        let addr = gw.addr;
        alice.push(tokio::spawn(async move {
            let (headers, body) = modern_request(
                "tools/call",
                json!({"name": "t-slow", "arguments": {"steps": 40, "delay_ms": 500}}),
            );
            let auth = bearer("alice");
            let mut headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            headers.push(("authorization", &auth));
            let stream = EventStream::open(addr, "POST", "/servers/vh/mcp", &headers, &body).await;
            let _ = done.send((stream.status.as_u16(), stream.headers.clone()));
            stream
        }));
    }
    // Six are refused at once, each closing its connection (`t-slow` sends nothing before its
    // result without a progress token, so the two served ones give no answer head either).
    for _ in 0..6 {
        let (status, headers) = tokio::time::timeout(WAIT, answers.recv())
            .await
            .expect("the requests over alice's share are answered at once")
            .expect("an answer");
        assert_eq!(status, 429);
        assert_eq!(headers["retry-after"], "1");
        assert_eq!(headers["connection"], "close");
    }
    // The control: her share reached the backend.
    let started = poll_until(WAIT, || async { backend.calls_started("slow") == 2 }).await;
    assert!(
        started,
        "alice's share of requests in flight: {}",
        backend.calls_started("slow")
    );

    // Bob gets a connection and an answer while alice's calls run.
    let bob = tokio::time::timeout(
        WAIT,
        support::modern(gw.addr, "bob", "vh", "tools/list", json!({}), &[]),
    )
    .await
    .expect("bob was answered");
    assert_eq!(bob.status, 200, "{}", bob.text());
    assert_eq!(backend.calls_finished("slow"), 0, "while alice's calls ran");
    assert_eq!(
        backend.calls_started("slow"),
        2,
        "refused calls never reached the backend"
    );
    // The budget shows on /metrics: what it holds, its share, and what it refused.
    let series = |series: &'static str| support::metric(&gw, series);
    assert_eq!(
        series(r#"mcp_gateway_budget_refusals_total{budget="in_flight",limit="share"}"#).await,
        Some(6.0)
    );
    assert_eq!(
        series(r#"mcp_gateway_budget_held{budget="in_flight",unit="slots"}"#).await,
        Some(2.0),
        "alice's two calls"
    );
    assert_eq!(
        series(r#"mcp_gateway_budget_limit{budget="in_flight",unit="slots",limit="share"}"#).await,
        Some(2.0)
    );

    // Alice's slots come back when her calls end.
    for call in alice {
        call.abort();
    }
    let served = poll_until(WAIT, || async {
        support::modern(gw.addr, "alice", "vh", "tools/list", json!({}), &[])
            .await
            .status
            == 200
    })
    .await;
    assert!(served, "alice is served again once her calls ended");
}
