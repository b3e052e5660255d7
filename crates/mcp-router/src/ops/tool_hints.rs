//! The `readOnlyHint`/`idempotentHint` annotations of the tools the router has listed, so a
//! routed `tools/call` knows whether it may be replayed on a replica (book: docs/src/architecture.md).

use mcp_fallback::ToolHints;

use crate::upstream::{CredentialScope, ScopedTable, Target, Upstream};

/// Each principal keeps at most this many tools' hints.
const PER_PRINCIPAL: usize = 4096;
/// Hints of tools nobody called or listed for this long may make room in a full table.
const IDLE: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// Tool annotations per (credential scope of the backend's primary address, upstream tool name),
/// learnt from `tools/list` answers: what one caller's backend said never decides whether
/// another caller's call is replayed. Bounded per principal: a caller over its share forgets its
/// own oldest hints (a forgotten tool is only replayed when it provably never reached the
/// primary, the safe default), and a full table learns nothing new.
#[derive(Debug)]
pub(crate) struct ToolHintsTable {
    hints: ScopedTable<(CredentialScope, String), ToolHints>,
}

impl ToolHintsTable {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            hints: ScopedTable::new(PER_PRINCIPAL.min(max), max, IDLE),
        }
    }

    fn key(target: &Target<'_>, tool: &str) -> Option<(CredentialScope, String)> {
        target.config.url.as_ref()?;
        Some((Upstream::primary_scope(target), tool.to_owned()))
    }

    /// Remembers what a backend's `tools/list` said about a tool.
    pub(crate) fn remember(&self, target: &Target<'_>, tool: &str, hints: ToolHints) {
        let Some(key) = Self::key(target, tool) else {
            return;
        };
        let _ = self.hints.upsert(&key, target.principal, hints);
    }

    /// What is known about a tool (nothing known: not replayable).
    pub(crate) fn get(&self, target: &Target<'_>, tool: &str) -> ToolHints {
        Self::key(target, tool)
            .and_then(|key| self.hints.get(&key))
            .unwrap_or(ToolHints::NONE)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;
    use mcp_config_store::BackendConfig;
    use mcp_core::Principal;
    use serde_json::value::RawValue;

    use super::*;

    fn target<'a>(
        config: &'a BackendConfig,
        principal: &'a Principal,
        headers: &'a HeaderMap,
        caps: &'a RawValue,
    ) -> Target<'a> {
        Target {
            name: "b",
            config,
            downstream: headers,
            principal,
            client_caps: caps,
            meta: None,
            era: mcp_core::Era::Modern,
        }
    }

    #[test]
    fn hints_are_per_caller_and_bounded_per_caller() {
        let config: BackendConfig =
            serde_json::from_str(r#"{"url":"http://b/mcp"}"#).expect("config");
        let headers = HeaderMap::new();
        let caps = RawValue::from_string("{}".into()).expect("raw");
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        let table = ToolHintsTable::new(2);
        let mut ro = ToolHints::NONE;
        ro.read_only = true;
        let as_alice = target(&config, &alice, &headers, &caps);
        let as_bob = target(&config, &bob, &headers, &caps);
        table.remember(&as_bob, "read", ro);
        table.remember(&as_alice, "read", ro);
        assert_eq!(table.get(&as_alice, "read"), ro);
        assert_eq!(table.get(&as_alice, "write"), ToolHints::NONE);
        // Alice fills the table: she forgets her own oldest, Bob keeps his.
        table.remember(&as_alice, "a", ro);
        table.remember(&as_alice, "b", ro);
        assert_eq!(table.get(&as_alice, "read"), ToolHints::NONE);
        assert_eq!(table.get(&as_bob, "read"), ro);
    }
}
