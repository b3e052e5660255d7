//! [`RedisStore`]: user configurations in Redis (deadpool-redis), with fast failure during outages
//! and change notifications for caches (the store's docs say how).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use deadpool_redis::PoolError;
use deadpool_redis::redis::{self, ErrorKind, RedisError, ServerErrorKind};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use crate::error::StoreError;
use crate::model::UserConfig;
use crate::redis_topology::{PoolSettings, RedisPool, RedisTopology};
use crate::store::{Invalidation, LoadFuture, UserConfigStore, invalidation_channel};

/// Default key prefix.
pub const DEFAULT_KEY_PREFIX: &str = "mcpgw";

/// Settings of a [`RedisStore`]. Build with [`RedisStoreConfig::new`] (or `Default`), then set
/// the fields to change; the struct is `#[non_exhaustive]` so new settings are not breaking.
///
/// ```
/// use std::time::Duration;
/// use mcp_config_store::RedisStoreConfig;
///
/// let mut config = RedisStoreConfig::new("redis://127.0.0.1:6379/");
/// config.key_prefix = "tenant-a".into();
/// config.pool_wait_timeout = Duration::from_millis(100);
/// assert_eq!(config.pool_size, 16);
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisStoreConfig {
    /// Redis URL, e.g. `redis://user:pass@host:6379/0`, or a Sentinel or Cluster URL
    /// ([`RedisTopology`]).
    pub url: String,
    /// Key prefix: keys are `<prefix>:user:<sub>`, the channel is `<prefix>:invalidate`.
    pub key_prefix: String,
    /// Maximum pooled connections.
    pub pool_size: usize,
    /// How long a load may wait for a free pooled connection.
    pub pool_wait_timeout: Duration,
    /// TCP connect + handshake timeout for a new connection (also the pool's create timeout).
    pub connect_timeout: Duration,
    /// Timeout of one command (also the pool's recycle timeout).
    pub response_timeout: Duration,
    /// First delay of the down-store prober.
    pub probe_initial_backoff: Duration,
    /// Largest delay of the down-store prober.
    pub probe_max_backoff: Duration,
    /// First delay before the subscriber reconnects.
    pub subscriber_initial_backoff: Duration,
    /// Largest delay before the subscriber reconnects.
    pub subscriber_max_backoff: Duration,
    /// How often the subscriber pings its connection to detect a silently dead one.
    pub subscriber_ping_interval: Duration,
    /// Longest subject accepted in a key, in bytes.
    pub max_subject_len: usize,
}

impl RedisStoreConfig {
    /// Defaults with the given URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }
}

impl Default for RedisStoreConfig {
    fn default() -> Self {
        Self {
            url: String::from("redis://127.0.0.1:6379/"),
            key_prefix: String::from(DEFAULT_KEY_PREFIX),
            pool_size: 16,
            pool_wait_timeout: Duration::from_millis(250),
            connect_timeout: Duration::from_millis(500),
            response_timeout: Duration::from_millis(500),
            probe_initial_backoff: Duration::from_millis(50),
            probe_max_backoff: Duration::from_secs(2),
            subscriber_initial_backoff: Duration::from_millis(100),
            subscriber_max_backoff: Duration::from_secs(5),
            subscriber_ping_interval: Duration::from_secs(5),
            max_subject_len: 512,
        }
    }
}

impl fmt::Debug for RedisStoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password: never print it.
        f.debug_struct("RedisStoreConfig")
            .field("url", &"<redacted>")
            .field("key_prefix", &self.key_prefix)
            .field("pool_size", &self.pool_size)
            .field("pool_wait_timeout", &self.pool_wait_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("probe_initial_backoff", &self.probe_initial_backoff)
            .field("probe_max_backoff", &self.probe_max_backoff)
            .field(
                "subscriber_initial_backoff",
                &self.subscriber_initial_backoff,
            )
            .field("subscriber_max_backoff", &self.subscriber_max_backoff)
            .field("subscriber_ping_interval", &self.subscriber_ping_interval)
            .field("max_subject_len", &self.max_subject_len)
            .finish()
    }
}

/// Why [`RedisStore::connect`] failed (configuration problems; an unreachable server is not one).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisStoreError {
    /// The URL does not parse (the URL itself is not repeated: it may hold a password).
    #[error("invalid Redis URL: {0}")]
    InvalidUrl(String),
    /// The key prefix is empty or contains whitespace or control characters.
    #[error(
        "invalid Redis key prefix {0:?}: must be non-empty, without whitespace or control characters"
    )]
    InvalidPrefix(String),
    /// The pool could not be built.
    #[error("cannot build the Redis pool: {0}")]
    Pool(String),
    /// Redis answered but refused us (e.g. wrong password, missing ACL permission).
    #[error("Redis rejected the connection: {0}")]
    Rejected(StoreError),
}

/// A [`UserConfigStore`] in Redis (deadpool-redis), with fast failure during outages and change
/// notifications for caches. Clones share the pool and background tasks, which stop when the last
/// clone is dropped.
///
/// ## Data
///
/// Subject `sub`'s configuration is the JSON [`UserConfig`] at key `<prefix>:user:<sub>` (default
/// prefix `mcpgw`). A missing key is "no configuration" (400 at the layer); a value that does not
/// parse or validate is [`Corrupt`](crate::StoreErrorKind::Corrupt) (500). A subject that cannot be
/// a key (empty, control characters, longer than [`RedisStoreConfig::max_subject_len`] bytes) is a
/// key encoding error, [`Other`](crate::StoreErrorKind::Other) (500).
///
/// The URL may name one server, a Sentinel-monitored primary or a Cluster
/// ([`RedisTopology`](crate::RedisTopology)); a configuration is one key, so in a
/// Cluster it lives in one hash slot.
///
/// ## Invalidation (so an edit is visible on every node within a second)
///
/// A background subscriber listens on two sources and emits [`Invalidation`]s:
///
/// - **pub/sub** on channel `<prefix>:invalidate`: the payload is a subject, or empty for "all".
///   [`RedisStore::put`], [`RedisStore::delete`] and [`RedisStore::publish_invalidation`] publish
///   there; tools that write Redis directly can `PUBLISH mcpgw:invalidate alice`.
/// - **keyspace notifications** for `<prefix>:user:*`, so a plain `SET mcpgw:user:alice ...` from
///   `redis-cli` also invalidates. Redis only sends them when the operator enables them:
///   `CONFIG SET notify-keyspace-events K$gx` (or `notify-keyspace-events K$gx` in `redis.conf`);
///   `K` = keyspace channel, `$` = string commands (`SET`), `g` = generic commands (`DEL`,
///   `RENAME`, `EXPIRE`), `x` = expirations (only needed when keys carry a TTL). At least `K$g` is
///   required; without it, use the helpers above or rely on the cache TTL. In a Cluster these
///   notifications stay on the node holding the key, and the subscriber listens on one node:
///   there, rely on the publications.
///
/// The subscriber reconnects with bounded exponential backoff and emits [`Invalidation::All`] every
/// time it (re)subscribes, because messages sent while it was disconnected are lost. It also pings
/// its connection periodically, so a silently dead connection is noticed.
///
/// ## Outages (book: docs/src/failure-modes.md)
///
/// No request waits on reconnection attempts. Pool waits, connection setup and responses have short
/// timeouts ([`RedisStoreConfig`]). When a load fails with an
/// [`Unavailable`](crate::StoreErrorKind::Unavailable) error (connection refused or lost, connect
/// or response timeout, pool wait timeout, Redis loading its dataset) the store marks itself **down**: later
/// loads fail at once with `Unavailable` (503 at the layer) while **one** background prober pings
/// Redis with bounded exponential backoff (default 50 ms doubling to 2 s). When a ping succeeds
/// the store is up again and emits [`Invalidation::All`]; a restarted Redis is picked up without
/// restarting the service. [`RedisStore::connect`] does not require Redis to be up: a gateway that
/// starts during an outage answers 503 until Redis is reachable (use
/// [`check`](UserConfigStore::check) for a strict start or a readiness probe).
///
/// ```no_run
/// use mcp_config_store::{CachedStore, RedisStore, RedisStoreConfig, ConfigStoreLayer};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = RedisStore::connect(RedisStoreConfig::new("redis://127.0.0.1:6379/")).await?;
/// let layer = ConfigStoreLayer::new(CachedStore::new(redis));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    shared: Arc<Shared>,
}

struct Shared {
    pool: RedisPool,
    config: RedisStoreConfig,
    key_prefix: String,
    channel: String,
    down: AtomicBool,
    tx: broadcast::Sender<Invalidation>,
    subscriber: Mutex<Option<AbortHandle>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let subscriber = self
            .subscriber
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(handle) = subscriber.take() {
            handle.abort();
        }
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("key_prefix", &self.shared.config.key_prefix)
            .field("down", &self.is_down())
            .finish()
    }
}

impl RedisStore {
    /// Builds the pool, starts the invalidation subscriber and pings Redis once.
    ///
    /// Must run inside a Tokio runtime. An unreachable Redis is not an error: the store starts
    /// "down" and recovers in the background.
    ///
    /// # Errors
    ///
    /// An invalid URL or key prefix, or a Redis that answers but rejects us (authentication,
    /// ACL): those are configuration mistakes that retrying will not fix.
    pub async fn connect(config: RedisStoreConfig) -> Result<Self, RedisStoreError> {
        let prefix = &config.key_prefix;
        if prefix.is_empty() || prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(RedisStoreError::InvalidPrefix(prefix.clone()));
        }
        let topology = RedisTopology::parse(&config.url)
            .map_err(|e| RedisStoreError::InvalidUrl(e.to_string()))?;
        let db = topology.db();
        let pool = topology
            .pool(&PoolSettings {
                max_size: config.pool_size,
                wait_timeout: config.pool_wait_timeout,
                connect_timeout: config.connect_timeout,
                response_timeout: config.response_timeout,
            })
            .map_err(|e| RedisStoreError::Pool(e.to_string()))?;

        let key_prefix = format!("{prefix}:user:");
        let channel = format!("{prefix}:invalidate");
        let keyspace_prefix = format!("__keyspace@{db}__:{key_prefix}");
        let subscription = Subscription {
            topology,
            keyspace_pattern: format!("{}*", glob_escape(&keyspace_prefix)),
            keyspace_prefix,
            channel: channel.clone(),
            tx: invalidation_channel(),
            config: config.clone(),
        };
        let tx = subscription.tx.clone();
        let shared = Arc::new(Shared {
            pool,
            config,
            key_prefix,
            channel,
            down: AtomicBool::new(false),
            tx,
            subscriber: Mutex::new(None),
        });
        let handle = tokio::spawn(subscription.run());
        *shared
            .subscriber
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(handle.abort_handle());

        let store = Self { shared };
        match store.shared.ping().await {
            Ok(()) => {}
            Err(e) if e.is_unavailable() => {
                tracing::warn!(error = %e, "Redis config store not reachable at startup; retrying in the background");
                store.shared.mark_down();
            }
            Err(e) => return Err(RedisStoreError::Rejected(e)),
        }
        Ok(store)
    }

    /// The key of `subject`'s configuration, `<prefix>:user:<subject>`.
    ///
    /// # Errors
    ///
    /// [`Other`](crate::StoreErrorKind::Other) for a subject that cannot be a key: empty, with
    /// control characters, or longer than [`RedisStoreConfig::max_subject_len`] bytes.
    pub fn key(&self, subject: &str) -> Result<String, StoreError> {
        self.shared.key(subject)
    }

    /// Whether the store is marked down (a background prober is waiting for Redis).
    pub fn is_down(&self) -> bool {
        self.shared.down.load(Ordering::Acquire)
    }

    /// The connection pool, for operations this type does not offer.
    pub fn pool(&self) -> &RedisPool {
        &self.shared.pool
    }

    /// Stores `subject`'s configuration and publishes an invalidation, atomically (`MULTI`). In a
    /// Cluster the `SET` and the `PUBLISH` are two commands (the client routes the channel name
    /// like a key, to another slot than the key's, and a transaction cannot span slots): the
    /// write itself is still one atomic command, and a failed publication is an error saying so.
    ///
    /// # Errors
    ///
    /// A key encoding error, or Redis failing.
    pub async fn put(&self, subject: &str, config: &UserConfig) -> Result<(), StoreError> {
        let key = self.key(subject)?;
        let mut write = redis::pipe();
        write.set(&key, config.to_json()).ignore();
        self.write_and_announce(write, subject).await
    }

    /// Deletes `subject`'s configuration and publishes an invalidation, atomically (`MULTI`; in a
    /// Cluster two commands, as for [`put`](Self::put)).
    ///
    /// # Errors
    ///
    /// A key encoding error, or Redis failing.
    pub async fn delete(&self, subject: &str) -> Result<(), StoreError> {
        let key = self.key(subject)?;
        let mut write = redis::pipe();
        write.del(&key).ignore();
        self.write_and_announce(write, subject).await
    }

    async fn write_and_announce(
        &self,
        mut write: redis::Pipeline,
        subject: &str,
    ) -> Result<(), StoreError> {
        if !self.shared.pool.is_cluster() {
            write
                .atomic()
                .publish(&self.shared.channel, subject)
                .ignore();
            return self.shared.run_pipeline(&write).await;
        }
        self.shared.run_pipeline(&write).await?;
        self.publish_invalidation(subject).await.map_err(|e| {
            StoreError::unavailable(format!(
                "written, but the invalidation was not published (other nodes see the change when their cache entry expires): {}",
                e.message()
            ))
        })
    }

    /// Tells every node's cache that `subject`'s configuration changed (after writing the key by
    /// other means).
    ///
    /// # Errors
    ///
    /// A key encoding error, or Redis failing.
    pub async fn publish_invalidation(&self, subject: &str) -> Result<(), StoreError> {
        self.key(subject)?;
        let mut pipe = redis::pipe();
        pipe.publish(&self.shared.channel, subject).ignore();
        self.shared.run_pipeline(&pipe).await
    }

    /// Tells every node's cache to drop every entry (empty payload on the channel).
    ///
    /// # Errors
    ///
    /// Redis failing.
    pub async fn publish_invalidate_all(&self) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.publish(&self.shared.channel, "").ignore();
        self.shared.run_pipeline(&pipe).await
    }
}

impl Shared {
    fn key(&self, subject: &str) -> Result<String, StoreError> {
        if subject.is_empty() {
            return Err(StoreError::other(
                "cannot encode an empty subject as a Redis key",
            ));
        }
        if subject.len() > self.config.max_subject_len {
            return Err(StoreError::other(format!(
                "cannot encode a subject of {} bytes as a Redis key (limit {})",
                subject.len(),
                self.config.max_subject_len
            )));
        }
        if subject.chars().any(char::is_control) {
            return Err(StoreError::other(
                "cannot encode a subject with control characters as a Redis key",
            ));
        }
        Ok(format!("{}{subject}", self.key_prefix))
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut conn = self.pool.get().await.map_err(classify_pool)?;
        redis::cmd("GET")
            .arg(key)
            .query_async::<Option<Vec<u8>>>(&mut conn)
            .await
            .map_err(classify)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.get().await.map_err(classify_pool)?;
        redis::cmd("PING")
            .query_async::<redis::Value>(&mut conn)
            .await
            .map(drop)
            .map_err(classify)
    }

    async fn run_pipeline(&self, pipe: &redis::Pipeline) -> Result<(), StoreError> {
        let mut conn = self.pool.get().await.map_err(classify_pool)?;
        pipe.query_async::<()>(&mut conn).await.map_err(classify)
    }

    /// Marks the store down and starts the single prober (only on the up -> down transition).
    fn mark_down(self: &Arc<Self>) {
        if self.down.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!(
            "Redis config store unreachable; answering 503 until a background probe succeeds"
        );
        tokio::spawn(probe(Arc::downgrade(self)));
    }
}

/// Pings with bounded exponential backoff until Redis answers, then marks the store up.
async fn probe(weak: Weak<Shared>) {
    let mut delay = match weak.upgrade() {
        Some(shared) => shared.config.probe_initial_backoff,
        None => return,
    };
    loop {
        tokio::time::sleep(delay).await;
        // Holding only a weak reference between attempts lets a dropped store end the prober.
        let Some(shared) = weak.upgrade() else { return };
        match shared.ping().await {
            Ok(()) => {
                shared.down.store(false, Ordering::Release);
                tracing::info!("Redis config store reachable again");
                // Changes made while we could not see them were not announced to us.
                let _ = shared.tx.send(Invalidation::All);
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, ?delay, "Redis config store still unreachable");
                delay = (delay * 2).min(shared.config.probe_max_backoff);
            }
        }
    }
}

impl UserConfigStore for RedisStore {
    fn load(&self, subject: Arc<str>) -> LoadFuture {
        let shared = self.shared.clone();
        Box::pin(async move {
            let key = shared.key(&subject)?;
            if shared.down.load(Ordering::Acquire) {
                return Err(StoreError::unavailable(
                    "Redis marked down after a connection failure; reconnecting in the background",
                ));
            }
            let bytes = match shared.get(&key).await {
                Ok(Some(bytes)) => bytes,
                Ok(None) => return Ok(None),
                Err(e) => {
                    if e.is_unavailable() {
                        shared.mark_down();
                    }
                    return Err(e);
                }
            };
            match UserConfig::from_json_slice(&bytes) {
                Ok(cfg) => {
                    log_warnings(&subject, &cfg);
                    Ok(Some(Arc::new(cfg)))
                }
                Err(e) => Err(StoreError::corrupt(format!("{key}: {e}"))),
            }
        })
    }

    fn invalidations(&self) -> broadcast::Receiver<Invalidation> {
        self.shared.tx.subscribe()
    }

    fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        let shared = self.shared.clone();
        Box::pin(async move {
            if shared.down.load(Ordering::Acquire) {
                return Err(StoreError::unavailable("Redis marked down; reconnecting"));
            }
            let result = shared.ping().await;
            if let Err(e) = &result
                && e.is_unavailable()
            {
                shared.mark_down();
            }
            result
        })
    }
}

/// Logs a freshly loaded configuration's warnings (overlapping backend names, ...).
fn log_warnings(subject: &str, cfg: &UserConfig) {
    for warning in cfg.warnings() {
        tracing::warn!(subject, warning = %warning, "user configuration warning");
    }
}

fn classify_pool(err: PoolError) -> StoreError {
    match err {
        PoolError::Timeout(kind) => {
            StoreError::unavailable(format!("Redis pool timeout ({kind:?})"))
        }
        PoolError::Backend(e) => classify(e),
        PoolError::Closed => StoreError::unavailable("Redis pool closed"),
        other => StoreError::other(other.to_string()),
    }
}

/// Connection-level and transient server failures are `Unavailable`; anything else (wrong type,
/// authentication, ACL) is `Other`.
fn classify(err: RedisError) -> StoreError {
    if is_transient(&err) {
        StoreError::unavailable(err.to_string())
    } else {
        StoreError::other(err.to_string())
    }
}

/// Whether a Redis error means "unreachable right now" rather than a problem with the request
/// (wrong type, authentication, ACL, unknown command). Everything a failover or a restart
/// produces is unreachable-right-now: a connection refused, reset, dropped or timed out; a
/// server still `LOADING` its data; `READONLY` from a primary demoted to replica (alone or
/// inside a transaction or pipeline); `MASTERDOWN`; `TRYAGAIN` and `CLUSTERDOWN` in a Cluster; no
/// primary known to the sentinels yet (the old one is down and none is promoted). Shared by every
/// Redis-backed store of the gateway, so they agree on when to answer 503.
pub fn is_transient(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || match err.kind() {
            ErrorKind::Server(kind) => transient_server_error(kind),
            ErrorKind::ClusterConnectionNotFound
            | ErrorKind::MasterNameNotFoundBySentinel
            | ErrorKind::NoValidReplicasFoundBySentinel => true,
            _ => false,
        }
        || err.clone().into_server_errors().is_some_and(|errors| {
            errors
                .iter()
                .any(|(_, e)| e.kind().is_some_and(transient_server_error))
        })
}

/// The server error codes a failover or a restart answers with.
fn transient_server_error(kind: ServerErrorKind) -> bool {
    matches!(
        kind,
        ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
    )
}

/// Whether a pool error means "unreachable right now" (wait timeout, closed pool, or a transient
/// Redis error while connecting).
pub fn is_transient_pool_error(err: &PoolError) -> bool {
    match err {
        PoolError::Timeout(_) | PoolError::Closed => true,
        PoolError::Backend(e) => is_transient(e),
        _ => false,
    }
}

/// Escapes Redis glob metacharacters so the prefix matches literally in `PSUBSCRIBE`.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Everything the subscriber task needs; it owns no reference to the store, which aborts it on drop.
struct Subscription {
    topology: RedisTopology,
    channel: String,
    keyspace_pattern: String,
    keyspace_prefix: String,
    tx: broadcast::Sender<Invalidation>,
    config: RedisStoreConfig,
}

impl Subscription {
    async fn run(self) {
        let mut delay = self.config.subscriber_initial_backoff;
        loop {
            let mut subscribed = false;
            let outcome = self.session(&mut subscribed).await;
            if subscribed {
                // It worked for a while: start the backoff over.
                delay = self.config.subscriber_initial_backoff;
            }
            match outcome {
                Ok(()) => tracing::warn!("Redis invalidation subscription closed; reconnecting"),
                Err(e) => {
                    tracing::debug!(error = %e, ?delay, "Redis invalidation subscription failed");
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.config.subscriber_max_backoff);
        }
    }

    /// One connection: subscribe, announce `All`, then forward messages until it breaks.
    async fn session(&self, subscribed: &mut bool) -> Result<(), StoreError> {
        let timeout = self.config.response_timeout;
        let pubsub = tokio::time::timeout(self.config.connect_timeout * 2, self.topology.pubsub())
            .await
            .map_err(|_| StoreError::unavailable("pub/sub connect timeout"))?
            .map_err(classify)?;
        let (mut sink, mut stream) = pubsub.split();
        // Keyspace pattern first, channel second: once a message on the channel arrives, both
        // subscriptions are in place (tests and operators can use a published probe as a
        // readiness signal).
        tokio::time::timeout(timeout, sink.psubscribe(&self.keyspace_pattern))
            .await
            .map_err(|_| StoreError::unavailable("PSUBSCRIBE timeout"))?
            .map_err(classify)?;
        tokio::time::timeout(timeout, sink.subscribe(&self.channel))
            .await
            .map_err(|_| StoreError::unavailable("SUBSCRIBE timeout"))?
            .map_err(classify)?;
        *subscribed = true;
        tracing::debug!(channel = %self.channel, "Redis invalidation subscription active");
        // Anything published before this point was not seen: drop every cached entry.
        let _ = self.tx.send(Invalidation::All);

        let mut ping = tokio::time::interval(self.config.subscriber_ping_interval);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping.tick().await; // the first tick is immediate
        loop {
            tokio::select! {
                msg = stream.next() => match msg {
                    Some(msg) => self.forward(&msg),
                    None => return Ok(()),
                },
                _ = ping.tick() => {
                    tokio::time::timeout(timeout, sink.ping::<redis::Value>())
                        .await
                        .map_err(|_| StoreError::unavailable("pub/sub PING timeout"))?
                        .map_err(classify)?;
                }
            }
        }
    }

    fn forward(&self, msg: &redis::Msg) {
        let channel: Vec<u8> = msg.get_channel().unwrap_or_default();
        let event = if channel == self.channel.as_bytes() {
            let payload = msg.get_payload_bytes();
            match std::str::from_utf8(payload) {
                Ok("") => Invalidation::All,
                Ok(subject) => Invalidation::Subject(Arc::from(subject)),
                // Not a subject we could have stored; be safe.
                Err(_) => Invalidation::All,
            }
        } else if let Some(rest) = channel.strip_prefix(self.keyspace_prefix.as_bytes()) {
            match std::str::from_utf8(rest) {
                Ok(subject) if !subject.is_empty() => Invalidation::Subject(Arc::from(subject)),
                _ => Invalidation::All,
            }
        } else {
            return;
        };
        tracing::debug!(?event, "Redis invalidation received");
        let _ = self.tx.send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_metacharacters_are_escaped() {
        assert_eq!(
            glob_escape("__keyspace@0__:a*b?:user:"),
            "__keyspace@0__:a\\*b\\?:user:"
        );
        assert_eq!(glob_escape("[x]\\"), "\\[x\\]\\\\");
    }

    #[test]
    fn config_debug_redacts_the_url() {
        let config = RedisStoreConfig::new("redis://:secret@host:6379/");
        assert!(!format!("{config:?}").contains("secret"));
    }

    #[test]
    fn errors_are_classified() {
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(classify(refused).is_unavailable());
        let wrong_type = RedisError::from((ErrorKind::UnexpectedReturnType, "wrong type"));
        assert_eq!(classify(wrong_type).kind(), crate::StoreErrorKind::Other);
        assert!(
            classify_pool(PoolError::Timeout(deadpool_redis::TimeoutType::Wait)).is_unavailable()
        );
    }

    #[test]
    fn every_failover_error_is_transient() {
        let reset = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        let no_master = RedisError::from((
            ErrorKind::MasterNameNotFoundBySentinel,
            "Master with given name not found in sentinel",
        ));
        assert!(is_transient(&reset));
        assert!(is_transient(&no_master));
        for code in [
            "READONLY",
            "LOADING",
            "MASTERDOWN",
            "TRYAGAIN",
            "CLUSTERDOWN",
        ] {
            let err = parsed_error(&format!("-{code} failing over\r\n"));
            assert!(is_transient(&err), "{code}: {err}");
        }
        for code in ["WRONGTYPE", "NOPERM", "ERR"] {
            let err = parsed_error(&format!("-{code} no\r\n"));
            assert!(!is_transient(&err), "{code}: {err}");
        }
    }

    /// The error a server's reply `wire` parses to.
    fn parsed_error(wire: &str) -> RedisError {
        match redis::parse_redis_value(wire.as_bytes()).and_then(|v| v.extract_error()) {
            Err(e) => e,
            Ok(v) => panic!("{wire:?} parsed to {v:?}"),
        }
    }
}
