//! Time in tests: [`unix_now`] (token `exp`/`nbf` claims); [`ShiftedClock`], the system time plus
//! an offset the test moves forward, for components that take an injected wall clock
//! (`mcp_router::WallClock::from_fn`): a test steps past an absolute expiry instead of sleeping
//! until it; [`SteppedClock`], a monotonic clock that only moves when the test moves it, for
//! components that take an injected monotonic clock (`mcp_claims::JwksClock::from_fn`): a test
//! steps past an interval, however slow the machine is between two steps.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// An `Instant` that stands still until [`advance`](Self::advance) moves it (and all its clones).
///
/// ```
/// use std::time::Duration;
/// use mcp_test_support::SteppedClock;
///
/// let clock = SteppedClock::new();
/// let reader = clock.clone();
/// let start = reader.now();
/// assert_eq!(reader.now(), start);
/// clock.advance(Duration::from_secs(10));
/// assert_eq!(reader.now(), start + Duration::from_secs(10));
/// ```
#[derive(Debug, Clone)]
pub struct SteppedClock {
    start: Instant,
    moved_ms: Arc<AtomicU64>,
}

impl SteppedClock {
    /// A clock standing at the current instant.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            moved_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves this clock and all its clones forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.moved_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// The instant the clock was created at, plus every step.
    pub fn now(&self) -> Instant {
        self.start + Duration::from_millis(self.moved_ms.load(Ordering::SeqCst))
    }
}

impl Default for SteppedClock {
    fn default() -> Self {
        Self::new()
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}
