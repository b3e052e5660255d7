//! Shared helpers of the integration tests: a hyper server running `ClaimsLayer` in front of an
//! echo service, a hyper client, token minting from the fixture keys, and a controllable JWKS
//! server.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
use mcp_claims::{Claims, ClaimsLayer};
use mcp_core::Principal;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tower::{Layer, Service, service_fn};

pub const ISSUER: &str = "https://issuer.test";
pub const AUDIENCE: &str = "mcp-gateway";
pub const SECRET: &[u8] = b"integration-test-hmac-secret-0123456789";
pub const RESOURCE_METADATA: &str = "https://gw.test/.well-known/oauth-protected-resource";

/// A fixture file's bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

/// The encoding key for a fixture private key (`rsa`, `rsa2`, `ec256`, `ec384`, `ed25519`).
pub fn private_key(name: &str) -> EncodingKey {
    let pem = fixture(&format!("{name}_private.pem"));
    match name {
        "rsa" | "rsa2" => EncodingKey::from_rsa_pem(&pem),
        "ec256" | "ec384" => EncodingKey::from_ec_pem(&pem),
        "ed25519" => EncodingKey::from_ed_pem(&pem),
        other => panic!("unknown fixture key {other}"),
    }
    .expect("fixture private key")
}

pub fn hmac_key(secret: &[u8]) -> EncodingKey {
    EncodingKey::from_secret(secret).expect("hmac key")
}

pub fn now() -> u64 {
    get_current_timestamp()
}

/// Claims that pass every check of the default test validator.
pub fn good_claims() -> Value {
    json!({
        "iss": ISSUER,
        "sub": "alice",
        "aud": AUDIENCE,
        "exp": now() + 600,
        "iat": now(),
        "scope": "mcp tools:read",
    })
}

/// `good_claims` with some fields replaced (a `null` removes the field).
pub fn claims_with(changes: Value) -> Value {
    let mut claims = good_claims();
    let map = claims.as_object_mut().expect("object");
    for (k, v) in changes.as_object().expect("object") {
        if v.is_null() {
            map.remove(k);
        } else {
            map.insert(k.clone(), v.clone());
        }
    }
    claims
}

pub fn sign(alg: Algorithm, key: &EncodingKey, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).expect("encode")
}

/// The inner service: echoes the principal and claims the layer inserted.
async fn echo(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let principal = req.extensions().get::<Principal>().cloned();
    let claims = req.extensions().get::<Claims>().cloned();
    let body = match (principal, claims) {
        (Some(p), Some(c)) => json!({
            "principal": p.to_string(),
            "sub": c.sub(),
            "iss": c.iss(),
            "scopes": c.scopes(),
            "alg": format!("{:?}", c.algorithm()),
        }),
        _ => json!({"error": "extensions missing"}),
    };
    Ok(Response::new(Full::new(Bytes::from(body.to_string()))))
}

/// Serves `layer` around the echo service on 127.0.0.1:0 (the server lives as long as the runtime).
pub async fn serve(layer: ClaimsLayer) -> SocketAddr {
    serve_with(move |svc| layer.layer(svc)).await
}

/// Serves `wrap(echo)` on 127.0.0.1:0, for stacks with more layers.
pub async fn serve_with<F, S, B>(wrap: F) -> SocketAddr
where
    F: FnOnce(tower::util::ServiceFn<fn(Request<Incoming>) -> EchoFuture>) -> S,
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let inner: fn(Request<Incoming>) -> EchoFuture = |req| Box::pin(echo(req));
    mcp_test_support::serve(wrap(service_fn(inner))).await
}

/// The future type of the echo service.
pub type EchoFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send>,
>;

/// A response as the client saw it.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("JSON body")
    }

    pub fn www_authenticate(&self) -> &str {
        self.headers
            .get(header::WWW_AUTHENTICATE)
            .expect("WWW-Authenticate")
            .to_str()
            .expect("ascii")
    }
}

pub type TestClient = Client<HttpConnector, Empty<Bytes>>;

pub fn client() -> TestClient {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// GET http://addr/mcp with the given Authorization header value.
pub async fn get(client: &TestClient, addr: SocketAddr, authorization: Option<&str>) -> Reply {
    let mut request = Request::get(format!("http://{addr}/mcp"));
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    let response = client
        .request(request.body(Empty::new()).expect("request"))
        .await
        .expect("response");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).expect("utf-8"),
    }
}

/// GET with `Authorization: Bearer <token>`.
pub async fn get_bearer(client: &TestClient, addr: SocketAddr, token: &str) -> Reply {
    get(client, addr, Some(&format!("Bearer {token}"))).await
}

/// Asserts a 200 from the echo service for `sub`.
pub fn assert_ok(reply: &Reply, sub: &str) {
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    let body = reply.json();
    assert_eq!(body["sub"], sub, "{reply:?}");
    assert_eq!(
        body["principal"],
        format!("{sub}@{}", body["iss"].as_str().expect("iss"))
    );
}

/// Asserts the exact 401 answer: status, challenge, content type and body.
pub fn assert_401(reply: &Reply, detail: &str, challenge: &str) {
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{reply:?}");
    assert_eq!(reply.www_authenticate(), challenge, "{reply:?}");
    assert_eq!(reply.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(
        reply.body,
        json!({ "detail": detail }).to_string(),
        "{reply:?}"
    );
}

/// The challenge of every 401 with the fixed resource metadata URL.
pub fn invalid_token_challenge() -> String {
    format!("Bearer error=\"invalid_token\", resource_metadata=\"{RESOURCE_METADATA}\"")
}

// ===== JWKS server =====

struct JwksState {
    body: Mutex<String>,
    status: Mutex<StatusCode>,
    delay: Mutex<Duration>,
    fetches: AtomicUsize,
}

/// A JWKS endpoint on 127.0.0.1:0 that the test can change, slow down, fail and stop.
pub struct JwksServer {
    pub addr: SocketAddr,
    tls: bool,
    state: Arc<JwksState>,
    task: tokio::task::JoinHandle<()>,
}

/// The test CA's certificate (trust anchor of the TLS JWKS server).
pub fn test_ca() -> rustls::pki_types::CertificateDer<'static> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(&fixture("tls_ca.pem")).expect("CA cert")
}

/// A client TLS configuration trusting only the test CA.
pub fn client_tls_trusting_test_ca() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(test_ca()).expect("add CA");
    rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_root_certificates(roots)
    .with_no_client_auth()
}

fn server_tls() -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(&fixture("tls_server.pem"))
        .collect::<Result<Vec<_>, _>>()
        .expect("server cert");
    let key = PrivateKeyDer::from_pem_slice(&fixture("tls_server_key.pem")).expect("server key");
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server config");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

impl JwksServer {
    /// Serves `{"keys": [<the named fixture JWKs>]}` over http.
    pub async fn start(kids: &[&str]) -> Self {
        Self::start_inner(kids, None).await
    }

    /// Same over https, with the test CA's server certificate for 127.0.0.1.
    pub async fn start_tls(kids: &[&str]) -> Self {
        Self::start_inner(kids, Some(server_tls())).await
    }

    async fn start_inner(kids: &[&str], tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let is_tls = tls.is_some();
        let state = Arc::new(JwksState {
            body: Mutex::new(jwks(kids)),
            status: Mutex::new(StatusCode::OK),
            delay: Mutex::new(Duration::ZERO),
            fetches: AtomicUsize::new(0),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            // Dropping the JoinSet (when this task is aborted) aborts every connection too, so
            // `stop` also cuts the client's pooled keep-alive connections.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = Arc::clone(&shared);
                let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                    let state = Arc::clone(&state);
                    async move {
                        state.fetches.fetch_add(1, Ordering::SeqCst);
                        let delay = *state.delay.lock().unwrap();
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        let mut response = Response::new(Full::new(Bytes::from(
                            state.body.lock().unwrap().clone(),
                        )));
                        *response.status_mut() = *state.status.lock().unwrap();
                        response.headers_mut().insert(
                            header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, Infallible>(response)
                    }
                });
                let tls = tls.clone();
                connections.spawn(async move {
                    let builder = auto::Builder::new(TokioExecutor::new());
                    match tls {
                        None => {
                            let _ = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                let _ = builder
                                    .serve_connection(TokioIo::new(stream), service)
                                    .await;
                            }
                        }
                    }
                });
            }
        });
        Self {
            addr,
            tls: is_tls,
            state,
            task,
        }
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/jwks.json", self.addr)
    }

    /// Number of requests served so far.
    pub fn fetches(&self) -> usize {
        self.state.fetches.load(Ordering::SeqCst)
    }

    /// Publishes a new set.
    pub fn publish(&self, kids: &[&str]) {
        *self.state.body.lock().unwrap() = jwks(kids);
    }

    pub fn set_status(&self, status: StatusCode) {
        *self.state.status.lock().unwrap() = status;
    }

    pub fn set_delay(&self, delay: Duration) {
        *self.state.delay.lock().unwrap() = delay;
    }

    /// Stops listening and drops every open connection.
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// A JWK Set document with the named fixture keys (`rsa`, `rsa2`, `ec256`, `ec384`, `ed25519`).
pub fn jwks(names: &[&str]) -> String {
    let keys: Vec<Value> = names
        .iter()
        .map(|name| {
            serde_json::from_slice(&fixture(&format!("{name}.jwk.json"))).expect("fixture JWK")
        })
        .collect();
    json!({ "keys": keys }).to_string()
}
