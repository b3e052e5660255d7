//! [`PluginRuntime`]: the current chain behind an atomic pointer, replaced on reload, with the
//! fail-closed state of book: docs/src/failure-modes.md.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use mcp_core::ErrorObject;
use tokio::sync::watch;

use crate::{ConfigError, Format, PluginChain, Registry};

/// The message of the internal error that plugin-governed calls get while the runtime is failed.
/// The reason is logged and shown on `/readyz`, never to callers.
pub const FAILED_MESSAGE: &str = "Plugins unavailable: invalid plugin configuration";

/// Where the runtime stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeState {
    /// The last document applied was valid.
    Ready,
    /// The last document applied was invalid and there is no chain to fall back to: plugin-governed
    /// calls fail closed with [`FAILED_MESSAGE`] until a valid document is applied.
    Failed(String),
    /// The last document applied was invalid; with `keep_last_good` the previous chain still runs.
    KeptLastGood(String),
}

impl RuntimeState {
    /// Whether the gateway may report ready: not [`Failed`](Self::Failed).
    pub fn is_ready(&self) -> bool {
        !matches!(self, RuntimeState::Failed(_))
    }

    /// The last load error, when the last document was invalid.
    pub fn error(&self) -> Option<&str> {
        match self {
            RuntimeState::Ready => None,
            RuntimeState::Failed(e) | RuntimeState::KeptLastGood(e) => Some(e),
        }
    }
}

struct Current {
    chain: Option<Arc<PluginChain>>,
    state: RuntimeState,
}

struct Shared {
    current: ArcSwap<Current>,
    registry: Registry,
    keep_last_good: bool,
    /// Hash of the last document text applied (valid or not), so watchers skip unchanged text.
    last_text: AtomicU64,
    generation: watch::Sender<u64>,
}

/// The plugin chain in use, swapped atomically when a new document is applied.
///
/// Cheap to clone (an `Arc`). [`load`](Self::load) is the hot path: one atomic load and one
/// reference-count increment. A call keeps the `Arc<PluginChain>` it loaded, so in-flight calls
/// finish on the chain they started with while new calls see the new one.
///
/// ```
/// use mcp_plugins::{Format, PluginRuntime, RuntimeState};
///
/// let runtime = PluginRuntime::builder()
///     .load_str(r#"{"version":1,"plugins":[]}"#, Format::Json, "inline")
///     .unwrap();
/// assert_eq!(runtime.state(), RuntimeState::Ready);
///
/// // An invalid reload fails closed...
/// assert!(runtime.apply_str(r#"{"version":2,"plugins":[]}"#, Format::Json, "inline").is_err());
/// assert!(!runtime.state().is_ready());
/// let err = runtime.load().unwrap_err();
/// assert_eq!((err.code, err.message.as_str()), (-32603, mcp_plugins::FAILED_MESSAGE));
///
/// // ...until a valid one is applied.
/// runtime.apply_str("version = 1\nplugins = []", Format::Toml, "inline").unwrap();
/// assert!(runtime.load().is_ok());
/// ```
#[derive(Clone)]
pub struct PluginRuntime {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PluginRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRuntime")
            .field("state", &self.state())
            .field("generation", &self.generation())
            .finish()
    }
}

/// Builds a [`PluginRuntime`] from a first document, which must be valid (an invalid one is an
/// error: the gateway refuses to start).
#[derive(Debug, Default)]
#[must_use]
pub struct RuntimeBuilder {
    registry: Option<Registry>,
    keep_last_good: bool,
}

impl RuntimeBuilder {
    /// The plugin kinds (default: [`Registry::new`], the built-ins).
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// On an invalid reload, keep running the last valid chain instead of failing closed.
    pub fn keep_last_good(mut self, keep: bool) -> Self {
        self.keep_last_good = keep;
        self
    }

    /// Starts from a document held in memory; `source` names it in errors.
    pub fn load_str(
        self,
        text: &str,
        format: Format,
        source: &str,
    ) -> Result<PluginRuntime, ConfigError> {
        let keep_last_good = self.keep_last_good;
        let registry = self.registry.unwrap_or_default();
        let chain = registry
            .load(text, format)
            .map_err(|e| e.with_source(source))?;
        Ok(finish(registry, keep_last_good, chain, text_hash(text)))
    }

    /// Starts from a file (`.json` is JSON, anything else TOML).
    pub fn load_file(self, path: &Path) -> Result<PluginRuntime, ConfigError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new("", format!("cannot read: {e}")).with_source(&source))?;
        self.load_str(&text, Format::from_path(path), &source)
    }

    /// Starts from an already built chain.
    pub fn build(self, chain: PluginChain) -> PluginRuntime {
        finish(
            self.registry.unwrap_or_default(),
            self.keep_last_good,
            chain,
            0,
        )
    }
}

fn finish(
    registry: Registry,
    keep_last_good: bool,
    chain: PluginChain,
    hash: u64,
) -> PluginRuntime {
    let (generation, _) = watch::channel(0);
    PluginRuntime {
        shared: Arc::new(Shared {
            current: ArcSwap::from_pointee(Current {
                chain: Some(Arc::new(chain)),
                state: RuntimeState::Ready,
            }),
            registry,
            keep_last_good,
            last_text: AtomicU64::new(hash),
            generation,
        }),
    }
}

impl PluginRuntime {
    /// A builder.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// A runtime without plugins (every call allowed, nothing hidden).
    pub fn disabled() -> Self {
        Self::builder().build(PluginChain::empty())
    }

    /// The chain for a plugin-governed call, or the internal error to answer while the runtime is
    /// failed (book: docs/src/failure-modes.md: fail closed).
    pub fn load(&self) -> Result<Arc<PluginChain>, ErrorObject> {
        match &self.shared.current.load().chain {
            Some(chain) => Ok(Arc::clone(chain)),
            None => Err(ErrorObject::internal(FAILED_MESSAGE)),
        }
    }

    /// Where the runtime stands (for `/readyz`).
    pub fn state(&self) -> RuntimeState {
        self.shared.current.load().state.clone()
    }

    /// How many documents were applied since start (valid or not).
    pub fn generation(&self) -> u64 {
        *self.shared.generation.borrow()
    }

    /// A receiver that changes whenever a document is applied (valid or not).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.generation.subscribe()
    }

    /// The plugin kinds this runtime builds documents with.
    pub fn registry(&self) -> &Registry {
        &self.shared.registry
    }

    /// Applies a new document. Valid: its chain replaces the current one atomically. Invalid: the
    /// runtime becomes [`Failed`](RuntimeState::Failed) (or
    /// [`KeptLastGood`](RuntimeState::KeptLastGood)) and the error is logged and returned.
    pub fn apply_str(&self, text: &str, format: Format, source: &str) -> Result<(), ConfigError> {
        self.shared
            .last_text
            .store(text_hash(text), Ordering::Relaxed);
        let result = self
            .shared
            .registry
            .load(text, format)
            .map_err(|e| e.with_source(source));
        match result {
            Ok(chain) => {
                tracing::info!(
                    source,
                    plugins = chain.len(),
                    "plugin configuration applied"
                );
                self.set(Some(Arc::new(chain)), RuntimeState::Ready);
                Ok(())
            }
            Err(error) => {
                self.apply_failure(&error);
                Err(error)
            }
        }
    }

    /// Records a document that could not even be read (deleted file, missing Redis key) as an
    /// invalid reload.
    pub fn apply_failure(&self, error: &ConfigError) {
        let reason = error.to_string();
        let last_good = self.shared.current.load().chain.clone();
        match last_good {
            Some(chain) if self.shared.keep_last_good => {
                tracing::error!(error = %reason, "invalid plugin configuration; keeping the last valid one (keep_last_good)");
                self.set(Some(chain), RuntimeState::KeptLastGood(reason));
            }
            _ => {
                tracing::error!(error = %reason, "invalid plugin configuration; plugin-governed calls fail until a valid one is applied");
                self.set(None, RuntimeState::Failed(reason));
            }
        }
    }

    /// Whether `text` differs from the last document applied.
    pub(crate) fn is_new(&self, text: &str) -> bool {
        self.shared.last_text.load(Ordering::Relaxed) != text_hash(text)
    }

    /// Forgets the last text, so the next document read is applied even when unchanged (after the
    /// source was unreadable in between).
    pub(crate) fn forget_text(&self) {
        self.shared.last_text.store(0, Ordering::Relaxed);
    }

    fn set(&self, chain: Option<Arc<PluginChain>>, state: RuntimeState) {
        self.shared
            .current
            .store(Arc::new(Current { chain, state }));
        self.shared.generation.send_modify(|g| *g += 1);
    }
}

fn text_hash(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = r#"{"version":1,"plugins":[{"name":"limit","kind":"size_limit","config":{"max_argument_bytes":10}}]}"#;

    #[test]
    fn keep_last_good_keeps_the_chain_and_reports_the_error() {
        let runtime = PluginRuntime::builder()
            .keep_last_good(true)
            .load_str(VALID, Format::Json, "test")
            .expect("valid");
        let err = runtime
            .apply_str(r#"{"version":1}"#, Format::Json, "test")
            .expect_err("invalid");
        assert_eq!(err.to_string(), "test: plugins: missing plugin section");
        let state = runtime.state();
        assert!(state.is_ready());
        assert_eq!(state.error(), Some("test: plugins: missing plugin section"));
        let chain = runtime.load().expect("last good chain still runs");
        assert_eq!(chain.names().collect::<Vec<_>>(), ["limit"]);
        assert_eq!(runtime.generation(), 1);
    }

    #[test]
    fn in_flight_chain_survives_a_swap() {
        let runtime = PluginRuntime::builder()
            .load_str(VALID, Format::Json, "test")
            .expect("valid");
        let before = runtime.load().expect("ready");
        runtime
            .apply_str(r#"{"version":1,"plugins":[]}"#, Format::Json, "test")
            .expect("valid");
        assert_eq!(before.len(), 1, "the chain a call holds is unchanged");
        assert_eq!(runtime.load().expect("ready").len(), 0);
    }

    #[test]
    fn invalid_first_document_is_an_error() {
        let err = PluginRuntime::builder()
            .load_str(
                r#"{"version":1,"plugins":[{"name":"x","kind":"size_limit","config":{"max_argument_bytes":"big"}}]}"#,
                Format::Json,
                "plugins.json",
            )
            .expect_err("invalid");
        assert!(
            err.to_string()
                .starts_with("plugins.json: plugins[0].config.max_argument_bytes: invalid type"),
            "{err}"
        );
    }
}
