//! [`ScopedTable`]: a bounded map whose entries each belong to one principal, so that filling it
//! can never cost another tenant anything.
//!
//! Two bounds: a share per principal and a total. A principal at its share that adds an entry
//! loses its own oldest one; a full table refuses a principal with nothing to give back (the
//! caller then works without the cached state: probes again, opens no session, keeps no hint).
//! No insertion ever evicts another principal's entry that is in use: entries nobody asked for
//! within the table's idle lifetime have expired, and a full table drops expired entries (of any
//! principal) before it refuses, so a table filled once cannot lock newcomers out for good.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

// tokio's clock, so tests can pause time (outside a runtime it is the system clock).
use tokio::time::Instant;

use mcp_core::Principal;

/// A bounded map with a per-principal share. See the module docs.
#[derive(Debug)]
pub(crate) struct ScopedTable<K, V> {
    inner: Mutex<Inner<K, V>>,
    per_principal: usize,
    total: usize,
    /// How long an entry nobody asks for lives.
    idle: Duration,
}

#[derive(Debug)]
struct Entry<V> {
    principal: Principal,
    value: V,
    used: Instant,
}

#[derive(Debug)]
struct Inner<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Each principal's keys, oldest first.
    order: HashMap<Principal, VecDeque<K>>,
}

/// What [`ScopedTable::get_or_insert_with`] did.
#[derive(Debug)]
pub(crate) struct Inserted<K, V> {
    /// The value now held for the key (`None`: the table is full and the principal holds nothing
    /// it could give back).
    pub(crate) value: Option<V>,
    /// The entries that left to make room: the principal's own oldest, or expired ones.
    pub(crate) evicted: Vec<(K, V)>,
}

impl<K: Clone + Eq + Hash, V: Clone> ScopedTable<K, V> {
    /// A table of at most `total` entries, at most `per_principal` of them (at least 1) one
    /// principal's; an entry nobody asked for within `idle` has expired.
    pub(crate) fn new(per_principal: usize, total: usize, idle: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: HashMap::new(),
            }),
            per_principal: per_principal.max(1),
            total: total.max(1),
            idle,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K, V>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value of `key` (which counts as a use).
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let mut inner = self.lock();
        let entry = inner.entries.get_mut(key)?;
        entry.used = Instant::now();
        Some(entry.value.clone())
    }

    /// The value of `key`, inserting `make()` for `principal` when absent (see the module docs
    /// for what makes room).
    pub(crate) fn get_or_insert_with(
        &self,
        key: &K,
        principal: &Principal,
        make: impl FnOnce() -> V,
    ) -> Inserted<K, V> {
        let mut inner = self.lock();
        let now = Instant::now();
        if let Some(entry) = inner.entries.get_mut(key) {
            entry.used = now;
            return Inserted {
                value: Some(entry.value.clone()),
                evicted: Vec::new(),
            };
        }
        let mut evicted = Vec::new();
        if inner.entries.len() >= self.total {
            evicted = inner.expire(now, self.idle);
        }
        let held = inner.order.get(principal).map_or(0, VecDeque::len);
        if held >= self.per_principal || (inner.entries.len() >= self.total && held > 0) {
            evicted.extend(inner.pop_oldest(principal));
        } else if inner.entries.len() >= self.total {
            return Inserted {
                value: None,
                evicted,
            };
        }
        let value = make();
        inner.entries.insert(
            key.clone(),
            Entry {
                principal: principal.clone(),
                value: value.clone(),
                used: now,
            },
        );
        inner
            .order
            .entry(principal.clone())
            .or_default()
            .push_back(key.clone());
        Inserted {
            value: Some(value),
            evicted,
        }
    }

    /// Replaces the value of an existing `key`; returns whether it existed.
    pub(crate) fn replace(&self, key: &K, value: V) -> bool {
        match self.lock().entries.get_mut(key) {
            Some(entry) => {
                entry.value = value;
                entry.used = Instant::now();
                true
            }
            None => false,
        }
    }

    /// Sets `key` to `value` for `principal`: replaced when present, inserted when there is room
    /// (a full table without a share to give back keeps nothing). Returns what left.
    pub(crate) fn upsert(&self, key: &K, principal: &Principal, value: V) -> Vec<(K, V)> {
        if self.replace(key, value.clone()) {
            return Vec::new();
        }
        self.get_or_insert_with(key, principal, || value).evicted
    }

    /// Removes `key` when `pred` accepts its value.
    pub(crate) fn remove_if(&self, key: &K, pred: impl FnOnce(&V) -> bool) -> Option<V> {
        let mut inner = self.lock();
        if !inner.entries.get(key).is_some_and(|e| pred(&e.value)) {
            return None;
        }
        inner.remove(key)
    }

    /// Removes `key`.
    pub(crate) fn remove(&self, key: &K) -> Option<V> {
        self.lock().remove(key)
    }

    /// How many entries `principal` holds.
    #[cfg(test)]
    pub(crate) fn held_by(&self, principal: &Principal) -> usize {
        self.lock().order.get(principal).map_or(0, VecDeque::len)
    }

    /// How many entries there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

impl<K: Clone + Eq + Hash, V> Inner<K, V> {
    fn pop_oldest(&mut self, principal: &Principal) -> Option<(K, V)> {
        let order = self.order.get_mut(principal)?;
        let oldest = order.pop_front()?;
        if order.is_empty() {
            self.order.remove(principal);
        }
        let entry = self.entries.remove(&oldest)?;
        Some((oldest, entry.value))
    }

    /// Drops every entry unused for longer than `idle` (only when the table is full: a scan).
    fn expire(&mut self, now: Instant, idle: Duration) -> Vec<(K, V)> {
        let expired: Vec<K> = self
            .entries
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.used) > idle)
            .map(|(k, _)| k.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|k| self.remove(&k).map(|v| (k, v)))
            .collect()
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let entry = self.entries.remove(key)?;
        if let Some(order) = self.order.get_mut(&entry.principal) {
            order.retain(|k| k != key);
            if order.is_empty() {
                self.order.remove(&entry.principal);
            }
        }
        Some(entry.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_at_its_share_evicts_only_its_own_oldest_entry() {
        let table = ScopedTable::new(2, 10, Duration::from_secs(3600));
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        let _ = table.get_or_insert_with(&"bob-1", &bob, || 1);
        for (n, key) in ["a1", "a2", "a3", "a4"].iter().enumerate() {
            let inserted = table.get_or_insert_with(key, &alice, || n);
            assert_eq!(inserted.value, Some(n));
        }
        assert_eq!(table.held_by(&alice), 2);
        assert_eq!(table.get(&"a1"), None, "alice's oldest went");
        assert_eq!(table.get(&"a4"), Some(3));
        assert_eq!(table.get(&"bob-1"), Some(1), "bob's entry is untouched");
    }

    #[test]
    fn a_full_table_refuses_a_newcomer_and_never_evicts_another_tenant() {
        let table = ScopedTable::new(5, 3, Duration::from_secs(3600));
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        for key in ["a1", "a2", "a3"] {
            assert!(table.get_or_insert_with(&key, &alice, || 0).value.is_some());
        }
        let refused = table.get_or_insert_with(&"b1", &bob, || 0);
        assert!(refused.value.is_none(), "bob is refused");
        assert_eq!(table.len(), 3);
        // Alice, who holds entries, recycles her own oldest.
        let recycled = table.get_or_insert_with(&"a4", &alice, || 4);
        let gone: Vec<_> = recycled.evicted.into_iter().map(|(k, _)| k).collect();
        assert_eq!(gone, ["a1"]);
        assert_eq!(table.remove(&"a2"), Some(0));
        assert!(table.get_or_insert_with(&"b1", &bob, || 9).value.is_some());
        assert_eq!(table.remove_if(&"b1", |v| *v == 1), None, "pred refused");
        assert_eq!(table.remove_if(&"b1", |v| *v == 9), Some(9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_table_drops_idle_entries_of_anyone_before_refusing() {
        let table = ScopedTable::new(5, 2, Duration::from_secs(60));
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        for key in ["a1", "a2"] {
            let _ = table.get_or_insert_with(&key, &alice, || 0);
        }
        assert!(table.get_or_insert_with(&"b1", &bob, || 1).value.is_none());
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(table.get(&"a2"), Some(0), "a2 is used again");
        tokio::time::advance(Duration::from_secs(45)).await;
        let inserted = table.get_or_insert_with(&"b1", &bob, || 1);
        assert_eq!(inserted.value, Some(1), "a1 expired and made room");
        let gone: Vec<_> = inserted.evicted.into_iter().map(|(k, _)| k).collect();
        assert_eq!(gone, ["a1"], "a2, in use, stays");
        assert_eq!(table.get(&"a2"), Some(0));
    }
}
