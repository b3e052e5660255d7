//! [`Conditions`]: which calls a plugin entry applies to.

use serde::Deserialize;

use crate::pattern::any_matches;
use mcp_core::ItemKind;

use crate::{Hook, Pattern};

/// Optional restrictions of a plugin entry. Every list that is present must match (an absent list
/// matches everything); `tools` restricts tool hooks only, `prompts` prompt hooks and `resources`
/// (URIs) resource hooks. Names are upstream names (the backend's own), like a backend's
/// `allowed_tools`.
///
/// ```
/// use mcp_plugins::{Conditions, Hook};
///
/// let c: Conditions = serde_json::from_value(serde_json::json!({
///     "virtual_hosts": ["team-*"], "tools": ["delete_*"]
/// })).unwrap();
/// assert!(c.matches(Hook::ToolPreInvoke, "team-a", "notes", "delete_note"));
/// assert!(!c.matches(Hook::ToolPreInvoke, "team-a", "notes", "add_note"));
/// assert!(!c.matches(Hook::ToolPreInvoke, "ops", "notes", "delete_note"));
/// assert!(c.matches(Hook::PromptPreFetch, "team-a", "notes", "summary"));
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Conditions {
    /// Virtual host ids.
    pub virtual_hosts: Option<Vec<Pattern>>,
    /// Backend names.
    pub backends: Option<Vec<Pattern>>,
    /// Upstream tool names.
    pub tools: Option<Vec<Pattern>>,
    /// Upstream prompt names.
    pub prompts: Option<Vec<Pattern>>,
    /// Upstream resource URIs.
    pub resources: Option<Vec<Pattern>>,
}

impl Conditions {
    /// Whether a call at `hook` on `name` of `backend` in `virtual_host` is covered.
    pub fn matches(&self, hook: Hook, virtual_host: &str, backend: &str, name: &str) -> bool {
        fn ok(list: &Option<Vec<Pattern>>, value: &str) -> bool {
            list.as_deref().is_none_or(|l| any_matches(l, value))
        }
        let names = match hook.item() {
            ItemKind::Tool => &self.tools,
            ItemKind::Prompt => &self.prompts,
            ItemKind::Resource => &self.resources,
        };
        ok(&self.virtual_hosts, virtual_host) && ok(&self.backends, backend) && ok(names, name)
    }

    /// Whether there is no restriction at all.
    pub fn is_unconditional(&self) -> bool {
        self.virtual_hosts.is_none()
            && self.backends.is_none()
            && self.tools.is_none()
            && self.prompts.is_none()
            && self.resources.is_none()
    }
}
