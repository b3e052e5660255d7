//! [`MemoryStore`]: configurations held in process memory (tests, builders, embedded defaults).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::broadcast;

use crate::model::{UserConfig, UsersDocument};
use crate::store::{Invalidation, LoadFuture, UserConfigStore, invalidation_channel};

/// An in-memory [`UserConfigStore`]. Clones share the same map.
///
/// [`insert`](Self::insert) and [`remove`](Self::remove) emit [`Invalidation::Subject`];
/// [`replace_all`](Self::replace_all) emits [`Invalidation::All`]. Configurations inserted here are
/// not validated (they are typed already); call [`UserConfig::validate`] when they come from users.
///
/// ```
/// use mcp_config_store::{MemoryStore, UserConfig, UserConfigStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store = MemoryStore::new().with_user("alice", UserConfig::default());
/// assert!(store.load("alice".into()).await.unwrap().is_some());
/// assert!(store.load("bob".into()).await.unwrap().is_none());
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    users: RwLock<HashMap<Arc<str>, Arc<UserConfig>>>,
    tx: broadcast::Sender<Invalidation>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("users", &self.len())
            .finish()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                users: RwLock::new(HashMap::new()),
                tx: invalidation_channel(),
            }),
        }
    }

    /// A store holding every user of a parsed [`UsersDocument`] (e.g. an embedded default).
    pub fn from_document(doc: UsersDocument) -> Self {
        let store = Self::new();
        store.replace_all(doc);
        store
    }

    /// Builder form of [`insert`](Self::insert).
    #[must_use]
    pub fn with_user(
        self,
        subject: impl Into<Arc<str>>,
        config: impl Into<Arc<UserConfig>>,
    ) -> Self {
        self.insert(subject, config);
        self
    }

    /// Sets `subject`'s configuration, returning the previous one, and emits
    /// [`Invalidation::Subject`].
    pub fn insert(
        &self,
        subject: impl Into<Arc<str>>,
        config: impl Into<Arc<UserConfig>>,
    ) -> Option<Arc<UserConfig>> {
        let subject = subject.into();
        let previous = self.write().insert(subject.clone(), config.into());
        self.notify(Invalidation::Subject(subject));
        previous
    }

    /// Removes `subject`'s configuration, returning it, and emits [`Invalidation::Subject`].
    pub fn remove(&self, subject: &str) -> Option<Arc<UserConfig>> {
        let previous = self.write().remove(subject);
        self.notify(Invalidation::Subject(Arc::from(subject)));
        previous
    }

    /// Replaces every configuration with the document's and emits [`Invalidation::All`].
    pub fn replace_all(&self, doc: UsersDocument) {
        let users = doc
            .users
            .into_iter()
            .map(|(sub, cfg)| (Arc::from(sub), cfg))
            .collect();
        *self.write() = users;
        self.notify(Invalidation::All);
    }

    /// `subject`'s configuration, synchronously.
    pub fn get(&self, subject: &str) -> Option<Arc<UserConfig>> {
        self.read().get(subject).cloned()
    }

    /// Number of subjects.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the store holds no subject.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn notify(&self, event: Invalidation) {
        // No receiver is not an error: nobody caches this store.
        let _ = self.inner.tx.send(event);
    }

    // A panic while holding the lock cannot leave the map half-updated (single insert/remove),
    // so a poisoned lock is still safe to use.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Arc<str>, Arc<UserConfig>>> {
        self.inner
            .users
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Arc<str>, Arc<UserConfig>>> {
        self.inner
            .users
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl UserConfigStore for MemoryStore {
    fn load(&self, subject: Arc<str>) -> LoadFuture {
        let found = self.get(&subject);
        Box::pin(async move { Ok(found) })
    }

    fn invalidations(&self) -> broadcast::Receiver<Invalidation> {
        self.inner.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn cfg(url: &str) -> UserConfig {
        UserConfig::from_json_str(&format!(
            r#"{{"virtual_hosts":{{"v":{{"backends":{{"b":{{"url":"{url}"}}}}}}}}}}"#
        ))
        .unwrap()
    }

    #[tokio::test]
    async fn insert_load_remove() {
        let store = MemoryStore::new();
        assert!(store.is_empty());
        assert!(store.load("alice".into()).await.unwrap().is_none());

        store.insert("alice", cfg("http://a/mcp"));
        let got = store.load("alice".into()).await.unwrap().unwrap();
        assert_eq!(
            got.virtual_hosts["v"].backends["b"]
                .url
                .as_ref()
                .unwrap()
                .as_str(),
            "http://a/mcp"
        );
        assert_eq!(store.len(), 1);

        assert!(store.remove("alice").is_some());
        assert!(store.load("alice".into()).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn changes_emit_invalidations() {
        let store = MemoryStore::new();
        let mut rx = store.invalidations();
        store.insert("alice", cfg("http://a/mcp"));
        assert_eq!(
            rx.recv().await.unwrap(),
            Invalidation::Subject("alice".into())
        );
        store.remove("alice");
        assert_eq!(
            rx.recv().await.unwrap(),
            Invalidation::Subject("alice".into())
        );
        store.replace_all(UsersDocument::default());
        assert_eq!(rx.recv().await.unwrap(), Invalidation::All);
    }

    #[tokio::test]
    async fn from_document_and_clones_share_state() {
        let doc = UsersDocument::from_json_str(
            r#"{"users":{"alice":{"virtual_hosts":{}},"bob":{"virtual_hosts":{}}}}"#,
        )
        .unwrap();
        let store = MemoryStore::from_document(doc);
        let clone = store.clone();
        clone.remove("bob");
        assert_eq!(store.len(), 1);
        assert!(store.get("alice").is_some());
    }
}
