//! [`ByteBudget`]: bytes of one kind (messages waiting for a slow client, say) that principals
//! hold at once, with a share per principal and a ceiling per node, so that one principal
//! holding its whole share leaves everyone else's untouched, and all of them together cannot
//! exhaust the node.
//!
//! A holder takes its principal's [`Account`] once (one lock), then charges and releases
//! bytes on it with atomic operations only: this is made for paths that see every message.
//! A charge is taken while the account holds less than the share and the node less than the
//! ceiling, and counts in full (so each holder charging at the same moment may go over by one
//! charge, the way a buffer that takes whole messages does). What must be kept whatever the
//! budget holds ([`Account::force`]) counts on the principal's account only, never towards the
//! node's ceiling: one principal's forced bytes cannot spend everybody's ceiling. What an
//! account still holds when its last handle goes is given back to the node.
//!
//! ```
//! use mcp_core::{ByteBudget, Principal, Spent};
//!
//! let budget = ByteBudget::new(100, 1_000);
//! let alice = budget.account(&Principal::new("https://issuer", "alice"));
//! alice.charge(60).expect("within the share");
//! alice.charge(60).expect("held less than the share: counts in full");
//! assert_eq!(alice.charge(1), Err(Spent::Share(100)));
//! let bob = budget.account(&Principal::new("https://issuer", "bob"));
//! bob.charge(60).expect("bob's share is his own");
//! assert_eq!(budget.held(), 180);
//! alice.release(120);
//! drop(bob); // what bob still held goes back to the node with his last handle
//! assert_eq!(budget.held(), 0);
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::Principal;
use crate::principal_slots::{SHARDS, shard_of};

/// Bytes principals hold, with a share each and a ceiling for the node. Cloning shares the
/// accounts.
#[derive(Clone, Debug)]
pub struct ByteBudget {
    node: Arc<Node>,
}

#[derive(Debug)]
struct Node {
    share: usize,
    ceiling: usize,
    held: AtomicUsize,
    /// The live accounts, spread over locks by principal (taken once per holder, not per charge).
    accounts: [Mutex<HashMap<Principal, Weak<Ledger>>>; SHARDS],
}

/// Why a charge was refused: the limit that is spent, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spent {
    /// The principal holds its share.
    Share(usize),
    /// The node holds its ceiling.
    Ceiling(usize),
}

/// One principal's bytes of a [`ByteBudget`]; clones are handles on the same account.
#[derive(Clone, Debug)]
pub struct Account {
    ledger: Arc<Ledger>,
}

#[derive(Debug)]
struct Ledger {
    node: Arc<Node>,
    principal: Principal,
    /// Charged bytes, counted towards the node's ceiling too.
    held: AtomicUsize,
    /// Forced bytes, counted on this account only.
    forced: AtomicUsize,
}

impl ByteBudget {
    /// At most `share` bytes held by one principal, `ceiling` by all of them.
    #[must_use]
    pub fn new(share: usize, ceiling: usize) -> Self {
        Self {
            node: Arc::new(Node {
                share,
                ceiling,
                held: AtomicUsize::new(0),
                accounts: std::array::from_fn(|_| Mutex::default()),
            }),
        }
    }

    /// The share of one principal, in bytes.
    #[must_use]
    pub fn share(&self) -> usize {
        self.node.share
    }

    /// The ceiling of the node, in bytes.
    #[must_use]
    pub fn ceiling(&self) -> usize {
        self.node.ceiling
    }

    /// Bytes every principal charged together, forced bytes aside (for metrics and tests).
    #[must_use]
    pub fn held(&self) -> usize {
        self.node.held.load(Ordering::Relaxed)
    }

    /// `principal`'s account: the same one for every holder of that principal while any handle
    /// lives.
    #[must_use]
    pub fn account(&self, principal: &Principal) -> Account {
        let mut accounts = lock(&self.node.accounts[shard_of(principal)]);
        if let Some(ledger) = accounts.get(principal).and_then(Weak::upgrade) {
            return Account { ledger };
        }
        let ledger = Arc::new(Ledger {
            node: Arc::clone(&self.node),
            principal: principal.clone(),
            held: AtomicUsize::new(0),
            forced: AtomicUsize::new(0),
        });
        accounts.insert(principal.clone(), Arc::downgrade(&ledger));
        Account { ledger }
    }
}

impl Account {
    /// Charges `bytes` when the account holds less than its share and the node less than its
    /// ceiling (checked before, counted in full).
    ///
    /// # Errors
    ///
    /// The limit that is spent; nothing is charged then.
    pub fn charge(&self, bytes: usize) -> Result<(), Spent> {
        let node = &self.ledger.node;
        if self.held() >= node.share {
            return Err(Spent::Share(node.share));
        }
        if node.held.load(Ordering::Relaxed) >= node.ceiling {
            return Err(Spent::Ceiling(node.ceiling));
        }
        self.ledger.held.fetch_add(bytes, Ordering::Relaxed);
        node.held.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Counts `bytes` on the account whatever it holds, and not towards the node's ceiling: for
    /// what must be kept (a call's response, which ends it). The principal's later charges
    /// see them.
    pub fn force(&self, bytes: usize) {
        self.ledger.forced.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Gives back `bytes` charged before ([`charge`](Self::charge)).
    pub fn release(&self, bytes: usize) {
        let given = sub(&self.ledger.held, bytes);
        sub(&self.ledger.node.held, given);
    }

    /// Gives back `bytes` forced before ([`force`](Self::force)).
    pub fn release_forced(&self, bytes: usize) {
        sub(&self.ledger.forced, bytes);
    }

    /// Bytes this account holds, charged and forced.
    #[must_use]
    pub fn held(&self) -> usize {
        self.ledger
            .held
            .load(Ordering::Relaxed)
            .saturating_add(self.ledger.forced.load(Ordering::Relaxed))
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        sub(&self.node.held, *self.held.get_mut());
        let mut accounts = lock(&self.node.accounts[shard_of(&self.principal)]);
        // A new account of the principal may have replaced this one already.
        if accounts
            .get(&self.principal)
            .is_some_and(|weak| weak.strong_count() == 0)
        {
            accounts.remove(&self.principal);
        }
    }
}

/// Subtracts up to `bytes` without wrapping; returns what was subtracted.
fn sub(counter: &AtomicUsize, bytes: usize) -> usize {
    let mut taken = 0;
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
        taken = bytes.min(held);
        Some(held - taken)
    });
    taken
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_refuses_everyone_and_frees_with_releases() {
        let budget = ByteBudget::new(100, 150);
        let alice = budget.account(&Principal::new("i", "alice"));
        let bob = budget.account(&Principal::new("i", "bob"));
        alice.charge(90).expect("alice within both");
        bob.charge(70).expect("the node held less than its ceiling");
        assert_eq!(bob.charge(1), Err(Spent::Ceiling(150)));
        assert_eq!(alice.charge(1), Err(Spent::Ceiling(150)));
        alice.release(90);
        bob.charge(1).expect("room again");
        assert_eq!(budget.held(), 71);
    }

    #[test]
    fn holders_of_one_principal_share_one_account_until_the_last_goes() {
        let budget = ByteBudget::new(100, 1_000);
        let alice = Principal::new("i", "alice");
        let first = budget.account(&alice);
        let second = budget.account(&alice);
        first.charge(100).expect("within the share");
        assert_eq!(second.charge(1), Err(Spent::Share(100)), "one account");
        drop(first);
        assert_eq!(second.held(), 100, "a handle going keeps the account");
        drop(second);
        assert_eq!(budget.held(), 0, "the last handle gives the bytes back");
        let fresh = budget.account(&alice);
        assert_eq!(fresh.held(), 0);
        fresh.charge(1).expect("a fresh account");
        assert_eq!(lock(&budget.node.accounts[shard_of(&alice)]).len(), 1);
    }

    #[test]
    fn releasing_more_than_held_never_wraps() {
        let budget = ByteBudget::new(100, 1_000);
        let alice = budget.account(&Principal::new("i", "alice"));
        alice.charge(10).expect("room");
        alice.release(50);
        alice.force(5);
        alice.release_forced(50);
        assert_eq!((alice.held(), budget.held()), (0, 0));
    }

    #[test]
    fn forced_bytes_spend_their_principals_share_but_not_the_ceiling() {
        let budget = ByteBudget::new(100, 150);
        let alice = budget.account(&Principal::new("i", "alice"));
        let bob = budget.account(&Principal::new("i", "bob"));
        alice.force(1_000);
        assert_eq!(
            alice.charge(1),
            Err(Spent::Share(100)),
            "alice pays for them"
        );
        bob.charge(100)
            .expect("the node's ceiling does not count them");
        assert_eq!(budget.held(), 100);
        alice.release_forced(1_000);
        alice.charge(40).expect("given back");
    }
}
