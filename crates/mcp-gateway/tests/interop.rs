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
//! call results, progress, links read back), which the tests assert.
//!
//! Over 600 lines on purpose: every test that drives the real SDK peers and `server-everything`
//! lives in this one binary, sharing the peer runners and server starters, and one test binary
//! keeps the link time down.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::peers::{EverythingTransport, ServerEverything, node_project, python, root};
use mcp_test_support::stack::{Gateway, token, user_config};
use serde_json::{Value, json};

/// Longest run of one client script (interpreter start-up included) on a loaded 2-core machine.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);
/// The protocol revisions a legacy (initialize) session may settle on.
const LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

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

fn summary_tool_names(summary: &Value) -> Vec<&str> {
    summary["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {summary}"))
        .iter()
        .map(|name| name.as_str().expect("tool names are strings"))
        .collect()
}

/// Both backends' tools, and only those, each under its backend's prefix.
fn assert_prefixed_tools_of_both(summary: &Value) {
    let names = summary_tool_names(summary);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_behind_the_gateway_serves_the_python_sdk_1x() {
    let Some(python) = python("mcp1") else { return };
    let Some(project) = node_project() else {
        return;
    };
    let everything = ServerEverything::start(&project, EverythingTransport::StreamableHttp).await;
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
    let names = summary_tool_names(&summary);
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

// Public URIs (issue #18, item 1): the URIs server-everything hands out in tool results, prompt
// messages and read contents come back under its public name and read back through the gateway,
// for clients of both eras; a URI that belongs to no backend is not rewritten.

/// The link `get-resource-links` returns for resource 2, as the client sees it.
const TEXT_2: &str = "everything-demo://resource/dynamic/text/2";

/// server-everything (`everything`) and an rmcp backend (`alpha`) behind the gateway, so that
/// names carry prefixes; for subject `alice`.
async fn everything_and_alpha(project: &Path) -> (ServerEverything, TestBackend, Gateway) {
    let everything = ServerEverything::start(project, EverythingTransport::StreamableHttp).await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let gw = Gateway::start(&[(
        "alice",
        user_config(&[("everything", everything.url()), ("alpha", alpha.url())]),
    )])
    .await;
    (everything, alpha, gw)
}

/// A client of one era speaking raw HTTP to the gateway (`vh`, subject `alice`).
enum RawClient<'a> {
    /// 2026-07-28, stateless.
    Modern(&'a Gateway),
    /// A 2025-11-25 session.
    Legacy(&'a Gateway, String),
}

impl<'a> RawClient<'a> {
    async fn both(gw: &'a Gateway) -> [Self; 2] {
        let session = gw.legacy_session("alice", "vh").await;
        [Self::Modern(gw), Self::Legacy(gw, session)]
    }

    fn era(&self) -> &'static str {
        match self {
            Self::Modern(_) => "2026-07-28",
            Self::Legacy(..) => "2025-11-25",
        }
    }

    /// The final JSON-RPC message of `method`, whether the gateway answered JSON or SSE.
    async fn ask(&self, method: &str, params: Value) -> Value {
        match self {
            Self::Modern(gw) => {
                let reply = gw.modern("alice", "vh", method, params).await;
                reply.sse_messages().pop().unwrap_or_else(|| reply.json())
            }
            Self::Legacy(gw, session) => gw.legacy("alice", "vh", session, method, params).await,
        }
    }

    /// The result of `method`; panics on an error answer.
    async fn result(&self, method: &str, params: Value) -> Value {
        let answer = self.ask(method, params).await;
        assert!(
            answer.get("result").is_some(),
            "{} {method}: {answer}",
            self.era()
        );
        answer["result"].clone()
    }

    /// The first `contents[]` entry of reading `uri`.
    async fn read(&self, uri: &str) -> Value {
        let result = self.result("resources/read", json!({"uri": uri})).await;
        result["contents"][0].clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_links_from_server_everything_are_public_and_read_back_in_both_eras() {
    let Some(project) = node_project() else {
        return;
    };
    let (_everything, _alpha, gw) = everything_and_alpha(&project).await;
    for client in RawClient::both(&gw).await {
        let era = client.era();
        let result = client
            .result(
                "tools/call",
                json!({"name": "everything-get-resource-links", "arguments": {"count": 2}}),
            )
            .await;
        let content = result["content"].as_array().expect("content blocks");
        assert_eq!(
            content[0]["text"], "Here are 2 resource links to resources available in this server:",
            "{era}: text blocks are not touched"
        );
        let links: Vec<&str> = content[1..]
            .iter()
            .map(|block| {
                assert_eq!(block["type"], "resource_link", "{era}: {result}");
                block["uri"].as_str().expect("a link URI")
            })
            .collect();
        assert_eq!(
            links,
            ["everything-demo://resource/dynamic/blob/1", TEXT_2],
            "{era}: {result}"
        );
        let text = client.read(TEXT_2).await;
        assert_eq!(
            text["uri"], TEXT_2,
            "{era}: the read answer names it the same way"
        );
        assert!(
            text["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Resource 2: This is a plaintext resource")),
            "{era}: {text}"
        );
        let blob = client.read(links[0]).await;
        assert_eq!(blob["uri"], links[0], "{era}");
        assert!(blob["blob"].is_string(), "{era}: {blob}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_prompt_resources_and_template_completions_route_back_in_both_eras() {
    let Some(project) = node_project() else {
        return;
    };
    let (_everything, _alpha, gw) = everything_and_alpha(&project).await;
    for client in RawClient::both(&gw).await {
        let era = client.era();
        let prompt = client
            .result(
                "prompts/get",
                json!({"name": "everything-resource-prompt",
                       "arguments": {"resourceType": "Text", "resourceId": "3"}}),
            )
            .await;
        let messages = prompt["messages"].as_array().expect("messages");
        assert_eq!(
            messages[0]["content"]["text"],
            "This prompt includes the Text resource with id: 3. Please analyze the following resource:",
            "{era}"
        );
        let embedded = &messages[1]["content"];
        assert_eq!(embedded["type"], "resource", "{era}: {prompt}");
        let uri = embedded["resource"]["uri"]
            .as_str()
            .expect("an embedded URI");
        assert_eq!(uri, "everything-demo://resource/dynamic/text/3", "{era}");
        let read = client.read(uri).await;
        assert_eq!(read["uri"], uri, "{era}");
        assert!(
            read["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Resource 3: This is a plaintext resource")),
            "{era}: {read}"
        );

        // A completion for a template's variable routes on the public template the client listed;
        // its values are variable values, not URIs, and come back as the backend gave them.
        let templates = client.result("resources/templates/list", json!({})).await;
        let template = "everything-demo://resource/dynamic/text/{resourceId}";
        assert!(
            templates["resourceTemplates"]
                .as_array()
                .is_some_and(|all| all.iter().any(|t| t["uriTemplate"] == template)),
            "{era}: {templates}"
        );
        let completion = client
            .result(
                "completion/complete",
                json!({"ref": {"type": "ref/resource", "uri": template},
                       "argument": {"name": "resourceId", "value": "7"}}),
            )
            .await;
        assert_eq!(completion["completion"]["values"], json!(["7"]), "{era}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uri_that_belongs_to_no_backend_is_passed_through_untouched() {
    let Some(project) = node_project() else {
        return;
    };
    let (everything, _alpha, gw) = everything_and_alpha(&project).await;
    for client in RawClient::both(&gw).await {
        let era = client.era();
        // URIs a client sends in arguments are its own data: not mapped, in either direction.
        let message = "demo://resource/dynamic/text/2 and everything-demo://x";
        let echoed = client
            .result(
                "tools/call",
                json!({"name": "everything-echo", "arguments": {"message": message}}),
            )
            .await;
        assert_eq!(
            echoed["content"][0]["text"],
            format!("Echo: {message}"),
            "{era}"
        );
        // The backend's own URI names no backend of this virtual host: nothing to route it to.
        let answer = client
            .ask(
                "resources/read",
                json!({"uri": "demo://resource/dynamic/text/2"}),
            )
            .await;
        let code = if era == "2026-07-28" { -32602 } else { -32603 };
        assert_eq!(
            answer["error"],
            json!({"code": code, "message": "wrong resource name: demo://resource/dynamic/text/2"}),
            "{era}: {answer}"
        );
    }

    // Control: with `naming = "auto"` and one backend, public URIs are the backend's own.
    let single = Gateway::start(&[(
        "alice",
        json!({"virtual_hosts": {"vh": {"naming": "auto", "backends": {
            "everything": {"url": everything.url(), "timeout_ms": 5000}}}}}),
    )])
    .await;
    for client in RawClient::both(&single).await {
        let era = client.era();
        let result = client
            .result(
                "tools/call",
                json!({"name": "get-resource-links", "arguments": {"count": 2}}),
            )
            .await;
        assert_eq!(
            result["content"][2]["uri"], "demo://resource/dynamic/text/2",
            "{era}: {result}"
        );
        let read = client.read("demo://resource/dynamic/text/2").await;
        assert_eq!(read["uri"], "demo://resource/dynamic/text/2", "{era}");
    }
}

/// What the Python SDK saw reading back `everything-get-resource-links`' two links.
fn assert_links_read_back(summary: &Value) {
    let links = summary["links"]
        .as_array()
        .unwrap_or_else(|| panic!("no links in {summary}"));
    let uris: Vec<&str> = links.iter().filter_map(|l| l["uri"].as_str()).collect();
    assert_eq!(
        uris,
        ["everything-demo://resource/dynamic/blob/1", TEXT_2],
        "{summary}"
    );
    for link in links {
        assert_eq!(link["read"][0]["uri"], link["uri"], "{summary}");
    }
    assert!(
        links[1]["read"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Resource 2:")),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_clients_of_both_eras_read_back_server_everything_links() {
    let Some(project) = node_project() else {
        return;
    };
    let (_everything, _alpha, gw) = everything_and_alpha(&project).await;
    let url = format!("http://{}/servers/vh/mcp", gw.addr);
    let runs = [("mcp1", "legacy"), ("mcp2", "auto")];
    for (venv, mode) in runs {
        let Some(python) = python(venv) else { return };
        let summary = py_client(
            &python,
            &url,
            "everything-get-resource-links",
            mode,
            &["--arguments", r#"{"count": 2}"#, "--read-links"],
        )
        .await;
        if mode == "auto" {
            assert_eq!(summary["protocol_version"], "2026-07-28", "{summary}");
        } else {
            assert_legacy_session(&summary);
        }
        assert_links_read_back(&summary);
    }
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
    let everything = ServerEverything::start(&project, EverythingTransport::StreamableHttp).await;
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
