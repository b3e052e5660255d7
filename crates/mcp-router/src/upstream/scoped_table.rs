//! [`ScopedTable`]: a bounded map whose entries each belong to one principal, so that filling it
//! can never cost another tenant anything.
//!
//! Two bounds: a share per principal and a total. A principal at its share that adds an entry
//! loses its own oldest one; a full table refuses a principal with nothing to give back (the
//! caller then works without the cached state: probes again, opens no session, keeps no hint).
//! No insertion ever evicts another principal's entry that is in use: entries nobody asked for
//! within the table's idle lifetime have expired. A principal's insertion drops its own expired
//! entries (so they do not wait for the table to fill), and a full table drops expired entries
//! (of any principal) before it refuses, so a table filled once cannot lock newcomers out for
//! good.
//!
//! A table of values that differ in size ([`ScopedTable::weighed`]) also counts bytes, with a
//! byte share per principal and a byte total beside the entry counts, and drops a principal's
//! own expired entries whenever it stores one (not only when the table is full). It is the
//! budget rule in bytes (book: docs/src/security.md, "Budgets").
//!
//! The counts and bytes are an [`mcp_core::Budget`]'s (a slot and the bytes of each entry,
//! charged to its principal's account), so `/metrics` shows each table like every other
//! budget; the table decides under its own lock what makes room, and asks the budget only what
//! it holds.
//!
//! Why this file is long: a third of it is the unit tests of the eviction and byte rules,
//! which read the table's private state.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

// tokio's clock, so tests can pause time (outside a runtime it is the system clock).
use tokio::time::Instant;

use mcp_core::{Account, Budget, Principal, Slot, Spent};

/// A bounded map with a per-principal share. See the module docs.
#[derive(Debug)]
pub(crate) struct ScopedTable<K, V> {
    inner: Mutex<Inner<K, V>>,
    /// Entries (slots) and bytes, with the shares and totals.
    budget: Budget,
    per_principal: usize,
    total: usize,
    /// Bytes one principal's entries may weigh, and all of them ([`ScopedTable::weighed`]).
    bytes_per_principal: usize,
    bytes_total: usize,
    /// What a newcomer's entry may come to weigh once made ([`reserving`](Self::reserving)).
    reserve: usize,
    /// How long an entry nobody asks for lives.
    idle: Duration,
}

#[derive(Debug)]
struct Entry<V> {
    principal: Principal,
    value: V,
    used: Instant,
    bytes: usize,
    /// The entry's place in its principal's account, which is charged its bytes.
    slot: Slot,
}

#[derive(Debug)]
struct Inner<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Each principal's keys, oldest first, and its account.
    order: HashMap<Principal, Held<K>>,
}

#[derive(Debug)]
struct Held<K> {
    keys: VecDeque<K>,
    account: Account,
}

/// What [`ScopedTable::weigh`] did.
#[derive(Debug)]
pub(crate) struct Weighed<K, V> {
    /// The key is still in the table, charged with its bytes.
    pub(crate) kept: bool,
    /// The other entries that left to make room: the principal's own oldest, or expired ones.
    pub(crate) evicted: Vec<(K, V)>,
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
    /// A table named `name` (its budget's, on `/metrics`) of at most `total` entries, at most
    /// `per_principal` of them (at least 1) one principal's; an entry nobody asked for within
    /// `idle` has expired.
    pub(crate) fn new(
        name: &'static str,
        per_principal: usize,
        total: usize,
        idle: Duration,
    ) -> Self {
        Self::weighed(name, per_principal, total, idle, usize::MAX, usize::MAX)
    }

    /// [`new`](Self::new) whose entries also weigh bytes ([`upsert_weighing`]
    /// (Self::upsert_weighing)): at most `bytes_per_principal` of one principal's, `bytes_total`
    /// in all.
    pub(crate) fn weighed(
        name: &'static str,
        per_principal: usize,
        total: usize,
        idle: Duration,
        bytes_per_principal: usize,
        bytes_total: usize,
    ) -> Self {
        let (per_principal, total) = (per_principal.max(1), total.max(1));
        Self {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: HashMap::new(),
            }),
            budget: Budget::new(name)
                .with_slots(per_principal, total)
                .with_bytes(bytes_per_principal, bytes_total),
            per_principal,
            total,
            bytes_per_principal,
            bytes_total,
            reserve: 0,
            idle,
        }
    }

    /// The budget the entries draw from.
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// An entry inserted by a principal holding no bytes needs `bytes` of room: the most an
    /// entry weighed after it is made ([`weigh`](Self::weigh)) may come to. Without it, a
    /// newcomer is refused only once the bytes are spent to the last one.
    pub(crate) fn reserving(mut self, bytes: usize) -> Self {
        self.reserve = bytes;
        self
    }

    /// What every entry weighs together.
    pub(crate) fn bytes(&self) -> usize {
        self.budget.held_bytes()
    }

    /// What every entry weighs with `bytes` more.
    fn bytes_with(&self, bytes: usize) -> usize {
        self.budget.held_bytes().saturating_add(bytes)
    }

    /// Counts a refusal of the table on its budget.
    fn refused(&self, spent: Spent) {
        self.budget.refuse(spent);
    }

    /// Sets `key` to `value`, weighing `bytes`, for `principal`. To make room the principal's
    /// own expired entries go first, then its own oldest; expired entries of anyone go when the
    /// table is full. A value heavier than the principal's byte share, or one that finds the
    /// table full while the principal holds nothing to give back, is not kept. Returns whether
    /// it was kept.
    pub(crate) fn upsert_weighing(
        &self,
        key: &K,
        principal: &Principal,
        value: V,
        bytes: usize,
    ) -> bool {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.remove(key);
        if bytes > self.bytes_per_principal || bytes > self.bytes_total {
            self.refused(if bytes > self.bytes_per_principal {
                Spent::Share(self.bytes_per_principal)
            } else {
                Spent::Ceiling(self.bytes_total)
            });
            return false;
        }
        drop(inner.expire_own(principal, now, self.idle));
        let full = |inner: &Inner<K, V>| {
            inner.entries.len() >= self.total || self.bytes_with(bytes) > self.bytes_total
        };
        if full(&inner) {
            drop(inner.expire(now, self.idle));
        }
        loop {
            let (count, weight) = inner.held(principal);
            let over_share = count >= self.per_principal
                || weight.saturating_add(bytes) > self.bytes_per_principal;
            if !over_share && !full(&inner) {
                break;
            }
            if inner.pop_oldest(principal).is_none() {
                // Holding nothing, the principal is within its share: the table is full.
                self.refused(Spent::Ceiling(self.bytes_total));
                return false;
            }
        }
        inner.insert(key.clone(), principal, value, now, bytes, &self.budget);
        true
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
        // Each insertion sweeps what its own principal left to expire (a scan of its share).
        let mut evicted = inner.expire_own(principal, now, self.idle);
        if inner.entries.len() >= self.total || self.bytes_with(0) >= self.bytes_total {
            evicted.extend(inner.expire(now, self.idle));
        }
        let (held, weight) = inner.held(principal);
        if weight == 0 && self.bytes_with(self.reserve.max(1)) > self.bytes_total {
            // The table's bytes have no room for the entry once weighed, and the principal holds
            // none to give back then: refused like a newcomer to a full table.
            self.refused(Spent::Ceiling(self.bytes_total));
            return Inserted {
                value: None,
                evicted,
            };
        }
        if held >= self.per_principal || (inner.entries.len() >= self.total && held > 0) {
            evicted.extend(inner.pop_oldest(principal));
        } else if inner.entries.len() >= self.total {
            self.refused(Spent::Ceiling(self.total));
            return Inserted {
                value: None,
                evicted,
            };
        }
        let value = make();
        inner.insert(key.clone(), principal, value.clone(), now, 0, &self.budget);
        Inserted {
            value: Some(value),
            evicted,
        }
    }

    /// Charges an existing `key` with `bytes` (a value whose weight is known only once it is
    /// made, like an upstream session after its `initialize`). To make room the key's
    /// principal gives up its own oldest other entries, after expired entries of anyone when
    /// the table's bytes are spent; when that is not enough (or `bytes` alone is over the
    /// principal's byte share) the key itself leaves. Returns whether it was kept, and what
    /// left besides it.
    pub(crate) fn weigh(&self, key: &K, bytes: usize) -> Weighed<K, V> {
        let mut inner = self.lock();
        let now = Instant::now();
        let mut evicted = Vec::new();
        let Some(principal) = inner.charge(key, bytes) else {
            return Weighed {
                kept: false,
                evicted,
            };
        };
        if bytes <= self.bytes_per_principal && bytes <= self.bytes_total {
            if self.bytes_with(0) > self.bytes_total {
                evicted = inner.expire(now, self.idle);
                evicted.retain(|(k, _)| k != key);
            }
            loop {
                let (_, weight) = inner.held(&principal);
                if weight <= self.bytes_per_principal && self.bytes_with(0) <= self.bytes_total {
                    return Weighed {
                        kept: inner.entries.contains_key(key),
                        evicted,
                    };
                }
                match inner.pop_oldest_except(&principal, key) {
                    Some(gone) => evicted.push(gone),
                    None => break,
                }
            }
        }
        let (_, weight) = inner.held(&principal);
        self.refused(if weight > self.bytes_per_principal {
            Spent::Share(self.bytes_per_principal)
        } else {
            Spent::Ceiling(self.bytes_total)
        });
        inner.remove(key);
        Weighed {
            kept: false,
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
        self.lock()
            .order
            .get(principal)
            .map_or(0, |held| held.keys.len())
    }

    /// How many entries there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

impl<K: Clone + Eq + Hash, V> Inner<K, V> {
    /// How many entries `principal` holds, and what they weigh.
    fn held(&self, principal: &Principal) -> (usize, usize) {
        self.order
            .get(principal)
            .map_or((0, 0), |held| (held.keys.len(), held.account.held_bytes()))
    }

    /// Stores an entry the table made room for (so the budget takes it whatever it holds).
    fn insert(
        &mut self,
        key: K,
        principal: &Principal,
        value: V,
        now: Instant,
        bytes: usize,
        budget: &Budget,
    ) {
        let held = self.order.entry(principal.clone()).or_insert_with(|| Held {
            keys: VecDeque::new(),
            account: budget.account(principal),
        });
        held.keys.push_back(key.clone());
        held.account.add(bytes);
        let slot = held.account.add_slot();
        self.entries.insert(
            key,
            Entry {
                principal: principal.clone(),
                value,
                used: now,
                bytes,
                slot,
            },
        );
    }

    /// Sets what `key` weighs to `bytes`; returns its principal (`None`: no such key).
    fn charge(&mut self, key: &K, bytes: usize) -> Option<Principal> {
        let entry = self.entries.get_mut(key)?;
        let before = std::mem::replace(&mut entry.bytes, bytes);
        let account = entry.slot.account();
        account.release(before);
        account.add(bytes);
        Some(entry.principal.clone())
    }

    /// The principal's oldest entry other than `keep` that weighs something, removed (one that
    /// weighs nothing, like a session still being made, would free no bytes).
    fn pop_oldest_except(&mut self, principal: &Principal, keep: &K) -> Option<(K, V)> {
        let oldest = self
            .order
            .get(principal)?
            .keys
            .iter()
            .find(|k| *k != keep && self.entries.get(*k).is_some_and(|e| e.bytes > 0))?
            .clone();
        let value = self.remove(&oldest)?;
        Some((oldest, value))
    }

    fn pop_oldest(&mut self, principal: &Principal) -> Option<(K, V)> {
        let oldest = self.order.get(principal)?.keys.front()?.clone();
        let value = self.remove(&oldest)?;
        Some((oldest, value))
    }

    /// Drops `principal`'s entries unused for longer than `idle`, looking from its oldest
    /// stored: each store sweeps what its own principal left to expire.
    fn expire_own(&mut self, principal: &Principal, now: Instant, idle: Duration) -> Vec<(K, V)> {
        let expired: Vec<K> = self
            .order
            .get(principal)
            .map(|held| {
                held.keys
                    .iter()
                    .filter(|k| {
                        self.entries
                            .get(*k)
                            .is_some_and(|e| now.saturating_duration_since(e.used) > idle)
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        expired
            .into_iter()
            .filter_map(|k| self.remove(&k).map(|v| (k, v)))
            .collect()
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
        entry.slot.account().release(entry.bytes);
        if let Some(held) = self.order.get_mut(&entry.principal) {
            held.keys.retain(|k| k != key);
            if held.keys.is_empty() {
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
        let table = ScopedTable::new("test", 2, 10, Duration::from_secs(3600));
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
        let table = ScopedTable::new("test", 5, 3, Duration::from_secs(3600));
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        for key in ["a1", "a2", "a3"] {
            assert!(table.get_or_insert_with(&key, &alice, || 0).value.is_some());
        }
        let refused = table.get_or_insert_with(&"b1", &bob, || 0);
        assert!(refused.value.is_none(), "bob is refused");
        assert_eq!(table.len(), 3);
        // The table's budget holds what it holds, and counted the refusal.
        assert_eq!(table.budget().held_slots(), 3);
        assert_eq!(table.budget().refusals().ceiling, 1);
        // Alice, who holds entries, recycles her own oldest.
        let recycled = table.get_or_insert_with(&"a4", &alice, || 4);
        let gone: Vec<_> = recycled.evicted.into_iter().map(|(k, _)| k).collect();
        assert_eq!(gone, ["a1"]);
        assert_eq!(table.remove(&"a2"), Some(0));
        assert!(table.get_or_insert_with(&"b1", &bob, || 9).value.is_some());
        assert_eq!(table.remove_if(&"b1", |v| *v == 1), None, "pred refused");
        assert_eq!(table.remove_if(&"b1", |v| *v == 9), Some(9));
        assert_eq!(table.budget().held_slots(), 2, "a3 and a4");
    }

    #[test]
    fn a_weighed_entry_makes_room_from_its_own_principal_only() {
        // 3 entries and 100 bytes per principal, 150 bytes in all.
        let table = ScopedTable::weighed("test", 3, 10, Duration::from_secs(3600), 100, 150);
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        for key in ["a1", "a2", "b1"] {
            let owner = if key.starts_with('a') { &alice } else { &bob };
            assert!(table.get_or_insert_with(&key, owner, || 0).value.is_some());
        }
        assert!(table.weigh(&"a1", 40).kept);
        assert!(table.weigh(&"b1", 60).kept);
        assert_eq!(table.bytes(), 100);
        // Alice's second entry is over her share with the first: her first leaves.
        let weighed = table.weigh(&"a2", 70);
        assert!(weighed.kept);
        let gone: Vec<_> = weighed.evicted.into_iter().map(|(k, _)| k).collect();
        assert_eq!(gone, ["a1"]);
        assert_eq!(table.bytes(), 130);
        // An entry over the share alone is not kept, and takes nothing with it.
        assert!(
            table
                .get_or_insert_with(&"a3", &alice, || 0)
                .value
                .is_some()
        );
        let refused = table.weigh(&"a3", 101);
        assert!(!refused.kept && refused.evicted.is_empty());
        assert_eq!(table.get(&"a3"), None);
        assert_eq!(table.get(&"a2"), Some(0), "alice's kept entry stays");
        // Bob's second entry finds the table's bytes spent: alice's are not his to give back.
        assert!(table.get_or_insert_with(&"b2", &bob, || 0).value.is_some());
        let weighed = table.weigh(&"b2", 30);
        assert!(weighed.kept, "bob gives back his own b1");
        let gone: Vec<_> = weighed.evicted.into_iter().map(|(k, _)| k).collect();
        assert_eq!(gone, ["b1"]);
        assert!(
            table
                .get_or_insert_with(&"c1", &Principal::new("i", "carol"), || 0)
                .value
                .is_some()
        );
        assert!(
            !table.weigh(&"c1", 60).kept,
            "carol has nothing to give back"
        );
        assert_eq!(table.get(&"a2"), Some(0));
        assert_eq!(table.get(&"b2"), Some(0));
        assert_eq!(table.bytes(), 100);
        assert!(!table.weigh(&"nobody", 1).kept);
    }

    #[test]
    fn a_principal_with_no_bytes_to_give_back_is_refused_when_the_bytes_are_spent() {
        let table = ScopedTable::weighed("test", 3, 10, Duration::from_secs(3600), 100, 100);
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        assert!(
            table
                .get_or_insert_with(&"a1", &alice, || 0)
                .value
                .is_some()
        );
        assert!(table.weigh(&"a1", 100).kept);
        // Bob would make an entry (an upstream session) that could never be kept: refused
        // before it is made, like a newcomer to a full table.
        assert!(table.get_or_insert_with(&"b1", &bob, || 0).value.is_none());
        // Alice holds bytes she can give back when her next entry is weighed.
        assert!(
            table
                .get_or_insert_with(&"a2", &alice, || 0)
                .value
                .is_some()
        );
        let weighed = table.weigh(&"a2", 50);
        assert!(weighed.kept);
        assert_eq!(table.bytes(), 50, "her a1 gave way");
        assert!(table.get_or_insert_with(&"b1", &bob, || 0).value.is_some());
    }

    #[test]
    fn a_newcomer_needs_room_for_the_largest_entry() {
        let table =
            ScopedTable::weighed("test", 3, 10, Duration::from_secs(3600), 100, 100).reserving(40);
        let alice = Principal::new("i", "alice");
        assert!(
            table
                .get_or_insert_with(&"a1", &alice, || 0)
                .value
                .is_some()
        );
        assert!(table.weigh(&"a1", 50).kept);
        let bob = Principal::new("i", "bob");
        assert!(
            table.get_or_insert_with(&"b1", &bob, || 0).value.is_some(),
            "50 + 40 fit"
        );
        assert!(table.weigh(&"b1", 20).kept);
        let carol = Principal::new("i", "carol");
        assert!(
            table
                .get_or_insert_with(&"c1", &carol, || 0)
                .value
                .is_none(),
            "70 + 40 do not: carol's entry could not be kept"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_principals_insertion_sweeps_its_own_expired_entries_only() {
        let table = ScopedTable::new("test", 10, 100, Duration::from_secs(60));
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        for key in ["a1", "a2"] {
            let _ = table.get_or_insert_with(&key, &alice, || 0);
        }
        let _ = table.get_or_insert_with(&"b1", &bob, || 0);
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(table.get(&"a2"), Some(0), "a2 is used again");
        tokio::time::advance(Duration::from_secs(45)).await;
        // The table is far from full: alice's expired a1 leaves with her next insertion ...
        let inserted = table.get_or_insert_with(&"a3", &alice, || 3);
        let gone: Vec<_> = inserted.evicted.into_iter().map(|(k, _)| k).collect();
        assert_eq!(gone, ["a1"]);
        assert_eq!(table.held_by(&alice), 2);
        // ... while bob's expired entry waits for his own.
        assert_eq!(table.held_by(&bob), 1);
        let inserted = table.get_or_insert_with(&"b2", &bob, || 2);
        assert_eq!(inserted.evicted.len(), 1);
        assert_eq!(table.held_by(&bob), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_table_drops_idle_entries_of_anyone_before_refusing() {
        let table = ScopedTable::new("test", 5, 2, Duration::from_secs(60));
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
