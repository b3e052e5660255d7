//! The official conformance suite through the gateway and against the conformance backend alone.
//!
//! The backend (`tests/conformance/backend.py`) runs twice: dual-era, and `--legacy-only` (a
//! 2025-only server). Two single-backend virtual hosts with `naming = "auto"` keep the names the
//! suite expects; a bearer-injecting hop ([`super::proxy`]) stands in front of the gateway.

use std::path::Path;
use std::process::Command;

use super::outcome::Outcome;
use super::{Collected, gateway, install, process, proxy, suite};

/// The virtual host (and backend name) of the dual-era conformance backend.
const VHOST: &str = "conformance";
/// The virtual host of the same backend refusing 2026-07-28 (a 2025-only server).
const LEGACY_VHOST: &str = "conformance-legacy";

/// Where a suite runs.
#[derive(Clone, Copy)]
enum Target {
    /// Through the gateway to the backend in the client's own era (2025 -> 2025 for the legacy
    /// suites, 2026-07-28 -> 2026-07-28 for the current one).
    Gateway,
    /// Legacy suites through the gateway to the dual-era backend, which the gateway talks to in
    /// 2026-07-28: the 2025 -> 2026-07-28 bridge.
    GatewayBridged,
    /// The dual-era backend alone, without the gateway.
    Direct,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::GatewayBridged => "gateway-bridged",
            Self::Direct => "direct",
        }
    }

    fn what(self, legacy_suite: bool) -> &'static str {
        match (self, legacy_suite) {
            (Self::Gateway, true) => "through the gateway to a 2025-only backend (2025 -> 2025)",
            (Self::Gateway, false) => {
                "through the gateway to the dual-era backend (2026-07-28 -> 2026-07-28)"
            }
            (Self::GatewayBridged, _) => {
                "through the gateway to the dual-era backend, spoken to in 2026-07-28 \
                 (2025 -> 2026-07-28 bridge)"
            }
            (Self::Direct, _) => "against the dual-era backend alone (no gateway)",
        }
    }

    /// The targets of a suite: legacy suites also cross the bridge.
    fn of(legacy_suite: bool) -> &'static [Target] {
        if legacy_suite {
            &[Self::Gateway, Self::GatewayBridged, Self::Direct]
        } else {
            &[Self::Gateway, Self::Direct]
        }
    }
}

/// The official suite through the gateway and directly against the conformance backend.
pub(super) fn run(
    root: &Path,
    peers: &install::Peers,
    binary: &Path,
    out: &Path,
    collected: &mut Collected,
) {
    for suite in &suite::SUITES {
        for &target in Target::of(suite.legacy) {
            let args = if suite.args.is_empty() {
                String::new()
            } else {
                format!(" {}", suite.args.join(" "))
            };
            collected.section(
                &format!("{}@{}", suite.name, target.name()),
                format!(
                    "Official suite `{}{args}`, {}",
                    suite.package,
                    target.what(suite.legacy)
                ),
            );
        }
    }
    let result = (|| -> Result<Vec<Outcome>, String> {
        let work = out.join("official");
        std::fs::create_dir_all(&work)
            .map_err(|e| format!("cannot create {}: {e}", work.display()))?;
        let (_dual, dual_url) = start_backend(root, peers, &work, "dual", false)?;
        let (_legacy, legacy_url) = start_backend(root, peers, &work, "legacy", true)?;
        // Two single-backend virtual hosts with `naming = "auto"`: names stay as the suite
        // expects them.
        let single =
            |url: &str| serde_json::json!({"naming": "auto", "backends": {VHOST: {"url": url}}});
        let users = serde_json::json!({"virtual_hosts": {
            VHOST: single(&dual_url),
            LEGACY_VHOST: single(&legacy_url),
        }})
        .to_string();
        let gateway = gateway::RunningGateway::start(binary, &work.join("gateway"), &users)?;
        let token = gateway.token(gateway::SUBJECT)?;
        let hop = proxy::BearerProxy::start(gateway.addr, &token)?;
        let via_hop = |vhost: &str| format!("http://{}/servers/{vhost}/mcp", hop.addr());
        let mut outcomes = Vec::new();
        for suite in &suite::SUITES {
            for &target in Target::of(suite.legacy) {
                let url = match (target, suite.legacy) {
                    (Target::Gateway, true) => via_hop(LEGACY_VHOST),
                    (Target::Gateway | Target::GatewayBridged, _) => via_hop(VHOST),
                    (Target::Direct, _) => dual_url.clone(),
                };
                let run = format!("{}@{}", suite.name, target.name());
                let dir = work.join(run.replace('@', "-"));
                outcomes.extend(suite::run(peers, suite, &run, &url, &dir)?);
            }
        }
        Ok(outcomes)
    })();
    collected.record(result);
}

/// Starts `tests/conformance/backend.py` on a free port (`legacy_only`: refusing 2026-07-28);
/// returns the process and its MCP URL.
fn start_backend(
    root: &Path,
    peers: &install::Peers,
    work: &Path,
    name: &str,
    legacy_only: bool,
) -> Result<(process::Spawned, String), String> {
    let port = process::free_port()?;
    let log = work.join(format!("backend-{name}.log"));
    let mut command = Command::new(&peers.python2);
    command
        .arg(root.join("tests/conformance/backend.py"))
        .arg(port.to_string())
        .current_dir(work);
    if legacy_only {
        command.arg("--legacy-only");
    }
    let mut backend = process::Spawned::start("conformance backend", command, &log)?;
    backend.wait_listening(process::loopback(port), &log)?;
    Ok((backend, format!("http://127.0.0.1:{port}/mcp")))
}
