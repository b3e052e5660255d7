//! The library entry points without the binary: `Gateway::from_config(..).serve(shutdown)` in a
//! few lines, the tower service alone, `[auth.jwt]` with a PEM public key (RS256) instead of an
//! HS256 secret, `GatewayConfig` errors for unreadable files, and an integrator's tower layer
//! around every backend stack.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcp_config_store::{MemoryStore, UserConfig};
use mcp_gateway::config::GatewayConfig;
use mcp_gateway::{Gateway, GatewayError};
use mcp_router::UpstreamRequest;
use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::json;
use support::{AUDIENCE, ISSUER, unix_now, users_json, workdir, write};
use tower::ServiceExt;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn rs256_token(sub: &str) -> String {
    let pem = std::fs::read(format!("{FIXTURES}/rsa_private.pem")).expect("private key");
    encode(
        &Header::new(Algorithm::RS256),
        &json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": unix_now() + 600}),
        &EncodingKey::from_rsa_pem(&pem).expect("rsa key"),
    )
    .expect("encode")
}

#[tokio::test]
async fn pem_public_key_verifies_rs256_and_hs256_is_off() {
    let config = GatewayConfig::from_toml_str(&format!(
        r#"
[listen]
addr = "127.0.0.1:0"
admin_addr = ""
[auth.jwt]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
hs256_secret_env = ""
public_key_pem = "{FIXTURES}/rsa_public.pem"
algorithms = ["RS256"]
"#
    ))
    .expect("valid config");
    let alice = UserConfig::from_json_str(
        r#"{"virtual_hosts":{"vh1":{"backends":{"b":{"url":"http://127.0.0.1:9/mcp"}}}}}"#,
    )
    .expect("user config");
    let gateway = Gateway::builder(config)
        .user_store(MemoryStore::new().with_user("alice", alice))
        .build()
        .await
        .expect("gateway");
    let service = gateway.service();
    let call = |token: String| {
        let service = service.clone();
        async move {
            let req = Request::post("/servers/vh2/mcp")
                .header(header::HOST, "gw.test")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Full::<Bytes>::default())
                .expect("request");
            let res = service.oneshot(req).await.expect("infallible");
            let status = res.status();
            let body = res.into_body().collect().await.expect("body").to_bytes();
            (status, body)
        }
    };
    // RS256 with the configured public key: authenticated (then 404 for an unknown vhost).
    let (status, body) = call(rs256_token("alice")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, r#"{"detail":"Server not found"}"#);
    // HS256 is not configured: refused.
    let (status, body) = call(support::token("alice")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body, r#"{"detail":"Unsupported token algorithm"}"#);
}

#[tokio::test]
async fn from_config_then_serve_until_shutdown() {
    let dir = workdir("lib-serve");
    write(dir.path(), "users.json", &users_json(&[]));
    let config_path = write(
        dir.path(),
        "gateway.toml",
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin_addr = \"127.0.0.1:0\"\n[auth.jwt]\nhs256_secret_env = \"\"\njwks_url = \"http://127.0.0.1:9/jwks.json\"\n",
    );
    let config = mcp_gateway::config::EffectiveConfig::from_sources(Some(&config_path), [], &[])
        .expect("layers")
        .build()
        .expect("config");
    assert_eq!(config.config_store.path, dir.path().join("users.json"));

    let bound = Gateway::from_config(config)
        .await
        .expect("gateway")
        .bind()
        .await
        .expect("bind");
    let addr = bound.local_addr();
    let admin = bound.admin_addr().expect("admin");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(bound.serve(async move {
        let _ = stopped.await;
    }));
    let reply = support::send_body(addr, "POST", "/servers/vh1/mcp", &[], "{}").await;
    assert_eq!(reply.status, 401);
    let ready = support::send_body(admin, "GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert_eq!(ready.json()["checks"]["config_store"]["kind"], "file");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("serve returns after shutdown")
        .expect("task")
        .expect("serve ok");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "listener closed"
    );
}

#[tokio::test]
async fn unreadable_files_are_configuration_errors() {
    let dir = workdir("lib-errors");
    let config = GatewayConfig::from_toml_str(&format!(
        "[config_store]\npath = \"{}/missing.json\"\n[auth.jwt]\nhs256_secret_env = \"\"\npublic_key_pem = \"{}/missing.pem\"\n",
        dir.path().display(),
        dir.path().display()
    ))
    .expect("syntactically valid");
    let err = Gateway::from_config(config)
        .await
        .expect_err("missing files");
    assert!(matches!(err, GatewayError::Config(_)), "{err}");
    assert!(
        err.to_string()
            .contains("auth.jwt.public_key_pem: cannot read"),
        "{err}"
    );

    let config = GatewayConfig::from_toml_str(&format!(
        "[config_store]\npath = \"{}/missing.json\"\n",
        dir.path().display()
    ))
    .expect("syntactically valid");
    let err = Gateway::builder(config)
        .hs256_secret(b"library-test-secret-library-test".to_vec())
        .build()
        .await
        .expect_err("missing users file");
    assert!(
        err.to_string()
            .contains("config_store.path: cannot read the user configuration file"),
        "{err}"
    );
}

/// A layer that records what passes through the backend stacks it wraps, and how many stacks it
/// wrapped: `GatewayBuilder::backend_layer` puts it around every backend stack.
#[derive(Clone, Default)]
struct Recording {
    stacks: Arc<AtomicUsize>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl<S> tower::Layer<S> for Recording {
    type Service = RecordingService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        self.stacks.fetch_add(1, Ordering::SeqCst);
        RecordingService {
            inner,
            calls: Arc::clone(&self.calls),
        }
    }
}

#[derive(Clone)]
struct RecordingService<S> {
    inner: S,
    calls: Arc<Mutex<Vec<String>>>,
}

impl<S: tower::Service<UpstreamRequest>> tower::Service<UpstreamRequest> for RecordingService<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: UpstreamRequest) -> Self::Future {
        self.calls.lock().expect("calls").push(format!(
            "{} {} {}",
            req.backend(),
            req.method(),
            req.name().unwrap_or("-")
        ));
        self.inner.call(req)
    }
}

#[tokio::test]
async fn an_integrators_layer_wraps_every_backend_stack_per_scope() {
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let config = GatewayConfig::from_toml_str(&format!(
        r#"
[listen]
addr = "127.0.0.1:0"
admin_addr = ""
[auth.jwt]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
"#
    ))
    .expect("valid config");
    let user = |name: &str| {
        UserConfig::from_json_str(&format!(
            r#"{{"virtual_hosts":{{"vh":{{"backends":{{"{name}":{{"url":"{}"}}}}}}}}}}"#,
            backend.url()
        ))
        .expect("user config")
    };
    let recording = Recording::default();
    let gateway = Gateway::builder(config)
        .hs256_secret(support::SECRET)
        .user_store(
            MemoryStore::new()
                .with_user("alice", user("b"))
                .with_user("bob", user("b")),
        )
        // The example's limit and the recording layer, both around every stack.
        .backend_layer(tower::limit::ConcurrencyLimitLayer::new(1))
        .backend_layer(recording.clone())
        .build()
        .await
        .expect("gateway");
    let service = gateway.service();
    let send = |sub: &'static str, method: &'static str, params: serde_json::Value| {
        let service = service.clone();
        async move {
            let (headers, body) = support::modern_request(method, params);
            let mut req = Request::post("/servers/vh/mcp")
                .header(header::HOST, "gw.test")
                .header(header::AUTHORIZATION, support::bearer(sub));
            for (name, value) in headers {
                req = req.header(name, value);
            }
            let res = service
                .oneshot(req.body(Full::new(Bytes::from(body))).expect("request"))
                .await
                .expect("infallible");
            assert_eq!(res.status(), StatusCode::OK);
            let body = res.into_body().collect().await.expect("body").to_bytes();
            String::from_utf8(body.to_vec()).expect("utf-8")
        }
    };
    for (sub, text) in [("alice", "one"), ("alice", "two"), ("bob", "three")] {
        let params = json!({"name": "b-echo", "arguments": {"text": text}});
        let answer = send(sub, "tools/call", params).await;
        assert!(answer.contains(&format!("alpha: {text}")), "{answer}");
    }
    // A backend describing itself (the per-backend step of server/discover) is an exchange
    // like any other: through the same stack and layer.
    let discovered = send("alice", "server/discover", json!({})).await;
    assert!(discovered.contains("supportedVersions"), "{discovered}");
    assert_eq!(
        *recording.calls.lock().expect("calls"),
        [
            "b tools/call echo",
            "b tools/call echo",
            "b tools/call echo",
            "b server/discover -"
        ],
        "every exchange with the backend went through the layer"
    );
    // One stack per credential scope, kept between calls: alice's and bob's.
    assert_eq!(recording.stacks.load(Ordering::SeqCst), 2);
    backend.stop().await;
}
