//! One call's end of a link: the channel its messages wait in until its caller takes them, and
//! the share of that channel the call may hold.
//!
//! A link reads its carrier for every call on it, so it cannot stop reading for one call whose
//! client does not read (that would stall the others). What it has read for a call waits here;
//! the call's caller (its relay, read as fast as its client takes the answer) releases it as it
//! takes each message. A call holds at most its [`CallShare`] of messages not taken yet
//! (`limits.link_call_buffer_bytes`, 1 MiB, and `limits.link_call_buffer_messages`, 1,024): a
//! message arriving while the call holds either ([`CallSender::send`]) is not kept, and the link
//! fails the call with [`UpstreamError::CallBufferFull`] and cancels it upstream. A message is
//! taken whenever the call holds less than its share, and counts in full (one larger than the
//! whole byte share is taken, and fills it). The call's response is always taken
//! ([`CallSender::respond`]): it ends the call, so it adds one message at most. A call thus holds
//! at most its share, one message and its response.
//!
//! Beside its own share, a call draws what it holds from its principal's account of the
//! links' [`Budget`] (`limits.link_buffer_bytes_per_principal`, and the node's
//! `limits.link_buffer_bytes`): a principal with many calls whose clients do not read cannot
//! hold more than its share in all, whatever the number of calls. A message arriving while the
//! account or the node holds its limit fails the call the same way, with
//! [`UpstreamError::LinkBufferSpent`]; what a call still holds when it goes is given back.
//!
//! The accounting is two atomic counters per call beside an unbounded channel, and the account's
//! two: adding on the link's side, subtracting on the caller's as it takes a message; no lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use mcp_core::{Account, Budget, Envelope, MessageKind, RawObject, Spent};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::{Calls, Outbound};
use crate::upstream::{MessageStream, UpstreamError};

/// Bytes of messages a call may hold that its caller has not taken yet, by default.
pub(in crate::upstream) const CALL_BYTES: usize = 1024 * 1024;
/// Messages a call may hold that its caller has not taken yet, by default (many small ones cost
/// more than their bytes).
pub(in crate::upstream) const CALL_MESSAGES: usize = 1024;

/// What one call may hold that its caller has not taken yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::upstream) struct CallShare {
    pub(in crate::upstream) bytes: usize,
    pub(in crate::upstream) messages: usize,
}

impl Default for CallShare {
    fn default() -> Self {
        Self {
            bytes: CALL_BYTES,
            messages: CALL_MESSAGES,
        }
    }
}

/// Where the calls of a link draw what their callers have not taken yet from: each call's own
/// share, and its principal's account of the links' budget.
#[derive(Clone, Debug)]
pub(in crate::upstream) struct LinkBuffers {
    pub(in crate::upstream) budget: Budget,
    pub(in crate::upstream) per_call: CallShare,
}

impl LinkBuffers {
    /// Calls drawing from `budget`, each with the default share.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(in crate::upstream) fn new(budget: Budget) -> Self {
        Self {
            budget,
            per_call: CallShare::default(),
        }
    }
}

type Item = Result<Bytes, UpstreamError>;
/// A message on its way, and whether it was forced on the account (the response).
type Queued = Result<(Bytes, bool), UpstreamError>;

/// What a call holds that its caller has not taken yet, and the account it is drawn from.
struct Held {
    bytes: AtomicUsize,
    messages: AtomicUsize,
    /// Of `bytes`, the response's (forced on the account, not charged).
    forced: AtomicUsize,
    account: Account,
    share: CallShare,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Both ends are gone: what was never taken goes back to the principal's account.
        let forced = *self.forced.get_mut();
        self.account
            .release(self.bytes.get_mut().saturating_sub(forced));
        self.account.release_forced(forced);
    }
}

/// How a call's messages wait: the longest gap between two, whose budget they draw from, and
/// the call's own share.
pub(in crate::upstream) struct CallTerms {
    pub(in crate::upstream) timeout: Duration,
    pub(in crate::upstream) account: Account,
    pub(in crate::upstream) share: CallShare,
}

/// The link's end of one call's channel.
#[derive(Clone)]
pub(super) struct CallSender {
    tx: mpsc::UnboundedSender<Queued>,
    held: Arc<Held>,
}

/// The caller's end of one call's channel.
pub(super) struct CallReceiver {
    rx: mpsc::UnboundedReceiver<Queued>,
    held: Arc<Held>,
}

/// A new call's channel of `share`, drawing from `account`.
pub(super) fn channel(account: Account, share: CallShare) -> (CallSender, CallReceiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    let held = Arc::new(Held {
        bytes: AtomicUsize::new(0),
        messages: AtomicUsize::new(0),
        forced: AtomicUsize::new(0),
        account,
        share,
    });
    (
        CallSender {
            tx,
            held: Arc::clone(&held),
        },
        CallReceiver { rx, held },
    )
}

impl CallSender {
    /// Hands `message` (of the call's course, not its response) to the call, unless the call
    /// already holds its share: then the message is not kept, and the error to fail the call
    /// with is returned.
    pub(super) fn send(&self, message: &[u8]) -> Result<(), UpstreamError> {
        // Only the link adds (from one task at a time), so a share seen free here stays free
        // until this message is added; the caller only takes away meanwhile.
        let share = self.held.share;
        if self.held.bytes.load(Ordering::Relaxed) >= share.bytes {
            return Err(UpstreamError::CallBufferFull {
                limit: share.bytes,
                unit: "bytes",
                key: "limits.link_call_buffer_bytes",
            });
        }
        if self.held.messages.load(Ordering::Relaxed) >= share.messages {
            return Err(UpstreamError::CallBufferFull {
                limit: share.messages,
                unit: "messages",
                key: "limits.link_call_buffer_messages",
            });
        }
        self.held.account.charge(message.len()).map_err(|spent| {
            let (whose, limit, key) = spent_limit(spent);
            UpstreamError::LinkBufferSpent { whose, limit, key }
        })?;
        self.keep(message, false);
        Ok(())
    }

    /// Hands the call its response, whatever it holds: it ends the call. It counts on the
    /// principal's account, not towards the node's ceiling (one principal's responses must not
    /// spend everybody's).
    pub(super) fn respond(&self, message: &[u8]) {
        self.held.account.force(message.len());
        self.held.forced.fetch_add(message.len(), Ordering::Relaxed);
        self.keep(message, true);
    }

    /// Ends the call with `error` (after what it holds).
    pub(super) fn fail(&self, error: UpstreamError) {
        // A caller already gone needs no answer.
        let _ = self.tx.send(Err(error));
    }

    fn keep(&self, message: &[u8], forced: bool) {
        // Counted before it is sent, so the caller never takes away more than was added.
        self.held.bytes.fetch_add(message.len(), Ordering::Relaxed);
        self.held.messages.fetch_add(1, Ordering::Relaxed);
        // A caller already gone takes nothing: what it held is given back with `Held`.
        let _ = self.tx.send(Ok((Bytes::copy_from_slice(message), forced)));
    }
}

impl CallReceiver {
    /// The call's next message, released from its share; `None` when the link dropped the call.
    async fn recv(&mut self) -> Option<Item> {
        let item = self.rx.recv().await?;
        Some(item.map(|(message, forced)| {
            self.held.bytes.fetch_sub(message.len(), Ordering::Relaxed);
            self.held.messages.fetch_sub(1, Ordering::Relaxed);
            if forced {
                self.held.forced.fetch_sub(message.len(), Ordering::Relaxed);
                self.held.account.release_forced(message.len());
            } else {
                self.held.account.release(message.len());
            }
            message
        }))
    }
}

/// `notifications/cancelled` for the call `key` (its request id as JSON), with `reason` if any.
pub(super) fn cancelled(key: &str, reason: Option<&str>) -> Vec<u8> {
    let mut params = RawObject::new();
    if let Ok(id) = RawValue::from_string(key.to_owned()) {
        params.set_raw("requestId", id);
    }
    if let Some(reason) = reason {
        params.set_str("reason", reason);
    }
    mcp_core::encode_notification("notifications/cancelled", Some(&params.to_raw()))
}

/// The messages of one call: each must arrive within `timeout`; a caller that drops the stream
/// before the response takes the call off the link's `calls` (a backend that honours the
/// cancellation never answers, and the entry would keep the link busy and hide which call is
/// the only one in flight) and tells the backend with `notifications/cancelled` (when the link's
/// queue has room: it is dropped otherwise, as the backend is not reading anyway).
pub(super) fn messages(
    rx: CallReceiver,
    timeout: Duration,
    out: mpsc::Sender<Outbound>,
    key: String,
    calls: Arc<Calls>,
) -> MessageStream {
    struct Pending {
        rx: CallReceiver,
        out: mpsc::Sender<Outbound>,
        key: String,
        calls: Arc<Calls>,
        done: bool,
    }
    impl Drop for Pending {
        fn drop(&mut self) {
            if !self.done {
                drop(self.calls.remove(&self.key));
                let cancel = Outbound {
                    body: cancelled(&self.key, None),
                    call: None,
                    headers: None,
                    _charge: None,
                };
                if let Err(mpsc::error::TrySendError::Full(_)) = self.out.try_send(cancel) {
                    tracing::debug!(
                        "a backend link's queue is full: a call's cancellation is not sent"
                    );
                }
            }
        }
    }
    let call = Pending {
        rx,
        out,
        key,
        calls,
        done: false,
    };
    Box::pin(futures_util::stream::unfold(
        call,
        move |mut call| async move {
            if call.done {
                return None;
            }
            match tokio::time::timeout(timeout, call.rx.recv()).await {
                Ok(Some(Ok(message))) => {
                    let last = Envelope::parse(&message).is_ok_and(|e| {
                        matches!(e.kind(), MessageKind::Response | MessageKind::Error)
                    });
                    call.done = last;
                    Some((Ok(message), call))
                }
                Ok(Some(Err(e))) => {
                    call.done = true;
                    Some((Err(e), call))
                }
                Ok(None) => {
                    call.done = true;
                    Some((Err(UpstreamError::Disconnected), call))
                }
                Err(_) => Some((Err(UpstreamError::Timeout(timeout)), call)),
            }
        },
    ))
}

/// Whose bytes a refused charge of the links' budget found spent, the limit and its key (for
/// [`UpstreamError::LinkBufferSpent`] and [`UpstreamError::LinkQueueSpent`]).
pub(super) fn spent_limit(spent: Spent) -> (&'static str, usize, &'static str) {
    match spent {
        Spent::Share(limit) => (
            "this caller's clients",
            limit,
            "limits.link_buffer_bytes_per_principal",
        ),
        Spent::Ceiling(limit) => (
            "the clients of every caller on this node",
            limit,
            "limits.link_buffer_bytes",
        ),
    }
}
