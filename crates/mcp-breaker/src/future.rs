//! The response futures of [`BreakerService`](crate::BreakerService) and
//! [`HttpBreakerService`](crate::HttpBreakerService).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::Response;
use mcp_core::ResponseBody;
use pin_project_lite::pin_project;

use crate::{BreakerError, Permit, Settle};

pin_project! {
    /// Response future of [`BreakerService`](crate::BreakerService): the inner call holding its
    /// permit, or an immediate [`BreakerError::Open`].
    pub struct ResponseFuture<F, C> {
        #[pin]
        kind: Kind<F, C>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, C> {
        Called { #[pin] future: F, permit: Option<Permit>, classifier: C },
        Rejected { retry_after: Duration },
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(crate) fn called(future: F, permit: Permit, classifier: C) -> Self {
        Self {
            kind: Kind::Called {
                future,
                permit: Some(permit),
                classifier,
            },
        }
    }

    pub(crate) fn rejected(retry_after: Duration) -> Self {
        Self {
            kind: Kind::Rejected { retry_after },
        }
    }
}

impl<F, C, T, E> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    C: Settle<T, E>,
{
    type Output = Result<T, BreakerError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Called {
                future,
                permit,
                classifier,
            } => {
                let mut result = ready!(future.poll(cx));
                if let Some(permit) = permit.take() {
                    record(permit, classifier, &mut result);
                }
                Poll::Ready(result.map_err(BreakerError::Inner))
            }
            KindProj::Rejected { retry_after } => Poll::Ready(Err(BreakerError::Open {
                retry_after: *retry_after,
            })),
        }
    }
}

fn record<C: Settle<T, E>, T, E>(permit: Permit, classifier: &C, result: &mut Result<T, E>) {
    classifier.settle(result, permit);
}

pin_project! {
    /// Response future of [`HttpBreakerService`](crate::HttpBreakerService): the inner call holding
    /// its permit, or the ready 503 answer.
    pub struct HttpResponseFuture<F, C, B> {
        #[pin]
        kind: HttpKind<F, C, B>,
    }
}

pin_project! {
    #[project = HttpKindProj]
    enum HttpKind<F, C, B> {
        Called { #[pin] future: F, permit: Option<Permit>, classifier: C },
        Rejected { response: Option<Response<ResponseBody<B>>> },
    }
}

impl<F, C, B> HttpResponseFuture<F, C, B> {
    pub(crate) fn called(future: F, permit: Permit, classifier: C) -> Self {
        Self {
            kind: HttpKind::Called {
                future,
                permit: Some(permit),
                classifier,
            },
        }
    }

    pub(crate) fn rejected(response: Response<ResponseBody<B>>) -> Self {
        Self {
            kind: HttpKind::Rejected {
                response: Some(response),
            },
        }
    }
}

impl<F, C, B, E> Future for HttpResponseFuture<F, C, B>
where
    F: Future<Output = Result<Response<B>, E>>,
    C: Settle<Response<B>, E>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            HttpKindProj::Called {
                future,
                permit,
                classifier,
            } => {
                let mut result = ready!(future.poll(cx));
                if let Some(permit) = permit.take() {
                    record(permit, classifier, &mut result);
                }
                Poll::Ready(result.map(|res| res.map(ResponseBody::inner)))
            }
            HttpKindProj::Rejected { response } => {
                Poll::Ready(Ok(response.take().expect("future polled after completion")))
            }
        }
    }
}
