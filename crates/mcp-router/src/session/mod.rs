//! Downstream legacy sessions: the [`SessionRecord`] and where it is kept ([`SessionStore`]).

mod local;
mod record;
#[cfg(feature = "redis")]
pub(crate) mod redis;
mod revoked;
mod sealed;
mod store;

pub use local::{LocalSessionLimits, LocalSessionStore};
pub use record::{BackendEra, BackendSession, SessionRecord};
#[cfg(feature = "redis")]
pub use redis::{
    DEFAULT_SESSION_KEY_PREFIX, RedisSessionStore, RedisSessionStoreConfig, RedisSessionStoreError,
};
pub use sealed::{KeyRing, KeyRingError, MAX_KEY_ID_LEN, SEALED_KEY_LEN, SealedSessionStore};
pub use store::{Revocation, SessionStore, SessionStoreError, StoreFuture};
