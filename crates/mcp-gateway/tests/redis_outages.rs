//! What the gateway answers while its Redis is in one of the states a failover or a restart
//! passes through (book: docs/src/several-nodes.md, "Sentinel and Cluster"; failure-modes.md):
//! a server still loading its data (`-LOADING`), a read-only replica (`-READONLY` to writes), and
//! a Sentinel deployment whose primary is dead with no replica promoted yet (the sentinels know no
//! usable primary: "Master with given name not found"). Each is an outage, never a broken
//! document: the config store answers `503 {"detail":"Configuration store unavailable"}` with
//! `Retry-After: 1`, the session store `503` + `Retry-After: 1` with JSON-RPC `-32603` "session
//! store unavailable". Real `redis-server` processes; skipped loudly without them (a failure
//! under `CI=true`).

mod support;

use mcp_config_store::{RedisStore, RedisStoreConfig, UserConfig};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{RedisLoading, RedisReplica, RedisSentinelSet};
use serde_json::{Value, json};
use support::{GatewayProcess, Reply, base_config, modern, workdir, write};

const SEALING: &str = "redis-outages-sealing-secret-redis-outages";

/// A gateway process and its working directory.
struct Gateway {
    process: GatewayProcess,
    _dir: mcp_test_support::TempDir,
}

/// A gateway whose `[config_store]` and `[sessions]` are what `config_store` and `sessions`
/// say (TOML section bodies), with `users.json` holding `users` for a file config store.
async fn gateway(name: &str, config_store: &str, sessions: &str, users: &str) -> Gateway {
    let dir = workdir(name);
    write(dir.path(), "users.json", users);
    let config = base_config(&format!(
        "\n[router]\nsealing_secret_env = \"MCP_GATEWAY_SEALING_SECRET\"\n\n[sessions]\n{sessions}\n"
    ))
    .replace(
        "kind = \"file\"\npath = \"users.json\"\npoll_interval_ms = 100",
        config_store,
    );
    let process = GatewayProcess::start(
        dir.path(),
        &config,
        &[("MCP_GATEWAY_SEALING_SECRET", SEALING)],
    )
    .await;
    Gateway { process, _dir: dir }
}

fn alice(backend: &TestBackend) -> Value {
    json!({"virtual_hosts": {"vh": {"backends": {backend.name(): {"url": backend.url()}}}}})
}

fn users_file(backend: &TestBackend) -> String {
    json!({"users": {"alice": alice(backend)}}).to_string()
}

fn redis_store(url: &str) -> String {
    format!("kind = \"redis\"\nurl = \"{url}\"")
}

/// The config store's outage answer.
fn assert_config_store_outage(reply: &Reply) {
    reply.assert_detail(503, "Configuration store unavailable");
    assert_eq!(reply.header("retry-after"), Some("1"), "{}", reply.text());
}

/// A 2025 `initialize` of `sub`, asserting the session store's outage answer.
async fn assert_session_store_outage(gw: &Gateway, sub: &str) {
    let reply = support::legacy_initialize_reply(gw.process.addr, sub, "vh", json!({})).await;
    assert_eq!(reply.status, 503, "{}", reply.text());
    assert_eq!(reply.header("retry-after"), Some("1"), "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["id"], 0, "{body}");
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert_eq!(
        body["error"]["message"], "Cannot create a session: session store unavailable",
        "{body}"
    );
}

/// A regression guard: `LOADING` was an outage before the failover errors were completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_still_loading_its_data_is_an_outage_for_both_stores() {
    let Some(loading) = RedisLoading::start().await else {
        return;
    };
    let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let configs = gateway(
        "loading-config",
        &redis_store(&loading.url()),
        "kind = \"local\"",
        "{}",
    )
    .await;
    let sessions = gateway(
        "loading-sessions",
        "kind = \"file\"\npath = \"users.json\"\npoll_interval_ms = 100",
        &redis_store(&loading.url()),
        &users_file(&backend),
    )
    .await;

    let reply = modern(
        configs.process.addr,
        "alice",
        "vh",
        "tools/list",
        json!({}),
        &[],
    )
    .await;
    assert_config_store_outage(&reply);
    assert_session_store_outage(&sessions, "alice").await;
    // The control: Redis was loading all along.
    assert!(
        loading.is_loading().await,
        "the server finished loading during the test"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_replica_is_an_outage_for_the_session_store() {
    let Some(replica) = RedisReplica::start().await else {
        return;
    };
    let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let gw = gateway(
        "read-only-sessions",
        "kind = \"file\"\npath = \"users.json\"\npoll_interval_ms = 100",
        &redis_store(&replica.replica_url()),
        &users_file(&backend),
    )
    .await;
    // Every write of a session store on a demoted primary answers READONLY (the message was
    // "session store error" while READONLY was not counted as an outage).
    for _ in 0..3 {
        assert_session_store_outage(&gw, "alice").await;
    }
    assert!(
        gw.process
            .logs()
            .contains("ReadOnly: You can't write against a read only replica"),
        "the control: the store saw READONLY\n{}",
        gw.process.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_deployment_with_no_primary_is_an_outage_for_both_stores() {
    let Some(mut set) = RedisSentinelSet::start().await else {
        return;
    };
    let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let store = RedisStore::connect(RedisStoreConfig::new(set.url()))
        .await
        .expect("connect through the sentinels");
    let user = UserConfig::from_json_str(&alice(&backend).to_string()).expect("alice");
    store.put("alice", &user).await.expect("put alice");
    let config_store = format!("{}\ncache_ttl_s = 3600", redis_store(&set.url()));
    let gw = gateway(
        "sentinel-down",
        &config_store,
        &redis_store(&set.url()),
        "{}",
    )
    .await;
    // Alice's configuration is cached before the outage (for an hour: however long the
    // sentinels take to flag the primary down), so her initialize reaches the session store;
    // carol's is not, so her requests reach the config store.
    let warm = modern(gw.process.addr, "alice", "vh", "tools/list", json!({}), &[]).await;
    assert_eq!(warm.status, 200, "{}", warm.text());

    set.kill_every_data_node().await;

    for _ in 0..3 {
        let reply = modern(gw.process.addr, "carol", "vh", "tools/list", json!({}), &[]).await;
        assert_config_store_outage(&reply);
        assert_session_store_outage(&gw, "alice").await;
    }
    assert!(
        gw.process
            .logs()
            .contains("Master with given name not found"),
        "the control: the stores were told no primary is known\n{}",
        gw.process.logs()
    );
}
