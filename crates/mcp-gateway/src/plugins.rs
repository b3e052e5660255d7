//! `[plugins]`: the plugin runtime the router runs around routed calls (`mcp-plugins`, book: docs/src/plugins.md).
//!
//! The document (the file `plugins.config`, or the Redis key `plugins.redis_key` on
//! `plugins.redis_url`) is loaded before anything listens: an invalid or missing one is a
//! configuration error (the binary exits with 2, the message names the document and the field
//! path). Then it is polled every `plugins.reload_interval_ms` (a file's modification time and
//! content hash; the key's text; an unreachable Redis keeps the current chain): a valid change swaps the chain atomically (calls in flight finish on the old
//! one); an invalid change marks the runtime failed, so plugin-governed calls get an internal
//! error and `/readyz` turns unready until a valid document is written (fail closed, book: docs/src/failure-modes.md),
//! unless `plugins.keep_last_good` keeps the previous chain.

use std::sync::Arc;

use mcp_plugins::{PluginRuntime, RedisSource, ReloadHandle};
use serde_json::json;

use crate::GatewayError;
use crate::config::{ConfigError, GatewayConfig, PluginSource};

/// Checks the plugin document, if one is configured (for `check-config`).
pub(crate) async fn check(config: &GatewayConfig) -> Result<(), ConfigError> {
    match &config.plugins.source {
        Some(source) => open(config, source).await.map(drop),
        None => Ok(()),
    }
}

async fn open(config: &GatewayConfig, source: &PluginSource) -> Result<PluginRuntime, ConfigError> {
    let builder = PluginRuntime::builder().keep_last_good(config.plugins.keep_last_good);
    match source {
        PluginSource::File(path) => builder
            .load_file(path)
            .map_err(|e| config.problem("plugins.config", e.to_string())),
        PluginSource::Redis { .. } => builder
            .load_redis(&redis_source(config, source))
            .await
            .map_err(|e| config.problem("plugins.redis_key", e.to_string())),
    }
}

fn redis_source(config: &GatewayConfig, source: &PluginSource) -> RedisSource {
    let (url, key) = match source {
        PluginSource::Redis { url, key } => (url.as_str(), key.as_str()),
        PluginSource::File(_) => ("", ""),
    };
    RedisSource::new(url, key).poll_interval(config.plugins.reload_interval)
}

/// The loaded runtime and its file watcher (dropping it stops the watch).
pub(crate) struct Plugins {
    pub(crate) runtime: Arc<PluginRuntime>,
    _watch: ReloadHandle,
}

impl Plugins {
    /// Loads the plugin document and starts watching it; `None` when none is configured. Must run
    /// inside a Tokio runtime.
    pub(crate) async fn load(config: &GatewayConfig) -> Result<Option<Self>, GatewayError> {
        let Some(source) = &config.plugins.source else {
            return Ok(None);
        };
        let runtime = open(config, source).await?;
        let watch = match source {
            PluginSource::File(path) => {
                runtime.watch_file(path.clone(), config.plugins.reload_interval)
            }
            PluginSource::Redis { .. } => runtime
                .watch_redis(redis_source(config, source))
                .map_err(|e| config.problem("plugins.redis_url", e.to_string()))?,
        };
        tracing::info!(
            source = ?source,
            plugins = runtime.load().map(|chain| chain.len()).unwrap_or_default(),
            "plugins loaded"
        );
        Ok(Some(Self {
            runtime: Arc::new(runtime),
            _watch: watch,
        }))
    }

    /// Readiness: whether the last document applied, and the `/readyz` detail.
    pub(crate) fn readiness(&self) -> (bool, serde_json::Value) {
        let state = self.runtime.state();
        let name = match (state.is_ready(), state.error()) {
            (true, None) => "ready",
            (true, Some(_)) => "kept_last_good",
            (false, _) => "failed",
        };
        let detail = json!({
            "state": name,
            "generation": self.runtime.generation(),
            "error": state.error(),
        });
        (state.is_ready(), detail)
    }
}
