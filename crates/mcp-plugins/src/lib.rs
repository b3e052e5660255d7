//! # mcp-plugins
//!
//! Hook points around routed MCP calls, built-in policy plugins, a strictly validated plugin
//! document with hot reload, and [`PluginLayer`], which applies tool hooks to any MCP server's
//! HTTP endpoint without the rest of the gateway.
//!
//! | module / item | what it holds |
//! |---|---|
//! | `hook` | [`Hook`] (tool pre-invoke / post-invoke, prompt pre-fetch / post-fetch, resource pre-read / post-read), [`HookSet`] (item kinds are `mcp_core::ItemKind`) |
//! | `plugin` | the [`Plugin`] trait |
//! | `decision` | [`Decision`] (allow, rewrite, deny), [`Verdict`] (ready now or a boxed future), [`PluginError`] |
//! | `context` | [`PluginContext`] (principal, virtual host, backend, names, `_meta`), [`UpstreamExtras`] |
//! | `document` | the plugin document ([`Document`], [`PluginEntry`], [`Mode`], [`Format`]) and [`ConfigError`] with field paths |
//! | `conditions`, `pattern` | which calls an entry applies to; `*` name patterns |
//! | `registry` | [`Registry`]: plugin kinds by name, built-ins pre-registered |
//! | `chain` | [`PluginChain`]: priority-ordered entries; `applies`, `pre`, `post`, `listed` |
//! | `runtime` | [`PluginRuntime`]: the current chain behind an atomic pointer, fail-closed states |
//! | `reload` | file and (feature `redis`) Redis polling reload ([`PluginRuntime::watch_file`], `PluginRuntime::watch_redis`) |
//! | [`builtin`] | `tool_filter`, `size_limit`, `secret_filter`, `rate_limit`, `upstream_headers` |
//! | `layer` | [`PluginLayer`] / [`PluginService`]: tool hooks on JSON-RPC `tools/call` at the HTTP level |
//!
//! Only [`builtin`] is a public module; the others are private and their items are re-exported
//! here, one path per item.
//!
//! ## Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `redis` | no | `RedisSource`, `RuntimeBuilder::load_redis`, `PluginRuntime::watch_redis`: the plugin document in a Redis key (deadpool-redis, `mcp-config-store`'s Redis topologies) |
//!
//! ## Semantics (book: docs/src/failure-modes.md and docs/src/plugins.md)
//!
//! - Entries run in `priority` order (lower first, ties in document order). Each sees the payload
//!   as rewritten by the entries before it.
//! - **Deny** (in `enforce` mode) ends the call with the plugin's JSON-RPC error (default code
//!   -32600); its message is shown to the caller. In `permissive` mode a denial is logged and the
//!   call proceeds.
//! - **Plugin errors** ([`PluginError`]) are logged; the call proceeds in `permissive` mode and is
//!   denied with `-32603 Plugin <name> failed` in `enforce` mode.
//! - `disabled` entries are validated and left out.
//! - An invalid document at startup is an error (the gateway refuses to start). An invalid
//!   reload marks the runtime failed: [`PluginRuntime::load`] answers `-32603`
//!   ([`FAILED_MESSAGE`]) until a valid document is applied, unless the runtime was built with
//!   `keep_last_good`, which keeps the previous chain. [`PluginRuntime::state`] feeds `/readyz`.
//! - The no-plugin path is free: [`PluginChain::applies`] is a slice check per hook, no
//!   allocation and no JSON parsing.
//!
//! ## A custom plugin in a few lines
//!
//! ```
//! use mcp_plugins::{Format, Hook, Plugin, PluginConfig, PluginContext, PluginRuntime, Registry, Verdict};
//! use serde_json::value::RawValue;
//!
//! /// Denies tools whose arguments mention `prod`, with the code from its settings.
//! struct NoProd { code: i64 }
//!
//! impl Plugin for NoProd {
//!     fn call<'a>(&'a self, _ctx: &'a PluginContext<'a>, args: Option<&'a RawValue>) -> Verdict<'a> {
//!         match args {
//!             Some(a) if a.get().contains("prod") => {
//!                 Verdict::deny(mcp_core::ErrorObject::new(self.code, "No production access"))
//!             }
//!             _ => Verdict::allow(),
//!         }
//!     }
//! }
//!
//! #[derive(serde::Deserialize)]
//! struct NoProdConfig { code: i64 }
//!
//! let registry = Registry::new().register("no_prod", |c: &PluginConfig<'_>| {
//!     let config: NoProdConfig = c.parse()?;
//!     Ok(NoProd { code: config.code })
//! });
//! let runtime = PluginRuntime::builder()
//!     .registry(registry)
//!     .load_str(
//!         r#"
//!         version = 1
//!         [[plugins]]
//!         name = "no-prod"
//!         kind = "no_prod"
//!         hooks = ["tool_pre_invoke"]
//!         config = { code = -32001 }
//!         "#,
//!         Format::Toml,
//!         "inline",
//!     )
//!     .unwrap();
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let chain = runtime.load().unwrap();
//! assert!(chain.applies(Hook::ToolPreInvoke, "team-a", "deploy", "run"));
//! assert!(!chain.applies(Hook::PromptPreFetch, "team-a", "deploy", "run"));
//!
//! let ctx = PluginContext::new(Hook::ToolPreInvoke, "team-a", "deploy", "run");
//! let args = RawValue::from_string(r#"{"env":"prod"}"#.to_owned()).unwrap();
//! let denied = chain.pre(&ctx, Some(&args)).await.unwrap_err();
//! assert_eq!((denied.code, denied.message.as_str()), (-32001, "No production access"));
//!
//! let args = RawValue::from_string(r#"{"env":"staging"}"#.to_owned()).unwrap();
//! let allowed = chain.pre(&ctx, Some(&args)).await.unwrap();
//! assert!(allowed.arguments.is_none()); // not rewritten
//! # });
//! ```
//!
//! ## Wiring into a router
//!
//! At each hook point: load the chain once per call ([`PluginRuntime::load`]; an `Err` is the
//! answer), ask [`PluginChain::applies`] and only then build a [`PluginContext`] and run
//! [`PluginChain::pre`] / [`PluginChain::post`]. Lists: when [`PluginChain::filters_lists`] is
//! true, keep the items for which [`PluginChain::listed`] is true.

pub mod builtin;
mod chain;
mod conditions;
mod context;
mod decision;
mod document;
mod hook;
mod layer;
mod pattern;
mod plugin;
mod registry;
mod reload;
mod runtime;

pub use chain::{PluginChain, PreOutcome};
pub use conditions::Conditions;
pub use context::{PluginContext, UpstreamExtras};
pub use decision::{DEFAULT_DENY_CODE, Decision, DecisionFuture, PluginError, Verdict};
pub use document::{
    ConfigError, DOCUMENT_VERSION, Document, Format, Mode, PluginConfig, PluginEntry,
};
pub use hook::{Hook, HookSet, UnknownHook};
pub use layer::{DEFAULT_MAX_BODY_BYTES, PluginBody, PluginLayer, PluginService, ResponseFuture};
pub use pattern::Pattern;
pub use plugin::Plugin;
pub use registry::Registry;
#[cfg(feature = "redis")]
pub use reload::RedisSource;
pub use reload::ReloadHandle;
pub use runtime::{FAILED_MESSAGE, PluginRuntime, RuntimeBuilder, RuntimeState};
