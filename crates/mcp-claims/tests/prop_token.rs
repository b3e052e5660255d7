//! Property tests of JWT parsing and validation (the `jwt` fuzz target in `fuzz/` drives the same
//! entry point): no panic on arbitrary tokens or headers, accepted tokens keep their claims, and
//! any change to a signed token is refused.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
use mcp_claims::{AuthError, Claims, Issuer, JwtValidator};
use proptest::prelude::*;

const ISSUER: &str = "https://issuer.example";
const AUDIENCE: &str = "mcp-gateway";
const SECRET: &[u8] = b"proptest-secret-proptest-secret!";

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(256)
}

fn validator() -> JwtValidator {
    JwtValidator::builder()
        .issuer(Issuer::new(ISSUER).hmac_secret(SECRET, [Algorithm::HS256]))
        .audience(AUDIENCE)
        .build()
        .expect("validator")
}

/// Validation with static keys never waits on I/O: poll it once.
fn validate(validator: &JwtValidator, token: &str) -> Result<Claims, AuthError> {
    let mut future = std::pin::pin!(validator.validate(token));
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(result) => result,
        Poll::Pending => panic!("validation with static keys must not wait"),
    }
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn sign(sub: &str, scope: &str) -> String {
    let claims = serde_json::json!({
        "iss": ISSUER,
        "sub": sub,
        "aud": AUDIENCE,
        "exp": get_current_timestamp() + 600,
        "scope": scope,
    });
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET).expect("HMAC key"),
    )
    .expect("encode")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_tokens_are_refused_without_panic(
        token in prop_oneof![
            any::<String>(),
            "[A-Za-z0-9_-]{0,30}\\.[A-Za-z0-9_-]{0,30}\\.[A-Za-z0-9_-]{0,30}",
        ],
    ) {
        prop_assert!(validate(&validator(), &token).is_err());
    }

    /// Arbitrary header and payload bytes (base64url-encoded, so parsing gets past the split)
    /// never panic and are never accepted with a made-up signature.
    #[test]
    fn arbitrary_headers_and_payloads_are_refused(
        header in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            "\\{\"alg\":\"(HS256|RS256|none|ES256|EdDSA|x)\"(,\"kid\":(1|\"k\"))?(,\"crit\":\\[\\])?(,\"b64\":(true|false))?\\}"
                .prop_map(String::into_bytes),
        ],
        payload in proptest::collection::vec(any::<u8>(), 0..40),
        signature in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let token = format!("{}.{}.{}", b64(&header), b64(&payload), b64(&signature));
        prop_assert!(validate(&validator(), &token).is_err());
    }

    #[test]
    fn signed_tokens_keep_their_claims(sub in "[^\\x00]{1,40}", scope in "[a-z:]{1,8}( [a-z:]{1,8}){0,3}") {
        let token = sign(&sub, &scope);
        let claims = validate(&validator(), &token).expect("valid token");
        prop_assert_eq!(claims.sub(), sub.as_str());
        prop_assert_eq!(claims.iss(), ISSUER);
        prop_assert_eq!(claims.aud(), [AUDIENCE.to_owned()]);
        // Scopes are kept in order, each once.
        let mut scopes: Vec<&str> = Vec::new();
        for s in scope.split(' ') {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
        prop_assert_eq!(claims.scopes(), scopes);
    }

    /// Changing any one character of a signed token makes it invalid.
    #[test]
    fn tampered_tokens_are_refused(sub in "[a-z]{1,20}", at in any::<prop::sample::Index>(), with in "[A-Za-z0-9_.=-]") {
        let token = sign(&sub, "s");
        let at = at.index(token.len());
        prop_assume!(token[at..].chars().next() != with.chars().next());
        let mut tampered = token.clone();
        tampered.replace_range(at..=at, &with);
        // The last character of a base64url part may carry unused bits; the decoder refuses
        // non-canonical encodings, so every change is either a different value or an error.
        prop_assert!(validate(&validator(), &tampered).is_err(), "{} accepted", tampered);
    }
}
