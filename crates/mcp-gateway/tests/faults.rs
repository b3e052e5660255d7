//! Fault injection with real processes (issue #11, part 3): a backend killed mid-stream, a backend
//! that accepts connections and never answers, a client that disconnects mid-stream (the upstream
//! call is cancelled and no connection is left open), slowloris clients (freed by
//! `limits.header_read_timeout_ms`), and Redis — config store and session store — killed and
//! restarted under load (503 fast, then recovery without a gateway restart).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcp_config_store::{RedisStore, RedisStoreConfig, UserConfig};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{EventStream, RedisServer};
use serde_json::json;
use support::{
    GatewayProcess, Reply, base_config, bearer, legacy_initialize, legacy_post, metric, modern,
    modern_meta, modern_request, poll_until, rpc_error, users_json, workdir,
};

const OPEN_MCP_CONNECTIONS: &str = r#"mcp_gateway_connections_open{listener="mcp"}"#;

/// Opens a 2026-07-28 `alpha-slow` call with a progress token (so it streams) and returns the
/// open stream after its first progress notification.
async fn slow_call(gw: &GatewayProcess, steps: u64) -> EventStream {
    let mut meta = modern_meta();
    meta["progressToken"] = json!("p1");
    let (headers, body) = modern_request(
        "tools/call",
        json!({"name": "alpha-slow", "arguments": {"steps": steps, "delay_ms": 100}, "_meta": meta}),
    );
    let auth = bearer("alice");
    let mut all: Vec<(&str, &str)> = vec![("authorization", &auth)];
    all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
    let mut stream = EventStream::open(gw.addr, "POST", "/servers/vh1/mcp", &all, &body).await;
    assert_eq!(stream.status, 200);
    let progress = stream
        .next_message_where(Duration::from_secs(20), |m| {
            m["method"] == "notifications/progress"
        })
        .await;
    assert_eq!(progress["params"]["progressToken"], "p1");
    stream
}

async fn gateway_for(
    backends: &[(&str, String)],
    extra: &str,
) -> (GatewayProcess, mcp_test_support::TempDir) {
    let dir = workdir("gw-faults");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh1", backends)]),
    );
    let gw = GatewayProcess::start(dir.path(), &base_config(extra), &[]).await;
    (gw, dir)
}

/// The backend dies while it streams a call's progress: the client's stream ends with the call's
/// JSON-RPC error (not a hang, not a cut connection); calls fail fast while it is down and work
/// again once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_killed_mid_stream_ends_the_call_with_an_error() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_for(&[("alpha", alpha.url())], "").await;
    let mut stream = slow_call(&gw, 200).await;

    alpha.stop().await;
    let last = stream
        .next_message_where(Duration::from_secs(20), |m| m["id"] == 1)
        .await;
    // Whether the kill reaches the gateway as a reset or as an early end of the body is a race
    // of the backend's shutdown; both end the call with an error naming the backend.
    assert_eq!(last["error"]["code"], -32603, "{last}");
    assert!(
        [
            "Backend alpha failed: backend ended its answer without a response",
            "Backend alpha failed: backend connection lost",
        ]
        .contains(&last["error"]["message"].as_str().unwrap_or_default()),
        "{last}"
    );
    assert!(
        stream.next_event(Duration::from_secs(10)).await.is_none(),
        "the stream ends after the error"
    );

    let echo = json!({"name": "alpha-echo", "arguments": {"text": "x"}});
    let down = modern(gw.addr, "alice", "vh1", "tools/call", echo.clone(), &[]).await;
    assert_eq!(down.status, 200, "{}", down.text());
    assert_eq!(
        rpc_error(&down),
        (
            -32603,
            "Backend alpha failed: backend unreachable".to_owned()
        )
    );

    alpha.restart().await;
    let back = poll_until(Duration::from_secs(30), || async {
        let reply = modern(gw.addr, "alice", "vh1", "tools/call", echo.clone(), &[]).await;
        reply
            .messages()
            .pop()
            .is_some_and(|m| m["result"]["content"][0]["text"] == "alpha: x")
    })
    .await;
    assert!(back, "calls did not recover after the backend restarted");
}

/// The same for a 2025 client in a session, streaming a legacy backend's progress: the POST
/// stream ends with the call's JSON-RPC error, and the session stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_backend_killed_mid_stream_ends_a_2025_call_with_an_error() {
    let legacy = TestBackend::start(BackendSpec::legacy("legacy")).await;
    let (gw, _dir) = gateway_for(&[("legacy", legacy.url())], "").await;
    let session = legacy_initialize(gw.addr, "alice", "vh1").await;
    let auth = bearer("alice");
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "legacy-slow", "arguments": {"steps": 200, "delay_ms": 100},
        "_meta": {"progressToken": "p2"}}});
    let mut stream = EventStream::open(
        gw.addr,
        "POST",
        "/servers/vh1/mcp",
        &headers,
        &call.to_string(),
    )
    .await;
    assert_eq!(stream.status, 200);
    stream
        .next_message_where(Duration::from_secs(20), |m| {
            m["method"] == "notifications/progress"
        })
        .await;

    legacy.stop().await;
    let last = stream
        .next_message_where(Duration::from_secs(20), |m| m["id"] == 1)
        .await;
    // A reset or an early end of the body, depending on the backend's shutdown (see above).
    assert_eq!(last["error"]["code"], -32603, "{last}");
    assert!(
        [
            "Backend legacy failed: backend ended its answer without a response",
            "Backend legacy failed: backend connection lost",
        ]
        .contains(&last["error"]["message"].as_str().unwrap_or_default()),
        "{last}"
    );

    legacy.restart().await;
    let echo = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "legacy-echo", "arguments": {"text": "again"}}});
    let back = poll_until(Duration::from_secs(30), || async {
        let reply = legacy_post(gw.addr, "alice", "vh1", Some(&session), &echo).await;
        reply
            .messages()
            .pop()
            .is_some_and(|m| m["result"]["content"][0]["text"] == "legacy: again")
    })
    .await;
    assert!(
        back,
        "the session did not recover after the backend restarted"
    );
}

/// Holds every accepted connection open without reading or answering.
async fn black_hole() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    (addr, task)
}

/// A backend that accepts connections and never answers: a routed call ends at the backend's
/// `timeout_ms` with a JSON-RPC error, and a list leaves it out (named in
/// `_meta["mcp-gateway/degraded"]`) after `router.fanout_deadline_ms` while the others answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_never_answers_is_timed_out_and_left_out() {
    let good = TestBackend::start(BackendSpec::modern("good")).await;
    let (hole, task) = black_hole().await;
    let dir = workdir("gw-faults-hole");
    support::write(
        dir.path(),
        "users.json",
        &json!({"users": {"alice": {"virtual_hosts": {"vh1": {"backends": {
            "good": {"url": good.url()},
            "mute": {"url": format!("http://{hole}/mcp"), "timeout_ms": 1000},
        }}}}}})
        .to_string(),
    );
    let config = base_config("\n[router]\nfanout_deadline_ms = 1500\nstale_if_error_s = 0\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;

    let call = modern(
        gw.addr,
        "alice",
        "vh1",
        "tools/call",
        json!({"name": "mute-anything", "arguments": {}}),
        &[],
    )
    .await;
    assert_eq!(call.status, 200, "{}", call.text());
    assert_eq!(
        rpc_error(&call),
        (
            -32603,
            "Backend mute failed: backend timed out after 1s".to_owned()
        )
    );

    let list = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let result = &list.json()["result"];
    let names = list.tool_names();
    assert!(names.iter().any(|n| n == "good-echo"), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("good-")), "{names:?}");
    let degraded = &result["_meta"]["mcp-gateway/degraded"]["backends"];
    assert!(
        degraded
            .as_array()
            .is_some_and(|b| b.iter().any(|d| d["name"] == "mute")),
        "{result}"
    );
    task.abort();
}

/// A client that disconnects in the middle of a streamed call: the gateway cancels the upstream
/// call (the backend sees its handler cancelled, not finished) and closes the client connection
/// (the open-connections gauge returns to zero); the gateway keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_disconnecting_mid_stream_cancels_the_upstream_call() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_for(&[("alpha", alpha.url())], "").await;
    for round in 1..=3_u64 {
        let stream = slow_call(&gw, 600).await;
        assert_eq!(alpha.calls("slow").started, round);
        drop(stream);
        let cancelled = alpha
            .wait_for_calls("slow", Duration::from_secs(20), |c| c.cancelled == round)
            .await;
        assert!(cancelled, "round {round}: {:?}", alpha.calls("slow"));
    }
    assert_eq!(alpha.calls("slow").finished, 0, "no call ran to its end");
    let closed = poll_until(Duration::from_secs(20), || async {
        metric(&gw, OPEN_MCP_CONNECTIONS).await == Some(0.0)
    })
    .await;
    assert!(
        closed,
        "client connections left open: {:?}",
        metric(&gw, OPEN_MCP_CONNECTIONS).await
    );
    assert_eq!(
        metric(&gw, "mcp_gateway_requests_in_flight").await,
        Some(0.0)
    );
    let ok = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
}

/// Slowloris: clients that trickle their request head (or send nothing) are disconnected once
/// `limits.header_read_timeout_ms` passes, while a normal client is served meanwhile; every
/// connection is released afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_clients_are_freed_by_the_header_read_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_for(
        &[("alpha", alpha.url())],
        "\n[limits]\nheader_read_timeout_ms = 500\n",
    )
    .await;
    let addr = gw.addr;
    let mut clients = Vec::new();
    for i in 0..20 {
        clients.push(tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            // Half send a partial head and trickle headers; half send nothing at all.
            if i % 2 == 0 {
                let _ = stream
                    .write_all(b"POST /servers/vh1/mcp HTTP/1.1\r\nhost: gw\r\n")
                    .await;
            }
            let mut received = Vec::new();
            let mut buf = [0_u8; 1024];
            // Bounded so a server that never frees the connection fails the test, not hangs it.
            for _ in 0..200 {
                if i % 2 == 0 && stream.write_all(b"x-slow: 1\r\n").await.is_err() {
                    return received;
                }
                match tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await
                {
                    Ok(Ok(0) | Err(_)) => return received,
                    Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
            }
            panic!("slowloris client {i} was still connected after 200 trickles");
        }));
    }
    // Served while the slow clients hold their connections.
    let ok = modern(addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    for client in clients {
        let received = client.await.expect("slowloris client");
        // Either closed silently or with hyper's 408 head; never an answer from the service.
        let text = String::from_utf8_lossy(&received);
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
            "{text}"
        );
    }
    let released = poll_until(Duration::from_secs(20), || async {
        metric(&gw, OPEN_MCP_CONNECTIONS).await == Some(0.0)
    })
    .await;
    assert!(released, "{:?}", metric(&gw, OPEN_MCP_CONNECTIONS).await);
}

fn redis_config(url: &str) -> String {
    base_config(&format!("\n[sessions]\nkind = \"redis\"\nurl = \"{url}\"\n")).replace(
        "kind = \"file\"\npath = \"users.json\"\npoll_interval_ms = 100",
        &format!(
            "kind = \"redis\"\nurl = \"{url}\"\nkey_prefix = \"faults\"\ncache_ttl_s = 1\ncache_negative_ttl_s = 1"
        ),
    )
}

/// How one answer under load looked.
#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Seen {
    Ok,
    ConfigStoreDown,
    SessionStoreDown,
    SessionGone,
    /// The restarted (empty) Redis before the test stored the user document again.
    NoConfigYet,
}

/// Classifies an answer; anything but success or a clean 503 (or, once Redis restarted empty, a
/// 404 for a lost session or a 400 for the not yet restored document) fails the test.
fn classify(reply: &Reply, restarted: bool) -> Seen {
    match reply.status.as_u16() {
        200 | 202 => Seen::Ok,
        503 if reply.header("retry-after") == Some("1")
            && reply.text() == r#"{"detail":"Configuration store unavailable"}"# =>
        {
            Seen::ConfigStoreDown
        }
        // The router's session layer: a JSON-RPC internal error with HTTP 503.
        503 if reply.json()["error"]["code"] == -32603
            && matches!(
                reply.json()["error"]["message"].as_str(),
                Some(
                    "Session store unavailable"
                        | "Cannot create a session: session store unavailable"
                )
            ) =>
        {
            Seen::SessionStoreDown
        }
        // A session whose record was lost with the restarted (non-persistent) Redis.
        404 if restarted && reply.json()["error"]["message"] == "Session not found" => {
            Seen::SessionGone
        }
        400 if restarted && reply.text() == r#"{"detail":"No user configuration"}"# => {
            Seen::NoConfigYet
        }
        _ => panic!(
            "unexpected answer under a Redis outage: {} {}",
            reply.status,
            reply.text()
        ),
    }
}

/// Redis (config store and session store) stopped and restarted while clients keep calling:
/// every answer is a success or a clean 503 (never another 5xx or a hang), both stores' 503s are
/// seen during the outage, and once Redis is back (and the user document stored again: the test
/// server does not persist) every kind of request succeeds again without restarting the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_restarted_under_load() {
    let Some(mut redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    let alpha = TestBackend::start(BackendSpec::both("alpha")).await;
    let store = RedisStore::connect({
        let mut config = RedisStoreConfig::new(redis.url());
        config.key_prefix = "faults".into();
        config
    })
    .await
    .expect("connect");
    let user = UserConfig::from_json_str(
        &json!({"virtual_hosts": {"vh1": {"backends": {"alpha": {"url": alpha.url()}}}}})
            .to_string(),
    )
    .expect("user config");
    store.put("alice", &user).await.expect("put");
    let dir = workdir("gw-faults-redis");
    let gw = GatewayProcess::start(dir.path(), &redis_config(&redis.url()), &[]).await;
    let addr = gw.addr;
    let session = legacy_initialize(addr, "alice", "vh1").await;

    let Some(redis) = redis.controllable() else {
        return; // External REDIS_URL: the outage part is skipped (announced by the helper).
    };
    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Seen>::new()));
    let mut workers = Vec::new();
    for worker in 0..3 {
        let (stop, seen, restarted) =
            (Arc::clone(&stop), Arc::clone(&seen), Arc::clone(&restarted));
        let mut session = Some(session.clone());
        workers.push(tokio::spawn(async move {
            let mut id = 100;
            while !stop.load(Ordering::SeqCst) {
                id += 1;
                let init = json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "load", "version": "1"}}});
                let reply = match (worker, &session) {
                    (0, _) => modern(addr, "alice", "vh1", "tools/list", json!({}), &[]).await,
                    (1, Some(current)) => {
                        let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
                        legacy_post(addr, "alice", "vh1", Some(current), &list).await
                    }
                    _ => legacy_post(addr, "alice", "vh1", None, &init).await,
                };
                let kind = classify(&reply, restarted.load(Ordering::SeqCst));
                // Worker 1 lives in one session: it opens a new one when its session is gone.
                if worker == 1 {
                    match kind {
                        Seen::SessionGone => session = None,
                        Seen::Ok if session.is_none() => {
                            session = reply.header("mcp-session-id").map(str::to_owned);
                        }
                        _ => {}
                    }
                }
                seen.lock().expect("seen").push(kind);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
    }
    let count = |kind: Seen| {
        seen.lock()
            .expect("seen")
            .iter()
            .filter(|k| **k == kind)
            .count()
    };
    assert!(
        poll_until(Duration::from_secs(20), || async { count(Seen::Ok) >= 9 }).await,
        "no load before the outage"
    );

    redis.stop().await;
    let both_down = poll_until(Duration::from_secs(20), || async {
        count(Seen::ConfigStoreDown) > 0 && count(Seen::SessionStoreDown) > 0
    })
    .await;
    assert!(
        both_down,
        "outage not seen: {:?}",
        seen.lock().expect("seen").len()
    );

    restarted.store(true, Ordering::SeqCst);
    redis.restart().await;
    let recovered = poll_until(Duration::from_secs(30), || async {
        if store.put("alice", &user).await.is_err() {
            return false;
        }
        seen.lock().expect("seen").clear();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let recent = seen.lock().expect("seen").clone();
        !recent.is_empty() && recent.iter().all(|k| *k == Seen::Ok)
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.expect("a worker saw an unexpected answer");
    }
    assert!(
        recovered,
        "requests did not all succeed again after Redis returned"
    );
    let fresh = legacy_initialize(addr, "alice", "vh1").await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let reply = legacy_post(addr, "alice", "vh1", Some(&fresh), &list).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let ready = support::admin_get(&gw, "/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert_eq!(ready.json()["checks"]["config_store"]["status"], "ok");
}

/// One principal, two kinds of client at once: a 2025 client opening and closing sessions, and a
/// 2026-07-28 client calling a legacy backend (both ride on the principal's shared upstream
/// session with that backend). Closing a 2025 session must not fail the other client's calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_2025_session_does_not_fail_the_same_principals_modern_calls() {
    let legacy = TestBackend::start(BackendSpec::legacy("legacy")).await;
    let (gw, _dir) = gateway_for(&[("legacy", legacy.url())], "").await;
    let gw = Arc::new(gw);
    let stop = Arc::new(AtomicBool::new(false));
    let cycler = {
        let (gw, stop) = (Arc::clone(&gw), Arc::clone(&stop));
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let session = legacy_initialize(gw.addr, "alice", "vh1").await;
                let deleted = support::legacy_delete(gw.addr, "alice", "vh1", &session).await;
                assert_eq!(deleted.status, 200, "{}", deleted.text());
            }
        })
    };
    for n in 0..300 {
        let call = modern(
            gw.addr,
            "alice",
            "vh1",
            "tools/call",
            json!({"name": "legacy-echo", "arguments": {"text": format!("m{n}")}}),
            &[],
        )
        .await;
        let answer = call.messages().pop().expect("an answer");
        assert_eq!(
            answer["result"]["content"][0]["text"],
            format!("legacy: m{n}"),
            "call {n}: {answer}"
        );
    }
    stop.store(true, Ordering::SeqCst);
    cycler.await.expect("the 2025 client failed");
}
