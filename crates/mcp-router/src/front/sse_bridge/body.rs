//! [`SseBridgeBody`]: the inner service's body, a local answer, or a client's event stream.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;
use tokio::sync::oneshot;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::queue::Inbox;

/// An SSE comment: ignored by clients, but it keeps proxies and NATs from closing an idle stream
/// and makes a vanished client show up as a failed write.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

pin_project! {
    /// Response body of [`SseBridge`](super::SseBridge): the inner service's body for everything
    /// it serves, a local JSON answer, or the event stream of a `GET …/sse`.
    // The variants' single fields are named `body` for pin-project; the variants say it all.
    #[allow(missing_docs)]
    #[project = SseBridgeBodyProj]
    #[derive(Debug)]
    pub enum SseBridgeBody<B> {
        /// The inner service's body.
        Inner { #[pin] body: B },
        /// A body made by the bridge (errors, `202 Accepted`).
        Local { #[pin] body: Full<Bytes> },
        /// A client's SSE stream.
        Events { body: EventStream },
    }
}

impl<B: Default> Default for SseBridgeBody<B> {
    fn default() -> Self {
        Self::Inner { body: B::default() }
    }
}

impl<B> Body for SseBridgeBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let never = |frame: Option<Result<Frame<Bytes>, Infallible>>| {
            frame.map(|f| f.map_err(|never| match never {}))
        };
        match self.project() {
            SseBridgeBodyProj::Inner { body } => body.poll_frame(cx),
            SseBridgeBodyProj::Local { body } => body.poll_frame(cx).map(never),
            SseBridgeBodyProj::Events { body } => Pin::new(body).poll_frame(cx).map(never),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Inner { body } => body.is_end_stream(),
            Self::Local { body } => body.is_end_stream(),
            Self::Events { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Inner { body } => body.size_hint(),
            Self::Local { body } => body.size_hint(),
            Self::Events { .. } => SizeHint::default(),
        }
    }
}

/// The client's side of an SSE session: the `endpoint` event, then every event the relays send,
/// with a keep-alive comment after each idle period. Dropping it (the client went away) closes
/// the channel, which ends the session's tasks and its inner session. It ends by itself when the
/// bridge says so (the inner session expired).
#[derive(Debug)]
pub struct EventStream {
    endpoint: Option<Bytes>,
    events: Inbox,
    ended: oneshot::Receiver<()>,
    keep_alive: Interval,
}

impl EventStream {
    pub(crate) fn new(
        endpoint: Bytes,
        events: Inbox,
        ended: oneshot::Receiver<()>,
        idle: Duration,
    ) -> Self {
        let mut keep_alive = tokio::time::interval_at(Instant::now() + idle, idle);
        keep_alive.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self {
            endpoint: Some(endpoint),
            events,
            ended,
            keep_alive,
        }
    }
}

impl Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(endpoint) = self.endpoint.take() {
            return Poll::Ready(Some(Ok(Frame::data(endpoint))));
        }
        // Only a sent signal ends the stream; a dropped sender (the session is gone) is left to
        // the events channel.
        if let Poll::Ready(Ok(())) = Pin::new(&mut self.ended).poll(cx) {
            return Poll::Ready(None);
        }
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                self.keep_alive.reset();
                return Poll::Ready(Some(Ok(Frame::data(event))));
            }
            // Every sender is gone: the layer dropped the session (it never does while the
            // client listens), so the stream ends.
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        match self.keep_alive.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(KEEP_ALIVE))))),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use mcp_core::{Budget, Principal};

    use super::*;
    use crate::front::sse_bridge::queue::{Outbox, queue};

    fn channel() -> (Outbox, Inbox) {
        let budget = Budget::new("sse_sessions").with_bytes(1 << 20, 1 << 20);
        queue(budget.account(&Principal::new("https://issuer", "alice")))
    }

    async fn next(stream: &mut EventStream) -> Bytes {
        let frame = stream.frame().await.expect("a frame").expect("infallible");
        frame.into_data().expect("data")
    }

    #[tokio::test(start_paused = true)]
    async fn endpoint_first_then_events_then_keep_alive_when_idle() {
        let (tx, rx) = channel();
        let (_end, ended) = oneshot::channel();
        let mut stream = EventStream::new(
            Bytes::from_static(b"event: endpoint\ndata: /x\n\n"),
            rx,
            ended,
            Duration::from_secs(15),
        );
        assert_eq!(next(&mut stream).await, "event: endpoint\ndata: /x\n\n");
        assert!(
            tx.send(Bytes::from_static(b"event: message\ndata: {}\n\n"))
                .await,
            "open"
        );
        assert_eq!(next(&mut stream).await, "event: message\ndata: {}\n\n");
        // Nothing to send: the paused clock advances to the keep-alive tick.
        assert_eq!(next(&mut stream).await, ": keep-alive\n\n");
        drop(tx);
        assert!(stream.frame().await.is_none(), "ends without senders");
    }

    #[tokio::test]
    async fn dropping_the_stream_closes_the_channel() {
        let (tx, rx) = channel();
        let (_end, ended) = oneshot::channel();
        let stream = EventStream::new(Bytes::new(), rx, ended, Duration::from_secs(15));
        drop(stream);
        tx.closed().await;
        assert!(tx.is_closed());
    }

    #[tokio::test]
    async fn the_end_signal_ends_the_stream() {
        let (_tx, rx) = channel();
        let (end, ended) = oneshot::channel();
        let mut stream =
            EventStream::new(Bytes::from_static(b"e"), rx, ended, Duration::from_secs(15));
        assert_eq!(next(&mut stream).await, "e");
        end.send(()).expect("listening");
        assert!(stream.frame().await.is_none(), "ended");
    }
}
