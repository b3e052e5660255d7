//! Who answered: [`ServedBy`], [`FallbackReport`] and the [`Served`] wrapper.

use std::time::Duration;

use crate::FailureInfo;

/// Which step of the fallback produced the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServedBy {
    /// The primary answered and its answer stands.
    Primary,
    /// The alternate at this index (0-based, in priority order) answered after the primary failed.
    Alternate(usize),
    /// The stale source answered; the answer was stored this long ago.
    Stale {
        /// Age of the stale answer.
        age: Duration,
    },
    /// Nothing could answer: the answer is the primary's own failed one (the generic layer) or the
    /// gateway's JSON-RPC error (the HTTP layer).
    Exhausted,
}

impl ServedBy {
    /// `primary`, `alternate`, `stale` or `exhausted` (a metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Alternate(_) => "alternate",
            Self::Stale { .. } => "stale",
            Self::Exhausted => "exhausted",
        }
    }
}

/// What the fallback did for one call whose primary failed.
///
/// The generic layer returns it inside [`Served`]; the HTTP layer puts it in the response
/// extensions. Calls the primary answered carry none (the fast path does not touch the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct FallbackReport {
    /// Who answered in the end (never [`ServedBy::Primary`]).
    pub by: ServedBy,
    /// How the primary failed.
    pub failure: FailureInfo,
    /// How many alternates were called (including the one that answered).
    pub alternates_tried: usize,
    /// Whether the fallback timeout cut the alternates short.
    pub timed_out: bool,
}

impl FallbackReport {
    /// Whether the answer is degraded: stale, or nothing but a failure.
    pub fn is_degraded(&self) -> bool {
        matches!(self.by, ServedBy::Stale { .. } | ServedBy::Exhausted)
    }
}

/// The answer of a [`Fallback`](crate::Fallback) service: the response, and a
/// [`FallbackReport`] when the primary failed.
#[derive(Debug, Clone)]
pub struct Served<R> {
    response: R,
    report: Option<FallbackReport>,
}

impl<R> Served<R> {
    pub(crate) fn new(response: R, report: Option<FallbackReport>) -> Self {
        Self { response, report }
    }

    /// Who answered.
    pub fn by(&self) -> ServedBy {
        self.report.map_or(ServedBy::Primary, |r| r.by)
    }

    /// What the fallback did (`None` when the primary answered).
    pub fn report(&self) -> Option<&FallbackReport> {
        self.report.as_ref()
    }

    /// Whether something other than the primary answered.
    pub fn is_fallback(&self) -> bool {
        self.report.is_some()
    }

    /// Whether the answer is a stale one.
    pub fn is_stale(&self) -> bool {
        matches!(self.by(), ServedBy::Stale { .. })
    }

    /// The response.
    pub fn response(&self) -> &R {
        &self.response
    }

    /// The response.
    pub fn into_inner(self) -> R {
        self.response
    }

    /// The response and the report.
    pub fn into_parts(self) -> (R, Option<FallbackReport>) {
        (self.response, self.report)
    }
}
