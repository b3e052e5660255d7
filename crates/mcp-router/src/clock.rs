//! [`WallClock`]: where the router reads the time of day for the expiry it writes into what it
//! hands out (sealed `requestState` envelopes, relayed request ids, sealed session ids). Those
//! expiries are absolute Unix times, because another node must judge them, so a monotonic clock
//! does not fit; injecting the clock lets a test move past an expiry instead of sleeping.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock of expiring handles: the system clock by default, or any `Fn() -> SystemTime`.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::{Duration, SystemTime};
/// use mcp_router::WallClock;
///
/// // A clock a test moves forward by hand.
/// let skew = Arc::new(AtomicU64::new(0));
/// let clock = {
///     let skew = Arc::clone(&skew);
///     WallClock::from_fn(move || SystemTime::now() + Duration::from_secs(skew.load(Ordering::Relaxed)))
/// };
/// let before = clock.unix_secs();
/// skew.store(3600, Ordering::Relaxed);
/// assert!(clock.unix_secs() >= before + 3600);
/// assert!(WallClock::system().unix_secs() > 1_700_000_000);
/// ```
#[derive(Clone, Default)]
pub struct WallClock {
    /// `None`: the system clock (no allocation, no indirect call on the default path).
    now: Option<Arc<dyn Fn() -> SystemTime + Send + Sync>>,
}

impl WallClock {
    /// The system clock.
    #[must_use]
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that reads `now`.
    #[must_use]
    pub fn from_fn(now: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        Self {
            now: Some(Arc::new(now)),
        }
    }

    /// The current time.
    pub fn now(&self) -> SystemTime {
        self.now.as_ref().map_or_else(SystemTime::now, |now| now())
    }

    /// Whole seconds since the Unix epoch (0 before it).
    pub fn unix_secs(&self) -> u64 {
        self.now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default()
    }
}

impl fmt::Debug for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.now.is_some() {
            "WallClock(custom)"
        } else {
            "WallClock(system)"
        })
    }
}
