//! `tool_filter`: operator-level allow and deny lists of upstream tool names.
//!
//! ```toml
//! [[plugins]]
//! name = "notes-read-only"
//! kind = "tool_filter"
//! conditions = { virtual_hosts = ["team-*"], backends = ["notes"] }
//! config = { allow = ["list_*", "search"], deny = ["*admin*"], code = -32600 }
//! ```
//!
//! A tool is allowed when it matches `allow` (every tool when `allow` is absent) and does not match
//! `deny`. A call to another tool is denied with `Tool not allowed: <public name>`, and in `enforce`
//! mode the tool is left out of `tools/list`, so it is not advertised. This is on top of a
//! backend's own `allowed_tools` in the user configuration, which the router enforces itself.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::pattern::any_matches;
use crate::{ConfigError, Hook, HookSet, Pattern, Plugin, PluginConfig, PluginContext, Verdict};

/// The kind name.
pub const KIND: &str = "tool_filter";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    allow: Option<Vec<Pattern>>,
    #[serde(default)]
    deny: Vec<Pattern>,
    #[serde(default = "super::default_deny_code")]
    code: i64,
}

/// The `tool_filter` plugin.
#[derive(Debug)]
pub struct ToolFilter {
    allow: Option<Vec<Pattern>>,
    deny: Vec<Pattern>,
    code: i64,
}

impl ToolFilter {
    /// Builds the plugin from its `config` table.
    pub fn from_config(config: &PluginConfig<'_>) -> Result<Self, ConfigError> {
        let c: Config = config.parse()?;
        if c.allow.is_none() && c.deny.is_empty() {
            return Err(config.error("set `allow`, `deny` or both"));
        }
        Ok(Self {
            allow: c.allow,
            deny: c.deny,
            code: c.code,
        })
    }

    /// Whether the upstream tool `name` is allowed.
    pub fn allows(&self, name: &str) -> bool {
        self.allow.as_deref().is_none_or(|a| any_matches(a, name)) && !any_matches(&self.deny, name)
    }
}

impl Plugin for ToolFilter {
    fn hooks(&self) -> HookSet {
        HookSet::only(Hook::ToolPreInvoke)
    }

    fn call<'a>(&'a self, ctx: &'a PluginContext<'a>, _: Option<&'a RawValue>) -> Verdict<'a> {
        if self.allows(ctx.name) {
            Verdict::allow()
        } else {
            Verdict::deny(mcp_core::ErrorObject::new(
                self.code,
                format!("Tool not allowed: {}", ctx.public_name),
            ))
        }
    }

    fn listed(&self, ctx: &PluginContext<'_>) -> bool {
        self.allows(ctx.name)
    }

    fn filters_lists(&self) -> bool {
        true
    }
}
