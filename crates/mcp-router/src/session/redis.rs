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
    /// Most sessions of one principal at once (default 1,000; at least 1): more are refused
    /// with [`SessionStoreError::Limit`]. Sessions past their idle timeout stop counting.
    pub max_per_principal: usize,
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
            max_per_principal: 1_000,
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
            .field("max_per_principal", &self.max_per_principal)
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
/// Each principal's sessions are also indexed, to cap them
/// ([`RedisSessionStoreConfig::max_per_principal`]): a sorted set at
/// `<prefix>:principal:<digest of issuer and subject>` whose members are the session ids, scored
/// with when each expires (milliseconds since the epoch, by the node's clock). `create` first
/// drops the expired members (`ZREMRANGEBYSCORE`) and counts the rest (`ZCARD`); at the cap it
/// refuses, else it adds the new id (`ZADD`) and keeps the set for a TTL (`PEXPIRE`). `get`
/// moves the session's expiry forward in the set in the background (`ZADD XX`, not awaited: a
/// lost refresh only lets a session stop counting early), and `remove` takes it out (`ZREM`).
/// Two creates racing for a principal's last place may both succeed: the cap bounds what one
/// principal holds, it is not a quota to the session. An index key is one key, so it lives in
/// one hash slot of a Cluster like a session.
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
    /// `<prefix>:principal:`, the per-principal index keys' prefix.
    index_prefix: Arc<str>,
    max_per_principal: usize,
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
            index_prefix: format!("{}:principal:", config.key_prefix).into(),
            max_per_principal: config.max_per_principal.max(1),
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

    /// The index key of `record`'s principal: a digest, so that any issuer and subject make a
    /// short key of plain characters.
    fn index_key(&self, record: &SessionRecord) -> String {
        let mut context = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        context.update(record.issuer.as_bytes());
        context.update(b"\0");
        context.update(record.subject.as_bytes());
        let digest = context.finish();
        let hex: String = digest.as_ref()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{}{hex}", self.index_prefix)
    }

    /// When a session used now expires, in milliseconds since the epoch.
    fn expiry_ms(&self) -> u64 {
        now_ms().saturating_add(self.ttl_ms)
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
        let index = self.index_key(&record);
        // Expired sessions stop counting first: most clients never DELETE theirs.
        let (held,): (usize,) = redis::pipe()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&index)
            .arg("-inf")
            .arg(now_ms())
            .ignore()
            .cmd("ZCARD")
            .arg(&index)
            .query_async(&mut conn)
            .await
            .map_err(classify)?;
        if held >= self.max_per_principal {
            return Err(SessionStoreError::Limit(
                "too many sessions for this principal",
            ));
        }
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
        redis::pipe()
            .cmd("ZADD")
            .arg(&index)
            .arg(self.expiry_ms())
            .arg(&id)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&index)
            .arg(self.ttl_ms)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
            .map_err(classify)?;
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
        let record = value.map(|v| decode(&v)).transpose()?;
        if let Some(record) = &record {
            self.refresh_index(record, id);
        }
        Ok(record)
    }

    /// Moves session `id`'s expiry forward in its principal's index, in the background: the
    /// request does not wait for it, and a failure only lets the session stop counting early.
    fn refresh_index(&self, record: &SessionRecord, id: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, index, id) = (self.clone(), self.index_key(record), id.to_owned());
        runtime.spawn(async move {
            let Ok(mut conn) = store.conn().await else {
                return;
            };
            let refreshed = redis::pipe()
                .cmd("ZADD")
                .arg(&index)
                .arg("XX")
                .arg(store.expiry_ms())
                .arg(&id)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&index)
                .arg(store.ttl_ms)
                .ignore()
                .query_async::<()>(&mut conn)
                .await;
            if let Err(e) = refreshed {
                tracing::debug!(error = %e, "a session's expiry in its principal's index was not refreshed");
            }
        });
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
        let value_was_some = value.is_some();
        let record = value.and_then(|v| decode(&v).ok());
        if let Some(record) = &record {
            redis::cmd("ZREM")
                .arg(self.index_key(record))
                .arg(id)
                .query_async::<()>(&mut conn)
                .await
                .map_err(classify)?;
        }
        if value_was_some {
            self.replicate(&mut conn).await?;
        }
        // The key is gone either way; an undecodable value is simply not returned.
        Ok(record)
    }
}

/// Milliseconds since the epoch by this node's clock.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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
