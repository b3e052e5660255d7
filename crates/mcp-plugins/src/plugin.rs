//! The [`Plugin`] trait.

use serde_json::value::RawValue;

use crate::{HookSet, PluginContext, UpstreamExtras, Verdict};

/// A plugin: code that runs at hook points around routed calls.
///
/// Only [`call`](Self::call) is required. A plugin instance is built once per loaded document by
/// its factory (see [`Registry`](crate::Registry)) and shared by every call, so per-call state goes
/// in the call and shared state behind interior mutability (the built-in rate limiter does that).
///
/// The chain only calls a plugin for hooks its document entry lists and whose conditions match,
/// so `call` can assume it is wanted.
///
/// ```
/// use mcp_plugins::{Hook, HookSet, Plugin, PluginContext, Verdict};
/// use serde_json::value::RawValue;
///
/// /// Denies every prompt whose name starts with `internal_`.
/// struct NoInternalPrompts;
///
/// impl Plugin for NoInternalPrompts {
///     fn hooks(&self) -> HookSet {
///         HookSet::only(Hook::PromptPreFetch)
///     }
///     fn call<'a>(&'a self, ctx: &'a PluginContext<'a>, _args: Option<&'a RawValue>) -> Verdict<'a> {
///         if ctx.name.starts_with("internal_") {
///             Verdict::deny(mcp_core::ErrorObject::invalid_request("Prompt not available"))
///         } else {
///             Verdict::allow()
///         }
///     }
/// }
/// ```
pub trait Plugin: Send + Sync + 'static {
    /// The hooks this plugin supports; a document entry naming another hook is rejected at load.
    /// Entries without `hooks` get all of these.
    fn hooks(&self) -> HookSet {
        HookSet::ALL
    }

    /// Runs at `ctx.hook`. `payload` is the call's `arguments` in a pre hook (absent when the
    /// caller sent none, and always for resource reads), the backend's `result` in a post hook.
    fn call<'a>(&'a self, ctx: &'a PluginContext<'a>, payload: Option<&'a RawValue>)
    -> Verdict<'a>;

    /// Whether an item is shown in list results (`tools/list` and friends). `ctx.hook` is the
    /// item kind's pre hook and `ctx.name` the upstream name. Only asked when
    /// [`filters_lists`](Self::filters_lists) is `true`, the entry is in `enforce` mode, and its
    /// conditions match.
    fn listed(&self, ctx: &PluginContext<'_>) -> bool {
        let _ = ctx;
        true
    }

    /// Whether [`listed`](Self::listed) can hide items (lets the chain skip list filtering).
    fn filters_lists(&self) -> bool {
        false
    }

    /// Adds headers or `_meta` entries to the upstream request. Called during pre hooks after the
    /// plugin allowed the call, only when [`adds_upstream`](Self::adds_upstream) is `true`.
    fn upstream(&self, ctx: &PluginContext<'_>, extras: &mut UpstreamExtras) {
        let _ = (ctx, extras);
    }

    /// Whether [`upstream`](Self::upstream) adds anything.
    fn adds_upstream(&self) -> bool {
        false
    }
}
