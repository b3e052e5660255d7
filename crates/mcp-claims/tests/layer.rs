//! `ClaimsLayer` over a real socket: hyper server with the layer in front of an echo service, hyper
//! client. Static keys (HMAC secrets and PEM public keys); JWKS cases are in `jwks.rs`.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Request, StatusCode};
use hyper::body::Incoming;
use jsonwebtoken::Algorithm;
use mcp_claims::{ClaimsLayer, Issuer, JwtValidator};
use mcp_core::VirtualHostId;
use serde_json::json;
use tower::{Layer, ServiceBuilder};

use common::*;

const OTHER_ISSUER: &str = "https://other.test";
const RSA_ONLY_ISSUER: &str = "https://rsa-only.test";

fn validator(required_scopes: &[&str]) -> JwtValidator {
    JwtValidator::builder()
        .issuer(
            Issuer::new(ISSUER)
                .hmac_secret(
                    SECRET,
                    [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512],
                )
                .public_key_pem(
                    fixture("rsa_public.pem"),
                    [Algorithm::RS256, Algorithm::PS256],
                )
                .expect("rsa")
                .public_key_pem(fixture("ec256_public.pem"), [Algorithm::ES256])
                .expect("ec256")
                .public_key_pem(fixture("ec384_public.pem"), [Algorithm::ES384])
                .expect("ec384")
                .public_key_pem(fixture("ed25519_public.pem"), [Algorithm::EdDSA])
                .expect("ed25519"),
        )
        .issuer(Issuer::new(OTHER_ISSUER).hmac_secret(b"other-secret", [Algorithm::HS256]))
        .issuer(
            Issuer::new(RSA_ONLY_ISSUER)
                .public_key_pem(fixture("rsa_public.pem"), [Algorithm::RS256])
                .expect("rsa"),
        )
        .audiences([AUDIENCE, "https://gw.test/mcp"])
        .leeway(Duration::from_secs(30))
        .required_scopes(required_scopes.iter().copied())
        .build()
        .expect("valid config")
}

async fn server() -> SocketAddr {
    serve(ClaimsLayer::new(validator(&[])).resource_metadata(RESOURCE_METADATA)).await
}

#[tokio::test]
async fn every_algorithm_family_is_accepted() {
    let addr = server().await;
    let client = client();
    let claims = good_claims();
    let cases = [
        (Algorithm::HS256, hmac_key(SECRET)),
        (Algorithm::HS384, hmac_key(SECRET)),
        (Algorithm::HS512, hmac_key(SECRET)),
        (Algorithm::RS256, private_key("rsa")),
        (Algorithm::PS256, private_key("rsa")),
        (Algorithm::ES256, private_key("ec256")),
        (Algorithm::ES384, private_key("ec384")),
        (Algorithm::EdDSA, private_key("ed25519")),
    ];
    for (alg, key) in cases {
        let token = sign(alg, &key, None, &claims);
        let reply = get_bearer(&client, addr, &token).await;
        assert_ok(&reply, "alice");
        assert_eq!(reply.json()["alg"], format!("{alg:?}"));
        assert_eq!(reply.json()["iss"], ISSUER);
        assert_eq!(reply.json()["scopes"], json!(["mcp", "tools:read"]));
    }
}

#[tokio::test]
async fn second_issuer_uses_its_own_keys() {
    let addr = server().await;
    let client = client();
    let claims = claims_with(json!({"iss": OTHER_ISSUER, "sub": "bob"}));
    let token = sign(Algorithm::HS256, &hmac_key(b"other-secret"), None, &claims);
    let reply = get_bearer(&client, addr, &token).await;
    assert_ok(&reply, "bob");
    assert_eq!(reply.json()["principal"], "bob@https://other.test");

    // The first issuer's secret does not verify tokens of the second.
    let token = sign(Algorithm::HS256, &hmac_key(SECRET), None, &claims);
    let reply = get_bearer(&client, addr, &token).await;
    assert_401(
        &reply,
        "Invalid token signature",
        &invalid_token_challenge(),
    );
}

#[tokio::test]
async fn wrong_key_is_refused() {
    let addr = server().await;
    let client = client();
    let cases = [
        (Algorithm::RS256, private_key("rsa2")),
        (Algorithm::PS256, private_key("rsa2")),
        (Algorithm::HS256, hmac_key(b"not-the-secret")),
    ];
    for (alg, key) in cases {
        let token = sign(alg, &key, None, &good_claims());
        let reply = get_bearer(&client, addr, &token).await;
        assert_401(
            &reply,
            "Invalid token signature",
            &invalid_token_challenge(),
        );
        assert!(!reply.body.contains(&token));
    }
}

#[tokio::test]
async fn algorithm_confusion_is_refused() {
    let addr = server().await;
    let client = client();
    let rsa_public_pem = fixture("rsa_public.pem");

    // HS256 signed with the RSA public key bytes as the HMAC secret, for an issuer that only has
    // the RSA key: no key of that issuer is bound to HS256.
    let claims = claims_with(json!({"iss": RSA_ONLY_ISSUER}));
    let token = sign(Algorithm::HS256, &hmac_key(&rsa_public_pem), None, &claims);
    let reply = get_bearer(&client, addr, &token).await;
    assert_401(
        &reply,
        "Unsupported token algorithm",
        &invalid_token_challenge(),
    );

    // Same trick against the issuer that also has an HMAC secret: the secret does not verify it.
    let token = sign(
        Algorithm::HS256,
        &hmac_key(&rsa_public_pem),
        None,
        &good_claims(),
    );
    let reply = get_bearer(&client, addr, &token).await;
    assert_401(
        &reply,
        "Invalid token signature",
        &invalid_token_challenge(),
    );

    // The RSA key is bound to RS256 and PS256 only.
    let token = sign(Algorithm::RS384, &private_key("rsa"), None, &good_claims());
    let reply = get_bearer(&client, addr, &token).await;
    assert_401(
        &reply,
        "Unsupported token algorithm",
        &invalid_token_challenge(),
    );
}

#[tokio::test]
async fn alg_none_is_refused() {
    let addr = server().await;
    let client = client();
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(good_claims().to_string());
    for token in [
        format!("{header}.{payload}."),
        format!("{header}.{payload}.{}", URL_SAFE_NO_PAD.encode("sig")),
    ] {
        let reply = get_bearer(&client, addr, &token).await;
        assert_401(
            &reply,
            "Unsupported token algorithm",
            &invalid_token_challenge(),
        );
    }
}

#[tokio::test]
async fn expiry_honours_leeway() {
    let addr = server().await;
    let client = client();
    let key = private_key("ec256");

    let expired = claims_with(json!({"exp": now() - 120}));
    let reply = get_bearer(&client, addr, &sign(Algorithm::ES256, &key, None, &expired)).await;
    assert_401(&reply, "Token expired", &invalid_token_challenge());

    let within_leeway = claims_with(json!({"exp": now() - 10}));
    let reply = get_bearer(
        &client,
        addr,
        &sign(Algorithm::ES256, &key, None, &within_leeway),
    )
    .await;
    assert_ok(&reply, "alice");

    let no_exp = claims_with(json!({"exp": null}));
    let reply = get_bearer(&client, addr, &sign(Algorithm::ES256, &key, None, &no_exp)).await;
    assert_401(
        &reply,
        "Token is missing a required claim",
        &invalid_token_challenge(),
    );
}

#[tokio::test]
async fn not_before_is_honoured() {
    let addr = server().await;
    let client = client();
    let key = private_key("ed25519");

    let future = claims_with(json!({"nbf": now() + 300}));
    let reply = get_bearer(&client, addr, &sign(Algorithm::EdDSA, &key, None, &future)).await;
    assert_401(&reply, "Token not yet valid", &invalid_token_challenge());

    let within_leeway = claims_with(json!({"nbf": now() + 10}));
    let reply = get_bearer(
        &client,
        addr,
        &sign(Algorithm::EdDSA, &key, None, &within_leeway),
    )
    .await;
    assert_ok(&reply, "alice");
}

#[tokio::test]
async fn wrong_issuer_and_audience_are_refused() {
    let addr = server().await;
    let client = client();
    let key = hmac_key(SECRET);

    let claims = claims_with(json!({"iss": "https://evil.test"}));
    let reply = get_bearer(&client, addr, &sign(Algorithm::HS256, &key, None, &claims)).await;
    assert_401(&reply, "Invalid token issuer", &invalid_token_challenge());

    let claims = claims_with(json!({"aud": "someone-else"}));
    let reply = get_bearer(&client, addr, &sign(Algorithm::HS256, &key, None, &claims)).await;
    assert_401(&reply, "Invalid token audience", &invalid_token_challenge());

    let claims = claims_with(json!({"aud": ["someone-else", "https://gw.test/mcp"]}));
    let reply = get_bearer(&client, addr, &sign(Algorithm::HS256, &key, None, &claims)).await;
    assert_ok(&reply, "alice");

    let claims = claims_with(json!({"aud": null}));
    let reply = get_bearer(&client, addr, &sign(Algorithm::HS256, &key, None, &claims)).await;
    assert_401(
        &reply,
        "Token is missing a required claim",
        &invalid_token_challenge(),
    );
}

#[tokio::test]
async fn malformed_and_missing_credentials_are_refused() {
    let addr = server().await;
    let client = client();

    let reply = get(&client, addr, None).await;
    assert_401(&reply, "Missing bearer token", &invalid_token_challenge());

    let reply = get(&client, addr, Some("Basic YWxpY2U6c2VjcmV0")).await;
    assert_401(
        &reply,
        "Authorization scheme must be Bearer",
        &invalid_token_challenge(),
    );

    for token in ["not-a-jwt", "a.b.c", "eyJhbGciOiJIUzI1NiJ9.e30", "...."] {
        let reply = get_bearer(&client, addr, token).await;
        assert_401(&reply, "Malformed token", &invalid_token_challenge());
        assert!(!reply.body.contains(token));
    }

    let reply = get(&client, addr, Some("Bearer")).await;
    assert_401(&reply, "Malformed token", &invalid_token_challenge());
}

#[tokio::test]
async fn bearer_scheme_is_case_insensitive() {
    let addr = server().await;
    let client = client();
    let token = sign(Algorithm::RS256, &private_key("rsa"), None, &good_claims());
    for scheme in ["bearer", "BEARER", "BeArEr"] {
        let reply = get(&client, addr, Some(&format!("{scheme} {token}"))).await;
        assert_ok(&reply, "alice");
    }
}

#[tokio::test]
async fn insufficient_scope_is_403_with_challenge() {
    let addr = serve(
        ClaimsLayer::new(validator(&["mcp", "tools:call"])).resource_metadata(RESOURCE_METADATA),
    )
    .await;
    let client = client();
    let key = hmac_key(SECRET);

    let token = sign(Algorithm::HS256, &key, None, &good_claims()); // scope "mcp tools:read"
    let reply = get_bearer(&client, addr, &token).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(
        reply.www_authenticate(),
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"mcp tools:call\", resource_metadata=\"{RESOURCE_METADATA}\""
        )
    );
    assert_eq!(reply.headers["content-type"], "application/json");
    assert_eq!(reply.body, r#"{"detail":"Insufficient scope"}"#);

    for claims in [
        claims_with(json!({"scope": "tools:call mcp"})),
        claims_with(json!({"scope": null, "scp": ["mcp", "tools:call"]})),
        claims_with(json!({"scope": null, "scopes": ["tools:call", "mcp", "extra"]})),
    ] {
        let token = sign(Algorithm::HS256, &key, None, &claims);
        assert_ok(&get_bearer(&client, addr, &token).await, "alice");
    }

    // Authentication failures stay 401 invalid_token, scope check or not.
    let reply = get(&client, addr, None).await;
    assert_401(&reply, "Missing bearer token", &invalid_token_challenge());
}

#[tokio::test]
async fn challenge_without_resource_metadata() {
    let addr = serve(ClaimsLayer::new(validator(&["admin"]))).await;
    let client = client();
    let reply = get(&client, addr, None).await;
    assert_401(
        &reply,
        "Missing bearer token",
        "Bearer error=\"invalid_token\"",
    );
    let token = sign(Algorithm::HS256, &hmac_key(SECRET), None, &good_claims());
    let reply = get_bearer(&client, addr, &token).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(
        reply.www_authenticate(),
        "Bearer error=\"insufficient_scope\", scope=\"admin\""
    );
}

#[tokio::test]
async fn resource_metadata_per_virtual_host() {
    let layer = ClaimsLayer::new(validator(&[])).resource_metadata_fn(|parts| {
        let vhost = parts.extensions.get::<VirtualHostId>()?;
        Some(format!(
            "https://gw.test/.well-known/oauth-protected-resource/servers/{vhost}/mcp"
        ))
    });
    // An earlier layer inserts the virtual host id (here from a header, for the test).
    let addr = serve_with(move |echo| {
        ServiceBuilder::new()
            .map_request(|mut req: Request<Incoming>| {
                if let Some(vhost) = req.headers().get("x-vhost").cloned() {
                    let vhost = VirtualHostId::new(vhost.to_str().expect("ascii"));
                    req.extensions_mut().insert(vhost);
                }
                req
            })
            .service(layer.layer(echo))
    })
    .await;
    let client = client();

    let request = Request::get(format!("http://{addr}/mcp"))
        .header("x-vhost", "team-a")
        .body(http_body_util::Empty::new())
        .expect("request");
    let response = client.request(request).await.expect("response");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer error=\"invalid_token\", resource_metadata=\"https://gw.test/.well-known/oauth-protected-resource/servers/team-a/mcp\""
    );

    // No virtual host: the closure returns None and the parameter is left out.
    let reply = get(&client, addr, None).await;
    assert_401(
        &reply,
        "Missing bearer token",
        "Bearer error=\"invalid_token\"",
    );
}
