//! [`PrincipalSlots`]: how many of one kind of thing (a request in flight, an SSE session, a
//! notification stream, a background relay) each principal holds, capped per principal, so that
//! one principal holding its whole share leaves everyone else's untouched.
//!
//! ```
//! use mcp_core::{Principal, PrincipalSlots};
//!
//! let slots = PrincipalSlots::new(1);
//! let alice = Principal::new("https://issuer", "alice");
//! let held = slots.take(&alice).expect("within the share");
//! assert!(slots.take(&alice).is_none(), "over alice's share");
//! assert!(slots.take(&Principal::new("https://issuer", "bob")).is_some());
//! drop(held);
//! assert!(slots.take(&alice).is_some(), "given back on drop");
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::Principal;

/// Per-principal counters with a cap; a [`Slot`] is one held unit, given back on drop. The
/// counters are spread over [`SHARDS`] locks by principal, so principals rarely wait for each
/// other (a request takes and gives back one slot: this is on every request's path).
#[derive(Clone, Debug)]
pub struct PrincipalSlots {
    max: usize,
    shards: Arc<[Shard; SHARDS]>,
}

/// Locks the counters are spread over (the byte budgets' accounts too).
pub(crate) const SHARDS: usize = 16;

type Shard = Mutex<HashMap<Principal, usize>>;

impl PrincipalSlots {
    /// At most `max` slots per principal.
    #[must_use]
    pub fn new(max: usize) -> Self {
        Self {
            max,
            shards: Arc::new(std::array::from_fn(|_| Mutex::default())),
        }
    }

    /// The cap.
    #[must_use]
    pub fn max(&self) -> usize {
        self.max
    }

    /// One more slot for `principal`; `None` when it holds `max` already.
    #[must_use]
    pub fn take(&self, principal: &Principal) -> Option<Slot> {
        let shard = shard_of(principal);
        let mut held = lock(&self.shards[shard]);
        let count = held.entry(principal.clone()).or_default();
        if *count >= self.max {
            if *count == 0 {
                held.remove(principal);
            }
            return None;
        }
        *count += 1;
        Some(Slot {
            shards: Arc::clone(&self.shards),
            shard,
            principal: principal.clone(),
        })
    }

    /// Slots held by every principal together (for metrics and tests).
    #[must_use]
    pub fn total(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(shard).values().sum::<usize>())
            .sum()
    }
}

/// The lock `principal`'s counter is under.
pub(crate) fn shard_of(principal: &Principal) -> usize {
    use std::hash::BuildHasher;
    // A fixed-key hasher: the shard only spreads the lock, it guards nothing.
    let hash =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one(principal);
    usize::try_from(hash % SHARDS as u64).unwrap_or(0)
}

fn lock(shard: &Shard) -> std::sync::MutexGuard<'_, HashMap<Principal, usize>> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One slot of a [`PrincipalSlots`], held as long as the thing it counts lives.
#[derive(Debug)]
pub struct Slot {
    shards: Arc<[Shard; SHARDS]>,
    shard: usize,
    principal: Principal,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = lock(&self.shards[self.shard]);
        if let Some(count) = held.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_each_principal_alone_and_frees_on_drop() {
        let slots = PrincipalSlots::new(2);
        let alice = Principal::new("iss", "alice");
        let bob = Principal::new("iss", "bob");
        let a1 = slots.take(&alice).expect("first");
        let _a2 = slots.take(&alice).expect("second");
        assert!(slots.take(&alice).is_none(), "over alice's share");
        let _b1 = slots.take(&bob).expect("bob is not affected");
        assert_eq!(slots.total(), 3);
        drop(a1);
        assert!(slots.take(&alice).is_some(), "a dropped slot is free again");
        assert!(PrincipalSlots::new(0).take(&alice).is_none());
    }
}
