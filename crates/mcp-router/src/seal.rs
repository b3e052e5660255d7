//! [`Sealer`]: integrity protection for the opaque handles the gateway mints (list cursors,
//! `requestState` envelopes), bound to the context they were minted for.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Why a sealed handle was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Not a handle this gateway minted, minted for another context (principal, virtual host,
    /// method…), or altered.
    #[error("invalid or foreign handle")]
    Invalid,
    /// Authentic but past its expiry.
    #[error("expired handle")]
    Expired,
}

/// HMAC-SHA256 sealing of small payloads.
///
/// A handle is `base64url(payload) "." base64url(tag)`; the tag covers a purpose label, the
/// binding strings (e.g. issuer, subject, virtual host, method) and the payload, so a handle
/// minted for one caller or one list is refused for any other. Binding strings are not stored in
/// the handle, which keeps it short. Handles are integrity-protected, not encrypted: never put
/// secrets in a payload.
///
/// Every gateway node that must accept another node's handles needs the same key
/// ([`Sealer::new`]); [`Sealer::random`] is for a single process.
#[derive(Clone)]
pub struct Sealer {
    key: hmac::Key,
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
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    /// A sealer with a fresh random key, valid for this process only.
    pub fn random() -> Self {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        // Key generation from the system RNG only fails if the OS has no randomness at all.
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
            .unwrap_or_else(|_| hmac::Key::new(hmac::HMAC_SHA256, &now_nanos().to_le_bytes()));
        Self { key }
    }

    /// Seals `payload` for `purpose` and `binding`.
    pub fn seal(&self, purpose: &str, binding: &[&str], payload: &[u8]) -> String {
        let tag = self.tag(purpose, binding, payload);
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// Opens a handle sealed with the same purpose and binding, checking its tag in constant time.
    pub fn open(
        &self,
        purpose: &str,
        binding: &[&str],
        handle: &str,
    ) -> Result<Vec<u8>, SealError> {
        let (payload, tag) = handle.split_once('.').ok_or(SealError::Invalid)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| SealError::Invalid)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| SealError::Invalid)?;
        let message = Self::message(purpose, binding, &payload);
        hmac::verify(&self.key, &message, &tag).map_err(|_| SealError::Invalid)?;
        Ok(payload)
    }

    fn tag(&self, purpose: &str, binding: &[&str], payload: &[u8]) -> hmac::Tag {
        hmac::sign(&self.key, &Self::message(purpose, binding, payload))
    }

    /// Length-prefixed fields, so no two different (purpose, binding, payload) triples produce the
    /// same MAC input.
    fn message(purpose: &str, binding: &[&str], payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + payload.len());
        let mut field = |bytes: &[u8]| {
            out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            out.extend_from_slice(bytes);
        };
        field(purpose.as_bytes());
        field(&(binding.len() as u64).to_be_bytes());
        for b in binding {
            field(b.as_bytes());
        }
        field(payload);
        out
    }
}

/// Seconds since the Unix epoch, for handle expiry.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
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
    }

    #[test]
    fn tampering_is_detected() {
        let s = Sealer::random();
        let h = s.seal("p", &[], b"payload");
        let (payload, tag) = h.split_once('.').expect("dot");
        let forged = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(b"payloaD"));
        assert_eq!(s.open("p", &[], &forged), Err(SealError::Invalid));
        assert_eq!(s.open("p", &[], payload), Err(SealError::Invalid));
        assert_eq!(s.open("p", &[], "not base64!.x"), Err(SealError::Invalid));
    }
}
