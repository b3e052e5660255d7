//! The `readOnlyHint`/`idempotentHint` annotations of the tools the router has listed, so a
//! routed `tools/call` knows whether it may be replayed on a replica (DESIGN §6.6).

use std::collections::HashMap;
use std::sync::Mutex;

use mcp_config_store::BackendConfig;
use mcp_fallback::ToolHints;

/// Tool annotations per (backend URL, upstream tool name), learnt from `tools/list` answers.
/// Bounded: when full it starts over (a forgotten tool is only replayed when it provably never
/// reached the primary, the safe default).
#[derive(Debug)]
pub(crate) struct ToolHintsTable {
    hints: Mutex<HashMap<(String, String), ToolHints>>,
    max: usize,
}

impl ToolHintsTable {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            hints: Mutex::new(HashMap::new()),
            max,
        }
    }

    fn key(config: &BackendConfig, tool: &str) -> Option<(String, String)> {
        Some((config.url.as_ref()?.as_str().to_owned(), tool.to_owned()))
    }

    /// Remembers what a backend's `tools/list` said about a tool.
    pub(crate) fn remember(&self, config: &BackendConfig, tool: &str, hints: ToolHints) {
        let Some(key) = Self::key(config, tool) else {
            return;
        };
        let mut table = self.hints.lock().unwrap_or_else(|p| p.into_inner());
        if table.len() >= self.max && !table.contains_key(&key) {
            table.clear();
        }
        table.insert(key, hints);
    }

    /// What is known about a tool (nothing known: not replayable).
    pub(crate) fn get(&self, config: &BackendConfig, tool: &str) -> ToolHints {
        let Some(key) = Self::key(config, tool) else {
            return ToolHints::NONE;
        };
        let table = self.hints.lock().unwrap_or_else(|p| p.into_inner());
        table.get(&key).copied().unwrap_or(ToolHints::NONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_per_url_and_tool_and_stays_bounded() {
        let config: BackendConfig =
            serde_json::from_str(r#"{"url":"http://127.0.0.1:1/mcp"}"#).expect("config");
        let table = ToolHintsTable::new(2);
        let ro = ToolHints {
            read_only: true,
            idempotent: false,
        };
        table.remember(&config, "read", ro);
        assert_eq!(table.get(&config, "read"), ro);
        assert_eq!(table.get(&config, "write"), ToolHints::NONE);
        table.remember(&config, "b", ro);
        table.remember(&config, "c", ro);
        assert_eq!(
            table.get(&config, "read"),
            ToolHints::NONE,
            "a full table starts over"
        );
        assert_eq!(table.get(&config, "c"), ro);
    }
}
