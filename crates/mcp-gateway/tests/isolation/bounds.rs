//! Bounds that cannot be spent on someone else (issue #17 item 3, downstream side): SSE
//! sessions per principal, replay byte budgets, notification streams, background relays and
//! subscriptions per principal or session, and a 2025 session's expiry releasing what it held.
//! Each test has two principals: `alice` spends her share, `bob` (the control) still gets his.
//!
//! Why this file is long: one test per bound, each with its own setup and control; they share
//! the helpers at the top.

use std::time::Duration;

use mcp_router::sse_bridge::DETAIL_TOO_MANY_PRINCIPAL_SESSIONS;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{EventStream, TempDir};
use serde_json::{Value, json};

use crate::support::{
    self, GatewayProcess, base_config, bearer, legacy_delete, legacy_initialize, legacy_post,
    metric, modern, poll_until, rpc_error, send_body, workdir,
};

/// Longest wait for one event (a loaded 2-core machine; not a timing assertion).
const EVENT_WAIT: Duration = Duration::from_secs(20);
/// Longest wait for a slot, a buffer or a stream to be released.
const RELEASE_WAIT: Duration = Duration::from_secs(30);

struct Setup {
    gw: GatewayProcess,
    _beta: TestBackend,
    _dir: TempDir,
}

/// `alice` and `bob` both have `vh` (SSE on) with the legacy backend `beta`; `extra` is more
/// process configuration.
async fn setup(name: &str, extra: &str) -> Setup {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let vhost = json!({"sse_downstream": true,
        "backends": {"beta": {"url": beta.url(), "timeout_ms": 60000}}});
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"vh": vhost}},
        "bob": {"virtual_hosts": {"vh": vhost}},
    }});
    let dir = workdir(name);
    support::write(dir.path(), "users.json", &users.to_string());
    let gw = GatewayProcess::start(dir.path(), &base_config(extra), &[]).await;
    Setup {
        gw,
        _beta: beta,
        _dir: dir,
    }
}

/// `GET /servers/vh/sse` for `sub`.
async fn open_sse(gw: &GatewayProcess, sub: &str) -> EventStream {
    let auth = bearer(sub);
    EventStream::open(
        gw.addr,
        "GET",
        "/servers/vh/sse",
        &[("authorization", &auth), ("accept", "text/event-stream")],
        "",
    )
    .await
}

/// An open SSE session of `sub`: its stream (endpoint event read) and its message endpoint.
async fn sse_session(gw: &GatewayProcess, sub: &str) -> (EventStream, String) {
    let mut stream = open_sse(gw, sub).await;
    assert_eq!(stream.status, 200, "{sub}'s SSE stream");
    let endpoint = stream.next_event(EVENT_WAIT).await.expect("endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    (stream, endpoint.data)
}

/// Posts `body` for `sub` to an SSE session's endpoint.
async fn sse_post(gw: &GatewayProcess, sub: &str, endpoint: &str, body: &Value) -> support::Reply {
    let auth = bearer(sub);
    send_body(
        gw.addr,
        "POST",
        endpoint,
        &[
            ("authorization", &auth),
            ("content-type", "application/json"),
        ],
        &body.to_string(),
    )
    .await
}

/// `initialize` over an SSE session, answered on its stream.
async fn sse_initialize(gw: &GatewayProcess, sub: &str, stream: &mut EventStream, endpoint: &str) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "gateway-tests", "version": "0"}}});
    assert_eq!(sse_post(gw, sub, endpoint, &init).await.status, 202);
    stream
        .next_message_where(EVENT_WAIT, |m| m["id"] == 1)
        .await;
}

/// A 2025 `tools/call` of `beta-slow` with a progress token (so it streams).
fn slow_call(id: i64, steps: u64, delay_ms: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "beta-slow", "arguments": {"steps": steps, "delay_ms": delay_ms},
        "_meta": {"progressToken": format!("t{id}")}}})
}

/// Opens a 2025 POST of `body` in `session` and returns its (streamed) answer unread.
async fn legacy_stream(gw: &GatewayProcess, sub: &str, session: &str, body: &Value) -> EventStream {
    let auth = bearer(sub);
    EventStream::open(
        gw.addr,
        "POST",
        "/servers/vh/mcp",
        &[
            ("authorization", &auth),
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &body.to_string(),
    )
    .await
}

/// A GET stream of `session`, resuming after `last_event_id` when given.
async fn get_stream(
    gw: &GatewayProcess,
    sub: &str,
    session: &str,
    last: Option<&str>,
) -> EventStream {
    let auth = bearer(sub);
    let mut headers = vec![
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    if let Some(last) = last {
        headers.push(("last-event-id", last));
    }
    EventStream::open(gw.addr, "GET", "/servers/vh/mcp", &headers, "").await
}

/// Reads a streamed call to its answer; the event ids of its messages, in order (a 2025-11-25
/// priming event, which carries no message, is skipped).
async fn read_to_answer(stream: &mut EventStream, id: i64) -> Vec<String> {
    let mut ids = Vec::new();
    loop {
        let event = stream
            .next_event(EVENT_WAIT)
            .await
            .expect("the call's events");
        if event.data.is_empty() {
            continue;
        }
        ids.extend(event.id.clone());
        let message: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        if message["id"] == id {
            return ids;
        }
    }
}

/// Whether `stream` ends within `limit` (whatever events come before).
async fn ends_within(stream: &mut EventStream, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        if stream.next_event(left).await.is_none() {
            return tokio::time::Instant::now() < deadline;
        }
    }
}

/// The number after the `:` of an event id.
fn event_number(id: &str) -> u64 {
    id.split_once(':')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or_else(|| panic!("event id {id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_sessions_are_capped_per_principal_and_others_still_connect() {
    let s = setup(
        "iso-sse-per-principal",
        "[limits]\nmax_sse_sessions = 10\nmax_sse_sessions_per_principal = 2\n",
    )
    .await;
    let first = sse_session(&s.gw, "alice").await;
    let _second = sse_session(&s.gw, "alice").await;
    let refused = open_sse(&s.gw, "alice").await;
    assert_eq!(refused.status, 429, "over alice's share");
    assert_eq!(
        refused.headers.get("retry-after").map(|v| v.as_bytes()),
        Some(&b"5"[..])
    );
    let reply = send_body(
        s.gw.addr,
        "GET",
        "/servers/vh/sse",
        &[("authorization", &bearer("alice"))],
        "",
    )
    .await;
    reply.assert_detail(429, DETAIL_TOO_MANY_PRINCIPAL_SESSIONS);
    // The control: bob still connects while alice holds her whole share.
    let _bob = sse_session(&s.gw, "bob").await;
    drop(first);
    let gw = &s.gw;
    assert!(
        poll_until(RELEASE_WAIT, || async move {
            open_sse(gw, "alice").await.status == 200
        })
        .await,
        "a closed stream frees alice's slot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_budgets_drop_only_the_spenders_own_events() {
    let s = setup(
        "iso-replay-budgets",
        "[limits]\nreplay_bytes_per_session = 8000\nreplay_bytes_per_principal = 12000\nreplay_bytes = 1000000\n",
    )
    .await;
    // bob's call: 20 progress notifications and the result, all kept (well under the budgets).
    let bob = legacy_initialize(s.gw.addr, "bob", "vh").await;
    let mut call = legacy_stream(&s.gw, "bob", &bob, &slow_call(7, 20, 0)).await;
    let bob_ids = read_to_answer(&mut call, 7).await;
    assert_eq!(bob_ids.len(), 21, "{bob_ids:?}");
    // alice streams ~13 KB into each of three sessions: more than a session's budget, and in
    // all more than her share.
    let mut alice_first = None;
    for _ in 0..3 {
        let alice = legacy_initialize(s.gw.addr, "alice", "vh").await;
        let mut call = legacy_stream(&s.gw, "alice", &alice, &slow_call(9, 100, 0)).await;
        let ids = read_to_answer(&mut call, 9).await;
        assert_eq!(ids.len(), 101);
        alice_first.get_or_insert((alice, ids));
    }
    let kept = metric(&s.gw, "mcp_gateway_replay_bytes")
        .await
        .expect("gauge");
    assert!(
        kept <= 12_000.0 + 3000.0,
        "alice's share bounds the buffers: {kept}"
    );
    // Control: alice's first session lost its oldest events (the budget is real).
    let (alice, ids) = alice_first.expect("alice's first session");
    let stream_key = ids[0].split_once(':').expect("id").0.to_owned();
    let mut resumed = get_stream(&s.gw, "alice", &alice, Some(&format!("{stream_key}:0"))).await;
    assert_eq!(resumed.status, 200);
    let replayed = read_to_answer(&mut resumed, 9).await;
    assert!(
        replayed.len() < 101 && event_number(&replayed[0]) > event_number(&ids[0]),
        "alice's oldest events were dropped: {} kept, first {}",
        replayed.len(),
        replayed[0]
    );
    // bob resumes his call from the start and gets every event.
    let stream_key = bob_ids[0].split_once(':').expect("id").0.to_owned();
    let mut resumed = get_stream(&s.gw, "bob", &bob, Some(&format!("{stream_key}:0"))).await;
    assert_eq!(resumed.status, 200);
    let replayed = read_to_answer(&mut resumed, 7).await;
    assert_eq!(replayed, bob_ids, "bob's buffer is untouched by alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notification_streams_are_capped_per_principal() {
    let s = setup("iso-streams", "[limits]\nmax_streams_per_principal = 2\n").await;
    let alice = legacy_initialize(s.gw.addr, "alice", "vh").await;
    let first = get_stream(&s.gw, "alice", &alice, None).await;
    assert_eq!(first.status, 200);
    let second = get_stream(&s.gw, "alice", &alice, None).await;
    assert_eq!(second.status, 200);
    let over = |reply: &support::Reply| {
        assert_eq!(reply.status, 429, "{}", reply.text());
        assert_eq!(reply.header("retry-after"), Some("5"));
        let (code, message) = rpc_error(reply);
        assert_eq!(code, -32600);
        assert_eq!(
            message,
            "Too many notification streams for this principal (at most 2 GET and subscriptions/listen streams)"
        );
    };
    let auth = bearer("alice");
    let third = send_body(
        s.gw.addr,
        "GET",
        "/servers/vh/mcp",
        &[
            ("authorization", &auth),
            ("accept", "text/event-stream"),
            ("mcp-session-id", &alice),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        "",
    )
    .await;
    over(&third);
    // A 2026-07-28 listen counts against the same share.
    let listen = modern(
        s.gw.addr,
        "alice",
        "vh",
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
        &[],
    )
    .await;
    over(&listen);
    // The control: bob opens his.
    let bob = legacy_initialize(s.gw.addr, "bob", "vh").await;
    assert_eq!(get_stream(&s.gw, "bob", &bob, None).await.status, 200);
    drop(first);
    let (gw, alice) = (&s.gw, alice.as_str());
    assert!(
        poll_until(RELEASE_WAIT, || async move {
            get_stream(gw, "alice", alice, None).await.status == 200
        })
        .await,
        "a closed stream frees alice's slot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_subscriptions_are_capped_per_session_and_per_listen() {
    let s = setup(
        "iso-subscriptions",
        "[limits]\nmax_resource_subscriptions = 2\n",
    )
    .await;
    let subscribe = |id: i64, item: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe",
            "params": {"uri": format!("beta-test://beta/item/{item}")}})
    };
    let alice = legacy_initialize(s.gw.addr, "alice", "vh").await;
    for item in [1, 2, 1] {
        let reply = legacy_post(
            s.gw.addr,
            "alice",
            "vh",
            Some(&alice),
            &subscribe(item, item),
        )
        .await;
        assert_eq!(reply.status, 200);
        assert!(reply.json()["result"].is_object(), "{}", reply.text());
    }
    let reply = legacy_post(s.gw.addr, "alice", "vh", Some(&alice), &subscribe(3, 3)).await;
    assert_eq!(
        rpc_error(&reply),
        (
            -32600,
            "Too many resource subscriptions for this session (at most 2)".to_owned()
        )
    );
    // The control: bob's session has its own count.
    let bob = legacy_initialize(s.gw.addr, "bob", "vh").await;
    let reply = legacy_post(s.gw.addr, "bob", "vh", Some(&bob), &subscribe(3, 3)).await;
    assert!(reply.json()["result"].is_object(), "{}", reply.text());
    let uris: Vec<String> = (1..=3)
        .map(|i| format!("beta-test://beta/item/{i}"))
        .collect();
    let listen = modern(
        s.gw.addr,
        "alice",
        "vh",
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": uris}}),
        &[],
    )
    .await;
    assert_eq!(
        rpc_error(&listen),
        (
            -32600,
            "Too many resource subscriptions: 3 in one subscriptions/listen, at most 2".to_owned()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_only_subscriptions_to_a_backends_resource_of_bounded_length() {
    let s = setup(
        "iso-subscription-uris",
        "[limits]\nmax_resource_subscriptions = 2\n",
    )
    .await;
    let subscribe = |id: i64, uri: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe",
            "params": {"uri": uri}})
    };
    let alice = legacy_initialize(s.gw.addr, "alice", "vh").await;
    let post = |body: Value| {
        let alice = alice.clone();
        let addr = s.gw.addr;
        async move { legacy_post(addr, "alice", "vh", Some(&alice), &body).await }
    };
    // URIs no backend owns are refused by the routing, and not kept: they would otherwise
    // take the session's two places.
    for (id, uri) in [
        (1, "nobody-test://x/1"),
        (2, "gamma-test://x/2"),
        (3, "no-prefix"),
    ] {
        let reply = post(subscribe(id, uri)).await;
        assert_eq!(reply.status, 200);
        // The 2025 era's routing error (the failure contract: -32603 naming the name).
        assert_eq!(
            rpc_error(&reply),
            (-32603, format!("wrong resource name: {uri}"))
        );
    }
    // A URI past 4 KiB is refused before anything, naming the bound.
    let long = format!("beta-test://beta/item/{}", "9".repeat(8 * 1024));
    let reply = post(subscribe(4, &long)).await;
    assert_eq!(
        rpc_error(&reply),
        (
            -32602,
            format!(
                "Resource URI too long to subscribe to: {} bytes, at most 4096",
                long.len()
            )
        )
    );
    // The control: both places are still free for resources a backend owns, and the cap holds.
    for (id, item) in [(5, 1), (6, 2)] {
        let reply = post(subscribe(id, &format!("beta-test://beta/item/{item}"))).await;
        assert!(reply.json()["result"].is_object(), "{}", reply.text());
    }
    let reply = post(subscribe(7, "beta-test://beta/item/3")).await;
    assert_eq!(
        rpc_error(&reply),
        (
            -32600,
            "Too many resource subscriptions for this session (at most 2)".to_owned()
        )
    );
    // A listen naming a URI past the bound is refused the same way.
    let listen = modern(
        s.gw.addr,
        "alice",
        "vh",
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": [long]}}),
        &[],
    )
    .await;
    assert_eq!(rpc_error(&listen).0, -32602, "{}", listen.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_relays_are_capped_per_principal() {
    let s = setup(
        "iso-relays",
        "[limits]\nmax_background_relays_per_principal = 1\n",
    )
    .await;
    let alice = legacy_initialize(s.gw.addr, "alice", "vh").await;
    // Three steps 2 s apart: streaming while the next calls are made.
    let mut running = legacy_stream(&s.gw, "alice", &alice, &slow_call(1, 3, 2000)).await;
    assert_eq!(running.status, 200);
    running
        .next_event(EVENT_WAIT)
        .await
        .expect("first progress");
    let refused = legacy_post(
        s.gw.addr,
        "alice",
        "vh",
        Some(&alice),
        &slow_call(2, 3, 2000),
    )
    .await;
    assert_eq!(refused.status, 200);
    assert_eq!(
        rpc_error(&refused),
        (
            -32600,
            "Too many streaming calls for this principal (at most 1 relayed at once)".to_owned()
        )
    );
    // The control: bob's call streams.
    let bob = legacy_initialize(s.gw.addr, "bob", "vh").await;
    let mut other = legacy_stream(&s.gw, "bob", &bob, &slow_call(3, 2, 0)).await;
    read_to_answer(&mut other, 3).await;
    read_to_answer(&mut running, 1).await;
    let (addr, alice) = (s.gw.addr, alice.as_str());
    assert!(
        poll_until(RELEASE_WAIT, || async move {
            let reply = legacy_post(addr, "alice", "vh", Some(alice), &slow_call(4, 2, 0)).await;
            reply
                .messages()
                .last()
                .is_some_and(|m| m["result"].is_object())
        })
        .await,
        "a finished relay frees alice's slot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_or_deleted_session_releases_its_streams_buffers_and_sse_bridge() {
    let s = setup(
        "iso-expiry",
        "[sessions]\nkind = \"local\"\nidle_timeout_s = 15\n",
    )
    .await;
    // bob's session ends with DELETE: its GET stream ends at once.
    let bob = legacy_initialize(s.gw.addr, "bob", "vh").await;
    let mut bob_stream = get_stream(&s.gw, "bob", &bob, None).await;
    assert_eq!(bob_stream.status, 200);
    bob_stream
        .next_event(EVENT_WAIT)
        .await
        .expect("priming event");
    assert_eq!(
        legacy_delete(s.gw.addr, "bob", "vh", &bob).await.status,
        200
    );
    assert!(
        ends_within(&mut bob_stream, RELEASE_WAIT).await,
        "a deleted session's GET stream ends"
    );
    // alice's session holds a GET stream, a replay buffer and an SSE bridge session, then idles.
    let alice = legacy_initialize(s.gw.addr, "alice", "vh").await;
    let mut stream = get_stream(&s.gw, "alice", &alice, None).await;
    assert_eq!(stream.status, 200);
    stream.next_event(EVENT_WAIT).await.expect("priming event");
    let mut call = legacy_stream(&s.gw, "alice", &alice, &slow_call(5, 5, 0)).await;
    read_to_answer(&mut call, 5).await;
    let (mut sse, endpoint) = sse_session(&s.gw, "alice").await;
    sse_initialize(&s.gw, "alice", &mut sse, &endpoint).await;
    let held = |series: &'static str| {
        let gw = &s.gw;
        async move { metric(gw, series).await.unwrap_or(0.0) }
    };
    // The control: while the sessions live, the gauges show what they hold.
    assert!(held("mcp_gateway_replay_bytes").await > 0.0);
    assert!(held("mcp_gateway_notification_streams_open").await >= 2.0);
    assert_eq!(held("mcp_gateway_sse_sessions_open").await, 1.0);
    assert!(
        ends_within(&mut stream, RELEASE_WAIT + RELEASE_WAIT).await,
        "the expired session's GET stream ends"
    );
    assert!(
        poll_until(RELEASE_WAIT, || async move {
            held("mcp_gateway_replay_bytes").await == 0.0
                && held("mcp_gateway_notification_streams_open").await == 0.0
                && held("mcp_gateway_sse_sessions_open").await == 0.0
        })
        .await,
        "an expired session releases its buffers, streams and SSE bridge session"
    );
    // The bridge ended the client's stream too.
    assert!(
        ends_within(&mut sse, RELEASE_WAIT).await,
        "the SSE stream ends"
    );
    let gone = legacy_post(
        s.gw.addr,
        "alice",
        "vh",
        Some(&alice),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    )
    .await;
    assert_eq!(gone.status, 404);
}

/// `sessions.record_bytes_per_principal`: a subscription that would grow a session's record past
/// its principal's byte share is refused with the key named and not kept; the subscriptions
/// kept before stay, and bob's session subscribes to the same URIs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_past_the_principals_record_bytes_is_refused_and_not_kept() {
    let s = setup(
        "iso-subscription-bytes",
        "[sessions]\nrecord_bytes_per_principal = 16384\n",
    )
    .await;
    // Each URI weighs about 4 KiB in the record: the share holds a few of them.
    let uri = |item: usize| format!("beta-test://beta/item/{item}{}", "0".repeat(3_900));
    let subscribe = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe",
            "params": {"uri": uri(id)}})
    };
    let alice = legacy_initialize(s.gw.addr, "alice", "vh").await;
    let mut kept = 0;
    let mut refused = None;
    for id in 1..=8 {
        let reply = legacy_post(s.gw.addr, "alice", "vh", Some(&alice), &subscribe(id)).await;
        assert_eq!(reply.status, 200);
        if reply.json()["result"].is_object() {
            kept += 1;
        } else {
            refused = Some(rpc_error(&reply));
            break;
        }
    }
    assert!(kept >= 1, "the control: alice's first subscriptions fit");
    assert_eq!(
        refused,
        Some((
            -32603,
            "Cannot keep the subscription: session limit reached: the session records of this \
             principal weigh their whole share (sessions.record_bytes_per_principal)"
                .to_owned()
        ))
    );
    // Bob's records are his own: alice's full share costs him none of his.
    let bob = legacy_initialize(s.gw.addr, "bob", "vh").await;
    for id in 1..=kept {
        let reply = legacy_post(s.gw.addr, "bob", "vh", Some(&bob), &subscribe(id)).await;
        assert!(reply.json()["result"].is_object(), "{}", reply.text());
    }
    // Alice's kept subscriptions stay: unsubscribing one makes room for the refused one.
    let unsubscribe = json!({"jsonrpc": "2.0", "id": 100, "method": "resources/unsubscribe",
        "params": {"uri": uri(1)}});
    let reply = legacy_post(s.gw.addr, "alice", "vh", Some(&alice), &unsubscribe).await;
    assert!(reply.json()["result"].is_object(), "{}", reply.text());
    let again = legacy_post(s.gw.addr, "alice", "vh", Some(&alice), &subscribe(kept + 1)).await;
    assert!(again.json()["result"].is_object(), "{}", again.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_level_past_the_principals_record_bytes_is_refused() {
    const SHARE: usize = 8192;
    // A level weighs its name and 64 bytes in the record: `debug`, 69.
    const LEVEL: usize = 69;
    let s = setup(
        "iso-log-level-bytes",
        &format!("[sessions]\nrecord_bytes_per_principal = {SHARE}\n"),
    )
    .await;
    let held = r#"mcp_gateway_budget_held{budget="session_records",unit="bytes"}"#;
    let set_level = json!({"jsonrpc": "2.0", "id": 50, "method": "logging/setLevel",
        "params": {"level": "debug"}});
    let subscribe = |id: usize, len: usize| {
        let uri = format!("beta-test://beta/item/{id}-");
        let uri = format!("{uri}{}", "0".repeat(len - uri.len()));
        json!({"jsonrpc": "2.0", "id": id, "method": "resources/subscribe",
            "params": {"uri": uri}})
    };
    let alice = legacy_initialize(s.gw.addr, "alice", "vh").await;

    // Alice's subscriptions fill her share to 68 bytes short of it (a URI weighs its length
    // and 64 bytes), which a level does not fit in.
    for id in 1.. {
        let room = SHARE - metric(&s.gw, held).await.unwrap_or(0.0) as usize;
        let len = (room - (LEVEL - 1) - 64).min(4_000);
        let reply = legacy_post(s.gw.addr, "alice", "vh", Some(&alice), &subscribe(id, len)).await;
        assert!(reply.json()["result"].is_object(), "{}", reply.text());
        if len < 4_000 {
            break;
        }
    }
    let refused = legacy_post(s.gw.addr, "alice", "vh", Some(&alice), &set_level).await;
    assert_eq!(refused.status, 200);
    assert_eq!(
        rpc_error(&refused),
        (
            -32603,
            "Cannot keep the log level: session limit reached: the session records of this \
             principal weigh their whole share (sessions.record_bytes_per_principal)"
                .to_owned()
        )
    );
    // The record stayed as it was: still 68 bytes short of the share.
    let now = metric(&s.gw, held).await.unwrap_or(0.0) as usize;
    assert_eq!(SHARE - now, LEVEL - 1, "nothing was added");

    // Bob's records are his own: his level is kept.
    let bob = legacy_initialize(s.gw.addr, "bob", "vh").await;
    let reply = legacy_post(s.gw.addr, "bob", "vh", Some(&bob), &set_level).await;
    assert!(reply.json()["result"].is_object(), "{}", reply.text());
    // The control: once alice gives up her first subscription, her level fits.
    let mut unsubscribe = subscribe(1, 4_000);
    unsubscribe["method"] = json!("resources/unsubscribe");
    let reply = legacy_post(s.gw.addr, "alice", "vh", Some(&alice), &unsubscribe).await;
    assert!(reply.json()["result"].is_object(), "{}", reply.text());
    let kept = legacy_post(s.gw.addr, "alice", "vh", Some(&alice), &set_level).await;
    assert!(kept.json()["result"].is_object(), "{}", kept.text());
}
