//! Circuit breakers and replica failover in the router, end to end (book: docs/src/architecture.md, sessions and resilience): a dead
//! backend fails fast once its breaker opens, lists skip it with a marker, it comes back through a
//! half-open probe without any restart, slow backends time out without slowing the others, and
//! replicas take over without replaying a tool call that may have run.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use mcp_breaker::BreakerConfig;
use mcp_router::McpRouter;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::stack::Gateway;
use serde_json::{Value, json};
use tokio::net::TcpListener;

fn breaker(consecutive_failures: u32, open_ms: u64) -> BreakerConfig {
    serde_json::from_value(json!({
        "consecutive_failures": consecutive_failures,
        "open_ms": open_ms,
        "open_jitter": 0.0,
    }))
    .expect("breaker config")
}

async fn gateway(backends: Value, config: BreakerConfig) -> Gateway {
    let router = McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .breaker_defaults(config)
        .build();
    Gateway::start_with(
        &[(
            "alice",
            json!({"virtual_hosts": {"vh": {"backends": backends}}}),
        )],
        router,
    )
    .await
}

/// A "backend" that accepts TCP connections, counts them and hangs up: every call fails, and the
/// count shows whether the gateway touched the network at all.
async fn counting_black_hole() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    (url, count)
}

fn text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn an_open_breaker_fails_fast_without_touching_the_network() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (dead, connections) = counting_black_hole().await;
    let gw = gateway(
        json!({"alpha": {"url": alpha.url()}, "dead": {"url": dead, "timeout_ms": 2000}}),
        breaker(3, 60_000),
    )
    .await;
    for _ in 0..3 {
        let reply = gw
            .modern(
                "alice",
                "vh",
                "tools/call",
                json!({"name": "dead-echo", "arguments": {"text": "x"}}),
            )
            .await;
        assert_eq!(reply.json()["error"]["code"], -32603, "{}", reply.text());
    }
    let before = connections.load(Ordering::SeqCst);
    assert!(
        before >= 3,
        "each failing call reached the backend ({before})"
    );

    let started = Instant::now();
    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "dead-echo", "arguments": {"text": "x"}}),
        )
        .await;
    let error = &reply.json()["error"];
    assert_eq!(error["code"], -32603);
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Backend dead failed: circuit open"),
        "{message}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        before,
        "an open breaker must not connect"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no waiting on the dead backend"
    );

    // Lists skip the open backend with a marker and still answer from alpha.
    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    let result = &list.json()["result"];
    assert!(
        result["tools"].as_array().is_some_and(|t| !t.is_empty()),
        "{result}"
    );
    let marker = &result["_meta"]["mcp-gateway/degraded"]["backends"][0];
    assert_eq!(marker["name"], "dead");
    assert!(
        marker["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("circuit open"),
        "{marker}"
    );
    assert_eq!(connections.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn a_restarted_backend_comes_back_through_a_half_open_probe() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = gateway(
        json!({"alpha": {"url": alpha.url()}, "beta": {"url": beta.url()}}),
        breaker(2, 300),
    )
    .await;
    let call = || {
        gw.modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "hi"}}),
        )
    };
    assert_eq!(text(&call().await.json()), "beta: hi");

    beta.stop().await;
    for _ in 0..2 {
        call().await;
    }
    let open = call().await.json();
    assert!(
        open["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("circuit open"),
        "{open}"
    );

    beta.restart().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The first call after the open period is the probe; it succeeds and closes the breaker.
    let probe = call().await.json();
    assert_eq!(text(&probe), "beta: hi", "{probe}");
    assert_eq!(text(&call().await.json()), "beta: hi");
}

#[tokio::test]
async fn a_slow_backend_times_out_without_slowing_the_others() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let slow = TestBackend::start(BackendSpec::modern("slow")).await;
    let gw = gateway(
        json!({"alpha": {"url": alpha.url()}, "slow": {"url": slow.url(), "timeout_ms": 300}}),
        breaker(5, 60_000),
    )
    .await;
    let slow_call = || {
        gw.modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "slow-slow", "arguments": {"steps": 2, "delay_ms": 5000}}),
        )
    };
    let fast_calls = || async {
        let started = Instant::now();
        let replies = join_all((0..5).map(|i| {
            gw.modern(
                "alice",
                "vh",
                "tools/call",
                json!({"name": "alpha-echo", "arguments": {"text": i.to_string()}}),
            )
        }))
        .await;
        for reply in &replies {
            assert!(
                text(&reply.json()).starts_with("alpha: "),
                "{}",
                reply.text()
            );
        }
        started.elapsed()
    };
    let started = Instant::now();
    let (slow_a, slow_b, fast) = tokio::join!(slow_call(), slow_call(), fast_calls());
    for reply in [slow_a, slow_b] {
        let message = reply.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(
            message,
            "Backend slow failed: backend timed out after 300ms",
            "{}",
            reply.text()
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the timeout bounds the slow calls"
    );
    assert!(
        fast < Duration::from_millis(1500),
        "alpha waited for the slow backend: {fast:?}"
    );
}

#[tokio::test]
async fn a_backend_that_answers_slowly_trips_its_breaker_on_the_slow_call_rate() {
    let lag = TestBackend::start(BackendSpec::modern("lag")).await;
    // Only the slow-call trigger: every call succeeds, but two of two take longer than 100 ms.
    let overrides = json!({
        "consecutive_failures": 0,
        "minimum_calls": 2,
        "window": {"kind": "count", "size": 4},
        "slow_call_ms": 100,
        "slow_call_rate": 0.5,
    });
    let gw = gateway(
        json!({"lag": {"url": lag.url(), "breaker": overrides}}),
        breaker(5, 60_000),
    )
    .await;
    let call = || {
        gw.modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "lag-slow", "arguments": {"steps": 2, "delay_ms": 150}}),
        )
    };
    assert_eq!(text(&call().await.json()), "lag: done");
    assert_eq!(text(&call().await.json()), "lag: done");
    let open = call().await.json();
    assert!(
        open["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("circuit open"),
        "{open}"
    );
    assert_eq!(
        lag.calls_started("slow"),
        2,
        "the third call never reached the backend"
    );
}

#[tokio::test]
async fn replicas_take_over_for_a_dead_primary_including_legacy_sessions() {
    let primary = TestBackend::start(BackendSpec::legacy("beta")).await;
    let replica = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = gateway(
        json!({"beta": {"url": primary.url(), "replicas": [replica.url()]}}),
        breaker(5, 60_000),
    )
    .await;
    let call = || {
        gw.modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "hi"}}),
        )
    };
    assert_eq!(text(&call().await.json()), "beta: hi");
    assert!(
        replica.requests().is_empty(),
        "the replica is not used while the primary serves"
    );

    primary.stop().await;
    let reply = call().await.json();
    assert_eq!(text(&reply), "beta: hi", "{reply}");
    // The replica got its own legacy session, transparently.
    assert_eq!(replica.requests_for("initialize").len(), 1);
    assert_eq!(replica.requests_for("tools/call").len(), 1);
    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert!(
        list.json()["result"]["_meta"]["mcp-gateway/degraded"].is_null(),
        "{}",
        list.text()
    );
}

#[tokio::test]
async fn a_tool_call_the_primary_may_have_run_is_not_replayed() {
    let primary = TestBackend::start(BackendSpec::modern("alpha")).await;
    let replica = TestBackend::start(BackendSpec::modern("alpha")).await;
    let gw = gateway(
        json!({"alpha": {"url": primary.url(), "replicas": [replica.url()]}}),
        breaker(5, 60_000),
    )
    .await;
    let call = gw.modern(
        "alice",
        "vh",
        "tools/call",
        json!({"name": "alpha-slow", "arguments": {"steps": 20, "delay_ms": 100}}),
    );
    let kill = async {
        primary
            .wait_for_calls("slow", Duration::from_secs(5), |c| c.started >= 1)
            .await;
        primary.stop().await;
    };
    let (reply, ()) = tokio::join!(call, kill);
    let body = if reply.header("content-type") == Some("text/event-stream") {
        reply.sse_messages().pop().expect("final message")
    } else {
        reply.json()
    };
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert!(
        replica.requests_for("tools/call").is_empty(),
        "a call that reached the primary must not be replayed"
    );

    // A call the primary never received (it is down) goes to the replica.
    let next = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "alpha-echo", "arguments": {"text": "again"}}),
        )
        .await;
    assert_eq!(text(&next.json()), "alpha: again");
    assert_eq!(replica.requests_for("tools/call").len(), 1);
}

#[tokio::test]
async fn a_down_backend_is_listed_from_its_last_good_answer_until_it_is_too_old() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").ttl_ms(5000)).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let router = McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .stale_if_error(Duration::from_millis(500), 100)
        .build();
    let backends = json!({"alpha": {"url": alpha.url()}, "beta": {"url": beta.url()}});
    let gw = Gateway::start_with(
        &[(
            "alice",
            json!({"virtual_hosts": {"vh": {"backends": backends}}}),
        )],
        router,
    )
    .await;
    let names = |result: &Value| -> Vec<String> {
        result["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|i| i["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };

    let fresh = gw
        .modern("alice", "vh", "tools/list", json!({}))
        .await
        .json()["result"]
        .clone();
    assert!(names(&fresh).contains(&"beta-echo".to_owned()));
    beta.stop().await;

    let stale = gw
        .modern("alice", "vh", "tools/list", json!({}))
        .await
        .json()["result"]
        .clone();
    assert_eq!(
        names(&stale),
        names(&fresh),
        "served from the last good answer"
    );
    let marker = &stale["_meta"]["mcp-gateway/degraded"];
    assert_eq!(marker["stale"][0]["name"], "beta", "{marker}");
    assert!(
        marker["stale"][0]["age_ms"]
            .as_u64()
            .is_some_and(|age| age < 500)
    );
    assert_eq!(
        stale["ttlMs"], 0,
        "a stale answer must not be cached by the client"
    );

    // Past the staleness bound the backend is left out again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let expired = gw
        .modern("alice", "vh", "tools/list", json!({}))
        .await
        .json()["result"]
        .clone();
    assert!(
        names(&expired).iter().all(|n| n.starts_with("alpha-")),
        "{expired}"
    );
    assert_eq!(
        expired["_meta"]["mcp-gateway/degraded"]["backends"][0]["name"],
        "beta"
    );
    assert!(expired["_meta"]["mcp-gateway/degraded"]["stale"].is_null());
}
