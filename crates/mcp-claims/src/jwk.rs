//! Parsing a JWK Set (RFC 7517) into [`VerifyingKey`]s.
//!
//! Rules: keys with `use` other than `sig` are skipped; symmetric (`oct`) keys are never taken from
//! a URL; a key with `alg` is bound to exactly that algorithm (which must fit its type), a key
//! without `alg` to every algorithm of its type (RSA: RS*/PS*; EC: the curve's one; OKP: EdDSA);
//! an issuer-level allow-list narrows the binding further. Keys that fail any rule are skipped, not
//! fatal, so one exotic key does not take the whole set down.

use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use serde_json::Value;

use crate::error::JwksFailure;
use crate::key::{KeyType, VerifyingKey};

#[derive(Deserialize)]
struct JwkSet {
    keys: Vec<Value>,
}

#[derive(Deserialize)]
struct Jwk {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default, rename = "use")]
    use_: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

/// Parses a JWK Set document. Returns the usable keys, or why the document is not a JWK Set or
/// holds no usable key.
pub(crate) fn parse_jwks(
    bytes: &[u8],
    allowed: Option<&[Algorithm]>,
) -> Result<Vec<VerifyingKey>, JwksFailure> {
    let set: JwkSet = serde_json::from_slice(bytes).map_err(JwksFailure::NotAJwkSet)?;
    let total = set.keys.len();
    let keys: Vec<VerifyingKey> = set
        .keys
        .into_iter()
        .filter_map(|value| {
            let jwk: Jwk = serde_json::from_value(value).ok()?;
            match to_key(jwk, allowed) {
                Ok(key) => Some(key),
                Err(why) => {
                    tracing::debug!(reason = why, "skipping JWK");
                    None
                }
            }
        })
        .collect();
    if keys.is_empty() {
        return Err(JwksFailure::NoUsableKey(total));
    }
    Ok(keys)
}

fn b64(field: Option<&str>) -> Result<Vec<u8>, &'static str> {
    let field = field.ok_or("missing key parameter")?;
    URL_SAFE_NO_PAD
        .decode(field)
        .map_err(|_| "key parameter is not base64url")
}

fn to_key(jwk: Jwk, allowed: Option<&[Algorithm]>) -> Result<VerifyingKey, &'static str> {
    if jwk.use_.as_deref().is_some_and(|u| u != "sig") {
        return Err("not a signature key");
    }
    let (key_type, key) = match jwk.kty.as_str() {
        "RSA" => {
            let n = b64(jwk.n.as_deref())?;
            let e = b64(jwk.e.as_deref())?;
            if n.is_empty() || e.is_empty() {
                return Err("empty RSA parameter");
            }
            (KeyType::Rsa, DecodingKey::from_rsa_raw_components(&n, &e))
        }
        "EC" => {
            let (key_type, len) = match jwk.crv.as_deref() {
                Some("P-256") => (KeyType::EcP256, 32),
                Some("P-384") => (KeyType::EcP384, 48),
                _ => return Err("unsupported EC curve"),
            };
            let x = b64(jwk.x.as_deref())?;
            let y = b64(jwk.y.as_deref())?;
            if x.len() != len || y.len() != len {
                return Err("EC coordinate has the wrong length");
            }
            let mut point = Vec::with_capacity(1 + 2 * len);
            point.push(4);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            (key_type, DecodingKey::from_ec_der(&point))
        }
        "OKP" => {
            if jwk.crv.as_deref() != Some("Ed25519") {
                return Err("unsupported OKP curve");
            }
            let x = b64(jwk.x.as_deref())?;
            if x.len() != 32 {
                return Err("Ed25519 key has the wrong length");
            }
            (KeyType::Ed25519, DecodingKey::from_ed_der(&x))
        }
        "oct" => return Err("symmetric keys are not accepted from a JWKS"),
        _ => return Err("unsupported key type"),
    };
    let mut algorithms: Vec<Algorithm> = match jwk.alg.as_deref() {
        Some(alg) => {
            let alg = Algorithm::from_str(alg).map_err(|_| "unsupported alg")?;
            if !key_type.allows(alg) {
                return Err("alg does not fit the key type");
            }
            vec![alg]
        }
        None => key_type.all_algorithms().to_vec(),
    };
    if let Some(allowed) = allowed {
        algorithms.retain(|alg| allowed.contains(alg));
    }
    if algorithms.is_empty() {
        return Err("alg not allowed for this issuer");
    }
    VerifyingKey::new(jwk.kid, key_type, key, algorithms).map_err(|_| "invalid key binding")
}

#[cfg(test)]
mod tests {
    use super::*;

    const JWKS: &[u8] = include_bytes!("../tests/fixtures/jwks.json");

    #[test]
    fn parses_fixture_set() {
        let keys = parse_jwks(JWKS, None).expect("parses");
        let kids: Vec<_> = keys.iter().filter_map(|k| k.kid()).collect();
        assert_eq!(kids, ["rsa-1", "ec256-1", "ec384-1", "ed25519-1"]);
        assert_eq!(keys[0].algorithms(), &[Algorithm::RS256]);
        assert_eq!(keys[3].algorithms(), &[Algorithm::EdDSA]);
    }

    #[test]
    fn allow_list_narrows_and_skips() {
        let keys = parse_jwks(JWKS, Some(&[Algorithm::ES256])).expect("parses");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid(), Some("ec256-1"));
        assert!(matches!(
            parse_jwks(JWKS, Some(&[Algorithm::HS256])),
            Err(JwksFailure::NoUsableKey(4))
        ));
    }

    #[test]
    fn skips_bad_keys() {
        let doc = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"},
            {"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"},
            {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"},
            {"kty": "OKP", "crv": "X25519", "x": "AA"},
            {"kty": "RSA", "alg": "ES256", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "alg": "none", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "n": "%%%", "e": "AQAB"},
            {"no": "kty"},
            {"kty": "RSA", "kid": "ok", "n": "AQAB", "e": "AQAB"}
        ]});
        let keys = parse_jwks(doc.to_string().as_bytes(), None).expect("one usable key");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid(), Some("ok"));
        assert_eq!(
            keys[0].algorithms().len(),
            6,
            "no alg: the whole RSA family"
        );
    }

    #[test]
    fn rejects_non_sets() {
        for doc in [&b"{}"[..], b"[]", b"<html>"] {
            assert!(
                matches!(parse_jwks(doc, None), Err(JwksFailure::NotAJwkSet(_))),
                "{doc:?}"
            );
        }
        assert!(matches!(
            parse_jwks(br#"{"keys":[]}"#, None),
            Err(JwksFailure::NoUsableKey(0))
        ));
    }
}
