//! The Redis half of hot reload (feature `redis`): [`RedisSource`],
//! [`RuntimeBuilder::load_redis`](crate::RuntimeBuilder::load_redis) and
//! [`PluginRuntime::watch_redis`].

use std::time::Duration;

use deadpool_redis::redis;
use mcp_config_store::{PoolSettings, RedisPool, RedisTopology};

use super::ReloadHandle;
use crate::{ConfigError, Format, PluginRuntime};

/// Longest wait for Redis (connect, pool, one GET): a hung server must not stall the poller.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

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

impl PluginRuntime {
    /// Polls a Redis key and applies its document when the text changed (see
    /// [`ReloadHandle`](crate::ReloadHandle)). Needs a tokio runtime.
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
