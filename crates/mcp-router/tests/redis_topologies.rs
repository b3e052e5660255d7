//! The Redis session store and the node bus over Redis Sentinel and Redis Cluster: real
//! `redis-server` processes (a primary, a replica and three sentinels; three cluster masters),
//! killed and restarted. Skipped with a loud message without `redis-server`/`redis-cli` (a
//! failure under `CI=true`).

use std::time::Duration;

use mcp_router::session::{
    RedisSessionStore, RedisSessionStoreConfig, SessionRecord, SessionStore, SessionStoreError,
};
use mcp_test_support::{RedisClusterSet, RedisSentinelSet};

fn record(subject: &str) -> SessionRecord {
    SessionRecord {
        issuer: "https://issuer.example".into(),
        subject: subject.into(),
        vhost: "vh".into(),
        protocol_version: "2025-11-25".into(),
        client_capabilities: "{}".into(),
        log_level: None,
        backends: vec![],
        subscriptions: vec![],
        created_at_ms: None,
    }
}

fn store(url: String, wait_replicas: u32) -> RedisSessionStore {
    let mut config = RedisSessionStoreConfig::new(url);
    config.key_prefix = "topo".into();
    config.wait_replicas = wait_replicas;
    // Margins of seconds: a loaded machine must not miss a replica's acknowledgement.
    config.wait_timeout = Duration::from_secs(3);
    config.connect_timeout = Duration::from_secs(2);
    config.response_timeout = Duration::from_secs(5);
    config.pool_wait_timeout = Duration::from_secs(2);
    RedisSessionStore::new(config).expect("store")
}

/// Retries `op` until it stops answering `Unavailable` (the failover window), counting the
/// unavailable answers; any other error fails the test.
async fn through_failover<T, F, Fut>(mut op: F) -> (T, usize)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, SessionStoreError>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut unavailable = 0;
    loop {
        match op().await {
            Ok(value) => return (value, unavailable),
            Err(SessionStoreError::Unavailable) => unavailable += 1,
            Err(other) => panic!("a failover must look unavailable, not {other:?}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still unavailable after a minute"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_sessions_confirmed_by_a_replica_survive_the_primary_dying() {
    let Some(mut set) = RedisSentinelSet::start().await else {
        return;
    };
    let store = store(set.url(), 1);
    store
        .check()
        .await
        .expect("the primary through the sentinels");
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(
            store
                .create(record(&format!("user-{i}")))
                .await
                .expect("create, confirmed by the replica"),
        );
    }
    let mut changed = record("user-0");
    changed.log_level = Some("debug".into());
    assert!(
        store
            .update(&ids[0], changed.clone())
            .await
            .expect("update")
    );

    let old = set.kill_primary().await;
    let new = set.wait_for_promotion(old).await;
    assert_ne!(old, new);

    // The same store value (its pool held connections to the dead primary) finds the new one.
    let (first, _unavailable) = through_failover(|| store.get(&ids[0])).await;
    assert_eq!(
        first.as_deref(),
        Some(&changed),
        "the confirmed update survived"
    );
    for (i, id) in ids.iter().enumerate().skip(1) {
        assert_eq!(
            store.get(id).await.expect("get after promotion").as_deref(),
            Some(&record(&format!("user-{i}"))),
            "session {i} was confirmed by the replica before the primary died"
        );
    }

    // The promoted primary has no replica now: a write asking for one is refused, not silently
    // unconfirmed; a store that does not ask still writes.
    match store.create(record("late")).await {
        Err(SessionStoreError::Unavailable) => {}
        other => panic!("a write no replica confirmed must be Unavailable, got {other:?}"),
    }
    let relaxed = self::store(set.url(), 0);
    let id = relaxed.create(record("relaxed")).await.expect("create");

    // The old primary comes back as a replica of the new one: confirmed writes work again.
    set.restart_node(old).await;
    let (late, _) = through_failover(|| store.create(record("after-rejoin"))).await;
    assert_eq!(
        store
            .get(&late)
            .await
            .expect("get")
            .map(|r| r.subject.clone()),
        Some("after-rejoin".to_owned())
    );
    assert!(relaxed.get(&id).await.expect("get").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_sessions_spread_over_the_masters_and_survive_a_node_restart() {
    let Some(mut set) = RedisClusterSet::start().await else {
        return;
    };
    let store = store(set.url(), 0);
    store.check().await.expect("cluster reachable");
    let mut ids = Vec::new();
    for i in 0..30 {
        ids.push(
            store
                .create(record(&format!("user-{i}")))
                .await
                .expect("create"),
        );
    }
    let mut owners = std::collections::BTreeSet::new();
    for id in &ids {
        owners.insert(set.node_of(&format!("topo:session:{id}")).await);
    }
    assert_eq!(owners.len(), 3, "30 random ids land on all three masters");

    let mut changed = record("user-0");
    changed.subscriptions = vec!["file:///x".into()];
    assert!(
        store
            .update(&ids[0], changed.clone())
            .await
            .expect("update")
    );
    assert_eq!(
        store.get(&ids[0]).await.expect("get").as_deref(),
        Some(&changed)
    );

    // One master down: the sessions it holds are unavailable (never "unknown": a 404 would make
    // clients drop a session that still exists).
    let victim = set.node_of(&format!("topo:session:{}", ids[0])).await;
    set.kill(victim).await;
    match store.get(&ids[0]).await {
        Err(SessionStoreError::Unavailable) => {}
        other => panic!("a session on a dead master must be Unavailable, got {other:?}"),
    }

    // Back with its append-only file: every session is there again.
    set.restart(victim).await;
    let (back, _) = through_failover(|| store.get(&ids[0])).await;
    assert_eq!(back.as_deref(), Some(&changed));
    for (i, id) in ids.iter().enumerate().skip(1) {
        assert_eq!(
            store.get(id).await.expect("get").map(|r| r.subject.clone()),
            Some(format!("user-{i}"))
        );
    }
    assert!(store.remove(&ids[1]).await.expect("remove").is_some());
    assert!(!store.exists(&ids[1]).await.expect("exists"));
}
