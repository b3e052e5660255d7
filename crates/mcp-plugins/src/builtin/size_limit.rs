//! `size_limit`: denies arguments or results larger than a byte limit (of their JSON text).
//!
//! ```toml
//! [[plugins]]
//! name = "sizes"
//! kind = "size_limit"
//! config = { max_argument_bytes = 65536, max_result_bytes = 1048576 }
//! ```
//!
//! With only `max_argument_bytes` the kind supports the pre hooks, with only `max_result_bytes`
//! the post hooks. Messages: `Arguments too large: N bytes (limit M)`, `Result too large: …`.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::{ConfigError, HookSet, Plugin, PluginConfig, PluginContext, Verdict};

/// The kind name.
pub const KIND: &str = "size_limit";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    max_argument_bytes: Option<usize>,
    max_result_bytes: Option<usize>,
    #[serde(default = "super::default_deny_code")]
    code: i64,
}

/// The `size_limit` plugin.
#[derive(Debug)]
pub struct SizeLimit {
    max_arguments: Option<usize>,
    max_result: Option<usize>,
    code: i64,
}

impl SizeLimit {
    /// Builds the plugin from its `config` table.
    pub fn from_config(config: &PluginConfig<'_>) -> Result<Self, ConfigError> {
        let c: Config = config.parse()?;
        if c.max_argument_bytes.is_none() && c.max_result_bytes.is_none() {
            return Err(config.error("set `max_argument_bytes`, `max_result_bytes` or both"));
        }
        for (key, value) in [
            ("max_argument_bytes", c.max_argument_bytes),
            ("max_result_bytes", c.max_result_bytes),
        ] {
            if value == Some(0) {
                return Err(config.error_at(key, "must be at least 1"));
            }
        }
        Ok(Self {
            max_arguments: c.max_argument_bytes,
            max_result: c.max_result_bytes,
            code: c.code,
        })
    }
}

impl Plugin for SizeLimit {
    fn hooks(&self) -> HookSet {
        match (self.max_arguments, self.max_result) {
            (Some(_), Some(_)) => HookSet::ALL,
            (Some(_), None) => HookSet::PRE,
            _ => HookSet::POST,
        }
    }

    fn call<'a>(
        &'a self,
        ctx: &'a PluginContext<'a>,
        payload: Option<&'a RawValue>,
    ) -> Verdict<'a> {
        let (limit, what) = if ctx.hook.is_pre() {
            (self.max_arguments, "Arguments")
        } else {
            (self.max_result, "Result")
        };
        match (limit, payload) {
            (Some(limit), Some(payload)) if payload.get().len() > limit => {
                Verdict::deny(mcp_core::ErrorObject::new(
                    self.code,
                    format!(
                        "{what} too large: {} bytes (limit {limit})",
                        payload.get().len()
                    ),
                ))
            }
            _ => Verdict::allow(),
        }
    }
}
