//! [`PluginChain`]: the plugins of one loaded document, sorted by priority, and how a call runs
//! through them.

use std::fmt;
use std::sync::Arc;

use mcp_core::ErrorObject;
use serde_json::value::RawValue;

use crate::document::{Mode, PluginEntry};
use crate::{Conditions, Decision, Hook, HookSet, Plugin, PluginContext, UpstreamExtras};

/// One enabled entry of the chain.
pub(crate) struct Entry {
    name: Arc<str>,
    plugin: Arc<dyn Plugin>,
    hooks: HookSet,
    mode: Mode,
    priority: i32,
    order: usize,
    conditions: Conditions,
}

impl Entry {
    pub(crate) fn new(
        spec: &PluginEntry,
        plugin: Arc<dyn Plugin>,
        hooks: HookSet,
        order: usize,
    ) -> Self {
        Self {
            name: Arc::from(spec.name.as_str()),
            plugin,
            hooks,
            mode: spec.mode,
            priority: spec.priority,
            order,
            conditions: spec.conditions.clone(),
        }
    }

    fn covers(&self, hook: Hook, virtual_host: &str, backend: &str, name: &str) -> bool {
        self.conditions.matches(hook, virtual_host, backend, name)
    }
}

/// What the pre hooks decided for a call that may proceed.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct PreOutcome {
    /// The rewritten arguments, when a plugin rewrote them (`None`: send the caller's).
    pub arguments: Option<Box<RawValue>>,
    /// Headers and `_meta` entries for the upstream request.
    pub extras: UpstreamExtras,
}

/// The enabled plugins of one document, in run order (priority, then document order).
///
/// Immutable once built: a reload builds a new chain and swaps it in (see
/// [`PluginRuntime`](crate::PluginRuntime)); calls in flight finish on the chain they started with.
///
/// Per hook the chain keeps the indices of the entries that run there, so
/// [`applies`](Self::applies) on a hook no plugin uses is one empty-slice check, and with plugins
/// it only compares strings: neither allocates nor parses JSON.
pub struct PluginChain {
    entries: Vec<Entry>,
    by_hook: [Vec<usize>; 6],
    /// Per item kind (indexed by its pre hook): enforce-mode entries that filter lists.
    list_filters: [Vec<usize>; 6],
}

impl fmt::Debug for PluginChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| (&*e.name, e.mode, e.hooks)))
            .finish()
    }
}

impl Default for PluginChain {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl PluginChain {
    pub(crate) fn new(mut entries: Vec<Entry>) -> Self {
        entries.sort_by_key(|e| (e.priority, e.order));
        let mut by_hook: [Vec<usize>; 6] = Default::default();
        let mut list_filters: [Vec<usize>; 6] = Default::default();
        for (i, entry) in entries.iter().enumerate() {
            for hook in entry.hooks.iter() {
                by_hook[hook.index()].push(i);
                if hook.is_pre() && entry.mode == Mode::Enforce && entry.plugin.filters_lists() {
                    list_filters[hook.index()].push(i);
                }
            }
        }
        Self {
            entries,
            by_hook,
            list_filters,
        }
    }

    /// A chain without plugins.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The number of enabled plugins.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no plugin is enabled.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The enabled plugins' names, in run order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| &*e.name)
    }

    /// Whether any plugin runs at `hook`, whatever the call (conditions not checked).
    pub fn has_hook(&self, hook: Hook) -> bool {
        !self.by_hook[hook.index()].is_empty()
    }

    /// Whether any plugin runs at `hook` for `name` of `backend` in `virtual_host`. Allocation
    /// free; call it before building a [`PluginContext`] or reading the payload.
    pub fn applies(&self, hook: Hook, virtual_host: &str, backend: &str, name: &str) -> bool {
        self.by_hook[hook.index()]
            .iter()
            .any(|&i| self.entries[i].covers(hook, virtual_host, backend, name))
    }

    /// Whether some plugin may hide items of the kind of `hook` from lists in `virtual_host`
    /// (`false`: skip [`listed`](Self::listed) for the whole list).
    pub fn filters_lists(&self, hook: Hook, virtual_host: &str) -> bool {
        self.list_filters[hook.pre().index()].iter().any(|&i| {
            let c = &self.entries[i].conditions;
            c.virtual_hosts
                .as_deref()
                .is_none_or(|l| crate::pattern::any_matches(l, virtual_host))
        })
    }

    /// Whether the item `ctx.name` (upstream name) of `ctx.backend` is shown in a list of the
    /// kind of `ctx.hook`. Only `enforce` entries hide items.
    pub fn listed(&self, ctx: &PluginContext<'_>) -> bool {
        let hook = ctx.hook.pre();
        let ctx = ctx.for_hook(hook);
        self.list_filters[hook.index()].iter().all(|&i| {
            let entry = &self.entries[i];
            !entry.covers(hook, ctx.virtual_host, ctx.backend, ctx.name)
                || entry.plugin.listed(&ctx)
        })
    }

    /// Runs the pre hook `ctx.hook` (which must be a pre hook) over the call's `arguments`.
    ///
    /// `Ok` means the call proceeds, with rewritten arguments and upstream extras when plugins
    /// produced any; `Err` is the JSON-RPC error for the caller (a denial, or an internal error
    /// when an `enforce` plugin failed). A rewrite during `resource_pre_read` is ignored (a read
    /// has no arguments).
    pub async fn pre(
        &self,
        ctx: &PluginContext<'_>,
        arguments: Option<&RawValue>,
    ) -> Result<PreOutcome, ErrorObject> {
        debug_assert!(ctx.hook.is_pre(), "pre() runs pre hooks");
        let mut outcome = PreOutcome::default();
        for &i in &self.by_hook[ctx.hook.index()] {
            let entry = &self.entries[i];
            if !entry.covers(ctx.hook, ctx.virtual_host, ctx.backend, ctx.name) {
                continue;
            }
            let payload = outcome.arguments.as_deref().or(arguments);
            if let Some(rewritten) = self.run(entry, ctx, payload).await? {
                if ctx.hook == Hook::ResourcePreRead {
                    tracing::warn!(plugin = %entry.name, "rewrite ignored: resource reads have no arguments");
                } else {
                    outcome.arguments = Some(rewritten);
                }
            }
            if entry.plugin.adds_upstream() {
                entry.plugin.upstream(ctx, &mut outcome.extras);
            }
        }
        Ok(outcome)
    }

    /// Runs the post hook `ctx.hook` (which must be a post hook) over the backend's `result`.
    ///
    /// `Ok(Some(_))`: send this result instead; `Ok(None)`: send the backend's; `Err`: send this
    /// error instead of the result.
    pub async fn post(
        &self,
        ctx: &PluginContext<'_>,
        result: &RawValue,
    ) -> Result<Option<Box<RawValue>>, ErrorObject> {
        debug_assert!(!ctx.hook.is_pre(), "post() runs post hooks");
        let mut rewritten: Option<Box<RawValue>> = None;
        for &i in &self.by_hook[ctx.hook.index()] {
            let entry = &self.entries[i];
            if !entry.covers(ctx.hook, ctx.virtual_host, ctx.backend, ctx.name) {
                continue;
            }
            let payload = rewritten.as_deref().unwrap_or(result);
            if let Some(new) = self.run(entry, ctx, Some(payload)).await? {
                rewritten = Some(new);
            }
        }
        Ok(rewritten)
    }

    /// Runs one entry and applies its mode. `Ok(Some)`: a rewrite to apply.
    async fn run(
        &self,
        entry: &Entry,
        ctx: &PluginContext<'_>,
        payload: Option<&RawValue>,
    ) -> Result<Option<Box<RawValue>>, ErrorObject> {
        let result = entry.plugin.call(ctx, payload).resolve().await;
        let enforce = entry.mode == Mode::Enforce;
        match result {
            Ok(Decision::Allow) => Ok(None),
            Ok(Decision::Rewrite(new)) if new.get().trim_start().starts_with('{') => Ok(Some(new)),
            Ok(Decision::Rewrite(_)) => {
                self.failed(entry, ctx, "rewrite is not a JSON object", enforce)?;
                Ok(None)
            }
            Ok(Decision::Deny(error)) if enforce => {
                tracing::info!(plugin = %entry.name, hook = %ctx.hook, backend = ctx.backend, name = ctx.name, code = error.code, "plugin denied the call");
                Err(error)
            }
            Ok(Decision::Deny(error)) => {
                tracing::warn!(plugin = %entry.name, hook = %ctx.hook, backend = ctx.backend, name = ctx.name, code = error.code, message = %error.message, "permissive plugin would deny the call; proceeding");
                Ok(None)
            }
            Err(e) => {
                self.failed(entry, ctx, &e.0, enforce)?;
                Ok(None)
            }
        }
    }

    fn failed(
        &self,
        entry: &Entry,
        ctx: &PluginContext<'_>,
        reason: &str,
        enforce: bool,
    ) -> Result<(), ErrorObject> {
        if enforce {
            tracing::error!(plugin = %entry.name, hook = %ctx.hook, backend = ctx.backend, name = ctx.name, error = reason, "plugin failed; call denied (enforce mode)");
            Err(ErrorObject::internal(format!(
                "Plugin {} failed",
                entry.name
            )))
        } else {
            tracing::warn!(plugin = %entry.name, hook = %ctx.hook, backend = ctx.backend, name = ctx.name, error = reason, "plugin failed; call proceeds (permissive mode)");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::{Format, PluginConfig, Registry, Verdict};

    /// Records the payload it saw and answers as configured.
    struct Probe {
        answer: &'static str,
        seen: Arc<Mutex<Vec<String>>>,
        name: String,
    }

    impl Plugin for Probe {
        fn call<'a>(
            &'a self,
            _: &'a PluginContext<'a>,
            payload: Option<&'a RawValue>,
        ) -> Verdict<'a> {
            self.seen.lock().expect("lock").push(format!(
                "{}:{}",
                self.name,
                payload.map_or("-", RawValue::get)
            ));
            match self.answer {
                "allow" => Verdict::allow(),
                "deny" => Verdict::deny(ErrorObject::new(-32050, format!("{} says no", self.name))),
                "error" => Verdict::error("boom"),
                "array" => Verdict::rewrite(RawValue::from_string("[1]".to_owned()).expect("json")),
                "later" => Verdict::later(async move {
                    tokio::task::yield_now().await;
                    Ok(Decision::Rewrite(
                        RawValue::from_string(format!(r#"{{"by":"{}"}}"#, self.name))
                            .expect("json"),
                    ))
                }),
                _ => Verdict::rewrite(
                    RawValue::from_string(format!(r#"{{"by":"{}"}}"#, self.name)).expect("json"),
                ),
            }
        }
    }

    fn registry(seen: &Arc<Mutex<Vec<String>>>) -> Registry {
        let seen = Arc::clone(seen);
        Registry::new().register("probe", move |c: &PluginConfig<'_>| {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Config {
                answer: String,
            }
            let config: Config = c.parse()?;
            let answer = match config.answer.as_str() {
                "allow" => "allow",
                "deny" => "deny",
                "error" => "error",
                "array" => "array",
                "later" => "later",
                "rewrite" => "rewrite",
                _ => return Err(c.error_at("answer", "unknown answer")),
            };
            Ok(Probe {
                answer,
                seen: Arc::clone(&seen),
                name: c.name.to_owned(),
            })
        })
    }

    fn chain(entries: serde_json::Value) -> (PluginChain, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let doc = serde_json::json!({"version": 1, "plugins": entries}).to_string();
        let chain = registry(&seen).load(&doc, Format::Json).expect("valid");
        (chain, seen)
    }

    fn args(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("json")
    }

    #[tokio::test]
    async fn priority_order_and_rewrites_feed_the_next_plugin() {
        let (chain, seen) = chain(serde_json::json!([
            {"name": "c", "kind": "probe", "priority": 5, "config": {"answer": "allow"}},
            {"name": "a", "kind": "probe", "priority": -1, "config": {"answer": "rewrite"}},
            {"name": "b", "kind": "probe", "config": {"answer": "later"}},
        ]));
        assert_eq!(chain.names().collect::<Vec<_>>(), ["a", "b", "c"]);
        let ctx = PluginContext::new(Hook::ToolPreInvoke, "vh", "be", "t");
        let outcome = chain
            .pre(&ctx, Some(&args(r#"{"x":1}"#)))
            .await
            .expect("allowed");
        assert_eq!(
            outcome.arguments.as_deref().map(RawValue::get),
            Some(r#"{"by":"b"}"#)
        );
        assert_eq!(
            *seen.lock().expect("lock"),
            [r#"a:{"x":1}"#, r#"b:{"by":"a"}"#, r#"c:{"by":"b"}"#]
        );
    }

    #[tokio::test]
    async fn modes_decide_what_denials_and_errors_do() {
        let (chain, seen) = chain(serde_json::json!([
            {"name": "soft-deny", "kind": "probe", "mode": "permissive", "config": {"answer": "deny"}},
            {"name": "soft-error", "kind": "probe", "mode": "permissive", "config": {"answer": "error"}},
            {"name": "off", "kind": "probe", "mode": "disabled", "config": {"answer": "deny"}},
            {"name": "hard", "kind": "probe", "config": {"answer": "deny"}},
            {"name": "never", "kind": "probe", "config": {"answer": "allow"}},
        ]));
        let ctx = PluginContext::new(Hook::PromptPreFetch, "vh", "be", "p");
        let err = chain.pre(&ctx, None).await.expect_err("denied");
        assert_eq!((err.code, err.message.as_str()), (-32050, "hard says no"));
        assert_eq!(
            *seen.lock().expect("lock"),
            ["soft-deny:-", "soft-error:-", "hard:-"]
        );

        let (chain, _) = chain_of("error", "enforce");
        let ctx = PluginContext::new(Hook::ToolPostInvoke, "vh", "be", "t");
        let err = chain.post(&ctx, &args("{}")).await.expect_err("denied");
        assert_eq!(
            (err.code, err.message.as_str()),
            (-32603, "Plugin p failed")
        );

        // A rewrite that is not an object is a plugin error.
        let (chain, _) = chain_of("array", "enforce");
        assert_eq!(
            chain
                .post(&ctx, &args("{}"))
                .await
                .expect_err("denied")
                .code,
            -32603
        );
        let (chain, _) = chain_of("array", "permissive");
        assert!(
            chain
                .post(&ctx, &args("{}"))
                .await
                .expect("allowed")
                .is_none()
        );
    }

    fn chain_of(answer: &str, mode: &str) -> (PluginChain, Arc<Mutex<Vec<String>>>) {
        chain(
            serde_json::json!([{"name": "p", "kind": "probe", "mode": mode, "config": {"answer": answer}}]),
        )
    }

    #[tokio::test]
    async fn conditions_and_hooks_select_the_plugins() {
        let (chain, seen) = chain(serde_json::json!([
            {"name": "notes-only", "kind": "probe", "hooks": ["tool_pre_invoke"],
             "conditions": {"backends": ["notes"], "tools": ["del*"]}, "config": {"answer": "deny"}},
        ]));
        assert!(chain.has_hook(Hook::ToolPreInvoke));
        assert!(!chain.has_hook(Hook::ToolPostInvoke));
        assert!(chain.applies(Hook::ToolPreInvoke, "vh", "notes", "delete"));
        assert!(!chain.applies(Hook::ToolPreInvoke, "vh", "clock", "delete"));
        assert!(!chain.applies(Hook::ToolPreInvoke, "vh", "notes", "add"));
        assert!(!chain.applies(Hook::PromptPreFetch, "vh", "notes", "delete"));
        let ctx = PluginContext::new(Hook::ToolPreInvoke, "vh", "notes", "add");
        assert!(chain.pre(&ctx, None).await.is_ok());
        assert!(
            seen.lock().expect("lock").is_empty(),
            "not called outside its conditions"
        );
    }

    #[test]
    fn list_filtering_uses_enforce_tool_filters_only() {
        let doc = r#"{"version":1,"plugins":[
            {"name":"deny-rm","kind":"tool_filter","conditions":{"backends":["files"]},"config":{"deny":["rm"]}},
            {"name":"trial","kind":"tool_filter","mode":"permissive","config":{"allow":["ls"]}}
        ]}"#;
        let chain = Registry::new().load(doc, Format::Json).expect("valid");
        assert!(chain.filters_lists(Hook::ToolPreInvoke, "vh"));
        assert!(!chain.filters_lists(Hook::PromptPreFetch, "vh"));
        let listed = |backend, name| {
            chain.listed(&PluginContext::new(
                Hook::ToolPreInvoke,
                "vh",
                backend,
                name,
            ))
        };
        assert!(!listed("files", "rm"));
        assert!(
            listed("files", "cat"),
            "the permissive allow list hides nothing"
        );
        assert!(listed("other", "rm"), "outside the entry's conditions");
    }

    #[test]
    fn unsupported_hooks_and_bad_settings_are_rejected_with_paths() {
        let registry = Registry::new();
        let err = |doc: &str| {
            registry
                .load(doc, Format::Json)
                .expect_err("invalid")
                .to_string()
        };
        assert_eq!(
            err(
                r#"{"version":1,"plugins":[{"name":"f","kind":"tool_filter","hooks":["tool_pre_invoke","prompt_pre_fetch"],"config":{"deny":["x"]}}]}"#
            ),
            "plugins[0].hooks[1]: plugin kind `tool_filter` does not support hook `prompt_pre_fetch` (supported: tool_pre_invoke)"
        );
        assert_eq!(
            err(r#"{"version":1,"plugins":[{"name":"f","kind":"tool_filter","config":{}}]}"#),
            "plugins[0].config: set `allow`, `deny` or both"
        );
        assert_eq!(
            err(
                r#"{"version":1,"plugins":[{"name":"ok","kind":"size_limit","config":{"max_result_bytes":5}},{"name":"r","kind":"rate_limit","mode":"disabled","config":{"limit":0,"window_s":1}}]}"#
            ),
            "plugins[1].config.limit: must be at least 1"
        );
        let unknown = err(
            r#"{"version":1,"plugins":[{"name":"r","kind":"rate_limit","config":{"limit":1,"window_s":1,"burst":2}}]}"#,
        );
        assert!(
            unknown.starts_with("plugins[0].config.burst: unknown field `burst`"),
            "{unknown}"
        );
        let kind = err(r#"{"version":1,"plugins":[{"name":"x","kind":"opa"}]}"#);
        assert_eq!(
            kind,
            "plugins[0].kind: unknown plugin kind `opa` (known: rate_limit, secret_filter, size_limit, tool_filter, upstream_headers)"
        );
    }
}
