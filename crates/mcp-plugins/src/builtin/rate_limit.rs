//! `rate_limit`: token buckets per principal, per tool, or per principal and tool.
//!
//! ```toml
//! [[plugins]]
//! name = "per-user"
//! kind = "rate_limit"
//! config = { limit = 60, window_s = 60, per = "principal" }   # per: principal | tool | principal_tool
//! ```
//!
//! Each key owns a token bucket of `limit` tokens refilled at `limit / window_s` per second (GCRA,
//! one timestamp per key): a burst of `limit` calls passes, and an idle key is full again after
//! `window_s`. `tool` keys are (virtual host, backend, upstream name); a call without a principal
//! counts as the anonymous principal. A refused call gets the JSON-RPC error [`RATE_LIMITED`]
//! (`code` overrides it) with message `Rate limit exceeded; retry in N s` and data
//! `{"retryAfterSeconds": N}` (whole seconds, rounded up).
//!
//! Buckets live in this process (sharded maps, no global lock; at most `max_keys` keys, default
//! 100000, beyond which full buckets are forgotten) and start over when a new document is applied.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::{ConfigError, HookSet, Plugin, PluginConfig, PluginContext, Verdict};

/// The kind name.
pub const KIND: &str = "rate_limit";

/// The default JSON-RPC error code of a refused call: -32000, the first implementation-defined
/// server error code (neither JSON-RPC nor MCP defines one for rate limiting).
pub const RATE_LIMITED: i64 = -32000;

const SHARDS: usize = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Per {
    #[default]
    Principal,
    Tool,
    PrincipalTool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    limit: u32,
    window_s: u64,
    #[serde(default)]
    per: Per,
    #[serde(default = "default_code")]
    code: i64,
    #[serde(default = "default_max_keys")]
    max_keys: usize,
}

fn default_code() -> i64 {
    RATE_LIMITED
}

fn default_max_keys() -> usize {
    100_000
}

/// The `rate_limit` plugin.
#[derive(Debug)]
pub struct RateLimit {
    per: Per,
    code: i64,
    /// Time between tokens.
    interval: Duration,
    /// How far ahead of now a key's theoretical arrival time may run (the burst).
    tolerance: Duration,
    max_keys_per_shard: usize,
    hasher: RandomState,
    epoch: Instant,
    /// Key hash -> theoretical arrival time (nanoseconds since `epoch`).
    shards: [Mutex<HashMap<u64, u64>>; SHARDS],
}

impl RateLimit {
    /// Builds the plugin from its `config` table.
    pub fn from_config(config: &PluginConfig<'_>) -> Result<Self, ConfigError> {
        let c: Config = config.parse()?;
        if c.limit == 0 {
            return Err(config.error_at("limit", "must be at least 1"));
        }
        if c.window_s == 0 {
            return Err(config.error_at("window_s", "must be at least 1"));
        }
        if c.max_keys == 0 {
            return Err(config.error_at("max_keys", "must be at least 1"));
        }
        let window = Duration::from_secs(c.window_s);
        let interval = window / c.limit;
        Ok(Self {
            per: c.per,
            code: c.code,
            interval,
            tolerance: window.saturating_sub(interval),
            max_keys_per_shard: c.max_keys.div_ceil(SHARDS),
            hasher: RandomState::new(),
            epoch: Instant::now(),
            shards: Default::default(),
        })
    }

    /// Hashes the key without building it (keyed SipHash: callers cannot aim at collisions).
    fn key(&self, ctx: &PluginContext<'_>) -> u64 {
        let mut h = self.hasher.build_hasher();
        if matches!(self.per, Per::Principal | Per::PrincipalTool) {
            match ctx.principal {
                Some(p) => (p.issuer(), p.subject()).hash(&mut h),
                None => 0u8.hash(&mut h),
            }
        }
        if matches!(self.per, Per::Tool | Per::PrincipalTool) {
            (ctx.virtual_host, ctx.backend, ctx.name).hash(&mut h);
        }
        h.finish()
    }

    /// Takes a token for `key`, or tells how long until one is available.
    fn take(&self, key: u64) -> Result<(), Duration> {
        let now = nanos(self.epoch.elapsed());
        let interval = nanos(self.interval);
        let tolerance = nanos(self.tolerance);
        let shard = &self.shards[(key as usize) % SHARDS];
        // A poisoned shard only means another call panicked mid-update of plain integers.
        let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
        let tat = map.get(&key).copied().unwrap_or(now).max(now);
        if tat - now > tolerance {
            return Err(Duration::from_nanos(tat - now - tolerance));
        }
        if map.len() >= self.max_keys_per_shard && !map.contains_key(&key) {
            // Keys whose arrival time has passed hold a full bucket: forgetting them changes nothing.
            map.retain(|_, t| *t > now);
        }
        map.insert(key, tat + interval);
        Ok(())
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Plugin for RateLimit {
    fn hooks(&self) -> HookSet {
        HookSet::PRE
    }

    fn call<'a>(&'a self, ctx: &'a PluginContext<'a>, _: Option<&'a RawValue>) -> Verdict<'a> {
        match self.take(self.key(ctx)) {
            Ok(()) => Verdict::allow(),
            Err(wait) => {
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Verdict::deny(
                    mcp_core::ErrorObject::new(
                        self.code,
                        format!("Rate limit exceeded; retry in {seconds} s"),
                    )
                    .with_data(&serde_json::json!({ "retryAfterSeconds": seconds })),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Decision, Hook};
    use mcp_core::Principal;

    fn decide(plugin: &RateLimit, ctx: &PluginContext<'_>) -> Decision {
        match plugin.call(ctx, None) {
            Verdict::Ready(r) => r.expect("no plugin error"),
            Verdict::Later(_) => panic!("decides at once"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn refuses_after_the_burst_and_recovers_after_the_window() {
        let config = serde_json::json!({"limit": 3, "window_s": 30, "per": "principal"});
        let plugin =
            RateLimit::from_config(&PluginConfig::new("rl", Some(&config))).expect("valid");
        let alice = Principal::new("iss", "alice");
        let bob = Principal::new("iss", "bob");
        let ctx =
            PluginContext::new(Hook::ToolPreInvoke, "vh", "b", "echo").with_principal(Some(&alice));
        for _ in 0..3 {
            assert!(matches!(decide(&plugin, &ctx), Decision::Allow));
        }
        match decide(&plugin, &ctx) {
            Decision::Deny(e) => {
                assert_eq!(e.code, RATE_LIMITED);
                assert_eq!(e.message, "Rate limit exceeded; retry in 10 s");
                assert_eq!(
                    e.data.as_deref().map(RawValue::get),
                    Some(r#"{"retryAfterSeconds":10}"#)
                );
            }
            other => panic!("{other:?}"),
        }
        // Another principal has its own bucket.
        let other =
            PluginContext::new(Hook::ToolPreInvoke, "vh", "b", "echo").with_principal(Some(&bob));
        assert!(matches!(decide(&plugin, &other), Decision::Allow));
        // One token back after window / limit, the whole burst after the window.
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(matches!(decide(&plugin, &ctx), Decision::Allow));
        assert!(matches!(decide(&plugin, &ctx), Decision::Deny(_)));
        tokio::time::advance(Duration::from_secs(30)).await;
        for _ in 0..3 {
            assert!(matches!(decide(&plugin, &ctx), Decision::Allow));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn per_tool_keys_and_key_eviction() {
        let config = serde_json::json!({"limit": 1, "window_s": 60, "per": "tool", "max_keys": 16});
        let plugin =
            RateLimit::from_config(&PluginConfig::new("rl", Some(&config))).expect("valid");
        let a = PluginContext::new(Hook::ToolPreInvoke, "vh", "b", "a");
        let b = PluginContext::new(Hook::ToolPreInvoke, "vh", "b", "b");
        assert!(matches!(decide(&plugin, &a), Decision::Allow));
        assert!(matches!(decide(&plugin, &a), Decision::Deny(_)));
        assert!(matches!(decide(&plugin, &b), Decision::Allow));
        // One key per shard at most: a full shard forgets keys whose bucket refilled.
        let config = serde_json::json!({"limit": 1, "window_s": 1, "per": "tool", "max_keys": 16});
        let plugin =
            RateLimit::from_config(&PluginConfig::new("rl", Some(&config))).expect("valid");
        let names: Vec<String> = (0..200).map(|i| format!("t{i}")).collect();
        for name in &names {
            let ctx = PluginContext::new(Hook::ToolPreInvoke, "vh", "b", name);
            assert!(matches!(decide(&plugin, &ctx), Decision::Allow));
            tokio::time::advance(Duration::from_secs(2)).await;
        }
        let held: usize = plugin
            .shards
            .iter()
            .map(|s| s.lock().expect("lock").len())
            .sum();
        assert!(
            held <= SHARDS,
            "refilled keys are forgotten when a shard is full ({held} held)"
        );
    }
}
