//! What a finished backend call means, shared by the circuit breaker (`mcp-breaker`: healthy or
//! not, [`Outcome`] via [`Classify`]) and the fallback (`mcp-fallback`: may the request be sent
//! elsewhere, [`FailureKind`] via [`FailureKindOf`]). Both crates build on these pieces instead of
//! on each other: a breaker marks the calls it refuses with [`NeverSent`] (a response extension,
//! and a `source()` of its errors), and the fallback finds that marker without knowing the
//! breaker's types.

use std::convert::Infallible;
use std::error::Error;
use std::fmt;
use std::io;
use std::time::Duration;

use http::{HeaderMap, StatusCode, header};

use crate::media::{MediaKind, media_kind};

/// What a finished call means for the backend's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The backend did its job (it may still count as slow).
    Success,
    /// The backend is unhealthy: counts towards tripping; in half-open it reopens the breaker.
    Failure,
    /// Says nothing about the backend's health: not recorded (a probe's slot is released).
    Ignore,
}

impl Outcome {
    /// `success`, `failure` or `ignored` (the `outcome` label of `mcp_breaker_calls_total`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Ignore => "ignored",
        }
    }
}

/// Decides the [`Outcome`] of a call from its result and latency.
///
/// Implemented for closures `Fn(&Result<T, E>, Duration) -> Outcome`:
///
/// ```
/// use std::time::Duration;
/// use mcp_core::outcome::{Classify, Outcome};
///
/// // 404s are the caller's fault, not the backend's
/// let c = |r: &Result<u16, ()>, _latency: Duration| match r {
///     Ok(404) => Outcome::Ignore,
///     Ok(s) if *s >= 500 => Outcome::Failure,
///     Ok(_) => Outcome::Success,
///     Err(()) => Outcome::Failure,
/// };
/// assert_eq!(c.classify(&Ok(404), Duration::ZERO), Outcome::Ignore);
/// assert_eq!(c.classify(&Err(()), Duration::ZERO), Outcome::Failure);
/// ```
///
/// Slow calls need no classifier: a breaker compares the latency with its own threshold.
pub trait Classify<T, E> {
    /// The outcome of one call.
    fn classify(&self, result: &Result<T, E>, latency: Duration) -> Outcome;
}

impl<F, T, E> Classify<T, E> for F
where
    F: Fn(&Result<T, E>, Duration) -> Outcome,
{
    fn classify(&self, result: &Result<T, E>, latency: Duration) -> Outcome {
        self(result, latency)
    }
}

/// The outcome of an MCP backend's response head (book: docs/src/architecture.md): 5xx, 408, 429 and 3xx are
/// failures; 202, 204 and other non-2xx are successes (the backend answered); any other 2xx is a
/// success only when it is JSON or an event stream (or empty, `Content-Length: 0`).
///
/// ```
/// use http::{HeaderMap, HeaderValue, StatusCode, header};
/// use mcp_core::outcome::{Outcome, classify_mcp_head};
///
/// let mut json = HeaderMap::new();
/// json.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
/// assert_eq!(classify_mcp_head(StatusCode::OK, &json), Outcome::Success);
/// assert_eq!(classify_mcp_head(StatusCode::OK, &HeaderMap::new()), Outcome::Failure);
/// assert_eq!(classify_mcp_head(StatusCode::BAD_GATEWAY, &json), Outcome::Failure);
/// assert_eq!(classify_mcp_head(StatusCode::NOT_FOUND, &HeaderMap::new()), Outcome::Success);
/// ```
pub fn classify_mcp_head(status: StatusCode, headers: &HeaderMap) -> Outcome {
    if status.is_server_error()
        || status.is_redirection()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
    {
        return Outcome::Failure;
    }
    if !status.is_success() || status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
        return Outcome::Success;
    }
    match media_kind(headers) {
        MediaKind::Json | MediaKind::EventStream => Outcome::Success,
        MediaKind::Other
            if !headers.contains_key(header::CONTENT_TYPE)
                && headers
                    .get(header::CONTENT_LENGTH)
                    .is_some_and(|v| v.as_bytes() == b"0") =>
        {
            Outcome::Success
        }
        MediaKind::Other => Outcome::Failure,
    }
}

/// Whether the backend that failed may have received the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The backend provably never received the request: connection refused, DNS or TLS failure,
    /// breaker open, the service was not ready. Sending it elsewhere cannot run it twice.
    NeverSent,
    /// The backend may have received (and executed) the request: timeout, connection reset
    /// mid-flight, 5xx, malformed answer. Only safe to send elsewhere when the call is a read or
    /// idempotent.
    MaybeReceived,
}

impl FailureKind {
    /// `never_sent` or `maybe_received` (for logs and metric labels).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NeverSent => "never_sent",
            Self::MaybeReceived => "maybe_received",
        }
    }
}

/// The marker of a call refused before it was sent (an open circuit breaker): a response
/// extension on a locally generated refusal, and an error in the `source()` chain of a refusal
/// error. [`failure_kind_of_error`] and fallbacks read it as [`FailureKind::NeverSent`].
///
/// ```
/// use mcp_core::outcome::{FailureKind, NeverSent, failure_kind_of_error};
///
/// assert_eq!(failure_kind_of_error(&NeverSent), FailureKind::NeverSent);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NeverSent;

impl fmt::Display for NeverSent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the call was refused before it was sent")
    }
}

impl Error for NeverSent {}

/// Whether an error means the request never reached its backend.
///
/// | error | kind |
/// |---|---|
/// | [`io::Error`] of kind `ConnectionRefused`, `AddrNotAvailable`, `HostUnreachable`, `NetworkUnreachable`, `NetworkDown` | `NeverSent` |
/// | any other [`io::Error`] (reset, broken pipe, timed out, …) | `MaybeReceived` |
/// | [`NeverSent`] | `NeverSent` |
/// | `Box<dyn Error + Send + Sync>` | [`failure_kind_of_error`] (searches the source chain) |
///
/// `mcp-breaker` implements it for its refusals (`CircuitOpen`, `BreakerError`); implement it for
/// your client's error type (the router's `UpstreamError` knows `never_sent()`). When unsure,
/// answer `MaybeReceived`: that only costs a replay, never runs a call twice.
pub trait FailureKindOf {
    /// This error's failure kind.
    fn failure_kind(&self) -> FailureKind;
}

impl FailureKindOf for io::Error {
    fn failure_kind(&self) -> FailureKind {
        io_kind(self)
    }
}

impl FailureKindOf for NeverSent {
    fn failure_kind(&self) -> FailureKind {
        FailureKind::NeverSent
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
/// error in the chain is a never-sent [`io::Error`] or a [`NeverSent`] marker (which a circuit
/// breaker's refusal carries); `MaybeReceived` otherwise.
///
/// hyper-util's client errors carry the connect `io::Error` as a source, so a refused
/// connection is recognised; DNS and TLS failures are not (their sources are not `io::Error`s
/// of those kinds): classify them in your own [`FailureKindOf`] when your client tells them apart.
///
/// ```
/// use std::io;
/// use mcp_core::outcome::{FailureKind, failure_kind_of_error};
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
        if e.is::<NeverSent>() {
            return FailureKind::NeverSent;
        }
        next = match e.downcast_ref::<io::Error>() {
            Some(io) if io_kind(io) == FailureKind::NeverSent => return FailureKind::NeverSent,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Refusal;

    impl fmt::Display for Refusal {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("refused")
        }
    }

    impl Error for Refusal {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&NeverSent)
        }
    }

    #[test]
    fn a_never_sent_source_is_found_in_a_boxed_chain() {
        let boxed: Box<dyn Error + Send + Sync> = Box::new(io::Error::other(Refusal));
        assert_eq!(boxed.failure_kind(), FailureKind::NeverSent);
        let other: Box<dyn Error + Send + Sync> = "boom".into();
        assert_eq!(other.failure_kind(), FailureKind::MaybeReceived);
    }

    #[test]
    fn empty_2xx_without_content_type_is_a_success() {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, http::HeaderValue::from_static("0"));
        assert_eq!(classify_mcp_head(StatusCode::OK, &h), Outcome::Success);
        h.insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/html"),
        );
        assert_eq!(classify_mcp_head(StatusCode::OK, &h), Outcome::Failure);
    }
}
