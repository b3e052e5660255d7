//! The total deadline of one call ([`until`]): its answer ends, failed with
//! [`UpstreamError::DeadlineExceeded`], once the call has taken `deadline_ms`, however steadily
//! the backend keeps sending. `timeout_ms` bounds each wait (the head, each gap between events);
//! without a total bound a backend that trickles one event per gap would hold the call, its
//! connection and its relay forever (book: docs/src/security.md, "Budgets").
//!
//! Dropping the answer is what cancels the call upstream (a closed response, or
//! `notifications/cancelled` on a link), so nothing else is needed here.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::time::{Instant, Sleep};

use super::{MessageStream, UpstreamError};

/// `messages`, ended with [`UpstreamError::DeadlineExceeded`] at `at` (`limit` after the call
/// started).
pub(super) fn until(messages: MessageStream, at: Instant, limit: Duration) -> MessageStream {
    Box::pin(Until {
        messages: Some(messages),
        timer: Box::pin(tokio::time::sleep_until(at)),
        limit,
    })
}

struct Until {
    /// `None` once the deadline passed: the answer is dropped (the call cancelled) at once.
    messages: Option<MessageStream>,
    timer: Pin<Box<Sleep>>,
    limit: Duration,
}

impl Stream for Until {
    type Item = Result<bytes::Bytes, UpstreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(messages) = this.messages.as_mut() else {
            return Poll::Ready(None);
        };
        // The timer first: a backend that always has a message ready must not outrun it.
        if this.timer.as_mut().poll(cx).is_ready() {
            this.messages = None;
            return Poll::Ready(Some(Err(UpstreamError::DeadlineExceeded(this.limit))));
        }
        messages.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_trickling_answer_ends_at_the_deadline_and_is_dropped() {
        // One message a second, forever: no gap is ever long.
        let endless = futures_util::stream::unfold(0u64, |n| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Some((Ok(bytes::Bytes::from(n.to_string())), n + 1))
        });
        let limit = Duration::from_secs(10);
        let start = Instant::now();
        let mut answer = until(Box::pin(endless), start + limit, limit);
        let mut seen = 0;
        let end = loop {
            match answer.next().await {
                Some(Ok(_)) => seen += 1,
                Some(Err(e)) => break e,
                None => panic!("ended without the deadline error"),
            }
        };
        assert_eq!(end, UpstreamError::DeadlineExceeded(limit));
        assert_eq!(start.elapsed(), limit);
        assert_eq!(seen, 9, "what arrived before the deadline was passed on");
        assert!(answer.next().await.is_none(), "nothing after the error");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_within_the_deadline_is_untouched() {
        let quick = futures_util::stream::iter([Ok(bytes::Bytes::from_static(b"done"))]);
        let limit = Duration::from_secs(10);
        let answer: Vec<_> = until(Box::pin(quick), Instant::now() + limit, limit)
            .collect()
            .await;
        assert_eq!(answer, [Ok(bytes::Bytes::from_static(b"done"))]);
    }
}
