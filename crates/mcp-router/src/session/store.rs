//! The [`SessionStore`] trait: where downstream legacy sessions live.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::record::SessionRecord;

/// A boxed store future.
pub type StoreFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, SessionStoreError>> + Send + 'a>>;

/// A store failure (never "not found": that is `Ok(None)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionStoreError {
    /// The store cannot be reached (an outage or a failover: the engine answers 503 with
    /// `Retry-After`). It carries no cause: a store that returns it logs the cause at warn, as
    /// the Redis store does, and the engine logs the failed operation only at debug.
    #[error("session store unavailable")]
    Unavailable,
    /// The store refused the record (e.g. a per-principal or total session limit).
    #[error("session limit reached: {0}")]
    Limit(&'static str),
    /// Anything else.
    #[error("session store error: {0}")]
    Other(String),
}

impl SessionStoreError {
    /// What a client may be told: the kind of failure, never the store's own error text (which
    /// can name addresses, users or commands; it goes to the log).
    pub fn client_message(&self) -> String {
        match self {
            Self::Unavailable => "session store unavailable".to_owned(),
            // A limit name is the gateway's own static text.
            Self::Limit(limit) => format!("session limit reached: {limit}"),
            Self::Other(_) => "session store error".to_owned(),
        }
    }
}

/// Where downstream sessions live. Implementations: [`LocalSessionStore`](super::LocalSessionStore)
/// (in-process); Redis and sealed stores plug in here without touching the engine.
///
/// The store mints session ids (a sealed store encodes the record into the id itself), so ids are
/// opaque to the engine; they must be visible ASCII (0x21–0x7E) and unguessable.
pub trait SessionStore: Send + Sync + 'static {
    /// Stores a new session and returns its id.
    fn create(&self, record: SessionRecord) -> StoreFuture<'_, String>;
    /// The session with `id`, refreshing its idle timer.
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Arc<SessionRecord>>>;
    /// Replaces the record of an existing session (e.g. a backend re-initialised). Returns `false`
    /// when the session no longer exists.
    fn update<'a>(&'a self, id: &'a str, record: SessionRecord) -> StoreFuture<'a, bool>;
    /// Whether [`update`](Self::update) keeps changes (default `true`). A store that cannot (the
    /// sealed store: the id *is* the record) makes the engine fall back where it relies on them:
    /// a backend's `notifications/resources/updated` then reaches every GET stream of the
    /// caller's sessions sharing that backend session, not only the subscribing session's.
    fn keeps_updates(&self) -> bool {
        true
    }
    /// Ends a session; returns the record it had.
    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Arc<SessionRecord>>>;
    /// Whether the session with `id` still exists, *without* refreshing its idle timer: the
    /// engine asks this periodically about the sessions it holds streams and buffers for, to
    /// release those of sessions that expired. The default asks [`get`](Self::get) (which
    /// refreshes the timer where the store has one): a store with idle expiry overrides it.
    fn exists<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { Ok(self.get(id).await?.is_some()) })
    }
    /// What the other gateway nodes must be told after [`remove`](Self::remove) ended `id`, so
    /// that it stops working there too; the engine publishes it on the node bus when there is
    /// one. `None` (the default) for a store whose sessions live in one place every node asks
    /// (local, Redis); the sealed store's ids live with the client, so every node keeps its own
    /// set of revoked ids.
    fn revocation(&self, _id: &str) -> Option<Revocation> {
        None
    }
    /// Applies a [`revocation`](Self::revocation) another node published (default: nothing).
    fn revoke(&self, _revocation: &Revocation) {}
    /// The budget this node's memory holds the store's sessions in, for metrics; `None` (the
    /// default) for a store that keeps nothing per session in this process.
    fn budget(&self) -> Option<mcp_core::Budget> {
        None
    }
}

/// A session one node ended that the others must refuse too (see
/// [`SessionStore::revocation`]): what the sealed store needs to recognise the id (its nonce,
/// principal and expiry), never the record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// The revoked id's nonce, base64url.
    #[serde(rename = "n")]
    pub(crate) nonce: String,
    /// When the id expires anyway (Unix seconds): the revocation is kept until then.
    #[serde(rename = "x")]
    pub(crate) expires: u64,
    /// The issuer of the session's principal (revocations are bounded per principal).
    #[serde(rename = "i")]
    pub(crate) issuer: String,
    /// The subject of the session's principal.
    #[serde(rename = "s")]
    pub(crate) subject: String,
}
