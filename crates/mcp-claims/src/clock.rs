//! [`JwksClock`]: the monotonic clock of the JWKS caches (the age of a key set, the time since the
//! last fetch). Injecting it lets a test step past a refresh or refetch interval instead of sleeping
//! through it, while the sockets of the fetches keep real time.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// The clock the JWKS caches read: tokio's clock by default (so paused tokio time moves it too), or
/// any `Fn() -> Instant`. Feature `jwks`.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::{Duration, Instant};
/// use mcp_claims::JwksClock;
///
/// // A clock that stands still until a test moves it.
/// let start = Instant::now();
/// let moved_ms = Arc::new(AtomicU64::new(0));
/// let clock = {
///     let moved_ms = Arc::clone(&moved_ms);
///     JwksClock::from_fn(move || start + Duration::from_millis(moved_ms.load(Ordering::Relaxed)))
/// };
/// assert_eq!(clock.now(), start);
/// moved_ms.store(60_000, Ordering::Relaxed);
/// assert_eq!(clock.now(), start + Duration::from_secs(60));
/// ```
#[derive(Clone, Default)]
pub struct JwksClock {
    /// `None`: tokio's clock (no allocation, no indirect call on the default path).
    now: Option<Arc<dyn Fn() -> Instant + Send + Sync>>,
}

impl JwksClock {
    /// tokio's clock (`tokio::time::Instant::now`).
    #[must_use]
    pub fn tokio() -> Self {
        Self::default()
    }

    /// A clock that reads `now`.
    #[must_use]
    pub fn from_fn(now: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        Self {
            now: Some(Arc::new(now)),
        }
    }

    /// The current instant.
    pub fn now(&self) -> Instant {
        self.now
            .as_ref()
            .map_or_else(|| tokio::time::Instant::now().into_std(), |now| now())
    }
}

impl fmt::Debug for JwksClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.now.is_some() {
            "JwksClock(custom)"
        } else {
            "JwksClock(tokio)"
        })
    }
}
