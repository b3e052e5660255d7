//! Two gateway processes sending on one upstream 2025 session (book: docs/src/several-nodes.md,
//! "Which ids are unique where"). One principal has two sessions, one served by each node; the
//! upstream session is shared per credential scope, and the node that did not create it adopts
//! it from the session record in Redis. The backend is a real FastMCP 1.x server
//! (`tests/interop/py_fastmcp_server.py`), which keeps one response stream per request id within
//! its session, so two nodes that numbered their upstream ids alike would be given each other's
//! answers (and time out on their own).
//!
//! Every tool answer names the upstream session and request id it ran with, which gives the
//! controls: all calls ran in one upstream session, and both nodes' requests reached it.

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use futures_util::future::join_all;
use mcp_test_support::{PortedChild, RedisServer, rpc_request};
use serde_json::{Value, json};
use support::{GatewayProcess, Reply, base_config, workdir};

const SEALING: &str = "shared-upstream-session-sealing-secret-0123";
/// Concurrent `echo` calls per round (half through each node) and rounds.
const CALLS: usize = 100;
const ROUNDS: usize = 3;
/// Concurrent `progress` calls (half through each node), and notifications per call.
const PROGRESS_CALLS: usize = 40;
const STEPS: u64 = 3;

/// The FastMCP backend; killed when dropped.
struct FastMcp(PortedChild);

impl FastMcp {
    async fn start(python: &Path) -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut command = tokio::process::Command::new(python);
        command
            .arg(root.join("tests/interop/py_fastmcp_server.py"))
            .current_dir(root.join("tests/interop"));
        Self(PortedChild::spawn(command).await)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.0.port)
    }
}

struct Node {
    _dir: mcp_test_support::TempDir,
    process: GatewayProcess,
}

async fn start_node(name: &str, backend: &str, redis: &str) -> Node {
    let dir = workdir(name);
    support::write(
        dir.path(),
        "users.json",
        // 30 s per call: a hundred concurrent calls on a busy 2-core machine, with margin.
        &json!({"users": {"alice": {"virtual_hosts": {"vh": {"backends": {
            "py": {"url": backend, "timeout_ms": 30000}}}}}}})
        .to_string(),
    );
    let config = base_config(&format!(
        "\n[router]\nsealing_secret_env = \"MCP_GATEWAY_SEALING_SECRET\"\n\n\
         [sessions]\nkind = \"redis\"\nurl = \"{redis}\"\n"
    ));
    let process = GatewayProcess::start(
        dir.path(),
        &config,
        &[("MCP_GATEWAY_SEALING_SECRET", SEALING)],
    )
    .await;
    Node { _dir: dir, process }
}

async fn post(node: &Node, session: Option<&str>, body: Value) -> Reply {
    support::legacy_post(node.process.addr, "alice", "vh", session, &body).await
}

async fn initialize(node: &Node) -> String {
    support::legacy_initialize_with(node.process.addr, "alice", "vh", json!({})).await
}

/// What the backend said it saw for one call: `(text, upstream session, upstream request id)`.
#[derive(Debug)]
struct Seen {
    text: String,
    session: String,
    request: String,
}

/// The response to request `id` in `reply`, which must be a tool result (no error), read as what
/// the backend saw.
fn seen(reply: &Reply, id: u64) -> Result<Seen, String> {
    if reply.status != 200 {
        return Err(format!("HTTP {}: {}", reply.status, reply.text()));
    }
    let message = reply
        .messages()
        .into_iter()
        .find(|m| m["id"] == id)
        .ok_or_else(|| format!("no response to {id}: {}", reply.text()))?;
    let text = message["result"]["content"][0]["text"]
        .as_str()
        .ok_or_else(|| format!("not a tool result: {message}"))?;
    let saw: Value = serde_json::from_str(text).map_err(|e| format!("{e}: {text}"))?;
    let field = |name: &str| saw[name].as_str().unwrap_or_default().to_owned();
    Ok(Seen {
        text: field("text"),
        session: field("session"),
        request: field("request"),
    })
}

/// The node part of an upstream request id `<node>-<n>`.
fn node_of(request: &str) -> &str {
    request.rsplit_once('-').map_or(request, |(node, _)| node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_one_upstream_session_each_get_their_own_answers_and_progress() {
    let Some(python) = support::python_mcp1() else {
        return;
    };
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let backend = FastMcp::start(&python).await;
    let a = start_node("shared-a", &backend.url(), &redis.url()).await;
    let b = start_node("shared-b", &backend.url(), &redis.url()).await;

    // Both sessions start on node A, which opens the caller's upstream session and shares it
    // between them (one per credential scope and client capabilities). Session one then goes on
    // through node A and session two through node B, whose first call makes B adopt that
    // upstream session from the record in Redis (as any node reached by a session it did not
    // create does, until it opens one of its own).
    let one = initialize(&a).await;
    let two = initialize(&a).await;
    let adopt = post(
        &b,
        Some(&two),
        rpc_request(
            1,
            "tools/call",
            json!({"name": "py-echo", "arguments": {"text": "adopt"}}),
        ),
    )
    .await;
    let adopted = seen(&adopt, 1).expect("the adopting call");

    let mut sessions = BTreeSet::from([adopted.session.clone()]);
    let mut nodes = BTreeSet::new();
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let calls = (0..CALLS).map(|i| {
            let (node, session) = if i % 2 == 0 { (&a, &one) } else { (&b, &two) };
            let text = format!(
                "round {round} call {i} via {}",
                if i % 2 == 0 { "A" } else { "B" }
            );
            let id = 1000 + i as u64;
            let body = rpc_request(
                id,
                "tools/call",
                json!({"name": "py-echo", "arguments": {"text": text}}),
            );
            async move { (text, seen(&post(node, Some(session), body).await, id)) }
        });
        for (text, result) in join_all(calls).await {
            match result {
                Ok(saw) if saw.text == text => {
                    sessions.insert(saw.session);
                    nodes.insert(node_of(&saw.request).to_owned());
                }
                Ok(saw) => failures.push(format!("{text:?} got the answer of {:?}", saw.text)),
                Err(e) => failures.push(format!("{text:?} failed: {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} calls went wrong:\n{}",
        failures.len(),
        CALLS * ROUNDS,
        failures.join("\n")
    );
    // The controls: one upstream session, used by both nodes.
    assert_eq!(sessions.len(), 1, "one upstream session: {sessions:?}");
    assert_eq!(nodes.len(), 2, "both nodes' requests reached it: {nodes:?}");

    // Progress: each call's notifications carry its own token and text, all of them arrive.
    let calls = (0..PROGRESS_CALLS).map(|i| {
        let (node, session) = if i % 2 == 0 { (&a, &one) } else { (&b, &two) };
        let text = format!("progress call {i}");
        let token = format!("client-token-{i}");
        let id = 5000 + i as u64;
        let body = rpc_request(
            id,
            "tools/call",
            json!({"name": "py-progress", "arguments": {"text": text, "steps": STEPS},
                   "_meta": {"progressToken": token}}),
        );
        async move {
            let reply = post(node, Some(session), body).await;
            (text, token, id, reply)
        }
    });
    let mut progress_failures = Vec::new();
    for (text, token, id, reply) in join_all(calls).await {
        let progress: Vec<Value> = reply
            .messages()
            .into_iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        let own = progress
            .iter()
            .filter(|m| {
                m["params"]["progressToken"] == token.as_str()
                    && m["params"]["message"] == text.as_str()
            })
            .count();
        if own != STEPS as usize || progress.len() != own {
            progress_failures.push(format!(
                "{text:?}: {} own of {} progress notifications: {progress:?}",
                own,
                progress.len()
            ));
        }
        match seen(&reply, id) {
            Ok(saw) if saw.text == text => {}
            Ok(saw) => progress_failures.push(format!("{text:?} got the answer of {:?}", saw.text)),
            Err(e) => progress_failures.push(format!("{text:?} failed: {e}")),
        }
    }
    assert!(
        progress_failures.is_empty(),
        "{}",
        progress_failures.join("\n")
    );

    // The request ids each node sent name that node (12 hex digits), so the two never meet.
    assert!(
        nodes
            .iter()
            .all(|n| n.len() == 12 && n.chars().all(|c| c.is_ascii_hexdigit())),
        "{nodes:?}"
    );
}
