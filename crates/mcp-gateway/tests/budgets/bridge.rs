//! The 2024-11-05 SSE bridge (book: docs/src/security.md, "Budgets"): events a bridged client has
//! not read yet are charged to its principal's `sse_sessions` bytes; past the share, its session
//! takes nothing more from the backend until the client reads (backpressure: nothing is dropped),
//! and another principal's sessions are served meanwhile.

use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{EventStream, send_body};
use serde_json::{Value, json};

use crate::support::{self, GatewayProcess, base_config, bearer, workdir};

/// Every wait of these tests: seconds of margin on a loaded machine.
const WAIT: Duration = Duration::from_secs(30);
/// alice's share of queued event bytes in these tests.
const SHARE: f64 = 1024.0 * 1024.0;
/// The flood alice's client does not read: 100 progress notifications of 1 MiB, far past the
/// share and past the 64 events (64 MiB) a session would queue by count alone.
const FLOOD_STEPS: u64 = 100;
const PAD: u64 = 1024 * 1024;
/// The calls read as they come: notifications of 64 KiB, a few at a time within the share.
const CONTROL_PAD: u64 = 64 * 1024;

async fn gateway() -> (mcp_test_support::TempDir, GatewayProcess, TestBackend) {
    let backend = TestBackend::start(BackendSpec::legacy("l")).await;
    let dir = workdir("gw-budgets-bridge");
    let vhost = json!({"sse_downstream": true, "backends": {"l": {"url": backend.url()}}});
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"vh": vhost}},
        "bob": {"virtual_hosts": {"vh": vhost}},
    }});
    support::write(dir.path(), "users.json", &users.to_string());
    let config = base_config("\n[limits]\nsse_queued_bytes_per_principal = 1048576\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    (dir, gw, backend)
}

/// A bridged session of `sub` on `vh`, initialised: its stream and its message endpoint.
async fn session(gw: &GatewayProcess, sub: &str) -> (EventStream, String) {
    let auth = bearer(sub);
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
    ];
    let mut stream = EventStream::open(gw.addr, "GET", "/servers/vh/sse", &headers, "").await;
    assert_eq!(stream.status, 200);
    let endpoint = stream.next_event(WAIT).await.expect("the endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "gateway-tests", "version": "0"}}});
    post(gw, sub, &endpoint.data, &init).await;
    let answer = stream.next_message_where(WAIT, |m| m["id"] == 0).await;
    assert_eq!(
        answer["result"]["protocolVersion"], "2024-11-05",
        "{answer}"
    );
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(gw, sub, &endpoint.data, &initialized).await;
    (stream, endpoint.data)
}

async fn post(gw: &GatewayProcess, sub: &str, endpoint: &str, body: &Value) {
    let auth = bearer(sub);
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let reply = send_body(gw.addr, "POST", endpoint, &headers, &body.to_string()).await;
    assert_eq!(reply.status, 202, "{sub}: {}", reply.text());
}

/// Posts `l-slow` as call `id`: `steps` progress notifications of `pad` bytes, back to back.
async fn call_slow(gw: &GatewayProcess, sub: &str, endpoint: &str, id: u64, steps: u64, pad: u64) {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "l-slow",
        "arguments": {"steps": steps, "delay_ms": 0, "pad": pad},
        "_meta": {"progressToken": format!("p{id}")}}});
    post(gw, sub, endpoint, &call).await;
}

/// Reads call `id` to its end: every one of its `steps` progress notifications, in order, then
/// its result.
async fn read_whole(stream: &mut EventStream, id: u64, steps: u64) {
    let mut seen = 0;
    let done = stream
        .next_message_where(WAIT, |m| {
            if m["method"] == "notifications/progress"
                && m["params"]["progressToken"] == format!("p{id}")
            {
                seen += 1;
                assert_eq!(
                    m["params"]["progress"].as_f64(),
                    Some(seen as f64),
                    "in order, none missing"
                );
            }
            m["id"] == id
        })
        .await;
    assert_eq!(done["result"]["content"][0]["text"], "l: done", "{done}");
    assert_eq!(seen, steps, "call {id}: every notification arrives");
}

async fn series(gw: &GatewayProcess, name: &str) -> f64 {
    support::metric(gw, name).await.unwrap_or(0.0)
}

const HELD: &str = r#"mcp_gateway_budget_held{budget="sse_sessions",unit="bytes"}"#;
const REFUSED: &str = r#"mcp_gateway_budget_refusals_total{budget="sse_sessions",limit="share"}"#;
const KEPT: &str = r#"mcp_gateway_budget_kept_bytes{budget="sse_sessions"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_client_that_stops_reading_holds_its_share_and_loses_nothing() {
    let (_dir, gw, _backend) = gateway().await;
    let (mut alice, alice_endpoint) = session(&gw, "alice").await;
    let (mut bob, bob_endpoint) = session(&gw, "bob").await;

    // The control: calls of a few large events, read as they come, are whole and hold nothing.
    call_slow(&gw, "alice", &alice_endpoint, 1, 4, CONTROL_PAD).await;
    read_whole(&mut alice, 1, 4).await;
    call_slow(&gw, "bob", &bob_endpoint, 2, 4, CONTROL_PAD).await;
    read_whole(&mut bob, 2, 4).await;
    assert_eq!(series(&gw, REFUSED).await, 0.0, "within the share");

    // Alice's client stops reading during a 100 MiB flood: once her share is spent, her session
    // waits for her client instead of queueing the rest.
    call_slow(&gw, "alice", &alice_endpoint, 3, FLOOD_STEPS, PAD).await;
    let waited = support::poll_until(WAIT, || async { series(&gw, REFUSED).await >= 1.0 }).await;
    assert!(waited, "alice's queue never reached her share");

    // Bob's session is served meanwhile, whole.
    call_slow(&gw, "bob", &bob_endpoint, 4, 8, CONTROL_PAD).await;
    read_whole(&mut bob, 4, 8).await;
    // Whatever the flood did meanwhile, the gateway holds alice's share (plus an event per relay
    // charged as it ran out) and at most one event kept past it, not her flood (a queue bounded
    // by count alone would hold 64 MiB).
    let held = series(&gw, HELD).await;
    assert!(held <= SHARE + 4.0 * PAD as f64, "{held} bytes held");
    let kept = series(&gw, KEPT).await;
    assert!(kept <= 2.0 * PAD as f64, "{kept} bytes kept past the share");

    // When alice's client reads at last, nothing of the flood is missing, and nothing stays held.
    read_whole(&mut alice, 3, FLOOD_STEPS).await;
    let released = support::poll_until(WAIT, || async {
        series(&gw, HELD).await == 0.0 && series(&gw, KEPT).await == 0.0
    })
    .await;
    assert!(released, "the queued bytes were given back");
}
