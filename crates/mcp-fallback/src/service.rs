//! [`Fallback`] and [`HttpFallback`], the services the layers make.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use mcp_core::ResponseBody;
use tower_service::Service;

use crate::future::{HttpAnswer, Shared};
use crate::{
    DetectFailure, ErrorDetector, HttpDetector, HttpResponseFuture, McpReplay, NeverSentOnly,
    NoStale, ReplayPolicy, ResponseFuture, Served, StaleSource,
};

/// A primary `poll_ready` error kept for the next call (type-erased: the service types do not
/// name the request type; the `Service` impl that stores it is the one that takes it back).
#[derive(Default)]
struct ReadyError(Option<Box<dyn Any + Send + Sync>>);

impl ReadyError {
    /// The primary's readiness; an error is kept for the next call and reported as ready.
    fn poll<S, Req>(&mut self, primary: &mut S, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>>
    where
        S: Service<Req>,
        S::Error: Send + Sync + 'static,
    {
        if self.0.is_some() {
            return Poll::Ready(Ok(()));
        }
        match primary.poll_ready(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => {
                self.0 = Some(Box::new(e));
                Poll::Ready(Ok(()))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn take<E: 'static>(&mut self) -> Option<E> {
        let boxed = self.0.take()?;
        match boxed.downcast::<E>() {
            Ok(e) => Some(*e),
            // Only the `Service<Req>` impl that stored it takes it back, with the same type;
            // anything else is `call` without its own `poll_ready`.
            Err(_) => panic!("poll_ready and call used with different request types"),
        }
    }
}

impl fmt::Debug for ReadyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Some(primary readiness error)"
        } else {
            "None"
        })
    }
}

/// Middleware that answers from alternates, then from a stale source, when its primary fails.
///
/// - **Fast path**: the request is cloned once, the primary called; an answer that stands is
///   returned as [`Served`] with no report (and given to the stale source's `store`). No other
///   allocation.
/// - **Failure**: a result the detector calls a failure (default [`ErrorDetector`]: every `Err`)
///   starts the fallback path, bounded by its own timeout. Alternates are tried in order, each a
///   clone driven to readiness and then called, while the [`ReplayPolicy`] allows it after the
///   latest failure (default [`NeverSentOnly`]). Then the [`StaleSource`]. Then the primary's own
///   result: its error (Hystrix/Failsafe), or its failed answer with [`ServedBy::Exhausted`](crate::ServedBy::Exhausted).
/// - **Readiness**: `poll_ready` is the primary's and never fails: a primary `poll_ready` error
///   is kept and the next call goes straight to the fallback path with it as a
///   [`NeverSent`](crate::FailureKind::NeverSent) failure of the primary (the primary's readiness
///   is polled again for the call after). Alternates never affect `poll_ready`. This is why the
///   error type must be `Send + Sync + 'static` (it is kept between `poll_ready` and `call`).
///
/// See the [crate docs](crate) for an example.
pub struct Fallback<S, A, D = ErrorDetector, P = NeverSentOnly, St = NoStale> {
    primary: S,
    shared: Arc<Shared<A, D, P, St>>,
    ready_error: ReadyError,
}

impl<S, A> Fallback<S, A> {
    /// Wraps `primary` with `alternates` and the defaults of [`FallbackLayer`](crate::FallbackLayer)
    /// (use the layer's builder for anything else).
    pub fn new(primary: S, alternates: impl IntoIterator<Item = A>) -> Self {
        Self::from_shared(
            primary,
            Arc::new(Shared {
                alternates: alternates.into_iter().collect(),
                detector: ErrorDetector,
                replay: NeverSentOnly,
                stale: NoStale,
                timeout: crate::DEFAULT_TIMEOUT,
            }),
        )
    }
}

impl<S, A, D, P, St> Fallback<S, A, D, P, St> {
    pub(crate) fn from_shared(primary: S, shared: Arc<Shared<A, D, P, St>>) -> Self {
        Self {
            primary,
            shared,
            ready_error: ReadyError::default(),
        }
    }

    /// The alternates, in priority order.
    pub fn alternates(&self) -> &[A] {
        &self.shared.alternates
    }

    /// The primary service.
    pub fn get_ref(&self) -> &S {
        &self.primary
    }

    /// The primary service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.primary
    }

    /// Unwraps the primary service.
    pub fn into_inner(self) -> S {
        self.primary
    }
}

/// Clones share the alternates and the stale source; a kept readiness error stays with the
/// instance that saw it.
impl<S: Clone, A, D, P, St> Clone for Fallback<S, A, D, P, St> {
    fn clone(&self) -> Self {
        Self::from_shared(self.primary.clone(), Arc::clone(&self.shared))
    }
}

impl<S: fmt::Debug, A, D, P, St> fmt::Debug for Fallback<S, A, D, P, St> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("primary", &self.primary)
            .field("alternates", &self.shared.alternates.len())
            .field("timeout", &self.shared.timeout)
            .field("ready_error", &self.ready_error)
            .finish_non_exhaustive()
    }
}

impl<S, A, Req, D, P, St> Service<Req> for Fallback<S, A, D, P, St>
where
    S: Service<Req>,
    S::Error: Send + Sync + 'static,
    A: Service<Req, Response = S::Response, Error = S::Error> + Clone,
    Req: Clone,
    D: DetectFailure<S::Response, S::Error>,
    P: ReplayPolicy<Req>,
    St: StaleSource<Req, S::Response>,
{
    type Response = Served<S::Response>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, A, Req, D, P, St>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.ready_error.poll::<S, Req>(&mut self.primary, cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        match self.ready_error.take::<S::Error>() {
            Some(error) => ResponseFuture::not_ready(error, req, shared),
            None => ResponseFuture::primary(self.primary.call(req.clone()), req, shared),
        }
    }
}

/// [`Fallback`] for HTTP services: the same steps, but the answer is always an HTTP response
/// and the error type stays `S::Error` (fits hyper and axum as is).
///
/// - Defaults: [`HttpDetector`] (errors, 5xx, 408, 429, non-MCP 2xx, the breaker's 503) and
///   [`McpReplay`] (method from the `mcp_core::Method` extension or `Mcp-Method` header, tool
///   hints from the [`ToolHints`](crate::ToolHints) extension).
/// - An answer from an alternate or the stale source carries a [`FallbackReport`](crate::FallbackReport)
///   in its extensions; the primary's answers carry nothing.
/// - When everything failed the answer is a JSON-RPC error (see
///   [`HttpFallbackLayer`](crate::HttpFallbackLayer)), never the primary's error or 5xx.
pub struct HttpFallback<S, A, D = HttpDetector, P = McpReplay, St = NoStale> {
    inner: Fallback<S, A, D, P, St>,
    answer: HttpAnswer,
}

impl<S, A, D, P, St> HttpFallback<S, A, D, P, St> {
    pub(crate) fn from_shared(
        primary: S,
        shared: Arc<Shared<A, D, P, St>>,
        answer: HttpAnswer,
    ) -> Self {
        Self {
            inner: Fallback::from_shared(primary, shared),
            answer,
        }
    }

    /// The alternates, in priority order.
    pub fn alternates(&self) -> &[A] {
        self.inner.alternates()
    }

    /// The primary service.
    pub fn get_ref(&self) -> &S {
        self.inner.get_ref()
    }

    /// The primary service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        self.inner.get_mut()
    }

    /// Unwraps the primary service.
    pub fn into_inner(self) -> S {
        self.inner.into_inner()
    }
}

impl<S: Clone, A, D, P, St> Clone for HttpFallback<S, A, D, P, St> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            answer: self.answer.clone(),
        }
    }
}

impl<S: fmt::Debug, A, D, P, St> fmt::Debug for HttpFallback<S, A, D, P, St> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpFallback")
            .field("inner", &self.inner)
            .field("backend", &self.answer.backend)
            .field("status", &self.answer.status)
            .finish()
    }
}

impl<S, A, ReqBody, B, D, P, St> Service<Request<ReqBody>> for HttpFallback<S, A, D, P, St>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    S::Error: Send + Sync + 'static,
    A: Service<Request<ReqBody>, Response = Response<B>, Error = S::Error> + Clone,
    ReqBody: Clone,
    D: DetectFailure<Response<B>, S::Error>,
    P: ReplayPolicy<Request<ReqBody>>,
    St: StaleSource<Request<ReqBody>, Response<B>>,
{
    type Response = Response<ResponseBody<B>>;
    type Error = S::Error;
    type Future = HttpResponseFuture<S::Future, A, Request<ReqBody>, D, P, St>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let inner = &mut self.inner;
        inner
            .ready_error
            .poll::<S, Request<ReqBody>>(&mut inner.primary, cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let inner = &mut self.inner;
        let shared = Arc::clone(&inner.shared);
        let answer = self.answer.clone();
        match inner.ready_error.take::<S::Error>() {
            Some(error) => HttpResponseFuture::not_ready(error, req, shared, answer),
            None => {
                let future = inner.primary.call(req.clone());
                HttpResponseFuture::primary(future, req, shared, answer)
            }
        }
    }
}
