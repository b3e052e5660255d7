//! [`FallbackLayer`] and [`HttpFallbackLayer`], with their builder methods.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use tower_layer::Layer;

use crate::future::{HttpAnswer, Shared};
use crate::{
    ErrorDetector, Fallback, HttpDetector, HttpFallback, McpReplay, NeverSentOnly, NoStale,
};

/// The default timeout of the fallback path (alternates and stale step together): 10 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Wraps a service in a [`Fallback`]: on a failure, alternates in priority order, then a stale
/// answer, then the primary's own error. For client stacks (any request and response type).
///
/// | builder | default |
/// |---|---|
/// | [`new`](Self::new)`(alternates)` / [`alternate`](Self::alternate) | the alternates, in priority order (may be empty) |
/// | [`detector`](Self::detector) | [`ErrorDetector`]: `Err` is a failure, kind from [`FailureKindOf`](crate::FailureKindOf) |
/// | [`replay`](Self::replay) | [`NeverSentOnly`]; [`McpReplay`] for MCP requests, or any `Fn(&Req, &FailureInfo) -> bool` |
/// | [`stale`](Self::stale) | [`NoStale`]; e.g. a [`CacheSource`](crate::CacheSource) |
/// | [`timeout`](Self::timeout) | [`DEFAULT_TIMEOUT`] for the whole fallback path |
///
/// See the [crate docs](crate) for an example.
#[derive(Debug, Clone)]
pub struct FallbackLayer<A, D = ErrorDetector, P = NeverSentOnly, St = NoStale> {
    alternates: Vec<A>,
    detector: D,
    replay: P,
    stale: St,
    timeout: Duration,
}

impl<A> FallbackLayer<A> {
    /// A layer with these alternates (tried in this order) and the defaults.
    pub fn new(alternates: impl IntoIterator<Item = A>) -> Self {
        Self {
            alternates: alternates.into_iter().collect(),
            detector: ErrorDetector,
            replay: NeverSentOnly,
            stale: NoStale,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl<A, D, P, St> FallbackLayer<A, D, P, St> {
    /// Appends an alternate (lowest priority so far).
    #[must_use]
    pub fn alternate(mut self, alternate: A) -> Self {
        self.alternates.push(alternate);
        self
    }

    /// Replaces the failure detector (any [`DetectFailure`](crate::DetectFailure), e.g. a
    /// closure or [`FromClassify`](crate::FromClassify)).
    #[must_use]
    pub fn detector<D2>(self, detector: D2) -> FallbackLayer<A, D2, P, St> {
        FallbackLayer {
            alternates: self.alternates,
            detector,
            replay: self.replay,
            stale: self.stale,
            timeout: self.timeout,
        }
    }

    /// Replaces the replay guard (any [`ReplayPolicy`](crate::ReplayPolicy)).
    #[must_use]
    pub fn replay<P2>(self, replay: P2) -> FallbackLayer<A, D, P2, St> {
        FallbackLayer {
            alternates: self.alternates,
            detector: self.detector,
            replay,
            stale: self.stale,
            timeout: self.timeout,
        }
    }

    /// Sets the stale source (any [`StaleSource`](crate::StaleSource)).
    #[must_use]
    pub fn stale<St2>(self, stale: St2) -> FallbackLayer<A, D, P, St2> {
        FallbackLayer {
            alternates: self.alternates,
            detector: self.detector,
            replay: self.replay,
            stale,
            timeout: self.timeout,
        }
    }

    /// Bounds the fallback path: from the primary's failure, alternates still running when it
    /// passes are dropped and the stale source (synchronous) is asked.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The alternates, in priority order.
    pub fn alternates(&self) -> &[A] {
        &self.alternates
    }

    fn shared(&self) -> Arc<Shared<A, D, P, St>>
    where
        A: Clone,
        D: Clone,
        P: Clone,
        St: Clone,
    {
        Arc::new(Shared {
            alternates: self.alternates.clone(),
            detector: self.detector.clone(),
            replay: self.replay.clone(),
            stale: self.stale.clone(),
            timeout: self.timeout,
        })
    }
}

impl<S, A: Clone, D: Clone, P: Clone, St: Clone> Layer<S> for FallbackLayer<A, D, P, St> {
    type Service = Fallback<S, A, D, P, St>;

    fn layer(&self, primary: S) -> Self::Service {
        Fallback::from_shared(primary, self.shared())
    }
}

/// Wraps an HTTP service in an [`HttpFallback`]: like [`FallbackLayer`], with HTTP defaults
/// ([`HttpDetector`], [`McpReplay`]), answers from alternates and the stale source marked with a
/// [`FallbackReport`](crate::FallbackReport) extension, and, when everything failed, a JSON-RPC
/// error response instead of the primary's error or 5xx:
///
/// - status [`error_status`](Self::error_status) (default `502 Bad Gateway`), or `503` with
///   its `Retry-After` when the primary's answer was a refusal before sending (a circuit
///   breaker's open answer, marked with `mcp-core`'s [`NeverSent`](mcp_core::outcome::NeverSent)
///   extension; the answer's extensions, the breaker's `CircuitOpen` among them, are kept);
/// - `Content-Type: application/json`;
/// - body `{"jsonrpc":"2.0","id":<the mcp_core::RequestId request extension, else null>,"error":{"code":-32603,"message":"Backend <name> unavailable (no alternate or cached answer)","data":{"failure":"never_sent"|"maybe_received","alternates_tried":n,"timed_out":bool}}}`;
/// - the [`FallbackReport`](crate::FallbackReport) (with [`ServedBy::Exhausted`](crate::ServedBy::Exhausted)) in the extensions.
#[derive(Debug, Clone)]
pub struct HttpFallbackLayer<A, D = HttpDetector, P = McpReplay, St = NoStale> {
    inner: FallbackLayer<A, D, P, St>,
    answer: HttpAnswer,
}

impl<A> HttpFallbackLayer<A> {
    /// A layer for the backend `name` (named in the error answer) with these alternates.
    pub fn new(name: impl Into<Arc<str>>, alternates: impl IntoIterator<Item = A>) -> Self {
        Self {
            inner: FallbackLayer::new(alternates)
                .detector(HttpDetector)
                .replay(McpReplay),
            answer: HttpAnswer {
                backend: name.into(),
                status: StatusCode::BAD_GATEWAY,
            },
        }
    }
}

impl<A, D, P, St> HttpFallbackLayer<A, D, P, St> {
    /// Appends an alternate (lowest priority so far).
    #[must_use]
    pub fn alternate(self, alternate: A) -> Self {
        Self {
            inner: self.inner.alternate(alternate),
            answer: self.answer,
        }
    }

    /// Replaces the failure detector.
    #[must_use]
    pub fn detector<D2>(self, detector: D2) -> HttpFallbackLayer<A, D2, P, St> {
        HttpFallbackLayer {
            inner: self.inner.detector(detector),
            answer: self.answer,
        }
    }

    /// Replaces the replay guard.
    #[must_use]
    pub fn replay<P2>(self, replay: P2) -> HttpFallbackLayer<A, D, P2, St> {
        HttpFallbackLayer {
            inner: self.inner.replay(replay),
            answer: self.answer,
        }
    }

    /// Sets the stale source.
    #[must_use]
    pub fn stale<St2>(self, stale: St2) -> HttpFallbackLayer<A, D, P, St2> {
        HttpFallbackLayer {
            inner: self.inner.stale(stale),
            answer: self.answer,
        }
    }

    /// Bounds the fallback path (see [`FallbackLayer::timeout`]).
    #[must_use]
    pub fn timeout(self, timeout: Duration) -> Self {
        Self {
            inner: self.inner.timeout(timeout),
            answer: self.answer,
        }
    }

    /// The HTTP status of the error answer when everything failed (default 502).
    #[must_use]
    pub fn error_status(mut self, status: StatusCode) -> Self {
        self.answer.status = status;
        self
    }

    /// The alternates, in priority order.
    pub fn alternates(&self) -> &[A] {
        self.inner.alternates()
    }
}

impl<S, A: Clone, D: Clone, P: Clone, St: Clone> Layer<S> for HttpFallbackLayer<A, D, P, St> {
    type Service = HttpFallback<S, A, D, P, St>;

    fn layer(&self, primary: S) -> Self::Service {
        HttpFallback::from_shared(primary, self.inner.shared(), self.answer.clone())
    }
}
