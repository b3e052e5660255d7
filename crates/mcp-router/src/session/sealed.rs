//! [`SealedSessionStore`]: stateless sessions; the session id *is* the sealed record.
//!
//! Why this file is long: the id format, the key ring and the store are one unit (each relies on
//! the others' invariants), and a third of the file is their tests (tampering, rotation, limits).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};

use super::record::{BackendEra, BackendSession, SessionRecord};
use super::revoked::{Full, IdNonce, RevokedIds};
use super::store::{Revocation, SessionStore, SessionStoreError, StoreFuture};
use crate::clock::WallClock;

/// Length of a key, in bytes (AES-256).
pub const SEALED_KEY_LEN: usize = 32;
/// Longest key id, in bytes.
pub const MAX_KEY_ID_LEN: usize = 16;
/// Ids longer than this are not even looked at.
const MAX_ID_LEN: usize = 16 * 1024;
/// GCM tag length.
const TAG_LEN: usize = 16;
/// Domain separation for the additional authenticated data.
const AAD_PREFIX: &[u8] = b"mcpgw-sealed-session/v1|";

/// Why a key ring was refused. Never contains key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyRingError {
    /// No key at all.
    #[error("the session key ring is empty")]
    Empty,
    /// An entry is not `id:base64key`.
    #[error("session key entry {0} is not `id:base64key`")]
    Malformed(usize),
    /// A key id is empty, too long, or has characters outside visible ASCII minus `.,:`.
    #[error(
        "invalid session key id {0:?}: 1-{MAX_KEY_ID_LEN} visible ASCII characters, not `.`, `,` or `:`"
    )]
    InvalidKeyId(String),
    /// Two keys share an id.
    #[error("duplicate session key id {0:?}")]
    DuplicateKeyId(String),
    /// A key is not base64 of exactly 32 bytes.
    #[error("session key {0:?} is not base64 of exactly {SEALED_KEY_LEN} bytes")]
    InvalidKey(String),
}

struct RingKey {
    id: String,
    key: LessSafeKey,
}

/// AES-256-GCM keys of a [`SealedSessionStore`], newest first: the first seals, all open.
///
/// ```
/// use mcp_router::session::KeyRing;
///
/// let k1 = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="; // 32 zero bytes: do not use
/// let k2 = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
/// let ring = KeyRing::parse(&format!("2024b:{k2}, 2024a:{k1}")).unwrap();
/// assert_eq!(ring.key_ids().collect::<Vec<_>>(), ["2024b", "2024a"]);
/// assert!(KeyRing::parse("x:short").is_err());
/// ```
pub struct KeyRing {
    keys: Vec<RingKey>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Key ids only; never the keys.
        f.debug_struct("KeyRing")
            .field("key_ids", &self.key_ids().collect::<Vec<_>>())
            .finish()
    }
}

impl KeyRing {
    /// Parses `id:base64key[,id:base64key...]`, newest first. Whitespace around entries is
    /// ignored; keys may be standard or URL-safe base64, padded or not, and must decode to 32
    /// bytes. Key ids are 1–16 visible ASCII characters other than `.`, `,` and `:`.
    ///
    /// # Errors
    ///
    /// See [`KeyRingError`]; messages name the key id, never the key.
    pub fn parse(spec: &str) -> Result<Self, KeyRingError> {
        let mut keys = Vec::new();
        for (index, entry) in spec.split(',').enumerate() {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let (id, key) = entry
                .split_once(':')
                .ok_or(KeyRingError::Malformed(index))?;
            let id = id.trim();
            let bytes =
                decode_key(key.trim()).ok_or_else(|| KeyRingError::InvalidKey(id.to_owned()))?;
            keys.push((id.to_owned(), bytes));
        }
        Self::new(keys)
    }

    /// A ring of raw keys, newest first.
    ///
    /// # Errors
    ///
    /// An empty list, an invalid or duplicate key id.
    pub fn new(
        keys: impl IntoIterator<Item = (String, [u8; SEALED_KEY_LEN])>,
    ) -> Result<Self, KeyRingError> {
        let mut ring = Vec::new();
        for (id, bytes) in keys {
            if !valid_key_id(&id) {
                return Err(KeyRingError::InvalidKeyId(id));
            }
            if ring.iter().any(|k: &RingKey| k.id == id) {
                return Err(KeyRingError::DuplicateKeyId(id));
            }
            let unbound = UnboundKey::new(&AES_256_GCM, &bytes)
                .map_err(|_| KeyRingError::InvalidKey(id.clone()))?;
            ring.push(RingKey {
                id,
                key: LessSafeKey::new(unbound),
            });
        }
        if ring.is_empty() {
            return Err(KeyRingError::Empty);
        }
        Ok(Self { keys: ring })
    }

    /// The key ids, newest first.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.id.as_str())
    }

    fn newest(&self) -> &RingKey {
        // `new` refuses an empty ring.
        &self.keys[0]
    }

    fn find(&self, id: &str) -> Option<&RingKey> {
        self.keys.iter().find(|k| k.id == id)
    }
}

fn valid_key_id(id: &str) -> bool {
    (1..=MAX_KEY_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && !matches!(b, b'.' | b',' | b':'))
}

fn decode_key(text: &str) -> Option<[u8; SEALED_KEY_LEN]> {
    let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())?;
    bytes.try_into().ok()
}

/// The compact on-the-wire form of a record.
#[derive(Serialize, Deserialize)]
struct Compact {
    #[serde(rename = "x")]
    exp: u64,
    #[serde(rename = "i")]
    issuer: String,
    #[serde(rename = "s")]
    subject: String,
    #[serde(rename = "h")]
    vhost: String,
    #[serde(rename = "p")]
    protocol_version: String,
    #[serde(rename = "c", default, skip_serializing_if = "String::is_empty")]
    client_capabilities: String,
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    log_level: Option<String>,
    #[serde(rename = "b", default, skip_serializing_if = "Vec::is_empty")]
    backends: Vec<CompactBackend>,
    #[serde(rename = "u", default, skip_serializing_if = "Vec::is_empty")]
    subscriptions: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct CompactBackend {
    #[serde(rename = "n")]
    name: String,
    /// 0 = unavailable, 1 = modern, 2 = legacy.
    #[serde(rename = "e", default, skip_serializing_if = "is_zero")]
    era: u8,
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    upstream_session_id: Option<String>,
    #[serde(rename = "v", default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

impl Compact {
    fn from_record(record: SessionRecord, exp: u64) -> Self {
        Self {
            exp,
            issuer: record.issuer,
            subject: record.subject,
            vhost: record.vhost,
            protocol_version: record.protocol_version,
            client_capabilities: record.client_capabilities,
            log_level: record.log_level,
            backends: record
                .backends
                .into_iter()
                .map(|b| CompactBackend {
                    name: b.name,
                    era: match b.era {
                        None => 0,
                        Some(BackendEra::Modern) => 1,
                        Some(BackendEra::Legacy) => 2,
                    },
                    upstream_session_id: b.upstream_session_id,
                    version: b.version,
                    url: b.url,
                })
                .collect(),
            subscriptions: record.subscriptions,
        }
    }

    fn into_record(self) -> Option<SessionRecord> {
        let backends = self
            .backends
            .into_iter()
            .map(|b| {
                let era = match b.era {
                    0 => None,
                    1 => Some(BackendEra::Modern),
                    2 => Some(BackendEra::Legacy),
                    _ => return None,
                };
                Some(BackendSession {
                    name: b.name,
                    era,
                    upstream_session_id: b.upstream_session_id,
                    version: b.version,
                    url: b.url,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(SessionRecord {
            issuer: self.issuer,
            subject: self.subject,
            vhost: self.vhost,
            protocol_version: self.protocol_version,
            client_capabilities: self.client_capabilities,
            log_level: self.log_level,
            backends,
            subscriptions: self.subscriptions,
            // Not carried: every byte lengthens the id, a header; the start is the absolute
            // expiry less the lifetime, which `revoke_at` gives the record that ends.
            created_at_ms: None,
        })
    }
}

fn aad(key_id: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(AAD_PREFIX.len() + key_id.len());
    aad.extend_from_slice(AAD_PREFIX);
    aad.extend_from_slice(key_id.as_bytes());
    aad
}

/// Stateless sessions: the downstream `Mcp-Session-Id` is the [`SessionRecord`] sealed with
/// AES-256-GCM under a [`KeyRing`]. Any node with the ring serves any session; nothing is stored.
/// The format, key rotation and the limits (absolute expiry, revocation by a bounded set per
/// node, no updates) follow.
///
/// # Format
///
/// An id is `<key id>.<base64url(nonce || ciphertext || tag)>` (visible ASCII only): AES-256-GCM
/// (aws-lc-rs) under the key the key id names, with a random 96-bit nonce, over a compact JSON
/// serialisation of the [`SessionRecord`] (one-letter field names, empty fields omitted) plus an
/// absolute expiry `x` (Unix seconds). The additional authenticated data binds the format version
/// and the key id. A record with three legacy backends stays well under 1 KiB.
///
/// # Key rotation
///
/// A [`KeyRing`] lists keys newest first. New ids are sealed with the newest key; an id is opened
/// with whichever key its key id names. To rotate without downtime: put the new key *first* on
/// every node (ids sealed with the old key still open), wait at least the idle TTL, then remove the
/// old key. Removing a key makes every session sealed with it unknown (404, the client
/// re-initialises). Random nonces limit one key to about 2^32 seals; rotate long before that.
///
/// # Limits (by construction: there is no server-side state)
///
/// - **Expiry is absolute.** `exp` = creation time + idle TTL. [`get`](SessionStore::get) cannot
///   refresh it, because that would need a new id and the client keeps the one it was given; a
///   session therefore ends `idle_ttl` after `initialize` however busy it is, and the client
///   re-initialises.
/// - **Revocation is remembered, not stored.** [`remove`](SessionStore::remove) (DELETE) cannot
///   invalidate the id itself, so the node puts the id's nonce in a revocation set kept until the
///   id expires anyway (at most the idle TTL: expiry is absolute) and refuses it from then on;
///   with a node bus the engine publishes the [`Revocation`] and every node adds it to its own set
///   ([`SessionStore::revoke`]). The set is bounded
///   ([`with_revocation_limits`](SealedSessionStore::with_revocation_limits)) in all and per
///   principal, and refuses rather than evicts (a forgotten revocation would revive a session): a
///   DELETE over the principal's share fails with [`SessionStoreError::Limit`] and its session
///   lives until it expires. Without a bus, other nodes accept the ended id until it expires; a
///   node that was down or disconnected from the bus when the revocation was published, or that
///   starts later, does too (delivery is at most once).
/// - **No updates.** [`update`](SessionStore::update) returns `false`: the id cannot change under
///   the client, so a changed record (a revived backend, a new log level, subscriptions) is not
///   persisted; the engine keeps working with the record sealed in the id, and repeats the repair
///   on later requests if needed. In particular a session's own subscription list is not kept:
///   `notifications/resources/updated` reaches every GET stream of the caller's sessions that
///   share the backend session (all of them subscribed through one of those sessions), and a
///   `logging/setLevel` reaches legacy backends but is not stamped on later requests to modern
///   ones.
/// - The record is confidential and tamper-proof but its size is visible, and every request
///   carries it.
///
/// Principal and virtual host are inside the record; the engine checks
/// [`SessionRecord::belongs_to`] as for any store.
///
/// ```
/// use mcp_router::session::{KeyRing, SealedSessionStore, SessionRecord, SessionStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let ring = KeyRing::parse("k1:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=").unwrap();
/// let store = SealedSessionStore::new(ring);
/// let record = SessionRecord {
///     issuer: "iss".into(), subject: "alice".into(), vhost: "vh".into(),
///     protocol_version: "2025-11-25".into(), client_capabilities: "{}".into(),
///     log_level: None, backends: vec![], subscriptions: vec![], created_at_ms: None,
/// };
/// let id = store.create(record.clone()).await.unwrap();
/// assert!(id.starts_with("k1."));
/// assert_eq!(store.get(&id).await.unwrap().as_deref(), Some(&record));
/// assert!(store.get("k1.garbage").await.unwrap().is_none());
/// // DELETE: this store refuses the id from now on (and tells other nodes, given a node bus).
/// assert!(store.remove(&id).await.unwrap().is_some());
/// assert!(store.get(&id).await.unwrap().is_none());
/// # }
/// ```
///
/// [`with_revocation_limits`]: SealedSessionStore::with_revocation_limits
pub struct SealedSessionStore {
    /// Replaced by [`replace_ring`](Self::replace_ring) (a reload).
    ring: ArcSwap<KeyRing>,
    idle_ttl: Duration,
    rng: SystemRandom,
    revoked: RevokedIds,
    /// The time ids are stamped with and judged against.
    clock: WallClock,
}

/// An authentic, unexpired id, opened.
struct Opened {
    record: SessionRecord,
    nonce: IdNonce,
    expires: u64,
}

impl fmt::Debug for SealedSessionStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedSessionStore")
            .field("ring", &self.ring)
            .field("idle_ttl", &self.idle_ttl)
            .finish_non_exhaustive()
    }
}

impl SealedSessionStore {
    /// Default lifetime of a sealed session (30 minutes, like the local store's idle timeout).
    pub const DEFAULT_IDLE_TTL: Duration = Duration::from_secs(30 * 60);
    /// Default bound of the revocation set (like the local store's session limit).
    pub const DEFAULT_MAX_REVOKED: usize = 100_000;
    /// Default bound of one principal's share of the revocation set.
    pub const DEFAULT_MAX_REVOKED_PER_PRINCIPAL: usize = 1_000;

    /// A store sealing with the newest key of `ring`, sessions living
    /// [`DEFAULT_IDLE_TTL`](Self::DEFAULT_IDLE_TTL).
    pub fn new(ring: KeyRing) -> Self {
        Self {
            ring: ArcSwap::from_pointee(ring),
            idle_ttl: Self::DEFAULT_IDLE_TTL,
            rng: SystemRandom::new(),
            revoked: RevokedIds::new(
                Self::DEFAULT_MAX_REVOKED,
                Self::DEFAULT_MAX_REVOKED_PER_PRINCIPAL,
            ),
            clock: WallClock::system(),
        }
    }

    /// Seals new sessions with the newest key of `ring` and opens ids sealed with any of its
    /// keys from now on (a reload of the key ring): a key kept in the ring keeps its sessions,
    /// a key left out ends them (their ids are unknown from then on).
    pub fn replace_ring(&self, ring: KeyRing) {
        self.ring.store(Arc::new(ring));
    }

    /// Stamps and judges the ids' absolute expiry with `clock` (default: the system clock).
    #[must_use]
    pub fn with_clock(mut self, clock: WallClock) -> Self {
        self.clock = clock;
        self
    }

    /// Bounds the set of ended sessions this node remembers until they expire: at most
    /// `max_total` in all and `max_per_principal` of one principal (see [`SealedSessionStore`]: revocation).
    #[must_use]
    pub fn with_revocation_limits(mut self, max_total: usize, max_per_principal: usize) -> Self {
        self.revoked = RevokedIds::new(max_total, max_per_principal);
        self
    }

    /// Sets how long a session lives after it was created (rounded up to whole seconds, at least
    /// one). Not refreshed by use: see [`SealedSessionStore`] (absolute expiry).
    #[must_use]
    pub fn with_idle_ttl(mut self, ttl: Duration) -> Self {
        self.idle_ttl = ttl;
        self
    }

    /// The configured session lifetime.
    pub fn idle_ttl(&self) -> Duration {
        self.idle_ttl
    }

    fn ttl_secs(&self) -> u64 {
        let secs = self.idle_ttl.as_secs() + u64::from(self.idle_ttl.subsec_nanos() > 0);
        secs.max(1)
    }

    fn seal_at(&self, record: SessionRecord, now: u64) -> Result<String, SessionStoreError> {
        let compact = Compact::from_record(record, now.saturating_add(self.ttl_secs()));
        let plain = serde_json::to_vec(&compact)
            .map_err(|e| SessionStoreError::Other(format!("cannot encode session: {e}")))?;
        let ring = self.ring.load();
        let key = ring.newest();
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| SessionStoreError::Other("no system randomness".to_owned()))?;
        let mut buf = Vec::with_capacity(NONCE_LEN + plain.len() + TAG_LEN);
        buf.extend_from_slice(&nonce);
        buf.extend_from_slice(&plain);
        let mut sealed = buf.split_off(NONCE_LEN);
        key.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad(&key.id)),
                &mut sealed,
            )
            .map_err(|_| SessionStoreError::Other("cannot seal session".to_owned()))?;
        buf.extend_from_slice(&sealed);
        let mut id = String::with_capacity(key.id.len() + 1 + (buf.len() * 4).div_ceil(3));
        id.push_str(&key.id);
        id.push('.');
        URL_SAFE_NO_PAD.encode_string(&buf, &mut id);
        Ok(id)
    }

    /// The record sealed in `id` if it is authentic under a key of the ring, not expired at
    /// `now` and not revoked; `None` for anything else.
    fn open_at(&self, id: &str, now: u64) -> Option<SessionRecord> {
        let opened = self.unseal(id, now)?;
        (!self.revoked.contains(&opened.nonce)).then_some(opened.record)
    }

    /// Ends the session `id` on this node: `Ok(None)` if it is unknown or already ended.
    fn revoke_at(&self, id: &str, now: u64) -> Result<Option<SessionRecord>, SessionStoreError> {
        let Some(opened) = self.unseal(id, now) else {
            return Ok(None);
        };
        if self.revoked.contains(&opened.nonce) {
            return Ok(None);
        }
        let mut record = opened.record;
        // For `mcp.server.session.duration`: sealed at `expires - lifetime` (the lifetime of this
        // node's configuration: another node's may differ).
        record.created_at_ms = Some(
            opened
                .expires
                .saturating_sub(self.ttl_secs())
                .saturating_mul(1000),
        );
        self.revoked
            .insert(
                opened.nonce,
                &record.issuer,
                &record.subject,
                opened.expires,
                now,
            )
            .map_err(|full| {
                SessionStoreError::Limit(match full {
                    Full::Principal => "too many ended sessions of this principal not expired yet",
                    Full::Total => "too many ended sessions not expired yet",
                })
            })?;
        Ok(Some(record))
    }

    /// The record, nonce and expiry of `id` if it is authentic under a key of the ring and not
    /// expired at `now` (revoked or not).
    fn unseal(&self, id: &str, now: u64) -> Option<Opened> {
        if id.len() > MAX_ID_LEN {
            return None;
        }
        let (key_id, body) = id.split_once('.')?;
        let ring = self.ring.load();
        let key = ring.find(key_id)?;
        let mut buf = URL_SAFE_NO_PAD.decode(body).ok()?;
        if buf.len() < NONCE_LEN + TAG_LEN {
            return None;
        }
        let mut sealed = buf.split_off(NONCE_LEN);
        let id_nonce: IdNonce = buf.as_slice().try_into().ok()?;
        let nonce = Nonce::assume_unique_for_key(id_nonce);
        let plain = key
            .key
            .open_in_place(nonce, Aad::from(aad(&key.id)), &mut sealed)
            .ok()?;
        let compact: Compact = serde_json::from_slice(plain).ok()?;
        if now >= compact.exp {
            return None;
        }
        let expires = compact.exp;
        Some(Opened {
            record: compact.into_record()?,
            nonce: id_nonce,
            expires,
        })
    }
}

impl SessionStore for SealedSessionStore {
    fn create(&self, record: SessionRecord) -> StoreFuture<'_, String> {
        let result = self.seal_at(record, self.clock.unix_secs());
        Box::pin(async move { result })
    }

    /// Opens the id; does not (cannot) refresh the expiry.
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Arc<SessionRecord>>> {
        let result = self.open_at(id, self.clock.unix_secs()).map(Arc::new);
        Box::pin(async move { Ok(result) })
    }

    /// Always `false`: the id cannot change, so the new record is not kept (see the module docs).
    fn update<'a>(&'a self, _id: &'a str, _record: SessionRecord) -> StoreFuture<'a, bool> {
        Box::pin(async move { Ok(false) })
    }

    fn keeps_updates(&self) -> bool {
        false
    }

    /// Returns the record and revokes the id on this node (see the module docs).
    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Arc<SessionRecord>>> {
        let result = self
            .revoke_at(id, self.clock.unix_secs())
            .map(|r| r.map(Arc::new));
        Box::pin(async move { result })
    }

    /// The id's nonce, principal and expiry, for the other nodes (also once revoked here).
    fn revocation(&self, id: &str) -> Option<Revocation> {
        let opened = self.unseal(id, self.clock.unix_secs())?;
        Some(Revocation {
            nonce: URL_SAFE_NO_PAD.encode(opened.nonce),
            expires: opened.expires,
            issuer: opened.record.issuer,
            subject: opened.record.subject,
        })
    }

    fn revoke(&self, revocation: &Revocation) {
        let Some(nonce) = URL_SAFE_NO_PAD
            .decode(&revocation.nonce)
            .ok()
            .and_then(|n| IdNonce::try_from(n.as_slice()).ok())
        else {
            tracing::debug!("ignoring a malformed session revocation");
            return;
        };
        let recorded = self.revoked.insert(
            nonce,
            &revocation.issuer,
            &revocation.subject,
            revocation.expires,
            self.clock.unix_secs(),
        );
        if let Err(full) = recorded {
            tracing::warn!(
                ?full,
                "revocation set full: another node's ended session stays usable here until it expires"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_key() -> [u8; SEALED_KEY_LEN] {
        let mut key = [0u8; SEALED_KEY_LEN];
        SystemRandom::new().fill(&mut key).expect("randomness");
        key
    }

    fn ring(ids: &[(&str, [u8; SEALED_KEY_LEN])]) -> KeyRing {
        KeyRing::new(ids.iter().map(|(id, k)| ((*id).to_owned(), *k))).expect("ring")
    }

    fn record() -> SessionRecord {
        SessionRecord {
            issuer: "https://auth.example.com/realms/main".into(),
            subject: "4f1c2a9e-7d1b-4c3e-9a55-1d2f3e4a5b6c".into(),
            vhost: "engineering".into(),
            protocol_version: "2025-11-25".into(),
            client_capabilities: r#"{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}"#
                .into(),
            log_level: Some("debug".into()),
            backends: ["github", "jira-cloud", "filesystem"]
                .iter()
                .enumerate()
                .map(|(i, name)| BackendSession {
                    name: (*name).into(),
                    era: Some(BackendEra::Legacy),
                    upstream_session_id: Some(format!("9b2d1e7c-4a3f-4e8b-b1c2-d3e4f5a6b7c{i}")),
                    version: Some("2025-06-18".into()),
                    url: Some(format!("https://{name}.mcp.internal.example.com:8443/mcp")),
                })
                .collect(),
            subscriptions: vec!["file:///repo/README.md".into()],
            created_at_ms: None,
        }
    }

    fn visible_ascii(id: &str) -> bool {
        id.bytes().all(|b| (0x21..=0x7e).contains(&b))
    }

    #[tokio::test]
    async fn round_trip_through_the_trait() {
        let key = random_key();
        let store = SealedSessionStore::new(ring(&[("k1", key)]));
        let mut rec = record();
        rec.backends[1].era = None;
        rec.backends[1].upstream_session_id = None;
        rec.backends[2].era = Some(BackendEra::Modern);
        let id = store.create(rec.clone()).await.expect("create");
        assert!(visible_ascii(&id), "{id}");
        assert_eq!(store.get(&id).await.expect("get").as_deref(), Some(&rec));
        let other = store.create(rec.clone()).await.expect("create");
        assert_ne!(id, other, "fresh nonce per seal");
        // Documented limit: update cannot change the id.
        assert!(!store.update(&id, record()).await.expect("update"));
        // remove revokes it here; another node learns it from the revocation.
        let elsewhere = SealedSessionStore::new(ring(&[("k1", key)]));
        let removed = store.remove(&id).await.expect("remove").expect("a record");
        // The ended record carries its start (the expiry less the lifetime) for the session
        // duration metric; the id itself does not.
        let started = removed.created_at_ms.expect("a derived start");
        let now_ms = WallClock::system().unix_secs() * 1000;
        assert!(
            started <= now_ms && now_ms - started < 60_000,
            "{started} vs {now_ms}"
        );
        assert_eq!(
            SessionRecord {
                created_at_ms: None,
                ..(*removed).clone()
            },
            rec
        );
        assert_eq!(store.get(&id).await.expect("get"), None);
        assert_eq!(store.remove(&id).await.expect("remove"), None, "once");
        assert_eq!(store.get(&other).await.expect("get").as_deref(), Some(&rec));
        assert_eq!(
            elsewhere.get(&id).await.expect("get").as_deref(),
            Some(&rec),
            "not told yet"
        );
        let revocation = store.revocation(&id).expect("a revocation");
        assert!(!format!("{revocation:?}").contains(&id));
        elsewhere.revoke(&revocation);
        assert_eq!(elsewhere.get(&id).await.expect("get"), None);
        assert_eq!(
            elsewhere.get(&other).await.expect("get").as_deref(),
            Some(&rec)
        );
        // Minimal record: empty fields are omitted and come back empty.
        let minimal = SessionRecord {
            client_capabilities: String::new(),
            log_level: None,
            backends: vec![],
            subscriptions: vec![],
            created_at_ms: None,
            ..record()
        };
        let id = store.create(minimal.clone()).await.expect("create");
        assert_eq!(
            store.get(&id).await.expect("get").as_deref(),
            Some(&minimal)
        );
    }

    #[tokio::test]
    async fn a_principal_over_its_share_of_revocations_cannot_end_more_sessions() {
        let store =
            SealedSessionStore::new(ring(&[("k1", random_key())])).with_revocation_limits(3, 2);
        let mine: Vec<String> = {
            let mut ids = Vec::new();
            for _ in 0..3 {
                ids.push(store.create(record()).await.expect("create"));
            }
            ids
        };
        for id in &mine[..2] {
            assert!(store.remove(id).await.expect("remove").is_some());
        }
        assert_eq!(
            store.remove(&mine[2]).await,
            Err(SessionStoreError::Limit(
                "too many ended sessions of this principal not expired yet"
            ))
        );
        assert!(
            store.get(&mine[2]).await.expect("get").is_some(),
            "a refused DELETE leaves the session working"
        );
        let theirs = SessionRecord {
            subject: "someone-else".into(),
            ..record()
        };
        let id = store.create(theirs).await.expect("create");
        assert!(store.remove(&id).await.expect("remove").is_some());
        assert_eq!(store.get(&id).await.expect("get"), None);
        for id in &mine[..2] {
            assert_eq!(store.get(id).await.expect("get"), None, "still revoked");
        }
    }

    #[test]
    fn ids_stay_compact() {
        let store = SealedSessionStore::new(ring(&[("2025-01", random_key())]));
        let id = store
            .seal_at(record(), WallClock::system().unix_secs())
            .expect("seal");
        assert!(id.len() < 1024, "id of {} bytes: {id}", id.len());
        assert!(id.len() > 500, "sanity: {}", id.len());
    }

    #[test]
    fn a_replaced_ring_rotates_one_running_store() {
        let (old, new) = (random_key(), random_key());
        let now = WallClock::system().unix_secs();
        let store = SealedSessionStore::new(ring(&[("old", old)]));
        let old_id = store.seal_at(record(), now).expect("seal");
        store.replace_ring(ring(&[("new", new), ("old", old)]));
        assert_eq!(store.open_at(&old_id, now), Some(record()));
        let new_id = store.seal_at(record(), now).expect("seal");
        assert!(new_id.starts_with("new."), "sealed with the newest key");
        store.replace_ring(ring(&[("new", new)]));
        assert_eq!(store.open_at(&old_id, now), None, "its key left the ring");
        assert_eq!(store.open_at(&new_id, now), Some(record()));
    }

    #[test]
    fn rotation_keeps_old_sessions_until_the_old_key_leaves() {
        let (old, new) = (random_key(), random_key());
        let now = WallClock::system().unix_secs();
        let before = SealedSessionStore::new(ring(&[("old", old)]));
        let old_id = before.seal_at(record(), now).expect("seal");

        let rotated = SealedSessionStore::new(ring(&[("new", new), ("old", old)]));
        assert_eq!(rotated.open_at(&old_id, now), Some(record()));
        let new_id = rotated.seal_at(record(), now).expect("seal");
        assert!(new_id.starts_with("new."), "sealed with the newest key");
        assert_eq!(rotated.open_at(&new_id, now), Some(record()));

        let after = SealedSessionStore::new(ring(&[("new", new)]));
        assert_eq!(after.open_at(&old_id, now), None);
        assert_eq!(after.open_at(&new_id, now), Some(record()));

        // The same key id with a different key (another deployment) does not open it either.
        let foreign = SealedSessionStore::new(ring(&[("new", random_key())]));
        assert_eq!(foreign.open_at(&new_id, now), None);
    }

    #[test]
    fn expiry_is_absolute() {
        let store = SealedSessionStore::new(ring(&[("k", random_key())]))
            .with_idle_ttl(Duration::from_secs(60));
        let now = 1_700_000_000;
        let id = store.seal_at(record(), now).expect("seal");
        assert!(store.open_at(&id, now + 59).is_some());
        assert!(store.open_at(&id, now + 60).is_none());
        assert!(store.open_at(&id, now + 10_000).is_none());
    }

    #[test]
    fn tampered_truncated_and_garbage_ids_are_unknown() {
        let store = SealedSessionStore::new(ring(&[("k1", random_key()), ("k0", random_key())]));
        let now = WallClock::system().unix_secs();
        let id = store.seal_at(record(), now).expect("seal");
        let (kid, body) = id.split_once('.').expect("dot");
        let mut bad: Vec<String> = vec![
            String::new(),
            ".".into(),
            "k1".into(),
            "k1.".into(),
            format!("k0.{body}"),
            format!("zz.{body}"),
            format!("{kid}.{body}A"),
            format!("{kid}.{body}=="),
            format!("{kid}..{body}"),
            format!("{id} "),
            "k1.!!!!".into(),
            "k1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into(),
            "x".repeat(MAX_ID_LEN + 1),
        ];
        for cut in [1, 10, 20, 40, body.len() - 1] {
            bad.push(format!("{kid}.{}", &body[..cut]));
        }
        for pos in [0, body.len() / 2, body.len() - 1] {
            let mut chars: Vec<char> = body.chars().collect();
            chars[pos] = if chars[pos] == 'A' { 'B' } else { 'A' };
            bad.push(format!("{kid}.{}", chars.into_iter().collect::<String>()));
        }
        for candidate in &bad {
            assert_eq!(store.open_at(candidate, now), None, "{candidate:?} opened");
        }
        assert!(store.open_at(&id, now).is_some());
    }

    /// 2,000 random or mutated ids: none panics, none opens.
    #[test]
    fn fuzzed_ids_never_open() {
        let store = SealedSessionStore::new(ring(&[("k1", random_key()), ("k0", random_key())]));
        let now = WallClock::system().unix_secs();
        let valid = store.seal_at(record(), now).expect("seal");
        let rng = SystemRandom::new();
        let random = |n: usize| {
            let mut bytes = vec![0u8; n];
            rng.fill(&mut bytes).expect("randomness");
            bytes
        };
        const ALPHABET: &[u8] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/!~ ";
        for round in 0..2_000 {
            let seed = random(8);
            let candidate = match round % 4 {
                // Random visible-ish text, sometimes with a real key id in front.
                0 | 1 => {
                    let len = usize::from(seed[0]) * 4;
                    let text: String = random(len)
                        .iter()
                        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                        .collect();
                    if round % 4 == 0 {
                        format!("k1.{text}")
                    } else {
                        text
                    }
                }
                // A valid id with one to three characters replaced.
                2 => {
                    let mut bytes = valid.clone().into_bytes();
                    for i in 0..=usize::from(seed[0] % 3) {
                        let pos = usize::from(u16::from_le_bytes([seed[1 + i], seed[4 + i]]))
                            % bytes.len();
                        let replacement = ALPHABET[usize::from(seed[7]) % ALPHABET.len()];
                        bytes[pos] = if bytes[pos] == replacement {
                            bytes[pos] ^ 1
                        } else {
                            replacement
                        };
                    }
                    String::from_utf8(bytes).expect("ascii")
                }
                // A valid id truncated or extended.
                _ => {
                    let cut = usize::from(u16::from_le_bytes([seed[0], seed[1]])) % valid.len();
                    if seed[2] % 2 == 0 {
                        valid[..cut].to_owned()
                    } else {
                        let extra: String = random(1 + usize::from(seed[3] % 8))
                            .iter()
                            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                            .collect();
                        format!("{valid}{extra}")
                    }
                }
            };
            if candidate == valid {
                continue;
            }
            assert_eq!(store.open_at(&candidate, now), None, "{candidate:?} opened");
        }
    }

    #[test]
    fn key_ring_parsing() {
        let k = URL_SAFE_NO_PAD.encode(random_key());
        let s = STANDARD.encode(random_key());
        let ring = KeyRing::parse(&format!(" new:{k} , old:{s},")).expect("parse");
        assert_eq!(ring.key_ids().collect::<Vec<_>>(), ["new", "old"]);
        assert!(!format!("{ring:?}").contains(&k), "Debug shows no key");
        assert!(matches!(KeyRing::parse(" , "), Err(KeyRingError::Empty)));
        assert!(matches!(
            KeyRing::parse(&k),
            Err(KeyRingError::Malformed(0))
        ));
        assert!(matches!(
            KeyRing::parse(&format!("a:{k},a:{s}")),
            Err(KeyRingError::DuplicateKeyId(id)) if id == "a"
        ));
        for bad_id in ["", "a.b", "a b", "waytoolongkeyid17", "é"] {
            assert!(
                matches!(
                    KeyRing::parse(&format!("{bad_id}:{k}")),
                    Err(KeyRingError::InvalidKeyId(_))
                ),
                "{bad_id:?}"
            );
        }
        let short = STANDARD.encode([0u8; 16]);
        assert!(matches!(
            KeyRing::parse(&format!("a:{short}")),
            Err(KeyRingError::InvalidKey(id)) if id == "a"
        ));
        assert!(matches!(
            KeyRing::parse("a:not base64!"),
            Err(KeyRingError::InvalidKey(_))
        ));
    }
}
