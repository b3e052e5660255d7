//! What a plugin answers: [`Decision`] (allow, rewrite, deny), [`PluginError`] (the plugin itself
//! failed) and [`Verdict`], which is either ready at once (the allocation-free fast path) or a boxed
//! future for plugins that must wait (a remote policy service, say).

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use mcp_core::ErrorObject;
use serde_json::value::RawValue;

/// The JSON-RPC code of a denial when the plugin names none: invalid request (-32600, book: docs/src/failure-modes.md).
pub const DEFAULT_DENY_CODE: i64 = mcp_core::error_code::INVALID_REQUEST;

/// A plugin's decision about one call.
#[derive(Debug)]
#[non_exhaustive]
pub enum Decision {
    /// Let the call (or result) through unchanged.
    Allow,
    /// Replace the payload: the arguments in a pre hook, the result in a post hook. Later plugins
    /// see the replacement. Must be a JSON object (arguments, results are objects in MCP).
    Rewrite(Box<RawValue>),
    /// Stop the call: the caller gets this error. Its message is shown to the caller, so it must
    /// not carry secrets or the payload.
    Deny(ErrorObject),
}

impl Decision {
    /// A denial with [`DEFAULT_DENY_CODE`] and `message`.
    pub fn deny(message: impl Into<String>) -> Self {
        Decision::Deny(ErrorObject::new(DEFAULT_DENY_CODE, message))
    }
}

/// A plugin failed (as opposed to denying): a bug, a bad payload it cannot read, an unreachable
/// dependency. In `permissive` mode the failure is logged and the call proceeds; in `enforce` mode
/// the call is denied with an internal error (book: docs/src/failure-modes.md). The message is logged, never shown to
/// the caller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
#[non_exhaustive]
pub struct PluginError(pub String);

impl PluginError {
    /// A plugin error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// The future of a plugin that cannot decide at once.
pub type DecisionFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Decision, PluginError>> + Send + 'a>>;

/// A plugin's answer: ready now, or later.
///
/// Synchronous plugins (every built-in) answer [`Verdict::Ready`], which costs no allocation;
/// asynchronous ones box their future with [`Verdict::later`].
///
/// ```
/// use mcp_plugins::{Decision, Verdict};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let now = Verdict::allow();
/// assert!(matches!(now.resolve().await, Ok(Decision::Allow)));
/// let later = Verdict::later(async { Ok(Decision::deny("not today")) });
/// match later.resolve().await {
///     Ok(Decision::Deny(e)) => assert_eq!((e.code, e.message.as_str()), (-32600, "not today")),
///     other => panic!("{other:?}"),
/// }
/// # }
/// ```
#[non_exhaustive]
pub enum Verdict<'a> {
    /// Decided.
    Ready(Result<Decision, PluginError>),
    /// Decided when the future completes.
    Later(DecisionFuture<'a>),
}

impl<'a> Verdict<'a> {
    /// [`Decision::Allow`], now.
    pub const fn allow() -> Self {
        Verdict::Ready(Ok(Decision::Allow))
    }

    /// [`Decision::Rewrite`], now.
    pub fn rewrite(payload: Box<RawValue>) -> Self {
        Verdict::Ready(Ok(Decision::Rewrite(payload)))
    }

    /// [`Decision::Deny`], now.
    pub fn deny(error: ErrorObject) -> Self {
        Verdict::Ready(Ok(Decision::Deny(error)))
    }

    /// A [`PluginError`], now.
    pub fn error(message: impl Into<String>) -> Self {
        Verdict::Ready(Err(PluginError::new(message)))
    }

    /// A decision that needs to wait (boxed once).
    pub fn later(future: impl Future<Output = Result<Decision, PluginError>> + Send + 'a) -> Self {
        Verdict::Later(Box::pin(future))
    }

    /// Waits for the decision.
    pub async fn resolve(self) -> Result<Decision, PluginError> {
        match self {
            Verdict::Ready(result) => result,
            Verdict::Later(future) => future.await,
        }
    }
}

impl fmt::Debug for Verdict<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Ready(r) => f.debug_tuple("Ready").field(r).finish(),
            Verdict::Later(_) => f.write_str("Later(..)"),
        }
    }
}
