//! The Redis and sealed session stores through the public `SessionStore` API.
//!
//! Redis tests run against a private `redis-server` (`mcp_test_support::RedisServer`); they are
//! skipped with a loud message when the binary is missing (and fail when `CI=true`).

use std::time::{Duration, Instant};

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use mcp_router::WallClock;
use mcp_router::session::{
    BackendEra, BackendSession, KeyRing, RedisSessionStore, RedisSessionStoreConfig,
    SealedSessionStore, SessionRecord, SessionStore, SessionStoreError,
};
use mcp_test_support::{RedisServer, ShiftedClock};

fn record(subject: &str) -> SessionRecord {
    SessionRecord {
        issuer: "https://issuer.example".into(),
        subject: subject.into(),
        vhost: "vh".into(),
        protocol_version: "2025-11-25".into(),
        client_capabilities: r#"{"roots":{}}"#.into(),
        log_level: None,
        backends: vec![BackendSession {
            name: "github".into(),
            era: Some(BackendEra::Legacy),
            upstream_session_id: Some("up-1".into()),
            version: Some("2025-06-18".into()),
            url: Some("http://127.0.0.1:9/mcp".into()),
        }],
        subscriptions: vec![],
        created_at_ms: None,
    }
}

/// The longest one store operation may take while Redis is down, by the store's own settings: a
/// pool wait, a connection attempt, a recycle check and the command itself, each with its timeout.
/// "Fast" means bounded by these, not by a retry loop.
fn outage_operation_limit() -> Duration {
    let config = RedisSessionStoreConfig::default();
    config.pool_wait_timeout + config.connect_timeout + 2 * config.response_timeout
}

/// Added to every elapsed-time bound: a loaded 2-core machine (a release build beside the tests)
/// can stall a test task for seconds; it says nothing about the store.
const LOADED_MACHINE: Duration = Duration::from_secs(5);

fn store(redis: &RedisServer, ttl: Duration) -> RedisSessionStore {
    let mut config = RedisSessionStoreConfig::new(redis.url());
    config.ttl = ttl;
    config.key_prefix = "test-sessions".into();
    RedisSessionStore::new(config).expect("store")
}

#[tokio::test]
async fn redis_create_get_update_remove() {
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let store = store(&redis, Duration::from_secs(60));
    store.check().await.expect("ping");
    let id = store.create(record("alice")).await.expect("create");
    assert_eq!(id.len(), 43);
    assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    assert_eq!(
        store.get(&id).await.expect("get").as_deref(),
        Some(&record("alice"))
    );

    let mut changed = record("alice");
    changed.log_level = Some("debug".into());
    changed.subscriptions = vec!["file:///a".into()];
    assert!(store.update(&id, changed.clone()).await.expect("update"));
    assert_eq!(
        store.get(&id).await.expect("get").as_deref(),
        Some(&changed)
    );

    assert_eq!(
        store.remove(&id).await.expect("remove").as_deref(),
        Some(&changed)
    );
    assert!(store.get(&id).await.expect("get").is_none());
    assert!(
        !store
            .update(&id, changed)
            .await
            .expect("update after remove")
    );
    assert!(store.remove(&id).await.expect("remove again").is_none());
    // Ids the store never minted are unknown, whatever they look like.
    for bogus in ["", "nope", "a:b", &"x".repeat(43), &"y".repeat(5000)] {
        assert!(store.get(bogus).await.expect("get").is_none(), "{bogus}");
    }
}

#[tokio::test]
async fn redis_caps_each_principals_sessions_and_idle_ones_stop_counting() {
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let capped = |ttl: Duration| {
        let mut config = RedisSessionStoreConfig::new(redis.url());
        config.ttl = ttl;
        config.key_prefix = "test-capped".into();
        config.max_per_principal = 2;
        RedisSessionStore::new(config).expect("store")
    };
    let store = capped(Duration::from_secs(60));
    let first = store.create(record("alice")).await.expect("first");
    store.create(record("alice")).await.expect("second");
    assert_eq!(
        store.create(record("alice")).await,
        Err(SessionStoreError::Limit(
            "too many sessions for this principal"
        ))
    );
    // The control: bob has his own share.
    store.create(record("bob")).await.expect("bob");
    // A removed session gives its place back.
    store.remove(&first).await.expect("remove");
    let third = store.create(record("alice")).await.expect("a freed place");

    // Sessions past their idle timeout stop counting, without a DELETE. A second node with a
    // 1 s idle timeout, on its own prefix, shows it (waits of seconds, not milliseconds).
    let short = {
        let mut config = RedisSessionStoreConfig::new(redis.url());
        config.ttl = Duration::from_secs(1);
        config.key_prefix = "test-capped-idle".into();
        config.max_per_principal = 2;
        RedisSessionStore::new(config).expect("store")
    };
    let a = short.create(record("carol")).await.expect("a");
    short.create(record("carol")).await.expect("b");
    assert!(short.create(record("carol")).await.is_err(), "at the cap");
    // `exists` does not refresh the idle timer (`get` would).
    let idle = mcp_test_support::poll_until(Duration::from_secs(30), || async {
        short.exists(&a).await == Ok(false)
    })
    .await;
    assert!(idle, "carol's sessions idled out");
    short
        .create(record("carol"))
        .await
        .expect("idle sessions stopped counting");
    assert!(store.get(&third).await.expect("get").is_some());
}

#[tokio::test]
async fn redis_ttl_is_refreshed_by_get_and_kept_by_update() {
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let ttl = Duration::from_millis(800);
    let store = store(&redis, ttl);
    let id = store.create(record("alice")).await.expect("create");
    // Used every 400 ms for 2 s: stays alive well beyond one TTL.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            store.get(&id).await.expect("get").is_some(),
            "expired while in use"
        );
    }
    // update keeps the TTL (does not make the key persistent) ...
    assert!(store.update(&id, record("alice")).await.expect("update"));
    // ... so once idle, it expires.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert!(
        store.get(&id).await.expect("get").is_none(),
        "idle session survived"
    );
    assert!(!store.update(&id, record("alice")).await.expect("update"));
}

#[tokio::test]
async fn redis_two_nodes_share_sessions() {
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let node_a = store(&redis, Duration::from_secs(60));
    let node_b = store(&redis, Duration::from_secs(60));
    let id = node_a.create(record("alice")).await.expect("create on A");
    assert_eq!(
        node_b.get(&id).await.expect("get on B").as_deref(),
        Some(&record("alice"))
    );
    let mut changed = record("alice");
    changed.log_level = Some("info".into());
    assert!(
        node_b
            .update(&id, changed.clone())
            .await
            .expect("update on B")
    );
    assert_eq!(
        node_a.get(&id).await.expect("get on A").as_deref(),
        Some(&changed)
    );
    drop(node_a);
    assert!(node_b.remove(&id).await.expect("remove on B").is_some());
    let node_c = store(&redis, Duration::from_secs(60));
    assert!(node_c.get(&id).await.expect("get on C").is_none());
}

#[tokio::test]
async fn redis_outage_is_unavailable_fast_and_recovers() {
    let Some(mut redis) = RedisServer::start().await else {
        return;
    };
    let Some(redis) = redis.controllable() else {
        return;
    };
    let store = store(redis, Duration::from_secs(60));
    let id = store.create(record("alice")).await.expect("create");
    assert!(store.get(&id).await.expect("get").is_some());

    redis.stop().await;
    // Pooled connections are now dead (connection lost), new ones refused.
    for round in 0..3 {
        let started = Instant::now();
        assert_eq!(
            store.get(&id).await,
            Err(SessionStoreError::Unavailable),
            "get, round {round}"
        );
        assert!(
            started.elapsed() < outage_operation_limit() + LOADED_MACHINE,
            "get took {:?}",
            started.elapsed()
        );
    }
    let started = Instant::now();
    assert_eq!(
        store.create(record("bob")).await,
        Err(SessionStoreError::Unavailable)
    );
    assert_eq!(
        store.update(&id, record("alice")).await,
        Err(SessionStoreError::Unavailable)
    );
    assert_eq!(store.remove(&id).await, Err(SessionStoreError::Unavailable));
    assert!(
        started.elapsed() < 3 * outage_operation_limit() + LOADED_MACHINE,
        "three writes took {:?}",
        started.elapsed()
    );

    redis.restart().await;
    // The restarted server has no persistence: the old session is gone, new ones work.
    assert!(store.get(&id).await.expect("get after restart").is_none());
    let id = store
        .create(record("alice"))
        .await
        .expect("create after restart");
    assert!(store.get(&id).await.expect("get").is_some());
}

fn random_key_b64() -> String {
    let mut key = [0u8; 32];
    SystemRandom::new().fill(&mut key).expect("randomness");
    STANDARD.encode(key)
}

#[tokio::test]
async fn sealed_sessions_survive_rotation_and_other_nodes() {
    let (old, new) = (random_key_b64(), random_key_b64());
    let node_a = SealedSessionStore::new(KeyRing::parse(&format!("v1:{old}")).expect("ring"));
    let id = node_a.create(record("alice")).await.expect("create");
    assert!(id.starts_with("v1."));
    assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));

    // Another node, already rotated: new key first, old key still present.
    let node_b =
        SealedSessionStore::new(KeyRing::parse(&format!("v2:{new},v1:{old}")).expect("ring"));
    assert_eq!(
        node_b.get(&id).await.expect("get").as_deref(),
        Some(&record("alice"))
    );
    let id2 = node_b.create(record("bob")).await.expect("create");
    assert!(id2.starts_with("v2."));
    assert!(node_a.get(&id2).await.expect("get").is_none(), "A lacks v2");

    // The old key retired: its sessions are unknown.
    let node_c = SealedSessionStore::new(KeyRing::parse(&format!("v2:{new}")).expect("ring"));
    assert!(node_c.get(&id).await.expect("get").is_none());
    assert!(node_c.get(&id2).await.expect("get").is_some());

    // A foreign ring using the same key id does not open it.
    let foreign =
        SealedSessionStore::new(KeyRing::parse(&format!("v2:{}", random_key_b64())).expect("ring"));
    assert!(foreign.get(&id2).await.expect("get").is_none());
}

#[tokio::test]
async fn sealed_expiry_is_absolute() {
    let clock = ShiftedClock::new();
    let store =
        SealedSessionStore::new(KeyRing::parse(&format!("k:{}", random_key_b64())).expect("ring"))
            .with_idle_ttl(Duration::from_secs(1))
            .with_clock({
                let clock = clock.clone();
                WallClock::from_fn(move || clock.now())
            });
    let id = store.create(record("alice")).await.expect("create");
    assert!(store.get(&id).await.expect("get").is_some());
    // Expiry has one-second resolution: 2 s later the id is past `exp` whatever the rounding.
    clock.advance(Duration::from_secs(2));
    assert!(store.get(&id).await.expect("get").is_none());
}
