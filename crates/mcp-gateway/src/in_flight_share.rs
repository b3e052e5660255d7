//! [`InFlightShare`]: each principal's share of the requests in flight, behind authentication.
//!
//! `limits.max_connections` bounds the node's open connections, and every request in flight
//! holds one (an HTTP/1.1 connection carries one request at a time; a stream holds its
//! connection as long as it is open). Without a share, one principal's slow calls could hold
//! every connection and leave the next principal's `initialize` unread. So each principal may
//! have at most `limits.max_in_flight_per_principal` requests in flight, counted from the call
//! until the response body is dropped (an SSE answer or stream counts while it is open). Over
//! it, the request gets 429 at once, with `Retry-After` and, on HTTP/1.1, `Connection: close`:
//! the excess connection is closed rather than kept for the next request of the same principal
//! (book: docs/src/security.md, "Budgets").

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{HeaderValue, Request, Response, StatusCode, Version, header};
use mcp_core::{Budget, Principal, ResponseBody, Slot};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::guarded_body::Guarded;

/// Counts each principal's requests in flight around `inner` (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct InFlightShare<S> {
    inner: S,
    slots: Budget,
}

impl<S> InFlightShare<S> {
    /// Each principal's requests in flight in `inner` hold a slot of `slots` (at most its
    /// share of them).
    pub(crate) fn new(inner: S, slots: Budget) -> Self {
        Self { inner, slots }
    }
}

impl<S, B, ResB> Service<Request<B>> for InFlightShare<S>
where
    S: Service<Request<B>, Response = Response<ResB>, Error = Infallible>,
{
    type Response = Response<ResponseBody<Held<ResB>>>;
    type Error = Infallible;
    type Future = ShareFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let slot = match req.extensions().get::<Principal>() {
            // Nothing to charge before authentication (the claims layer answered already).
            None => None,
            Some(principal) => match self.slots.take(principal) {
                Ok(slot) => Some(slot),
                Err(_) => {
                    return ShareFuture::Refused {
                        max: self.slots.slots_share(),
                        version: req.version(),
                    };
                }
            },
        };
        ShareFuture::Inner {
            future: self.inner.call(req),
            slot,
        }
    }
}

/// 429 naming the limit, with `Retry-After: 1` and, where the protocol has one,
/// `Connection: close`.
fn refusal<B>(max: usize, version: Version) -> Response<ResponseBody<B>> {
    let mut response = mcp_core::detail_response(
        StatusCode::TOO_MANY_REQUESTS,
        &format!(
            "Too many requests in flight for this principal (at most {max}: limits.max_in_flight_per_principal)"
        ),
    );
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    // HTTP/2 multiplexes one connection and has no `Connection` header; refusing the stream is
    // all it needs.
    if version < Version::HTTP_2 {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

pin_project! {
    /// Response future of [`InFlightShare`].
    #[project = ShareProj]
    pub(crate) enum ShareFuture<F> {
        Inner { #[pin] future: F, slot: Option<Slot> },
        Refused { max: usize, version: Version },
    }
}

impl<F, ResB> Future for ShareFuture<F>
where
    F: Future<Output = Result<Response<ResB>, Infallible>>,
{
    type Output = Result<Response<ResponseBody<Held<ResB>>>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ShareProj::Inner { future, slot } => {
                let Ok(response) = ready!(future.poll(cx));
                let slot = slot.take();
                Poll::Ready(Ok(
                    response.map(|inner| ResponseBody::inner(Guarded::new(inner, slot)))
                ))
            }
            ShareProj::Refused { max, version } => Poll::Ready(Ok(refusal(*max, *version))),
        }
    }
}

/// A response body holding its principal's slot until it is dropped.
pub(crate) type Held<B> = Guarded<B, Option<Slot>>;

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use tower::ServiceExt;

    use super::*;

    fn request(sub: Option<&str>) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(Bytes::new()));
        if let Some(sub) = sub {
            req.extensions_mut().insert(Principal::new("iss", sub));
        }
        req
    }

    #[tokio::test]
    async fn a_principal_over_its_share_gets_429_until_a_body_is_dropped() {
        let inner = tower::service_fn(|_req: Request<Full<Bytes>>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        });
        let service = InFlightShare::new(inner, Budget::new("in_flight").with_slots(1, usize::MAX));
        let held = service.clone().oneshot(request(Some("alice"))).await;
        let Ok(held) = held;
        assert_eq!(held.status(), StatusCode::OK);

        let Ok(refused) = service.clone().oneshot(request(Some("alice"))).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        assert_eq!(refused.headers()[header::CONNECTION], "close");
        let body = refused.into_body().collect().await.map(|b| b.to_bytes());
        let Ok(body) = body;
        assert!(
            String::from_utf8_lossy(&body).contains("limits.max_in_flight_per_principal"),
            "{body:?}"
        );

        // Bob and unauthenticated requests are not alice's share.
        let Ok(bob) = service.clone().oneshot(request(Some("bob"))).await;
        assert_eq!(bob.status(), StatusCode::OK);
        let Ok(anonymous) = service.clone().oneshot(request(None)).await;
        assert_eq!(anonymous.status(), StatusCode::OK);

        drop(held);
        let Ok(again) = service.oneshot(request(Some("alice"))).await;
        assert_eq!(
            again.status(),
            StatusCode::OK,
            "a dropped body gives its slot back"
        );
    }
}
