//! One credential scope for all shared upstream state: callers with different scopes (another
//! principal, other credentials) never share a GET stream, a breaker, an era probe or an upstream
//! session, and what one caller sets or sends never trips or evicts another's.

use std::convert::Infallible;
use std::future::Future as _;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::EventStream;
use serde_json::{Value, json};

use crate::support::{
    AnyBody, GatewayProcess, HandMadeServer, base_config, bearer, legacy_post, rpc_error, workdir,
    write,
};

/// A 2025-11-25 server that mints no `Mcp-Session-Id` (a stateless legacy server) and whose GET
/// stream sends a log notification every 50 ms carrying the `x-api-key` it was opened with: what
/// a backend says to one credential, for that credential only.
async fn key_echo_server() -> HandMadeServer {
    HandMadeServer::start(key_echo).await
}

fn full(status: u16, content_type: &str, body: String) -> Response<AnyBody> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)).boxed())
        .expect("response")
}

async fn key_echo(req: Request<Incoming>) -> Response<AnyBody> {
    let key = req
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if req.method() == http::Method::GET {
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(
                Ticker {
                    key,
                    sent: 0,
                    sleep: None,
                }
                .boxed(),
            )
            .expect("response");
    }
    let message = crate::support::request_json(req).await;
    let id = message["id"].clone();
    match message["method"].as_str() {
        Some("initialize") => full(
            200,
            "application/json",
            json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"logging": {}, "tools": {}},
                "serverInfo": {"name": "key-echo", "version": "1"}}})
            .to_string(),
        ),
        Some("tools/list") => full(
            200,
            "application/json",
            json!({"jsonrpc": "2.0", "id": id, "result": {"tools": []}}).to_string(),
        ),
        _ if id.is_null() => full(202, "application/json", String::new()),
        // `server/discover` and anything else: what a legacy server says to a request it
        // does not know outside a session.
        _ => full(
            400,
            "application/json",
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Bad Request"}})
                .to_string(),
        ),
    }
}

/// The GET stream body: a log notification naming `key` every 50 ms, at most 2,000.
struct Ticker {
    key: String,
    sent: usize,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Ticker {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.sent >= 2000 {
            return Poll::Ready(None);
        }
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(50))));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.sleep = None;
        self.sent += 1;
        let message = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "logger": "key-echo", "data": {"key": self.key}}});
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(format!(
            "data: {message}\n\n"
        ))))))
    }
}

/// A gateway in a fresh directory `name` whose `users.json` is [`keyed_users`] for `url`, with
/// `extra` appended to its config.
async fn keyed_gateway(
    name: &str,
    url: &str,
    tenants: &[(&str, &str, Value)],
    extra: &str,
) -> (mcp_test_support::TempDir, GatewayProcess) {
    let dir = workdir(name);
    write(dir.path(), "users.json", &keyed_users(url, tenants));
    let gw = GatewayProcess::start(dir.path(), &base_config(extra), &[]).await;
    (dir, gw)
}

/// `users.json` with each `(subject, x-api-key)` given one virtual host `vh` whose backend `b`
/// is `url` with that key added to every upstream request, and `extra` merged into the backend.
fn keyed_users(url: &str, tenants: &[(&str, &str, Value)]) -> String {
    let mut users = serde_json::Map::new();
    for (sub, key, extra) in tenants {
        let mut backend =
            json!({"url": url, "timeout_ms": 10000, "headers": {"add": {"x-api-key": key}}});
        if let (Some(b), Some(extra)) = (backend.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                b.insert(k.clone(), v.clone());
            }
        }
        users.insert(
            (*sub).to_owned(),
            json!({"virtual_hosts": {"vh": {"backends": {"b": backend}}}}),
        );
    }
    json!({ "users": users }).to_string()
}

async fn initialize(addr: SocketAddr, sub: &str, caps: Value) -> crate::support::Reply {
    legacy_post(
        addr,
        sub,
        "vh",
        None,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": caps,
            "clientInfo": {"name": "isolation", "version": "0"}}}),
    )
    .await
}

async fn open_session(addr: SocketAddr, sub: &str, caps: Value) -> String {
    let init = initialize(addr, sub, caps).await;
    assert_eq!(init.status, 200, "{}", init.text());
    let session = init
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let done = legacy_post(
        addr,
        sub,
        "vh",
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(done.status, 202, "{}", done.text());
    session
}

async fn get_stream(addr: SocketAddr, sub: &str, session: &str) -> EventStream {
    let auth = bearer(sub);
    let stream = EventStream::open(
        addr,
        "GET",
        "/servers/vh/mcp",
        &[
            ("authorization", auth.as_str()),
            ("accept", "text/event-stream"),
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        "",
    )
    .await;
    assert_eq!(stream.status, 200);
    stream
}

/// The `data.key` of the next `n` backend log notifications on `stream`.
async fn keys_seen(stream: &mut EventStream, n: usize) -> Vec<String> {
    let mut keys = Vec::new();
    while keys.len() < n {
        let message = stream
            .next_message_where(Duration::from_secs(30), |m| {
                m["method"] == "notifications/message"
            })
            .await;
        keys.push(
            message["params"]["data"]["key"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        );
    }
    keys
}

/// A backend that mints no session id gives every scope its own upstream GET stream: Bob's
/// stream carries what the backend sends for Bob's credential, never Alice's, although both name
/// the same URL. Control: Alice's stream does carry her events, and a second session of Alice
/// (the same scope) shares her stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_streams_are_per_credential_scope() {
    let backend = key_echo_server().await;
    let (_dir, gw) = keyed_gateway(
        "iso-get-stream",
        &backend.url(),
        &[
            ("alice", "alice-key", json!({})),
            ("bob", "bob-key", json!({})),
        ],
        "",
    )
    .await;

    let alice = open_session(gw.addr, "alice", json!({})).await;
    let mut alice_stream = get_stream(gw.addr, "alice", &alice).await;
    let seen = keys_seen(&mut alice_stream, 3).await;
    assert!(seen.iter().all(|k| k == "alice-key"), "control: {seen:?}");

    let bob = open_session(gw.addr, "bob", json!({})).await;
    let mut bob_stream = get_stream(gw.addr, "bob", &bob).await;
    let seen = keys_seen(&mut bob_stream, 10).await;
    assert!(
        seen.iter().all(|k| k == "bob-key"),
        "bob's GET stream carried another credential's events: {seen:?}"
    );

    let alice_again = open_session(gw.addr, "alice", json!({})).await;
    let mut second = get_stream(gw.addr, "alice", &alice_again).await;
    let seen = keys_seen(&mut second, 3).await;
    assert!(seen.iter().all(|k| k == "alice-key"), "{seen:?}");
}

fn echo_call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "b-echo", "arguments": {"text": "hi"}}})
}

/// How many `server/discover` probes and `initialize` requests the backend got with `key`.
fn requests_with_key(backend: &TestBackend, method: &str, key: &str) -> usize {
    backend
        .requests()
        .iter()
        .filter(|r| {
            r.header("x-api-key") == Some(key) && r.jsonrpc_method().as_deref() == Some(method)
        })
        .count()
}

/// A tenant whose own settings make every call fail (`timeout_ms = 500` on the same backend name
/// and URL, against a tool that is silent for 3 s: a bound a fast backend cannot beat, unlike
/// `timeout_ms = 1` against an echo, which an idle machine answered in time) trips its own
/// breaker only: Alice's calls all succeed while Bob gets `circuit open`,
/// and Bob's failures (which forget his era) never make the backend be probed again for Alice.
/// Control: Bob's breaker does open, so the setup can trip a breaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_settings_and_failures_never_trip_another_tenants_breaker() {
    let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let (_dir, gw) = keyed_gateway(
        "iso-breaker",
        &backend.url(),
        &[
            ("alice", "alice-key", json!({})),
            ("bob", "bob-key", json!({"timeout_ms": 500})),
        ],
        "[breaker]\nconsecutive_failures = 2\nopen_ms = 60000\n",
    )
    .await;
    let alice = open_session(gw.addr, "alice", json!({})).await;
    let call = legacy_post(gw.addr, "alice", "vh", Some(&alice), &echo_call(1)).await;
    assert!(call.text().contains("alpha: hi"), "{}", call.text());
    let probes_before = requests_with_key(&backend, "server/discover", "alice-key");

    // Bob's calls time out (500 ms against 3 s of silence) until his breaker opens.
    let bob = open_session(gw.addr, "bob", json!({})).await;
    let mut bob_open = false;
    let mut replies = Vec::new();
    for id in 0..20 {
        let slow = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "b-slow", "arguments": {"steps": 2, "delay_ms": 3000}}});
        let reply = legacy_post(gw.addr, "bob", "vh", Some(&bob), &slow).await;
        if reply.text().contains("circuit open") {
            bob_open = true;
            break;
        }
        replies.push(reply.text().to_owned());
    }
    assert!(
        bob_open,
        "control: bob's own breaker opens; bob got {replies:#?}"
    );

    for id in 10..30 {
        let reply = legacy_post(gw.addr, "alice", "vh", Some(&alice), &echo_call(id)).await;
        assert!(
            reply.text().contains("alpha: hi"),
            "call {id} of alice failed after bob tripped his breaker: {}",
            reply.text()
        );
    }
    assert_eq!(
        requests_with_key(&backend, "server/discover", "alice-key"),
        probes_before,
        "bob's failures made the gateway probe the backend again for alice"
    );
}

/// Client capabilities are capped (a 20 KiB object is `-32602` before anything is kept), and a
/// principal opening sessions with ever new capability sets recycles its own upstream sessions:
/// Mallory's flood never evicts Alice's upstream session (the backend sees one `initialize` from
/// Alice's credential), and the newest of Mallory's still works. Control: Mallory's flood does
/// exceed her share, since the backend sees more initializations from her than the share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_capped_and_upstream_sessions_bounded_per_principal() {
    let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let (_dir, gw) = keyed_gateway(
        "iso-sessions",
        &backend.url(),
        &[
            ("alice", "alice-key", json!({})),
            ("mallory", "mallory-key", json!({})),
        ],
        "[router]\nmax_upstream_sessions = 8\nmax_upstream_sessions_per_principal = 3\n",
    )
    .await;

    let huge = json!({"experimental": {"padding": "x".repeat(20 * 1024)}});
    let refused = initialize(gw.addr, "mallory", huge).await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    let (code, message) = rpc_error(&refused);
    assert_eq!(code, -32602);
    assert!(
        message.contains("Client capabilities too large"),
        "{message}"
    );

    let alice = open_session(gw.addr, "alice", json!({})).await;
    let call = legacy_post(gw.addr, "alice", "vh", Some(&alice), &echo_call(1)).await;
    assert!(call.text().contains("alpha: hi"), "{}", call.text());

    let mut newest = String::new();
    for n in 0..12 {
        let caps = json!({"experimental": {format!("flood-{n}"): {}}});
        newest = open_session(gw.addr, "mallory", caps).await;
        let call = legacy_post(gw.addr, "mallory", "vh", Some(&newest), &echo_call(n)).await;
        assert!(call.text().contains("alpha: hi"), "{}", call.text());
    }
    assert!(
        requests_with_key(&backend, "initialize", "mallory-key") > 3,
        "control: mallory's capability sets each got an upstream session"
    );
    let call = legacy_post(gw.addr, "mallory", "vh", Some(&newest), &echo_call(99)).await;
    assert!(call.text().contains("alpha: hi"), "{}", call.text());

    let call = legacy_post(gw.addr, "alice", "vh", Some(&alice), &echo_call(2)).await;
    assert!(call.text().contains("alpha: hi"), "{}", call.text());
    assert_eq!(
        requests_with_key(&backend, "initialize", "alice-key"),
        1,
        "alice's upstream session was evicted by mallory's flood"
    );
}

/// A full upstream session table refuses a newcomer with a clear error and evicts nobody:
/// Alice and Bob hold the two sessions, Carol's call is `-32603 Backend b failed: too many
/// upstream sessions`, and Alice's and Bob's calls keep working on their own sessions (the
/// backend saw one `initialize` from each). Control: Carol's own call reached the gateway's
/// upstream side (her downstream session exists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_upstream_session_table_refuses_a_newcomer_and_evicts_nobody() {
    let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let (_dir, gw) = keyed_gateway(
        "iso-sessions-full",
        &backend.url(),
        &[
            ("alice", "alice-key", json!({})),
            ("bob", "bob-key", json!({})),
            ("carol", "carol-key", json!({})),
        ],
        "[router]\nmax_upstream_sessions = 2\nmax_upstream_sessions_per_principal = 1\n",
    )
    .await;
    let mut sessions = Vec::new();
    for sub in ["alice", "bob"] {
        let session = open_session(gw.addr, sub, json!({})).await;
        let call = legacy_post(gw.addr, sub, "vh", Some(&session), &echo_call(1)).await;
        assert!(call.text().contains("alpha: hi"), "{sub}: {}", call.text());
        sessions.push((sub, session));
    }
    let carol = open_session(gw.addr, "carol", json!({})).await;
    let refused = legacy_post(gw.addr, "carol", "vh", Some(&carol), &echo_call(2)).await;
    assert_eq!(refused.status, 200, "{}", refused.text());
    assert_eq!(
        rpc_error(&refused),
        (
            -32603,
            "Backend b failed: too many upstream sessions".to_owned()
        )
    );
    for (sub, session) in &sessions {
        let call = legacy_post(gw.addr, sub, "vh", Some(session), &echo_call(3)).await;
        assert!(call.text().contains("alpha: hi"), "{sub}: {}", call.text());
        assert_eq!(
            requests_with_key(&backend, "initialize", &format!("{sub}-key")),
            1,
            "{sub}'s upstream session was evicted for carol"
        );
    }
}

/// The peers (keep-alive connections) of the backend requests a call made: those the backend
/// recorded since `seen`.
fn peers_since(backend: &TestBackend, seen: &mut usize) -> Vec<SocketAddr> {
    let requests = backend.requests();
    let peers = requests[*seen..].iter().map(|r| r.peer).collect();
    *seen = requests.len();
    peers
}

/// Keep-alive connections to a backend are per credential scope: two principals with the very
/// same backend URL and credential (`x-api-key`), calling one after the other, never get each
/// other's idle connection, so one tenant's connection never carries another tenant's call.
/// Control: each tenant does reuse its own connections (its calls after the first came over
/// connections it had opened before), so the pools are real and the calls were sequential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_connections_are_per_credential_scope() {
    keep_alive_connections_follow_the_scope("").await;
}

/// The same with one runtime per serving thread, whose pools have one lane per thread: the
/// tenants' calls arrive on new client connections spread over the threads, and the lanes
/// still never let one tenant's connection carry the other's call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_connections_are_per_credential_scope_thread_per_core() {
    keep_alive_connections_follow_the_scope(&crate::support::thread_per_core(2)).await;
}

async fn keep_alive_connections_follow_the_scope(runtime: &str) {
    let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let (_dir, gw) = keyed_gateway(
        "iso-pools",
        &backend.url(),
        &[
            ("alice", "same-key", json!({})),
            ("bob", "same-key", json!({})),
        ],
        runtime,
    )
    .await;
    let mut seen = 0;
    let mut peers: [Vec<SocketAddr>; 2] = [Vec::new(), Vec::new()];
    let mut reused = [0; 2];
    let tenants = ["alice", "bob"];
    let mut sessions = Vec::new();
    for (i, sub) in tenants.iter().enumerate() {
        sessions.push(open_session(gw.addr, sub, json!({})).await);
        peers[i].extend(peers_since(&backend, &mut seen));
    }
    for round in 0..4 {
        for (i, sub) in tenants.iter().enumerate() {
            let call = legacy_post(gw.addr, sub, "vh", Some(&sessions[i]), &echo_call(round)).await;
            assert!(call.text().contains("alpha: hi"), "{sub}: {}", call.text());
            let now = peers_since(&backend, &mut seen);
            assert!(!now.is_empty(), "{sub}'s call reached the backend");
            reused[i] += now.iter().filter(|p| peers[i].contains(p)).count();
            peers[i].extend(now);
        }
    }
    let shared: Vec<_> = peers[0].iter().filter(|p| peers[1].contains(p)).collect();
    assert!(
        shared.is_empty(),
        "alice's and bob's calls shared connections {shared:?} (alice {:?}, bob {:?})",
        peers[0],
        peers[1]
    );
    assert!(
        reused.iter().all(|&n| n > 0),
        "control: each tenant reuses its own keep-alive connections ({reused:?} reused; alice \
         {:?}, bob {:?})",
        peers[0],
        peers[1]
    );
}
