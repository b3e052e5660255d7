//! [`Sealer`]: authenticated encryption of the opaque handles the gateway mints (list cursors,
//! `requestState` envelopes, task ids, relayed request ids), bound to the context they were
//! minted for.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, Prk, Salt};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::clock::WallClock;

/// Why a sealed handle was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// Not a handle this gateway minted, minted for another context (principal, virtual host,
    /// method…), or altered.
    #[error("invalid or foreign handle")]
    Invalid,
    /// Authentic but past its expiry.
    #[error("expired handle")]
    Expired,
}

/// HKDF salt of the per-purpose keys; also the format version of the handles.
const KDF_SALT: &[u8] = b"mcp-router/sealer/v2";
/// AES-GCM tag length.
const TAG_LEN: usize = 16;

/// AES-256-GCM sealing of small payloads.
///
/// A handle is `base64url(nonce || ciphertext || tag)`: the payload is encrypted under a key
/// derived (HKDF-SHA256) from the secret for its purpose label, with a random 96-bit nonce, and
/// the additional authenticated data covers the purpose and the binding strings (e.g. issuer,
/// subject, virtual host, method). So a handle reveals nothing but its length, and one minted for
/// one caller, one list or one purpose is refused for any other. Binding strings are not stored
/// in the handle, which keeps it short (28 bytes over the payload before base64).
///
/// Every gateway node that must accept another node's handles needs the same secret
/// ([`Sealer::new`]); [`Sealer::random`] is for a single process. Random nonces bound one
/// purpose's key to about 2^32 handles before nonce reuse becomes a concern: rotate the secret
/// long before (handles minted under the old one are then refused).
#[derive(Clone)]
pub struct Sealer {
    prk: Prk,
    rng: SystemRandom,
    /// The time expiring handles are stamped and judged with.
    clock: WallClock,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { key: <redacted> }")
    }
}

impl Sealer {
    /// A sealer with a fixed secret (at least 32 random bytes recommended).
    pub fn new(secret: &[u8]) -> Self {
        Self {
            prk: Salt::new(HKDF_SHA256, KDF_SALT).extract(secret),
            rng: SystemRandom::new(),
            clock: WallClock::system(),
        }
    }

    /// The same sealer stamping and judging expiring handles with `clock` (default: the system
    /// clock).
    #[must_use]
    pub fn with_clock(mut self, clock: WallClock) -> Self {
        self.clock = clock;
        self
    }

    /// Seconds since the Unix epoch on this sealer's clock, for handle expiry.
    pub(crate) fn unix_now(&self) -> u64 {
        self.clock.unix_secs()
    }

    /// A sealer with a fresh random key, valid for this process only.
    pub fn random() -> Self {
        let mut secret = [0u8; 32];
        if SystemRandom::new().fill(&mut secret).is_err() {
            // Only fails if the OS has no randomness at all; a per-process secret still beats
            // refusing to start (handles then fail to seal, see `seal`).
            secret[..16].copy_from_slice(&now_nanos().to_le_bytes());
        }
        Self::new(&secret)
    }

    /// Seals `payload` for `purpose` and `binding`. Without system randomness (a nonce) the
    /// handle is empty, which never opens.
    pub fn seal(&self, purpose: &str, binding: &[&str], payload: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        if self.rng.fill(&mut nonce).is_err() {
            tracing::error!("no system randomness: cannot seal a handle");
            return String::new();
        }
        let mut sealed = payload.to_vec();
        let aad = Aad::from(Self::aad(purpose, binding));
        let nonce_value = Nonce::assume_unique_for_key(nonce);
        if self
            .key(purpose)
            .seal_in_place_append_tag(nonce_value, aad, &mut sealed)
            .is_err()
        {
            tracing::error!("cannot seal a handle");
            return String::new();
        }
        let mut raw = Vec::with_capacity(NONCE_LEN + sealed.len());
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Opens a handle sealed with the same purpose and binding.
    ///
    /// # Errors
    ///
    /// [`SealError::Invalid`] for anything else: not base64url, too short, another secret,
    /// purpose or binding, or altered.
    pub fn open(
        &self,
        purpose: &str,
        binding: &[&str],
        handle: &str,
    ) -> Result<Vec<u8>, SealError> {
        let mut raw = URL_SAFE_NO_PAD
            .decode(handle)
            .map_err(|_| SealError::Invalid)?;
        if raw.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Invalid);
        }
        let mut sealed = raw.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&raw).map_err(|_| SealError::Invalid)?;
        let aad = Aad::from(Self::aad(purpose, binding));
        let len = self
            .key(purpose)
            .open_in_place(nonce, aad, &mut sealed)
            .map_err(|_| SealError::Invalid)?
            .len();
        sealed.truncate(len);
        Ok(sealed)
    }

    /// The key of one purpose: derived on use (a few hundred nanoseconds), so nothing grows with
    /// the purposes callers invent.
    fn key(&self, purpose: &str) -> LessSafeKey {
        let info = [KDF_SALT, b" key of ", purpose.as_bytes()];
        let key = self
            .prk
            .expand(&info, &AES_256_GCM)
            .map(UnboundKey::from)
            // 32 bytes are always within HKDF-SHA256's output limit (255 * 32).
            .expect("an AES-256 key is a valid HKDF output length");
        LessSafeKey::new(key)
    }

    /// Length-prefixed fields, so no two different (purpose, binding) pairs produce the same
    /// authenticated data.
    fn aad(purpose: &str, binding: &[&str]) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        let mut field = |bytes: &[u8]| {
            out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            out.extend_from_slice(bytes);
        };
        field(purpose.as_bytes());
        field(&(binding.len() as u64).to_be_bytes());
        for b in binding {
            field(b.as_bytes());
        }
        out
    }
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_binding() {
        let s = Sealer::new(b"0123456789abcdef0123456789abcdef");
        let h = s.seal("cursor", &["iss", "alice", "vh"], b"{\"a\":1}");
        assert_eq!(
            s.open("cursor", &["iss", "alice", "vh"], &h).as_deref(),
            Ok(&b"{\"a\":1}"[..])
        );
        assert_eq!(
            s.open("cursor", &["iss", "bob", "vh"], &h),
            Err(SealError::Invalid)
        );
        assert_eq!(
            s.open("state", &["iss", "alice", "vh"], &h),
            Err(SealError::Invalid)
        );
        assert_eq!(
            s.open("cursor", &["iss", "alicevh"], &h),
            Err(SealError::Invalid)
        );
        let other = Sealer::new(b"another key another key another k");
        assert_eq!(
            other.open("cursor", &["iss", "alice", "vh"], &h),
            Err(SealError::Invalid)
        );
        // Same secret, another process: opens (what several nodes rely on).
        let twin = Sealer::new(b"0123456789abcdef0123456789abcdef");
        assert!(twin.open("cursor", &["iss", "alice", "vh"], &h).is_ok());
    }

    #[test]
    fn handles_reveal_nothing_and_never_repeat() {
        let s = Sealer::random();
        let payload = br#"{"l":"http://backend.internal:8080/mcp","s":"upstream-session-7"}"#;
        let h = s.seal("pending", &["session"], payload);
        let raw = URL_SAFE_NO_PAD.decode(&h).expect("base64url");
        assert_eq!(raw.len(), NONCE_LEN + payload.len() + TAG_LEN, "compact");
        for secret in [&b"backend.internal"[..], b"upstream-session-7", b"http"] {
            assert!(
                !raw.windows(secret.len()).any(|w| w == secret),
                "plain text in the handle"
            );
        }
        assert_ne!(h, s.seal("pending", &["session"], payload), "fresh nonce");
    }

    #[test]
    fn tampering_is_detected() {
        let s = Sealer::random();
        let h = s.seal("p", &[], b"payload");
        let mut raw = URL_SAFE_NO_PAD.decode(&h).expect("base64url");
        for i in [0, NONCE_LEN, raw.len() - 1] {
            raw[i] ^= 1;
            let forged = URL_SAFE_NO_PAD.encode(&raw);
            assert_eq!(
                s.open("p", &[], &forged),
                Err(SealError::Invalid),
                "byte {i}"
            );
            raw[i] ^= 1;
        }
        assert_eq!(s.open("p", &[], &h[..h.len() - 2]), Err(SealError::Invalid));
        assert_eq!(s.open("p", &[], "not base64!"), Err(SealError::Invalid));
        assert_eq!(s.open("p", &[], ""), Err(SealError::Invalid));
        // The previous (signed, `payload.tag`) format is refused.
        assert_eq!(s.open("p", &[], "eyJhIjoxfQ.AAAA"), Err(SealError::Invalid));
        assert_eq!(s.open("p", &[], &h).as_deref(), Ok(&b"payload"[..]));
    }
}
