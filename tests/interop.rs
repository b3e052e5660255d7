//! Cross-language interop: the official Python and TypeScript MCP SDK clients, and the official
//! `server-everything` server, talking to the gateway stack over real sockets.
//!
//! The peers are real programs run as subprocesses: `tests/interop/py_client.py` on the Python
//! SDK 1.x (`.venv/mcp1`) and 2.x (`.venv/mcp2`), `tests/interop/node/ts_client.mjs` on the
//! TypeScript SDK 1.x, and `server-everything`, all from `tests/interop/node/node_modules`.
//! `cargo xtask test` installs them (see `xtask/src/interop.rs`); each folder holds a marker with
//! the manifest it was installed from. When a peer is missing or stale a test prints loudly and
//! returns, except under `CI=true`, where it fails.
//!
//! Each client prints one JSON line with what it saw (negotiated protocol version, tool names,
//! call results, progress), which the tests assert.
//!
//! Over 600 lines: every test here shares the peer plumbing above (running, tracing and reading a
//! client script; starting a server process), and one test binary keeps the link time down.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::{Value, json};
use support::gateway::{Gateway, token, user_config};
use support::peers::{in_ci, installed, python, root, skipped};

/// Longest run of one client script (interpreter start-up included) on a loaded 2-core machine.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);
/// Longest wait for `server-everything` to accept connections.
const SERVER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// The protocol revisions a legacy (initialize) session may settle on.
const LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The npm project `tests/interop/node`, when its node_modules are installed and `node` runs.
fn node_project() -> Option<PathBuf> {
    let project = root().join("tests/interop/node");
    let modules = project.join("node_modules");
    if !installed(
        &modules,
        &project.join("package-lock.json"),
        &modules.join("@modelcontextprotocol/sdk/package.json"),
    ) {
        return None;
    }
    if Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        return Some(project);
    }
    let reason = "`node` is not on PATH";
    if in_ci() {
        panic!("{reason}; CI=true requires the interop tests to run");
    }
    skipped(reason);
    None
}

/// Reads a child's pipe to the end on a thread, so a full pipe never blocks the child.
fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

/// Echoes a client's stderr (its HTTP trace) into the test's captured output, which the test
/// runners show only when the test fails: an assertion failure then shows the exchange too.
#[allow(clippy::print_stderr)]
fn show_trace(command: &str, stderr: &str) {
    eprintln!("--- {command}: stderr (HTTP trace) ---\n{stderr}--- end of stderr ---");
}

/// Runs a client script to completion (at most [`CLIENT_TIMEOUT`]) and returns the JSON line it
/// printed last. Panics with its stdout and stderr when it fails, hangs or prints no JSON.
async fn run_client(program: &Path, args: &[&str]) -> Value {
    let shown = format!("{} {}", program.display(), args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the client") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        // The gateway runs on this runtime: wait without blocking it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let out = stdout.join().expect("stdout reader");
    let err = stderr.join().expect("stderr reader");
    show_trace(&shown, &err);
    let Some(status) = status else {
        panic!("{shown}\nno exit within {CLIENT_TIMEOUT:?} (its stderr is above)\nstdout:\n{out}");
    };
    assert!(
        status.success(),
        "{shown}\nfailed ({status}; its stderr is above)\nstdout:\n{out}"
    );
    let line = out
        .lines()
        .rev()
        .find(|line| line.starts_with('{'))
        .unwrap_or_else(|| panic!("{shown}\nprinted no JSON line\nstdout:\n{out}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{shown}\nbad JSON ({e}): {line}"))
}

/// Runs `tests/interop/py_client.py` with `python`.
async fn py_client(python: &Path, url: &str, tool: &str, mode: &str, extra: &[&str]) -> Value {
    let script = root().join("tests/interop/py_client.py");
    let token = token("alice");
    let mut args = vec![
        script.to_str().expect("UTF-8 path"),
        url,
        &token,
        tool,
        mode,
    ];
    args.extend_from_slice(extra);
    run_client(python, &args).await
}

/// A modern (`alpha`) and a legacy (`beta`) rmcp backend behind the gateway, for subject `alice`.
async fn two_backends() -> (TestBackend, TestBackend, Gateway, String) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = Gateway::start(&[(
        "alice",
        user_config(&[("alpha", alpha.url()), ("beta", beta.url())]),
    )])
    .await;
    let url = format!("http://{}/servers/vh/mcp", gw.addr);
    (alpha, beta, gw, url)
}

fn tool_names(summary: &Value) -> Vec<&str> {
    summary["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {summary}"))
        .iter()
        .map(|name| name.as_str().expect("tool names are strings"))
        .collect()
}

/// Both backends' tools, and only those, each under its backend's prefix.
fn assert_prefixed_tools_of_both(summary: &Value) {
    let names = tool_names(summary);
    for expected in [
        "alpha-echo",
        "alpha-get-sum",
        "alpha-slow",
        "beta-echo",
        "beta-get-sum",
        "beta-slow",
    ] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("alpha-") || n.starts_with("beta-")),
        "unprefixed tool in {names:?}"
    );
}

fn assert_call(summary: &Value, tool: &str, text: &str) {
    assert_eq!(
        summary["call"],
        json!({"tool": tool, "is_error": false, "text": [text]}),
        "{summary}"
    );
}

/// The `slow` tool (3 steps) answered with its text and three progress notifications.
fn assert_slow_progress(summary: &Value, backend: &str) {
    let call = &summary["progress_call"];
    assert_eq!(
        call["text"],
        json!([format!("{backend}: done")]),
        "{summary}"
    );
    let steps: Vec<(f64, f64)> = call["progress"]
        .as_array()
        .unwrap_or_else(|| panic!("no progress in {summary}"))
        .iter()
        .map(|p| {
            (
                p["progress"].as_f64().expect("progress"),
                p["total"].as_f64().expect("total"),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)],
        "progress: {summary}"
    );
}

fn assert_legacy_session(summary: &Value) {
    let version = summary["protocol_version"].as_str().unwrap_or_default();
    assert!(
        LEGACY_VERSIONS.contains(&version),
        "legacy session expected, negotiated {version:?}: {summary}"
    );
}

const SLOW_ARGS: &str = r#"{"steps": 3, "delay_ms": 20}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_1x_legacy_session_lists_and_calls_both_eras_of_backend() {
    let Some(python) = python("mcp1") else { return };
    let (alpha, beta, _gw, url) = two_backends().await;

    let summary = py_client(
        &python,
        &url,
        "beta-echo",
        "legacy",
        &[
            "--arguments",
            r#"{"text": "hello from python 1.x"}"#,
            "--progress-tool",
            "alpha-slow",
            "--progress-arguments",
            SLOW_ARGS,
        ],
    )
    .await;

    assert_eq!(summary["sdk_version"], "1.30.0", "{summary}");
    assert_eq!(summary["server_name"], "mcp-gateway", "{summary}");
    assert_legacy_session(&summary);
    assert_eq!(summary["session_id"], true, "no Mcp-Session-Id: {summary}");
    assert_prefixed_tools_of_both(&summary);
    assert_call(&summary, "beta-echo", "beta: hello from python 1.x");
    assert_slow_progress(&summary, "alpha");
    assert_eq!(beta.calls_finished("echo"), 1);
    assert_eq!(alpha.calls_finished("slow"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_2x_auto_mode_discovers_and_speaks_2026_07_28() {
    let Some(python) = python("mcp2") else { return };
    let (alpha, beta, _gw, url) = two_backends().await;

    let summary = py_client(
        &python,
        &url,
        "alpha-echo",
        "auto",
        &[
            "--arguments",
            r#"{"text": "hello from python 2.x"}"#,
            "--progress-tool",
            "beta-slow",
            "--progress-arguments",
            SLOW_ARGS,
        ],
    )
    .await;

    assert_eq!(summary["sdk_version"], "2.3.0", "{summary}");
    assert_eq!(summary["server_name"], "mcp-gateway", "{summary}");
    assert_eq!(summary["protocol_version"], "2026-07-28", "{summary}");
    assert_prefixed_tools_of_both(&summary);
    assert_call(&summary, "alpha-echo", "alpha: hello from python 2.x");
    assert_slow_progress(&summary, "beta");
    assert_eq!(alpha.calls_finished("echo"), 1);
    assert_eq!(beta.calls_finished("slow"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_2x_legacy_mode_opens_a_session() {
    let Some(python) = python("mcp2") else { return };
    let (alpha, _beta, _gw, url) = two_backends().await;

    let summary = py_client(
        &python,
        &url,
        "alpha-get-sum",
        "legacy",
        &["--arguments", r#"{"a": 2, "b": 3}"#],
    )
    .await;

    assert_eq!(summary["sdk_version"], "2.3.0", "{summary}");
    assert_eq!(summary["server_name"], "mcp-gateway", "{summary}");
    assert_legacy_session(&summary);
    assert_prefixed_tools_of_both(&summary);
    assert_call(&summary, "alpha-get-sum", "alpha: 5");
    assert_eq!(alpha.calls_finished("get-sum"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_1x_legacy_session_lists_calls_and_gets_progress() {
    let Some(project) = node_project() else {
        return;
    };
    let (alpha, beta, _gw, url) = two_backends().await;
    let script = project.join("ts_client.mjs");
    let token = token("alice");

    let summary = run_client(
        Path::new("node"),
        &[
            script.to_str().expect("UTF-8 path"),
            &url,
            &token,
            "beta-get-sum",
            r#"{"a": 20, "b": 22}"#,
            "alpha-slow",
            SLOW_ARGS,
        ],
    )
    .await;

    assert_eq!(summary["sdk_version"], "1.32.2", "{summary}");
    assert_eq!(summary["server_name"], "mcp-gateway", "{summary}");
    assert_legacy_session(&summary);
    assert_eq!(summary["session_id"], true, "no Mcp-Session-Id: {summary}");
    assert_prefixed_tools_of_both(&summary);
    assert_call(&summary, "beta-get-sum", "beta: 42");
    assert_slow_progress(&summary, "alpha");
    assert_eq!(beta.calls_finished("get-sum"), 1);
    assert_eq!(alpha.calls_finished("slow"), 1);
}

/// `server-everything` (streamable HTTP) as a node subprocess, killed on drop.
struct ServerEverything {
    child: Child,
    port: u16,
}

impl ServerEverything {
    /// Starts it on a free port and waits until it accepts connections. It has no option to pick
    /// the interface and binds all of them; its environment is emptied (it has a `get-env` tool).
    async fn start(project: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let entry =
            project.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        let child = Command::new("node")
            .arg(&entry)
            .arg("streamableHttp")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PORT", port.to_string())
            .current_dir(project)
            .stdin(Stdio::null())
            .stdout(Stdio::null()) // a line per request
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", entry.display()));
        let mut server = ServerEverything { child, port };
        let deadline = Instant::now() + SERVER_START_TIMEOUT;
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return server;
            }
            if let Some(status) = server.child.try_wait().expect("wait for server-everything") {
                panic!("server-everything exited before listening ({status})");
            }
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen on {port} within {SERVER_START_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for ServerEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_behind_the_gateway_serves_the_python_sdk_1x() {
    let Some(python) = python("mcp1") else { return };
    let Some(project) = node_project() else {
        return;
    };
    let everything = ServerEverything::start(&project).await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let gw = Gateway::start(&[(
        "alice",
        user_config(&[("everything", everything.url()), ("alpha", alpha.url())]),
    )])
    .await;
    let url = format!("http://{}/servers/vh/mcp", gw.addr);

    let summary = py_client(
        &python,
        &url,
        "everything-echo",
        "legacy",
        &[
            "--arguments",
            r#"{"message": "hello everything"}"#,
            "--progress-tool",
            "everything-trigger-long-running-operation",
            "--progress-arguments",
            r#"{"duration": 0.3, "steps": 3}"#,
        ],
    )
    .await;

    assert_eq!(summary["sdk_version"], "1.30.0", "{summary}");
    assert_eq!(summary["server_name"], "mcp-gateway", "{summary}");
    assert_legacy_session(&summary);
    let names = tool_names(&summary);
    for expected in [
        "everything-echo",
        "everything-get-sum",
        "everything-trigger-long-running-operation",
        "alpha-echo",
    ] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    assert_call(&summary, "everything-echo", "Echo: hello everything");
    let progress = summary["progress_call"]["progress"]
        .as_array()
        .map(Vec::len)
        .unwrap_or_default();
    assert_eq!(progress, 3, "progress from server-everything: {summary}");
}

/// A running `tests/interop/py_dual_server.py` (Python SDK 2.x, both eras); killed when dropped.
struct PyDualServer(mcp_test_support::PortedChild);

impl PyDualServer {
    async fn start(python: &Path) -> Self {
        let mut command = tokio::process::Command::new(python);
        command
            .arg(root().join("tests/interop/py_dual_server.py"))
            .current_dir(root().join("tests/interop"));
        Self(mcp_test_support::PortedChild::spawn(command).await)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.0.port)
    }
}

/// Runs `tests/interop/py_sampling_client.py` (mode `legacy` or `auto`) calling `tool`.
async fn sampling_client(python: &Path, url: &str, tool: &str, mode: &str, prompt: &str) -> Value {
    let script = root().join("tests/interop/py_sampling_client.py");
    let token = token("alice");
    let args = [
        script.to_str().expect("UTF-8 path"),
        url,
        &token,
        tool,
        mode,
        prompt,
    ];
    run_client(python, &args).await
}

/// The Python dual-era backend `py` behind the gateway, for subject `alice`.
async fn dual_era_gateway(server: &PyDualServer) -> (Gateway, String) {
    let gw = Gateway::start(&[("alice", user_config(&[("py", server.url())]))]).await;
    let url = format!("http://{}/servers/vh/mcp", gw.addr);
    (gw, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_of_a_dual_era_backend_gets_its_mid_call_sampling_request() {
    let Some(python) = python("mcp2") else { return };
    let server = PyDualServer::start(&python).await;
    let (_gw, url) = dual_era_gateway(&server).await;

    let summary = sampling_client(&python, &url, "py-sample", "legacy", "capital of France?").await;

    assert_legacy_session(&summary);
    // A real sampling/createMessage inside the call, answered by the client: the call completes
    // in one round.
    assert_eq!(summary["first_result_type"], "complete", "{summary}");
    assert_eq!(
        summary["sampled"],
        json!(["capital of France?"]),
        "{summary}"
    );
    // The control: the tool ran in a 2025 session upstream (the gateway did not bridge).
    assert_eq!(
        summary["text"],
        json!(["py2 2025-11-25: LLM says: capital of France?"]),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_of_the_same_backend_gets_the_input_required_form() {
    let Some(python) = python("mcp2") else { return };
    let server = PyDualServer::start(&python).await;
    let (_gw, url) = dual_era_gateway(&server).await;

    let summary = sampling_client(&python, &url, "py-sample", "auto", "capital of Peru?").await;

    assert_eq!(summary["protocol_version"], "2026-07-28", "{summary}");
    assert_eq!(summary["first_result_type"], "input_required", "{summary}");
    assert_eq!(
        summary["input_requests"],
        json!(["sampling/createMessage"]),
        "{summary}"
    );
    // The driver answered the one input request of the retried call.
    assert_eq!(summary["sampled"], json!(["capital of Peru?"]), "{summary}");
    assert_eq!(
        summary["text"],
        json!(["py2 2026-07-28: LLM says: capital of Peru?"]),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_session_is_not_listed_server_everythings_task_only_tool() {
    let Some(project) = node_project() else {
        return;
    };
    let everything = ServerEverything::start(&project).await;
    let gw = Gateway::start(&[("alice", user_config(&[("everything", everything.url())]))]).await;
    let session = gw.legacy_session("alice", "vh").await;

    let listed = gw
        .legacy("alice", "vh", &session, "tools/list", json!({}))
        .await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"everything-echo"), "{names:?}");
    assert!(
        !names.contains(&"everything-simulate-research-query"),
        "a tool with taskSupport \"required\" listed to a 2025 session: {names:?}"
    );
    // Seen and left out on purpose, and said so.
    assert_eq!(
        listed["result"]["_meta"]["mcp-gateway/degraded"]["items"],
        json!([{"name": "everything-simulate-research-query",
                "reason": "requires tasks, which 2025 sessions are not offered"}]),
        "{listed}"
    );

    // A task-augmented call anyway is refused before it runs: nothing to follow up that fails.
    let called = gw
        .legacy(
            "alice",
            "vh",
            &session,
            "tools/call",
            json!({"name": "everything-simulate-research-query",
                   "arguments": {"topic": "tides"}, "task": {"ttl": 60000}}),
        )
        .await;
    assert_eq!(called["error"]["code"], -32602, "{called}");
    assert_eq!(
        called["error"]["message"],
        "Task-augmented calls are not supported: this gateway offers no tasks to 2025 sessions",
        "{called}"
    );
}
