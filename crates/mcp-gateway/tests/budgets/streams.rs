//! Streams end with their credentials (book: docs/src/security.md, "Budgets"): a 2025 GET stream
//! and a 2026-07-28 `subscriptions/listen` opened with a token end when it expires (plus the
//! leeway, 5 s in these tests), the listen with a `complete` result; streams opened with a
//! longer-lived token stay open. Each test waits about 15 s for a token to expire.

use std::time::Duration;

use jsonwebtoken::Algorithm;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{EventStream, unix_now};
use serde_json::json;

use crate::support::{
    self, AUDIENCE, GatewayProcess, ISSUER, SECRET, base_config, legacy_initialize, modern_request,
    workdir,
};

/// Every wait of these tests: seconds of margin on a loaded machine.
const WAIT: Duration = Duration::from_secs(30);

/// `Bearer` + a token of `sub` that expires `seconds` from now.
fn expiring(sub: &str, seconds: u64) -> String {
    let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": unix_now() + seconds});
    format!(
        "Bearer {}",
        support::token_with(claims, Algorithm::HS256, SECRET.as_bytes())
    )
}

/// The users file: alice and bob each with virtual host `vh` (and alice with `other`), unless
/// `alice_has_vh` is false.
fn users(backend: &TestBackend, alice_has_vh: bool) -> String {
    // `sse_downstream`: the 2024-11-05 bridge serves the virtual host too.
    let vhost = json!({"sse_downstream": true, "backends": {"l": {"url": backend.url()}}});
    let mut alice = json!({"other": vhost});
    if alice_has_vh {
        alice["vh"] = vhost.clone();
    }
    json!({"users": {
        "alice": {"virtual_hosts": alice},
        "bob": {"virtual_hosts": {"vh": vhost}},
    }})
    .to_string()
}

async fn gateway() -> (mcp_test_support::TempDir, GatewayProcess, TestBackend) {
    let backend = TestBackend::start(BackendSpec::legacy("l")).await;
    let dir = workdir("gw-budgets-streams");
    support::write(dir.path(), "users.json", &users(&backend, true));
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;
    (dir, gw, backend)
}

/// A 2025 GET stream of `session` opened with `auth`.
async fn get_stream(gw: &GatewayProcess, auth: &str, session: &str) -> EventStream {
    let stream = EventStream::open(
        gw.addr,
        "GET",
        "/servers/vh/mcp",
        &[
            ("authorization", auth),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_stream_ends_when_its_token_expires() {
    let (_dir, gw, _backend) = gateway().await;
    let alice = legacy_initialize(gw.addr, "alice", "vh").await;
    let bob = legacy_initialize(gw.addr, "bob", "vh").await;
    // Alice's stream is opened with a token valid for 10 s more (15 s with the leeway: time
    // enough to open it on a loaded machine); bob's, the control, with one valid for 10 minutes.
    let mut short = get_stream(&gw, &expiring("alice", 10), &alice).await;
    let mut long = get_stream(&gw, &expiring("bob", 600), &bob).await;
    assert!(
        short.ends_within(WAIT).await,
        "alice's stream outlived her token"
    );
    assert!(
        !long.ends_within(Duration::from_secs(3)).await,
        "bob's stream ended with alice's token"
    );
    // Alice goes on with a fresh token: the session is not lost.
    let mut again = get_stream(&gw, &expiring("alice", 600), &alice).await;
    assert!(!again.ends_within(Duration::from_secs(1)).await);
}

/// A 2026-07-28 `subscriptions/listen` on `vh` opened with `auth`.
async fn listen(gw: &GatewayProcess, auth: &str) -> EventStream {
    let (headers, body) = modern_request(
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("authorization", auth));
    let stream = EventStream::open(gw.addr, "POST", "/servers/vh/mcp", &headers, &body).await;
    assert_eq!(stream.status, 200);
    stream
}

/// Reads `stream` up to its `complete` result, which carries its subscription id.
async fn complete_result(stream: &mut EventStream) {
    let last = stream
        .next_message_where(WAIT, |m| m.get("result").is_some())
        .await;
    assert_eq!(last["result"]["resultType"], "complete", "{last}");
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], last["id"],
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_ends_with_a_complete_result_when_its_token_expires() {
    let (_dir, gw, _backend) = gateway().await;
    let mut short = listen(&gw, &expiring("alice", 10)).await;
    let mut long = listen(&gw, &expiring("bob", 600)).await;
    complete_result(&mut short).await;
    assert!(
        short.ends_within(WAIT).await,
        "the stream ends after its result"
    );
    assert!(
        !long.ends_within(Duration::from_secs(3)).await,
        "bob's listen ended with alice's token"
    );
}

/// A 2024-11-05 bridged `…/sse` stream of `vh` opened with `auth`, past its `endpoint` event.
async fn bridged(gw: &GatewayProcess, auth: &str) -> EventStream {
    let headers = [("authorization", auth), ("accept", "text/event-stream")];
    let mut stream = EventStream::open(gw.addr, "GET", "/servers/vh/sse", &headers, "").await;
    assert_eq!(stream.status, 200);
    let endpoint = stream.next_event(WAIT).await.expect("the endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_sse_stream_ends_when_its_token_expires() {
    let (_dir, gw, _backend) = gateway().await;
    let mut short = bridged(&gw, &expiring("alice", 10)).await;
    let mut long = bridged(&gw, &expiring("bob", 600)).await;
    assert!(
        short.ends_within(WAIT).await,
        "alice's SSE stream outlived her token"
    );
    assert!(
        !long.ends_within(Duration::from_secs(3)).await,
        "bob's SSE stream ended with alice's token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_when_the_configuration_drops_their_virtual_host() {
    let (dir, gw, backend) = gateway().await;
    let alice = legacy_initialize(gw.addr, "alice", "vh").await;
    let bob = legacy_initialize(gw.addr, "bob", "vh").await;
    let (alice_auth, bob_auth) = (expiring("alice", 600), expiring("bob", 600));
    let mut alice_get = get_stream(&gw, &alice_auth, &alice).await;
    let mut alice_listen = listen(&gw, &alice_auth).await;
    let mut bob_get = get_stream(&gw, &bob_auth, &bob).await;
    let mut bob_listen = listen(&gw, &bob_auth).await;
    let mut alice_sse = bridged(&gw, &alice_auth).await;
    let mut bob_sse = bridged(&gw, &bob_auth).await;
    // The control: nothing ends while the configuration keeps the virtual host.
    assert!(!alice_get.ends_within(Duration::from_secs(2)).await);
    assert!(!alice_sse.ends_within(Duration::from_secs(1)).await);

    // Alice's configuration loses `vh` (she keeps `other`).
    support::write(dir.path(), "users.json", &users(&backend, false));
    assert!(
        alice_get.ends_within(WAIT).await,
        "alice's GET stream outlived her virtual host"
    );
    complete_result(&mut alice_listen).await;
    assert!(alice_listen.ends_within(WAIT).await);
    assert!(
        alice_sse.ends_within(WAIT).await,
        "alice's bridged SSE stream outlived her virtual host"
    );
    assert!(
        !bob_get.ends_within(Duration::from_secs(2)).await,
        "bob's GET stream ended with alice's virtual host"
    );
    assert!(!bob_listen.ends_within(Duration::from_secs(1)).await);
    assert!(!bob_sse.ends_within(Duration::from_secs(1)).await);
}
