//! [`Routed`]: marks responses that the router produced with the request's virtual host
//! ([`RoutedVhost`] response extension), so the gateway labels metrics and logs with it only for
//! virtual hosts that exist in the caller's configuration (a path segment from an unauthenticated
//! client never becomes a metric label). Integrators can read the extension too.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use mcp_core::VirtualHostId;
use pin_project_lite::pin_project;
use tower_service::Service;

/// Response extension: the virtual host whose router answered.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RoutedVhost(pub VirtualHostId);

/// Wraps the router; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Routed<S> {
    inner: S,
}

impl<S> Routed<S> {
    /// Wraps `inner` (normally the `McpRouter`).
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Routed<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RoutedFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let vhost = req.extensions().get::<VirtualHostId>().cloned();
        RoutedFuture {
            inner: self.inner.call(req),
            vhost,
        }
    }
}

pin_project! {
    /// Future of [`Routed`].
    pub struct RoutedFuture<F> {
        #[pin]
        inner: F,
        vhost: Option<VirtualHostId>,
    }
}

impl<F, B, E> Future for RoutedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut result = ready!(this.inner.poll(cx));
        if let (Ok(response), Some(vhost)) = (&mut result, this.vhost.take()) {
            response.extensions_mut().insert(RoutedVhost(vhost));
        }
        Poll::Ready(result)
    }
}
