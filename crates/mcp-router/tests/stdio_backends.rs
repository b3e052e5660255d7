//! stdio backends (a real Python SDK 1.x FastMCP server run as a child process,
//! `tests/interop/py_stdio_server.py`) behind the router next to an HTTP backend: modern and
//! legacy clients list prefixed tools from both and call them, concurrently from several
//! principals; a process that dies mid-call fails that call, the next call restarts it and the
//! breaker sees the failure; `per_principal` processes end after their idle timeout; a command
//! outside the operator's allow-list is never started. The router trusts these configurations'
//! authors (`trust_user_commands`), so their `args` and `stdio_policy = "shared"` are honoured.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_router::McpRouter;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::peers::{python, root};
use mcp_test_support::stack::{Gateway, vhost_config};
use serde_json::{Value, json};

fn script() -> PathBuf {
    root().join("tests/interop/py_stdio_server.py")
}

/// A virtual host with the HTTP backend `alpha` and the stdio backend `py`.
fn config(alpha: &TestBackend, python: &Path, marker: &str, py: Value) -> Value {
    let mut stdio = json!({
        "command": python.to_str().expect("utf-8 path"),
        "args": [script().to_str().expect("utf-8 path"), marker],
        "timeout_ms": 20000,
    });
    if let (Some(stdio), Some(extra)) = (stdio.as_object_mut(), py.as_object()) {
        stdio.extend(extra.clone());
    }
    vhost_config(json!({"backends": {"alpha": {"url": alpha.url()}, "py": stdio}}))
}

fn router(python: &Path) -> McpRouter {
    McpRouter::builder()
        .fanout_deadline(Duration::from_secs(20))
        .stdio_allowed_commands(vec![python.to_str().expect("utf-8 path").to_owned()])
        .trust_user_commands(true)
        .build()
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmdline| {
            cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == marker.as_bytes())
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_serves_modern_and_legacy_clients_of_several_principals() {
    let Some(python) = python("mcp1") else {
        return; // `python` said loudly why.
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let marker = format!("stdio-shared-{}", std::process::id());
    let users = config(&alpha, &python, &marker, json!({"stdio_policy": "shared"}));
    let gw =
        Gateway::start_with(&[("alice", users.clone()), ("bob", users)], router(&python)).await;

    let names = gw
        .modern("alice", "vh", "tools/list", json!({}))
        .await
        .tool_names();
    for tool in ["py-echo", "py-slow", "alpha-echo"] {
        assert!(names.iter().any(|n| n == tool), "{tool} in {names:?}");
    }
    assert_eq!(
        gw.call_tool("alice", "alpha-echo", json!({"text": "http"}))
            .await
            .result_text(),
        "alpha: http"
    );

    // Several principals at once on the one shared process: every answer reaches its caller.
    let calls = (0..8).map(|n| {
        let sub = if n % 2 == 0 { "alice" } else { "bob" };
        let gw = &gw;
        async move {
            let reply = gw
                .call_tool(sub, "py-echo", json!({"text": format!("{sub}-{n}")}))
                .await;
            (n, sub, reply.result_text())
        }
    });
    for (n, sub, answer) in futures_util::future::join_all(calls).await {
        assert_eq!(answer, format!("py: {sub}-{n}"));
    }
    assert_eq!(processes_with(&marker), 1, "one shared process");

    // Progress from the stdio server reaches the caller with the caller's token.
    let mut meta = mcp_test_support::stack::modern_meta();
    meta["progressToken"] = json!("tok-1");
    let slow = gw
        .modern(
            "bob",
            "vh",
            "tools/call",
            json!({"name": "py-slow", "arguments": {"steps": 3}, "_meta": meta}),
        )
        .await;
    let progress: Vec<Value> = slow
        .sse_messages()
        .into_iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{}", slow.text());
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "tok-1")
    );

    // A 2025 session uses the same process.
    let session = gw.legacy_session("alice", "vh").await;
    let legacy = gw
        .legacy(
            "alice",
            "vh",
            &session,
            "tools/call",
            json!({"name": "py-echo", "arguments": {"text": "legacy"}}),
        )
        .await;
    assert_eq!(
        legacy["result"]["content"][0]["text"], "py: legacy",
        "{legacy}"
    );
    assert_eq!(processes_with(&marker), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_process_fails_its_call_and_is_restarted() {
    let Some(python) = python("mcp1") else {
        return; // `python` said loudly why.
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let marker = format!("stdio-crash-{}", std::process::id());
    let router = router(&python);
    let breakers = router.breakers().clone();
    let gw = Gateway::start_with(
        &[("alice", config(&alpha, &python, &marker, json!({})))],
        router,
    )
    .await;
    let before = gw
        .call_tool("alice", "py-pid", json!({}))
        .await
        .result_text();

    let crashed = gw.call_tool("alice", "py-crash", json!({})).await;
    assert_eq!(
        crashed.json()["error"]["message"],
        "Backend py failed: backend connection lost",
        "{}",
        crashed.text()
    );
    let snapshot = breakers
        .snapshots()
        .into_iter()
        // Registry keys are "<backend name>\0<opaque credential scope id>".
        .find(|(key, _)| key.starts_with("py\u{0}"))
        .expect("the stdio backend has a breaker");
    assert_eq!(snapshot.1.consecutive_failures, 1, "{snapshot:?}");

    // After the restart backoff the next call gets a fresh process.
    let mut after = None;
    for _ in 0..50 {
        let reply = gw.call_tool("alice", "py-pid", json!({})).await;
        if reply.json()["result"].is_object() {
            after = Some(reply.result_text());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = after.expect("the process is restarted");
    assert_ne!(after, before, "a new process");
    assert_eq!(processes_with(&marker), 1, "the dead one was reaped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_principal_processes_end_after_their_idle_timeout() {
    let Some(python) = python("mcp1") else {
        return; // `python` said loudly why.
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let marker = format!("stdio-idle-{}", std::process::id());
    let users = config(
        &alpha,
        &python,
        &marker,
        json!({"stdio_policy": "per_principal", "idle_timeout_s": 1}),
    );
    let gw =
        Gateway::start_with(&[("alice", users.clone()), ("bob", users)], router(&python)).await;
    let alice = gw
        .call_tool("alice", "py-pid", json!({}))
        .await
        .result_text();
    let bob = gw.call_tool("bob", "py-pid", json!({})).await.result_text();
    assert_ne!(alice, bob, "one process per principal");
    // (Not counted here: on a loaded machine alice's process may already have idled out.)
    assert!(processes_with(&marker) >= 1);
    let mut gone = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if processes_with(&marker) == 0 {
            gone = true;
            break;
        }
    }
    assert!(gone, "idle per-principal processes are ended and reaped");
    assert_eq!(
        gw.call_tool("alice", "py-echo", json!({"text": "back"}))
            .await
            .result_text(),
        "py: back",
        "a later call starts a new one"
    );
}

#[tokio::test]
async fn a_command_outside_the_allow_list_is_never_started() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let marker = format!("stdio-denied-{}", std::process::id());
    let users = config(&alpha, Path::new("/bin/sh"), &marker, json!({}));
    let gw = Gateway::start_with(
        &[("alice", users)],
        McpRouter::builder()
            .stdio_allowed_commands(vec!["/usr/bin/true".to_owned()])
            .build(),
    )
    .await;
    let refused = gw.call_tool("alice", "py-echo", json!({"text": "x"})).await;
    assert_eq!(
        refused.json()["error"]["message"],
        "Backend py failed: backend command not allowed by the gateway operator",
        "{}",
        refused.text()
    );
    assert_eq!(processes_with(&marker), 0);
    // The HTTP backend of the same virtual host is unaffected.
    assert_eq!(
        gw.call_tool("alice", "alpha-echo", json!({"text": "ok"}))
            .await
            .result_text(),
        "alpha: ok"
    );
}
