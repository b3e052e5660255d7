//! What counts as a failure and of which kind: [`FailureInfo`], [`DetectFailure`] with
//! [`ErrorDetector`], [`HttpDetector`] and [`FromClassify`]. The kinds themselves
//! ([`FailureKind`], [`FailureKindOf`]) are `mcp-core`'s, shared with circuit breakers.

use std::time::Duration;

use mcp_core::outcome::{
    Classify, FailureKind, FailureKindOf, NeverSent, Outcome, classify_mcp_head,
};

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
/// | a response [`classify_mcp_head`] calls a failure, carrying `mcp-core`'s [`NeverSent`] extension (the 503 of `mcp_breaker::HttpBreakerService`) | [`FailureKind::NeverSent`] |
/// | any other response `classify_mcp_head` calls a failure (5xx, 408, 429, 3xx, a 2xx that is not JSON or SSE) | [`FailureKind::MaybeReceived`] |
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
            Ok(res) => match classify_mcp_head(res.status(), res.headers()) {
                Outcome::Failure if res.extensions().get::<NeverSent>().is_some() => {
                    Some(FailureKind::NeverSent)
                }
                Outcome::Failure => Some(FailureKind::MaybeReceived),
                Outcome::Success | Outcome::Ignore => None,
            },
        }
    }
}

/// Reuses a [`Classify`] (`mcp-core`'s, which `mcp_breaker`'s classifiers implement): [`Outcome::Failure`] is a failure (an `Err`'s kind from
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
