//! The whole stack (foundation layers + router) mounted in an axum `Router`, next to the
//! application's own routes: integrators can nest the gateway into an existing axum service.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use jsonwebtoken::Algorithm;
use mcp_claims::{ClaimsLayer, Issuer, JwtValidator};
use mcp_config_store::{ConfigStoreLayer, MemoryStore, UserConfig, VirtualHostConfigLayer};
use mcp_router::McpRouter;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::stack::{AUDIENCE, ISSUER, modern_request, token, user_config};
use mcp_vhost::VhostLayer;
use serde_json::json;
use tower::ServiceBuilder;

#[tokio::test]
async fn gateway_stack_runs_inside_an_axum_router() {
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let store = MemoryStore::new();
    let config = UserConfig::from_json_str(&user_config(&[("alpha", backend.url())]).to_string())
        .expect("config");
    store.insert("alice", config);
    let validator = JwtValidator::builder()
        .issuer(
            Issuer::new(ISSUER)
                .hmac_secret(b"test-secret-test-secret-test-sec", [Algorithm::HS256]),
        )
        .audience(AUDIENCE)
        .build()
        .expect("validator");
    let mcp = ServiceBuilder::new()
        .layer(VhostLayer::new())
        .layer(ClaimsLayer::new(validator))
        .layer(ConfigStoreLayer::from_shared(Arc::new(store)))
        .layer(VirtualHostConfigLayer::new())
        .service(McpRouter::builder().build());
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route_service("/servers/{vhost}/mcp", mcp);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });

    let health = mcp_test_support::send(addr, "GET", "/health", &[]).await;
    assert_eq!(health.text(), "ok");

    let (headers, body) = modern_request(
        "tools/call",
        json!({"name": "alpha-echo", "arguments": {"text": "via axum"}}),
    );
    let auth = format!("Bearer {}", token("alice"));
    let mut all: Vec<(&str, &str)> = vec![("authorization", &auth)];
    all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
    let reply = mcp_test_support::send_body(addr, "POST", "/servers/vh/mcp", &all, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.json()["result"]["content"][0]["text"],
        "alpha: via axum"
    );

    // The foundation layers answer inside axum exactly as under plain hyper.
    let missing = mcp_test_support::send_body(addr, "POST", "/servers/vh/mcp", &[], &body).await;
    assert_eq!(missing.status, 401);
    let unknown =
        mcp_test_support::send_body(addr, "POST", "/servers/other/mcp", &all, &body).await;
    assert_eq!(unknown.text(), r#"{"detail":"Server not found"}"#);
}
