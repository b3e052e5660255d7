//! Sliding windows of call outcomes: a count-based ring and time-based one-second buckets.
//! Both keep running totals, so recording and reading are O(1) (a time window may clear up to
//! `size` buckets when it was idle, which is amortised over the calls that filled them).

use tokio::time::Instant;

use crate::config::{WindowConfig, WindowKind};

/// Calls, failures and slow calls in a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) calls: u32,
    pub(crate) failures: u32,
    pub(crate) slow: u32,
}

impl Counts {
    fn add(&mut self, failure: bool, slow: bool) {
        self.calls += 1;
        self.failures += u32::from(failure);
        self.slow += u32::from(slow);
    }

    fn sub(&mut self, other: Counts) {
        self.calls -= other.calls;
        self.failures -= other.failures;
        self.slow -= other.slow;
    }
}

const FAILURE: u8 = 1;
const SLOW: u8 = 2;

#[derive(Debug)]
pub(crate) enum Window {
    Count(CountWindow),
    Time(TimeWindow),
}

impl Window {
    pub(crate) fn new(config: WindowConfig, now: Instant) -> Self {
        let size = config.size.max(1) as usize;
        match config.kind {
            WindowKind::Count => Self::Count(CountWindow {
                slots: vec![0; size].into_boxed_slice(),
                next: 0,
                len: 0,
                counts: Counts::default(),
            }),
            WindowKind::Time => Self::Time(TimeWindow {
                buckets: vec![Counts::default(); size].into_boxed_slice(),
                epoch: now,
                newest: 0,
                counts: Counts::default(),
            }),
        }
    }

    pub(crate) fn record(&mut self, now: Instant, failure: bool, slow: bool) {
        match self {
            Self::Count(w) => w.record(failure, slow),
            Self::Time(w) => w.record(now, failure, slow),
        }
    }

    pub(crate) fn counts(&mut self, now: Instant) -> Counts {
        match self {
            Self::Count(w) => w.counts,
            Self::Time(w) => {
                w.advance(now);
                w.counts
            }
        }
    }

    pub(crate) fn clear(&mut self, now: Instant) {
        match self {
            Self::Count(w) => {
                w.slots.fill(0);
                w.next = 0;
                w.len = 0;
                w.counts = Counts::default();
            }
            Self::Time(w) => {
                w.buckets.fill(Counts::default());
                w.epoch = now;
                w.newest = 0;
                w.counts = Counts::default();
            }
        }
    }
}

/// The last `slots.len()` outcomes; the oldest is evicted (subtracted) when a new one arrives.
#[derive(Debug)]
pub(crate) struct CountWindow {
    slots: Box<[u8]>,
    next: usize,
    len: usize,
    counts: Counts,
}

impl CountWindow {
    fn record(&mut self, failure: bool, slow: bool) {
        if self.len == self.slots.len() {
            let old = self.slots[self.next];
            self.counts.sub(Counts {
                calls: 1,
                failures: u32::from(old & FAILURE != 0),
                slow: u32::from(old & SLOW != 0),
            });
        } else {
            self.len += 1;
        }
        self.slots[self.next] = (if failure { FAILURE } else { 0 }) | (if slow { SLOW } else { 0 });
        self.counts.add(failure, slow);
        self.next = (self.next + 1) % self.slots.len();
    }
}

/// One bucket per second since `epoch`; bucket `s % len` holds second `s`. `newest` is the latest
/// second seen; buckets older than `newest − len + 1` are cleared (subtracted) when time moves on.
#[derive(Debug)]
pub(crate) struct TimeWindow {
    buckets: Box<[Counts]>,
    epoch: Instant,
    newest: u64,
    counts: Counts,
}

impl TimeWindow {
    fn advance(&mut self, now: Instant) {
        let second = now.saturating_duration_since(self.epoch).as_secs();
        if second <= self.newest {
            return;
        }
        let len = self.buckets.len() as u64;
        let steps = (second - self.newest).min(len);
        for i in 1..=steps {
            let idx = ((self.newest + i) % len) as usize;
            let evicted = std::mem::take(&mut self.buckets[idx]);
            self.counts.sub(evicted);
        }
        self.newest = second;
    }

    fn record(&mut self, now: Instant, failure: bool, slow: bool) {
        self.advance(now);
        let idx = (self.newest % self.buckets.len() as u64) as usize;
        self.buckets[idx].add(failure, slow);
        self.counts.add(failure, slow);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn c(calls: u32, failures: u32, slow: u32) -> Counts {
        Counts {
            calls,
            failures,
            slow,
        }
    }

    #[test]
    fn count_window_evicts_the_oldest() {
        let now = Instant::now();
        let mut w = Window::new(
            WindowConfig {
                kind: WindowKind::Count,
                size: 3,
            },
            now,
        );
        w.record(now, true, false);
        w.record(now, true, true);
        assert_eq!(w.counts(now), c(2, 2, 1));
        w.record(now, false, false);
        assert_eq!(w.counts(now), c(3, 2, 1));
        w.record(now, false, false); // evicts the first failure
        assert_eq!(w.counts(now), c(3, 1, 1));
        w.record(now, false, false); // evicts the slow failure
        assert_eq!(w.counts(now), c(3, 0, 0));
        for _ in 0..10 {
            w.record(now, true, false);
        }
        assert_eq!(w.counts(now), c(3, 3, 0));
        w.clear(now);
        assert_eq!(w.counts(now), c(0, 0, 0));
        w.record(now, true, false);
        assert_eq!(w.counts(now), c(1, 1, 0));
    }

    #[test]
    fn time_window_evicts_by_second() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = Window::new(
            WindowConfig {
                kind: WindowKind::Time,
                size: 3,
            },
            t0,
        );
        w.record(at(0), true, false);
        w.record(at(999), true, true);
        w.record(at(1_500), false, false);
        assert_eq!(w.counts(at(1_500)), c(3, 2, 1));
        // second 0 is still in the window through second 2
        assert_eq!(w.counts(at(2_999)), c(3, 2, 1));
        // at second 3 the bucket of second 0 is gone
        assert_eq!(w.counts(at(3_000)), c(1, 0, 0));
        w.record(at(3_200), true, false);
        assert_eq!(w.counts(at(3_200)), c(2, 1, 0));
        // a long idle gap clears everything, touching each bucket once
        assert_eq!(w.counts(at(60_000)), c(0, 0, 0));
        w.record(at(60_001), false, true);
        assert_eq!(w.counts(at(60_001)), c(1, 0, 1));
        // reading at an earlier instant never goes backwards
        assert_eq!(w.counts(at(10)), c(1, 0, 1));
        w.clear(at(70_000));
        assert_eq!(w.counts(at(70_000)), c(0, 0, 0));
    }

    #[test]
    fn time_window_of_one_second() {
        let t0 = Instant::now();
        let mut w = Window::new(
            WindowConfig {
                kind: WindowKind::Time,
                size: 1,
            },
            t0,
        );
        w.record(t0, true, false);
        w.record(t0 + Duration::from_millis(500), true, false);
        assert_eq!(w.counts(t0 + Duration::from_millis(999)), c(2, 2, 0));
        assert_eq!(w.counts(t0 + Duration::from_secs(1)), c(0, 0, 0));
    }
}
