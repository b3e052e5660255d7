//! The front: what clients of each era see. The 2025 session engine ([`legacy`]: sessions,
//! their GET streams, event ids and replay, backend requests relayed to the client), the
//! 2026-07-28 request validation and envelopes ([`modern`], [`validate`]), the rendering of the
//! operations' answers as HTTP responses ([`answer`], [`respond`]), the 2024-11-05 HTTP+SSE
//! bridge for clients ([`sse_bridge`]), and, with a shared Redis, the node bus ([`bus`]) and
//! parked calls resumed on another node ([`forward`]).
//!
//! The front calls the operations (`crate::ops`) and reaches backends only through them or
//! through `crate::upstream` (a 2025 session's upstream sessions); nothing below imports it.

pub(crate) mod answer;
#[cfg(feature = "redis")]
pub mod bus;
pub(crate) mod dispatch;
#[cfg(feature = "redis")]
pub(crate) mod forward;
pub(crate) mod legacy;
pub(crate) mod modern;
pub(crate) mod respond;
pub mod sse_bridge;
pub(crate) mod validate;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::ops::Ops;
use crate::origin::OriginPolicy;
use crate::replay::ReplayBuffers;
use crate::session::SessionStore;
use crate::session_ends::SessionEnds;
use legacy::AdoptedRecords;
use mcp_core::Budget;

/// The front's state, shared by a router and all its clones: the operations' state, and what
/// this node holds for its clients' sessions and streams.
pub(crate) struct Front {
    pub(crate) ops: Arc<Ops>,
    pub(crate) max_body_bytes: usize,
    pub(crate) origins: OriginPolicy,
    /// This deployment's mark on upstream requests, checked on incoming ones.
    pub(crate) hops: crate::hops::Hops,
    /// Session records whose upstream sessions this node already adopted.
    pub(crate) adopted: AdoptedRecords,
    pub(crate) sessions: Arc<dyn SessionStore>,
    pub(crate) replay: ReplayBuffers,
    /// Open 2025 GET streams and 2026-07-28 `subscriptions/listen` streams per principal.
    pub(crate) streams: Budget,
    /// 2025 POST response streams relayed in the background (past a client's disconnect) per
    /// principal.
    pub(crate) relays: Budget,
    /// Signals to the streams of 2025 sessions that ended.
    pub(crate) ends: SessionEnds,
    /// How often the sessions this node holds streams and buffers for are checked for expiry.
    pub(crate) session_check_interval: Duration,
    /// Whether the expiry sweep runs (started by the first stream).
    pub(crate) sweeping: std::sync::atomic::AtomicBool,
    /// Messages to and from the other nodes (answers and cancellations, see [`bus`]).
    #[cfg(feature = "redis")]
    pub(crate) bus: Option<Arc<bus::NodeBus>>,
    /// Retries of parked calls passed on to the node holding them, waiting for its answer.
    #[cfg(feature = "redis")]
    pub(crate) forwards: forward::Waiting,
    /// The open GET streams of this node's 2025 sessions that follow modern backends' resources,
    /// woken when their session's subscriptions change.
    pub(crate) subscription_watchers:
        std::sync::Mutex<HashMap<String, std::sync::Weak<tokio::sync::Notify>>>,
    /// The audit trail, when one is configured: a record per message (see `dispatch`).
    pub(crate) audit: Option<crate::audit::Audit>,
}

impl Front {
    /// A 2025 session ended (DELETE, or the store forgot it): its GET streams end (and with them
    /// the upstream follows and the HTTP+SSE bridge session they feed) and its replay buffers
    /// are dropped.
    pub(crate) fn session_ended(&self, session: &str) {
        self.replay.forget(session);
        self.ends.end(session);
    }

    /// Starts, once, the task that releases what this node holds for 2025 sessions that expired
    /// (see [`crate::session_ends`]). It holds the router weakly and stops with it.
    pub(crate) fn ensure_sweeping(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.sweeping.store(false, Ordering::Release);
            return;
        };
        let weak = Arc::downgrade(self);
        let every = self.session_check_interval;
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(front) = weak.upgrade() else { return };
                front.release_expired().await;
            }
        });
    }

    /// One sweep: every session with buffers or streams here that the store no longer has.
    async fn release_expired(&self) {
        let mut held = self.replay.sessions();
        held.extend(self.ends.sessions());
        held.sort_unstable();
        held.dedup();
        for session in held {
            match self.sessions.exists(&session).await {
                Ok(false) => {
                    tracing::debug!("a 2025 session expired: releasing its streams and buffers");
                    self.session_ended(&session);
                }
                Ok(true) => {}
                // A store failure is not an expiry: try again next time.
                Err(e) => {
                    tracing::debug!(error = %e, "session store failure during the expiry sweep")
                }
            }
        }
    }

    /// A signal that fires when `session`'s resource subscriptions change on this node.
    pub(crate) fn subscription_watch(&self, session: &str) -> Arc<tokio::sync::Notify> {
        let mut watchers = self
            .subscription_watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        watchers.retain(|_, w| w.strong_count() > 0);
        if let Some(watch) = watchers.get(session).and_then(std::sync::Weak::upgrade) {
            return watch;
        }
        let watch = Arc::new(tokio::sync::Notify::new());
        watchers.insert(session.to_owned(), Arc::downgrade(&watch));
        watch
    }

    /// Wakes the GET streams of `session` on this node (its subscriptions changed).
    pub(crate) fn subscriptions_changed(&self, session: &str) {
        let watchers = self
            .subscription_watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(watch) = watchers.get(session).and_then(std::sync::Weak::upgrade) {
            watch.notify_waiters();
        }
    }
}

/// How many node bus messages wait for this node at most (the subscription waits beyond that).
#[cfg(feature = "redis")]
const BUS_INBOX: usize = 1024;

#[cfg(feature = "redis")]
impl Front {
    /// Starts, once, this node's subscription to the node bus (when there is one) and the task
    /// that acts on its messages. The task holds the front weakly and ends with the bus.
    pub(crate) fn ensure_listening(self: &Arc<Self>) {
        let Some(bus) = &self.bus else {
            return;
        };
        bus.ensure_listening(|| {
            let (sender, receiver) = tokio::sync::mpsc::channel(BUS_INBOX);
            tokio::spawn(read_inbox(Arc::downgrade(self), receiver));
            sender
        });
    }
}

/// Acts on the messages the node bus received for this node (or for all).
#[cfg(feature = "redis")]
async fn read_inbox(
    front: std::sync::Weak<Front>,
    mut inbox: tokio::sync::mpsc::Receiver<bus::BusMessage>,
) {
    use bus::BusMessage;
    while let Some(message) = inbox.recv().await {
        let Some(front) = front.upgrade() else {
            return;
        };
        match message {
            BusMessage::Answer {
                session,
                id,
                answer,
            } => {
                if !front.ops.pending.answer_local(&id, &session, answer) {
                    tracing::debug!(id = %id, "node bus answer for an unknown or expired request");
                }
            }
            BusMessage::Cancel { session, request } => {
                let found = front.ops.inflight.cancel(&(session, request));
                tracing::debug!(found, "node bus cancellation");
            }
            BusMessage::Revoke(revocation) => front.sessions.revoke(&revocation),
            BusMessage::Resume(forwarded) => {
                if front
                    .bus
                    .as_ref()
                    .is_some_and(|bus| bus.first_sight(&forwarded.ticket))
                {
                    tokio::spawn(forward::serve(Arc::clone(&front), *forwarded));
                }
            }
            BusMessage::ResumePart { ticket, part } => front.forwards.deliver(&ticket, part),
        }
    }
}
