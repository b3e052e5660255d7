//! Wall-clock time in tests: [`unix_now`] (token `exp`/`nbf` claims) and [`ShiftedClock`], the
//! system time plus an offset the test moves forward, for components that take an injected wall
//! clock (`mcp_router::WallClock::from_fn`): a test steps past an absolute expiry instead of
//! sleeping until it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The system time plus an offset (milliseconds) shared by every clone.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use mcp_test_support::ShiftedClock;
///
/// let clock = ShiftedClock::new();
/// let reader = clock.clone();
/// clock.advance(Duration::from_secs(3600));
/// assert!(reader.now() > SystemTime::now() + Duration::from_secs(3599));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ShiftedClock {
    offset_ms: Arc<AtomicU64>,
}

impl ShiftedClock {
    /// A clock reading the system time (no offset yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves this clock and all its clones forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// The system time plus the offset.
    pub fn now(&self) -> SystemTime {
        SystemTime::now() + Duration::from_millis(self.offset_ms.load(Ordering::Relaxed))
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}
