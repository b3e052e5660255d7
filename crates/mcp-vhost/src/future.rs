//! [`ResponseFuture`] of [`Vhost`](crate::Vhost).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use mcp_core::ResponseBody;
use pin_project_lite::pin_project;

pin_project! {
    /// Response future of [`Vhost`](crate::Vhost): the inner service's future, or a ready 400.
    pub struct ResponseFuture<F, B> {
        #[pin]
        kind: Kind<F, B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, B> {
        Inner { #[pin] future: F },
        Local { response: Option<Response<ResponseBody<B>>> },
    }
}

impl<F, B> ResponseFuture<F, B> {
    pub(crate) fn inner(future: F) -> Self {
        Self {
            kind: Kind::Inner { future },
        }
    }

    pub(crate) fn local(response: Response<ResponseBody<B>>) -> Self {
        Self {
            kind: Kind::Local {
                response: Some(response),
            },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { future } => future
                .poll(cx)
                .map(|res| res.map(|r| r.map(ResponseBody::inner))),
            KindProj::Local { response } => {
                Poll::Ready(Ok(response.take().expect("future polled after completion")))
            }
        }
    }
}
