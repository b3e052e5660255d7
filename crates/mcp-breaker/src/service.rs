//! [`BreakerService`] and [`HttpBreakerService`], and the 503 answer of the latter.

use std::task::{Context, Poll};

use http::{HeaderValue, Response, StatusCode, header};
use mcp_core::outcome::NeverSent;
use mcp_core::{APPLICATION_JSON, ResponseBody, encode_error};
use tower_service::Service;

use crate::{
    BreakerError, CircuitBreaker, CircuitOpen, DefaultClassifier, HttpResponseFuture,
    McpClassifier, ResponseFuture, Settle,
};

/// Middleware that asks its [`CircuitBreaker`] before every call and records every outcome.
///
/// `poll_ready` only forwards the inner service's readiness (never an "open" error: axum and
/// hyper treat `poll_ready` errors as fatal). In `call`, an open breaker yields a future that
/// resolves at once to [`BreakerError::Open`]; otherwise the permit moves into the response
/// future, which classifies the result when it completes. A response future dropped before it
/// completes records nothing (a half-open probe slot is released).
///
/// The inner service was polled ready but not called when the breaker rejects; a readiness
/// reservation it holds (a concurrency permit, a buffer slot) is kept for the next call.
#[derive(Debug, Clone)]
pub struct BreakerService<S, C = DefaultClassifier> {
    inner: S,
    breaker: CircuitBreaker,
    classifier: C,
}

impl<S> BreakerService<S> {
    /// Wraps `inner` with the [`DefaultClassifier`].
    pub fn new(inner: S, breaker: CircuitBreaker) -> Self {
        Self {
            inner,
            breaker,
            classifier: DefaultClassifier,
        }
    }
}

impl<S, C> BreakerService<S, C> {
    /// Replaces the classifier.
    #[must_use]
    pub fn with_classifier<C2>(self, classifier: C2) -> BreakerService<S, C2> {
        BreakerService {
            inner: self.inner,
            breaker: self.breaker,
            classifier,
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, Req> Service<Req> for BreakerService<S, C>
where
    S: Service<Req>,
    C: Settle<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = BreakerError<S::Error>;
    type Future = ResponseFuture<S::Future, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(BreakerError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self.breaker.try_acquire() {
            Ok(permit) => {
                ResponseFuture::called(self.inner.call(req), permit, self.classifier.clone())
            }
            Err(open) => ResponseFuture::rejected(open.retry_after()),
        }
    }
}

/// Middleware like [`BreakerService`] for HTTP services: an open breaker answers with
/// [`open_response`] (503, `Retry-After`, JSON-RPC error body) and the error type stays `S::Error`.
#[derive(Debug, Clone)]
pub struct HttpBreakerService<S, C = McpClassifier> {
    inner: S,
    breaker: CircuitBreaker,
    classifier: C,
}

impl<S> HttpBreakerService<S> {
    /// Wraps `inner` with the [`McpClassifier`].
    pub fn new(inner: S, breaker: CircuitBreaker) -> Self {
        Self {
            inner,
            breaker,
            classifier: McpClassifier,
        }
    }
}

impl<S, C> HttpBreakerService<S, C> {
    /// Replaces the classifier.
    #[must_use]
    pub fn with_classifier<C2>(self, classifier: C2) -> HttpBreakerService<S, C2> {
        HttpBreakerService {
            inner: self.inner,
            breaker: self.breaker,
            classifier,
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, Req, ResBody> Service<Req> for HttpBreakerService<S, C>
where
    S: Service<Req, Response = Response<ResBody>>,
    C: Settle<Response<ResBody>, S::Error> + Clone,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = HttpResponseFuture<S::Future, C, ResBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self.breaker.try_acquire() {
            Ok(permit) => {
                HttpResponseFuture::called(self.inner.call(req), permit, self.classifier.clone())
            }
            Err(open) => HttpResponseFuture::rejected(open_response(&open)),
        }
    }
}

/// The answer of an open [`HttpBreakerService`]:
///
/// - status `503 Service Unavailable`;
/// - `Retry-After: <seconds>` ([`CircuitOpen::retry_after_secs`]: rounded up, at least 1);
/// - `Content-Type: application/json`;
/// - body `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Backend <name> unavailable (circuit open)"}}`
///   (the request is not read, so the id is `null`);
/// - the [`CircuitOpen`] in the response extensions, for outer layers (metrics), and `mcp-core`'s
///   [`NeverSent`] marker (a fallback replays the call elsewhere).
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Empty};
/// use mcp_breaker::{CircuitBreaker, CircuitOpen, open_response};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let breaker = CircuitBreaker::builder("weather").build().unwrap();
/// breaker.handle().force_open();
/// let open = breaker.try_acquire().unwrap_err();
/// let res = open_response::<Empty<Bytes>>(&open);
/// assert_eq!(res.status(), 503);
/// assert_eq!(res.headers()["retry-after"], "5");
/// assert!(res.extensions().get::<CircuitOpen>().is_some());
/// let body = res.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(body, r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Backend weather unavailable (circuit open)"}}"#);
/// # }
/// ```
pub fn open_response<B>(open: &CircuitOpen) -> Response<ResponseBody<B>> {
    let body = encode_error(None, &open.error_object());
    let mut res = Response::new(ResponseBody::local(body));
    *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = res.headers_mut();
    headers.insert(header::CONTENT_TYPE, APPLICATION_JSON);
    headers.insert(
        header::RETRY_AFTER,
        HeaderValue::from(open.retry_after_secs()),
    );
    res.extensions_mut().insert(open.clone());
    res.extensions_mut().insert(NeverSent);
    res
}
