//! JWT parsing and validation (`mcp_claims::JwtValidator::validate`, static keys only, so it never
//! waits on I/O): never panics on an arbitrary token, and a token it accepts always satisfies the
//! policy (issuer, audience, an algorithm bound to a key, expiry within the leeway).
//!
//! Input: first byte even: the rest is the token; odd: `header JSON \0 payload JSON`, encoded and
//! signed with the HS256 secret, so the claim checks run on arbitrary headers and claims.
#![no_main]

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey};
use libfuzzer_sys::fuzz_target;
use mcp_claims::{Issuer, JwtValidator};
use mcp_gateway_fuzz::ready;

const ISSUER: &str = "https://issuer.example";
const AUDIENCE: &str = "mcp-gateway";
const SECRET: &[u8] = b"fuzz-hs256-secret-fuzz-hs256-secret";
const LEEWAY_S: u64 = 30;

fn validator() -> &'static JwtValidator {
    static VALIDATOR: OnceLock<JwtValidator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let ec = include_bytes!("../../crates/mcp-claims/tests/fixtures/ec256_public.pem");
        let rsa = include_bytes!("../../crates/mcp-claims/tests/fixtures/rsa_public.pem");
        let issuer = Issuer::new(ISSUER)
            .hmac_secret(SECRET, [Algorithm::HS256])
            .public_key_pem(ec, [Algorithm::ES256])
            .expect("EC key")
            .public_key_pem(rsa, [Algorithm::RS256, Algorithm::PS256])
            .expect("RSA key");
        JwtValidator::builder()
            .issuer(issuer)
            .issuer(Issuer::new("https://other.example").hmac_secret(b"other", [Algorithm::HS384]))
            .audience(AUDIENCE)
            .leeway(std::time::Duration::from_secs(LEEWAY_S))
            .build()
            .expect("validator")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let token = if mode % 2 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        let (header, payload) = match rest.iter().position(|b| *b == 0) {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => (rest, &b"{}"[..]),
        };
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        );
        let key = EncodingKey::from_secret(SECRET).expect("HMAC key");
        let signature =
            jsonwebtoken::crypto::sign(input.as_bytes(), &key, Algorithm::HS256).expect("sign");
        format!("{input}.{signature}")
    };
    let Ok(claims) = ready(validator().validate(&token)) else {
        return;
    };
    // Only an HS256 token signed with the secret can get here (the input cannot forge others).
    assert_eq!(mode % 2, 1, "an unsigned fuzz token was accepted: {token}");
    assert_eq!(claims.algorithm(), Algorithm::HS256);
    assert_eq!(claims.iss(), ISSUER);
    assert!(
        claims.aud().iter().any(|a| a == AUDIENCE),
        "{:?}",
        claims.aud()
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(
        claims.exp().saturating_add(LEEWAY_S) >= now,
        "expired: {}",
        claims.exp()
    );
    if let Some(nbf) = claims.nbf() {
        assert!(nbf <= now.saturating_add(LEEWAY_S), "not yet valid: {nbf}");
    }
    assert_eq!(claims.principal().subject(), claims.sub());
});
