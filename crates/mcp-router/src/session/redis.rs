//! [`RedisSessionStore`]: downstream sessions in Redis, shared by every gateway node.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::PoolError;
use deadpool_redis::redis::{self, RedisError};

use mcp_config_store::{
    PoolSettings, RedisConnection, RedisPool, RedisTopology, is_transient, is_transient_pool_error,
};

use super::local::new_session_id;
use super::record::SessionRecord;
use super::store::{SessionStore, SessionStoreError, StoreFuture};

/// Default key prefix.
pub const DEFAULT_SESSION_KEY_PREFIX: &str = "mcpgw";

/// Settings of a [`RedisSessionStore`]. Build with [`RedisSessionStoreConfig::new`], then set
/// the fields to change (the struct is `#[non_exhaustive]`).
///
/// ```
/// use std::time::Duration;
/// use mcp_router::session::RedisSessionStoreConfig;
///
/// let mut config = RedisSessionStoreConfig::new("redis://127.0.0.1:6379/");
/// config.ttl = Duration::from_secs(600);
/// assert_eq!(config.key_prefix, "mcpgw");
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisSessionStoreConfig {
    /// Redis URL, e.g. `redis://user:pass@host:6379/0`, or a Sentinel or Cluster URL
    /// ([`RedisTopology`]).
    pub url: String,
    /// Key prefix: sessions are `<prefix>:session:<id>`.
    pub key_prefix: String,
    /// Idle timeout: a session unused this long expires (refreshed by every `get`; at least 1 ms).
    pub ttl: Duration,
    /// Maximum pooled connections.
    pub pool_size: usize,
    /// How long a request may wait for a free pooled connection.
    pub pool_wait_timeout: Duration,
    /// TCP connect + handshake timeout for a new connection (also the pool's create timeout).
    pub connect_timeout: Duration,
    /// Timeout of one command (also the pool's recycle timeout).
    pub response_timeout: Duration,
    /// Replicas that must confirm each session write (`WAIT`); 0 (default): do not wait.
    pub wait_replicas: u32,
    /// How long a write waits for [`wait_replicas`](Self::wait_replicas) confirmations.
    pub wait_timeout: Duration,
}

impl RedisSessionStoreConfig {
    /// Defaults with the given URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }
}

impl Default for RedisSessionStoreConfig {
    fn default() -> Self {
        Self {
            url: String::from("redis://127.0.0.1:6379/"),
            key_prefix: String::from(DEFAULT_SESSION_KEY_PREFIX),
            ttl: Duration::from_secs(30 * 60),
            pool_size: 16,
            pool_wait_timeout: Duration::from_millis(250),
            connect_timeout: Duration::from_millis(250),
            response_timeout: Duration::from_millis(500),
            wait_replicas: 0,
            wait_timeout: Duration::from_millis(100),
        }
    }
}

impl fmt::Debug for RedisSessionStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password: never print it.
        f.debug_struct("RedisSessionStoreConfig")
            .field("url", &"<redacted>")
            .field("key_prefix", &self.key_prefix)
            .field("ttl", &self.ttl)
            .field("pool_size", &self.pool_size)
            .field("pool_wait_timeout", &self.pool_wait_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("wait_replicas", &self.wait_replicas)
            .field("wait_timeout", &self.wait_timeout)
            .finish()
    }
}

/// Why [`RedisSessionStore::new`] failed (configuration mistakes; an unreachable server is not one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedisSessionStoreError {
    /// The URL does not parse (the URL itself is not repeated: it may hold a password).
    #[error("invalid Redis URL: {0}")]
    InvalidUrl(String),
    /// The key prefix is empty or contains whitespace or control characters.
    #[error(
        "invalid Redis key prefix {0:?}: must be non-empty, without whitespace or control characters"
    )]
    InvalidPrefix(String),
    /// The TTL is shorter than a millisecond.
    #[error("the session TTL must be at least 1 ms")]
    InvalidTtl,
    /// The pool could not be built.
    #[error("cannot build the Redis pool: {0}")]
    Pool(String),
}

/// Downstream sessions in Redis, shared by all nodes. Clones share the pool.
///
/// # Data
///
/// Session `id` is the JSON [`SessionRecord`] at key `<prefix>:session:<id>` (default prefix
/// `mcpgw`), with a TTL of [`RedisSessionStoreConfig::ttl`]:
///
/// - `create` mints 32 random bytes (aws-lc-rs), base64url (43 characters), and `SET ... PX ttl NX`;
/// - `get` is `GETEX ... PX ttl`: every use refreshes the idle timer (Redis ≥ 6.2);
/// - `update` is `SET ... XX KEEPTTL`: keeps the TTL, `false` when the key is gone;
/// - `remove` is `GETDEL` (Redis ≥ 6.2).
///
/// An id that is not 43 base64url characters is unknown without asking Redis. A value that is not a
/// session record is [`SessionStoreError::Other`].
///
/// # Topology and consistency
///
/// The URL chooses one server, Sentinel or Cluster ([`RedisTopology`]). A record is one key, so
/// in a Cluster each session lives in one hash slot whatever its id. Redis replicates
/// asynchronously: a write the primary acknowledged can be lost when the primary dies before a
/// replica got it and that replica is promoted. With [`RedisSessionStoreConfig::wait_replicas`]
/// `= n > 0` every write (`create`, `update`, `remove`) is followed by `WAIT n timeout`; when fewer
/// than `n` replicas confirmed it within [`RedisSessionStoreConfig::wait_timeout`], the operation
/// fails with [`SessionStoreError::Unavailable`] (503: the client retries; the write itself may
/// or may not survive a failover). Idle-timer refreshes (`GETEX`) never wait: losing one only
/// shortens a session's idle time by one request.
///
/// # Outages
///
/// No request waits on retries: pool waits, connection setup and commands have short timeouts
/// ([`RedisSessionStoreConfig`]), and a refused or lost connection, a connect or response timeout
/// or a pool wait timeout is [`SessionStoreError::Unavailable`] at once (503 at the engine). Every
/// request tries a fresh connection, so a restarted Redis is picked up without restarting the
/// gateway (sessions survive only if Redis persisted them).
///
/// ```no_run
/// use mcp_router::session::{RedisSessionStore, RedisSessionStoreConfig};
///
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisSessionStore::new(RedisSessionStoreConfig::new("redis://127.0.0.1:6379/"))?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisSessionStore {
    pool: RedisPool,
    key_prefix: Arc<str>,
    ttl_ms: u64,
    wait_replicas: u32,
    wait_timeout_ms: u64,
}

impl fmt::Debug for RedisSessionStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSessionStore")
            .field("key_prefix", &self.key_prefix)
            .field("ttl_ms", &self.ttl_ms)
            .field("wait_replicas", &self.wait_replicas)
            .finish_non_exhaustive()
    }
}

impl RedisSessionStore {
    /// Builds the pool. Does not connect: an unreachable Redis makes requests fail with
    /// [`SessionStoreError::Unavailable`] until it is back (use [`check`](Self::check) for a strict
    /// start or a readiness probe). Requests must run inside a Tokio runtime.
    ///
    /// # Errors
    ///
    /// An invalid URL, key prefix or TTL.
    pub fn new(config: RedisSessionStoreConfig) -> Result<Self, RedisSessionStoreError> {
        let ttl_ms = u64::try_from(config.ttl.as_millis()).unwrap_or(u64::MAX);
        if ttl_ms == 0 {
            return Err(RedisSessionStoreError::InvalidTtl);
        }
        let (_, pool) = pool(&config, config.pool_size)?;
        Ok(Self {
            pool,
            key_prefix: format!("{}:session:", config.key_prefix).into(),
            ttl_ms,
            wait_replicas: config.wait_replicas,
            // `WAIT n 0` blocks forever: a zero timeout means the shortest one, 1 ms.
            wait_timeout_ms: u64::try_from(config.wait_timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        })
    }

    /// Pings Redis.
    ///
    /// # Errors
    ///
    /// [`SessionStoreError::Unavailable`] when Redis cannot be reached, `Other` when it refuses us.
    pub async fn check(&self) -> Result<(), SessionStoreError> {
        let mut conn = self.conn().await?;
        redis::cmd("PING")
            .query_async::<()>(&mut conn)
            .await
            .map_err(classify)
    }

    fn key(&self, id: &str) -> String {
        format!("{}{id}", self.key_prefix)
    }

    async fn conn(&self) -> Result<RedisConnection, SessionStoreError> {
        self.pool.get().await.map_err(classify_pool)
    }

    /// After a write on `conn`: `WAIT` for the configured replicas (a no-op when none are asked).
    async fn replicate(&self, conn: &mut RedisConnection) -> Result<(), SessionStoreError> {
        if self.wait_replicas == 0 {
            return Ok(());
        }
        let acked: i64 = redis::cmd("WAIT")
            .arg(self.wait_replicas)
            .arg(self.wait_timeout_ms)
            .query_async(conn)
            .await
            .map_err(classify)?;
        if acked < i64::from(self.wait_replicas) {
            tracing::warn!(
                acked,
                wanted = self.wait_replicas,
                "session write not confirmed by enough Redis replicas; answering 503"
            );
            return Err(SessionStoreError::Unavailable);
        }
        Ok(())
    }

    async fn create_now(&self, record: SessionRecord) -> Result<String, SessionStoreError> {
        let value = serde_json::to_string(&record)
            .map_err(|e| SessionStoreError::Other(format!("cannot encode session: {e}")))?;
        let id = new_session_id()?;
        let mut conn = self.conn().await?;
        let reply: redis::Value = redis::cmd("SET")
            .arg(self.key(&id))
            .arg(value)
            .arg("PX")
            .arg(self.ttl_ms)
            .arg("NX")
            .query_async(&mut conn)
            .await
            .map_err(classify)?;
        if matches!(reply, redis::Value::Nil) {
            // 256 random bits collided: the randomness source is broken.
            return Err(SessionStoreError::Other("session id collision".to_owned()));
        }
        self.replicate(&mut conn).await?;
        Ok(id)
    }

    async fn get_now(&self, id: &str) -> Result<Option<SessionRecord>, SessionStoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let mut conn = self.conn().await?;
        let value: Option<String> = redis::cmd("GETEX")
            .arg(self.key(id))
            .arg("PX")
            .arg(self.ttl_ms)
            .query_async(&mut conn)
            .await
            .map_err(classify)?;
        value.map(|v| decode(&v)).transpose()
    }

    async fn update_now(&self, id: &str, record: SessionRecord) -> Result<bool, SessionStoreError> {
        if !plausible_id(id) {
            return Ok(false);
        }
        let value = serde_json::to_string(&record)
            .map_err(|e| SessionStoreError::Other(format!("cannot encode session: {e}")))?;
        let mut conn = self.conn().await?;
        let reply: redis::Value = redis::cmd("SET")
            .arg(self.key(id))
            .arg(value)
            .arg("XX")
            .arg("KEEPTTL")
            .query_async(&mut conn)
            .await
            .map_err(classify)?;
        let updated = !matches!(reply, redis::Value::Nil);
        if updated {
            self.replicate(&mut conn).await?;
        }
        Ok(updated)
    }

    async fn remove_now(&self, id: &str) -> Result<Option<SessionRecord>, SessionStoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let mut conn = self.conn().await?;
        let value: Option<String> = redis::cmd("GETDEL")
            .arg(self.key(id))
            .query_async(&mut conn)
            .await
            .map_err(classify)?;
        if value.is_some() {
            self.replicate(&mut conn).await?;
        }
        // The key is gone either way; an undecodable value is simply not returned.
        Ok(value.and_then(|v| decode(&v).ok()))
    }
}

/// Ids minted by [`new_session_id`]: 43 base64url characters.
fn plausible_id(id: &str) -> bool {
    id.len() == 43
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn decode(value: &str) -> Result<SessionRecord, SessionStoreError> {
    serde_json::from_str(value).map_err(|e| {
        tracing::warn!(error = %e, "undecodable session record in Redis");
        SessionStoreError::Other(format!("undecodable session record: {e}"))
    })
}

/// A pool of at most `max_size` connections to the Redis of `config`, after checking its key
/// prefix (shared with the [`NodeBus`](crate::front::bus::NodeBus) on the same Redis).
pub(crate) fn pool(
    config: &RedisSessionStoreConfig,
    max_size: usize,
) -> Result<(RedisTopology, RedisPool), RedisSessionStoreError> {
    let prefix = &config.key_prefix;
    if prefix.is_empty() || prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(RedisSessionStoreError::InvalidPrefix(prefix.clone()));
    }
    let topology = RedisTopology::parse(&config.url)
        .map_err(|e| RedisSessionStoreError::InvalidUrl(e.to_string()))?;
    let pool = topology
        .pool(&PoolSettings::new(
            max_size,
            config.pool_wait_timeout,
            config.connect_timeout,
            config.response_timeout,
        ))
        .map_err(|e| RedisSessionStoreError::Pool(e.to_string()))?;
    Ok((topology, pool))
}

fn classify_pool(err: PoolError) -> SessionStoreError {
    if is_transient_pool_error(&err) {
        // The caller only learns "unavailable": the cause (which a failover shows as a reset
        // connection, LOADING, READONLY or no primary known to the sentinels) is logged here.
        tracing::warn!(error = %err, "Redis session store unavailable");
        SessionStoreError::Unavailable
    } else {
        SessionStoreError::Other(err.to_string())
    }
}

/// The gateway's one rule for Redis outages (see `mcp_config_store::is_transient`);
/// anything else (wrong type, authentication, ACL, unknown command on an old Redis) is `Other`.
fn classify(err: RedisError) -> SessionStoreError {
    if is_transient(&err) {
        tracing::warn!(error = %err, "Redis session store unavailable");
        SessionStoreError::Unavailable
    } else {
        SessionStoreError::Other(err.to_string())
    }
}

impl SessionStore for RedisSessionStore {
    fn create(&self, record: SessionRecord) -> StoreFuture<'_, String> {
        Box::pin(self.create_now(record))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Arc<SessionRecord>>> {
        Box::pin(async move { Ok(self.get_now(id).await?.map(Arc::new)) })
    }

    fn update<'a>(&'a self, id: &'a str, record: SessionRecord) -> StoreFuture<'a, bool> {
        Box::pin(self.update_now(id, record))
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Arc<SessionRecord>>> {
        Box::pin(async move { Ok(self.remove_now(id).await?.map(Arc::new)) })
    }

    /// `EXISTS`: leaves the TTL as it is.
    fn exists<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            if !plausible_id(id) {
                return Ok(false);
            }
            let mut conn = self.conn().await?;
            let found: u64 = redis::cmd("EXISTS")
                .arg(self.key(id))
                .query_async(&mut conn)
                .await
                .map_err(classify)?;
            Ok(found > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_validated_and_redacted() {
        let config = RedisSessionStoreConfig::new("redis://user:secret@127.0.0.1:1/");
        assert!(!format!("{config:?}").contains("secret"));
        assert!(RedisSessionStore::new(config.clone()).is_ok());
        assert!(matches!(
            RedisSessionStore::new(RedisSessionStoreConfig {
                key_prefix: "a b".into(),
                ..config.clone()
            }),
            Err(RedisSessionStoreError::InvalidPrefix(_))
        ));
        assert!(matches!(
            RedisSessionStore::new(RedisSessionStoreConfig {
                ttl: Duration::from_micros(10),
                ..config.clone()
            }),
            Err(RedisSessionStoreError::InvalidTtl)
        ));
        assert!(matches!(
            RedisSessionStore::new(RedisSessionStoreConfig::new("nope://x")),
            Err(RedisSessionStoreError::InvalidUrl(_))
        ));
    }

    #[test]
    fn keys_and_ids() {
        let store = RedisSessionStore::new(RedisSessionStoreConfig {
            key_prefix: "tenant".into(),
            ..RedisSessionStoreConfig::default()
        })
        .expect("store");
        let id = new_session_id().expect("id");
        assert!(plausible_id(&id));
        assert_eq!(store.key(&id), format!("tenant:session:{id}"));
        assert!(!plausible_id("short"));
        assert!(!plausible_id(&format!("{}.", &id[..42])));
    }
}
