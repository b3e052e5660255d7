//! Hot reload: [`PluginRuntime::watch_file`] polls a file, [`PluginRuntime::watch_redis`] polls a
//! Redis key. Both apply a changed document through [`PluginRuntime::apply_str`], so a valid one is
//! swapped in atomically and an invalid one fails closed (or keeps the last good chain).
//!
//! Polling is deliberate: it needs no platform file-notification API, works on network and
//! container-mounted files, survives editors that replace files by renaming, and for Redis needs no
//! long-lived subscriber connection or keyspace-notification setup. A change is seen within one
//! interval. A file is first compared by modification time and length, and only read when those
//! changed (or while it was modified less than two seconds ago, since a same-length rewrite within
//! the file system's timestamp granularity changes neither); the text is then compared with the
//! last document applied, so rewriting the same text applies nothing. Write the file atomically
//! (write a temp file, then rename over it): a half-written file is an invalid document.
//!
//! What counts as an invalid reload: a document that fails validation, a file that is missing or
//! unreadable, a Redis key that is missing. An unreachable Redis is *not*: the current chain stays
//! and the poller retries (the document did not change, the store is down).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use deadpool_redis::redis;
use mcp_config_store::{PoolSettings, RedisPool, RedisTopology};
use tokio::task::JoinHandle;

use crate::{ConfigError, Format, PluginRuntime};

/// Longest wait for Redis (connect, pool, one GET): a hung server must not stall the poller.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// A running watcher; dropping it stops the watching.
#[derive(Debug)]
#[must_use = "dropping the handle stops the watcher"]
pub struct ReloadHandle {
    task: JoinHandle<()>,
}

impl Drop for ReloadHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where [`PluginRuntime::watch_redis`] reads the document: a string key holding TOML or JSON
/// (sniffed: JSON when it starts with `{`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RedisSource {
    /// Server URL, e.g. `redis://127.0.0.1:6379`, or a Sentinel or Cluster URL
    /// ([`RedisTopology`]: `redis+sentinel://…`, `redis+cluster://…`).
    pub url: String,
    /// The key, e.g. `mcpgw:plugins`.
    pub key: String,
    /// How often the key is read.
    pub poll_interval: Duration,
}

impl RedisSource {
    /// Key `key` on the server at `url`, read every second.
    pub fn new(url: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            key: key.into(),
            poll_interval: Duration::from_secs(1),
        }
    }

    /// Sets the poll interval.
    #[must_use]
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    fn pool(&self) -> Result<RedisPool, ConfigError> {
        RedisTopology::parse(&self.url)
            .and_then(|topology| {
                topology.pool(&PoolSettings::new(
                    1,
                    REDIS_TIMEOUT,
                    REDIS_TIMEOUT,
                    REDIS_TIMEOUT,
                ))
            })
            .map_err(|e| {
                ConfigError::new("", format!("invalid Redis URL: {e}")).with_source(self.source())
            })
    }

    fn source(&self) -> String {
        format!("redis key {}", self.key)
    }

    /// `Ok(None)`: the key does not exist. `Err`: Redis could not be asked.
    async fn read(&self, pool: &RedisPool) -> Result<Option<String>, String> {
        let read = async {
            let mut conn = pool.get().await.map_err(|e| e.to_string())?;
            redis::cmd("GET")
                .arg(&self.key)
                .query_async::<Option<String>>(&mut conn)
                .await
                .map_err(|e| e.to_string())
        };
        tokio::time::timeout(REDIS_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| Err("timed out".to_owned()))
    }
}

impl crate::RuntimeBuilder {
    /// Starts from the document in a Redis key. A missing key, an unreachable server or an invalid
    /// document is an error (the gateway refuses to start).
    pub async fn load_redis(self, source: &RedisSource) -> Result<PluginRuntime, ConfigError> {
        let pool = source.pool()?;
        match source.read(&pool).await {
            Ok(Some(text)) => self.load_str(&text, Format::sniff(&text), &source.source()),
            Ok(None) => Err(missing_key(source)),
            Err(e) => {
                Err(ConfigError::new("", format!("cannot read: {e}")).with_source(source.source()))
            }
        }
    }
}

fn missing_key(source: &RedisSource) -> ConfigError {
    ConfigError::new("", "key not found").with_source(source.source())
}

/// How long after its modification a file is read on every poll (see `watch_file`).
const RACY_WINDOW: Duration = Duration::from_secs(2);

fn is_fresh(modified: SystemTime) -> bool {
    SystemTime::now()
        .duration_since(modified)
        .map_or(true, |age| age < RACY_WINDOW)
}

impl PluginRuntime {
    /// Polls `path` every `interval` and applies it when its text changed (see the
    /// [module docs](crate::reload)). Needs a tokio runtime.
    pub fn watch_file(&self, path: impl Into<PathBuf>, interval: Duration) -> ReloadHandle {
        let runtime = self.clone();
        let path = path.into();
        let task = tokio::spawn(async move {
            let mut last: Option<(SystemTime, u64)> = None;
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let source = path.display().to_string();
                let stamp = tokio::fs::metadata(&path)
                    .await
                    .and_then(|m| Ok((m.modified()?, m.len())));
                match stamp {
                    // Unchanged metadata proves nothing while the file is fresh: a same-length
                    // rewrite within the file system's timestamp granularity keeps both.
                    Ok(stamp) if last == Some(stamp) && !is_fresh(stamp.0) => continue,
                    Ok(stamp) => last = Some(stamp),
                    Err(e) => {
                        last = None;
                        runtime.forget_text();
                        if runtime.state().error().is_none() {
                            runtime.apply_failure(
                                &ConfigError::new("", format!("cannot read: {e}"))
                                    .with_source(source),
                            );
                        }
                        continue;
                    }
                }
                match tokio::fs::read_to_string(&path).await {
                    Ok(text) if runtime.is_new(&text) => {
                        // The error is logged and recorded in the runtime state.
                        let _ = runtime.apply_str(&text, Format::from_path(&path), &source);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        runtime.forget_text();
                        runtime.apply_failure(
                            &ConfigError::new("", format!("cannot read: {e}")).with_source(source),
                        );
                    }
                }
            }
        });
        ReloadHandle { task }
    }

    /// Polls a Redis key and applies its document when the text changed (see the
    /// [module docs](crate::reload)). Needs a tokio runtime.
    pub fn watch_redis(&self, source: RedisSource) -> Result<ReloadHandle, ConfigError> {
        let pool = source.pool()?;
        let runtime = self.clone();
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(source.poll_interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut reachable = true;
            loop {
                ticker.tick().await;
                match source.read(&pool).await {
                    Ok(Some(text)) => {
                        reachable = true;
                        if runtime.is_new(&text) {
                            let _ =
                                runtime.apply_str(&text, Format::sniff(&text), &source.source());
                        }
                    }
                    Ok(None) => {
                        reachable = true;
                        runtime.forget_text();
                        if runtime.state().error().is_none() {
                            runtime.apply_failure(&missing_key(&source));
                        }
                    }
                    Err(e) => {
                        if reachable {
                            tracing::warn!(key = %source.key, error = %e, "plugin configuration: Redis unreachable; keeping the current chain");
                        }
                        reachable = false;
                    }
                }
            }
        });
        Ok(ReloadHandle { task })
    }
}
