//! The [`UserConfigStore`] trait and the [`Invalidation`] events stores emit.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::broadcast;

use crate::error::StoreError;
use crate::model::UserConfig;

/// Result of [`UserConfigStore::load`]: `Ok(Some(config))`, `Ok(None)` when the subject has no
/// configuration, or a [`StoreError`].
pub type LoadResult = Result<Option<Arc<UserConfig>>, StoreError>;

/// The future returned by [`UserConfigStore::load`]; `'static` so it can live inside a service's
/// response future.
pub type LoadFuture = BoxFuture<'static, LoadResult>;

/// How many invalidation events a slow receiver may fall behind before it sees
/// [`broadcast::error::RecvError::Lagged`] (which receivers must treat as [`Invalidation::All`]).
pub const INVALIDATION_CHANNEL_CAPACITY: usize = 1024;

/// "Cached copies of this may be stale": emitted by stores, consumed by caches.
///
/// A receiver that lags behind (`RecvError::Lagged`) has missed events and must act as if it had
/// received [`Invalidation::All`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Invalidation {
    /// One subject's configuration changed (or was removed).
    Subject(Arc<str>),
    /// Anything may have changed: the whole document was reloaded, or the store reconnected and
    /// may have missed change notifications.
    All,
}

impl Invalidation {
    /// Whether this event concerns `subject`.
    pub fn affects(&self, subject: &str) -> bool {
        match self {
            Self::Subject(s) => &**s == subject,
            Self::All => true,
        }
    }
}

/// A source of per-subject user configurations.
///
/// Object-safe (`Arc<dyn UserConfigStore>` works): [`load`](Self::load) returns a boxed `'static`
/// future, so implementations clone whatever shared state they need into it. Implementations in
/// this crate: [`MemoryStore`](crate::MemoryStore), [`FileStore`](crate::FileStore),
/// [`RedisStore`](crate::RedisStore), and the [`CachedStore`](crate::CachedStore) wrapper.
///
/// A custom store, e.g. to inject failures in a test:
///
/// ```
/// use std::sync::Arc;
/// use mcp_config_store::{Invalidation, LoadFuture, StoreError, UserConfigStore};
/// use tokio::sync::broadcast;
///
/// struct Down(broadcast::Sender<Invalidation>);
///
/// impl UserConfigStore for Down {
///     fn load(&self, _subject: Arc<str>) -> LoadFuture {
///         Box::pin(async { Err(StoreError::unavailable("always down")) })
///     }
///     fn invalidations(&self) -> broadcast::Receiver<Invalidation> {
///         self.0.subscribe()
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store: Arc<dyn UserConfigStore> = Arc::new(Down(broadcast::channel(1).0));
/// assert!(store.load("alice".into()).await.unwrap_err().is_unavailable());
/// # }
/// ```
pub trait UserConfigStore: Send + Sync + 'static {
    /// Loads `subject`'s configuration: `Ok(Some(..))`, `Ok(None)` when there is none, or an error
    /// whose [kind](crate::StoreErrorKind) tells "unavailable" from "corrupt" from "other".
    fn load(&self, subject: Arc<str>) -> LoadFuture;

    /// A receiver of this store's [`Invalidation`] events (a new subscription per call).
    fn invalidations(&self) -> broadcast::Receiver<Invalidation>;

    /// Whether the store is usable right now (for readiness probes). The default says yes; remote
    /// stores check their connection.
    fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }
}

impl<T: UserConfigStore + ?Sized> UserConfigStore for Arc<T> {
    fn load(&self, subject: Arc<str>) -> LoadFuture {
        (**self).load(subject)
    }

    fn invalidations(&self) -> broadcast::Receiver<Invalidation> {
        (**self).invalidations()
    }

    fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        (**self).check()
    }
}

/// A new invalidation channel of [`INVALIDATION_CHANNEL_CAPACITY`].
pub(crate) fn invalidation_channel() -> broadcast::Sender<Invalidation> {
    broadcast::channel(INVALIDATION_CHANNEL_CAPACITY).0
}
