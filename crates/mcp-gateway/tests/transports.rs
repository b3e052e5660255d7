//! Backends over every upstream transport behind the real `mcp-gateway` process, as an operator
//! configures them: a stdio server of the operator's `[stdio_servers]` catalog, an HTTP+SSE
//! (2024-11-05) server with `transport = "sse"`, and a streamable HTTP backend, side by side in
//! one virtual host. A 2026-07-28 client and a 2025 session list the prefixed tools of all three
//! and call each. (A command off the allow-list is refused at config load: `cli.rs`.)

mod support;

use std::path::{Path, PathBuf};

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::PortedChild;
use serde_json::{Value, json};
use support::{
    GatewayProcess, base_config, legacy_initialize, legacy_post, modern, python_mcp1, workdir,
};

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop")
        .join(name)
}

/// `py_sse_server.py` on a free port; killed when dropped.
struct SseServer {
    _process: PortedChild,
    url: String,
}

impl SseServer {
    async fn start(python: &Path) -> Self {
        let mut command = tokio::process::Command::new(python);
        command.arg(script("py_sse_server.py")).arg("0");
        let process = PortedChild::spawn(command).await;
        Self {
            url: format!("http://127.0.0.1:{}/sse", process.port),
            _process: process,
        }
    }
}

/// `alice`'s virtual host `vh`: `alpha` (streamable HTTP), `io` (stdio), `old` (HTTP+SSE).
fn users(alpha: &TestBackend, sse: &SseServer) -> String {
    json!({"users": {"alice": {"virtual_hosts": {"vh": {"backends": {
        "alpha": {"url": alpha.url(), "timeout_ms": 20000},
        "io": {"stdio": "io", "timeout_ms": 20000},
        "old": {"url": sse.url, "transport": "sse", "timeout_ms": 20000},
    }}}}}})
    .to_string()
}

fn config(python: &Path) -> String {
    base_config(&format!(
        "\n[stdio_servers.io]\ncommand = {:?}\nargs = [{:?}]\n",
        python.to_str().expect("utf-8 path"),
        script("py_stdio_server.py").to_str().expect("utf-8 path")
    ))
}

/// (public tool, arguments, expected text) for one tool of each backend.
fn calls() -> [(&'static str, Value, &'static str); 3] {
    [
        ("alpha-echo", json!({"text": "a"}), "alpha: a"),
        ("io-echo", json!({"text": "b"}), "py: b"),
        ("old-echo", json!({"text": "c"}), "py-sse: c"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_sse_and_http_backends_serve_both_eras_through_the_process() {
    let Some(python) = python_mcp1() else { return };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let sse = SseServer::start(&python).await;
    let dir = workdir("gw-transports");
    support::write(dir.path(), "users.json", &users(&alpha, &sse));
    let gw = GatewayProcess::start(dir.path(), &config(&python), &[]).await;

    let listed = modern(gw.addr, "alice", "vh", "tools/list", json!({}), &[]).await;
    let names = listed.tool_names();
    for name in ["alpha-echo", "io-echo", "io-slow", "old-echo", "old-slow"] {
        assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
    }
    for (tool, arguments, text) in calls() {
        let reply = modern(
            gw.addr,
            "alice",
            "vh",
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            &[],
        )
        .await;
        assert_eq!(reply.status, 200, "{tool}: {}", reply.text());
        assert_eq!(reply.result_text(), text, "{tool}");
    }

    let session = legacy_initialize(gw.addr, "alice", "vh").await;
    let listed = legacy_post(
        gw.addr,
        "alice",
        "vh",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let names = listed.tool_names();
    assert!(
        ["alpha-echo", "io-echo", "old-echo"]
            .iter()
            .all(|want| names.iter().any(|n| n == want)),
        "{names:?}"
    );
    for (id, (tool, arguments, text)) in (2..).zip(calls()) {
        let reply = legacy_post(
            gw.addr,
            "alice",
            "vh",
            Some(&session),
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}),
        )
        .await;
        assert_eq!(reply.status, 200, "{tool}: {}", reply.text());
        assert_eq!(reply.result_text(), text, "{tool}");
    }
}
