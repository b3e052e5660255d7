//! [`RevokedIds`]: the sealed store's memory of ended sessions, bounded in all and per principal.
//!
//! A sealed id cannot be invalidated (it *is* the record), so a node remembers the nonce of every
//! id it saw ended (its own DELETEs and those other nodes published) until the id would have
//! expired anyway. Both bounds refuse rather than evict: forgetting a revocation would bring a
//! session back to life, so a principal over its share gets an error for its DELETE (its session
//! keeps working until it expires) and can never push out another principal's revocations.

use std::collections::{BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::Mutex;

use aws_lc_rs::aead::NONCE_LEN;

/// A sealed id's nonce: unique per id (random, 96 bits).
pub(super) type IdNonce = [u8; NONCE_LEN];

/// Why a revocation was not recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Full {
    /// The principal's share is used up.
    Principal,
    /// The whole set is.
    Total,
}

/// Revoked sealed ids, until they expire.
pub(super) struct RevokedIds {
    state: Mutex<State>,
    /// Keyed hash of (issuer, subject): entries keep 8 bytes instead of the principal's strings,
    /// and nobody outside the process can aim for another principal's hash.
    hasher: std::hash::RandomState,
    max_total: usize,
    max_per_principal: usize,
}

#[derive(Default)]
struct State {
    /// nonce -> (principal hash, expiry).
    ids: HashMap<IdNonce, (u64, u64)>,
    /// (expiry, nonce), soonest first: what pruning walks.
    by_expiry: BTreeSet<(u64, IdNonce)>,
    /// How many entries each principal (hash) has.
    per_principal: HashMap<u64, usize>,
}

impl State {
    /// Forgets the revocations of ids that have expired by `now` (they no longer open anyway).
    fn prune(&mut self, now: u64) {
        while let Some(&(expires, nonce)) = self.by_expiry.first() {
            if expires > now {
                break;
            }
            self.by_expiry.pop_first();
            if let Some((principal, _)) = self.ids.remove(&nonce)
                && let Some(count) = self.per_principal.get_mut(&principal)
            {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.per_principal.remove(&principal);
                }
            }
        }
    }
}

impl RevokedIds {
    /// A set of at most `max_total` revocations, `max_per_principal` of one principal.
    pub(super) fn new(max_total: usize, max_per_principal: usize) -> Self {
        Self {
            state: Mutex::new(State::default()),
            hasher: std::hash::RandomState::new(),
            max_total,
            max_per_principal,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers that the id with `nonce` of (`issuer`, `subject`), expiring at `expires`, is
    /// ended. Recording one twice, or one already expired, is a no-op.
    pub(super) fn insert(
        &self,
        nonce: IdNonce,
        issuer: &str,
        subject: &str,
        expires: u64,
        now: u64,
    ) -> Result<(), Full> {
        let principal = self.hasher.hash_one((issuer, subject));
        let mut state = self.lock();
        state.prune(now);
        if expires <= now || state.ids.contains_key(&nonce) {
            return Ok(());
        }
        if state.ids.len() >= self.max_total {
            return Err(Full::Total);
        }
        let count = state.per_principal.entry(principal).or_default();
        if *count >= self.max_per_principal {
            return Err(Full::Principal);
        }
        *count += 1;
        state.ids.insert(nonce, (principal, expires));
        state.by_expiry.insert((expires, nonce));
        Ok(())
    }

    /// Whether the id with `nonce` was ended.
    pub(super) fn contains(&self, nonce: &IdNonce) -> bool {
        self.lock().ids.contains_key(nonce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nonce(n: u8) -> IdNonce {
        [n; NONCE_LEN]
    }

    #[test]
    fn remembers_until_expiry_and_bounds_each_principal() {
        let set = RevokedIds::new(4, 2);
        assert_eq!(set.insert(nonce(1), "iss", "alice", 100, 10), Ok(()));
        assert_eq!(
            set.insert(nonce(1), "iss", "alice", 100, 10),
            Ok(()),
            "once"
        );
        assert_eq!(set.insert(nonce(2), "iss", "alice", 50, 10), Ok(()));
        assert_eq!(
            set.insert(nonce(3), "iss", "alice", 100, 10),
            Err(Full::Principal),
            "alice's share is used up"
        );
        // Alice's full share takes nothing from bob.
        assert_eq!(set.insert(nonce(4), "iss", "bob", 100, 10), Ok(()));
        assert_eq!(set.insert(nonce(5), "iss", "bob", 100, 10), Ok(()));
        assert_eq!(
            set.insert(nonce(6), "other-iss", "carol", 100, 10),
            Err(Full::Total)
        );
        assert!(set.contains(&nonce(1)) && set.contains(&nonce(2)) && set.contains(&nonce(4)));
        assert!(!set.contains(&nonce(3)));
        // Once alice's id 2 has expired, its room is hers again.
        assert_eq!(set.insert(nonce(3), "iss", "alice", 100, 50), Ok(()));
        assert!(
            !set.contains(&nonce(2)),
            "expired revocations are forgotten"
        );
        assert!(set.contains(&nonce(1)) && set.contains(&nonce(3)));
        // Already expired: nothing to remember.
        assert_eq!(set.insert(nonce(7), "iss", "dave", 40, 50), Ok(()));
        assert!(!set.contains(&nonce(7)));
    }
}
