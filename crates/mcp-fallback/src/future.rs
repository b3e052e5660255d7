//! The response futures of [`Fallback`](crate::Fallback) and
//! [`HttpFallback`](crate::HttpFallback), and the fallback state machine they share.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{HeaderValue, Response, StatusCode, header};
use mcp_core::outcome::NeverSent;
use mcp_core::{APPLICATION_JSON, ErrorObject, RawObject, RequestId, ResponseBody, encode_error};
use pin_project_lite::pin_project;
use tokio::time::{Sleep, sleep};
use tower_service::Service;

use crate::{
    Attempt, DetectFailure, FailureInfo, FailureKind, FallbackReport, ReplayPolicy, Served,
    ServedBy, StaleSource,
};

/// What the layers share with every response future (one `Arc` per service).
#[derive(Debug)]
pub(crate) struct Shared<A, D, P, St> {
    pub(crate) alternates: Vec<A>,
    pub(crate) detector: D,
    pub(crate) replay: P,
    pub(crate) stale: St,
    pub(crate) timeout: Duration,
}

/// The state machine's answer: the result, and what the fallback did (`None`: the primary's
/// answer stands).
type Finished<R, E> = (Result<R, E>, Option<FallbackReport>);

pin_project! {
    /// Primary call, then (on a failure) alternates in order under the replay guard and the
    /// fallback deadline, then the stale source, then the primary's own result.
    #[project = CoreProj]
    struct Core<F, A, Req, D, P, St>
    where
        A: Service<Req>,
    {
        #[pin]
        state: State<F, A, A::Future>,
        // Started when the primary fails; bounds the whole fallback path.
        #[pin]
        deadline: Option<Sleep>,
        shared: Arc<Shared<A, D, P, St>>,
        req: Req,
        // The primary's failed result and how it failed, once it failed.
        original: Option<Result<A::Response, A::Error>>,
        failure: Option<FailureInfo>,
        // Index of the next alternate to try; how many were called.
        next: usize,
        tried: usize,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, A, AF> {
        Primary { #[pin] future: F },
        // The primary failed: start the deadline, pick the first step.
        Fallback,
        Ready { service: A, index: usize },
        Calling { #[pin] future: AF, index: usize },
        Done,
    }
}

impl<F, A, Req, D, P, St> Core<F, A, Req, D, P, St>
where
    A: Service<Req>,
{
    fn primary(future: F, req: Req, shared: Arc<Shared<A, D, P, St>>) -> Self {
        Self {
            state: State::Primary { future },
            deadline: None,
            shared,
            req,
            original: None,
            failure: None,
            next: 0,
            tried: 0,
        }
    }

    /// The primary's `poll_ready` failed: it never saw the request.
    fn not_ready(error: A::Error, req: Req, shared: Arc<Shared<A, D, P, St>>) -> Self {
        Self {
            state: State::Fallback,
            deadline: None,
            shared,
            req,
            original: Some(Err(error)),
            failure: Some(FailureInfo::primary(FailureKind::NeverSent)),
            next: 0,
            tried: 0,
        }
    }

    fn req(&self) -> &Req {
        &self.req
    }
}

impl<F, A, Req, D, P, St> Future for Core<F, A, Req, D, P, St>
where
    F: Future<Output = Result<A::Response, A::Error>>,
    A: Service<Req> + Clone,
    Req: Clone,
    D: DetectFailure<A::Response, A::Error>,
    P: ReplayPolicy<Req>,
    St: StaleSource<Req, A::Response>,
{
    type Output = Finished<A::Response, A::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            // The failure to judge the next step by, when the current step just failed.
            let failed: FailureInfo = match this.state.as_mut().project() {
                StateProj::Primary { future } => {
                    let result = ready!(future.poll(cx));
                    let Some(kind) = this.shared.detector.detect(&result) else {
                        if let Ok(resp) = &result {
                            this.shared.stale.store(this.req, resp);
                        }
                        this.state.set(State::Done);
                        return Poll::Ready((result, None));
                    };
                    *this.original = Some(result);
                    *this.failure = Some(FailureInfo::primary(kind));
                    this.state.set(State::Fallback);
                    continue;
                }
                StateProj::Fallback => {
                    let failure = this
                        .failure
                        .expect("the primary's failure is recorded before the fallback starts");
                    tracing::debug!(
                        failure = failure.kind.as_str(),
                        "primary failed; falling back"
                    );
                    this.deadline.set(Some(sleep(this.shared.timeout)));
                    failure
                }
                StateProj::Ready { service, index } => match service.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        let index = *index;
                        let future = service.call(this.req.clone());
                        *this.tried += 1;
                        this.state.set(State::Calling { future, index });
                        continue;
                    }
                    // Not ready means not called: it never saw the request.
                    Poll::Ready(Err(_)) => {
                        FailureInfo::new(FailureKind::NeverSent, Attempt::Alternate(*index))
                    }
                    Poll::Pending => {
                        if elapsed(this.deadline.as_mut(), cx) {
                            return Poll::Ready(finish(this, true));
                        }
                        return Poll::Pending;
                    }
                },
                StateProj::Calling { future, index } => match future.poll(cx) {
                    Poll::Ready(result) => {
                        let index = *index;
                        match this.shared.detector.detect(&result) {
                            Some(kind) => FailureInfo::new(kind, Attempt::Alternate(index)),
                            None => {
                                if let Ok(resp) = &result {
                                    this.shared.stale.store(this.req, resp);
                                }
                                tracing::debug!(alternate = index, "alternate answered");
                                let report = report(
                                    this.failure,
                                    ServedBy::Alternate(index),
                                    *this.tried,
                                    false,
                                );
                                this.state.set(State::Done);
                                return Poll::Ready((result, Some(report)));
                            }
                        }
                    }
                    Poll::Pending => {
                        if elapsed(this.deadline.as_mut(), cx) {
                            return Poll::Ready(finish(this, true));
                        }
                        return Poll::Pending;
                    }
                },
                StateProj::Done => panic!("future polled after completion"),
            };

            // Next alternate, if the replay guard allows it after `failed` and time is left.
            let shared = Arc::clone(this.shared);
            let timed_out = this
                .deadline
                .as_ref()
                .as_pin_ref()
                .is_some_and(|d| d.is_elapsed());
            match shared.alternates.get(*this.next) {
                Some(alternate) if !timed_out && shared.replay.may_replay(this.req, &failed) => {
                    let index = *this.next;
                    *this.next += 1;
                    this.state.set(State::Ready {
                        service: alternate.clone(),
                        index,
                    });
                }
                _ => return Poll::Ready(finish(this, timed_out)),
            }
        }
    }
}

/// Whether the fallback deadline has passed (registers the waker when it has not).
fn elapsed(deadline: Pin<&mut Option<Sleep>>, cx: &mut Context<'_>) -> bool {
    deadline
        .as_pin_mut()
        .is_some_and(|sleep| sleep.poll(cx).is_ready())
}

fn report(
    failure: &Option<FailureInfo>,
    by: ServedBy,
    alternates_tried: usize,
    timed_out: bool,
) -> FallbackReport {
    FallbackReport {
        by,
        failure: failure.unwrap_or(FailureInfo::primary(FailureKind::MaybeReceived)),
        alternates_tried,
        timed_out,
    }
}

/// The alternates are done (or cut short): the stale source, else the primary's own result.
fn finish<F, A, Req, D, P, St>(
    this: CoreProj<'_, F, A, Req, D, P, St>,
    timed_out: bool,
) -> Finished<A::Response, A::Error>
where
    A: Service<Req>,
    St: StaleSource<Req, A::Response>,
{
    let mut state = this.state;
    state.set(State::Done);
    if let Some(stale) = this.shared.stale.lookup(this.req) {
        tracing::debug!(age_ms = stale.age_ms(), "serving a stale answer");
        let by = ServedBy::Stale { age: stale.age };
        return (
            Ok(stale.value),
            Some(report(this.failure, by, *this.tried, timed_out)),
        );
    }
    tracing::debug!(
        alternates_tried = *this.tried,
        timed_out,
        "fallback exhausted; returning the primary's result"
    );
    let original = this
        .original
        .take()
        .expect("the primary's result is kept until the fallback finishes");
    (
        original,
        Some(report(
            this.failure,
            ServedBy::Exhausted,
            *this.tried,
            timed_out,
        )),
    )
}

pin_project! {
    /// Response future of [`Fallback`](crate::Fallback).
    ///
    /// While the primary runs it is the primary's future plus the cloned request and an `Arc`:
    /// nothing is allocated. Past a failure it drives the alternates (each a clone made ready
    /// before it is called) under the fallback deadline, then asks the stale source.
    pub struct ResponseFuture<F, A, Req, D, P, St>
    where
        A: Service<Req>,
    {
        #[pin]
        core: Core<F, A, Req, D, P, St>,
    }
}

impl<F, A, Req, D, P, St> ResponseFuture<F, A, Req, D, P, St>
where
    A: Service<Req>,
{
    pub(crate) fn primary(future: F, req: Req, shared: Arc<Shared<A, D, P, St>>) -> Self {
        Self {
            core: Core::primary(future, req, shared),
        }
    }

    pub(crate) fn not_ready(error: A::Error, req: Req, shared: Arc<Shared<A, D, P, St>>) -> Self {
        Self {
            core: Core::not_ready(error, req, shared),
        }
    }
}

impl<F, A, Req, D, P, St> Future for ResponseFuture<F, A, Req, D, P, St>
where
    F: Future<Output = Result<A::Response, A::Error>>,
    A: Service<Req> + Clone,
    Req: Clone,
    D: DetectFailure<A::Response, A::Error>,
    P: ReplayPolicy<Req>,
    St: StaleSource<Req, A::Response>,
{
    type Output = Result<Served<A::Response>, A::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (result, report) = ready!(self.project().core.poll(cx));
        Poll::Ready(result.map(|response| Served::new(response, report)))
    }
}

/// What [`HttpFallback`](crate::HttpFallback) answers when everything failed.
#[derive(Debug, Clone)]
pub(crate) struct HttpAnswer {
    pub(crate) backend: Arc<str>,
    pub(crate) status: StatusCode,
}

pin_project! {
    /// Response future of [`HttpFallback`](crate::HttpFallback): the [`ResponseFuture`] state
    /// machine, answering with a JSON-RPC error response when everything failed.
    pub struct HttpResponseFuture<F, A, Req, D, P, St>
    where
        A: Service<Req>,
    {
        #[pin]
        core: Core<F, A, Req, D, P, St>,
        answer: HttpAnswer,
    }
}

impl<F, A, Req, D, P, St> HttpResponseFuture<F, A, Req, D, P, St>
where
    A: Service<Req>,
{
    pub(crate) fn primary(
        future: F,
        req: Req,
        shared: Arc<Shared<A, D, P, St>>,
        answer: HttpAnswer,
    ) -> Self {
        Self {
            core: Core::primary(future, req, shared),
            answer,
        }
    }

    pub(crate) fn not_ready(
        error: A::Error,
        req: Req,
        shared: Arc<Shared<A, D, P, St>>,
        answer: HttpAnswer,
    ) -> Self {
        Self {
            core: Core::not_ready(error, req, shared),
            answer,
        }
    }
}

impl<F, A, ReqBody, B, D, P, St> Future
    for HttpResponseFuture<F, A, http::Request<ReqBody>, D, P, St>
where
    F: Future<Output = Result<Response<B>, A::Error>>,
    A: Service<http::Request<ReqBody>, Response = Response<B>> + Clone,
    ReqBody: Clone,
    D: DetectFailure<Response<B>, A::Error>,
    P: ReplayPolicy<http::Request<ReqBody>>,
    St: StaleSource<http::Request<ReqBody>, Response<B>>,
{
    type Output = Result<Response<ResponseBody<B>>, A::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let (result, report) = ready!(this.core.as_mut().poll(cx));
        let Some(report) = report else {
            return Poll::Ready(result.map(|res| res.map(ResponseBody::inner)));
        };
        if report.by != ServedBy::Exhausted {
            return Poll::Ready(result.map(|res| {
                let mut res = res.map(ResponseBody::inner);
                res.extensions_mut().insert(report);
                res
            }));
        }
        let id = this.core.req().extensions().get::<RequestId>();
        let refused = match result {
            Ok(mut res) if res.extensions().get::<NeverSent>().is_some() => Some(Refused {
                retry_after: res.headers_mut().remove(header::RETRY_AFTER),
                extensions: std::mem::take(res.extensions_mut()),
            }),
            _ => None,
        };
        Poll::Ready(Ok(exhausted_response(id, this.answer, &report, refused)))
    }
}

/// What the exhausted answer keeps of a primary's answer that refused the call before sending it
/// (a circuit breaker's 503, marked with `mcp-core`'s [`NeverSent`]): its `Retry-After` and its
/// extensions (the breaker's own description of the refusal among them).
struct Refused {
    retry_after: Option<HeaderValue>,
    extensions: http::Extensions,
}

/// The JSON-RPC error answer of an exhausted [`HttpFallback`](crate::HttpFallback).
fn exhausted_response<B>(
    id: Option<&RequestId>,
    answer: &HttpAnswer,
    report: &FallbackReport,
    refused: Option<Refused>,
) -> Response<ResponseBody<B>> {
    let mut data = RawObject::new();
    data.set_str("failure", report.failure.kind.as_str());
    data.set_json("alternates_tried", &report.alternates_tried);
    data.set_json("timed_out", &report.timed_out);
    let mut error = ErrorObject::internal(format!(
        "Backend {} unavailable (no alternate or cached answer)",
        answer.backend
    ));
    error.data = Some(data.to_raw());
    let mut res = Response::new(ResponseBody::local(encode_error(id, &error)));
    res.headers_mut()
        .insert(header::CONTENT_TYPE, APPLICATION_JSON);
    match refused {
        Some(refused) => {
            *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            if let Some(retry_after) = refused.retry_after {
                res.headers_mut().insert(header::RETRY_AFTER, retry_after);
            }
            *res.extensions_mut() = refused.extensions;
        }
        None => *res.status_mut() = answer.status,
    }
    res.extensions_mut().insert(*report);
    res
}
