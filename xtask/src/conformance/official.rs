//! The official conformance suite through the gateway and against the conformance backend alone.
//!
//! The backend (`tests/conformance/backend.py`) runs four times: dual-era; `--legacy-only` (a
//! 2025-only server); `--modern-only` (a 2026-07-28-only server); and dual-era with
//! `--server-requests` (its sampling and elicitation tools ask with server-initiated requests in
//! every era, as servers written for 2025 do). Single-backend virtual hosts with
//! `naming = "auto"` keep the names the suite expects; a bearer-injecting hop ([`super::proxy`])
//! stands in front of the gateway. Every run through the gateway is compared, scenario by
//! scenario, with the same suite against the same kind of backend alone ([`comparisons`]): a
//! scenario that passes directly and fails through the gateway fails the run.

use std::path::Path;
use std::process::Command;

use super::outcome::Outcome;
use super::{Collected, gateway, install, process, proxy, suite};

/// The virtual host (and backend name) of the dual-era conformance backend.
const VHOST: &str = "conformance";
/// The virtual host of the same backend refusing 2026-07-28 (a 2025-only server).
const LEGACY_VHOST: &str = "conformance-legacy";
/// The virtual host of the same backend refusing 2025 (a 2026-07-28-only server).
const MODERN_VHOST: &str = "conformance-modern";
/// The virtual host of the dual-era backend whose tools ask with server-initiated requests.
const REQUESTS_VHOST: &str = "conformance-requests";

/// Where a suite runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Through the gateway to a backend of the client's own era only: 2025 -> 2025-only for the
    /// legacy suites, 2026-07-28 -> dual-era for the current one.
    Gateway,
    /// Legacy suites through the gateway to the dual-era backend, which the gateway talks to in
    /// the client's era (2025).
    GatewayDual,
    /// Legacy suites through the gateway to the 2026-07-28-only backend: the 2025 -> 2026-07-28
    /// bridge.
    GatewayBridged,
    /// Legacy suites through the gateway to the dual-era backend whose tools use
    /// server-initiated requests.
    GatewayRequests,
    /// The dual-era backend alone, without the gateway.
    Direct,
    /// The dual-era backend with server-initiated requests alone.
    DirectRequests,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::GatewayDual => "gateway-dual",
            Self::GatewayBridged => "gateway-bridged",
            Self::GatewayRequests => "gateway-requests",
            Self::Direct => "direct",
            Self::DirectRequests => "direct-requests",
        }
    }

    fn what(self, legacy_suite: bool) -> &'static str {
        match (self, legacy_suite) {
            (Self::Gateway, true) => "through the gateway to a 2025-only backend (2025 -> 2025)",
            (Self::Gateway, false) => {
                "through the gateway to the dual-era backend (2026-07-28 -> 2026-07-28)"
            }
            (Self::GatewayDual, _) => {
                "through the gateway to the dual-era backend, spoken to in 2025 \
                 (2025 -> dual-era, the client's own era)"
            }
            (Self::GatewayBridged, _) => {
                "through the gateway to a 2026-07-28-only backend (2025 -> 2026-07-28 bridge)"
            }
            (Self::GatewayRequests, _) => {
                "through the gateway to a dual-era backend whose sampling and elicitation tools \
                 send server-initiated requests (2025 -> dual-era, spoken to in 2025)"
            }
            (Self::Direct, _) => "against the dual-era backend alone (no gateway)",
            (Self::DirectRequests, _) => {
                "against the dual-era backend with server-initiated requests alone (no gateway)"
            }
        }
    }

    /// The targets of a suite: legacy suites also go to every other kind of backend.
    fn of(legacy_suite: bool) -> &'static [Target] {
        if legacy_suite {
            &[
                Self::Gateway,
                Self::GatewayDual,
                Self::GatewayBridged,
                Self::GatewayRequests,
                Self::Direct,
                Self::DirectRequests,
            ]
        } else {
            &[Self::Gateway, Self::Direct]
        }
    }

    /// The run without the gateway a run through it is compared with: the same tools, the
    /// client's era, no gateway.
    fn direct(self) -> Option<Target> {
        match self {
            Self::Gateway | Self::GatewayDual | Self::GatewayBridged => Some(Self::Direct),
            Self::GatewayRequests => Some(Self::DirectRequests),
            Self::Direct | Self::DirectRequests => None,
        }
    }
}

/// (run through the gateway, run without it) for every comparison the official part makes.
pub(super) fn comparisons() -> Vec<(String, String)> {
    suite::SUITES
        .iter()
        .flat_map(|suite| {
            Target::of(suite.legacy).iter().filter_map(|target| {
                let direct = target.direct()?;
                Some((
                    format!("{}@{}", suite.name, target.name()),
                    format!("{}@{}", suite.name, direct.name()),
                ))
            })
        })
        .collect()
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
        let (_dual, dual_url) = start_backend(root, peers, &work, "dual", &[])?;
        let (_legacy, legacy_url) =
            start_backend(root, peers, &work, "legacy", &["--legacy-only"])?;
        let (_modern, modern_url) =
            start_backend(root, peers, &work, "modern", &["--modern-only"])?;
        let (_requests, requests_url) =
            start_backend(root, peers, &work, "requests", &["--server-requests"])?;
        // Two single-backend virtual hosts with `naming = "auto"`: names stay as the suite
        // expects them.
        let single =
            |url: &str| serde_json::json!({"naming": "auto", "backends": {VHOST: {"url": url}}});
        let users = serde_json::json!({"virtual_hosts": {
            VHOST: single(&dual_url),
            LEGACY_VHOST: single(&legacy_url),
            MODERN_VHOST: single(&modern_url),
            REQUESTS_VHOST: single(&requests_url),
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
                    (Target::Gateway | Target::GatewayDual, _) => via_hop(VHOST),
                    (Target::GatewayBridged, _) => via_hop(MODERN_VHOST),
                    (Target::GatewayRequests, _) => via_hop(REQUESTS_VHOST),
                    (Target::Direct, _) => dual_url.clone(),
                    (Target::DirectRequests, _) => requests_url.clone(),
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

/// Starts `tests/conformance/backend.py` on a free port with `flags` (see its docstring);
/// returns the process and its MCP URL.
fn start_backend(
    root: &Path,
    peers: &install::Peers,
    work: &Path,
    name: &str,
    flags: &[&str],
) -> Result<(process::Spawned, String), String> {
    let port = process::free_port()?;
    let log = work.join(format!("backend-{name}.log"));
    let mut command = Command::new(&peers.python2);
    command
        .arg(root.join("tests/conformance/backend.py"))
        .arg(port.to_string())
        .args(flags)
        .current_dir(work);
    let mut backend = process::Spawned::start("conformance backend", command, &log)?;
    backend.wait_listening(process::loopback(port), &log)?;
    Ok((backend, format!("http://127.0.0.1:{port}/mcp")))
}
