//! Change notifications on demand: who listens, and `touch`.
//!
//! Two kinds of listeners hear about changes:
//!
//! - modern (2026-07-28) `subscriptions/listen` streams: rmcp acknowledges the filter
//!   [`accepted_filter`] returns, then [`ServerHandler::listen`](rmcp::ServerHandler::listen)
//!   keeps the stream's [`SubscriptionSink`] registered here until the client goes away;
//! - legacy sessions: registered when they finish `initialize` (or first `resources/subscribe`),
//!   with the URIs they subscribed to. Their notifications go out through the session's peer,
//!   which rmcp routes to the session's GET stream.
//!
//! [`Listeners::touch`] sends, in this order: `notifications/resources/updated` for the URI (to
//! modern subscriptions that accepted it and legacy sessions that subscribed to it),
//! `notifications/resources/list_changed`, then `notifications/tools/list_changed` (modern
//! subscriptions only get what they accepted). `tools/list_changed` comes last so a test that sees
//! it knows everything before it has arrived.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
};

use rmcp::{
    Peer, RoleServer,
    model::{ResourceUpdatedNotificationParam, SubscriptionFilter},
    service::{SubscriptionSendError, SubscriptionSink},
};

use super::resources;

/// What one legacy session subscribed to (one per rmcp handler instance, so per session).
#[derive(Debug, Default)]
pub(crate) struct SessionSubscriptions {
    uris: Mutex<HashSet<String>>,
    registered: AtomicBool,
}

impl SessionSubscriptions {
    pub(crate) fn subscribe(&self, uri: &str) {
        self.lock().insert(uri.to_owned());
    }

    pub(crate) fn unsubscribe(&self, uri: &str) {
        self.lock().remove(uri);
    }

    fn contains(&self, uri: &str) -> bool {
        self.lock().contains(uri)
    }

    fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        // A plain set: a panic elsewhere cannot leave it half-updated.
        self.uris.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug, Clone)]
struct LegacyListener {
    peer: Peer<RoleServer>,
    session: Arc<SessionSubscriptions>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    modern: BTreeMap<u64, SubscriptionSink>,
    legacy: Vec<LegacyListener>,
}

/// How many listeners one [`TestBackend::touch`](crate::TestBackend::touch) (or `touch` tool
/// call) reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Touched {
    /// Open `subscriptions/listen` streams that got at least one notification.
    pub subscriptions: usize,
    /// Live legacy sessions notified (each gets the list changes; the resource update only when
    /// it subscribed to the URI).
    pub sessions: usize,
}

/// Every listener of one backend, kept across restarts (closed ones are dropped when noticed).
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    state: Mutex<State>,
}

impl Listeners {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Only whole entries are inserted or removed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a legacy session once.
    pub(crate) fn register_session(
        &self,
        peer: &Peer<RoleServer>,
        session: &Arc<SessionSubscriptions>,
    ) {
        if session.registered.swap(true, Ordering::SeqCst) {
            return;
        }
        self.lock().legacy.push(LegacyListener {
            peer: peer.clone(),
            session: session.clone(),
        });
    }

    /// Keeps `sink` registered until the returned guard is dropped.
    pub(crate) fn add_subscription(self: &Arc<Self>, sink: SubscriptionSink) -> SubscriptionGuard {
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.modern.insert(id, sink);
        SubscriptionGuard {
            listeners: self.clone(),
            id,
        }
    }

    /// Open `subscriptions/listen` streams.
    pub(crate) fn subscriptions(&self) -> usize {
        self.lock().modern.len()
    }

    /// Live legacy sessions subscribed to `uri`.
    pub(crate) fn sessions_subscribed_to(&self, uri: &str) -> usize {
        self.lock()
            .legacy
            .iter()
            .filter(|l| !l.peer.is_transport_closed() && l.session.contains(uri))
            .count()
    }

    /// Sends the change notifications (see the module docs) to every listener.
    pub(crate) async fn touch(&self, uri: Option<&str>) -> Touched {
        let (modern, legacy) = {
            let state = self.lock();
            let modern: Vec<(u64, SubscriptionSink)> = state
                .modern
                .iter()
                .map(|(id, sink)| (*id, sink.clone()))
                .collect();
            (modern, state.legacy.clone())
        };
        let mut touched = Touched::default();

        let mut closed = Vec::new();
        for (id, sink) in modern {
            match notify_subscription(&sink, uri).await {
                Ok(true) => touched.subscriptions += 1,
                Ok(false) => {}
                Err(()) => closed.push(id),
            }
        }

        let mut gone = Vec::new();
        for listener in legacy {
            if listener.peer.is_transport_closed() || notify_session(&listener, uri).await.is_err()
            {
                gone.push(listener.session);
            } else {
                touched.sessions += 1;
            }
        }

        let mut state = self.lock();
        for id in closed {
            state.modern.remove(&id);
        }
        state
            .legacy
            .retain(|l| !gone.iter().any(|g| Arc::ptr_eq(g, &l.session)));
        touched
    }
}

/// Unregisters a modern subscription when its `listen` ends (or its future is dropped).
#[derive(Debug)]
pub(crate) struct SubscriptionGuard {
    listeners: Arc<Listeners>,
    id: u64,
}

impl Drop for SubscriptionGuard {
    fn drop(&mut self) {
        self.listeners.lock().modern.remove(&self.id);
    }
}

/// `Ok(true)` when something was sent, `Ok(false)` when the filter wanted none of it, `Err` when
/// the subscription is gone.
async fn notify_subscription(sink: &SubscriptionSink, uri: Option<&str>) -> Result<bool, ()> {
    let mut sent = false;
    let mut record = |result: Result<(), SubscriptionSendError>| match result {
        Ok(()) => {
            sent = true;
            Ok(())
        }
        // Not in this subscription's accepted filter: skipped, as the spec requires.
        Err(SubscriptionSendError::NotificationNotAccepted(_)) => Ok(()),
        Err(_) => Err(()),
    };
    if let Some(uri) = uri {
        record(sink.notify_resource_updated(uri).await)?;
    }
    record(sink.notify_resource_list_changed().await)?;
    record(sink.notify_tool_list_changed().await)?;
    Ok(sent)
}

async fn notify_session(listener: &LegacyListener, uri: Option<&str>) -> Result<(), ()> {
    let peer = &listener.peer;
    if let Some(uri) = uri.filter(|uri| listener.session.contains(uri)) {
        peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
            .await
            .map_err(drop)?;
    }
    peer.notify_resource_list_changed().await.map_err(drop)?;
    peer.notify_tool_list_changed().await.map_err(drop)
}

/// The part of a `subscriptions/listen` filter a backend named `backend` honours: tool and
/// resource list changes, and subscriptions to the resources it has (rmcp further intersects this
/// with the request and the advertised capabilities).
pub(crate) fn accepted_filter(backend: &str, requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::new();
    accepted.tools_list_changed = requested.tools_list_changed;
    accepted.resources_list_changed = requested.resources_list_changed;
    accepted.resource_subscriptions = requested
        .resource_subscriptions
        .as_ref()
        .map(|uris| {
            uris.iter()
                .filter(|uri| resources::exists(backend, uri))
                .cloned()
                .collect::<Vec<_>>()
        })
        .filter(|uris| !uris.is_empty());
    accepted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_keeps_known_uris_and_list_flags() {
        let mut requested = SubscriptionFilter::new();
        requested.tools_list_changed = Some(true);
        requested.prompts_list_changed = Some(true);
        requested.resource_subscriptions = Some(vec![
            "test://b/static".to_owned(),
            "test://b/item/7".to_owned(),
            "test://other/static".to_owned(),
        ]);
        let accepted = accepted_filter("b", &requested);
        assert_eq!(accepted.tools_list_changed, Some(true));
        assert_eq!(accepted.prompts_list_changed, None);
        assert_eq!(accepted.resources_list_changed, None);
        assert_eq!(
            accepted.resource_subscriptions,
            Some(vec![
                "test://b/static".to_owned(),
                "test://b/item/7".to_owned()
            ])
        );

        let mut unknown = SubscriptionFilter::new();
        unknown.resource_subscriptions = Some(vec!["x".to_owned()]);
        assert_eq!(accepted_filter("b", &unknown).resource_subscriptions, None);
    }
}
