//! Unverified parsing of a compact JWS: split, decode the header and the payload.
//!
//! Nothing here trusts the token: the result only says which issuer, algorithm and key id the token
//! *claims*; the validator then verifies the signature with that issuer's keys.

use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use serde_json::{Map, Value};

use crate::error::AuthError;

/// A compact JWS split into its parts, header and payload decoded but nothing verified.
#[derive(Debug)]
pub(crate) struct UnverifiedToken<'a> {
    /// `base64url(header) "." base64url(payload)`: the bytes the signature covers.
    pub(crate) signing_input: &'a str,
    /// The decoded signature.
    pub(crate) signature: Vec<u8>,
    /// The header's `alg`.
    pub(crate) alg: Algorithm,
    /// The header's `kid`, if any.
    pub(crate) kid: Option<String>,
    /// The payload (claims set).
    pub(crate) claims: Map<String, Value>,
}

impl<'a> UnverifiedToken<'a> {
    /// Splits and decodes `token`. Fails with [`AuthError::Malformed`] for anything that is not a
    /// compact JWS with JSON object header and payload, and with
    /// [`AuthError::UnsupportedAlgorithm`] for `alg: none` or an unknown algorithm.
    pub(crate) fn parse(token: &'a str) -> Result<Self, AuthError> {
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed("not a compact JWS"));
        };
        let signing_input = &token[..header_b64.len() + 1 + payload_b64.len()];

        // The header first, so that `alg: none` (empty signature) is reported as such.
        let header = decode_object(header_b64, "header")?;
        let alg = match header.get("alg") {
            Some(Value::String(alg)) => {
                Algorithm::from_str(alg).map_err(|_| AuthError::UnsupportedAlgorithm)?
            }
            Some(_) => return Err(AuthError::Malformed("header alg is not a string")),
            None => return Err(AuthError::Malformed("header has no alg")),
        };
        // RFC 7515 4.1.11: we understand no extension, so any `crit` makes the token unusable.
        if header.contains_key("crit") {
            return Err(AuthError::Malformed("unsupported critical header"));
        }
        // RFC 7797 unencoded payloads are not JWTs.
        if header
            .get("b64")
            .is_some_and(|b64| b64 != &Value::Bool(true))
        {
            return Err(AuthError::Malformed("unencoded payload"));
        }
        let kid = match header.get("kid") {
            Some(Value::String(kid)) => Some(kid.clone()),
            Some(_) => return Err(AuthError::Malformed("header kid is not a string")),
            None => None,
        };

        if payload_b64.is_empty() || signature_b64.is_empty() {
            return Err(AuthError::Malformed("empty token part"));
        }
        let claims = decode_object(payload_b64, "payload")?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature_b64)
            .map_err(|_| AuthError::Malformed("signature is not base64url"))?;

        Ok(Self {
            signing_input,
            signature,
            alg,
            kid,
            claims,
        })
    }
}

fn decode_object(part: &str, what: &'static str) -> Result<Map<String, Value>, AuthError> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| {
        AuthError::Malformed(if what == "header" {
            "header is not base64url"
        } else {
            "payload is not base64url"
        })
    })?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(AuthError::Malformed(if what == "header" {
            "header is not a JSON object"
        } else {
            "payload is not a JSON object"
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        URL_SAFE_NO_PAD.encode(s)
    }

    fn token(header: &str, payload: &str) -> String {
        format!("{}.{}.{}", b64(header), b64(payload), b64("sig"))
    }

    #[test]
    fn parses_a_token() {
        let t = token(
            r#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#,
            r#"{"iss":"i"}"#,
        );
        let parsed = UnverifiedToken::parse(&t).expect("parses");
        assert_eq!(parsed.alg, Algorithm::RS256);
        assert_eq!(parsed.kid.as_deref(), Some("k1"));
        assert_eq!(parsed.claims["iss"], "i");
        assert_eq!(parsed.signature, b"sig");
        assert!(t.starts_with(parsed.signing_input));
        assert_eq!(parsed.signing_input.matches('.').count(), 1);
    }

    #[test]
    fn unsecured_token_is_an_unsupported_algorithm() {
        let t = format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(r#"{"iss":"i"}"#));
        assert_eq!(
            UnverifiedToken::parse(&t).expect_err("refused"),
            AuthError::UnsupportedAlgorithm
        );
    }

    #[test]
    fn rejects_none_and_unknown_algorithms() {
        for alg in ["none", "None", "HS1", "RSA-OAEP"] {
            let t = token(&format!(r#"{{"alg":"{alg}"}}"#), "{}");
            assert_eq!(
                UnverifiedToken::parse(&t).expect_err("refused"),
                AuthError::UnsupportedAlgorithm,
                "{alg}"
            );
        }
    }

    #[test]
    fn rejects_malformed_tokens() {
        let bad = [
            "".to_string(),
            "abc".to_string(),
            "a.b".to_string(),
            "a.b.c.d.e".to_string(),
            format!("{}..{}", b64(r#"{"alg":"HS256"}"#), b64("s")),
            format!("{}.{}.", b64(r#"{"alg":"HS256"}"#), b64("{}")),
            format!("!!.{}.{}", b64("{}"), b64("s")),
            token("[1]", "{}"),
            token(r#"{"alg":"HS256"}"#, "[]"),
            token(r#"{"alg":"HS256"}"#, "not json"),
            token(r#"{"typ":"JWT"}"#, "{}"),
            token(r#"{"alg":256}"#, "{}"),
            token(r#"{"alg":"HS256","kid":1}"#, "{}"),
            token(r#"{"alg":"HS256","crit":["exp"],"exp":1}"#, "{}"),
            token(r#"{"alg":"HS256","b64":false}"#, "{}"),
            format!("{}.{}.a=b", b64(r#"{"alg":"HS256"}"#), b64("{}")),
        ];
        for t in bad {
            assert!(
                matches!(UnverifiedToken::parse(&t), Err(AuthError::Malformed(_))),
                "{t}"
            );
        }
    }
}
