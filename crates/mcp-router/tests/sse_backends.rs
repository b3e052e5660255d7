//! HTTP+SSE (2024-11-05 transport) backends: a real Python SDK 1.x FastMCP server serving the old
//! transport (`tests/interop/py_sse_server.py`) behind the router next to an HTTP backend. Modern
//! and legacy clients of several principals list and call tools of both, concurrently; the
//! default transport finds the SSE server by the spec's fallback rule; a server killed mid-call
//! fails that call and is reconnected once it is back; an `endpoint` event naming another origin
//! and a POST answered non-2xx fail with clear errors (tiny hand-written servers for those hostile
//! cases).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use bytes::Bytes;
use futures_util::StreamExt;
use mcp_router::McpRouter;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::PortedChild;
use mcp_test_support::peers::{python, root};
use mcp_test_support::stack::{Gateway, vhost_config};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A running `py_sse_server.py`; killed when dropped.
struct PyServer(PortedChild);

impl PyServer {
    /// Starts the server on `port` (0: a free one) and waits until it accepts connections.
    async fn start(python: &Path, port: u16) -> Self {
        let mut command = tokio::process::Command::new(python);
        command
            .arg(root().join("tests/interop/py_sse_server.py"))
            .arg(port.to_string());
        Self(PortedChild::spawn(command).await)
    }

    fn port(&self) -> u16 {
        self.0.port
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/sse", self.port())
    }
}

/// A virtual host with the HTTP backend `alpha` and the backend `py` (`py` holds its config).
fn config(alpha: &TestBackend, py: Value) -> Value {
    vhost_config(json!({"backends": {"alpha": {"url": alpha.url()}, "py": py}}))
}

fn router() -> McpRouter {
    McpRouter::builder()
        .fanout_deadline(Duration::from_secs(20))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_server_serves_modern_and_legacy_clients_of_several_principals() {
    let Some(python) = python("mcp1") else {
        return; // `python` said loudly why.
    };
    let server = PyServer::start(&python, 0).await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let users = config(
        &alpha,
        json!({"url": server.url(), "transport": "sse", "timeout_ms": 20000}),
    );
    let gw = Gateway::start_with(&[("alice", users.clone()), ("bob", users)], router()).await;

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

    // Several principals at once, each on its own connection: every answer reaches its caller.
    let calls = (0..8).map(|n| {
        let sub = if n % 2 == 0 { "alice" } else { "bob" };
        let tool = if n % 3 == 0 { "alpha-echo" } else { "py-echo" };
        let gw = &gw;
        async move {
            let reply = gw
                .call_tool(sub, tool, json!({"text": format!("{sub}-{n}")}))
                .await;
            (n, sub, tool, reply.result_text())
        }
    });
    for (n, sub, tool, answer) in futures_util::future::join_all(calls).await {
        let server = if tool == "alpha-echo" {
            "alpha"
        } else {
            "py-sse"
        };
        assert_eq!(answer, format!("{server}: {sub}-{n}"));
    }

    // Progress from the SSE server reaches the caller with the caller's token.
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
    let messages = slow.sse_messages();
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{}", slow.text());
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "tok-1")
    );
    assert_eq!(
        messages.last().map(|m| &m["result"]["content"][0]["text"]),
        Some(&json!("py-sse: done"))
    );

    // A 2025 session lists and calls both backends.
    let session = gw.legacy_session("alice", "vh").await;
    let listed = gw
        .legacy("alice", "vh", &session, "tools/list", json!({}))
        .await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools: {listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"py-echo") && names.contains(&"alpha-echo"),
        "{names:?}"
    );
    for (tool, expected) in [
        ("py-echo", "py-sse: legacy"),
        ("alpha-echo", "alpha: legacy"),
    ] {
        let answer = gw
            .legacy(
                "alice",
                "vh",
                &session,
                "tools/call",
                json!({"name": tool, "arguments": {"text": "legacy"}}),
            )
            .await;
        assert_eq!(answer["result"]["content"][0]["text"], expected, "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_transport_finds_an_sse_server_by_the_fallback_rule() {
    let Some(python) = python("mcp1") else {
        return; // `python` said loudly why.
    };
    let server = PyServer::start(&python, 0).await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let users = config(&alpha, json!({"url": server.url(), "timeout_ms": 20000}));
    let gw = Gateway::start_with(&[("alice", users)], router()).await;

    let names = gw
        .modern("alice", "vh", "tools/list", json!({}))
        .await
        .tool_names();
    assert!(names.iter().any(|n| n == "py-echo"), "{names:?}");
    for n in 0..3 {
        assert_eq!(
            gw.call_tool("alice", "py-echo", json!({"text": format!("found-{n}")}))
                .await
                .result_text(),
            format!("py-sse: found-{n}")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sse_server_fails_its_call_and_is_reconnected_once_back() {
    let Some(python) = python("mcp1") else {
        return; // `python` said loudly why.
    };
    let server = PyServer::start(&python, 0).await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let users = config(
        &alpha,
        json!({"url": server.url(), "transport": "sse", "timeout_ms": 20000}),
    );
    let router = router();
    let breakers = router.breakers().clone();
    let gw = Gateway::start_with(&[("alice", users)], router).await;
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
        .expect("the SSE backend URL has a breaker");
    assert!(snapshot.1.consecutive_failures >= 1, "{snapshot:?}");

    let port = server.port();
    drop(server);
    let restarted = PyServer::start(&python, port).await;
    // The reconnect waits for its backoff; calls fail at once until then.
    let mut after = None;
    for _ in 0..50 {
        let reply = gw.call_tool("alice", "py-pid", json!({})).await;
        if reply.json()["result"].is_object() {
            after = Some(reply.result_text());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = after.expect("the gateway reconnects");
    assert_ne!(after, before, "served by the restarted server");
    drop(restarted);
}

/// A server that counts the requests it gets.
async fn counting_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new()
        .fallback(|State(hits): State<Arc<AtomicUsize>>| async move {
            hits.fetch_add(1, Ordering::SeqCst);
            StatusCode::ACCEPTED
        })
        .with_state(Arc::clone(&hits));
    (serve(app).await, hits)
}

async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// An SSE response whose events are `first`, then whatever arrives on `more`; it stays open.
fn event_stream(first: String, more: mpsc::UnboundedReceiver<String>) -> impl IntoResponse {
    let more = futures_util::stream::unfold(more, |mut more| async move {
        more.recv().await.map(|event| (event, more))
    });
    let events = futures_util::stream::once(async move { first })
        .chain(more)
        .chain(futures_util::stream::pending())
        .map(|event| Ok::<_, Infallible>(Bytes::from(event)));
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(events),
    )
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    let (evil, hits) = counting_server().await;
    let app = axum::Router::new().route(
        "/sse",
        axum::routing::get(move || async move {
            let first = format!("event: endpoint\ndata: http://{evil}/messages/?session_id=x\n\n");
            event_stream(first, mpsc::unbounded_channel().1)
        }),
    );
    let hostile = serve(app).await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let users = config(
        &alpha,
        json!({"url": format!("http://{hostile}/sse"), "transport": "sse"}),
    );
    let gw = Gateway::start_with(&[("alice", users)], router()).await;

    let refused = gw.call_tool("alice", "py-echo", json!({"text": "x"})).await;
    assert_eq!(
        refused.json()["error"]["message"],
        "Backend py failed: malformed backend response: SSE endpoint on another origin",
        "{}",
        refused.text()
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing was POSTed there");
    // The HTTP backend of the same virtual host is unaffected.
    assert_eq!(
        gw.call_tool("alice", "alpha-echo", json!({"text": "ok"}))
            .await
            .result_text(),
        "alpha: ok"
    );
}

/// An SSE server that answers `initialize` and `tools/list` (one tool, `echo`) on its stream,
/// accepts notifications, and answers every other POST with HTTP 503.
async fn refusing_server() -> SocketAddr {
    type Streams = Arc<std::sync::Mutex<Option<mpsc::UnboundedSender<String>>>>;
    let stream: Streams = Arc::default();
    let app = axum::Router::new()
        .route(
            "/sse",
            axum::routing::get(|State(stream): State<Streams>| async move {
                let (tx, rx) = mpsc::unbounded_channel();
                *stream.lock().expect("lock") = Some(tx);
                event_stream("event: endpoint\ndata: /messages\n\n".to_owned(), rx)
            }),
        )
        .route(
            "/messages",
            axum::routing::post(|State(stream): State<Streams>, body: Bytes| async move {
                let message: Value = serde_json::from_slice(&body).expect("JSON-RPC");
                let result = match message["method"].as_str() {
                    Some("initialize") => json!({"protocolVersion": "2024-11-05",
                        "capabilities": {"tools": {}}, "serverInfo": {"name": "refusing", "version": "1"}}),
                    Some("tools/list") => json!({"tools": [{"name": "echo",
                        "inputSchema": {"type": "object"}}]}),
                    _ if message.get("id").is_none() => return StatusCode::ACCEPTED,
                    _ => return StatusCode::SERVICE_UNAVAILABLE,
                };
                let answer = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
                if let Some(tx) = stream.lock().expect("lock").as_ref() {
                    let _ = tx.send(format!("event: message\ndata: {answer}\n\n"));
                }
                StatusCode::ACCEPTED
            }),
        )
        .with_state(stream);
    serve(app).await
}

#[tokio::test]
async fn a_call_whose_post_is_refused_fails_with_the_status() {
    let refusing = refusing_server().await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let users = config(
        &alpha,
        json!({"url": format!("http://{refusing}/sse"), "transport": "sse"}),
    );
    let gw = Gateway::start_with(&[("alice", users)], router()).await;

    let names = gw
        .modern("alice", "vh", "tools/list", json!({}))
        .await
        .tool_names();
    assert!(names.iter().any(|n| n == "py-echo"), "{names:?}");
    let refused = gw.call_tool("alice", "py-echo", json!({})).await;
    assert_eq!(
        refused.json()["error"]["message"],
        "Backend py failed: backend answered HTTP 503",
        "{}",
        refused.text()
    );
}
