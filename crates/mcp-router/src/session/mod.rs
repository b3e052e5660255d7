//! Downstream legacy sessions: the [`SessionRecord`] and where it is kept ([`SessionStore`]).

mod local;
mod record;
mod store;

pub use local::{LocalSessionLimits, LocalSessionStore};
pub use record::{BackendEra, BackendSession, SessionRecord};
pub use store::{SessionStore, SessionStoreError, StoreFuture};
