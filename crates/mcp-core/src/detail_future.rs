//! [`DetailFuture`]: the response future of a layer that either calls its inner service or answers
//! at once with a `{"detail":"…"}` error.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Response, StatusCode};
use pin_project_lite::pin_project;

use crate::{ResponseBody, detail_response};

pin_project! {
    /// Either the inner service's future (its body wrapped in [`ResponseBody::Inner`]) or a ready
    /// [`detail_response`]. Shared by the synchronous gateway layers (path, virtual host config) so
    /// each does not hand-write the same state machine.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Response, StatusCode};
    /// use http_body_util::Empty;
    /// use bytes::Bytes;
    /// use mcp_core::DetailFuture;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let answer: DetailFuture<std::future::Ready<Result<Response<Empty<Bytes>>, Infallible>>> =
    ///     DetailFuture::detail(StatusCode::NOT_FOUND, "Server not found");
    /// let res = answer.await.unwrap();
    /// assert_eq!(res.status(), StatusCode::NOT_FOUND);
    /// # }
    /// ```
    pub struct DetailFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Inner { #[pin] future: F },
        Detail { answer: Option<(StatusCode, &'static str)> },
    }
}

impl<F> DetailFuture<F> {
    /// Waits for the inner service.
    pub fn inner(future: F) -> Self {
        Self {
            kind: Kind::Inner { future },
        }
    }

    /// Answers at once with `status` and `{"detail":"<detail>"}`.
    pub fn detail(status: StatusCode, detail: &'static str) -> Self {
        Self {
            kind: Kind::Detail {
                answer: Some((status, detail)),
            },
        }
    }
}

impl<F, B, E> Future for DetailFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { future } => future
                .poll(cx)
                .map(|res| res.map(|r| r.map(ResponseBody::inner))),
            KindProj::Detail { answer } => {
                let (status, detail) = answer.take().expect("future polled after completion");
                Poll::Ready(Ok(detail_response(status, detail)))
            }
        }
    }
}
