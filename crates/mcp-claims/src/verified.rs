//! [`VerifiedTokens`]: the claims of recently validated tokens, so that a client sending the same
//! bearer token on every request has its signature verified once, not per request (book: docs/src/performance.md:
//! signature verification dominates a gateway's CPU, RS256 most of all).
//!
//! - Bounded: a fixed number of entries, spread over shards that each have their own lock, so
//!   concurrent requests rarely meet on one (hits only take a shard's read lock).
//! - Keyed by a keyed hash of the token (SipHash with per-process random keys); the entry keeps the
//!   token and a hit compares it, so a hash collision is a miss, never another token's claims.
//! - Never used past the token's `exp` plus the leeway the full check allows: a cached token
//!   expires at the same second as an uncached one.
//! - A token verified with a JWKS key is only used while its issuer serves the same key set: a
//!   refreshed set (which may have dropped the key) sends the token through the full check again.
//!   Configured keys (HMAC secrets, PEM keys) live as long as the validator.
//! - Only successes are kept: a refused token is checked in full every time.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
#[cfg(feature = "jwks")]
use std::sync::{Arc, Weak};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use crate::claims::Claims;
#[cfg(feature = "jwks")]
use crate::jwks::JwksSource;
#[cfg(feature = "jwks")]
use crate::key::VerifyingKey;

/// Enough shards that the request tasks of a few cores rarely wait for one another.
const SHARDS: usize = 16;

/// Which keys verified a token.
pub(crate) enum VerifiedBy {
    /// A key configured on the issuer (lives as long as the validator).
    Configured,
    /// A key of this set, fetched by this source.
    #[cfg(feature = "jwks")]
    Jwks(Arc<JwksSource>, Arc<[VerifyingKey]>),
}

struct Entry {
    token: Box<str>,
    claims: Claims,
    /// The last second (Unix time) at which the full check still accepts the token.
    valid_until: u64,
    /// The source and the set a JWKS key came from; a `Weak` keeps the set's allocation (so its
    /// address cannot be reused by a newer set) without keeping the keys alive.
    #[cfg(feature = "jwks")]
    jwks: Option<(Arc<JwksSource>, Weak<[VerifyingKey]>)>,
}

impl Entry {
    /// Whether the entry still stands for `token` at `now`.
    fn answers(&self, token: &str, now: u64) -> bool {
        now <= self.valid_until && *self.token == *token && self.set_still_served()
    }

    /// Whether the keys that verified the token are still the ones served.
    #[cfg(feature = "jwks")]
    fn set_still_served(&self) -> bool {
        self.jwks.as_ref().is_none_or(|(source, set)| {
            source
                .snapshot()
                .keys
                .is_some_and(|current| std::ptr::addr_eq(set.as_ptr(), Arc::as_ptr(&current)))
        })
    }

    /// Configured keys live as long as the validator.
    #[cfg(not(feature = "jwks"))]
    fn set_still_served(&self) -> bool {
        true
    }
}

/// See the [module docs](self).
pub(crate) struct VerifiedTokens {
    shards: Box<[RwLock<HashMap<u64, Entry>>]>,
    per_shard: usize,
    hasher: RandomState,
}

impl VerifiedTokens {
    /// A cache of about `capacity` tokens; 0 turns it off.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            per_shard: capacity.div_ceil(SHARDS),
            hasher: RandomState::new(),
        }
    }

    /// The claims `token` was validated to, if that result still holds at `now` (Unix seconds).
    pub(crate) fn get(&self, token: &str, now: u64) -> Option<Claims> {
        if self.per_shard == 0 {
            return None;
        }
        let hash = self.hasher.hash_one(token);
        let shard = self.read(hash);
        shard
            .get(&hash)
            .filter(|entry| entry.answers(token, now))
            .map(|entry| entry.claims.clone())
    }

    /// Remembers that `token` validated to `claims`, usable until `valid_until` (Unix seconds).
    /// A full shard first drops its expired entries, then an arbitrary one (hash map order).
    pub(crate) fn insert(
        &self,
        token: &str,
        claims: &Claims,
        valid_until: u64,
        by: VerifiedBy,
        now: u64,
    ) {
        if self.per_shard == 0 || valid_until < now {
            return;
        }
        // Without fetched key sets, every token was verified by a configured key.
        #[cfg(not(feature = "jwks"))]
        let VerifiedBy::Configured = by;
        let hash = self.hasher.hash_one(token);
        let entry = Entry {
            token: token.into(),
            claims: claims.clone(),
            valid_until,
            #[cfg(feature = "jwks")]
            jwks: match by {
                VerifiedBy::Configured => None,
                VerifiedBy::Jwks(source, set) => Some((source, Arc::downgrade(&set))),
            },
        };
        let index = self.index(hash);
        let mut shard = self.shards[index]
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if shard.len() >= self.per_shard && !shard.contains_key(&hash) {
            shard.retain(|_, e| now <= e.valid_until);
            if shard.len() >= self.per_shard
                && let Some(victim) = shard.keys().next().copied()
            {
                shard.remove(&victim);
            }
        }
        shard.insert(hash, entry);
    }

    fn index(&self, hash: u64) -> usize {
        // The low bits pick the bucket inside a shard's map; the high bits pick the shard.
        usize::try_from(hash >> 32).unwrap_or(0) % self.shards.len()
    }

    fn read(&self, hash: u64) -> RwLockReadGuard<'_, HashMap<u64, Entry>> {
        self.shards[self.index(hash)]
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Entries held (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}
