//! The queue between a session's relays and its client's stream: at most [`QUEUED_EVENTS`]
//! events, and the bytes they hold charged to the principal's account on the `sse_sessions`
//! budget (book: docs/src/security.md, "Budgets").
//!
//! A full queue is backpressure, not loss: a relay waits, so it stops reading the inner answer
//! and the backend is read no faster than the client takes its events. A relay also waits while
//! its principal's share (or the node's ceiling) of queued bytes is spent and its own session
//! still has something queued; when its session has nothing queued, the event goes whatever the
//! budget holds (counted on the principal alone), so a client that reads always makes progress
//! and another principal's unread events can slow it to one event at a time, never stop it.
//!
//! A waiting relay holds the one event it waits to queue, uncharged: a session holds at most its
//! charged events, one kept event, and one event per relay (its posts in flight and its GET
//! stream), each no larger than a backend message.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use mcp_core::{Account, Charge};
use tokio::sync::{Notify, mpsc};

/// Events queued for one client before the relays wait for it to read: enough for a burst of
/// notifications, small enough that a client that stops reading holds little memory.
pub(crate) const QUEUED_EVENTS: usize = 64;

/// One encoded event and the bytes it holds on its principal's account until the client's
/// stream takes it.
#[derive(Debug)]
struct Queued {
    event: Bytes,
    _held: Charge,
}

/// A new session's queue, charged to `account`.
pub(crate) fn queue(account: Account) -> (Outbox, Inbox) {
    let (events, receiver) = mpsc::channel(QUEUED_EVENTS);
    let taken = Arc::new(Notify::new());
    let queued = Arc::new(AtomicUsize::new(0));
    (
        Outbox {
            events,
            account,
            taken: Arc::clone(&taken),
            queued: Arc::clone(&queued),
        },
        Inbox {
            receiver,
            taken,
            queued,
        },
    )
}

/// The relays' end of a session's queue.
#[derive(Debug)]
pub(crate) struct Outbox {
    events: mpsc::Sender<Queued>,
    account: Account,
    /// Signalled each time the client's stream takes an event.
    taken: Arc<Notify>,
    /// Events of this session on their way to the client (charged or kept, not taken yet):
    /// only the relay that moves it from 0 to 1 may send past a spent budget, so several
    /// relays waking at once cannot each force one.
    queued: Arc<AtomicUsize>,
}

impl Outbox {
    /// Queues `event` once its bytes fit (see the module docs); false when the client went
    /// away. A wait counts one refusal on the budget, however many times the relay wakes.
    pub(crate) async fn send(&self, event: Bytes) -> bool {
        let mut refused = false;
        let held = loop {
            // Enabled before the budget is asked, so an event taken in between still wakes us.
            let taken = self.taken.notified();
            tokio::pin!(taken);
            taken.as_mut().enable();
            // After a refusal, the budget is asked again only once it shows room (a refusal
            // then is a race, and counts).
            let charge = if refused && self.account.spent().is_some() {
                None
            } else {
                self.account.hold(event.len()).ok()
            };
            refused = true;
            if let Some(charge) = charge {
                self.queued.fetch_add(1, Ordering::AcqRel);
                break charge;
            }
            if self
                .queued
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                break self.account.keep(event.len());
            }
            tokio::select! {
                () = taken => {}
                () = self.events.closed() => return false,
            }
        };
        let sent = self
            .events
            .send(Queued { event, _held: held })
            .await
            .is_ok();
        if !sent {
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
        sent
    }

    /// Completes when the client's stream is gone.
    pub(crate) async fn closed(&self) {
        self.events.closed().await;
    }

    /// Whether the client's stream is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.events.is_closed()
    }
}

/// The client's stream's end of the queue.
#[derive(Debug)]
pub(crate) struct Inbox {
    receiver: mpsc::Receiver<Queued>,
    taken: Arc<Notify>,
    queued: Arc<AtomicUsize>,
}

impl Inbox {
    /// The next event; its bytes are given back as it is taken. `None` when every relay is
    /// gone.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        self.receiver.poll_recv(cx).map(|queued| {
            queued.map(|Queued { event, _held: held }| {
                // Given back before the senders wake, so the first to ask finds the room.
                drop(held);
                self.queued.fetch_sub(1, Ordering::AcqRel);
                self.taken.notify_waiters();
                event
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use futures_util::FutureExt;
    use mcp_core::{Budget, Principal};

    use super::*;

    fn alice(budget: &Budget) -> Account {
        budget.account(&Principal::new("https://issuer", "alice"))
    }

    #[tokio::test]
    async fn events_wait_while_the_share_is_spent_unless_their_session_has_nothing_queued() {
        let budget = Budget::new("sse_sessions").with_bytes(10, 1_000);
        let (stalled, mut stalled_inbox) = queue(alice(&budget));
        assert!(stalled.send(Bytes::from_static(b"0123456789")).await);
        assert_eq!(budget.held_bytes(), 10);
        // The share is spent and the session holds an event: the next one waits ...
        let waiting = stalled.send(Bytes::from_static(b"second"));
        tokio::pin!(waiting);
        assert!(waiting.as_mut().now_or_never().is_none());
        assert!(budget.refusals().share >= 1);
        // ... while another session of alice's with nothing queued sends at once, counted on
        // alice alone.
        let (reading, mut reading_inbox) = queue(alice(&budget));
        assert!(reading.send(Bytes::from_static(b"abc")).await);
        assert_eq!(budget.held_bytes(), 10, "kept, not towards the ceiling");
        assert_eq!(alice(&budget).held_bytes(), 13);
        let taken = poll_fn(|cx| reading_inbox.poll_recv(cx)).await;
        assert_eq!(taken.as_deref(), Some(&b"abc"[..]));
        // Once the client takes the first event, the waiting one goes.
        let first = poll_fn(|cx| stalled_inbox.poll_recv(cx)).await;
        assert_eq!(first.as_deref(), Some(&b"0123456789"[..]));
        assert!(waiting.await);
        let second = poll_fn(|cx| stalled_inbox.poll_recv(cx)).await;
        assert_eq!(second.as_deref(), Some(&b"second"[..]));
        assert_eq!(alice(&budget).held_bytes(), 0, "given back once taken");
    }

    #[tokio::test]
    async fn another_principals_queue_is_not_slowed_by_a_spent_share() {
        let budget = Budget::new("sse_sessions").with_bytes(10, 1_000);
        let (stalled, _unread) = queue(alice(&budget));
        assert!(stalled.send(Bytes::from_static(b"0123456789")).await);
        let (bob, mut inbox) = queue(budget.account(&Principal::new("https://issuer", "bob")));
        for _ in 0..3 {
            assert!(
                bob.send(Bytes::from_static(b"abc")).await,
                "bob's own share"
            );
        }
        for _ in 0..3 {
            assert!(poll_fn(|cx| inbox.poll_recv(cx)).await.is_some());
        }
    }

    #[tokio::test]
    async fn past_the_ceiling_a_reading_session_of_another_principal_goes_one_event_at_a_time() {
        let budget = Budget::new("sse_sessions").with_bytes(100, 10);
        let (stalled, _unread) = queue(alice(&budget));
        assert!(stalled.send(Bytes::from_static(b"0123456789")).await);
        assert_eq!(budget.held_bytes(), 10, "alice holds the whole ceiling");
        let (bob, mut inbox) = queue(budget.account(&Principal::new("https://issuer", "bob")));
        // Bob's queue is empty: his first event goes, kept on his account; his second waits
        // until his client takes the first.
        assert!(bob.send(Bytes::from_static(b"one")).await);
        let second = bob.send(Bytes::from_static(b"two"));
        tokio::pin!(second);
        assert!(second.as_mut().now_or_never().is_none(), "one at a time");
        let first = poll_fn(|cx| inbox.poll_recv(cx)).await;
        assert_eq!(first.as_deref(), Some(&b"one"[..]));
        assert!(second.await);
        let taken = poll_fn(|cx| inbox.poll_recv(cx)).await;
        assert_eq!(taken.as_deref(), Some(&b"two"[..]));
        assert_eq!(
            budget.refusals().ceiling,
            2,
            "one per send that found the ceiling spent"
        );
    }

    #[tokio::test]
    async fn a_wait_counts_one_refusal_however_often_its_relay_wakes() {
        let budget = Budget::new("sse_sessions").with_bytes(10, 1_000);
        let (outbox, mut inbox) = queue(alice(&budget));
        assert!(outbox.send(Bytes::from_static(b"ab")).await);
        assert!(
            outbox.send(Bytes::from(vec![b'x'; 20])).await,
            "held 2 < 10"
        );
        let waiting = outbox.send(Bytes::from_static(b"last"));
        tokio::pin!(waiting);
        assert!(waiting.as_mut().now_or_never().is_none(), "22 held");
        assert_eq!(budget.refusals().share, 1);
        // The first event taken wakes the relay, but 20 bytes are still held: it waits again,
        // and counts no second refusal.
        assert!(poll_fn(|cx| inbox.poll_recv(cx)).await.is_some());
        assert!(waiting.as_mut().now_or_never().is_none(), "20 held");
        assert!(poll_fn(|cx| inbox.poll_recv(cx)).await.is_some());
        assert_eq!(waiting.as_mut().now_or_never(), Some(true));
        assert_eq!(budget.refusals().share, 1);
    }

    #[tokio::test]
    async fn a_gone_client_releases_what_was_queued_and_ends_waiting_senders() {
        let budget = Budget::new("sse_sessions").with_bytes(10, 1_000);
        let (outbox, inbox) = queue(alice(&budget));
        assert!(outbox.send(Bytes::from_static(b"0123456789")).await);
        let waiting = outbox.send(Bytes::from_static(b"more"));
        tokio::pin!(waiting);
        assert!(waiting.as_mut().now_or_never().is_none());
        drop(inbox);
        assert!(!waiting.await, "the client is gone");
        assert_eq!(alice(&budget).held_bytes(), 0);
        assert!(outbox.is_closed());
    }
}
