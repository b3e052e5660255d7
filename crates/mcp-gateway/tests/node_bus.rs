//! The node bus's health on `/metrics`, over sockets with a private `redis-server` (book:
//! docs/src/several-nodes.md; the alert `McpGatewayNodeBusDown` of deploy/prometheus reads it):
//! `mcp_gateway_node_bus_subscribed` is absent until the first request starts the subscriber,
//! 1 once it is subscribed, 0 while Redis is down and 1 again once Redis is back on the same
//! port; `mcp_gateway_node_bus_publish_failures_total` counts a message Redis could not take (a
//! sealed session's revocation published while Redis is down). One gateway keeps its sessions
//! in Redis (`sessions.kind = "redis"`), the other seals them (`kind = "sealed"` with a `url`
//! for the bus only, so a DELETE needs no Redis and its revocation is the one publish that
//! fails). Skips loudly without `redis-server` (fails under `CI=true`).

mod support;

use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::RedisServer;
use support::{
    GatewayProcess, admin_get, base_config, legacy_delete, legacy_initialize, metric, poll_until,
    users_json, workdir, write,
};

const SUBSCRIBED: &str = "mcp_gateway_node_bus_subscribed";
const PUBLISH_FAILURES: &str = "mcp_gateway_node_bus_publish_failures_total";
/// A session key ring for the sealed store (`k1:` and 32 bytes in base64).
const KEYS: &str = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// How long a state change may take to show: a hang detector, not a timing requirement (the
/// subscriber notices a closed connection at once and reconnects with a backoff of at most 5 s).
const WAIT: Duration = Duration::from_secs(60);

/// Polls `/metrics` until `series` reads `value`.
async fn reads(gw: &GatewayProcess, series: &str, value: f64) -> bool {
    poll_until(WAIT, || async { metric(gw, series).await == Some(value) }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_bus_gauge_follows_redis_and_failed_publishes_are_counted() {
    let Some(mut redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why (a panic under CI=true).
    };
    let Some(redis) = redis.controllable() else {
        return; // External REDIS_URL: cannot be stopped (announced by the helper).
    };
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let users = users_json(&[("alice", "vh", &[("beta", beta.url())])]);
    let url = redis.url();
    let start = |name: &'static str, sessions: String, env: Vec<(&'static str, &'static str)>| {
        let users = users.clone();
        async move {
            let dir = workdir(name);
            write(dir.path(), "users.json", &users);
            let gw = GatewayProcess::start(dir.path(), &base_config(&sessions), &env).await;
            (dir, gw)
        }
    };
    let (_redis_dir, stored) = start(
        "node-bus-redis",
        format!("\n[sessions]\nkind = \"redis\"\nurl = \"{url}\"\n"),
        Vec::new(),
    )
    .await;
    let (_sealed_dir, sealed) = start(
        "node-bus-sealed",
        format!(
            "\n[sessions]\nkind = \"sealed\"\nkeys_env = \"MCP_GATEWAY_SESSION_KEYS\"\nurl = \"{url}\"\n"
        ),
        vec![("MCP_GATEWAY_SESSION_KEYS", KEYS)],
    )
    .await;

    // Before any request the subscriber has not started: no gauge (a node that served nothing is
    // not unhealthy), but the counter is there from the start.
    for gw in [&stored, &sealed] {
        let text = admin_get(gw, "/metrics").await.text().to_owned();
        assert!(
            !text.lines().any(|l| l.starts_with(SUBSCRIBED)),
            "the gauge before the first request:\n{text}"
        );
        assert_eq!(metric(gw, PUBLISH_FAILURES).await, Some(0.0), "{text}");
    }

    // A 2025 session on each starts its subscriber, which subscribes.
    let _in_redis = legacy_initialize(stored.addr, "alice", "vh").await;
    let sealed_session = legacy_initialize(sealed.addr, "alice", "vh").await;
    for gw in [&stored, &sealed] {
        assert!(
            reads(gw, SUBSCRIBED, 1.0).await,
            "not subscribed after a 2025 initialize:\n{}",
            admin_get(gw, "/metrics").await.text()
        );
    }

    // Redis goes away: both subscribers lose their connection and read 0.
    redis.stop().await;
    for gw in [&stored, &sealed] {
        assert!(
            reads(gw, SUBSCRIBED, 0.0).await,
            "still subscribed with Redis down:\n{}",
            admin_get(gw, "/metrics").await.text()
        );
    }
    // Ending a sealed session needs no Redis, but its revocation cannot be published: counted.
    let ended = legacy_delete(sealed.addr, "alice", "vh", &sealed_session).await;
    assert!(ended.status.is_success(), "{}", ended.text());
    assert_eq!(metric(&sealed, PUBLISH_FAILURES).await, Some(1.0));
    assert_eq!(metric(&stored, PUBLISH_FAILURES).await, Some(0.0));

    // Redis back on the same port: both subscribe again by themselves.
    redis.restart().await;
    for gw in [&stored, &sealed] {
        assert!(
            reads(gw, SUBSCRIBED, 1.0).await,
            "not subscribed again after Redis came back:\n{}",
            admin_get(gw, "/metrics").await.text()
        );
    }
    assert_eq!(metric(&sealed, PUBLISH_FAILURES).await, Some(1.0));
}
