//! Upstream sessions with legacy (2025) backends, kept per credential scope and client capability
//! set ([`SessionKey`]) so that concurrent calls of one caller share one backend session, and
//! bounded per principal ([`ScopedTable`]): a caller that opens more than its share recycles its
//! own oldest session, and a full table refuses newcomers instead of evicting another tenant's.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::HeaderValue;
use tokio::sync::OnceCell;

use super::UpstreamError;
use super::identity::{MAX_INITIALIZE_RESULT_BYTES, MAX_SESSION_ID_BYTES};
use super::scope::CredentialScope;
use super::scoped_table::ScopedTable;
use crate::telemetry::SessionClock;

/// One initialized session with a legacy backend.
#[derive(Debug)]
pub(crate) struct LegacySession {
    /// The backend URL the session lives at (the primary or a replica).
    pub(crate) url: url::Url,
    /// The backend's `Mcp-Session-Id`, if it minted one (stateless legacy servers do not).
    pub(crate) id: Option<HeaderValue>,
    /// The negotiated protocol version.
    pub(crate) version: String,
    /// The backend's `InitializeResult`, raw (capabilities, serverInfo, instructions).
    pub(crate) initialize_result: Bytes,
    /// Records the session's duration when this node lets go of it.
    pub(crate) clock: SessionClock,
}

impl LegacySession {
    /// What the session costs the table, in bytes: the backend's strings it keeps (the
    /// `InitializeResult` is most of it; each is bounded when the session is made) and the
    /// record around them.
    pub(crate) fn weight(&self) -> usize {
        self.initialize_result.len()
            + self.id.as_ref().map_or(0, HeaderValue::len)
            + self.version.len()
            + self.url.as_str().len()
            + std::mem::size_of::<Self>()
    }
}

/// Which upstream session a call uses: its credential scope and a digest of the client
/// capabilities it was initialised with (the digest keeps a large capability object out of the
/// key; its size is capped downstream).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SessionKey {
    pub(crate) scope: CredentialScope,
    pub(crate) capabilities: [u8; 32],
}

type Slot = Arc<OnceCell<Arc<LegacySession>>>;

/// How long an upstream session no call uses stays in the table: a full table drops such
/// sessions (they simply idle out at the backend; a later call initialises anew) before it
/// refuses a newcomer.
const IDLE: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// The table of upstream sessions. Creation is single-flight per key: concurrent first calls of
/// one caller make one `initialize`.
#[derive(Debug)]
pub(crate) struct SessionTable {
    slots: ScopedTable<SessionKey, Slot>,
    /// How many downstream (2025) sessions use each upstream session: the last one to end
    /// ends the upstream session too. Entries leave with their slot.
    attached: Mutex<HashMap<SessionKey, usize>>,
    /// Upstream session ids a backend answered 404 for: never adopted again from a downstream
    /// session record (which may still name them), so a dead id costs one 404 per node.
    retired: Mutex<Retired>,
    max: usize,
    /// Counts removals from the table: a node that adopted a record's upstream sessions adopts
    /// them again once an entry may have gone (see `legacy::adopted`).
    generation: std::sync::atomic::AtomicU64,
}

/// A bounded set of retired upstream session ids, oldest dropped first.
#[derive(Debug, Default)]
struct Retired {
    ids: HashSet<String>,
    order: VecDeque<String>,
}

impl Retired {
    fn insert(&mut self, id: &str, max: usize) {
        if self.ids.insert(id.to_owned()) {
            self.order.push_back(id.to_owned());
        }
        while self.order.len() > max {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
    }
}

impl SessionTable {
    /// At most `max` sessions, `per_principal` of them one principal's, weighing at most
    /// `bytes` in all and `bytes_per_principal` of one principal's ([`LegacySession::weight`]).
    pub(crate) fn new(
        max: usize,
        per_principal: usize,
        bytes_per_principal: usize,
        bytes: usize,
    ) -> Self {
        Self {
            // A newcomer needs room for a session of the largest kind it may get.
            slots: ScopedTable::weighed(
                "upstream_sessions",
                per_principal,
                max,
                IDLE,
                bytes_per_principal,
                bytes,
            )
            .reserving(MAX_INITIALIZE_RESULT_BYTES + MAX_SESSION_ID_BYTES),
            attached: Mutex::new(HashMap::new()),
            retired: Mutex::new(Retired::default()),
            max,
            generation: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The slot for `key`, created empty when absent. A caller at its share gives up its own
    /// oldest session (which then idles out at the backend); a full table refuses.
    pub(crate) fn slot(&self, key: &SessionKey) -> Result<Slot, UpstreamError> {
        let inserted = self
            .slots
            .get_or_insert_with(key, &key.scope.principal, || Arc::new(OnceCell::new()));
        for (evicted, _) in &inserted.evicted {
            self.lock_attached().remove(evicted);
            self.bump();
        }
        inserted.value.ok_or(UpstreamError::TooManySessions)
    }

    /// Charges `key`'s slot with what `session` weighs, once it is made: the caller's own
    /// oldest sessions give way when it is over its byte share (or the table's bytes are spent);
    /// when that is not enough the slot leaves (the session serves the calls waiting for it, and
    /// idles out at the backend). Returns whether it was kept.
    pub(crate) fn keep(&self, key: &SessionKey, session: &LegacySession) -> bool {
        let weighed = self.slots.weigh(key, session.weight());
        for (evicted, _) in &weighed.evicted {
            self.lock_attached().remove(evicted);
            self.bump();
        }
        if !weighed.kept {
            self.lock_attached().remove(key);
            self.bump();
        }
        weighed.kept
    }

    /// The budget the sessions draw from.
    pub(crate) fn budget(&self) -> &mcp_core::Budget {
        self.slots.budget()
    }

    /// Forgets `key` when its session could not be initialised, so a failed slot does not hold
    /// the caller's share (or the table's room) until it expires.
    pub(crate) fn forget_failed(&self, key: &SessionKey) {
        let _ = self.slots.remove_if(key, |slot| slot.get().is_none());
    }

    fn lock_attached(&self) -> std::sync::MutexGuard<'_, HashMap<SessionKey, usize>> {
        self.attached.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets `key` if it still holds `session` (another call may already have replaced it).
    /// With `retire`, the backend forgot the session (404): its id is never adopted again.
    pub(crate) fn forget(&self, key: &SessionKey, session: &Arc<LegacySession>, retire: bool) {
        if retire {
            self.retire(session);
        }
        let same = |slot: &Slot| {
            slot.get()
                .is_some_and(|current| Arc::ptr_eq(current, session))
        };
        if self.slots.remove_if(key, same).is_some() {
            self.lock_attached().remove(key);
            self.bump();
        }
    }

    /// Never adopts `session`'s id again.
    fn retire(&self, session: &LegacySession) {
        if let Some(id) = session.id.as_ref().and_then(|v| v.to_str().ok()) {
            let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
            retired.insert(id, self.max);
        }
    }

    /// How many times an entry left the table.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    fn bump(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Continues an upstream session another node (or an earlier process) created, as recorded in
    /// a downstream session record: `key` gets `session` unless it already has one, or the id was
    /// retired. Returns whether it was adopted.
    pub(crate) fn adopt(&self, key: &SessionKey, session: LegacySession) -> bool {
        let Some(id) = session.id.as_ref().and_then(|v| v.to_str().ok()) else {
            return false;
        };
        if self
            .retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ids
            .contains(id)
        {
            return false;
        }
        let Ok(slot) = self.slot(key) else {
            return false;
        };
        // Weighed only once it is this slot's: a session another call just made stays weighed
        // as its own.
        let session = Arc::new(session);
        slot.set(Arc::clone(&session)).is_ok() && self.keep(key, &session)
    }

    /// One more downstream session uses `key`.
    pub(crate) fn attach(&self, key: &SessionKey) {
        if self.slots.get(key).is_none() {
            // Evicted meanwhile: nothing to end later.
            return;
        }
        *self.lock_attached().entry(key.clone()).or_default() += 1;
    }

    /// One downstream session of `key` ended; returns the upstream session to end when it was
    /// the last one (and forgets it). Its id is retired: a downstream session that recorded it
    /// without being attached (it joined as the session was being detached, or on another
    /// node) must not adopt the session this node is about to end, or its calls would race
    /// the DELETE (a backend may then answer 500 instead of 404, which is not retried).
    pub(crate) fn detach(&self, key: &SessionKey) -> Option<Arc<LegacySession>> {
        let mut attached = self.lock_attached();
        let count = attached.get_mut(key)?;
        *count = count.saturating_sub(1);
        if *count > 0 {
            return None;
        }
        attached.remove(key);
        drop(attached);
        let removed = self.slots.remove(key);
        if removed.is_some() {
            self.bump();
        }
        let session = removed.and_then(|slot| slot.get().cloned())?;
        self.retire(&session);
        Some(session)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(subject: &str, caps: u8) -> SessionKey {
        SessionKey {
            scope: CredentialScope::new(
                "http://b/mcp",
                &mcp_config_store::HeaderPolicy::default(),
                &http::HeaderMap::new(),
                &mcp_core::Principal::new("i", subject),
            ),
            capabilities: [caps; 32],
        }
    }

    fn key(n: usize) -> SessionKey {
        key_of(&format!("s{n}"), 0)
    }

    fn slot(table: &SessionTable, key: &SessionKey) -> Slot {
        table.slot(key).expect("room")
    }

    #[test]
    fn bounded_and_forget_only_same_session() {
        let table = SessionTable::new(2, 2, usize::MAX, usize::MAX);
        let _ = slot(&table, &key(0));
        let _ = slot(&table, &key(1));
        assert!(
            matches!(table.slot(&key(2)), Err(UpstreamError::TooManySessions)),
            "a full table refuses a newcomer"
        );
        assert_eq!(table.len(), 2);
        let table = SessionTable::new(10, 10, usize::MAX, usize::MAX);
        let slot = slot(&table, &key(9));
        let session = Arc::new(LegacySession {
            url: url::Url::parse("http://b/mcp").expect("url"),
            id: None,
            version: "2025-11-25".into(),
            initialize_result: Bytes::new(),
            clock: SessionClock::unknown(),
        });
        slot.set(Arc::clone(&session)).expect("empty slot");
        let other = Arc::new(LegacySession {
            url: url::Url::parse("http://b/mcp").expect("url"),
            id: None,
            version: "x".into(),
            initialize_result: Bytes::new(),
            clock: SessionClock::unknown(),
        });
        table.forget(&key(9), &other, false);
        assert!(
            table.slot(&key(9)).expect("room").get().is_some(),
            "a different session is not forgotten"
        );
        table.forget(&key(9), &session, false);
        assert!(table.slot(&key(9)).expect("room").get().is_none());
    }

    #[test]
    fn a_caller_over_its_share_recycles_its_own_oldest_session_only() {
        let table = SessionTable::new(100, 3, usize::MAX, usize::MAX);
        let bob = key_of("bob", 0);
        slot(&table, &bob)
            .set(Arc::new(recorded("bob-1")))
            .expect("empty slot");
        table.attach(&bob);
        let alice: Vec<_> = (0..10).map(|n| key_of("alice", n)).collect();
        for key in &alice {
            let _ = slot(&table, key);
            table.attach(key);
        }
        assert_eq!(table.len(), 4, "alice holds her share, bob his session");
        assert_eq!(table.slots.held_by(&bob.scope.principal), 1);
        assert!(
            table.detach(&alice[0]).is_none(),
            "an evicted session's attachment went with it"
        );
        assert!(table.detach(&bob).is_some(), "bob's session is still there");
    }

    fn recorded(id: &str) -> LegacySession {
        LegacySession {
            url: url::Url::parse("http://b/mcp").expect("url"),
            id: Some(HeaderValue::from_str(id).expect("header value")),
            version: "2025-11-25".into(),
            initialize_result: Bytes::new(),
            clock: SessionClock::unknown(),
        }
    }

    #[test]
    fn adoption_fills_only_empty_slots_and_never_revives_a_retired_id() {
        let table = SessionTable::new(10, 10, usize::MAX, usize::MAX);
        assert!(table.adopt(&key(1), recorded("up-1")), "empty slot");
        assert!(
            !table.adopt(&key(1), recorded("up-2")),
            "a held session is kept"
        );
        let held = slot(&table, &key(1)).get().cloned().expect("adopted");
        assert_eq!(held.id.as_ref().and_then(|v| v.to_str().ok()), Some("up-1"));

        // The backend forgot it (404): retired, so a record naming it is not followed again.
        table.forget(&key(1), &held, true);
        assert!(!table.adopt(&key(1), recorded("up-1")), "retired");
        assert!(slot(&table, &key(1)).get().is_none());
        assert!(table.adopt(&key(1), recorded("up-3")), "another id is fine");

        // Forgetting without retiring (an adopted session replaced to learn its description).
        let held = slot(&table, &key(1)).get().cloned().expect("adopted");
        table.forget(&key(1), &held, false);
        assert!(table.adopt(&key(1), recorded("up-3")), "not retired");
        assert!(
            !table.adopt(
                &key(2),
                LegacySession {
                    id: None,
                    ..recorded("x")
                }
            ),
            "nothing to continue without a session id"
        );
    }

    #[test]
    fn the_last_detach_ends_the_upstream_session() {
        let table = SessionTable::new(10, 10, usize::MAX, usize::MAX);
        let session = Arc::new(LegacySession {
            url: url::Url::parse("http://b/mcp").expect("url"),
            id: None,
            version: "2025-11-25".into(),
            initialize_result: Bytes::new(),
            clock: SessionClock::unknown(),
        });
        slot(&table, &key(1))
            .set(Arc::clone(&session))
            .expect("empty slot");
        table.attach(&key(1));
        table.attach(&key(1));
        assert!(
            table.detach(&key(1)).is_none(),
            "another downstream session still uses it"
        );
        assert!(
            table
                .detach(&key(1))
                .is_some_and(|s| Arc::ptr_eq(&s, &session))
        );
        assert!(slot(&table, &key(1)).get().is_none(), "forgotten");
        assert!(table.detach(&key(2)).is_none(), "never attached");
    }

    /// A downstream session that recorded an upstream session without being attached to it
    /// (it joined while the last attached one was ending it) does not adopt it back: its calls
    /// would race the DELETE. Control: before the detach, the same id is adoptable elsewhere.
    #[test]
    fn an_ended_upstream_session_is_never_adopted_again() {
        let table = SessionTable::new(10, 10, usize::MAX, usize::MAX);
        assert!(table.adopt(&key(1), recorded("up-1")), "adopted");
        table.attach(&key(1));
        assert!(
            table.adopt(&key(2), recorded("up-1")),
            "control: a live id may be adopted"
        );
        let ended = table.detach(&key(1)).expect("the last one ends it");
        assert_eq!(
            ended.id.as_ref().and_then(|v| v.to_str().ok()),
            Some("up-1")
        );
        assert!(
            !table.adopt(&key(1), recorded("up-1")),
            "the id being ended is not adopted back"
        );
        assert!(slot(&table, &key(1)).get().is_none());
        assert!(table.adopt(&key(1), recorded("up-2")), "another id is fine");
    }
}
