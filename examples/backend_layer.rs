//! The reference gateway with a tower layer on every backend stack: at most 4 calls in flight per
//! backend and caller (a backend stack exists per credential scope, so callers never share the
//! limit).
//!
//! ```text
//! cargo run --example backend_layer -- path/to/gateway.toml
//! ```
//!
//! Any tower layer over `mcp_router::BackendService` fits the same way (a rate limit, tracing,
//! your own policy); it sits around the fallback, breaker and timeout layers of each stack.

use mcp_gateway::Gateway;
use mcp_gateway::config::EffectiveConfig;
use tower::limit::ConcurrencyLimitLayer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).map(std::path::PathBuf::from);
    let config = EffectiveConfig::from_sources(path.as_deref(), std::env::vars(), &[])?.build()?;
    Gateway::builder(config)
        .backend_layer(ConcurrencyLimitLayer::new(4))
        .build()
        .await?
        .serve(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
