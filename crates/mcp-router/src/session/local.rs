//! [`LocalSessionStore`]: sessions in this process's memory.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tokio::time::Instant;

use mcp_core::{Budget, Principal, Slot, Spent};

use super::record::SessionRecord;
use super::store::{SessionStore, SessionStoreError, StoreFuture};

/// Limits of a [`LocalSessionStore`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalSessionLimits {
    /// A session unused this long is forgotten (default 30 minutes).
    pub idle_timeout: Duration,
    /// Most sessions at once (default 100,000).
    pub max_sessions: usize,
    /// Most sessions of one principal at once (default 1,000).
    pub max_per_principal: usize,
    /// Most bytes one principal's session records weigh together ([`SessionRecord::weight`];
    /// default 16 MiB).
    pub max_bytes_per_principal: usize,
    /// Most bytes every session record weighs together (default 512 MiB).
    pub max_bytes: usize,
}

impl Default for LocalSessionLimits {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30 * 60),
            max_sessions: 100_000,
            max_per_principal: 1_000,
            max_bytes_per_principal: 16 << 20,
            max_bytes: 512 << 20,
        }
    }
}

struct Entry {
    record: Arc<SessionRecord>,
    last_used: Instant,
    /// The session's place in its principal's account, which is charged the record's weight.
    slot: Slot,
    weight: usize,
}

#[derive(Default)]
struct Table {
    sessions: HashMap<String, Entry>,
    /// Each principal's session ids: its count, and the sessions to look at for expiry when it
    /// reaches its share (without scanning every principal's).
    per_principal: HashMap<(String, String), HashSet<String>>,
}

impl Table {
    fn principal_key(record: &SessionRecord) -> (String, String) {
        (record.issuer.clone(), record.subject.clone())
    }

    fn drop_entry(&mut self, id: &str) -> Option<Arc<SessionRecord>> {
        let entry = self.sessions.remove(id)?;
        entry.slot.account().release(entry.weight);
        let key = Self::principal_key(&entry.record);
        if let Some(ids) = self.per_principal.get_mut(&key) {
            ids.remove(id);
            if ids.is_empty() {
                self.per_principal.remove(&key);
            }
        }
        Some(entry.record)
    }

    /// Forgets the idle sessions of the principal `key` (at most its share to look at).
    fn expire_principal(&mut self, key: &(String, String), idle: Duration, now: Instant) {
        let expired: Vec<String> = self
            .per_principal
            .get(key)
            .into_iter()
            .flatten()
            .filter(|id| {
                self.sessions
                    .get(*id)
                    .is_none_or(|e| now.duration_since(e.last_used) > idle)
            })
            .cloned()
            .collect();
        for id in expired {
            if self.drop_entry(&id).is_none()
                && let Some(ids) = self.per_principal.get_mut(key)
            {
                // Not in the table (its record was replaced by another principal's): the id
                // must not count against this principal either.
                ids.remove(&id);
                if ids.is_empty() {
                    self.per_principal.remove(key);
                }
            }
        }
    }

    fn expire(&mut self, idle: Duration, now: Instant) {
        let expired: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, e)| now.duration_since(e.last_used) > idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.drop_entry(&id);
        }
    }
}

/// Downstream sessions in this process's memory: idle expiry, a bound on the total and on each
/// principal's count. Sessions are lost when the process stops, and a node cannot serve another
/// node's sessions (it answers 404, and the client re-initialises): behind a load balancer, route
/// one session's requests to one node (sticky routing), or use a shared store.
///
/// ```
/// use mcp_router::session::{LocalSessionStore, SessionRecord, SessionStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store = LocalSessionStore::default();
/// let record = SessionRecord {
///     issuer: "iss".into(), subject: "alice".into(), vhost: "vh".into(),
///     protocol_version: "2025-11-25".into(), client_capabilities: "{}".into(),
///     log_level: None, backends: vec![], subscriptions: vec![], created_at_ms: None,
/// };
/// let id = store.create(record.clone()).await.unwrap();
/// assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
/// assert_eq!(store.get(&id).await.unwrap().as_deref(), Some(&record));
/// store.remove(&id).await.unwrap();
/// assert!(store.get(&id).await.unwrap().is_none());
/// # }
/// ```
pub struct LocalSessionStore {
    table: Mutex<Table>,
    limits: LocalSessionLimits,
    /// A slot per session and the weight of its record, charged to its principal.
    budget: Budget,
}

impl Default for LocalSessionStore {
    fn default() -> Self {
        Self::new(LocalSessionLimits::default())
    }
}

impl std::fmt::Debug for LocalSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSessionStore")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl LocalSessionStore {
    /// A store with these limits.
    pub fn new(limits: LocalSessionLimits) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            budget: Budget::new("session_records")
                .with_slots(limits.max_per_principal, limits.max_sessions)
                .with_bytes(limits.max_bytes_per_principal, limits.max_bytes),
            limits,
        }
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while holding the lock cannot leave the map half-updated in a way that matters
        // more than losing the sessions; keep serving.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn create_now(&self, record: SessionRecord) -> Result<String, SessionStoreError> {
        let weight = record.weight();
        let account = self.budget.account(&Principal::new(
            record.issuer.as_str(),
            record.subject.as_str(),
        ));
        let mut table = self.lock();
        let now = Instant::now();
        let idle = self.limits.idle_timeout;
        // Which limit a new session would pass, the node's first (the slot, then the bytes).
        let node_full = || {
            let budget = &self.budget;
            if budget.held_slots() >= budget.slots_ceiling() {
                Some((Spent::Ceiling(budget.slots_ceiling()), "too many sessions"))
            } else if budget.held_bytes().saturating_add(weight) > budget.bytes_ceiling() {
                Some((Spent::Ceiling(budget.bytes_ceiling()), NODE_BYTES))
            } else {
                None
            }
        };
        let over_share = || match (account.room(0, 1), account.room(weight, 0)) {
            (Err(spent), _) => Some((spent, "too many sessions for this principal")),
            (Ok(()), Err(spent)) => Some((spent, PRINCIPAL_BYTES)),
            (Ok(()), Ok(())) => None,
        };
        if node_full().is_some() {
            table.expire(idle, now);
            if let Some((spent, limit)) = node_full() {
                self.budget.refuse(spent);
                return Err(SessionStoreError::Limit(limit));
            }
        }
        let key = Table::principal_key(&record);
        if over_share().is_some() {
            // Sessions past their idle timeout stop counting at once: most clients never DELETE
            // theirs, and a principal must not be locked out until the whole table fills.
            table.expire_principal(&key, idle, now);
            if let Some((spent, limit)) = over_share() {
                self.budget.refuse(spent);
                return Err(SessionStoreError::Limit(limit));
            }
        }
        let id = new_session_id()?;
        account.add(weight);
        let slot = account.add_slot();
        table
            .per_principal
            .entry(key)
            .or_default()
            .insert(id.clone());
        table.sessions.insert(
            id.clone(),
            Entry {
                record: Arc::new(record),
                last_used: now,
                slot,
                weight,
            },
        );
        Ok(id)
    }

    /// Replaces the record of `id`, charging the principal the difference in weight: a heavier
    /// record that does not fit is refused and the old one stays.
    fn update_now(&self, id: &str, record: SessionRecord) -> Result<bool, SessionStoreError> {
        let mut table = self.lock();
        let Some(entry) = table.sessions.get_mut(id) else {
            return Ok(false);
        };
        let weight = record.weight();
        let account = entry.slot.account();
        if let Some(more) = weight.checked_sub(entry.weight).filter(|more| *more > 0)
            && let Err(spent) = account.room(more, 0)
        {
            self.budget.refuse(spent);
            return Err(SessionStoreError::Limit(match spent {
                Spent::Share(_) => PRINCIPAL_BYTES,
                Spent::Ceiling(_) => NODE_BYTES,
            }));
        }
        account.release(entry.weight);
        account.add(weight);
        entry.weight = weight;
        entry.record = Arc::new(record);
        Ok(true)
    }

    fn get_now(&self, id: &str) -> Option<Arc<SessionRecord>> {
        let mut table = self.lock();
        let now = Instant::now();
        let idle = self.limits.idle_timeout;
        let expired = match table.sessions.get_mut(id) {
            None => return None,
            Some(entry) if now.duration_since(entry.last_used) > idle => true,
            Some(entry) => {
                entry.last_used = now;
                return Some(Arc::clone(&entry.record));
            }
        };
        if expired {
            table.drop_entry(id);
        }
        None
    }
}

/// The refusal of a record past its principal's byte share.
const PRINCIPAL_BYTES: &str = "the session records of this principal weigh their whole share \
     (sessions.record_bytes_per_principal)";
/// The refusal of a record past the node's bytes.
const NODE_BYTES: &str =
    "the session records on this gateway node weigh their whole budget (sessions.record_bytes)";

/// 32 random bytes, base64url: visible ASCII and unguessable.
pub(crate) fn new_session_id() -> Result<String, SessionStoreError> {
    use aws_lc_rs::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| SessionStoreError::Other("no system randomness".to_owned()))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

impl SessionStore for LocalSessionStore {
    fn create(&self, record: SessionRecord) -> StoreFuture<'_, String> {
        let result = self.create_now(record);
        Box::pin(async move { result })
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Arc<SessionRecord>>> {
        let result = self.get_now(id);
        Box::pin(async move { Ok(result) })
    }

    fn budget(&self) -> Option<Budget> {
        Some(self.budget.clone())
    }

    fn update<'a>(&'a self, id: &'a str, record: SessionRecord) -> StoreFuture<'a, bool> {
        let updated = self.update_now(id, record);
        Box::pin(async move { updated })
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Arc<SessionRecord>>> {
        let removed = self.lock().drop_entry(id);
        Box::pin(async move { Ok(removed) })
    }

    /// Like `get` without refreshing the idle timer; an idle session is forgotten here too.
    fn exists<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        let mut table = self.lock();
        let idle = self.limits.idle_timeout;
        let live = match table.sessions.get(id) {
            None => false,
            Some(entry) if Instant::now().duration_since(entry.last_used) > idle => {
                table.drop_entry(id);
                false
            }
            Some(_) => true,
        };
        Box::pin(async move { Ok(live) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(subject: &str) -> SessionRecord {
        SessionRecord {
            issuer: "iss".into(),
            subject: subject.into(),
            vhost: "vh".into(),
            protocol_version: "2025-11-25".into(),
            client_capabilities: "{}".into(),
            log_level: None,
            backends: Vec::new(),
            subscriptions: Vec::new(),
            created_at_ms: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn idle_sessions_expire() {
        let store = LocalSessionStore::new(LocalSessionLimits {
            idle_timeout: Duration::from_secs(10),
            ..LocalSessionLimits::default()
        });
        let id = store.create(record("a")).await.expect("create");
        tokio::time::advance(Duration::from_secs(8)).await;
        assert!(
            store.get(&id).await.expect("get").is_some(),
            "use refreshes the idle timer"
        );
        tokio::time::advance(Duration::from_secs(8)).await;
        assert!(store.get(&id).await.expect("get").is_some());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(store.get(&id).await.expect("get").is_none());
        assert!(store.is_empty());
    }

    #[tokio::test]
    async fn records_are_charged_their_weight_to_their_own_principal() {
        let store = LocalSessionStore::new(LocalSessionLimits {
            max_bytes_per_principal: 4_000,
            max_bytes: 6_000,
            ..LocalSessionLimits::default()
        });
        let heavy = |subject: &str| SessionRecord {
            client_capabilities: "x".repeat(1_500),
            ..record(subject)
        };
        let weight = heavy("a").weight();
        assert!((1_500..2_000).contains(&weight), "{weight}");
        let a1 = store.create(heavy("a")).await.expect("a1");
        store.create(heavy("a")).await.expect("a2");
        assert_eq!(
            store.create(heavy("a")).await,
            Err(SessionStoreError::Limit(PRINCIPAL_BYTES)),
            "a's share is spent in bytes, not in sessions"
        );
        store
            .create(heavy("b"))
            .await
            .expect("b's share is its own");
        assert_eq!(
            store.create(heavy("c")).await,
            Err(SessionStoreError::Limit(NODE_BYTES)),
            "the node's bytes are spent"
        );
        assert_eq!(store.budget.held_bytes(), 3 * weight);
        // A heavier record that does not fit is refused and the old one stays.
        let mut grown = heavy("a");
        grown.subscriptions = vec!["u".repeat(1_000)];
        assert_eq!(
            store.update(&a1, grown).await,
            Err(SessionStoreError::Limit(PRINCIPAL_BYTES))
        );
        let kept = store.get(&a1).await.expect("get").expect("a1");
        assert!(kept.subscriptions.is_empty());
        store.remove(&a1).await.expect("remove");
        assert_eq!(store.budget.held_bytes(), 2 * weight, "given back");
        store.create(heavy("a")).await.expect("room again");
        assert_eq!(store.budget.refusals().share, 2);
        assert_eq!(store.budget.refusals().ceiling, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_principals_idle_sessions_stop_counting_at_once() {
        let store = LocalSessionStore::new(LocalSessionLimits {
            idle_timeout: Duration::from_secs(10),
            max_sessions: 1000,
            max_per_principal: 2,
            ..LocalSessionLimits::default()
        });
        store.create(record("a")).await.expect("a1");
        store.create(record("a")).await.expect("a2");
        let b = store.create(record("b")).await.expect("b1");
        assert_eq!(
            store.create(record("a")).await,
            Err(SessionStoreError::Limit(
                "too many sessions for this principal"
            )),
            "the control: a's live sessions count"
        );
        tokio::time::advance(Duration::from_secs(11)).await;
        // The table is nowhere near full: a's idle sessions stop counting all the same.
        store
            .create(record("a"))
            .await
            .expect("a's idle sessions no longer count");
        store
            .create(record("a"))
            .await
            .expect("both were forgotten");
        assert_eq!(store.len(), 3, "a's two new ones and b's");
        assert!(
            store.get(&b).await.expect("get").is_none(),
            "b's idle session expired on its own schedule"
        );
    }

    #[tokio::test]
    async fn limits_total_and_per_principal() {
        let store = LocalSessionStore::new(LocalSessionLimits {
            max_sessions: 3,
            max_per_principal: 2,
            ..LocalSessionLimits::default()
        });
        let a1 = store.create(record("a")).await.expect("a1");
        store.create(record("a")).await.expect("a2");
        assert_eq!(
            store.create(record("a")).await,
            Err(SessionStoreError::Limit(
                "too many sessions for this principal"
            ))
        );
        store.create(record("b")).await.expect("b1");
        assert_eq!(
            store.create(record("c")).await,
            Err(SessionStoreError::Limit("too many sessions"))
        );
        store.remove(&a1).await.expect("remove");
        store
            .create(record("a"))
            .await
            .expect("a slot freed by remove");
    }

    #[tokio::test]
    async fn ids_are_unique_and_updates_need_a_session() {
        let store = LocalSessionStore::default();
        let a = store.create(record("a")).await.expect("a");
        let b = store.create(record("a")).await.expect("b");
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        let mut changed = record("a");
        changed.log_level = Some("debug".into());
        assert!(store.update(&a, changed.clone()).await.expect("update"));
        assert_eq!(store.get(&a).await.expect("get").as_deref(), Some(&changed));
        assert!(!store.update("nope", changed).await.expect("update"));
    }
}
