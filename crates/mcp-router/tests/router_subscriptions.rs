//! Change notifications through the gateway, from real rmcp backends that emit them on demand
//! (`touch {uri?}`: `notifications/resources/updated` for `uri` to its subscribers, then
//! `resources/list_changed` and, last, `tools/list_changed`):
//!
//! - a 2026-07-28 client's `subscriptions/listen` is acknowledged with the honoured subset, and
//!   relays a modern backend's upstream listen and a legacy backend's GET stream with public URIs,
//!   tagged with the client's listen id, never a type (or URI) the client did not ask for;
//! - a 2025 session's GET stream carries a legacy backend's `resources/updated` (after
//!   `resources/subscribe` through the gateway) with the public URI, and its list changes;
//! - `server/discover` advertises `listChanged`/`subscribe` when a backend does.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::stack::{Gateway, bearer, modern_request_with_id, user_config};
use mcp_test_support::{EventStream, Reply};
use serde_json::{Value, json};

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
const ALPHA_STATIC: &str = "alpha-test://alpha/static";
const BETA_STATIC: &str = "beta-test://beta/static";
/// How long a test waits for something that should come (or for nothing more to come).
const WAIT: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(300);

async fn setup() -> (TestBackend, TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").touch_tool(true)).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta").touch_tool(true)).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config)]).await;
    (alpha, beta, gw)
}

/// Opens a 2026-07-28 `subscriptions/listen` with JSON-RPC id `id` for `sub`.
async fn listen(gw: &Gateway, sub: &str, id: u64, notifications: Value) -> EventStream {
    let (headers, body) = modern_request_with_id(
        json!(id),
        "subscriptions/listen",
        json!({ "notifications": notifications }),
    );
    let auth = bearer(sub);
    let mut all: Vec<(&str, &str)> = vec![("authorization", &auth)];
    all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
    let stream =
        mcp_test_support::EventStream::open(gw.addr, "POST", "/servers/vh/mcp", &all, &body).await;
    assert_eq!(
        stream.status, 200,
        "subscriptions/listen is answered with a stream"
    );
    stream
}

/// The next JSON-RPC message on `stream` (priming events skipped), `None` after `wait`.
async fn next_message(stream: &mut EventStream, wait: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let event = stream.next_event(left).await?;
        if event.data.trim().is_empty() {
            continue;
        }
        return Some(serde_json::from_str(&event.data).expect("SSE data is JSON"));
    }
}

/// Messages up to and including `notifications/tools/list_changed` (which `touch` sends last):
/// `Ok` with them, or `Err` with what came before `wait` ran out.
async fn until_tools_list_changed(
    stream: &mut EventStream,
    wait: Duration,
) -> Result<Vec<Value>, Vec<Value>> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(message) = next_message(stream, left).await else {
            return Err(seen);
        };
        let last = message["method"] == "notifications/tools/list_changed";
        seen.push(message);
        if last {
            return Ok(seen);
        }
    }
}

/// Everything that arrives within `wait`.
async fn drain(stream: &mut EventStream, wait: Duration) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match next_message(stream, left).await {
            Some(message) => seen.push(message),
            None => return seen,
        }
    }
}

/// `method` or `method <uri>`, for readable assertions.
fn summary(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| {
            let method = m["method"].as_str().unwrap_or("<not a notification>");
            match m["params"]["uri"].as_str() {
                Some(uri) => format!("{method} {uri}"),
                None => method.to_owned(),
            }
        })
        .collect()
}

fn assert_tagged(messages: &[Value], id: u64) {
    for message in messages {
        assert_eq!(
            message["params"]["_meta"][SUBSCRIPTION_ID],
            json!(id),
            "not tagged with listen id {id}: {message}"
        );
    }
}

/// Calls `<backend>-touch {uri}` as a 2026-07-28 client of `sub`.
async fn modern_touch(gw: &Gateway, sub: &str, tool: &str, uri: &str) {
    let reply = gw
        .modern(
            sub,
            "vh",
            "tools/call",
            json!({"name": tool, "arguments": {"uri": uri}}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let messages = reply.sse_messages();
    let result = messages
        .iter()
        .chain(std::iter::once(&reply_json(&reply)))
        .find(|m| m.get("result").is_some())
        .cloned()
        .unwrap_or_else(|| panic!("no result for {tool}: {}", reply.text()));
    let backend = tool.trim_end_matches("-touch");
    assert_eq!(
        result["result"]["content"][0]["text"],
        format!("{backend}: touched {uri}"),
        "{result}"
    );
}

/// The body as JSON when it is JSON (`Null` for an SSE body).
fn reply_json(reply: &Reply) -> Value {
    serde_json::from_slice(&reply.body).unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_listen_is_acknowledged_with_the_honoured_subset_and_relays_both_eras_with_public_uris() {
    let (alpha, beta, gw) = setup().await;

    // A: tool list changes and three URIs, one of them unknown.
    let mut full = listen(
        &gw,
        "alice",
        41,
        json!({"toolsListChanged": true, "resourceSubscriptions": [ALPHA_STATIC, BETA_STATIC, "nope"]}),
    )
    .await;
    let ack = next_message(&mut full, WAIT)
        .await
        .expect("the acknowledgement comes first");
    assert_eq!(
        ack,
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
            "notifications": {"toolsListChanged": true, "resourceSubscriptions": [ALPHA_STATIC, BETA_STATIC]},
            "_meta": {SUBSCRIPTION_ID: 41}
        }})
    );

    // B: the same caller, tool list changes only.
    let mut tools_only = listen(&gw, "alice", 42, json!({"toolsListChanged": true})).await;
    let ack = next_message(&mut tools_only, WAIT)
        .await
        .expect("the acknowledgement comes first");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"],
        json!({"notifications": {"toolsListChanged": true}, "_meta": {SUBSCRIPTION_ID: 42}})
    );

    // Upstream: alpha got two listens with its share of the URIs (un-prefixed), beta a
    // resources/subscribe for its URI in the caller's session.
    assert!(
        alpha.wait_until(WAIT, |b| b.subscriptions() == 2).await,
        "alpha should hold both upstream listens, holds {}",
        alpha.subscriptions()
    );
    let upstream_filters: Vec<Value> = alpha
        .requests_for("subscriptions/listen")
        .iter()
        .map(|r| r.json().expect("JSON body")["params"]["notifications"].clone())
        .collect();
    assert_eq!(
        upstream_filters,
        [
            json!({"toolsListChanged": true, "resourceSubscriptions": ["test://alpha/static"]}),
            json!({"toolsListChanged": true}),
        ]
    );
    assert_eq!(beta.sessions_subscribed_to("test://beta/static"), 1);

    // alpha (modern): its upstream listens are in place, so one touch reaches both streams.
    modern_touch(&gw, "alice", "alpha-touch", "test://alpha/static").await;
    let seen = until_tools_list_changed(&mut full, WAIT)
        .await
        .unwrap_or_else(|seen| panic!("A: no tools/list_changed from alpha: {seen:?}"));
    assert_eq!(
        summary(&seen),
        [
            format!("notifications/resources/updated {ALPHA_STATIC}"),
            "notifications/tools/list_changed".to_owned()
        ]
    );
    assert_tagged(&seen, 41);
    let seen = until_tools_list_changed(&mut tools_only, WAIT)
        .await
        .unwrap_or_else(|seen| panic!("B: no tools/list_changed from alpha: {seen:?}"));
    assert_eq!(summary(&seen), ["notifications/tools/list_changed"]);
    assert_tagged(&seen, 42);
    for stream in [&mut full, &mut tools_only] {
        let extra = drain(stream, QUIET).await;
        assert!(extra.is_empty(), "nothing more from alpha: {extra:?}");
    }

    // beta (legacy): through the caller's upstream session's GET stream, which the gateway opens
    // as the listens start; a touch before the backend attached the stream is lost, so retry.
    assert!(
        beta.wait_until(WAIT, |b| b
            .requests()
            .iter()
            .any(|r| r.method == http::Method::GET))
            .await,
        "the gateway opens beta's GET stream"
    );
    let mut full_seen = Vec::new();
    let mut tools_only_seen = Vec::new();
    let mut done = (false, false);
    for _ in 0..5 {
        modern_touch(&gw, "alice", "beta-touch", "test://beta/static").await;
        let wait = Duration::from_secs(1);
        if !done.0 {
            let (ok, seen) = match until_tools_list_changed(&mut full, wait).await {
                Ok(seen) => (true, seen),
                Err(seen) => (false, seen),
            };
            full_seen.extend(seen);
            done.0 = ok;
        }
        if !done.1 {
            let (ok, seen) = match until_tools_list_changed(&mut tools_only, wait).await {
                Ok(seen) => (true, seen),
                Err(seen) => (false, seen),
            };
            tools_only_seen.extend(seen);
            done.1 = ok;
        }
        if done == (true, true) {
            break;
        }
    }
    assert_eq!(
        done,
        (true, true),
        "A: {full_seen:?}, B: {tools_only_seen:?}"
    );
    full_seen.extend(drain(&mut full, QUIET).await);
    tools_only_seen.extend(drain(&mut tools_only, QUIET).await);

    // A asked for beta's URI and tool list changes: it gets both, with the public URI; beta's
    // resources/list_changed was not asked for.
    let full_summary = summary(&full_seen);
    assert!(
        full_summary.contains(&format!("notifications/resources/updated {BETA_STATIC}")),
        "{full_summary:?}"
    );
    assert!(
        full_summary.iter().all(
            |m| m == &format!("notifications/resources/updated {BETA_STATIC}")
                || m == "notifications/tools/list_changed"
        ),
        "A got something it did not ask for: {full_summary:?}"
    );
    assert_tagged(&full_seen, 41);
    // B asked for tool list changes only: beta's update for a URI that A subscribed to in the
    // same upstream session is not B's.
    let tools_only_summary = summary(&tools_only_seen);
    assert!(
        !tools_only_summary.is_empty()
            && tools_only_summary
                .iter()
                .all(|m| m == "notifications/tools/list_changed"),
        "B got something it did not ask for: {tools_only_summary:?}"
    );
    assert_tagged(&tools_only_seen, 42);

    // Closing the client's streams closes the upstream listens.
    drop(full);
    drop(tools_only);
    assert!(
        alpha.wait_until(WAIT, |b| b.subscriptions() == 0).await,
        "alpha still holds {} listens",
        alpha.subscriptions()
    );
}

// ---- 2025 sessions ----------------------------------------------------------------------

/// POSTs a JSON-RPC message in a 2025 session (no session header when `session` is `None`).
async fn legacy_post(gw: &Gateway, session: Option<&str>, body: Value) -> Reply {
    gw.legacy_post("alice", "vh", session, body).await
}

/// The JSON-RPC answer of a 2025 POST (JSON body, or the last message with an id on SSE).
fn legacy_answer(reply: &Reply) -> Value {
    let json = reply_json(reply);
    if !json.is_null() {
        return json;
    }
    reply
        .sse_messages()
        .into_iter()
        .rfind(|m| m.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {}", reply.text()))
}

async fn initialize(gw: &Gateway) -> String {
    let reply = legacy_post(
        gw,
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "subscriptions-e2e", "version": "1"}
        }}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let capabilities = &legacy_answer(&reply)["result"]["capabilities"];
    assert_eq!(
        capabilities["resources"]["subscribe"], true,
        "{capabilities}"
    );
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let initialized = legacy_post(
        gw,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status, 202);
    session
}

#[tokio::test]
async fn a_2025_get_stream_carries_a_subscribed_update_with_the_public_uri_and_list_changes() {
    let (_alpha, beta, gw) = setup().await;
    let session = initialize(&gw).await;
    let auth = bearer("alice");
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
    ];
    let mut stream =
        mcp_test_support::EventStream::open(gw.addr, "GET", "/servers/vh/mcp", &headers, "").await;
    assert_eq!(stream.status, 200);

    let subscribe = legacy_post(
        &gw,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": BETA_STATIC}}),
    )
    .await;
    assert_eq!(
        legacy_answer(&subscribe),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        "{}",
        subscribe.text()
    );
    assert_eq!(
        beta.sessions_subscribed_to("test://beta/static"),
        1,
        "the gateway subscribed with the upstream URI"
    );
    assert!(
        beta.wait_until(WAIT, |b| b
            .requests()
            .iter()
            .any(|r| r.method == http::Method::GET))
            .await,
        "the gateway opens beta's GET stream"
    );

    // A touch before beta attached the GET stream is lost: retry a few times.
    let mut seen = Vec::new();
    let mut done = false;
    for id in 2..7 {
        let call = legacy_post(
            &gw,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "beta-touch", "arguments": {"uri": "test://beta/static"}}}),
        )
        .await;
        assert_eq!(
            legacy_answer(&call)["result"]["content"][0]["text"],
            "beta: touched test://beta/static",
            "{}",
            call.text()
        );
        match until_tools_list_changed(&mut stream, Duration::from_secs(1)).await {
            Ok(messages) => {
                seen.extend(messages);
                done = true;
                break;
            }
            Err(messages) => seen.extend(messages),
        }
    }
    assert!(done, "no tools/list_changed on the GET stream: {seen:?}");
    let tail = summary(&seen[seen.len().saturating_sub(3)..]);
    assert_eq!(
        tail,
        [
            format!("notifications/resources/updated {BETA_STATIC}"),
            "notifications/resources/list_changed".to_owned(),
            "notifications/tools/list_changed".to_owned(),
        ],
        "all: {:?}",
        summary(&seen)
    );
    assert!(
        seen.iter()
            .all(|m| m["params"]["_meta"][SUBSCRIPTION_ID].is_null()),
        "2025 streams carry no subscription ids"
    );
}

// ---- server/discover ------------------------------------------------------------------------

/// A modern backend whose `server/discover` offers tools and resources without `listChanged` or
/// `subscribe`.
async fn quiet_backend() -> String {
    let service = tower::service_fn(|req: Request<Incoming>| async move {
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "quiet", "version": "0"}}});
        Ok::<_, Infallible>(
            Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(reply.to_string())))
                .expect("static response parts"),
        )
    });
    let addr = mcp_test_support::serve(service).await;
    format!("http://{addr}/mcp")
}

async fn discovered_capabilities(backends: &[(&str, String)]) -> Value {
    let gw = Gateway::start(&[("alice", user_config(backends))]).await;
    let reply = gw.modern("alice", "vh", "server/discover", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()["result"]["capabilities"].clone()
}

#[tokio::test]
async fn discover_advertises_list_changed_and_subscribe_when_a_backend_does() {
    let quiet = quiet_backend().await;
    let alone = discovered_capabilities(&[("quiet", quiet.clone())]).await;
    assert!(alone["tools"].is_object(), "{alone}");
    assert_eq!(alone["tools"].get("listChanged"), None, "{alone}");
    assert_eq!(alone["resources"].get("subscribe"), None, "{alone}");

    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    for backends in [
        vec![("quiet", quiet.clone()), ("alpha", alpha.url())],
        vec![("quiet", quiet.clone()), ("beta", beta.url())],
    ] {
        let merged = discovered_capabilities(&backends).await;
        assert_eq!(merged["tools"]["listChanged"], true, "{merged}");
        assert_eq!(merged["resources"]["subscribe"], true, "{merged}");
        assert_eq!(merged["resources"]["listChanged"], true, "{merged}");
    }
}

#[tokio::test]
async fn a_2025_session_gets_only_the_updates_it_subscribed_to() {
    let (_alpha, beta, gw) = setup().await;
    // Two sessions of one caller share beta's upstream session (and its GET stream).
    let subscriber = initialize(&gw).await;
    let bystander = initialize(&gw).await;
    let auth = bearer("alice");
    let open = |session: String| {
        let auth = auth.clone();
        let addr = gw.addr;
        async move {
            let headers = [
                ("authorization", auth.as_str()),
                ("accept", "text/event-stream"),
                ("mcp-session-id", session.as_str()),
            ];
            mcp_test_support::EventStream::open(addr, "GET", "/servers/vh/mcp", &headers, "").await
        }
    };
    let mut subscribed_stream = open(subscriber.clone()).await;
    let mut bystander_stream = open(bystander.clone()).await;
    let subscribe = legacy_post(
        &gw,
        Some(&subscriber),
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": BETA_STATIC}}),
    )
    .await;
    assert_eq!(legacy_answer(&subscribe)["result"], json!({}));
    assert!(
        beta.wait_until(WAIT, |b| b
            .requests()
            .iter()
            .any(|r| r.method == http::Method::GET))
            .await,
        "the gateway opens beta's GET stream"
    );

    let mut subscriber_seen = Vec::new();
    let mut done = false;
    for id in 2..7 {
        legacy_post(
            &gw,
            Some(&subscriber),
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "beta-touch", "arguments": {"uri": "test://beta/static"}}}),
        )
        .await;
        match until_tools_list_changed(&mut subscribed_stream, Duration::from_secs(1)).await {
            Ok(messages) => {
                subscriber_seen.extend(messages);
                done = true;
                break;
            }
            Err(messages) => subscriber_seen.extend(messages),
        }
    }
    assert!(done, "no change notifications: {subscriber_seen:?}");
    assert!(
        summary(&subscriber_seen)
            .contains(&format!("notifications/resources/updated {BETA_STATIC}")),
        "{:?}",
        summary(&subscriber_seen)
    );
    let bystander_seen = until_tools_list_changed(&mut bystander_stream, Duration::from_secs(5))
        .await
        .unwrap_or_else(|seen| panic!("the bystander gets list changes: {seen:?}"));
    assert!(
        summary(&bystander_seen)
            .iter()
            .all(|m| !m.starts_with("notifications/resources/updated")),
        "a session that did not subscribe gets no updates: {:?}",
        summary(&bystander_seen)
    );
}

/// `resources/subscribe` of a 2025 session for a 2026-07-28 backend's resource: that revision has
/// no such method, so the gateway answers `{}` itself and follows the backend through a
/// `subscriptions/listen` that carries the session's URIs; the update arrives on the session's
/// GET stream with the public URI, and stops after `resources/unsubscribe`.
#[tokio::test]
async fn a_2025_session_subscribes_to_a_modern_backends_resource_through_a_listen() {
    let (alpha, _beta, gw) = setup().await;
    let session = initialize(&gw).await;
    let auth = bearer("alice");
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
    ];
    let mut stream =
        mcp_test_support::EventStream::open(gw.addr, "GET", "/servers/vh/mcp", &headers, "").await;
    assert_eq!(stream.status, 200);

    let subscribe = legacy_post(
        &gw,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": ALPHA_STATIC}}),
    )
    .await;
    assert_eq!(
        legacy_answer(&subscribe),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        "{}",
        subscribe.text()
    );
    assert!(
        alpha.requests_for("resources/subscribe").is_empty(),
        "nothing 2026-07-28 removed reaches the backend"
    );
    assert!(
        alpha
            .wait_until(WAIT, |a| a.sessions_subscribed_to("test://alpha/static")
                == 0
                && a.subscriptions() >= 1)
            .await,
        "the gateway follows alpha with a listen"
    );
    let mut seen = Vec::new();
    let mut updated = false;
    for _ in 0..10 {
        alpha.touch(Some("test://alpha/static")).await;
        match until_tools_list_changed(&mut stream, Duration::from_secs(1)).await {
            Ok(messages) | Err(messages) => seen.extend(messages),
        }
        if seen
            .iter()
            .any(|m| m["method"] == "notifications/resources/updated")
        {
            updated = true;
            break;
        }
    }
    assert!(updated, "no update on the GET stream: {:?}", summary(&seen));
    let update = seen
        .iter()
        .find(|m| m["method"] == "notifications/resources/updated")
        .expect("update");
    assert_eq!(update["params"]["uri"], ALPHA_STATIC, "{update}");
    assert!(
        update["params"]["_meta"].is_null(),
        "no subscription id: {update}"
    );

    let unsubscribe = legacy_post(
        &gw,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/unsubscribe", "params": {"uri": ALPHA_STATIC}}),
    )
    .await;
    assert_eq!(
        legacy_answer(&unsubscribe),
        json!({"jsonrpc": "2.0", "id": 2, "result": {}})
    );
}
