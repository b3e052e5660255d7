//! The open SSE sessions of one [`SseBridgeLayer`](super::SseBridgeLayer): who opened each, the
//! channel to its stream, and the inner 2025 session it drives.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{Extensions, HeaderMap, HeaderValue};
use mcp_core::{Principal, VirtualHostId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::MAX_POSTS_IN_FLIGHT;

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
    pub(crate) events: mpsc::Sender<Bytes>,
    pub(crate) opening: Opening,
    inner: Mutex<InnerSession>,
    /// Whether an `initialize` was sent in (only the first one is: each would open an inner
    /// session).
    initialize_claimed: AtomicBool,
    /// Permits for posted messages being forwarded.
    posts: Arc<Semaphore>,
}

impl BridgeSession {
    pub(crate) fn new(
        id: String,
        principal: Principal,
        vhost_id: VirtualHostId,
        events: mpsc::Sender<Bytes>,
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
        }
    }

    /// True for the first `initialize` of the session only.
    pub(crate) fn claim_initialize(&self) -> bool {
        !self.initialize_claimed.swap(true, Ordering::AcqRel)
    }

    /// A permit to forward one posted body; `None` while [`MAX_POSTS_IN_FLIGHT`] are.
    pub(crate) fn post_permit(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.posts).try_acquire_owned().ok()
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

/// The open sessions, at most `max` at a time.
#[derive(Debug)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<String, Arc<BridgeSession>>>,
    max: usize,
}

impl Registry {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            sessions: Mutex::default(),
            max,
        }
    }

    /// Adds `session`; false when `max` sessions are open already.
    pub(crate) fn insert(&self, session: Arc<BridgeSession>) -> bool {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() >= self.max {
            return false;
        }
        sessions.insert(session.id.clone(), session);
        true
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<BridgeSession>> {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
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

    fn session(id: &str) -> Arc<BridgeSession> {
        let (events, _) = mpsc::channel(1);
        Arc::new(BridgeSession::new(
            id.to_owned(),
            Principal::new("https://issuer", "alice"),
            VirtualHostId::new("vh"),
            events,
            Opening {
                headers: HeaderMap::new(),
                extensions: Extensions::new(),
                mcp_path: "/servers/vh/mcp".to_owned(),
            },
        ))
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
        let registry = Registry::new(1);
        assert!(registry.insert(session("a")));
        assert!(!registry.insert(session("b")), "over the cap");
        registry.remove("a");
        assert!(registry.insert(session("b")));
        assert_eq!(registry.len(), 1);
        assert!(registry.get("a").is_none());
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
