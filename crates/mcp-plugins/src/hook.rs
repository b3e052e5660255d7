//! [`Hook`]: the six points around a routed call where plugins run, and [`HookSet`], a set of them.

use std::fmt;

use mcp_core::ItemKind;

/// A point around a routed call where plugins run.
///
/// Pre hooks see the call's arguments (tools, prompts) before the backend does; post hooks see the
/// backend's result before the caller does. Resource reads have no arguments: their pre hook sees
/// only the context (the URI is [`PluginContext::name`](crate::PluginContext::name)).
///
/// ```
/// use mcp_plugins::Hook;
///
/// assert_eq!(Hook::ToolPreInvoke.as_str(), "tool_pre_invoke");
/// assert_eq!("resource_post_read".parse::<Hook>(), Ok(Hook::ResourcePostRead));
/// assert!(Hook::PromptPreFetch.is_pre());
/// assert_eq!(Hook::ToolPostInvoke.pre(), Hook::ToolPreInvoke);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Hook {
    /// Before `tools/call` reaches the backend (payload: `params.arguments`).
    ToolPreInvoke,
    /// After the backend answered `tools/call` (payload: the result).
    ToolPostInvoke,
    /// Before `prompts/get` reaches the backend (payload: `params.arguments`).
    PromptPreFetch,
    /// After the backend answered `prompts/get` (payload: the result).
    PromptPostFetch,
    /// Before `resources/read` reaches the backend (no payload).
    ResourcePreRead,
    /// After the backend answered `resources/read` (payload: the result).
    ResourcePostRead,
}

impl Hook {
    /// Every hook, in declaration order.
    pub const ALL: [Hook; 6] = [
        Hook::ToolPreInvoke,
        Hook::ToolPostInvoke,
        Hook::PromptPreFetch,
        Hook::PromptPostFetch,
        Hook::ResourcePreRead,
        Hook::ResourcePostRead,
    ];

    /// The name used in plugin documents, e.g. `tool_pre_invoke`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Hook::ToolPreInvoke => "tool_pre_invoke",
            Hook::ToolPostInvoke => "tool_post_invoke",
            Hook::PromptPreFetch => "prompt_pre_fetch",
            Hook::PromptPostFetch => "prompt_post_fetch",
            Hook::ResourcePreRead => "resource_pre_read",
            Hook::ResourcePostRead => "resource_post_read",
        }
    }

    /// Whether this hook runs before the backend is called.
    pub const fn is_pre(self) -> bool {
        matches!(
            self,
            Hook::ToolPreInvoke | Hook::PromptPreFetch | Hook::ResourcePreRead
        )
    }

    /// The kind of item this hook governs.
    pub const fn item(self) -> ItemKind {
        match self {
            Hook::ToolPreInvoke | Hook::ToolPostInvoke => ItemKind::Tool,
            Hook::PromptPreFetch | Hook::PromptPostFetch => ItemKind::Prompt,
            Hook::ResourcePreRead | Hook::ResourcePostRead => ItemKind::Resource,
        }
    }

    /// The pre hook of the same item kind (list filtering asks the pre-hook plugins).
    pub const fn pre(self) -> Hook {
        Hook::pre_of(self.item())
    }

    /// The hook that runs before a call of this kind (and decides list visibility).
    pub const fn pre_of(kind: ItemKind) -> Hook {
        match kind {
            ItemKind::Tool => Hook::ToolPreInvoke,
            ItemKind::Prompt => Hook::PromptPreFetch,
            ItemKind::Resource => Hook::ResourcePreRead,
        }
    }

    /// The hook that runs after a call of this kind.
    pub const fn post_of(kind: ItemKind) -> Hook {
        match kind {
            ItemKind::Tool => Hook::ToolPostInvoke,
            ItemKind::Prompt => Hook::PromptPostFetch,
            ItemKind::Resource => Hook::ResourcePostRead,
        }
    }

    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing an unknown hook name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown hook `{0}` (known: tool_pre_invoke, tool_post_invoke, prompt_pre_fetch, prompt_post_fetch, resource_pre_read, resource_post_read)"
)]
#[non_exhaustive]
pub struct UnknownHook(pub String);

impl std::str::FromStr for Hook {
    type Err = UnknownHook;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Hook::ALL
            .into_iter()
            .find(|h| h.as_str() == s)
            .ok_or_else(|| UnknownHook(s.to_owned()))
    }
}

/// A set of [`Hook`]s (a bit set, `Copy`).
///
/// ```
/// use mcp_plugins::{Hook, HookSet};
///
/// let set = HookSet::PRE.with(Hook::ToolPostInvoke);
/// assert!(set.contains(Hook::ResourcePreRead));
/// assert!(!set.contains(Hook::PromptPostFetch));
/// assert_eq!(set.iter().count(), 4);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct HookSet(u8);

impl HookSet {
    /// No hook.
    pub const EMPTY: HookSet = HookSet(0);
    /// Every hook.
    pub const ALL: HookSet = HookSet(0b11_1111);
    /// The three pre hooks.
    pub const PRE: HookSet = HookSet(
        Hook::ToolPreInvoke.bit() | Hook::PromptPreFetch.bit() | Hook::ResourcePreRead.bit(),
    );
    /// The three post hooks.
    pub const POST: HookSet = HookSet(
        Hook::ToolPostInvoke.bit() | Hook::PromptPostFetch.bit() | Hook::ResourcePostRead.bit(),
    );

    /// The set holding only `hook`.
    pub const fn only(hook: Hook) -> HookSet {
        HookSet(hook.bit())
    }

    /// This set plus `hook`.
    #[must_use]
    pub const fn with(self, hook: Hook) -> HookSet {
        HookSet(self.0 | hook.bit())
    }

    /// Whether `hook` is in the set.
    pub const fn contains(self, hook: Hook) -> bool {
        self.0 & hook.bit() != 0
    }

    /// Whether every hook of `other` is in this set.
    pub const fn is_superset(self, other: HookSet) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The hooks of the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Hook> {
        Hook::ALL.into_iter().filter(move |h| self.contains(*h))
    }
}

impl FromIterator<Hook> for HookSet {
    fn from_iter<I: IntoIterator<Item = Hook>>(iter: I) -> Self {
        iter.into_iter().fold(HookSet::EMPTY, HookSet::with)
    }
}

impl fmt::Debug for HookSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(Hook::as_str))
            .finish()
    }
}
