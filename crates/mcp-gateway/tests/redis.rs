//! The gateway process on a Redis config store (a private `redis-server`): book: docs/src/failure-modes.md rows 5-7
//! (400 missing, 500 undecodable, 503 + `Retry-After` unreachable), `/readyz` turning unready
//! when Redis stops and ready again when it returns, and `check-config` reading every stored
//! document. Skips loudly without `redis-server` (fails under `CI=true`).

mod support;

use std::time::{Duration, Instant};

use mcp_config_store::{RedisStore, RedisStoreConfig, UserConfig};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::RedisServer;
use serde_json::json;
use support::{
    GatewayProcess, SECRET, admin_get, base_config, bearer, modern, poll_until, run_cli, send_body,
    workdir, write,
};

fn config_for(url: &str) -> String {
    base_config("").replace(
        "kind = \"file\"\npath = \"users.json\"\npoll_interval_ms = 100",
        &format!("kind = \"redis\"\nurl = \"{url}\"\nkey_prefix = \"gwtest\"\ncache_ttl_s = 1\ncache_negative_ttl_s = 1"),
    )
}

fn alice(backend_url: &str) -> UserConfig {
    UserConfig::from_json_str(
        &json!({"virtual_hosts": {"vh1": {"backends": {"alpha": {"url": backend_url}}}}})
            .to_string(),
    )
    .expect("valid user config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_rows_readiness_and_check_config() {
    let Some(mut redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let store = RedisStore::connect({
        let mut config = RedisStoreConfig::new(redis.url());
        config.key_prefix = "gwtest".into();
        config
    })
    .await
    .expect("connect");
    store.put("alice", &alice(&alpha.url())).await.expect("put");
    let mut conn = store.pool().get().await.expect("connection");
    deadpool_redis::redis::cmd("SET")
        .arg("gwtest:user:mallory")
        .arg("{not json")
        .query_async::<()>(&mut conn)
        .await
        .expect("set garbage");
    drop(conn);

    let dir = workdir("gw-redis");
    let config_text = config_for(&redis.url());
    let config_path = write(dir.path(), "check.toml", &config_text);
    let config_path = config_path.to_str().expect("path");

    // check-config reads every stored document and names the broken one.
    let (code, _, err) = run_cli(
        &["check-config", "--config", config_path],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("redis key gwtest:user:mallory"), "{err}");

    let gw = GatewayProcess::start(dir.path(), &config_text, &[]).await;
    let addr = gw.addr;

    let ok = modern(addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    send_body(
        addr,
        "POST",
        "/servers/vh1/mcp",
        &[("authorization", &bearer("bob"))],
        "{}",
    )
    .await
    .assert_detail(400, "No user configuration");
    send_body(
        addr,
        "POST",
        "/servers/vh1/mcp",
        &[("authorization", &bearer("mallory"))],
        "{}",
    )
    .await
    .assert_detail(500, "User configuration could not be loaded");
    let ready = admin_get(&gw, "/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert_eq!(ready.json()["checks"]["config_store"]["kind"], "redis");

    let Some(redis) = redis.controllable() else {
        return; // External REDIS_URL: the outage part is skipped (announced by the helper).
    };
    redis.stop().await;
    // A subject that is not cached reaches the store: 503 at once, with Retry-After.
    // While Redis is down the first load may spend the store's own timeouts (the gateway keeps the defaults) once (a pool wait, a
    // connection attempt, a recycle check, the command) before the store marks itself down; later
    // loads fail at once. The bound is that plus 5 s for a loaded 2-core machine (a release build
    // beside the tests): a store that waited on reconnects would still miss it.
    let defaults = RedisStoreConfig::default();
    let outage_limit = defaults.pool_wait_timeout
        + defaults.connect_timeout
        + 2 * defaults.response_timeout
        + Duration::from_secs(5);
    let carol = bearer("carol");
    for _ in 0..3 {
        let started = Instant::now();
        let reply = send_body(
            addr,
            "POST",
            "/servers/vh1/mcp",
            &[("authorization", &carol)],
            "{}",
        )
        .await;
        reply.assert_detail(503, "Configuration store unavailable");
        assert_eq!(reply.header("retry-after"), Some("1"));
        assert!(
            started.elapsed() < outage_limit,
            "503 must not wait on retries: {:?}",
            started.elapsed()
        );
    }
    let unready = poll_until(Duration::from_secs(10), || async {
        admin_get(&gw, "/readyz").await.status == 503
    })
    .await;
    assert!(unready, "/readyz stayed ready while Redis is down");
    let body = admin_get(&gw, "/readyz").await.json();
    assert_eq!(body["status"], "unready");
    assert_eq!(body["checks"]["config_store"]["status"], "unavailable");

    redis.restart().await;
    let ready_again = poll_until(Duration::from_secs(15), || async {
        admin_get(&gw, "/readyz").await.status == 200
    })
    .await;
    assert!(ready_again, "/readyz did not recover after Redis came back");
    // The restarted Redis is empty: store alice again and she is served without a restart.
    let served = poll_until(Duration::from_secs(15), || async {
        store.put("alice", &alice(&alpha.url())).await.is_ok()
            && modern(addr, "alice", "vh1", "tools/list", json!({}), &[])
                .await
                .status
                == 200
    })
    .await;
    assert!(
        served,
        "the gateway did not serve again after Redis came back"
    );

    // And check-config now passes.
    let (code, out, err) = run_cli(
        &["check-config", "--config", config_path],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("1 user configuration(s) checked in the redis store"),
        "{out}"
    );
    let metrics = admin_get(&gw, "/metrics").await;
    assert!(
        metrics
            .text()
            .contains(r#"mcp_gateway_requests_total{method="-",vhost="-",status="503",outcome="server_error"}"#),
        "{}",
        metrics.text()
    );
}
