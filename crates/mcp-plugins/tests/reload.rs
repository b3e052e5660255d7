//! Hot reload from a watched file and from a Redis key (a private `redis-server` started by
//! `mcp-test-support`; skipped loudly when none is installed, except under `CI=true`).

use std::path::Path;
use std::time::Duration;

use deadpool_redis::redis;
use mcp_plugins::{FAILED_MESSAGE, PluginRuntime, RedisSource, RuntimeState};
use mcp_test_support::{RedisServer, TempDir};
use tokio::sync::watch;

const POLL: Duration = Duration::from_millis(10);

const TWO: &str = r#"
version = 1
[[plugins]]
name = "sizes"
kind = "size_limit"
config = { max_argument_bytes = 100 }
[[plugins]]
name = "no-rm"
kind = "tool_filter"
config = { deny = ["rm"] }
"#;

const ONE: &str = r#"
version = 1
[[plugins]]
name = "only"
kind = "size_limit"
config = { max_result_bytes = 100 }
"#;

const INVALID: &str = r#"
version = 1
[[plugins]]
name = "sizes"
kind = "size_limit"
config = { max_argument_bytes = -1 }
"#;

/// Writes atomically (temp file + rename), as the reload docs ask.
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// Waits until the runtime applied another document (a hang guard, not a timing assertion).
async fn next_apply(rx: &mut watch::Receiver<u64>) {
    tokio::time::timeout(Duration::from_secs(10), rx.changed())
        .await
        .expect("a reload within 10 s")
        .expect("runtime alive");
}

fn names(runtime: &PluginRuntime) -> Vec<String> {
    runtime
        .load()
        .expect("ready")
        .names()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn file_reload_swaps_valid_documents_and_fails_closed_on_invalid_ones() {
    let dir = TempDir::new("plugins-file").expect("temp dir");
    let path = dir.path().join("plugins.toml");
    write(&path, TWO);
    let runtime = PluginRuntime::builder()
        .load_file(&path)
        .expect("valid at start");
    assert_eq!(names(&runtime), ["sizes", "no-rm"]);
    let mut rx = runtime.subscribe();
    let _watch = runtime.watch_file(&path, POLL);

    write(&path, INVALID);
    next_apply(&mut rx).await;
    let state = runtime.state();
    assert!(!state.is_ready());
    let reason = state.error().expect("an error").to_owned();
    assert!(
        reason.ends_with("plugins.toml: plugins[0].config.max_argument_bytes: invalid value: integer `-1`, expected usize"),
        "{reason}"
    );
    assert_eq!(
        runtime.load().expect_err("failed closed").message,
        FAILED_MESSAGE
    );

    write(&path, ONE);
    next_apply(&mut rx).await;
    assert_eq!(runtime.state(), RuntimeState::Ready);
    assert_eq!(names(&runtime), ["only"]);

    std::fs::remove_file(&path).expect("remove");
    next_apply(&mut rx).await;
    assert!(
        runtime
            .state()
            .error()
            .is_some_and(|e| e.contains("cannot read"))
    );
    assert!(runtime.load().is_err());

    // The same text as before the deletion is applied again.
    write(&path, ONE);
    next_apply(&mut rx).await;
    assert_eq!(names(&runtime), ["only"]);
}

#[tokio::test]
async fn file_reload_with_keep_last_good_keeps_serving_the_previous_chain() {
    let dir = TempDir::new("plugins-keep").expect("temp dir");
    let path = dir.path().join("plugins.json");
    write(&path, r#"{"version": 1, "plugins": []}"#);
    let runtime = PluginRuntime::builder()
        .keep_last_good(true)
        .load_file(&path)
        .expect("valid at start");
    let mut rx = runtime.subscribe();
    let _watch = runtime.watch_file(&path, POLL);

    write(
        &path,
        r#"{"version": 1, "plugins": [{"name": "a", "kind": "tool_filter", "config": {"deny": ["x"]}}]}"#,
    );
    next_apply(&mut rx).await;
    assert_eq!(names(&runtime), ["a"]);

    write(
        &path,
        r#"{"version": 1, "plugins": [{"name": "a", "kind": "tool_filter", "config": {"deny": ["x"]}, "extra": 1}]}"#,
    );
    next_apply(&mut rx).await;
    match runtime.state() {
        RuntimeState::KeptLastGood(reason) => {
            assert!(
                reason.contains("plugins[0]: unknown field `extra`")
                    || reason.contains("plugins[0].extra"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(runtime.state().is_ready());
    assert_eq!(names(&runtime), ["a"], "the last good chain keeps running");
}

#[tokio::test]
async fn invalid_file_at_startup_is_refused_with_the_path() {
    let dir = TempDir::new("plugins-start").expect("temp dir");
    let path = dir.path().join("plugins.toml");
    write(&path, "version = 1\n");
    let err = PluginRuntime::builder()
        .load_file(&path)
        .expect_err("invalid");
    assert_eq!(
        err.to_string(),
        format!("{}: plugins: missing plugin section", path.display())
    );
    let missing = PluginRuntime::builder()
        .load_file(&dir.path().join("absent.toml"))
        .expect_err("missing file");
    assert!(
        missing.to_string().contains("absent.toml: cannot read"),
        "{missing}"
    );
}

async fn set(redis: &RedisServer, key: &str, value: Option<&str>) {
    let client = redis::Client::open(redis.url()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let cmd = match value {
        Some(v) => {
            let mut c = redis::cmd("SET");
            c.arg(key).arg(v);
            c
        }
        None => {
            let mut c = redis::cmd("DEL");
            c.arg(key);
            c
        }
    };
    cmd.query_async::<()>(&mut conn).await.expect("command");
}

#[tokio::test]
async fn redis_reload_applies_changes_and_fails_closed_on_invalid_or_missing_documents() {
    let Some(mut redis) = RedisServer::start().await else {
        return;
    };
    let key = "test:plugins";
    let source = RedisSource::new(redis.url(), key).poll_interval(POLL);

    let missing = PluginRuntime::builder()
        .load_redis(&source)
        .await
        .expect_err("no key yet");
    assert_eq!(missing.to_string(), "redis key test:plugins: key not found");

    set(&redis, key, Some(TWO)).await;
    let runtime = PluginRuntime::builder()
        .load_redis(&source)
        .await
        .expect("valid at start");
    assert_eq!(names(&runtime), ["sizes", "no-rm"]);
    let mut rx = runtime.subscribe();
    let _watch = runtime.watch_redis(source.clone()).expect("watcher");

    set(&redis, key, Some(r#"{"version": 2, "plugins": []}"#)).await;
    next_apply(&mut rx).await;
    assert_eq!(
        runtime.state(),
        RuntimeState::Failed(
            "redis key test:plugins: version: unsupported version 2 (this build reads version 1)"
                .to_owned()
        )
    );
    assert!(runtime.load().is_err());

    set(&redis, key, Some(ONE)).await;
    next_apply(&mut rx).await;
    assert_eq!(names(&runtime), ["only"]);

    set(&redis, key, None).await;
    next_apply(&mut rx).await;
    assert_eq!(
        runtime.state().error(),
        Some("redis key test:plugins: key not found")
    );

    set(&redis, key, Some(ONE)).await;
    next_apply(&mut rx).await;
    assert_eq!(runtime.state(), RuntimeState::Ready);

    // An outage is not an invalid document: the chain stays, and changes made while the poller
    // could not read are applied once Redis is back.
    // `controllable` says loudly why the outage part is skipped with an external `REDIS_URL`.
    let Some(redis) = redis.controllable() else {
        return;
    };
    let generation = runtime.generation();
    redis.stop().await;
    // Several polls fail while the server is down; none may change the runtime.
    tokio::time::sleep(POLL * 20).await;
    assert_eq!(runtime.generation(), generation);
    assert_eq!(names(&runtime), ["only"]);
    redis.restart().await;
    // The restarted server is empty (no persistence): a poll may see the key missing first.
    set(redis, key, Some(TWO)).await;
    while runtime.load().map(|c| c.len()).ok() != Some(2) {
        next_apply(&mut rx).await;
    }
    assert_eq!(names(&runtime), ["sizes", "no-rm"]);
    assert_eq!(runtime.state(), RuntimeState::Ready);
}

/// The plugin document through a Sentinel URL (the poller follows a promotion) and a Cluster URL
/// (the key on whichever master holds its slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_documents_are_read_through_sentinel_and_cluster_urls() {
    let key = "mcpgw:plugins";
    if let Some(mut sentinel) = mcp_test_support::RedisSentinelSet::start().await {
        let primary = sentinel.primary_port().await;
        sentinel
            .cli(primary, &["SET", key, TWO])
            .await
            .expect("SET");
        sentinel
            .cli(primary, &["WAIT", "1", "5000"])
            .await
            .expect("WAIT");
        let source = RedisSource::new(sentinel.url(), key).poll_interval(POLL);
        let runtime = PluginRuntime::builder()
            .load_redis(&source)
            .await
            .expect("through the sentinels");
        assert_eq!(names(&runtime), ["sizes", "no-rm"]);
        let mut rx = runtime.subscribe();
        let _watch = runtime.watch_redis(source).expect("watcher");
        let old = sentinel.kill_primary().await;
        let new = sentinel.wait_for_promotion(old).await;
        sentinel.cli(new, &["SET", key, ONE]).await.expect("SET");
        while names(&runtime) != ["only"] {
            next_apply(&mut rx).await;
        }
    }
    let Some(cluster) = mcp_test_support::RedisClusterSet::start().await else {
        return;
    };
    let port = cluster.ports()[0];
    cluster.cli(port, &["SET", key, ONE]).await.expect("SET");
    let runtime = PluginRuntime::builder()
        .load_redis(&RedisSource::new(cluster.url(), key))
        .await
        .expect("through the cluster");
    assert_eq!(names(&runtime), ["only"]);
}
