//! `mcp-vhost` + `mcp-claims` in a plain hyper server (no axum): the inner service sees the
//! virtual host id and the caller's principal as typed request extensions.
//!
//! ```text
//! cargo run --example vhost_claims_hyper
//! ```
//! It prints a demo token and curl lines for a good request, a bad path (400) and a missing token
//! (401).

// An example program: printing is how it talks to the user.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::convert::Infallible;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcp_claims::{ClaimsLayer, Issuer, JwtValidator};
use mcp_core::{Principal, VirtualHostId};
use mcp_vhost::VhostLayer;
use tower::{ServiceBuilder, service_fn};

const ISSUER: &str = "https://issuer.example";
const AUDIENCE: &str = "mcp-gateway";
// Demo only: a real deployment reads its secret from the environment or a secret store.
const DEMO_SECRET: &[u8] = b"demo-secret-change-me-please-32b";

async fn inner(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let vhost = req
        .extensions()
        .get::<VirtualHostId>()
        .map(ToString::to_string);
    let who = req.extensions().get::<Principal>().map(ToString::to_string);
    let text = format!("virtual host {vhost:?}, principal {who:?}\n");
    Ok(Response::new(Full::new(Bytes::from(text))))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let validator = JwtValidator::builder()
        .issuer(Issuer::new(ISSUER).hmac_secret(DEMO_SECRET, [Algorithm::HS256]))
        .audience(AUDIENCE)
        .build()?;
    let service = ServiceBuilder::new()
        .layer(VhostLayer::new())
        .layer(ClaimsLayer::new(validator))
        .service(service_fn(inner));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3001").await?;
    let addr = listener.local_addr()?;
    println!("MCP_TOKEN={}", demo_token()?);
    println!("curl -X POST -H \"Authorization: Bearer $MCP_TOKEN\" http://{addr}/servers/demo/mcp");
    println!("curl -X POST -H \"Authorization: Bearer $MCP_TOKEN\" http://{addr}/nope   # 400");
    println!("curl -X POST http://{addr}/servers/demo/mcp   # 401");
    loop {
        let (stream, _) = listener.accept().await?;
        // Small responses would otherwise wait for the peer's delayed ACK.
        stream.set_nodelay(true)?;
        let service = TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let conn = auto::Builder::new(TokioExecutor::new());
            if let Err(e) = conn.serve_connection(TokioIo::new(stream), service).await {
                eprintln!("connection error: {e}");
            }
        });
    }
}

fn demo_token() -> Result<String, Box<dyn std::error::Error>> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
    let exp = (now + Duration::from_secs(3600)).as_secs();
    let claims = serde_json::json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": exp });
    let key = EncodingKey::from_secret(DEMO_SECRET)?;
    Ok(encode(&Header::new(Algorithm::HS256), &claims, &key)?)
}
