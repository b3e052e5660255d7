//! [`Budget`]: what principals hold of one kind, in bytes and in slots (a slot is one held
//! thing: a request in flight, a stream, a table entry), with a share per principal and a
//! ceiling per node for each, so that one principal holding its whole share leaves everyone
//! else's untouched, and all of them together cannot exhaust the node. It is the one
//! accounting rule of the gateway (book: docs/src/security.md, "Budgets"): every buffer, queue,
//! table and cache it keeps for a caller draws from a budget, and a budget's use and refusals
//! are what `/metrics` shows.
//!
//! A holder takes its principal's [`Account`] once (one lock), then charges and releases on it
//! with atomic operations only: this is made for paths that see every message.
//!
//! - **Slots** are exact: [`Account::take_slot`] never lets the principal hold more than its
//!   share, nor the node more than its ceiling, whatever runs at the same moment. A [`Slot`] is
//!   given back when it drops.
//! - **Bytes** are charged whole: [`Account::charge`] takes a charge while the account holds
//!   less than the share and the node less than the ceiling, and counts it in full (so holders
//!   charging at the same moment may go over by one charge each, the way a buffer that takes
//!   whole messages does). What must be kept whatever the budget holds ([`Account::force`])
//!   counts on the principal's account only, never towards the node's ceiling: one principal's
//!   forced bytes cannot spend everybody's ceiling.
//! - A holder that decides itself what to evict under its own lock (a table dropping the
//!   principal's own oldest entry) asks [`Account::room`] first and then [`Account::add`]s.
//! - What waits somewhere holds a [`Charge`], given back when it drops: [`Account::hold`]
//!   charges as above; [`Account::reserve`] only when the bytes fit whole (for what is kept for
//!   long: one charge past the share would spend it for good); [`Account::keep`] forces them
//!   (the one message a stalled queue always lets through).
//!
//! What an account still holds when its last handle goes is given back to the node.
//!
//! ```
//! use mcp_core::{Budget, Principal, Spent};
//!
//! let budget = Budget::new("example").with_bytes(100, 1_000).with_slots(1, 10);
//! let alice = budget.account(&Principal::new("https://issuer", "alice"));
//! alice.charge(60).expect("within the share");
//! alice.charge(60).expect("held less than the share: counts in full");
//! assert_eq!(alice.charge(1), Err(Spent::Share(100)));
//! let stream = alice.take_slot().expect("one slot");
//! assert_eq!(alice.take_slot().err(), Some(Spent::Share(1)));
//! let bob = budget.account(&Principal::new("https://issuer", "bob"));
//! bob.charge(60).expect("bob's share is his own");
//! assert_eq!((budget.held_bytes(), budget.held_slots()), (180, 1));
//! assert_eq!(budget.refusals().share, 2);
//! alice.release(120);
//! drop(stream);
//! drop(bob); // what bob still held goes back to the node with his last handle
//! assert_eq!((budget.held_bytes(), budget.held_slots()), (0, 0));
//! ```
//!
//! Why this file is long: most of it is the unit tests of the accounting rule, which every
//! budget of the gateway relies on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::Principal;

/// What principals hold of one kind, with a share each and a ceiling for the node, in bytes and
/// in slots. Cloning shares the accounts.
#[derive(Clone, Debug)]
pub struct Budget {
    node: Arc<Node>,
}

/// Locks the accounts are spread over by principal, so principals rarely wait for each other.
const SHARDS: usize = 16;

#[derive(Debug)]
struct Node {
    name: &'static str,
    bytes: Limit,
    slots: Limit,
    refused_share: AtomicU64,
    refused_ceiling: AtomicU64,
    /// Forced bytes of every principal (outside the ceiling), for metrics.
    kept: AtomicUsize,
    /// The live accounts (taken once per holder, not per charge).
    accounts: [Mutex<HashMap<Principal, Weak<Ledger>>>; SHARDS],
}

#[derive(Debug)]
struct Limit {
    share: usize,
    ceiling: usize,
    /// What every principal holds, forced bytes aside.
    held: AtomicUsize,
}

impl Limit {
    fn unlimited() -> Self {
        Self::new(usize::MAX, usize::MAX)
    }

    fn new(share: usize, ceiling: usize) -> Self {
        Self {
            share,
            ceiling,
            held: AtomicUsize::new(0),
        }
    }
}

/// Why a charge was refused: the limit that is spent (in bytes for bytes, in slots for slots).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spent {
    /// The principal holds its share.
    Share(usize),
    /// The node holds its ceiling.
    Ceiling(usize),
}

/// How many charges and slots a [`Budget`] refused since it was made, by the limit that was
/// spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusals {
    /// Refused because the principal held its share.
    pub share: u64,
    /// Refused because the node held its ceiling.
    pub ceiling: u64,
}

/// One principal's part of a [`Budget`]; clones are handles on the same account.
#[derive(Clone, Debug)]
pub struct Account {
    ledger: Arc<Ledger>,
}

#[derive(Debug)]
struct Ledger {
    node: Arc<Node>,
    principal: Principal,
    /// Charged bytes, counted towards the node's ceiling too.
    bytes: AtomicUsize,
    /// Forced bytes, counted on this account only.
    forced: AtomicUsize,
    slots: AtomicUsize,
}

impl Budget {
    /// A budget named `name` (the label `/metrics` shows it under; a fixed word, never a
    /// caller's), with no limit yet.
    #[must_use]
    pub fn new(name: &'static str) -> Self {
        Self {
            node: Arc::new(Node {
                name,
                bytes: Limit::unlimited(),
                slots: Limit::unlimited(),
                refused_share: AtomicU64::new(0),
                refused_ceiling: AtomicU64::new(0),
                kept: AtomicUsize::new(0),
                accounts: std::array::from_fn(|_| Mutex::default()),
            }),
        }
    }

    /// At most `share` bytes held by one principal, `ceiling` by all of them. Returns a new
    /// budget: set limits while building it, before it is cloned or used (holders of an
    /// earlier clone keep theirs).
    #[must_use]
    pub fn with_bytes(self, share: usize, ceiling: usize) -> Self {
        self.with(|node| node.bytes = Limit::new(share, ceiling))
    }

    /// At most `share` slots held by one principal, `ceiling` by all of them (set like
    /// [`with_bytes`](Self::with_bytes)).
    #[must_use]
    pub fn with_slots(self, share: usize, ceiling: usize) -> Self {
        self.with(|node| node.slots = Limit::new(share, ceiling))
    }

    /// A fresh budget of the same name with `set` applied to its limits: limits are set while
    /// the budget is built, before any holder or clone exists.
    fn with(self, set: impl FnOnce(&mut Node)) -> Self {
        let mut fresh = Self::new(self.node.name);
        if let Some(node) = Arc::get_mut(&mut fresh.node) {
            node.bytes = Limit::new(self.node.bytes.share, self.node.bytes.ceiling);
            node.slots = Limit::new(self.node.slots.share, self.node.slots.ceiling);
            set(node);
        }
        fresh
    }

    /// The budget's name.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.node.name
    }

    /// The byte share of one principal.
    #[must_use]
    pub fn bytes_share(&self) -> usize {
        self.node.bytes.share
    }

    /// The byte ceiling of the node.
    #[must_use]
    pub fn bytes_ceiling(&self) -> usize {
        self.node.bytes.ceiling
    }

    /// The slot share of one principal.
    #[must_use]
    pub fn slots_share(&self) -> usize {
        self.node.slots.share
    }

    /// The slot ceiling of the node.
    #[must_use]
    pub fn slots_ceiling(&self) -> usize {
        self.node.slots.ceiling
    }

    /// Bytes every principal charged together, forced bytes aside.
    #[must_use]
    pub fn held_bytes(&self) -> usize {
        self.node.bytes.held.load(Ordering::Relaxed)
    }

    /// Bytes every principal holds forced ([`Account::force`], [`Account::keep`]): kept
    /// whatever the budget holds, so not towards the ceiling, but held all the same.
    #[must_use]
    pub fn kept_bytes(&self) -> usize {
        self.node.kept.load(Ordering::Relaxed)
    }

    /// Slots every principal holds together.
    #[must_use]
    pub fn held_slots(&self) -> usize {
        self.node.slots.held.load(Ordering::Relaxed)
    }

    /// What the budget refused so far.
    #[must_use]
    pub fn refusals(&self) -> Refusals {
        Refusals {
            share: self.node.refused_share.load(Ordering::Relaxed),
            ceiling: self.node.refused_ceiling.load(Ordering::Relaxed),
        }
    }

    /// Counts a refusal a holder decided itself (after [`Account::room`]); returns it.
    pub fn refuse(&self, spent: Spent) -> Spent {
        self.node.refused(spent)
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
            bytes: AtomicUsize::new(0),
            forced: AtomicUsize::new(0),
            slots: AtomicUsize::new(0),
        });
        accounts.insert(principal.clone(), Arc::downgrade(&ledger));
        Account { ledger }
    }

    /// One slot of `principal`'s ([`Account::take_slot`]).
    ///
    /// # Errors
    ///
    /// The limit that is spent.
    pub fn take(&self, principal: &Principal) -> Result<Slot, Spent> {
        self.account(principal).take_slot()
    }
}

impl Node {
    fn refused(&self, spent: Spent) -> Spent {
        let counter = match spent {
            Spent::Share(_) => &self.refused_share,
            Spent::Ceiling(_) => &self.refused_ceiling,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        spent
    }
}

impl Account {
    /// The budget this account is part of.
    #[must_use]
    pub fn budget(&self) -> Budget {
        Budget {
            node: Arc::clone(&self.ledger.node),
        }
    }

    /// Charges `bytes` when the account holds less than its share and the node less than its
    /// ceiling (checked before, counted in full).
    ///
    /// # Errors
    ///
    /// The limit that is spent; nothing is charged then.
    pub fn charge(&self, bytes: usize) -> Result<(), Spent> {
        if let Some(spent) = self.spent() {
            return Err(self.ledger.node.refused(spent));
        }
        self.add(bytes);
        Ok(())
    }

    /// The limit a [`charge`](Self::charge) would meet now, if any, without counting a refusal:
    /// for a holder that waits for room and asks again when woken.
    #[must_use]
    pub fn spent(&self) -> Option<Spent> {
        let node = &self.ledger.node;
        if self.held_bytes() >= node.bytes.share {
            return Some(Spent::Share(node.bytes.share));
        }
        if node.bytes.held.load(Ordering::Relaxed) >= node.bytes.ceiling {
            return Some(Spent::Ceiling(node.bytes.ceiling));
        }
        None
    }

    /// Whether `bytes` more (and `slots` more) fit within the share and the ceiling once
    /// added: for a holder that makes room itself before it [`add`](Self::add)s. Not a
    /// refusal: a holder that gives up after asking reports it with [`Budget::refuse`].
    ///
    /// # Errors
    ///
    /// The limit that would be passed.
    pub fn room(&self, bytes: usize, slots: usize) -> Result<(), Spent> {
        let node = &self.ledger.node;
        let fits = |held: usize, more: usize, max: usize| held.saturating_add(more) <= max;
        let (held_bytes, held_slots) = (self.held_bytes(), self.held_slots());
        if !fits(held_bytes, bytes, node.bytes.share) {
            return Err(Spent::Share(node.bytes.share));
        }
        if !fits(held_slots, slots, node.slots.share) {
            return Err(Spent::Share(node.slots.share));
        }
        if !fits(
            node.bytes.held.load(Ordering::Relaxed),
            bytes,
            node.bytes.ceiling,
        ) {
            return Err(Spent::Ceiling(node.bytes.ceiling));
        }
        if !fits(
            node.slots.held.load(Ordering::Relaxed),
            slots,
            node.slots.ceiling,
        ) {
            return Err(Spent::Ceiling(node.slots.ceiling));
        }
        Ok(())
    }

    /// Counts `bytes` on the account and the node whatever they hold: for a holder that made
    /// room itself ([`room`](Self::room)).
    pub fn add(&self, bytes: usize) {
        self.ledger.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.ledger
            .node
            .bytes
            .held
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// [`charge`](Self::charge)s `bytes` and gives them back when the returned [`Charge`]
    /// drops: for what is held while it waits somewhere (a message in a queue).
    ///
    /// # Errors
    ///
    /// The limit that is spent; nothing is charged then.
    pub fn hold(&self, bytes: usize) -> Result<Charge, Spent> {
        self.charge(bytes)?;
        Ok(Charge {
            account: self.clone(),
            bytes,
            forced: false,
        })
    }

    /// Counts `bytes` on the account whatever it holds, and not towards the node's ceiling: for
    /// what must be kept (a call's response, which ends it). The principal's later charges
    /// see them.
    pub fn force(&self, bytes: usize) {
        self.ledger.forced.fetch_add(bytes, Ordering::Relaxed);
        self.ledger.node.kept.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Charges `bytes` only when they fit whole within the share and the ceiling
    /// ([`room`](Self::room)), and gives them back when the returned [`Charge`] drops: for what
    /// is kept for long, where going over by one charge would spend the share for good. Like
    /// charges, reserves made at the same moment are checked against the same holdings, so
    /// together they may pass the limit by one reserve each.
    ///
    /// # Errors
    ///
    /// The limit that would be passed (counted as a refusal); nothing is charged then.
    pub fn reserve(&self, bytes: usize) -> Result<Charge, Spent> {
        self.room(bytes, 0)
            .map_err(|spent| self.ledger.node.refused(spent))?;
        self.add(bytes);
        Ok(Charge {
            account: self.clone(),
            bytes,
            forced: false,
        })
    }

    /// [`force`](Self::force)s `bytes` and gives them back when the returned [`Charge`] drops:
    /// for what waits somewhere but must go whatever the budget holds (the one message a
    /// stalled queue always lets through, so that its reader makes progress).
    #[must_use]
    pub fn keep(&self, bytes: usize) -> Charge {
        self.force(bytes);
        Charge {
            account: self.clone(),
            bytes,
            forced: true,
        }
    }

    /// Gives back `bytes` charged or added before.
    pub fn release(&self, bytes: usize) {
        let given = sub(&self.ledger.bytes, bytes);
        sub(&self.ledger.node.bytes.held, given);
    }

    /// Gives back `bytes` forced before ([`force`](Self::force)).
    pub fn release_forced(&self, bytes: usize) {
        let given = sub(&self.ledger.forced, bytes);
        sub(&self.ledger.node.kept, given);
    }

    /// Bytes this account holds, charged and forced.
    #[must_use]
    pub fn held_bytes(&self) -> usize {
        self.ledger
            .bytes
            .load(Ordering::Relaxed)
            .saturating_add(self.ledger.forced.load(Ordering::Relaxed))
    }

    /// Slots this account holds.
    #[must_use]
    pub fn held_slots(&self) -> usize {
        self.ledger.slots.load(Ordering::Relaxed)
    }

    /// One more slot, when the account holds fewer than its share and the node fewer than its
    /// ceiling (exact, see the module docs).
    ///
    /// # Errors
    ///
    /// The limit that is spent.
    pub fn take_slot(&self) -> Result<Slot, Spent> {
        let node = &self.ledger.node;
        let below = |max: usize| move |held: usize| (held < max).then_some(held + 1);
        if self
            .ledger
            .slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, below(node.slots.share))
            .is_err()
        {
            return Err(node.refused(Spent::Share(node.slots.share)));
        }
        if node
            .slots
            .held
            .fetch_update(
                Ordering::AcqRel,
                Ordering::Acquire,
                below(node.slots.ceiling),
            )
            .is_err()
        {
            sub(&self.ledger.slots, 1);
            return Err(node.refused(Spent::Ceiling(node.slots.ceiling)));
        }
        Ok(Slot {
            account: self.clone(),
        })
    }

    /// One more slot whatever the account holds (for a holder that made room itself,
    /// [`room`](Self::room)).
    #[must_use]
    pub fn add_slot(&self) -> Slot {
        self.ledger.slots.fetch_add(1, Ordering::AcqRel);
        self.ledger.node.slots.held.fetch_add(1, Ordering::AcqRel);
        Slot {
            account: self.clone(),
        }
    }
}

/// Bytes charged on an [`Account`] ([`Account::hold`], [`Account::keep`]), given back when it
/// drops.
#[derive(Debug)]
pub struct Charge {
    account: Account,
    bytes: usize,
    forced: bool,
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.forced {
            self.account.release_forced(self.bytes);
        } else {
            self.account.release(self.bytes);
        }
    }
}

/// One slot of an [`Account`], held as long as the thing it counts lives.
#[derive(Debug)]
pub struct Slot {
    account: Account,
}

impl Slot {
    /// The account the slot is of.
    #[must_use]
    pub fn account(&self) -> &Account {
        &self.account
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let given = sub(&self.account.ledger.slots, 1);
        sub(&self.account.ledger.node.slots.held, given);
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        sub(&self.node.bytes.held, *self.bytes.get_mut());
        sub(&self.node.kept, *self.forced.get_mut());
        sub(&self.node.slots.held, *self.slots.get_mut());
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

/// The lock `principal`'s account is under.
fn shard_of(principal: &Principal) -> usize {
    use std::hash::BuildHasher;
    // A fixed-key hasher: the shard only spreads the lock, it guards nothing.
    let hash =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one(principal);
    usize::try_from(hash % SHARDS as u64).unwrap_or(0)
}

/// Subtracts up to `n` without wrapping; returns what was subtracted.
fn sub(counter: &AtomicUsize, n: usize) -> usize {
    let mut taken = 0;
    let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
        taken = n.min(held);
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

    fn bytes(share: usize, ceiling: usize) -> Budget {
        Budget::new("test").with_bytes(share, ceiling)
    }

    #[test]
    fn the_ceiling_refuses_everyone_and_frees_with_releases() {
        let budget = bytes(100, 150);
        let alice = budget.account(&Principal::new("i", "alice"));
        let bob = budget.account(&Principal::new("i", "bob"));
        alice.charge(90).expect("alice within both");
        bob.charge(70).expect("the node held less than its ceiling");
        assert_eq!(bob.charge(1), Err(Spent::Ceiling(150)));
        assert_eq!(alice.charge(1), Err(Spent::Ceiling(150)));
        alice.release(90);
        bob.charge(1).expect("room again");
        assert_eq!(budget.held_bytes(), 71);
        assert_eq!(
            budget.refusals(),
            Refusals {
                share: 0,
                ceiling: 2
            }
        );
    }

    #[test]
    fn holders_of_one_principal_share_one_account_until_the_last_goes() {
        let budget = bytes(100, 1_000).with_slots(2, 10);
        let alice = Principal::new("i", "alice");
        let first = budget.account(&alice);
        let second = budget.account(&alice);
        first.charge(100).expect("within the share");
        assert_eq!(second.charge(1), Err(Spent::Share(100)), "one account");
        let slot = budget.take(&alice).expect("a slot");
        drop(first);
        assert_eq!(second.held_bytes(), 100, "a handle going keeps the account");
        drop(second);
        assert_eq!(budget.held_bytes(), 100, "the slot keeps the account");
        drop(slot);
        assert_eq!(
            (budget.held_bytes(), budget.held_slots()),
            (0, 0),
            "the last handle gives everything back"
        );
        let fresh = budget.account(&alice);
        assert_eq!(fresh.held_bytes(), 0);
        fresh.charge(1).expect("a fresh account");
        assert_eq!(lock(&budget.node.accounts[shard_of(&alice)]).len(), 1);
    }

    #[test]
    fn releasing_more_than_held_never_wraps() {
        let budget = bytes(100, 1_000);
        let alice = budget.account(&Principal::new("i", "alice"));
        alice.charge(10).expect("room");
        alice.release(50);
        alice.force(5);
        alice.release_forced(50);
        assert_eq!((alice.held_bytes(), budget.held_bytes()), (0, 0));
    }

    #[test]
    fn forced_bytes_spend_their_principals_share_but_not_the_ceiling() {
        let budget = bytes(100, 150);
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
        assert_eq!(budget.held_bytes(), 100);
        assert_eq!(budget.kept_bytes(), 1_000, "shown apart");
        alice.release_forced(1_000);
        assert_eq!(budget.kept_bytes(), 0);
        alice.charge(40).expect("given back");
    }

    #[test]
    fn slots_cap_each_principal_alone_and_the_node_exactly() {
        let budget = Budget::new("test").with_slots(2, 3);
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        let a1 = budget.take(&alice).expect("first");
        let _a2 = budget.take(&alice).expect("second");
        assert_eq!(budget.take(&alice).err(), Some(Spent::Share(2)));
        let _b1 = budget.take(&bob).expect("bob is not affected");
        assert_eq!(budget.take(&bob).err(), Some(Spent::Ceiling(3)));
        assert_eq!(
            budget.account(&bob).held_slots(),
            1,
            "a refusal holds nothing"
        );
        assert_eq!(budget.held_slots(), 3);
        drop(a1);
        assert!(budget.take(&bob).is_ok(), "a dropped slot is free again");
        assert_eq!(
            Budget::new("none").with_slots(0, 1).take(&alice).err(),
            Some(Spent::Share(0))
        );
    }

    #[test]
    fn concurrent_takers_never_pass_the_share() {
        let budget = Budget::new("test").with_slots(8, usize::MAX);
        let alice = Principal::new("i", "alice");
        let taken: Vec<Slot> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..100)
                            .filter_map(|_| budget.take(&alice).ok())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        assert_eq!(taken.len(), 8);
        assert_eq!(budget.held_slots(), 8);
    }

    #[test]
    fn a_held_charge_is_given_back_when_it_drops() {
        let budget = bytes(100, 1_000);
        let alice = budget.account(&Principal::new("i", "alice"));
        let held = alice.hold(100).expect("within the share");
        assert_eq!(alice.hold(1).err(), Some(Spent::Share(100)));
        drop(held);
        assert_eq!(budget.held_bytes(), 0);
        drop(alice.hold(50).expect("given back"));
    }

    #[test]
    fn a_reserved_charge_fits_whole_or_is_refused() {
        let budget = bytes(100, 150);
        let alice = budget.account(&Principal::new("i", "alice"));
        let held = alice.hold(60).expect("within the share");
        assert_eq!(
            alice.reserve(50).err(),
            Some(Spent::Share(100)),
            "60 + 50 > 100"
        );
        let reserved = alice.reserve(40).expect("60 + 40 fits");
        assert_eq!(budget.held_bytes(), 100);
        assert_eq!(budget.refusals().share, 1);
        drop((held, reserved));
        assert_eq!(budget.held_bytes(), 0);
    }

    #[test]
    fn a_kept_charge_counts_on_the_principal_only_until_it_drops() {
        let budget = bytes(100, 150);
        let alice = budget.account(&Principal::new("i", "alice"));
        let kept = alice.keep(500);
        assert_eq!(alice.hold(1).err(), Some(Spent::Share(100)));
        assert_eq!(budget.held_bytes(), 0, "not towards the ceiling");
        drop(kept);
        assert_eq!(alice.held_bytes(), 0);
        drop(alice.hold(100).expect("given back"));
    }

    #[test]
    fn room_is_asked_before_adding_and_counts_no_refusal() {
        let budget = bytes(100, 150).with_slots(2, 3);
        let alice = budget.account(&Principal::new("i", "alice"));
        assert_eq!(alice.room(101, 0), Err(Spent::Share(100)));
        assert_eq!(alice.room(0, 3), Err(Spent::Share(2)));
        alice.room(100, 2).expect("exactly the share fits");
        alice.add(100);
        let _held = [alice.add_slot(), alice.add_slot()];
        let bob = budget.account(&Principal::new("i", "bob"));
        assert_eq!(bob.room(51, 0), Err(Spent::Ceiling(150)));
        assert_eq!(bob.room(0, 2), Err(Spent::Ceiling(3)));
        assert_eq!(budget.refusals(), Refusals::default());
        budget.refuse(Spent::Ceiling(150));
        assert_eq!(budget.refusals().ceiling, 1);
    }
}
