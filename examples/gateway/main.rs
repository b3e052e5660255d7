//! The reference gateway on an embedded default, with two demo MCP backends in the same process.
//!
//! ```text
//! cargo run --release --example gateway
//! ```
//!
//! - starts two rmcp backends on free loopback ports: `clock` (current time in any IANA time
//!   zone, conversions between zones, the zone list as a resource, a meeting-planning prompt) and
//!   `notes` (an in-memory notes store: add, list, search, delete; every note as a resource; a
//!   summary prompt);
//! - writes the bundled `examples/gateway/users.json` with the backends' real ports to a temp
//!   directory and starts the gateway through the `mcp-gateway` library with the bundled
//!   `examples/gateway/gateway.toml` (file config store, local sessions), environment overrides
//!   applied (`MCP_GATEWAY_LISTEN_ADDR=127.0.0.1:0` picks a free port; when 8080 or 9090 is taken
//!   the example falls back to free ports by itself);
//! - prints `MCP_GATEWAY_URL=...` and `MCP_GATEWAY_TOKEN=...` (a token for subject `demo`, valid
//!   24 h, signed with `$MCP_GATEWAY_JWT_SECRET` or a random secret), a ready `curl` command and an
//!   rmcp one-liner; serves until Ctrl-C / SIGTERM.
//!
//! This file is the gateway part; the demo backends live in `backends/` (`clock.rs`, `notes.rs`,
//! and `mod.rs`, which serves an rmcp handler on a loopback port).

// An example that talks to the person running it: printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod backends;

use std::error::Error;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mcp_config_store::UsersDocument;
use mcp_gateway::config::{EffectiveConfig, GatewayConfig, Override};
use mcp_gateway::token::{TokenRequest, mint};
use mcp_gateway::{BoundGateway, Gateway, GatewayError};

use backends::clock::ClockServer;
use backends::notes::{NotesServer, NotesStore};
use backends::serve_backend;

/// The subject and virtual host of the bundled users file.
const SUBJECT: &str = "demo";
const VHOST: &str = "demo";

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gateway");

    // 1. Two demo backends on free loopback ports.
    let clock = serve_backend(ClockServer::new).await?;
    let notes_store = NotesStore::default();
    let notes = serve_backend(move || NotesServer::new(notes_store.clone())).await?;

    // 2. The bundled users file with the real backend ports, in a temp directory.
    let runtime_dir =
        std::env::temp_dir().join(format!("mcp-gateway-example-{}", std::process::id()));
    std::fs::create_dir_all(&runtime_dir)?;
    let users_path = runtime_dir.join("users.json");
    write_users(
        &bundled.join("users.json"),
        &users_path,
        &[("clock", clock), ("notes", notes)],
    )?;

    // 3. The bundled gateway.toml, MCP_GATEWAY_* environment overrides, the runtime users file.
    let overrides = [Override::new(
        "config_store.path",
        users_path.display().to_string(),
        "(example: users file with the real backend ports)",
    )];
    let effective = EffectiveConfig::from_sources(
        Some(&bundled.join("gateway.toml")),
        std::env::vars(),
        &overrides,
    )?;
    let config = effective.build()?;
    // Kept to the end: dropping it flushes the last spans (with an OTLP endpoint configured).
    let _telemetry = mcp_gateway::init_tracing(&config.telemetry)
        .inspect_err(|e| eprintln!("logging: {e}"))
        .ok();
    let secret = match std::env::var("MCP_GATEWAY_JWT_SECRET") {
        Ok(s) if !s.is_empty() => s.into_bytes(),
        _ => random_secret(),
    };

    // 4. Bind (falling back to free ports when the configured ones are taken) and serve.
    let bound = bind(config.clone(), &secret).await?;
    let url = bound.endpoint_url(VHOST);
    let token = mint(
        &config,
        &secret,
        &TokenRequest::new(SUBJECT).ttl(Duration::from_secs(24 * 3600)),
    )?;
    print_instructions(&url, &token, bound.admin_addr());

    let served = bound.serve(mcp_gateway::shutdown_signal()).await;
    let _ = std::fs::remove_dir_all(&runtime_dir);
    served?;
    Ok(())
}

/// Builds and binds the gateway; when a configured port is in use, retries on free ports.
async fn bind(config: GatewayConfig, secret: &[u8]) -> Result<BoundGateway, GatewayError> {
    let gateway = Gateway::builder(config.clone())
        .hs256_secret(secret.to_vec())
        .build()
        .await?;
    match gateway.bind().await {
        Err(GatewayError::Bind { addr, source, .. })
            if source.kind() == std::io::ErrorKind::AddrInUse =>
        {
            eprintln!(
                "{addr} is in use; using free ports instead (set MCP_GATEWAY_LISTEN_ADDR to choose)"
            );
            let mut config = config;
            config.listen.addr = SocketAddr::from(([127, 0, 0, 1], 0));
            if config.listen.admin_addr.is_some() {
                config.listen.admin_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            }
            Gateway::builder(config)
                .hs256_secret(secret.to_vec())
                .build()
                .await?
                .bind()
                .await
        }
        other => other,
    }
}

fn print_instructions(url: &str, token: &str, admin: Option<SocketAddr>) {
    println!("MCP_GATEWAY_URL={url}");
    println!("MCP_GATEWAY_TOKEN={token}");
    println!();
    println!("# List the tools of both demo backends (MCP 2026-07-28, stateless):");
    println!(
        "curl -sS '{url}' -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{{}}}}}}}}'"
    );
    println!();
    println!(
        "# The same from Rust with the official SDK (rmcp 3.11, features client + transport-streamable-http-client-reqwest):"
    );
    println!(
        "let tools = ().serve_with_lifecycle(StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(\"{url}\").auth_header(\"{token}\")), ClientLifecycleMode::Discover {{ preferred_versions: vec![ProtocolVersion::V_2026_07_28] }}).await?.list_all_tools().await?;"
    );
    if let Some(admin) = admin {
        println!();
        println!(
            "# Metrics and health: http://{admin}/metrics  http://{admin}/healthz  http://{admin}/readyz"
        );
    }
    println!("# Ctrl-C stops the gateway (in-flight calls are drained first).");
}

/// The bundled users file with each named backend's URL pointing at its real address.
fn write_users(
    template: &Path,
    out: &PathBuf,
    backends: &[(&str, SocketAddr)],
) -> Result<(), Box<dyn Error>> {
    let mut doc = UsersDocument::from_json_str(&std::fs::read_to_string(template)?)?;
    for user in doc.users.values_mut() {
        let user = Arc::make_mut(user);
        for vhost in user.virtual_hosts.values_mut() {
            let vhost = Arc::make_mut(vhost);
            for (name, addr) in backends {
                if let Some(backend) = vhost.backends.get_mut(*name) {
                    backend.url = Some(format!("http://{addr}/mcp").parse()?);
                }
            }
        }
    }
    std::fs::write(out, serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}

/// 32 random bytes from the OS, hex-encoded (a development secret for this run).
fn random_secret() -> Vec<u8> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        // No /dev/urandom: mix the standard library's per-process random hasher keys.
        use std::hash::{BuildHasher, Hasher};
        for chunk in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .into_bytes()
}
