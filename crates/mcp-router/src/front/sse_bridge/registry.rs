//! The open SSE sessions of one [`SseBridgeLayer`](super::SseBridgeLayer): who opened each, the
//! channel to its stream, and the inner 2025 session it drives.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use http::{Extensions, HeaderMap, HeaderValue};
use mcp_core::{Budget, Principal, Slot, Spent, VirtualHostId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::MAX_POSTS_IN_FLIGHT;
use super::queue::Outbox;

/// What the bridge learnt from the inner `initialize`: the headers every later inner request
/// carries.
#[derive(Clone, Debug, Default)]
pub(crate) struct InnerSession {
    pub(crate) session_id: Option<HeaderValue>,
    pub(crate) protocol_version: Option<HeaderValue>,
}

/// The request the client opened the stream with: the inner GET stream and the final DELETE are
/// sent with its headers and extensions (principal, configs), as the client's own would be.
#[derive(Debug)]
pub(crate) struct Opening {
    pub(crate) headers: HeaderMap,
    pub(crate) extensions: Extensions,
    /// The streamable-HTTP path of the virtual host (`…/mcp`).
    pub(crate) mcp_path: String,
}

/// One open SSE session.
#[derive(Debug)]
pub(crate) struct BridgeSession {
    pub(crate) id: String,
    pub(crate) principal: Principal,
    pub(crate) vhost_id: VirtualHostId,
    /// Encoded SSE events for the client's stream; closed when the client goes away.
    pub(crate) events: Outbox,
    pub(crate) opening: Opening,
    inner: Mutex<InnerSession>,
    /// Whether an `initialize` was sent in (only the first one is: each would open an inner
    /// session).
    initialize_claimed: AtomicBool,
    /// Permits for posted messages being forwarded (one per message, a batch takes several).
    posts: Arc<Semaphore>,
    /// Ends the client's stream when the inner session ended without the client (it expired).
    end: Mutex<Option<oneshot::Sender<()>>>,
}

impl BridgeSession {
    pub(crate) fn new(
        id: String,
        principal: Principal,
        vhost_id: VirtualHostId,
        events: Outbox,
        end: oneshot::Sender<()>,
        opening: Opening,
    ) -> Self {
        Self {
            id,
            principal,
            vhost_id,
            events,
            opening,
            inner: Mutex::default(),
            initialize_claimed: AtomicBool::new(false),
            posts: Arc::new(Semaphore::new(MAX_POSTS_IN_FLIGHT)),
            end: Mutex::new(Some(end)),
        }
    }

    /// Ends the client's stream (which then ends the session as a client leaving does).
    pub(crate) fn end_stream(&self) {
        if let Some(end) = self
            .end
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = end.send(());
        }
    }

    /// True for the first `initialize` of the session only.
    pub(crate) fn claim_initialize(&self) -> bool {
        !self.initialize_claimed.swap(true, Ordering::AcqRel)
    }

    /// Permits to forward `messages` posted messages; `None` when fewer than that of the
    /// [`MAX_POSTS_IN_FLIGHT`] are free (so a batch cannot get past the bound).
    pub(crate) fn post_permits(&self, messages: usize) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(messages).ok()?;
        Arc::clone(&self.posts).try_acquire_many_owned(n).ok()
    }

    pub(crate) fn inner(&self) -> InnerSession {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records the inner session of a successful `initialize`; false when one was recorded
    /// already (a second `initialize` does not replace the session the stream relays).
    pub(crate) fn set_inner(&self, session: InnerSession) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.session_id.is_some() {
            return false;
        }
        *inner = session;
        true
    }

    /// True when `principal` on `vhost_id` may post to this session.
    pub(crate) fn belongs_to(&self, principal: &Principal, vhost_id: &VirtualHostId) -> bool {
        &self.principal == principal && &self.vhost_id == vhost_id
    }
}

/// Why [`Registry::insert`] refused a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Full {
    /// `max` sessions are open.
    All,
    /// The session's principal holds `per_principal` of them.
    Principal,
}

/// The open sessions, at most `max` at a time and `per_principal` of one principal, and the
/// bytes their clients have not read yet (a session's queue, `super::queue`).
#[derive(Debug)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<String, (Arc<BridgeSession>, Slot)>>,
    budget: Budget,
}

impl Registry {
    /// Sessions and queued bytes drawn from `budget` (a slot per session).
    pub(crate) fn new(budget: Budget) -> Self {
        Self {
            sessions: Mutex::default(),
            budget,
        }
    }

    /// The budget the sessions draw from (a slot each, and their queued events' bytes).
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// A slot for a new session of `principal`, unless `max` sessions are open or the principal
    /// holds its share; the session's queue is charged to the slot's account.
    pub(crate) fn admit(&self, principal: &Principal) -> Result<Slot, Full> {
        // The principal's own share is checked first: a principal over it learns so even when
        // the whole table is full too.
        self.budget.take(principal).map_err(|spent| match spent {
            Spent::Share(_) => Full::Principal,
            Spent::Ceiling(_) => Full::All,
        })
    }

    /// Adds `session`, which holds `slot` until it is [`remove`](Self::remove)d.
    pub(crate) fn insert(&self, session: Arc<BridgeSession>, slot: Slot) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.insert(session.id.clone(), (session, slot));
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<BridgeSession>> {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .map(|(session, _)| Arc::clone(session))
    }

    pub(crate) fn remove(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    pub(crate) fn len(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// 128 random bits as 32 hex digits: unguessable, and nothing to escape in a query string.
pub(crate) fn new_session_id() -> Option<String> {
    use aws_lc_rs::rand::SecureRandom;
    use std::fmt::Write;
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::SystemRandom::new().fill(&mut bytes).ok()?;
    Some(bytes.iter().fold(String::with_capacity(32), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::sse_bridge::queue::queue;

    fn registry(max: usize, per_principal: usize) -> Registry {
        Registry::new(Budget::new("sse_sessions").with_slots(per_principal, max))
    }

    fn principal(subject: &str) -> Principal {
        Principal::new("https://issuer", subject)
    }

    fn session(id: &str) -> Arc<BridgeSession> {
        session_of(id, "alice")
    }

    fn session_of(id: &str, subject: &str) -> Arc<BridgeSession> {
        let budget = Budget::new("sse_sessions");
        let (events, _) = queue(budget.account(&principal(subject)));
        let (end, _) = oneshot::channel();
        Arc::new(BridgeSession::new(
            id.to_owned(),
            principal(subject),
            VirtualHostId::new("vh"),
            events,
            end,
            Opening {
                headers: HeaderMap::new(),
                extensions: Extensions::new(),
                mcp_path: "/servers/vh/mcp".to_owned(),
            },
        ))
    }

    /// Admits and inserts a session `id` of `subject`.
    fn open(registry: &Registry, id: &str, subject: &str) -> Result<(), Full> {
        let slot = registry.admit(&principal(subject))?;
        registry.insert(session_of(id, subject), slot);
        Ok(())
    }

    #[test]
    fn ids_are_128_bit_hex_and_differ() {
        let a = new_session_id().expect("randomness");
        let b = new_session_id().expect("randomness");
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn caps_open_sessions_and_frees_slots_on_remove() {
        let registry = registry(1, 1);
        assert_eq!(open(&registry, "a", "alice"), Ok(()));
        assert_eq!(open(&registry, "b", "bob"), Err(Full::All), "over the cap");
        registry.remove("a");
        assert_eq!(open(&registry, "b", "alice"), Ok(()));
        assert_eq!(registry.len(), 1);
        assert!(registry.get("a").is_none());
    }

    #[test]
    fn caps_each_principal_before_the_whole_table() {
        let registry = registry(3, 2);
        assert_eq!(open(&registry, "a1", "alice"), Ok(()));
        assert_eq!(open(&registry, "a2", "alice"), Ok(()));
        assert_eq!(open(&registry, "a3", "alice"), Err(Full::Principal));
        assert_eq!(open(&registry, "b1", "bob"), Ok(()));
        assert_eq!(open(&registry, "b2", "bob"), Err(Full::All));
        registry.remove("a1");
        assert_eq!(open(&registry, "a3", "alice"), Ok(()), "a freed slot");
    }

    #[test]
    fn binds_to_principal_and_virtual_host_and_keeps_the_first_inner_session() {
        let s = session("a");
        let alice = Principal::new("https://issuer", "alice");
        assert!(s.belongs_to(&alice, &VirtualHostId::new("vh")));
        assert!(!s.belongs_to(
            &Principal::new("https://issuer", "bob"),
            &VirtualHostId::new("vh")
        ));
        assert!(!s.belongs_to(&alice, &VirtualHostId::new("other")));
        let first = InnerSession {
            session_id: Some(HeaderValue::from_static("one")),
            protocol_version: None,
        };
        assert!(s.set_inner(first));
        assert!(!s.set_inner(InnerSession {
            session_id: Some(HeaderValue::from_static("two")),
            protocol_version: None,
        }));
        assert_eq!(s.inner().session_id, Some(HeaderValue::from_static("one")));
    }
}
