//! [`CredentialScope`]: who the gateway is when it talks to one backend, the one key of every
//! piece of upstream state that outlives a call (book: docs/src/architecture.md, the isolation rule).
//!
//! A scope is the backend's address (URL, or `stdio:` + command), a digest of the effective
//! outgoing credentials (the resolved header policy: `add` values, `remove` names, and the values
//! the client's request supplies for `passthrough` names), and the principal. Everything the
//! upstream side keeps between calls is keyed by it: keep-alive HTTP connections, upstream 2025
//! sessions (with the client's capability digest), their GET-stream hubs, HTTP+SSE connections, the
//! era cache, the URLs found to speak HTTP+SSE, circuit breakers, tool hints and stale answers. Two
//! callers share upstream state only when all three parts are equal: the same principal presenting
//! the same credentials to the same backend. Different tenants never share anything, even for the
//! same URL and headers: a tenant's own settings (`timeout_ms`, breaker overrides) and failures
//! therefore only ever affect its own state.
//!
//! The digest (SHA-256) keeps credential values out of the keys: a heap dump of the tables shows
//! no secret, and a key's size does not grow with the caller's headers.

use std::sync::Arc;

use aws_lc_rs::digest;
use http::{HeaderMap, HeaderName};
use mcp_config_store::HeaderPolicy;
use mcp_core::Principal;

/// Who the gateway is towards one backend: address, credentials, principal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CredentialScope {
    /// The backend's address: a URL, or `stdio:<command>`.
    pub(crate) address: Arc<str>,
    /// SHA-256 over the address, the principal and the effective outgoing credentials: one
    /// digest per scope, which is also its [`opaque_id`](Self::opaque_id).
    digest: [u8; 32],
    /// The caller.
    pub(crate) principal: Principal,
}

impl CredentialScope {
    /// The scope of `principal` calling `address` with `policy` applied to the client's
    /// `downstream` headers.
    pub(crate) fn new(
        address: &str,
        policy: &HeaderPolicy,
        downstream: &HeaderMap,
        principal: &Principal,
    ) -> Self {
        Self {
            address: Arc::from(address),
            digest: scope_digest(address, principal, policy, downstream),
            principal: principal.clone(),
        }
    }

    /// A short, stable, opaque name of this scope (hex of half its digest): for string-keyed
    /// registries (breakers). It reveals neither the address nor the credentials.
    pub(crate) fn opaque_id(&self) -> String {
        hex(&self.digest[..16])
    }

    /// Appends [`opaque_id`](Self::opaque_id) to `out` (a key being built, without a temporary).
    pub(crate) fn push_opaque_id(&self, out: &mut String) {
        push_hex(out, &self.digest[..16]);
    }
}

/// Hashes the digest alone: it covers the address and the principal, so equal scopes hash
/// equally, and every table lookup of a scope (several per call) hashes 32 bytes instead of the
/// address, issuer and subject as well.
impl std::hash::Hash for CredentialScope {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.digest.hash(state);
    }
}

/// SHA-256 over the address, the principal and the parts of `policy` that decide what the
/// backend sees of the caller: the static `add` values, the `remove` names, and each
/// `passthrough` name with the values the client sent for it (in request order). Every part is
/// tagged and length-prefixed, so no two scopes collide by concatenation.
fn scope_digest(
    address: &str,
    principal: &Principal,
    policy: &HeaderPolicy,
    downstream: &HeaderMap,
) -> [u8; 32] {
    // One buffer digested at once: an update per part cost more than the hashing itself.
    let mut input = Vec::with_capacity(
        address.len() + principal.issuer().len() + principal.subject().len() + 64,
    );
    let mut put = |tag: u8, bytes: &[u8]| {
        input.push(tag);
        input.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        input.extend_from_slice(bytes);
    };
    put(b'u', address.as_bytes());
    put(b'i', principal.issuer().as_bytes());
    put(b's', principal.subject().as_bytes());
    for (name, value) in &policy.add {
        put(b'a', name.to_ascii_lowercase().as_bytes());
        put(b'v', value.as_bytes());
    }
    for name in &policy.remove {
        put(b'r', name.to_ascii_lowercase().as_bytes());
    }
    for name in &policy.passthrough {
        put(b'p', name.to_ascii_lowercase().as_bytes());
        if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
            for value in downstream.get_all(&name) {
                put(b'v', value.as_bytes());
            }
        }
    }
    digest_of(&input)
}

/// SHA-256 of `bytes`, for keys that must not hold (or grow with) the bytes themselves.
pub(crate) fn digest_of(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, bytes).as_ref());
    out
}

pub(super) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

/// Lower-case hex of `bytes` appended to `out`: a table lookup per nibble (every call builds a
/// key with it; `write!` per byte cost ten times as much).
pub(super) fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(json: &str) -> HeaderPolicy {
        serde_json::from_str(json).expect("policy")
    }

    #[test]
    fn every_part_of_the_scope_tells_callers_apart() {
        let alice = Principal::new("https://i", "alice");
        let bob = Principal::new("https://i", "bob");
        let none = HeaderMap::new();
        let key_a = policy(r#"{"add":{"x-api-key":"a"}}"#);
        let key_b = policy(r#"{"add":{"x-api-key":"b"}}"#);
        let base = CredentialScope::new("http://b/mcp", &key_a, &none, &alice);
        assert_eq!(
            base,
            CredentialScope::new("http://b/mcp", &key_a, &none, &alice),
            "identical scopes are equal"
        );
        assert_ne!(
            base,
            CredentialScope::new("http://b/mcp", &key_b, &none, &alice)
        );
        assert_ne!(
            base,
            CredentialScope::new("http://b/mcp", &key_a, &none, &bob)
        );
        assert_ne!(
            base,
            CredentialScope::new("http://c/mcp", &key_a, &none, &alice)
        );
        assert_ne!(base.opaque_id(), bob_id(&key_a, &bob));
        assert!(!base.opaque_id().contains("b/mcp"));
    }

    fn bob_id(policy: &HeaderPolicy, bob: &Principal) -> String {
        CredentialScope::new("http://b/mcp", policy, &HeaderMap::new(), bob).opaque_id()
    }

    #[test]
    fn passthrough_values_are_part_of_the_credentials() {
        let p = Principal::new("https://i", "alice");
        let pass = policy(r#"{"passthrough":["X-Tenant-Key"]}"#);
        let mut one = HeaderMap::new();
        one.insert("x-tenant-key", "1".parse().expect("value"));
        let mut two = HeaderMap::new();
        two.insert("x-tenant-key", "2".parse().expect("value"));
        assert_ne!(
            CredentialScope::new("http://b", &pass, &one, &p),
            CredentialScope::new("http://b", &pass, &two, &p)
        );
        // Headers the policy does not pass through do not split scopes.
        let mut other = one.clone();
        other.insert("x-unrelated", "z".parse().expect("value"));
        assert_eq!(
            CredentialScope::new("http://b", &pass, &one, &p),
            CredentialScope::new("http://b", &pass, &other, &p)
        );
    }
}
