//! [`Registry`]: plugin kinds by name, each with the factory that builds a plugin from its
//! document entry.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::chain::Entry;
use crate::document::{Document, Format, Mode, PluginConfig};
use crate::{ConfigError, HookSet, Plugin, PluginChain, builtin};

type Factory = Arc<dyn Fn(&PluginConfig<'_>) -> Result<Arc<dyn Plugin>, ConfigError> + Send + Sync>;

/// Plugin kinds by name. [`Registry::new`] holds the built-ins (see [`builtin`]); add your own
/// with [`register`](Self::register).
///
/// ```
/// use mcp_plugins::{Format, Plugin, PluginConfig, PluginContext, Registry, Verdict};
/// use serde_json::value::RawValue;
///
/// struct AllowAll;
/// impl Plugin for AllowAll {
///     fn call<'a>(&'a self, _: &'a PluginContext<'a>, _: Option<&'a RawValue>) -> Verdict<'a> {
///         Verdict::allow()
///     }
/// }
///
/// let registry = Registry::new().register("allow_all", |_: &PluginConfig<'_>| Ok(AllowAll));
/// assert!(registry.kinds().any(|k| k == "allow_all"));
/// let chain = registry
///     .load(r#"{"version":1,"plugins":[{"name":"a","kind":"allow_all"}]}"#, Format::Json)
///     .unwrap();
/// assert_eq!(chain.len(), 1);
/// let err = registry
///     .load(r#"{"version":1,"plugins":[{"name":"a","kind":"nope"}]}"#, Format::Json)
///     .unwrap_err();
/// assert!(err.to_string().starts_with("plugins[0].kind: unknown plugin kind `nope`"));
/// ```
#[derive(Clone)]
pub struct Registry {
    factories: BTreeMap<String, Factory>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.factories.keys()).finish()
    }
}

impl Registry {
    /// A registry with the built-in kinds.
    pub fn new() -> Self {
        builtin::register_all(Self::empty())
    }

    /// A registry without any kind.
    pub fn empty() -> Self {
        Self {
            factories: BTreeMap::new(),
        }
    }

    /// Registers (or replaces) `kind`, built by `factory` from an entry's settings.
    #[must_use]
    pub fn register<P, F>(mut self, kind: impl Into<String>, factory: F) -> Self
    where
        P: Plugin,
        F: Fn(&PluginConfig<'_>) -> Result<P, ConfigError> + Send + Sync + 'static,
    {
        let factory: Factory =
            Arc::new(move |config| factory(config).map(|p| Arc::new(p) as Arc<dyn Plugin>));
        self.factories.insert(kind.into(), factory);
        self
    }

    /// The registered kinds, sorted.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// Parses a document and builds its chain.
    pub fn load(&self, text: &str, format: Format) -> Result<PluginChain, ConfigError> {
        self.build(&Document::parse(text, format)?)
    }

    /// Builds the chain of a parsed document: every entry's kind must be registered, its settings
    /// valid and its hooks supported by the kind (disabled entries are checked too).
    pub fn build(&self, document: &Document) -> Result<PluginChain, ConfigError> {
        let mut entries = Vec::with_capacity(document.plugins.len());
        for (index, spec) in document.plugins.iter().enumerate() {
            let factory = self.factories.get(&spec.kind).ok_or_else(|| {
                let known: Vec<&str> = self.kinds().collect();
                ConfigError::new(
                    format!("plugins[{index}].kind"),
                    format!(
                        "unknown plugin kind `{}` (known: {})",
                        spec.kind,
                        known.join(", ")
                    ),
                )
            })?;
            let config = PluginConfig {
                name: &spec.name,
                kind: &spec.kind,
                value: spec.config.as_ref(),
                index,
            };
            let plugin = factory(&config)?;
            let supported = plugin.hooks();
            let hooks = match &spec.hooks {
                None => supported,
                Some(list) => {
                    if list.is_empty() {
                        return Err(ConfigError::new(
                            format!("plugins[{index}].hooks"),
                            "empty hook list (leave `hooks` out for every supported hook)",
                        ));
                    }
                    for (j, hook) in list.iter().enumerate() {
                        if !supported.contains(*hook) {
                            return Err(ConfigError::new(
                                format!("plugins[{index}].hooks[{j}]"),
                                format!(
                                    "plugin kind `{}` does not support hook `{hook}` (supported: {})",
                                    spec.kind,
                                    supported
                                        .iter()
                                        .map(|h| h.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            ));
                        }
                    }
                    list.iter().copied().collect::<HookSet>()
                }
            };
            if spec.mode == Mode::Disabled {
                continue;
            }
            entries.push(Entry::new(spec, plugin, hooks, index));
        }
        Ok(PluginChain::new(entries))
    }
}
