//! [`ScopedTable`]: a bounded map whose entries each belong to one principal, so that filling it
//! can never cost another tenant anything.
//!
//! Two bounds: a share per principal and a total. A principal at its share that adds an entry
//! loses its own oldest one; a full table refuses a principal with nothing to give back (the
//! caller then works without the cached state: probes again, opens no session, keeps no hint).
//! No insertion ever evicts another principal's entry.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;

use mcp_core::Principal;

/// A bounded map with a per-principal share. See the module docs.
#[derive(Debug)]
pub(crate) struct ScopedTable<K, V> {
    inner: Mutex<Inner<K, V>>,
    per_principal: usize,
    total: usize,
}

#[derive(Debug)]
struct Inner<K, V> {
    entries: HashMap<K, (Principal, V)>,
    /// Each principal's keys, oldest first.
    order: HashMap<Principal, VecDeque<K>>,
}

/// What [`ScopedTable::get_or_insert_with`] did.
#[derive(Debug)]
pub(crate) struct Inserted<K, V> {
    /// The value now held for the key (`None`: the table is full and the principal holds nothing
    /// it could give back).
    pub(crate) value: Option<V>,
    /// The principal's own entry that made room, if one did.
    pub(crate) evicted: Option<(K, V)>,
}

impl<K: Clone + Eq + Hash, V: Clone> ScopedTable<K, V> {
    /// A table of at most `total` entries, at most `per_principal` of them (at least 1) one
    /// principal's.
    pub(crate) fn new(per_principal: usize, total: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: HashMap::new(),
            }),
            per_principal: per_principal.max(1),
            total: total.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K, V>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        self.lock().entries.get(key).map(|(_, v)| v.clone())
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
        if let Some((_, v)) = inner.entries.get(key) {
            return Inserted {
                value: Some(v.clone()),
                evicted: None,
            };
        }
        let held = inner.order.get(principal).map_or(0, VecDeque::len);
        let mut evicted = None;
        if held >= self.per_principal || (inner.entries.len() >= self.total && held > 0) {
            evicted = inner.pop_oldest(principal);
        } else if inner.entries.len() >= self.total {
            return Inserted {
                value: None,
                evicted: None,
            };
        }
        let value = make();
        inner
            .entries
            .insert(key.clone(), (principal.clone(), value.clone()));
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
            Some((_, v)) => {
                *v = value;
                true
            }
            None => false,
        }
    }

    /// Removes `key` when `pred` accepts its value.
    pub(crate) fn remove_if(&self, key: &K, pred: impl FnOnce(&V) -> bool) -> Option<V> {
        let mut inner = self.lock();
        if !inner.entries.get(key).is_some_and(|(_, v)| pred(v)) {
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
        let (_, value) = self.entries.remove(&oldest)?;
        Some((oldest, value))
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let (principal, value) = self.entries.remove(key)?;
        if let Some(order) = self.order.get_mut(&principal) {
            order.retain(|k| k != key);
            if order.is_empty() {
                self.order.remove(&principal);
            }
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_at_its_share_evicts_only_its_own_oldest_entry() {
        let table = ScopedTable::new(2, 10);
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
        let table = ScopedTable::new(5, 3);
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
        assert_eq!(recycled.evicted.map(|(k, _)| k), Some("a1"));
        assert_eq!(table.remove(&"a2"), Some(0));
        assert!(table.get_or_insert_with(&"b1", &bob, || 9).value.is_some());
        assert_eq!(table.remove_if(&"b1", |v| *v == 1), None, "pred refused");
        assert_eq!(table.remove_if(&"b1", |v| *v == 9), Some(9));
    }
}
