//! The `readOnlyHint`/`idempotentHint` annotations of the tools the router has listed, so a
//! routed `tools/call` knows whether it may be replayed on a replica (book: docs/src/architecture.md).

use mcp_fallback::ToolHints;

use crate::upstream::{CredentialScope, ScopedTable, Target};

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
            hints: ScopedTable::new("tool_hints", PER_PRINCIPAL.min(max), max, IDLE),
        }
    }

    /// The budget the hints draw from.
    pub(crate) fn budget(&self) -> &mcp_core::Budget {
        self.hints.budget()
    }

    /// The scope `target`'s tool hints are kept under; `None` when hints would decide nothing:
    /// a backend without replicas is never replayed anywhere, so its lists remember nothing and
    /// its calls skip the lookup (and the scope digest it takes).
    pub(crate) fn scope_of(target: &Target<'_>) -> Option<CredentialScope> {
        (target.config.url.is_some() && !target.config.replicas.is_empty())
            .then(|| target.primary_scope().clone())
    }

    /// Remembers what a backend's `tools/list` said about a tool, under the backend's
    /// [`scope_of`](Self::scope_of).
    pub(crate) fn remember(&self, scope: &CredentialScope, tool: &str, hints: ToolHints) {
        let _ = self
            .hints
            .upsert(&(scope.clone(), tool.to_owned()), &scope.principal, hints);
    }

    /// What is known about a tool (nothing known: not replayable).
    pub(crate) fn get(&self, target: &Target<'_>, tool: &str) -> ToolHints {
        Self::scope_of(target)
            .and_then(|scope| self.hints.get(&(scope, tool.to_owned())))
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
        Target::new(
            "b",
            config,
            headers,
            principal,
            caps,
            None,
            mcp_core::Era::Modern,
        )
    }

    const REPLICATED: &str = r#"{"url":"http://b/mcp","replicas":["http://c/mcp"]}"#;

    fn config(json: &str) -> BackendConfig {
        serde_json::from_str(json).expect("config")
    }

    fn read_only() -> ToolHints {
        let mut ro = ToolHints::NONE;
        ro.read_only = true;
        ro
    }

    #[test]
    fn hints_are_per_caller_and_bounded_per_caller() {
        let config = config(REPLICATED);
        let headers = HeaderMap::new();
        let caps = RawValue::from_string("{}".into()).expect("raw");
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        let table = ToolHintsTable::new(2);
        let ro = read_only();
        let as_alice = target(&config, &alice, &headers, &caps);
        let as_bob = target(&config, &bob, &headers, &caps);
        let remember = |target: &Target<'_>, tool: &str| {
            let scope = ToolHintsTable::scope_of(target).expect("a backend with replicas");
            table.remember(&scope, tool, ro);
        };
        remember(&as_bob, "read");
        remember(&as_alice, "read");
        assert_eq!(table.get(&as_alice, "read"), ro);
        assert_eq!(table.get(&as_alice, "write"), ToolHints::NONE);
        // Alice fills the table: she forgets her own oldest, Bob keeps his.
        remember(&as_alice, "a");
        remember(&as_alice, "b");
        assert_eq!(table.get(&as_alice, "read"), ToolHints::NONE);
        assert_eq!(table.get(&as_bob, "read"), ro);
    }

    #[test]
    fn a_backend_without_replicas_keeps_no_hints() {
        let single = config(r#"{"url":"http://b/mcp"}"#);
        let replicated = config(REPLICATED);
        let headers = HeaderMap::new();
        let caps = RawValue::from_string("{}".into()).expect("raw");
        let alice = Principal::new("i", "alice");
        let table = ToolHintsTable::new(8);
        assert!(ToolHintsTable::scope_of(&target(&single, &alice, &headers, &caps)).is_none());
        // Control: the same backend with a replica has a scope, and what it learnt is not the
        // single-address backend's (it would decide nothing there).
        let replicated_target = target(&replicated, &alice, &headers, &caps);
        let scope = ToolHintsTable::scope_of(&replicated_target).expect("scope");
        table.remember(&scope, "read", read_only());
        assert_eq!(table.get(&replicated_target, "read"), read_only());
        assert_eq!(
            table.get(&target(&single, &alice, &headers, &caps), "read"),
            ToolHints::NONE
        );
    }
}
