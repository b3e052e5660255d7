//! [`StaleCache`]: the last good value per key, for stale-if-error; [`Stale`]: a value and its age.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// A value served from a [`StaleCache`] (or any [`StaleSource`](crate::StaleSource)), with how
/// long ago it was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale<V> {
    /// The value.
    pub value: V,
    /// Time since it was stored.
    pub age: Duration,
}

impl<V> Stale<V> {
    /// The age in whole milliseconds (rounded down), as the degraded marker reports it.
    pub fn age_ms(&self) -> u64 {
        u64::try_from(self.age.as_millis()).unwrap_or(u64::MAX)
    }

    /// Maps the value, keeping the age.
    pub fn map<W>(self, f: impl FnOnce(V) -> W) -> Stale<W> {
        Stale {
            value: f(self.value),
            age: self.age,
        }
    }
}

/// The last good value per key with the time it was stored: stale-if-error for list and discover
/// results (book: docs/src/architecture.md).
///
/// - **Bounded**: at most `max_entries` keys; storing a new key into a full cache evicts the key
///   stored longest ago. Storing an existing key replaces its value and time.
/// - **Staleness**: [`get`](Self::get) takes the caller's maximum staleness and returns a value
///   only while its age is *below* it: at exactly `max_staleness` the value has expired (so a
///   `max_staleness` of zero never serves). Expired entries stay until replaced, evicted or
///   [purged](Self::purge_older_than); they are never returned.
/// - **Keys** are the caller's: the router keys by principal + virtual host + backend + method +
///   cursor, so one caller's view is never served to another.
/// - **Shared**: clones share the same entries (an `Arc` inside); safe across threads.
/// - **Time** is `tokio::time::Instant`, so `tokio::time::pause()` drives it in tests.
///
/// ```
/// use std::time::Duration;
/// use mcp_fallback::StaleCache;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let cache = StaleCache::new(100);
/// cache.insert("alice/vh1/weather/tools/list", "page 1");
/// tokio::time::advance(Duration::from_secs(30)).await;
///
/// let hit = cache.get(&"alice/vh1/weather/tools/list", Duration::from_secs(60)).unwrap();
/// assert_eq!((hit.value, hit.age), ("page 1", Duration::from_secs(30)));
/// // too old for a 30 s limit: expired at exactly the limit
/// assert!(cache.get(&"alice/vh1/weather/tools/list", Duration::from_secs(30)).is_none());
/// # }
/// ```
#[derive(Debug)]
pub struct StaleCache<K, V> {
    inner: Arc<Mutex<Entries<K, V>>>,
}

impl<K, V> Clone for StaleCache<K, V> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

#[derive(Debug)]
struct Entries<K, V> {
    max_entries: usize,
    next_seq: u64,
    map: HashMap<K, Entry<V>>,
    /// Store order: sequence number -> key; the first entry is the one stored longest ago.
    order: BTreeMap<u64, K>,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    stored: Instant,
    seq: u64,
}

impl<K, V> StaleCache<K, V>
where
    K: Hash + Eq + Clone,
{
    /// A cache holding at most `max_entries` keys (zero stores nothing).
    pub fn new(max_entries: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Entries {
                max_entries,
                next_seq: 0,
                map: HashMap::new(),
                order: BTreeMap::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        // A panic while holding the lock cannot leave the maps inconsistent in a way that
        // matters more than losing the cache: keep serving.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `value` as the last good value of `key`, stored now.
    pub fn insert(&self, key: K, value: V) {
        let mut e = self.lock();
        if e.max_entries == 0 {
            return;
        }
        let seq = e.next_seq;
        e.next_seq += 1;
        let entry = Entry {
            value,
            stored: Instant::now(),
            seq,
        };
        if let Some(old) = e.map.insert(key.clone(), entry) {
            e.order.remove(&old.seq);
        }
        e.order.insert(seq, key);
        while e.map.len() > e.max_entries {
            let Some((_, oldest)) = e.order.pop_first() else {
                break;
            };
            e.map.remove(&oldest);
        }
    }

    /// The value of `key` and its age, if one was stored less than `max_staleness` ago.
    pub fn get(&self, key: &K, max_staleness: Duration) -> Option<Stale<V>>
    where
        V: Clone,
    {
        let e = self.lock();
        let entry = e.map.get(key)?;
        let age = Instant::now().saturating_duration_since(entry.stored);
        (age < max_staleness).then(|| Stale {
            value: entry.value.clone(),
            age,
        })
    }

    /// Removes `key`, returning its value (of any age).
    pub fn remove(&self, key: &K) -> Option<V> {
        let mut e = self.lock();
        let entry = e.map.remove(key)?;
        e.order.remove(&entry.seq);
        Some(entry.value)
    }

    /// Drops every entry stored `max_staleness` ago or earlier (the ones [`get`](Self::get) with
    /// that limit would no longer return).
    pub fn purge_older_than(&self, max_staleness: Duration) {
        let now = Instant::now();
        let mut e = self.lock();
        let Entries { map, order, .. } = &mut *e;
        map.retain(|_, entry| {
            let keep = now.saturating_duration_since(entry.stored) < max_staleness;
            if !keep {
                order.remove(&entry.seq);
            }
            keep
        });
    }

    /// Drops every entry.
    pub fn clear(&self) {
        let mut e = self.lock();
        e.map.clear();
        e.order.clear();
    }

    /// The number of keys held (expired ones included until purged).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys held at once.
    pub fn max_entries(&self) -> usize {
        self.lock().max_entries
    }
}
