//! The gateway process with `[plugins]` (book: docs/src/failure-modes.md): an invalid plugin document stops
//! `check-config` and `serve` with exit code 2 and a message naming the document and the field; a
//! running gateway denies what the document denies, fails plugin-governed calls closed with an
//! internal error and turns `/readyz` unready after an invalid edit, and serves again after a
//! valid edit, without a restart; the same with the document in Redis (a private `redis-server`).

mod support;

use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::RedisServer;
use mcp_test_support::message_error;
use serde_json::{Value, json};
use support::{
    GatewayProcess, SECRET, admin_get, base_config, modern, poll_until, run_cli, users_json,
    workdir, write,
};

const DENY_ECHO: &str = r#"
version = 1
[[plugins]]
name = "no-echo"
kind = "tool_filter"
config = { deny = ["echo"] }
"#;

const NO_PLUGINS: &str = "version = 1\nplugins = []\n";

fn config() -> String {
    base_config("\n[plugins]\nconfig = \"plugins.toml\"\nreload_interval_ms = 50\n")
}

/// alice's `alpha-echo` call through `gw`: the answer's JSON.
async fn call_echo(gw: &GatewayProcess) -> Value {
    modern(
        gw.addr,
        "alice",
        "vh",
        "tools/call",
        json!({"name": "alpha-echo", "arguments": {"text": "hi"}}),
        &[],
    )
    .await
    .json()
}

#[tokio::test]
async fn an_invalid_plugin_document_stops_check_config_and_serve() {
    let dir = workdir("plugins-invalid");
    write(dir.path(), "users.json", &users_json(&[]));
    write(
        dir.path(),
        "plugins.toml",
        "version = 1\n[[plugins]]\nname = \"x\"\nkind = \"no_such_kind\"\n",
    );
    let path = write(dir.path(), "gateway.toml", &config());
    let path = path.to_str().expect("utf-8 path");
    for command in ["check-config", "serve"] {
        let (code, _, err) = run_cli(
            &[command, "--config", path],
            &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
        );
        assert_eq!(code, 2, "{command}: {err}");
        assert!(err.contains("plugins.config"), "{command}: {err}");
        assert!(
            err.contains("plugins.toml: plugins[0].kind"),
            "{command}: {err}"
        );
        assert!(err.contains("no_such_kind"), "{command}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_reload_fails_closed_until_a_valid_document_is_written() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("plugins-reload");
    write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh", &[("alpha", alpha.url())])]),
    );
    write(dir.path(), "plugins.toml", DENY_ECHO);
    let gw = GatewayProcess::start(dir.path(), &config(), &[]).await;
    let echo = || call_echo(&gw);
    assert_eq!(
        message_error(&echo().await),
        Some((-32600, "Tool not allowed: alpha-echo".to_owned()))
    );
    let ready = admin_get(&gw, "/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert_eq!(ready.json()["checks"]["plugins"]["state"], "ready");

    // An invalid edit: fail closed, unready.
    write(dir.path(), "plugins.toml", "version = 2\n");
    assert!(
        poll_until(Duration::from_secs(10), || async {
            admin_get(&gw, "/readyz").await.status == 503
        })
        .await,
        "/readyz turns unready"
    );
    let readyz = admin_get(&gw, "/readyz").await.json();
    assert_eq!(readyz["checks"]["plugins"]["state"], "failed", "{readyz}");
    assert!(
        readyz["checks"]["plugins"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("version")),
        "{readyz}"
    );
    assert_eq!(
        message_error(&echo().await),
        Some((-32603, mcp_plugins::FAILED_MESSAGE.to_owned()))
    );

    // A valid edit: calls go through again, without a restart.
    write(dir.path(), "plugins.toml", NO_PLUGINS);
    assert!(
        poll_until(Duration::from_secs(10), || async {
            admin_get(&gw, "/readyz").await.status == 200
        })
        .await,
        "/readyz turns ready again"
    );
    let ok = echo().await;
    assert_eq!(ok["result"]["content"][0]["text"], "alpha: hi", "{ok}");
}

/// `SET key value` on `redis`.
async fn set(redis: &RedisServer, key: &str, value: &str) {
    let client = deadpool_redis::redis::Client::open(redis.url()).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connection");
    deadpool_redis::redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async::<()>(&mut conn)
        .await
        .expect("SET");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_document_can_live_in_redis() {
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("plugins-redis");
    write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh", &[("alpha", alpha.url())])]),
    );
    let config = base_config(&format!(
        "\n[plugins]\nredis_url = \"{}\"\nredis_key = \"gw:plugins\"\nreload_interval_ms = 50\n",
        redis.url()
    ));
    // Missing at startup: refused.
    let path = write(dir.path(), "missing.toml", &config);
    let (code, _, err) = run_cli(
        &["check-config", "--config", path.to_str().expect("utf-8")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("plugins.redis_key"), "{err}");

    set(&redis, "gw:plugins", DENY_ECHO).await;
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let echo = || call_echo(&gw);
    assert_eq!(
        message_error(&echo().await),
        Some((-32600, "Tool not allowed: alpha-echo".to_owned()))
    );
    set(&redis, "gw:plugins", "version = 2\n").await;
    assert!(
        poll_until(Duration::from_secs(10), || async {
            admin_get(&gw, "/readyz").await.status == 503
        })
        .await,
        "an invalid document in Redis turns /readyz unready"
    );
    assert_eq!(
        message_error(&echo().await),
        Some((-32603, mcp_plugins::FAILED_MESSAGE.to_owned()))
    );
    set(&redis, "gw:plugins", NO_PLUGINS).await;
    assert!(
        poll_until(Duration::from_secs(10), || async {
            admin_get(&gw, "/readyz").await.status == 200
        })
        .await
    );
    assert_eq!(echo().await["result"]["content"][0]["text"], "alpha: hi");
}
