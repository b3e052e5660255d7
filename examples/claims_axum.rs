//! Only `mcp-claims` in front of an axum handler: the handler reads the validated claims.
//!
//! ```text
//! cargo run --example claims_axum
//! ```
//! It prints a demo token and a curl line. Without a valid token the layer answers 401 with an
//! RFC 9728 challenge; the handler never runs.

// An example program: printing is how it talks to the user.
#![allow(clippy::print_stdout)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::{Extension, Router, routing::post};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcp_claims::{Claims, ClaimsLayer, Issuer, JwtValidator};

const ISSUER: &str = "https://issuer.example";
const AUDIENCE: &str = "mcp-gateway";
// Demo only: a real deployment reads its secret from the environment or a secret store.
const DEMO_SECRET: &[u8] = b"demo-secret-change-me-please-32b";

async fn whoami(Extension(claims): Extension<Claims>) -> String {
    format!("hello {} (scopes: {:?})\n", claims.sub(), claims.scopes())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let validator = JwtValidator::builder()
        .issuer(Issuer::new(ISSUER).hmac_secret(DEMO_SECRET, [Algorithm::HS256]))
        .audience(AUDIENCE)
        .build()?;
    let app = Router::new().route("/mcp", post(whoami)).layer(
        ClaimsLayer::new(validator)
            .resource_metadata("http://127.0.0.1:3000/.well-known/oauth-protected-resource"),
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    let token = demo_token()?;
    println!("MCP_TOKEN={token}");
    println!("curl -X POST -H \"Authorization: Bearer $MCP_TOKEN\" http://127.0.0.1:3000/mcp");
    axum::serve(listener, app).await?;
    Ok(())
}

fn demo_token() -> Result<String, Box<dyn std::error::Error>> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
    let exp = (now + Duration::from_secs(3600)).as_secs();
    let claims = serde_json::json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": exp, "scope": "mcp"
    });
    let key = EncodingKey::from_secret(DEMO_SECRET)?;
    Ok(encode(&Header::new(Algorithm::HS256), &claims, &key)?)
}
