//! `mcp-gateway users put|get|list|delete|check`, run as the binary against a JSON file store, a
//! private `redis-server`, Redis Sentinel (a primary, a replica, three sentinels) and a
//! three-master Redis Cluster: checked like check-config (same messages and field paths), nothing
//! written when refused, writes announced on the invalidation channel every node listens to.

mod support;

use std::time::Duration;

use deadpool_redis::redis;
use futures_util::StreamExt;
use mcp_test_support::{RedisClusterSet, RedisSentinelSet, RedisServer};
use support::{ISSUER, SECRET, base_config, run_cli, workdir, write};

const GOOD: &str =
    r#"{"virtual_hosts":{"vh1":{"backends":{"alpha":{"url":"http://127.0.0.1:9/mcp"}}}}}"#;
const RELATIVE_URL: &str =
    r#"{"virtual_hosts":{"vh1":{"backends":{"weather":{"url":"weather"}}}}}"#;
const OVERLAPPING: &str = r#"{"virtual_hosts":{"vh1":{"backends":{"a":{"url":"http://127.0.0.1:9/mcp"},"a-b":{"url":"http://127.0.0.1:9/mcp"}}}}}"#;

/// Runs `mcp-gateway users <args> --config <config>` with the test secret and `env`.
fn users(config: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut all = vec!["users"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--config", config]);
    let mut vars = vec![("MCP_GATEWAY_JWT_SECRET", SECRET)];
    vars.extend_from_slice(env);
    run_cli(&all, &vars)
}

#[test]
fn file_store_put_get_list_delete_check() {
    let dir = workdir("users-cli-file");
    let users_path = write(dir.path(), "users.json", r#"{"users":{}}"#);
    // The users file holds credentials: kept owner-only, a put must not widen it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&users_path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
    }
    let config = write(dir.path(), "gateway.toml", &base_config(""));
    let config = config.to_str().expect("path");
    let good = write(dir.path(), "good.json", GOOD);
    let good = good.to_str().expect("path");

    let (code, out, err) = users(config, &["put", "alice", "--file", good], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("stored the configuration of alice"), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&users_path)
            .expect("users file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "a put keeps the users file owner-only");
    }
    // What was written is what check-config accepts.
    let (code, out, err) = run_cli(
        &["check-config", "--config", config],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 user configuration(s) checked"), "{out}");

    let (code, out, _) = users(config, &["get", "alice"], &[]);
    assert_eq!(code, 0);
    let stored: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        stored["virtual_hosts"]["vh1"]["backends"]["alpha"]["url"],
        "http://127.0.0.1:9/mcp"
    );
    let (code, out, _) = users(config, &["put", "bob", "--file", good], &[]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = users(config, &["list"], &[]);
    assert_eq!((code, out.as_str()), (0, "alice\nbob\n"));

    // Refused with check-config's message and path; the file is untouched.
    let before = std::fs::read(&users_path).expect("read");
    let bad = write(dir.path(), "bad.json", RELATIVE_URL);
    for command in ["put", "check"] {
        let (code, _, err) = users(
            config,
            &[command, "carol", "--file", bad.to_str().expect("path")],
            &[],
        );
        assert_eq!(code, 2, "{command}: {err}");
        assert!(
            err.contains(&format!(
                "{}: users.carol.virtual_hosts.vh1.backends.weather.url: relative URL without a base",
                users_path.display()
            )),
            "{command}: {err}"
        );
    }
    let overlapping = write(dir.path(), "overlap.json", OVERLAPPING);
    let (code, _, err) = users(
        config,
        &[
            "put",
            "carol",
            "--file",
            overlapping.to_str().expect("path"),
        ],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("users.carol.virtual_hosts.vh1.backends"),
        "{err}"
    );
    assert!(err.contains("an error for check-config"), "{err}");
    let not_json = write(dir.path(), "not.json", "{ nope");
    let (code, _, err) = users(
        config,
        &["put", "carol", "--file", not_json.to_str().expect("path")],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("users.carol"), "{err}");
    assert_eq!(std::fs::read(&users_path).expect("read"), before);
    assert!(
        std::fs::read_dir(dir.path()).expect("dir").all(|e| !e
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")),
        "no temporary file left behind"
    );

    let (code, out, _) = users(config, &["delete", "bob"], &[]);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = users(config, &["delete", "bob"], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no configuration for bob"), "{err}");
    let (code, _, _) = users(config, &["get", "bob"], &[]);
    assert_eq!(code, 1);
    let (_, out, _) = users(config, &["list"], &[]);
    assert_eq!(out, "alice\n");

    // A TOML user file is read, never rewritten (its comments would be lost).
    let toml_dir = workdir("users-cli-toml");
    write(
        toml_dir.path(),
        "users.toml",
        "# operator notes\n[users.alice.virtual_hosts.vh1.backends.alpha]\nurl = \"http://127.0.0.1:9/mcp\"\n",
    );
    let config = write(
        toml_dir.path(),
        "gateway.toml",
        &base_config("").replace("users.json", "users.toml"),
    );
    let config = config.to_str().expect("path");
    let (code, out, _) = users(config, &["list"], &[]);
    assert_eq!((code, out.as_str()), (0, "alice\n"));
    let (code, _, err) = users(config, &["put", "bob", "--file", good], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("edit JSON user files only"), "{err}");
}

/// Waits for the next message on `channel` (subscribed before `trigger` runs).
async fn published_during(
    url: &str,
    channel: &str,
    trigger: impl FnOnce() -> (i32, String, String),
) -> (i32, Option<String>) {
    let client = redis::Client::open(url).expect("url");
    let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
    pubsub.subscribe(channel).await.expect("subscribe");
    let (code, out, err) = tokio::task::block_in_place(trigger);
    assert!(code == 0 || code == 2, "{out}{err}");
    let message = tokio::time::timeout(Duration::from_secs(5), pubsub.on_message().next())
        .await
        .ok()
        .flatten()
        .and_then(|m| m.get_payload::<String>().ok());
    (code, message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_put_is_checked_atomic_and_announced() {
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let dir = workdir("users-cli-redis");
    let config = write(dir.path(), "gateway.toml", &base_config(""));
    let config = config.to_str().expect("path").to_owned();
    let good = write(dir.path(), "good.json", GOOD);
    let bad = write(dir.path(), "bad.json", RELATIVE_URL);
    let url = redis.url();
    let other_issuer = "https://other.test";
    let env = [
        ("MCP_GATEWAY_CONFIG_STORE_KIND", "redis"),
        ("MCP_GATEWAY_CONFIG_STORE_URL", url.as_str()),
        ("MCP_GATEWAY_AUTH_JWT_ISSUERS", other_issuer),
    ];
    let key = format!("{ISSUER}#alice");

    let (code, message) = published_during(&url, "mcpgw:invalidate", || {
        users(
            &config,
            &["put", &key, "--file", good.to_str().expect("path")],
            &env,
        )
    })
    .await;
    assert_eq!(code, 0);
    assert_eq!(
        message.as_deref(),
        Some(key.as_str()),
        "every node's cache is told"
    );

    let client = redis::Client::open(url.as_str()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let stored: Option<String> = redis::cmd("GET")
        .arg(format!("mcpgw:user:{key}"))
        .query_async(&mut conn)
        .await
        .expect("get");
    assert!(stored.expect("stored").contains("http://127.0.0.1:9/mcp"));

    // Refused: check-config's message for a Redis key, nothing written, nothing announced.
    let (code, message) = published_during(&url, "mcpgw:invalidate", || {
        let (code, out, err) = users(
            &config,
            &["put", "https://other.test#bob", "--file", bad.to_str().expect("path")],
            &env,
        );
        assert!(
            err.contains("redis key mcpgw:user:https://other.test#bob: virtual_hosts.vh1.backends.weather.url: relative URL without a base"),
            "{err}"
        );
        (code, out, err)
    })
    .await;
    assert_eq!(code, 2);
    assert_eq!(message, None, "a refused document is not announced");
    let exists: u64 = redis::cmd("EXISTS")
        .arg("mcpgw:user:https://other.test#bob")
        .query_async(&mut conn)
        .await
        .expect("exists");
    assert_eq!(exists, 0);

    // A bare subject with two issuers is stored but no token can load it: said so.
    let (code, _, err) = tokio::task::block_in_place(|| {
        users(
            &config,
            &["put", "carol", "--file", good.to_str().expect("path")],
            &env,
        )
    });
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("a bare subject is used for no issuer"),
        "{err}"
    );

    let (code, out, _) = tokio::task::block_in_place(|| users(&config, &["list"], &env));
    assert_eq!(code, 0);
    assert_eq!(out, format!("carol\n{key}\n"));
    let (code, out, _) = tokio::task::block_in_place(|| users(&config, &["get", &key], &env));
    assert_eq!(code, 0);
    assert!(out.contains("alpha"), "{out}");

    let (code, message) = published_during(&url, "mcpgw:invalidate", || {
        users(&config, &["delete", "carol"], &env)
    })
    .await;
    assert_eq!(code, 0);
    assert_eq!(message.as_deref(), Some("carol"));
    let (code, _, _) = tokio::task::block_in_place(|| users(&config, &["get", "carol"], &env));
    assert_eq!(code, 1);

    // Redis down: a clear runtime failure, not a configuration error.
    drop(redis);
    let (code, _, err) = tokio::task::block_in_place(|| users(&config, &["list"], &env));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Redis is not reachable"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_and_cluster_stores_are_managed_the_same_way() {
    let dir = workdir("users-cli-topologies");
    let config = write(dir.path(), "gateway.toml", &base_config(""));
    let config = config.to_str().expect("path").to_owned();
    let good = write(dir.path(), "good.json", GOOD);
    let good = good.to_str().expect("path").to_owned();

    if let Some(set) = RedisSentinelSet::start().await {
        let url = set.url();
        let env = [
            ("MCP_GATEWAY_CONFIG_STORE_KIND", "redis"),
            ("MCP_GATEWAY_CONFIG_STORE_URL", url.as_str()),
        ];
        let primary = set.primary_url().await;
        let (code, message) = published_during(&primary, "mcpgw:invalidate", || {
            users(&config, &["put", "alice", "--file", &good], &env)
        })
        .await;
        assert_eq!(code, 0);
        assert_eq!(message.as_deref(), Some("alice"));
        let (code, out, _) = tokio::task::block_in_place(|| users(&config, &["list"], &env));
        assert_eq!((code, out.as_str()), (0, "alice\n"));
    }

    let Some(cluster) = RedisClusterSet::start().await else {
        return;
    };
    let url = cluster.url();
    let env = [
        ("MCP_GATEWAY_CONFIG_STORE_KIND", "redis"),
        ("MCP_GATEWAY_CONFIG_STORE_URL", url.as_str()),
    ];
    let subjects: Vec<String> = (0..12).map(|i| format!("user-{i:02}")).collect();
    for subject in &subjects {
        let (code, out, err) = tokio::task::block_in_place(|| {
            users(&config, &["put", subject, "--file", &good], &env)
        });
        assert_eq!(code, 0, "{out}{err}");
    }
    let mut owners = std::collections::BTreeSet::new();
    for subject in &subjects {
        owners.insert(cluster.node_of(&format!("mcpgw:user:{subject}")).await);
    }
    assert!(owners.len() > 1, "the keys spread over several masters");
    // `list` sees the keys of every master.
    let (code, out, err) = tokio::task::block_in_place(|| users(&config, &["list"], &env));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        subjects
            .iter()
            .map(|s| format!("{s}\n"))
            .collect::<String>()
    );
    // A publication through the cluster reaches a subscriber on any node.
    let ports = cluster.ports();
    let node = format!("redis://127.0.0.1:{}/", ports[2]);
    let (code, message) = published_during(&node, "mcpgw:invalidate", || {
        users(&config, &["delete", "user-00"], &env)
    })
    .await;
    assert_eq!(code, 0);
    assert_eq!(message.as_deref(), Some("user-00"));
}
