//! book: docs/src/failure-modes.md over a real socket: the four foundation layers stacked in front of a trivial inner
//! service (vhost -> claims -> config store -> virtual host config), every row they own asserted
//! with status, headers and exact body; with a memory store and with a private Redis.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcp_claims::{ClaimsLayer, Issuer, JwtValidator};
use mcp_config_store::{
    CachedStore, ConfigStoreLayer, MemoryStore, RedisStore, RedisStoreConfig, UserConfig,
    UserConfigStore, VirtualHost, VirtualHostConfigLayer,
};
use mcp_core::{Principal, VirtualHostId};
use mcp_test_support::RedisServer;
use mcp_test_support::{Reply, poll_until, send, unix_now};
use mcp_vhost::VhostLayer;
use serde_json::json;
use tower::{ServiceBuilder, service_fn};

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "mcp-gateway";
const SECRET: &[u8] = b"test-secret-test-secret-test-sec";
const METADATA_BASE: &str = "http://gw.test/.well-known/oauth-protected-resource";

fn token_with(claims: serde_json::Value, alg: Algorithm, secret: &[u8]) -> String {
    encode(
        &Header::new(alg),
        &claims,
        &EncodingKey::from_secret(secret).expect("hmac key"),
    )
    .expect("encode")
}

fn token(sub: &str) -> String {
    token_with(
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": unix_now() + 600}),
        Algorithm::HS256,
        SECRET,
    )
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn alice_config() -> UserConfig {
    UserConfig::from_json_str(
        r#"{"virtual_hosts":{"vh1":{"backends":{"weather":{"url":"http://127.0.0.1:9/mcp"}}}}}"#,
    )
    .expect("valid user config")
}

/// The inner service: reports what the layers established.
async fn inner(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let ext = req.extensions();
    let report = json!({
        "vhost": ext.get::<VirtualHostId>().map(ToString::to_string),
        "principal": ext.get::<Principal>().map(ToString::to_string),
        "backends": ext.get::<VirtualHost>().map(|v| v.config.backends.keys().cloned().collect::<Vec<_>>()),
        "user_config": ext.get::<Arc<UserConfig>>().is_some(),
    });
    Ok(Response::new(Full::new(Bytes::from(report.to_string()))))
}

/// Serves the foundation stack over `store` and returns its address.
async fn serve_stack(store: Arc<dyn UserConfigStore>) -> std::net::SocketAddr {
    let validator = JwtValidator::builder()
        .issuer(Issuer::new(ISSUER).hmac_secret(SECRET, [Algorithm::HS256]))
        .audience(AUDIENCE)
        .leeway(Duration::from_secs(5))
        .build()
        .expect("validator");
    // The challenge points at the per-virtual-host RFC 9728 document: VhostLayer runs first.
    let claims =
        ClaimsLayer::new(validator).resource_metadata_fn(|parts: &http::request::Parts| {
            let id = parts.extensions.get::<VirtualHostId>()?;
            Some(format!("{METADATA_BASE}/servers/{id}/mcp"))
        });
    let service = ServiceBuilder::new()
        .layer(VhostLayer::new())
        .layer(claims)
        .layer(ConfigStoreLayer::from_shared(store))
        .layer(VirtualHostConfigLayer::new())
        .service(service_fn(inner));
    mcp_test_support::serve(service).await
}

fn assert_detail(reply: &Reply, status: u16, detail: &str) {
    assert_eq!(reply.status.as_u16(), status, "body: {}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.text(), json!({ "detail": detail }).to_string());
}

fn assert_invalid_token(reply: &Reply, detail: &str) {
    assert_detail(reply, 401, detail);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(
            format!(
                "Bearer error=\"invalid_token\", resource_metadata=\"{METADATA_BASE}/servers/vh1/mcp\""
            )
            .as_str()
        )
    );
}

const PATH: &str = "/servers/vh1/mcp";

#[tokio::test]
async fn foundation_stack_answers_every_http_row_over_a_socket() {
    let store = MemoryStore::new().with_user("alice", alice_config());
    let addr = serve_stack(Arc::new(CachedStore::new(store))).await;
    let alice = bearer(&token("alice"));

    // Success: every extension reached the inner service.
    let ok = send(addr, "POST", PATH, &[("authorization", &alice)]).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let body: serde_json::Value = serde_json::from_slice(&ok.body).expect("json");
    assert_eq!(body["vhost"], "vh1");
    assert_eq!(body["principal"], format!("alice@{ISSUER}"));
    assert_eq!(body["backends"], json!(["weather"]));
    assert_eq!(body["user_config"], true);

    // Row 1: path is not /servers/{id}/mcp -> 400 (before authentication).
    assert_detail(
        &send(addr, "POST", "/servers/vh1", &[("authorization", &alice)]).await,
        400,
        "Not an MCP endpoint path",
    );
    assert_detail(
        &send(addr, "POST", "/other", &[]).await,
        400,
        "Not an MCP endpoint path",
    );
    assert_detail(
        &send(addr, "POST", "/servers/a%20b/mcp", &[]).await,
        400,
        "Invalid virtual host id",
    );

    // Row 2: missing Authorization or a scheme that is not Bearer -> 401 + challenge.
    assert_invalid_token(&send(addr, "POST", PATH, &[]).await, "Missing bearer token");
    assert_invalid_token(
        &send(
            addr,
            "POST",
            PATH,
            &[("authorization", "Basic YWxpY2U6cHc=")],
        )
        .await,
        "Authorization scheme must be Bearer",
    );
    // Schemes are case-insensitive.
    let lower = format!("bearer {}", token("alice"));
    assert_eq!(
        send(addr, "POST", PATH, &[("authorization", &lower)])
            .await
            .status,
        200
    );

    // Row 3: undecodable, unsupported algorithm, no matching key.
    assert_invalid_token(
        &send(addr, "POST", PATH, &[("authorization", "Bearer not.a.jwt")]).await,
        "Malformed token",
    );
    let hs384 = token_with(
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": unix_now() + 600}),
        Algorithm::HS384,
        SECRET,
    );
    assert_invalid_token(
        &send(addr, "POST", PATH, &[("authorization", &bearer(&hs384))]).await,
        "Unsupported token algorithm",
    );
    let wrong_key = token_with(
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": unix_now() + 600}),
        Algorithm::HS256,
        b"another-secret-another-secret-an",
    );
    assert_invalid_token(
        &send(
            addr,
            "POST",
            PATH,
            &[("authorization", &bearer(&wrong_key))],
        )
        .await,
        "Invalid token signature",
    );

    // Row 4: expired beyond leeway, not yet valid, wrong issuer, wrong audience.
    let cases = [
        (
            json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": unix_now() - 60}),
            "Token expired",
        ),
        (
            json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": unix_now() + 600, "nbf": unix_now() + 300}),
            "Token not yet valid",
        ),
        (
            json!({"iss": "https://evil.test", "aud": AUDIENCE, "sub": "alice", "exp": unix_now() + 600}),
            "Invalid token issuer",
        ),
        (
            json!({"iss": ISSUER, "aud": "someone-else", "sub": "alice", "exp": unix_now() + 600}),
            "Invalid token audience",
        ),
    ];
    for (claims, detail) in cases {
        let t = token_with(claims, Algorithm::HS256, SECRET);
        assert_invalid_token(
            &send(addr, "POST", PATH, &[("authorization", &bearer(&t))]).await,
            detail,
        );
    }
    // Expired but within the 5 s leeway is still accepted.
    let within = token_with(
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": unix_now() - 2}),
        Algorithm::HS256,
        SECRET,
    );
    assert_eq!(
        send(addr, "POST", PATH, &[("authorization", &bearer(&within))])
            .await
            .status,
        200
    );

    // Row 5: no user config for the subject -> 400.
    let bob = bearer(&token("bob"));
    assert_detail(
        &send(addr, "POST", PATH, &[("authorization", &bob)]).await,
        400,
        "No user configuration",
    );

    // Row 8: virtual host not in the caller's config -> 404 with the exact body.
    let missing = send(
        addr,
        "POST",
        "/servers/elsewhere/mcp",
        &[("authorization", &alice)],
    )
    .await;
    assert_detail(&missing, 404, "Server not found");
    assert_eq!(missing.text(), r#"{"detail":"Server not found"}"#);
}

/// Rows 5-7 against Redis: missing (400), undecodable (500), unreachable (503 + Retry-After,
/// fast), then recovery without restarting anything, and an edit seen within a second.
#[tokio::test]
async fn redis_backed_stack_maps_store_failures_and_recovers() {
    let Some(mut redis) = RedisServer::start().await else {
        return; // RedisServer::start already said loudly why.
    };
    let config = RedisStoreConfig::new(redis.url());
    // While Redis is down the first load may spend the store's own timeouts once (a pool wait, a
    // connection attempt, a recycle check, the command) before the store marks itself down; later
    // loads fail at once. The bound is that plus 5 s for a loaded 2-core machine (a release build
    // beside the tests): a store that waited on reconnects would still miss it.
    let outage_limit = config.pool_wait_timeout
        + config.connect_timeout
        + 2 * config.response_timeout
        + Duration::from_secs(5);
    let store = RedisStore::connect(config).await.expect("connect");
    store.put("alice", &alice_config()).await.expect("put");
    let mut conn = store.pool().get().await.expect("connection");
    deadpool_redis::redis::cmd("SET")
        .arg("mcpgw:user:mallory")
        .arg("{not json")
        .query_async::<()>(&mut conn)
        .await
        .expect("set garbage");
    drop(conn);
    let cached = CachedStore::new(store.clone());
    let addr = serve_stack(Arc::new(cached)).await;
    let alice = bearer(&token("alice"));

    assert_eq!(
        send(addr, "POST", PATH, &[("authorization", &alice)])
            .await
            .status,
        200
    );
    assert_detail(
        &send(
            addr,
            "POST",
            PATH,
            &[("authorization", &bearer(&token("bob")))],
        )
        .await,
        400,
        "No user configuration",
    );
    assert_detail(
        &send(
            addr,
            "POST",
            PATH,
            &[("authorization", &bearer(&token("mallory")))],
        )
        .await,
        500,
        "User configuration could not be loaded",
    );

    // An edit through the store is visible through the gateway within a second.
    let mut edited = alice_config();
    let vh = edited.virtual_hosts.remove("vh1").expect("vh1");
    edited.virtual_hosts.insert("vh2".to_owned(), vh);
    store.put("alice", &edited).await.expect("put edit");
    let seen = poll_until(Duration::from_secs(1), || async {
        send(
            addr,
            "POST",
            "/servers/vh2/mcp",
            &[("authorization", &alice)],
        )
        .await
        .status
            == 200
    })
    .await;
    assert!(seen, "edit not visible within 1 s");

    let Some(redis) = redis.controllable() else {
        return; // External REDIS_URL: outage tests are skipped (announced by the helper).
    };
    redis.stop().await;
    // A subject that is not cached must reach the store: 503, quickly, with Retry-After.
    let carol = bearer(&token("carol"));
    for _ in 0..3 {
        let started = Instant::now();
        let reply = send(addr, "POST", PATH, &[("authorization", &carol)]).await;
        assert_detail(&reply, 503, "Configuration store unavailable");
        assert_eq!(reply.header("retry-after"), Some("1"));
        assert!(
            started.elapsed() < outage_limit,
            "503 must not wait on retries: {:?}",
            started.elapsed()
        );
    }

    redis.restart().await;
    store.put("carol", &alice_config()).await.ok();
    let recovered = poll_until(Duration::from_secs(10), || async {
        store.put("carol", &alice_config()).await.is_ok()
            && send(
                addr,
                "POST",
                "/servers/vh1/mcp",
                &[("authorization", &carol)],
            )
            .await
            .status
                == 200
    })
    .await;
    assert!(recovered, "the stack did not recover after Redis came back");
}
