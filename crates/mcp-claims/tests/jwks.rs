//! JWKS keys over real sockets: a local JWKS server the test changes and stops, and `ClaimsLayer`
//! behind a hyper server.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use http::StatusCode;
use jsonwebtoken::Algorithm;
use mcp_claims::{
    AuthError, ClaimsConfigError, ClaimsLayer, Issuer, JwksClock, JwtValidator, JwtValidatorBuilder,
};
use mcp_test_support::{SteppedClock, poll_until};

use common::*;

/// A background fetch over loopback takes milliseconds: the limit only bounds a broken run.
const EVENT_LIMIT: Duration = Duration::from_secs(10);

fn builder(jwks_url: &str) -> JwtValidatorBuilder {
    JwtValidator::builder()
        .issuer(Issuer::new(ISSUER).jwks_url(jwks_url).expect("url"))
        .audience(AUDIENCE)
        .jwks_fetch_timeout(Duration::from_secs(2))
}

/// The JWKS caches read `clock`, which stands still until the test steps it: refresh and refetch
/// intervals pass when the test says so, however long the machine takes between two steps (the
/// sockets keep real time).
fn stepped(clock: &SteppedClock) -> JwksClock {
    let clock = clock.clone();
    JwksClock::from_fn(move || clock.now())
}

async fn gateway(validator: JwtValidator) -> SocketAddr {
    serve(ClaimsLayer::new(validator).resource_metadata(RESOURCE_METADATA)).await
}

fn rsa_token(kid: &str) -> String {
    sign(
        Algorithm::RS256,
        &private_key("rsa"),
        Some(kid),
        &good_claims(),
    )
}

#[tokio::test]
async fn every_key_type_from_jwks() {
    let jwks = JwksServer::start(&["rsa", "ec256", "ec384", "ed25519"]).await;
    let addr = gateway(builder(&jwks.url()).build().expect("config")).await;
    let client = client();
    let cases = [
        (Algorithm::RS256, "rsa", "rsa-1"),
        (Algorithm::ES256, "ec256", "ec256-1"),
        (Algorithm::ES384, "ec384", "ec384-1"),
        (Algorithm::EdDSA, "ed25519", "ed25519-1"),
    ];
    for (alg, key, kid) in cases {
        let token = sign(alg, &private_key(key), Some(kid), &good_claims());
        assert_ok(&get_bearer(&client, addr, &token).await, "alice");
    }
    // A token without kid is tried against the keys bound to its algorithm.
    let token = sign(
        Algorithm::ES256,
        &private_key("ec256"),
        None,
        &good_claims(),
    );
    assert_ok(&get_bearer(&client, addr, &token).await, "alice");
    // The JWK says RS256: PS256 with the same key is refused.
    let token = sign(
        Algorithm::PS256,
        &private_key("rsa"),
        Some("rsa-1"),
        &good_claims(),
    );
    assert_401(
        &get_bearer(&client, addr, &token).await,
        "No matching signing key",
        &invalid_token_challenge(),
    );
    // A key id that names another key type.
    let token = sign(
        Algorithm::ES256,
        &private_key("ec256"),
        Some("rsa-1"),
        &good_claims(),
    );
    assert_401(
        &get_bearer(&client, addr, &token).await,
        "No matching signing key",
        &invalid_token_challenge(),
    );
    // Right kid, wrong private key.
    let token = sign(
        Algorithm::RS256,
        &private_key("rsa2"),
        Some("rsa-1"),
        &good_claims(),
    );
    assert_401(
        &get_bearer(&client, addr, &token).await,
        "Invalid token signature",
        &invalid_token_challenge(),
    );
    // HMAC is never accepted for a JWKS-only issuer.
    let token = sign(Algorithm::HS256, &hmac_key(SECRET), None, &good_claims());
    assert_401(
        &get_bearer(&client, addr, &token).await,
        "Unsupported token algorithm",
        &invalid_token_challenge(),
    );
    assert_eq!(jwks.fetches(), 1, "one fetch served all of it");
}

#[tokio::test]
async fn key_rotation_without_restart() {
    let jwks = JwksServer::start(&["rsa"]).await;
    let clock = SteppedClock::new();
    let validator = builder(&jwks.url())
        .jwks_min_refetch_interval(Duration::from_secs(10))
        .jwks_clock(stepped(&clock))
        .build()
        .expect("config");
    let addr = gateway(validator).await;
    let client = client();

    assert_ok(
        &get_bearer(&client, addr, &rsa_token("rsa-1")).await,
        "alice",
    );
    assert_eq!(jwks.fetches(), 1);

    let rotated = sign(
        Algorithm::RS256,
        &private_key("rsa2"),
        Some("rsa-2"),
        &good_claims(),
    );
    // Not published yet (and within the refetch interval): refused without a fetch.
    assert_401(
        &get_bearer(&client, addr, &rotated).await,
        "No matching signing key",
        &invalid_token_challenge(),
    );
    assert_eq!(jwks.fetches(), 1);

    jwks.publish(&["rsa", "rsa2"]);
    clock.advance(Duration::from_secs(10));
    // Unknown kid -> refetch -> accepted.
    assert_ok(&get_bearer(&client, addr, &rotated).await, "alice");
    assert_eq!(jwks.fetches(), 2);
    // Both keys now served from the cache.
    assert_ok(
        &get_bearer(&client, addr, &rsa_token("rsa-1")).await,
        "alice",
    );
    assert_ok(&get_bearer(&client, addr, &rotated).await, "alice");
    assert_eq!(jwks.fetches(), 2);
}

#[tokio::test]
async fn cached_keys_survive_jwks_outage() {
    let jwks = JwksServer::start(&["rsa", "ed25519"]).await;
    let clock = SteppedClock::new();
    let validator = builder(&jwks.url())
        .jwks_refresh_interval(Duration::from_secs(300))
        .jwks_min_refetch_interval(Duration::from_secs(10))
        .jwks_clock(stepped(&clock))
        .build()
        .expect("config");
    validator.prefetch().await.expect("prefetch");
    assert_eq!(jwks.fetches(), 1);
    let addr = gateway(validator.clone()).await;
    let client = client();
    let ed25519_token = || {
        sign(
            Algorithm::EdDSA,
            &private_key("ed25519"),
            Some("ed25519-1"),
            &good_claims(),
        )
    };

    // The endpoint fails with 500: the stale set is still served, while a refresh is attempted in
    // the background.
    jwks.set_status(StatusCode::INTERNAL_SERVER_ERROR);
    clock.advance(Duration::from_secs(300));
    assert_ok(
        &get_bearer(&client, addr, &rsa_token("rsa-1")).await,
        "alice",
    );
    assert!(
        poll_until(EVENT_LIMIT, || async { jwks.fetches() >= 2 }).await,
        "no background refresh reached the endpoint"
    );

    // The endpoint goes away completely. Each round: past the refetch interval, a request starts a
    // refresh; `prefetch` waits for it (one fetch at a time) and fails too; the set outlives both.
    jwks.stop().await;
    for _ in 0..3 {
        clock.advance(Duration::from_secs(10));
        assert_ok(
            &get_bearer(&client, addr, &rsa_token("rsa-1")).await,
            "alice",
        );
        assert!(validator.prefetch().await.is_err());
        assert_ok(
            &get_bearer(&client, addr, &rsa_token("rsa-1")).await,
            "alice",
        );
        assert_ok(&get_bearer(&client, addr, &ed25519_token()).await, "alice");
    }
    // Unknown kid while the endpoint is down: the refetch fails, 401 (keys exist), not 503.
    clock.advance(Duration::from_secs(10));
    let reply = get_bearer(&client, addr, &rsa_token("rsa-9")).await;
    assert_401(
        &reply,
        "No matching signing key",
        &invalid_token_challenge(),
    );
    assert!(validator.prefetch().await.is_err());
}

#[tokio::test]
async fn unknown_kid_refetch_is_rate_limited() {
    let jwks = JwksServer::start(&["rsa"]).await;
    let validator = builder(&jwks.url())
        .jwks_min_refetch_interval(Duration::from_secs(60))
        .build()
        .expect("config");
    validator.prefetch().await.expect("prefetch");
    let addr = gateway(validator).await;
    let client = client();
    for i in 0..10 {
        let reply = get_bearer(&client, addr, &rsa_token(&format!("garbage-{i}"))).await;
        assert_401(
            &reply,
            "No matching signing key",
            &invalid_token_challenge(),
        );
    }
    assert_eq!(jwks.fetches(), 1, "no refetch within the minimum interval");

    // Once the interval has passed: one refetch, however many unknown kids arrive.
    let jwks = JwksServer::start(&["rsa"]).await;
    let clock = SteppedClock::new();
    let validator = builder(&jwks.url())
        .jwks_min_refetch_interval(Duration::from_secs(10))
        .jwks_clock(stepped(&clock))
        .build()
        .expect("config");
    validator.prefetch().await.expect("prefetch");
    clock.advance(Duration::from_secs(10));
    for i in 0..5 {
        let err = validator
            .validate(&rsa_token(&format!("garbage-{i}")))
            .await
            .expect_err("unknown kid");
        assert_eq!(err, AuthError::NoMatchingKey);
    }
    assert_eq!(jwks.fetches(), 2);
}

#[tokio::test]
async fn concurrent_first_requests_share_one_fetch() {
    let jwks = JwksServer::start(&["rsa", "ec256"]).await;
    jwks.set_delay(Duration::from_millis(300));
    // No rate limit: only single-flight keeps the waiters from fetching again.
    let validator = builder(&jwks.url())
        .jwks_min_refetch_interval(Duration::ZERO)
        .build()
        .expect("config");
    let addr = gateway(validator).await;
    let client = client();
    let token = rsa_token("rsa-1");

    let requests = (0..20).map(|_| {
        let client = client.clone();
        let token = token.clone();
        tokio::spawn(async move { get_bearer(&client, addr, &token).await })
    });
    let replies: Vec<Reply> = futures_join(requests).await;
    assert_eq!(replies.len(), 20);
    for reply in &replies {
        assert_ok(reply, "alice");
    }
    assert_eq!(jwks.fetches(), 1, "single-flight");
}

#[tokio::test]
async fn stale_set_is_refreshed_in_the_background() {
    let jwks = JwksServer::start(&["rsa"]).await;
    let clock = SteppedClock::new();
    let validator = builder(&jwks.url())
        .jwks_refresh_interval(Duration::from_secs(300))
        .jwks_min_refetch_interval(Duration::ZERO)
        .jwks_clock(stepped(&clock))
        .build()
        .expect("config");
    let token = rsa_token("rsa-1");
    validator.validate(&token).await.expect("valid");
    validator.validate(&token).await.expect("valid");
    assert_eq!(jwks.fetches(), 1);

    // The IdP drops rsa-1. The stale set keeps serving the request that notices it is stale...
    jwks.publish(&["ec256"]);
    clock.advance(Duration::from_secs(300));
    validator.validate(&token).await.expect("stale set served");
    // ...while one background refresh replaces it.
    assert!(
        poll_until(EVENT_LIMIT, || async { jwks.fetches() >= 2 }).await,
        "no background refresh reached the endpoint"
    );
    assert_eq!(jwks.fetches(), 2, "one refresh");
    assert!(
        poll_until(EVENT_LIMIT, || async {
            validator.validate(&token).await.err() == Some(AuthError::NoMatchingKey)
        })
        .await,
        "the refreshed set never replaced the stale one"
    );
    // Until then the stale set answered without fetching; then rsa-1's kid, unknown to the new
    // set, was looked up once more (no minimum interval here) before the 401.
    assert_eq!(jwks.fetches(), 3);
}

#[tokio::test]
async fn unreachable_jwks_without_cache_is_503() {
    // Bind and drop a listener: nothing listens on that port any more.
    let port = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let validator = builder(&format!("http://127.0.0.1:{port}/jwks.json"))
        .jwks_min_refetch_interval(Duration::from_secs(30))
        .build()
        .expect("config");
    let addr = gateway(validator).await;
    let client = client();
    for _ in 0..2 {
        let reply = get_bearer(&client, addr, &rsa_token("rsa-1")).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
        assert_eq!(reply.body, r#"{"detail":"Signing keys unavailable"}"#);
        assert!(reply.headers.get("www-authenticate").is_none());
        let retry_after: u64 = reply.headers["retry-after"]
            .to_str()
            .expect("ascii")
            .parse()
            .expect("seconds");
        assert!((1..=30).contains(&retry_after), "{retry_after}");
    }
    // Missing credentials are still a plain 401.
    let reply = get(&client, addr, None).await;
    assert_401(&reply, "Missing bearer token", &invalid_token_challenge());
}

#[tokio::test]
async fn jwks_and_static_keys_together() {
    let jwks = JwksServer::start(&["rsa"]).await;
    let validator = JwtValidator::builder()
        .issuer(
            Issuer::new(ISSUER)
                .hmac_secret(SECRET, [Algorithm::HS256])
                .jwks_url(jwks.url())
                .expect("url")
                .jwks_algorithms([Algorithm::RS256]),
        )
        .audience(AUDIENCE)
        .build()
        .expect("config");
    let addr = gateway(validator).await;
    let client = client();
    assert_ok(
        &get_bearer(&client, addr, &rsa_token("rsa-1")).await,
        "alice",
    );
    let token = sign(Algorithm::HS256, &hmac_key(SECRET), None, &good_claims());
    assert_ok(&get_bearer(&client, addr, &token).await, "alice");
    // ES256 is outside the issuer's JWKS allow-list.
    let token = sign(
        Algorithm::ES256,
        &private_key("ec256"),
        Some("ec256-1"),
        &good_claims(),
    );
    assert_401(
        &get_bearer(&client, addr, &token).await,
        "Unsupported token algorithm",
        &invalid_token_challenge(),
    );
}

#[tokio::test]
async fn jwks_over_https() {
    let jwks = JwksServer::start_tls(&["rsa", "ed25519"]).await;
    assert!(jwks.url().starts_with("https://127.0.0.1:"));
    let validator = builder(&jwks.url())
        .jwks_tls_config(client_tls_trusting_test_ca())
        .build()
        .expect("config");
    let addr = gateway(validator).await;
    let client = client();
    assert_ok(
        &get_bearer(&client, addr, &rsa_token("rsa-1")).await,
        "alice",
    );
    assert_eq!(jwks.fetches(), 1);

    // Default TLS settings (platform roots) do not trust the test CA: the fetch fails.
    match builder(&jwks.url()).build() {
        // No native roots on this machine at all: refused at build time for an https URL.
        Err(ClaimsConfigError::Tls(_)) => {}
        Err(other) => panic!("unexpected config error {other}"),
        Ok(validator) => {
            let err = validator
                .prefetch()
                .await
                .expect_err("untrusted certificate");
            assert!(err.reason.contains("request failed"), "{err}");
            assert!(matches!(
                validator.validate(&rsa_token("rsa-1")).await,
                Err(AuthError::KeysUnavailable { .. })
            ));
        }
    }
    assert_eq!(jwks.fetches(), 1, "the handshake failed before any request");
}

async fn futures_join<T: Send + 'static>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        out.push(handle.await.expect("task"));
    }
    out
}
