//! [`ItemKind`]: the kind of item a public name, a list or a plugin hook is about.

/// Tools, prompts or resources: the kind of a list (`tools/list`, …), of a routed call
/// (`tools/call`, `prompts/get`, `resources/read`), of a public name, and of a plugin hook.
///
/// ```
/// use mcp_core::ItemKind;
///
/// assert_eq!(ItemKind::Prompt.as_str(), "prompt");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemKind {
    /// A tool (`name`): `tools/call`, `tools/list`.
    Tool,
    /// A prompt (`name`): `prompts/get`, `prompts/list`.
    Prompt,
    /// A resource (`uri`) or resource template (`uriTemplate`): `resources/read`,
    /// `resources/list`.
    Resource,
}

impl ItemKind {
    /// `tool`, `prompt` or `resource`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
        }
    }
}
