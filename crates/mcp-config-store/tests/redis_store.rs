//! Redis-backed tests against a private `redis-server` (see `mcp-test-support`): the store through
//! `ConfigStoreLayer`, outages and recovery, and cache invalidation by keyspace notification and
//! by pub/sub. Skipped (loudly) when no `redis-server` is installed, except under `CI=true`.

#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use deadpool_redis::redis;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use mcp_config_store::{
    CachedStore, ConfigStoreLayer, Invalidation, RedisStore, RedisStoreConfig, StoreErrorKind,
    UserConfig, UserConfigStore,
};
use mcp_core::Principal;
use mcp_test_support::RedisServer;
use tower::{Layer, ServiceExt, service_fn};

/// A key prefix per test, so tests sharing an external `REDIS_URL` server do not collide.
fn prefix(test: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "test-{test}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn user(url: &str) -> UserConfig {
    UserConfig::from_json_str(&format!(
        r#"{{"virtual_hosts":{{"vh1":{{"backends":{{"b":{{"url":"{url}"}}}}}}}}}}"#
    ))
    .unwrap()
}

fn url_of(cfg: &UserConfig) -> String {
    cfg.virtual_hosts["vh1"].backends["b"]
        .url
        .as_ref()
        .unwrap()
        .to_string()
}

/// Added to every elapsed-time bound: a loaded 2-core machine (a release build beside the tests)
/// can stall a test task for seconds; it says nothing about the store.
const LOADED_MACHINE: Duration = Duration::from_secs(5);

/// The longest one load may take while Redis is down, by the store's own settings: a pool wait, a
/// connection attempt, a recycle check and the command, each with its timeout (the first load of
/// an outage; once the store is marked down, loads fail without I/O). "Fast" means bounded by
/// these, not by a retry loop.
fn outage_load_limit() -> Duration {
    let config = RedisStoreConfig::default();
    config.pool_wait_timeout + config.connect_timeout + 2 * config.response_timeout
}

async fn connect(redis: &RedisServer, test: &str) -> RedisStore {
    let store = RedisStore::connect({
        let mut config = RedisStoreConfig::new(redis.url());
        config.key_prefix = prefix(test);
        config
    })
    .await
    .unwrap();
    wait_subscribed(&store).await;
    store
}

/// Waits until the invalidation subscriber receives a published probe: from then on, both the
/// channel and the keyspace pattern are subscribed (the store subscribes the pattern first).
async fn wait_subscribed(store: &RedisStore) {
    let mut rx = store.invalidations();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let _ = store.publish_invalidation("__probe__").await;
        let seen = tokio::time::timeout(Duration::from_millis(100), async {
            loop {
                match rx.recv().await {
                    Ok(Invalidation::Subject(s)) if &*s == "__probe__" => return true,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
                    _ => {}
                }
            }
        })
        .await;
        if seen == Ok(true) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "invalidation subscriber never subscribed"
        );
    }
}

/// Runs a raw command on the store's pool (a plain `SET`, as an operator's `redis-cli` would).
async fn raw(store: &RedisStore, cmd: &mut redis::Cmd) {
    let mut conn = store.pool().get().await.unwrap();
    cmd.query_async::<()>(&mut conn).await.unwrap();
}

struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    body: String,
}

/// One request with `Principal(sub)` through `ConfigStoreLayer` over a handler that echoes the
/// backend URL it found in the `Arc<UserConfig>` extension.
async fn through_layer(layer: &ConfigStoreLayer, sub: &str) -> Answer {
    let svc = layer
        .clone()
        .layer(service_fn(|req: Request<Empty<Bytes>>| async move {
            let cfg = req.extensions().get::<Arc<UserConfig>>().unwrap();
            Ok::<_, Infallible>(Response::new(http_body_util::Full::new(Bytes::from(
                url_of(cfg),
            ))))
        }));
    let mut req = Request::new(Empty::<Bytes>::new());
    req.extensions_mut()
        .insert(Principal::new("https://issuer.example", sub));
    let res = svc.oneshot(req).await.unwrap();
    let status = res.status();
    let retry_after = res
        .headers()
        .get(http::header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = res.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        retry_after,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// Polls `cond` every 20 ms for up to `limit`.
async fn within(limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn found_missing_undecodable_and_bad_key_through_the_layer() {
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let store = connect(&redis, "found").await;
    store.put("alice", &user("http://alice/mcp")).await.unwrap();
    raw(
        &store,
        redis::cmd("SET")
            .arg(store.key("carol").unwrap())
            .arg("{not json"),
    )
    .await;
    raw(
        &store,
        redis::cmd("SET")
            .arg(store.key("dave").unwrap())
            .arg(r#"{"virtual_hosts":{"vh1":{"backends":{"weather":{"url":"weather"}}}}}"#),
    )
    .await;
    let layer = ConfigStoreLayer::new(store.clone());

    let a = through_layer(&layer, "alice").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body, "http://alice/mcp");

    let a = through_layer(&layer, "bob").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.body, r#"{"detail":"No user configuration"}"#);

    for sub in ["carol", "dave", "bad\nsubject"] {
        let a = through_layer(&layer, sub).await;
        assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR, "{sub:?}");
        assert_eq!(
            a.body,
            r#"{"detail":"User configuration could not be loaded"}"#
        );
        assert_eq!(a.retry_after, None);
    }

    // The store's own errors say what is wrong, with the field path.
    let err = store.load("dave".into()).await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Corrupt);
    assert!(
        err.message()
            .ends_with("virtual_hosts.vh1.backends.weather.url: relative URL without a base"),
        "{err}"
    );
    let err = store.load("bad\nsubject".into()).await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Other);
    let long = "x".repeat(513);
    assert_eq!(
        store.load(long.into()).await.unwrap_err().kind(),
        StoreErrorKind::Other
    );
    assert_eq!(
        store.load("".into()).await.unwrap_err().kind(),
        StoreErrorKind::Other
    );
    assert!(
        !store.is_down(),
        "key and decode errors must not mark the store down"
    );
    store.check().await.unwrap();

    // delete removes and the layer answers 400 again.
    store.delete("alice").await.unwrap();
    assert_eq!(
        through_layer(&layer, "alice").await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn stopped_redis_answers_503_fast_and_recovers_after_restart() {
    let Some(mut redis) = RedisServer::start().await else {
        return;
    };
    let Some(redis) = redis.controllable() else {
        return;
    };
    let store = connect(redis, "outage").await;
    store.put("alice", &user("http://alice/mcp")).await.unwrap();
    // The layer (and the store inside it) is built once and kept across the outage.
    let layer = ConfigStoreLayer::new(store.clone());
    assert_eq!(through_layer(&layer, "alice").await.status, StatusCode::OK);

    redis.stop().await;
    for i in 0..5 {
        let started = Instant::now();
        let a = through_layer(&layer, "alice").await;
        let took = started.elapsed();
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "request {i}");
        assert_eq!(a.retry_after.as_deref(), Some("1"));
        assert_eq!(a.body, r#"{"detail":"Configuration store unavailable"}"#);
        // A bound on a hang, not a performance threshold: no request waits on reconnects.
        assert!(
            took < outage_load_limit() + LOADED_MACHINE,
            "request {i} took {took:?}"
        );
    }
    assert!(store.is_down());
    assert!(store.check().await.unwrap_err().is_unavailable());

    redis.restart().await;
    // No persistence: the restarted server is empty; write the config again.
    store.put("alice", &user("http://alice/mcp")).await.unwrap();
    let recovered = within(Duration::from_secs(10), async || {
        through_layer(&layer, "alice").await.status == StatusCode::OK
    })
    .await;
    assert!(recovered, "store did not recover after Redis came back");
    assert!(!store.is_down());
}

#[tokio::test]
async fn store_connected_during_an_outage_starts_down_and_recovers() {
    let Some(mut redis) = RedisServer::start().await else {
        return;
    };
    let Some(redis) = redis.controllable() else {
        return;
    };
    redis.stop().await;
    let store = RedisStore::connect({
        let mut config = RedisStoreConfig::new(redis.url());
        config.key_prefix = prefix("startdown");
        config
    })
    .await
    .unwrap();
    assert!(store.is_down());
    let started = Instant::now();
    assert!(
        store
            .load("alice".into())
            .await
            .unwrap_err()
            .is_unavailable()
    );
    // Marked down: the load fails without I/O, so only the machine's load can delay it.
    assert!(
        started.elapsed() < LOADED_MACHINE,
        "{:?}",
        started.elapsed()
    );

    redis.restart().await;
    assert!(
        within(Duration::from_secs(10), async || !store.is_down()).await,
        "prober never marked the store up"
    );
    assert!(store.load("alice".into()).await.unwrap().is_none());
}

#[tokio::test]
async fn plain_set_invalidates_a_warm_cache_via_keyspace_notifications() {
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let store = connect(&redis, "keyspace").await;
    store.put("alice", &user("http://v1/mcp")).await.unwrap();
    let cache = CachedStore::builder(store.clone())
        .ttl(Duration::from_secs(300))
        .build();
    let cfg = cache.load("alice".into()).await.unwrap().unwrap();
    assert_eq!(url_of(&cfg), "http://v1/mcp");

    // A plain SET, as an operator would do; only the keyspace notification announces it.
    let v2 = user("http://v2/mcp").to_json();
    raw(
        &store,
        redis::cmd("SET").arg(store.key("alice").unwrap()).arg(v2),
    )
    .await;
    let seen = within(Duration::from_secs(1), async || {
        url_of(&cache.load("alice".into()).await.unwrap().unwrap()) == "http://v2/mcp"
    })
    .await;
    assert!(seen, "SET was not visible through the cache within 1 s");

    // DEL (a generic command) invalidates too.
    raw(&store, redis::cmd("DEL").arg(store.key("alice").unwrap())).await;
    let gone = within(Duration::from_secs(1), async || {
        cache.load("alice".into()).await.unwrap().is_none()
    })
    .await;
    assert!(gone, "DEL was not visible through the cache within 1 s");
}

#[tokio::test]
async fn publish_invalidation_invalidates_a_warm_cache() {
    let Some(mut redis) = RedisServer::start().await else {
        return;
    };
    // This test switches keyspace notifications off on the server: private servers only.
    let Some(redis) = redis.controllable() else {
        return;
    };
    let store = connect(redis, "publish").await;
    raw(
        &store,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(""),
    )
    .await;
    store.put("alice", &user("http://v1/mcp")).await.unwrap();
    let cache = CachedStore::builder(store.clone())
        .ttl(Duration::from_secs(300))
        .build();
    assert_eq!(
        url_of(&cache.load("alice".into()).await.unwrap().unwrap()),
        "http://v1/mcp"
    );

    let v2 = user("http://v2/mcp").to_json();
    raw(
        &store,
        redis::cmd("SET").arg(store.key("alice").unwrap()).arg(v2),
    )
    .await;
    // Without a notification the warm entry stays: this is what makes the next step meaningful.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        url_of(&cache.load("alice".into()).await.unwrap().unwrap()),
        "http://v1/mcp"
    );

    store.publish_invalidation("alice").await.unwrap();
    let seen = within(Duration::from_secs(1), async || {
        url_of(&cache.load("alice".into()).await.unwrap().unwrap()) == "http://v2/mcp"
    })
    .await;
    assert!(seen, "publish_invalidation was not visible within 1 s");

    // The "all" form drops every entry.
    raw(
        &store,
        redis::cmd("SET")
            .arg(store.key("alice").unwrap())
            .arg(user("http://v3/mcp").to_json()),
    )
    .await;
    store.publish_invalidate_all().await.unwrap();
    let seen = within(Duration::from_secs(1), async || {
        url_of(&cache.load("alice".into()).await.unwrap().unwrap()) == "http://v3/mcp"
    })
    .await;
    assert!(seen, "publish_invalidate_all was not visible within 1 s");
}

#[tokio::test]
async fn subscriber_resubscribes_after_a_restart() {
    let Some(mut redis) = RedisServer::start().await else {
        return;
    };
    let Some(redis) = redis.controllable() else {
        return;
    };
    let store = connect(redis, "resubscribe").await;
    let cache = CachedStore::builder(store.clone())
        .ttl(Duration::from_secs(300))
        .build();
    let mut events = cache.invalidations();

    redis.restart().await;
    // On resubscribing the store announces that it may have missed changes.
    let all = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(Invalidation::All) = events.recv().await {
                return;
            }
        }
    })
    .await;
    assert!(all.is_ok(), "no Invalidation::All after reconnecting");

    wait_subscribed(&store).await;
    store.put("alice", &user("http://v1/mcp")).await.unwrap();
    assert!(
        within(Duration::from_secs(10), async || cache
            .load("alice".into())
            .await
            .is_ok_and(|c| c.is_some()))
        .await
    );
    raw(
        &store,
        redis::cmd("SET")
            .arg(store.key("alice").unwrap())
            .arg(user("http://v2/mcp").to_json()),
    )
    .await;
    let seen = within(Duration::from_secs(1), async || {
        cache
            .load("alice".into())
            .await
            .is_ok_and(|c| c.is_some_and(|c| url_of(&c) == "http://v2/mcp"))
    })
    .await;
    assert!(seen, "keyspace invalidation lost after the restart");
}
