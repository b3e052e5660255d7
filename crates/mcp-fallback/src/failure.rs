//! What counts as a failure and of which kind: [`FailureInfo`], [`DetectFailure`] with
//! [`ErrorDetector`], [`HttpDetector`] and [`FromClassify`], and [`FailureKindOf`] for errors.

use std::convert::Infallible;
use std::error::Error;
use std::io;
use std::time::Duration;

use mcp_breaker::{BreakerError, CircuitOpen, Classify, McpClassifier, Outcome};

use crate::FailureKind;

/// Which call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Attempt {
    /// The primary service.
    Primary,
    /// The alternate at this index (0-based, in priority order).
    Alternate(usize),
}

/// One failed call, as the [`ReplayPolicy`](crate::ReplayPolicy) sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct FailureInfo {
    /// Whether the failed service may have received the request.
    pub kind: FailureKind,
    /// Which call failed.
    pub attempt: Attempt,
}

impl FailureInfo {
    /// A failure of `kind` on `attempt`.
    pub const fn new(kind: FailureKind, attempt: Attempt) -> Self {
        Self { kind, attempt }
    }

    /// A failure of the primary.
    pub const fn primary(kind: FailureKind) -> Self {
        Self::new(kind, Attempt::Primary)
    }
}

/// Decides whether a call's result is a failure that the fallback should handle, and of which
/// [`FailureKind`]; `None` means the result stands (it is returned as is, even an `Err`).
///
/// Implemented for closures `Fn(&Result<T, E>) -> Option<FailureKind>`:
///
/// ```
/// use mcp_fallback::{DetectFailure, FailureKind};
///
/// // a 503 from our own proxy means it never forwarded the request
/// let detect = |r: &Result<u16, ()>| match r {
///     Ok(503) => Some(FailureKind::NeverSent),
///     Ok(s) if *s >= 500 => Some(FailureKind::MaybeReceived),
///     Ok(_) => None,
///     Err(()) => Some(FailureKind::MaybeReceived),
/// };
/// assert_eq!(detect.detect(&Ok(200)), None);
/// assert_eq!(detect.detect(&Ok(503)), Some(FailureKind::NeverSent));
/// ```
pub trait DetectFailure<T, E> {
    /// The failure kind of `result`, or `None` when it is not a failure.
    fn detect(&self, result: &Result<T, E>) -> Option<FailureKind>;
}

impl<F, T, E> DetectFailure<T, E> for F
where
    F: Fn(&Result<T, E>) -> Option<FailureKind>,
{
    fn detect(&self, result: &Result<T, E>) -> Option<FailureKind> {
        self(result)
    }
}

/// The default detector of [`FallbackLayer`](crate::FallbackLayer): every `Err` is a failure, its
/// kind from [`FailureKindOf`]; every `Ok` stands.
#[derive(Debug, Clone, Copy, Default)]
pub struct ErrorDetector;

impl<T, E: FailureKindOf> DetectFailure<T, E> for ErrorDetector {
    fn detect(&self, result: &Result<T, E>) -> Option<FailureKind> {
        result.as_ref().err().map(FailureKindOf::failure_kind)
    }
}

/// The default detector of [`HttpFallbackLayer`](crate::HttpFallbackLayer), for
/// `Result<http::Response<B>, E>`:
///
/// | result | failure |
/// |---|---|
/// | `Err(e)` | `e.failure_kind()` ([`FailureKindOf`]) |
/// | a response [`McpClassifier::classify_head`] calls a failure, carrying a [`CircuitOpen`] extension (the 503 of `mcp_breaker::HttpBreakerService`) | [`FailureKind::NeverSent`] |
/// | any other response `McpClassifier::classify_head` calls a failure (5xx, 408, 429, 3xx, a 2xx that is not JSON or SSE) | [`FailureKind::MaybeReceived`] |
/// | any other response (2xx JSON/SSE, 202, 4xx) | none: it stands |
///
/// JSON-RPC errors and `isError` tool results live in 2xx bodies, so they stand, as they do for
/// the breaker.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpDetector;

impl<B, E: FailureKindOf> DetectFailure<http::Response<B>, E> for HttpDetector {
    fn detect(&self, result: &Result<http::Response<B>, E>) -> Option<FailureKind> {
        match result {
            Err(e) => Some(e.failure_kind()),
            Ok(res) => match McpClassifier::classify_head(res.status(), res.headers()) {
                Outcome::Failure if res.extensions().get::<CircuitOpen>().is_some() => {
                    Some(FailureKind::NeverSent)
                }
                Outcome::Failure => Some(FailureKind::MaybeReceived),
                Outcome::Success | Outcome::Ignore => None,
            },
        }
    }
}

/// Reuses an `mcp_breaker` [`Classify`]: [`Outcome::Failure`] is a failure (an `Err`'s kind from
/// [`FailureKindOf`], an `Ok`'s [`FailureKind::MaybeReceived`]); `Success` and `Ignore` stand.
///
/// The classifier sees a latency of zero: the breaker, not its classifier, judges slowness.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromClassify<C>(pub C);

impl<C, T, E> DetectFailure<T, E> for FromClassify<C>
where
    C: Classify<T, E>,
    E: FailureKindOf,
{
    fn detect(&self, result: &Result<T, E>) -> Option<FailureKind> {
        match self.0.classify(result, Duration::ZERO) {
            Outcome::Failure => Some(match result {
                Err(e) => e.failure_kind(),
                Ok(_) => FailureKind::MaybeReceived,
            }),
            Outcome::Success | Outcome::Ignore => None,
        }
    }
}

/// Whether an error means the request never reached its backend.
///
/// | error | kind |
/// |---|---|
/// | [`io::Error`] of kind `ConnectionRefused`, `AddrNotAvailable`, `HostUnreachable`, `NetworkUnreachable`, `NetworkDown` | `NeverSent` |
/// | any other [`io::Error`] (reset, broken pipe, timed out, …) | `MaybeReceived` |
/// | [`CircuitOpen`], [`BreakerError::Open`] | `NeverSent` |
/// | [`BreakerError::Inner`] | the inner error's kind |
/// | `Box<dyn Error + Send + Sync>` | [`failure_kind_of_error`] (searches the source chain) |
///
/// Implement it for your client's error type (the router's `UpstreamError` knows `never_sent()`).
/// When unsure, answer `MaybeReceived`: that only costs a replay, never runs a call twice.
pub trait FailureKindOf {
    /// This error's failure kind.
    fn failure_kind(&self) -> FailureKind;
}

impl FailureKindOf for io::Error {
    fn failure_kind(&self) -> FailureKind {
        io_kind(self)
    }
}

impl FailureKindOf for CircuitOpen {
    fn failure_kind(&self) -> FailureKind {
        FailureKind::NeverSent
    }
}

impl<E: FailureKindOf> FailureKindOf for BreakerError<E> {
    fn failure_kind(&self) -> FailureKind {
        match self {
            Self::Open { .. } => FailureKind::NeverSent,
            Self::Inner(e) => e.failure_kind(),
        }
    }
}

impl FailureKindOf for Box<dyn Error + Send + Sync> {
    fn failure_kind(&self) -> FailureKind {
        failure_kind_of_error(&**self)
    }
}

impl FailureKindOf for Infallible {
    fn failure_kind(&self) -> FailureKind {
        match *self {}
    }
}

fn io_kind(e: &io::Error) -> FailureKind {
    use io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused | AddrNotAvailable | HostUnreachable | NetworkUnreachable
        | NetworkDown => FailureKind::NeverSent,
        _ => FailureKind::MaybeReceived,
    }
}

/// The failure kind of any error, from its [`source`](Error::source) chain: `NeverSent` when an
/// error in the chain is a never-sent [`io::Error`], a [`CircuitOpen`], or a
/// [`BreakerError::Open`] over `io::Error` or a boxed error; `MaybeReceived` otherwise.
///
/// hyper-util's client errors carry the connect `io::Error` as a source, so a refused
/// connection is recognised; DNS and TLS failures are not (their sources are not `io::Error`s
/// of those kinds): classify them in your own [`FailureKindOf`] when your client tells them apart.
///
/// ```
/// use std::io;
/// use mcp_fallback::{FailureKind, failure_kind_of_error};
///
/// let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
/// assert_eq!(failure_kind_of_error(&refused), FailureKind::NeverSent);
/// let reset = io::Error::from(io::ErrorKind::ConnectionReset);
/// assert_eq!(failure_kind_of_error(&reset), FailureKind::MaybeReceived);
/// // wrapped: found through `source()`
/// let wrapped = io::Error::other(refused);
/// assert_eq!(failure_kind_of_error(&wrapped), FailureKind::NeverSent);
/// ```
pub fn failure_kind_of_error(error: &(dyn Error + 'static)) -> FailureKind {
    let mut next = Some(error);
    while let Some(e) = next {
        if never_sent(e) {
            return FailureKind::NeverSent;
        }
        next = match e.downcast_ref::<io::Error>() {
            // `io::Error::source` skips the error it wraps (it returns that error's source).
            Some(io) => match io.get_ref() {
                Some(inner) => Some(inner as &(dyn Error + 'static)),
                None => e.source(),
            },
            None => e.source(),
        };
    }
    FailureKind::MaybeReceived
}

fn never_sent(e: &(dyn Error + 'static)) -> bool {
    if let Some(io) = e.downcast_ref::<io::Error>() {
        return io_kind(io) == FailureKind::NeverSent;
    }
    if e.is::<CircuitOpen>() {
        return true;
    }
    if let Some(b) = e.downcast_ref::<BreakerError<Box<dyn Error + Send + Sync>>>() {
        return b.failure_kind() == FailureKind::NeverSent;
    }
    if let Some(b) = e.downcast_ref::<BreakerError<io::Error>>() {
        return b.failure_kind() == FailureKind::NeverSent;
    }
    false
}
