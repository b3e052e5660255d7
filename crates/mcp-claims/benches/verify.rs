//! JWT verification with keys parsed once at build time (the validator's cached keys): HS256 and
//! RS256 with the verified-token cache off (the cost of a token's first request), and with it on
//! (every later request with the same token). `cargo bench -p mcp-claims`.

use std::hint::black_box;
use std::time::{SystemTime, UNIX_EPOCH};

use criterion::{Criterion, criterion_group, criterion_main};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcp_claims::{Issuer, JwtValidator};

const ISSUER: &str = "https://issuer.example";
const AUDIENCE: &str = "mcp-gateway";
const SECRET: &[u8] = b"bench-secret-bench-secret-bench-secret";
const RSA_PRIVATE: &str = include_str!("../tests/fixtures/rsa_private.pem");
const RSA_PUBLIC: &str = include_str!("../tests/fixtures/rsa_public.pem");

fn token(alg: Algorithm, key: &EncodingKey) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let claims = serde_json::json!({
        "iss": ISSUER, "sub": "alice", "aud": AUDIENCE,
        "exp": now + 3600, "iat": now, "scope": "mcp tools:read",
    });
    encode(&Header::new(alg), &claims, key).expect("encode")
}

fn verify(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let hs256 = |cache| {
        JwtValidator::builder()
            .issuer(Issuer::new(ISSUER).hmac_secret(SECRET, [Algorithm::HS256]))
            .audience(AUDIENCE)
            .verified_token_cache(cache)
            .build()
            .expect("HS256 validator")
    };
    let rs256 = |cache| {
        JwtValidator::builder()
            .issuer(
                Issuer::new(ISSUER)
                    .public_key_pem(RSA_PUBLIC, [Algorithm::RS256])
                    .expect("RSA public key"),
            )
            .audience(AUDIENCE)
            .verified_token_cache(cache)
            .build()
            .expect("RS256 validator")
    };
    let hs_token = token(
        Algorithm::HS256,
        &EncodingKey::from_secret(SECRET).expect("hmac key"),
    );
    let rs_token = token(
        Algorithm::RS256,
        &EncodingKey::from_rsa_pem(RSA_PRIVATE.as_bytes()).expect("RSA private key"),
    );

    let mut group = c.benchmark_group("jwt_verify");
    for (name, validator, token) in [
        ("hs256", hs256(0), &hs_token),
        ("rs256", rs256(0), &rs_token),
        ("hs256_cached", hs256(10_000), &hs_token),
        ("rs256_cached", rs256(10_000), &rs_token),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let claims = validator
                    .validate(black_box(token))
                    .await
                    .expect("valid token");
                black_box(claims);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, verify);
criterion_main!(benches);
