//! [`BreakerError`]: the error of [`BreakerService`](crate::BreakerService).

use std::any::Any;
use std::error::Error;
use std::fmt;
use std::io;
use std::time::Duration;

use mcp_core::outcome::{FailureKind, FailureKindOf, NeverSent};

use crate::CircuitOpen;

/// The error of a service behind a [`BreakerLayer`](crate::BreakerLayer): the breaker refused the
/// call, or the inner service failed.
#[derive(Debug)]
pub enum BreakerError<E> {
    /// The breaker is open; the inner service was not called.
    Open {
        /// How long until the breaker may admit a call (see [`CircuitOpen::retry_after`]).
        retry_after: Duration,
    },
    /// The inner service's error, unchanged.
    Inner(E),
}

impl<E> BreakerError<E> {
    /// Whether the breaker refused the call.
    pub fn is_open(&self) -> bool {
        matches!(self, Self::Open { .. })
    }

    /// The wait of an [`Open`](Self::Open) error.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Open { retry_after } => Some(*retry_after),
            Self::Inner(_) => None,
        }
    }

    /// The inner error, if the inner service failed.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Self::Open { .. } => None,
            Self::Inner(e) => Some(e),
        }
    }
}

impl<E> From<CircuitOpen> for BreakerError<E> {
    fn from(open: CircuitOpen) -> Self {
        Self::Open {
            retry_after: open.retry_after(),
        }
    }
}

impl<E: fmt::Display> fmt::Display for BreakerError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open { retry_after } => {
                write!(f, "circuit open; retry after {retry_after:?}")
            }
            Self::Inner(e) => e.fmt(f),
        }
    }
}

/// `E: Debug + Display` rather than `E: Error`, so that `BreakerError<BoxError>` is an error too
/// and the breaker composes inside tower's `Timeout`, `Buffer` and other `Into<BoxError>` stacks.
/// The inner error's message is the `Display`; reach the inner error itself (and its `source`
/// chain) with [`into_inner`](BreakerError::into_inner) or by matching [`Inner`](BreakerError::Inner).
///
/// An [`Open`](BreakerError::Open) error's `source` is `mcp-core`'s [`NeverSent`] marker, and an
/// [`Inner`](BreakerError::Inner) boxed error's or `io::Error`'s is that error, so that
/// `failure_kind_of_error` finds a refusal or a refused connection in a boxed error chain.
impl<E: fmt::Debug + fmt::Display + 'static> Error for BreakerError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Open { .. } => Some(&NeverSent),
            Self::Inner(e) => {
                let e: &dyn Any = e;
                if let Some(boxed) = e.downcast_ref::<Box<dyn Error + Send + Sync>>() {
                    Some(&**boxed)
                } else if let Some(io) = e.downcast_ref::<io::Error>() {
                    Some(io)
                } else {
                    None
                }
            }
        }
    }
}

/// `Open` never reached the inner service; `Inner` is the inner error's kind.
impl<E: FailureKindOf> FailureKindOf for BreakerError<E> {
    fn failure_kind(&self) -> FailureKind {
        match self {
            Self::Open { .. } => FailureKind::NeverSent,
            Self::Inner(e) => e.failure_kind(),
        }
    }
}
