//! Connection idleness: which connections may be closed because nothing is going on.
//!
//! hyper bounds the HTTP/1.1 request head (`header_read_timeout`) but has no idle timeout for h2:
//! a client that sends only the preface, or opens no stream after its last one ended, would hold
//! a `limits.max_connections` slot forever. So every connection counts its requests in flight
//! (from the service call until the response body is dropped, so a long SSE stream counts) and
//! [`Activity::idle`] completes once the count has stayed at zero for the allowed time:
//! `header_read_timeout` from accept until the first request, `idle_connection_timeout` after
//! each request. The connection is then dropped (no request is in flight, so nothing is cut).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Request, Response};

use pin_project_lite::pin_project;
use tokio::sync::Notify;
use tokio::time::Instant;
use tower_service::Service;

use crate::guarded_body::Guarded;

/// The requests in flight on one connection.
#[derive(Debug)]
pub(crate) struct Activity {
    state: Mutex<State>,
    changed: Notify,
    first_request: Duration,
    between_requests: Duration,
}

#[derive(Debug)]
struct State {
    in_flight: usize,
    /// When `in_flight` last dropped to zero (or the connection was accepted).
    idle_since: Instant,
    seen_request: bool,
}

impl Activity {
    /// A connection accepted at `accepted`: it must start a request within `first_request`, and
    /// start another within `between_requests` of the last one ending.
    pub(crate) fn new(
        accepted: Instant,
        first_request: Duration,
        between_requests: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                in_flight: 0,
                idle_since: accepted,
                seen_request: false,
            }),
            changed: Notify::new(),
            first_request,
            between_requests,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When the connection becomes closable if nothing changes; `None` while a request is in
    /// flight.
    fn deadline(&self) -> Option<Instant> {
        let state = self.lock();
        let allowed = if state.seen_request {
            self.between_requests
        } else {
            self.first_request
        };
        (state.in_flight == 0).then(|| state.idle_since + allowed)
    }

    /// Completes once the connection has been idle for its allowed time.
    pub(crate) async fn idle(&self) {
        loop {
            match self.deadline() {
                Some(deadline) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline) => {
                            // Closable only if nothing started (or ended) meanwhile.
                            if self.deadline().is_some_and(|d| d <= Instant::now()) {
                                return;
                            }
                        }
                        () = self.changed.notified() => {}
                    }
                }
                None => self.changed.notified().await,
            }
        }
    }

    fn start(self: &Arc<Self>) -> InFlight {
        let mut state = self.lock();
        state.in_flight += 1;
        state.seen_request = true;
        drop(state);
        // `notify_one` keeps a permit when the watchdog is between its check and its wait.
        self.changed.notify_one();
        InFlight(Arc::clone(self))
    }
}

/// One request in flight; dropping it ends the request.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0 {
            state.idle_since = Instant::now();
        }
        drop(state);
        self.0.changed.notify_one();
    }
}

/// Counts `inner`'s requests in `activity` until their response bodies are dropped.
#[derive(Clone, Debug)]
pub(crate) struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Tracked<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<TrackedBody<ResBody>>;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let in_flight = self.activity.start();
        TrackedFuture {
            inner: self.inner.call(req),
            in_flight: Some(in_flight),
        }
    }
}

pin_project! {
    /// Future of [`Tracked`]: hands the in-flight mark to the response body.
    pub(crate) struct TrackedFuture<F> {
        #[pin]
        inner: F,
        in_flight: Option<InFlight>,
    }
}

impl<F, B, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<TrackedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let in_flight = this.in_flight.take();
        Poll::Ready(result.map(|res| res.map(|inner| Guarded::new(inner, in_flight))))
    }
}

/// A response body that keeps its request in flight until it is dropped.
pub(crate) type TrackedBody<B> = Guarded<B, Option<InFlight>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Only lower bounds on time (a loaded machine may be late, never early).
    #[tokio::test]
    async fn idle_counts_from_accept_then_from_the_last_request() {
        let first = Duration::from_millis(200);
        let between = Duration::from_millis(400);
        let activity = Activity::new(Instant::now(), first, between);
        // No request: closable after the first-request allowance.
        let started = Instant::now();
        activity.idle().await;
        assert!(started.elapsed() >= first);

        // A request in flight is never idle; after it ends, the longer allowance applies.
        let request = activity.start();
        let watchdog = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.idle().await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!watchdog.is_finished(), "idle while a request is in flight");
        let ended = Instant::now();
        drop(request);
        watchdog.await.expect("watchdog");
        assert!(ended.elapsed() >= between);
    }
}
