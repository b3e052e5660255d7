//! [`Guarded`]: a response body that keeps a guard (a request counted in flight, a principal's
//! slot) alive until the body is dropped, so what the guard counts lasts as long as the answer
//! streams, not only until its head.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// `inner`, with `guard` dropped when it is.
    pub(crate) struct Guarded<B, G> {
        #[pin]
        inner: B,
        guard: G,
    }
}

impl<B, G> Guarded<B, G> {
    pub(crate) fn new(inner: B, guard: G) -> Self {
        Self { inner, guard }
    }
}

impl<B: Body, G> Body for Guarded<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
