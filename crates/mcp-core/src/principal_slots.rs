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

/// Per-principal counters with a cap; a [`Slot`] is one held unit, given back on drop.
#[derive(Clone, Debug)]
pub struct PrincipalSlots {
    max: usize,
    held: Arc<Mutex<HashMap<Principal, usize>>>,
}

impl PrincipalSlots {
    /// At most `max` slots per principal.
    #[must_use]
    pub fn new(max: usize) -> Self {
        Self {
            max,
            held: Arc::default(),
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
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(principal.clone()).or_default();
        if *count >= self.max {
            if *count == 0 {
                held.remove(principal);
            }
            return None;
        }
        *count += 1;
        Some(Slot {
            held: Arc::clone(&self.held),
            principal: principal.clone(),
        })
    }

    /// Slots held by every principal together (for metrics and tests).
    #[must_use]
    pub fn total(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .sum()
    }
}

/// One slot of a [`PrincipalSlots`], held as long as the thing it counts lives.
#[derive(Debug)]
pub struct Slot {
    held: Arc<Mutex<HashMap<Principal, usize>>>,
    principal: Principal,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
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
