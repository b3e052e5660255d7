//! [`RedisStore`] over Redis Sentinel (a primary, a replica, three sentinels) and Redis Cluster
//! (three masters): real `redis-server` processes killed and restarted. What must survive: the
//! stored configurations (replicated before the kill, or persisted by a restarted cluster node),
//! the invalidation subscription (it follows the promotion) and the store itself (no restart).
//! Skipped loudly without `redis-server`/`redis-cli` (a failure under `CI=true`).

#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use mcp_config_store::{
    Invalidation, RedisStore, RedisStoreConfig, StoreErrorKind, UserConfig, UserConfigStore,
};
use mcp_test_support::{RedisClusterSet, RedisSentinelSet};
use tokio::sync::broadcast;

fn user(n: u32) -> UserConfig {
    UserConfig::from_json_str(&format!(
        r#"{{"virtual_hosts":{{"vh1":{{"backends":{{"b":{{"url":"http://127.0.0.1:{n}/mcp"}}}}}}}}}}"#
    ))
    .unwrap()
}

async fn connect(url: String) -> RedisStore {
    RedisStore::connect({
        let mut config = RedisStoreConfig::new(url);
        config.connect_timeout = Duration::from_secs(2);
        config.response_timeout = Duration::from_secs(3);
        config.pool_wait_timeout = Duration::from_secs(2);
        config
    })
    .await
    .unwrap()
}

/// Loads `subject` until the store stops answering `Unavailable` (a minute at most).
async fn load_through_outage(store: &RedisStore, subject: &str) -> Option<Arc<UserConfig>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match store.load(Arc::from(subject)).await {
            Ok(found) => return found,
            Err(e) if e.kind() == StoreErrorKind::Unavailable => {}
            Err(e) => panic!("an outage must look unavailable, not {e}"),
        }
        assert!(tokio::time::Instant::now() < deadline, "still unavailable");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The next invalidation for `subject` (others skipped), within seconds.
async fn invalidated(events: &mut broadcast::Receiver<Invalidation>, subject: &str) -> bool {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(Invalidation::Subject(s)) if &*s == subject => return true,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return false,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .unwrap_or(false)
}

/// Puts a probe until its invalidation comes back: the subscription is live.
async fn subscribed(store: &RedisStore, events: &mut broadcast::Receiver<Invalidation>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if store.publish_invalidation("__probe__").await.is_ok()
            && invalidated(events, "__probe__").await
        {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "never subscribed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_store_follows_the_promotion_with_its_data_and_subscription() {
    let Some(mut set) = RedisSentinelSet::start().await else {
        return;
    };
    let store = connect(set.url()).await;
    let mut events = store.invalidations();
    subscribed(&store, &mut events).await;
    store.put("alice", &user(1)).await.unwrap();
    assert!(invalidated(&mut events, "alice").await, "put announced");
    // Replicated before the primary dies (what `WAIT` guarantees; asked here by hand).
    let primary = set.primary_port().await;
    let acked = set.cli(primary, &["WAIT", "1", "5000"]).await.unwrap();
    assert_eq!(acked.trim(), "1");

    let old = set.kill_primary().await;
    set.wait_for_promotion(old).await;
    let alice = load_through_outage(&store, "alice").await.unwrap();
    assert_eq!(*alice, user(1), "the replicated configuration survived");

    // The subscriber reconnected through the sentinels: a put on the new primary is announced.
    subscribed(&store, &mut events).await;
    store.put("bob", &user(2)).await.unwrap();
    assert!(
        invalidated(&mut events, "bob").await,
        "announced after the failover"
    );
    assert_eq!(
        *store.load(Arc::from("bob")).await.unwrap().unwrap(),
        user(2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_store_spreads_keys_announces_everywhere_and_survives_a_node_restart() {
    let Some(mut set) = RedisClusterSet::start().await else {
        return;
    };
    let store = connect(set.url()).await;
    let mut events = store.invalidations();
    subscribed(&store, &mut events).await;
    let subjects: Vec<String> = (0..12).map(|i| format!("user-{i}")).collect();
    for (i, subject) in (0u32..).zip(&subjects) {
        store.put(subject, &user(i + 1)).await.unwrap();
        assert!(
            invalidated(&mut events, subject).await,
            "{subject} announced"
        );
    }
    let mut owners = std::collections::BTreeSet::new();
    for subject in &subjects {
        owners.insert(set.node_of(&format!("mcpgw:user:{subject}")).await);
    }
    assert!(owners.len() > 1, "keys on several masters");

    // One master down: its keys are unavailable (503 at the layer), never "no configuration".
    let victim = set.node_of("mcpgw:user:user-0").await;
    set.kill(victim).await;
    match store.load(Arc::from("user-0")).await {
        Err(e) => assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}"),
        Ok(found) => panic!("a key on a dead master cannot load: {found:?}"),
    }
    set.restart(victim).await;
    for (i, subject) in (0u32..).zip(&subjects) {
        let found = load_through_outage(&store, subject).await.unwrap();
        assert_eq!(
            *found,
            user(i + 1),
            "{subject} back with its node's append-only file"
        );
    }
    store.delete("user-1").await.unwrap();
    assert!(store.load(Arc::from("user-1")).await.unwrap().is_none());
}

/// A connection answered `READONLY` (its server was demoted to replica while the connection
/// stayed open) is closed when dropped instead of going back to the pool, so the next one is
/// made anew (through the sentinels, in a Sentinel deployment); any other connection is reused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_answered_readonly_is_not_pooled_again() {
    use deadpool_redis::redis;
    use mcp_config_store::{PoolSettings, RedisTopology};

    let Some(replica) = mcp_test_support::RedisReplica::start().await else {
        return;
    };
    let second = Duration::from_secs(2);
    let pool = RedisTopology::parse(&replica.replica_url())
        .unwrap()
        .pool(&PoolSettings::new(1, second, second, second))
        .unwrap();
    // The control: a connection that only read goes back to the pool and is handed out again.
    let mut conn = pool.get().await.unwrap();
    let first = client_id(&mut conn).await;
    drop(conn);
    let mut conn = pool.get().await.unwrap();
    assert_eq!(
        client_id(&mut conn).await,
        first,
        "a healthy connection is reused"
    );

    let write = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query_async::<()>(&mut conn)
        .await
        .unwrap_err();
    assert_eq!(
        write.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
    );
    assert!(conn.is_demoted());
    drop(conn);
    let mut conn = pool.get().await.unwrap();
    assert!(!conn.is_demoted());
    let second = client_id(&mut conn).await;
    assert_ne!(second, first, "the demoted connection was closed");

    // The same for a write inside a transaction (MULTI ... EXEC), which Redis aborts.
    let transaction = redis::pipe()
        .atomic()
        .set("k", "v")
        .query_async::<()>(&mut conn)
        .await
        .unwrap_err();
    assert!(
        mcp_config_store::is_transient(&transaction),
        "{transaction}"
    );
    assert!(conn.is_demoted(), "{transaction}");
    drop(conn);
    let mut conn = pool.get().await.unwrap();
    assert_ne!(
        client_id(&mut conn).await,
        second,
        "closed after the transaction too"
    );
}

/// The server's id of the connection `conn`.
async fn client_id(conn: &mut mcp_config_store::RedisConnection) -> i64 {
    deadpool_redis::redis::cmd("CLIENT")
        .arg("ID")
        .query_async::<i64>(conn)
        .await
        .unwrap()
}
