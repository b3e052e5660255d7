//! [`LocalSessionStore`]: sessions in this process's memory.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tokio::time::Instant;

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
}

impl Default for LocalSessionLimits {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30 * 60),
            max_sessions: 100_000,
            max_per_principal: 1_000,
        }
    }
}

struct Entry {
    record: Arc<SessionRecord>,
    last_used: Instant,
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
        let mut table = self.lock();
        let now = Instant::now();
        if table.sessions.len() >= self.limits.max_sessions {
            table.expire(self.limits.idle_timeout, now);
            if table.sessions.len() >= self.limits.max_sessions {
                return Err(SessionStoreError::Limit("too many sessions"));
            }
        }
        let key = Table::principal_key(&record);
        let held = |table: &Table| table.per_principal.get(&key).map_or(0, HashSet::len);
        if held(&table) >= self.limits.max_per_principal {
            // Sessions past their idle timeout stop counting at once: most clients never DELETE
            // theirs, and a principal must not be locked out until the whole table fills.
            table.expire_principal(&key, self.limits.idle_timeout, now);
            if held(&table) >= self.limits.max_per_principal {
                return Err(SessionStoreError::Limit(
                    "too many sessions for this principal",
                ));
            }
        }
        let id = new_session_id()?;
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
            },
        );
        Ok(id)
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

    fn update<'a>(&'a self, id: &'a str, record: SessionRecord) -> StoreFuture<'a, bool> {
        let updated = match self.lock().sessions.get_mut(id) {
            Some(entry) => {
                entry.record = Arc::new(record);
                true
            }
            None => false,
        };
        Box::pin(async move { Ok(updated) })
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

    #[tokio::test(start_paused = true)]
    async fn a_principals_idle_sessions_stop_counting_at_once() {
        let store = LocalSessionStore::new(LocalSessionLimits {
            idle_timeout: Duration::from_secs(10),
            max_sessions: 1000,
            max_per_principal: 2,
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
