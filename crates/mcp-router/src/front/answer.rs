//! A routed call's [`Answer`] as the HTTP response its client's era expects.
//!
//! A final message is JSON (a 2026-07-28 client gets `400` with the errors its revision ties to
//! it, see [`modern_status`]). A streamed answer is SSE: for a 2026-07-28 client the events have
//! no ids and closing the stream drops the relay, which cancels the call; for a 2025 session
//! every event gets a gateway id and is kept for `Last-Event-ID` replay, a 2025-11-25 session's
//! stream starts with a priming event, and the call is relayed to its end in the background (a
//! 2025 disconnect is not a cancellation), holding one of the principal's background relays.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Response, StatusCode};
use mcp_core::sse::SseEvent;
use mcp_core::{Era, ErrorObject, RequestId, error_code};
use tracing::Instrument;

use super::Front;
use super::respond;
use crate::body::{self, McpBody};
use crate::ops::call::{Answer, Relay};
use mcp_core::Slot;

/// Renders `answer` to request `id` for a client of `era`. A streamed answer of a 2025 session's
/// call (the relay knows the session) gets event ids; `primes`: the session's streams start with
/// a priming event (an event id, no data: 2025-11-25), so that even a stream broken before its
/// first message can be resumed with `Last-Event-ID`.
pub(crate) async fn render(
    front: &Arc<Front>,
    id: &RequestId,
    answer: Answer,
    era: Era,
    primes: bool,
) -> Response<McpBody> {
    match answer {
        Answer::Error(error) | Answer::Ambiguous(error) => {
            respond::error(StatusCode::OK, Some(id), &error)
        }
        Answer::Final {
            message,
            error_code,
        } => {
            let status = match (era, error_code) {
                (Era::Modern, Some(code)) => modern_status(code),
                _ => StatusCode::OK,
            };
            respond::json(status, message)
        }
        Answer::Stream { first, rest } => match rest.downstream_session() {
            None => respond::sse(modern_stream(first, *rest)),
            Some(session) => {
                let session = session.to_owned();
                // A 2025 session's stream is relayed past a disconnect: it takes one of the
                // principal's background relays.
                let Ok(slot) = front.relays.take(rest.principal()) else {
                    return refuse_relay(front, id, *rest);
                };
                respond::sse(session_stream(front, &session, primes, first, *rest, slot))
            }
        },
        Answer::Cancelled => respond::accepted(),
        #[cfg(feature = "redis")]
        Answer::Elsewhere(elsewhere) => {
            // Boxed: the forward's future is large (about 10 KB), and held inline every
            // call's future would be too (book: docs/src/performance.md).
            if let Some(bus) = &front.bus
                && let Some(response) =
                    Box::pin(super::forward::forward(front, bus, &elsewhere, id)).await
            {
                return response;
            }
            let error = crate::ops::call::round_over();
            respond::error(StatusCode::OK, Some(id), &error)
        }
    }
}

/// The HTTP status of a final JSON answer to a 2026-07-28 client carrying a backend's error
/// `code`: the errors that revision ties to `400 Bad Request` (a backend's header mismatch,
/// missing client capability or unsupported version) keep it through the gateway; everything
/// else is 200.
pub(crate) fn modern_status(code: i64) -> StatusCode {
    match code {
        error_code::HEADER_MISMATCH
        | error_code::MISSING_REQUIRED_CLIENT_CAPABILITY
        | error_code::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// The answer to a 2025 call that would stream while its principal has all its background
/// relays: a JSON-RPC error, and the call is cancelled upstream.
fn refuse_relay(front: &Front, id: &RequestId, mut relay: Relay) -> Response<McpBody> {
    let max = front.relays.slots_share();
    relay.cancel_upstream("cancelled by the gateway: too many calls streaming for this principal");
    let error = ErrorObject::invalid_request(format!(
        "Too many streaming calls for this principal (at most {max} relayed at once)"
    ));
    respond::error(StatusCode::OK, Some(id), &error)
}

/// 2026-07-28: no event ids, and closing the stream cancels the call (the relay is dropped with
/// the body). The body is read outside the request's `tracing` span: the relay runs in it, so
/// that its log lines carry the request's fields (its trace id).
fn modern_stream(first: Vec<u8>, relay: Relay) -> McpBody {
    let first = futures_util::stream::once(async move { SseEvent::message(text(&first)).encode() });
    let span = tracing::Span::current();
    let rest = futures_util::stream::unfold((relay, span), |(mut relay, span)| async move {
        let message = relay.next_message().instrument(span.clone()).await?;
        Some((SseEvent::message(text(&message)).encode(), (relay, span)))
    });
    body::streaming(first.chain(rest))
}

/// A 2025 session: every event gets a gateway id and is kept for resumption, and a disconnect is
/// not a cancellation (2025 transport), so the call is relayed to its end in the background,
/// recording what the client misses until it resumes with `Last-Event-ID`.
fn session_stream(
    front: &Arc<Front>,
    session: &str,
    primes: bool,
    first: Vec<u8>,
    relay: Relay,
    slot: Slot,
) -> McpBody {
    front.ensure_sweeping();
    let principal = relay.principal().clone();
    let stream = front.replay.open_post_stream(&principal, session);
    // The priming event takes the stream's first id before any message does.
    let priming = primes.then(|| {
        let id = front.replay.next_id(&principal, session, &stream);
        Bytes::from(format!("id: {id}\ndata: \n\n"))
    });
    let ids = EventIds {
        front: Arc::clone(front),
        principal,
        session: session.to_owned(),
        stream,
    };
    let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(64);
    // In the request's `tracing` span, so that the relay's log lines carry its trace id.
    let relaying = async move {
        // Held until the call's relay ends.
        let _slot = slot;
        let mut relay = relay;
        let mut sender = Some(sender);
        let mut next = Some(first);
        loop {
            let message = match next.take() {
                Some(message) => message,
                None => match relay.next_message().await {
                    Some(message) => message,
                    None => break,
                },
            };
            let chunk = ids.event(&message);
            if let Some(live) = &sender
                && live.send(chunk).await.is_err()
            {
                sender = None;
            }
        }
    };
    tokio::spawn(relaying.in_current_span());
    let live = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    body::streaming(futures_util::stream::iter(priming).chain(live))
}

fn text(message: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(message)
}

/// Where a 2025 session's POST stream records its events for replay.
struct EventIds {
    front: Arc<Front>,
    principal: mcp_core::Principal,
    session: String,
    stream: String,
}

impl EventIds {
    /// One SSE event with its id, recorded for replay.
    fn event(&self, message: &[u8]) -> Bytes {
        let id = self.front.replay.record(
            &self.principal,
            &self.session,
            &self.stream,
            Bytes::copy_from_slice(message),
        );
        SseEvent::message(text(message)).with_id(id).encode()
    }
}
