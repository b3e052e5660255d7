//! A stdio server's own requests through the gateway: `server-everything` (TypeScript SDK, 2025
//! era) run as a child process from the operator's catalog. Its process is started declaring the
//! client capabilities the gateway relays, so it lists the tools that need them; during a call,
//! its `sampling/createMessage`, `elicitation/create` and `roots/list` reach the call's 2025
//! client on the POST stream (and the client's answers reach the process), and a 2026-07-28
//! client gets them as `input_required`. A process shared by principals cannot tell whose call a
//! request belongs to: the request is declined, and another tenant's call in flight on the same
//! process never sees it. The same server over HTTP+SSE (2024-11-05) gets the same relay, and
//! rmcp's own 2025 client drives the stdio server's sampling and roots through the gateway.

//! (Over 600 lines: one real peer in every era pairing and failure case, sharing its setup and the
//! 2025 stream driver.)

// Log notifications are deprecated by SEP-2577; rmcp's handler still records them.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use mcp_config_store::StdioPolicy;
use mcp_router::{McpRouter, StdioServer};
use mcp_test_support::EventStream;
use mcp_test_support::peers::{EverythingTransport, ServerEverything, node_project, root};
use mcp_test_support::stack::{Gateway, bearer, modern_meta, vhost_config};
use serde_json::{Value, json};

/// Longest wait for one message of a call (the child starts on the first call: seconds of node
/// start-up on a loaded machine).
const WAIT: Duration = Duration::from_secs(30);
const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("content-type", "application/json");

/// The catalog: `everything` (one process per principal) and `everything-shared`.
fn router(project: &Path) -> McpRouter {
    router_with(project, None)
}

/// Like [`router`], with `store` for 2025 sessions (default: memory).
fn router_with(
    project: &Path,
    store: Option<std::sync::Arc<dyn mcp_router::session::SessionStore>>,
) -> McpRouter {
    let entry = project.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let server = |policy| {
        let mut server = StdioServer::new("node");
        server.args = vec![
            entry.to_str().expect("utf-8 path").to_owned(),
            "stdio".to_owned(),
        ];
        server.cwd = Some(project.to_owned());
        server.policy = policy;
        server
    };
    let servers = BTreeMap::from([
        ("everything".to_owned(), server(StdioPolicy::PerPrincipal)),
        ("everything-shared".to_owned(), server(StdioPolicy::Shared)),
    ]);
    let builder = McpRouter::builder()
        .fanout_deadline(WAIT)
        .stdio_servers(servers);
    match store {
        Some(store) => builder.session_store(store),
        None => builder,
    }
    .build()
}

/// `vh`: backend `ev` on the catalog entry `entry`.
fn user(entry: &str) -> Value {
    vhost_config(json!({"backends": {"ev": {"stdio": entry, "timeout_ms": 30000}}}))
}

async fn gateway(project: &Path, entry: &str) -> Gateway {
    Gateway::start_with(
        &[("alice", user(entry)), ("bob", user(entry))],
        router(project),
    )
    .await
}

/// A 2025-11-25 session of `sub` declaring `capabilities`.
async fn session(gw: &Gateway, sub: &str, capabilities: Value) -> String {
    let init = gw
        .raw(
            sub,
            "vh",
            "POST",
            &[ACCEPT, JSON],
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "stdio-relay", "version": "0"}}})
            .to_string(),
        )
        .await;
    init.header("mcp-session-id")
        .unwrap_or_else(|| panic!("a session: {}", init.text()))
        .to_owned()
}

/// Sends a message in a 2025 session; the whole answer.
async fn post(gw: &Gateway, sub: &str, session: &str, message: &Value) -> mcp_test_support::Reply {
    gw.raw(
        sub,
        "vh",
        "POST",
        &[
            ACCEPT,
            JSON,
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &message.to_string(),
    )
    .await
}

/// Opens a call in a 2025 session whose answer streams.
async fn open_call(
    addr: SocketAddr,
    sub: &str,
    session: &str,
    id: u64,
    params: Value,
) -> EventStream {
    let auth = bearer(sub);
    let headers = [
        ("authorization", auth.as_str()),
        ACCEPT,
        JSON,
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    EventStream::open(addr, "POST", "/servers/vh/mcp", &headers, &body.to_string()).await
}

/// What a 2025 call brought: the server requests relayed (answered with `answer`), the
/// notifications, and the final response.
struct Call {
    requests: Vec<Value>,
    notifications: Vec<Value>,
    response: Value,
}

/// The roots this client has.
fn roots() -> Value {
    json!({"roots": [{"uri": "file:///work/project", "name": "project"}]})
}

/// Reads the call `id` to its end, answering each relayed request with `answer(request)` in
/// the session (every relayed `roots/list` with [`roots`]: server-everything also asks on its
/// own shortly after it starts, which lands in whichever call is in flight).
async fn drive(
    gw: &Gateway,
    sub: &str,
    session: &str,
    mut stream: EventStream,
    id: u64,
    answer: impl Fn(&Value) -> Value,
) -> Call {
    let mut call = Call {
        requests: Vec::new(),
        notifications: Vec::new(),
        response: Value::Null,
    };
    loop {
        let event = stream
            .next_event(WAIT)
            .await
            .unwrap_or_else(|| panic!("call {id} ended early: {:?}", call.requests));
        if event.data.is_empty() {
            continue; // a priming event
        }
        let message: Value = serde_json::from_str(&event.data).expect("JSON event");
        if message["id"] == id && message.get("method").is_none() {
            call.response = message;
            return call;
        }
        if message.get("id").is_some() {
            let result = if message["method"] == "roots/list" {
                roots()
            } else {
                answer(&message)
            };
            let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
            let delivered = post(gw, sub, session, &reply).await;
            assert_eq!(delivered.status, 202, "{}", delivered.text());
            call.requests.push(message);
        } else {
            call.notifications.push(message);
        }
    }
}

fn texts(response: &Value) -> String {
    response["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content: {response}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn sampled() -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": "sampled by the client"},
           "model": "test-model", "stopReason": "endTurn"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_answers_a_stdio_servers_sampling_elicitation_and_roots() {
    let Some(project) = node_project() else {
        return;
    };
    let gw = gateway(&project, "everything").await;
    let caps = json!({"sampling": {}, "elicitation": {}, "roots": {}});
    let session = session(&gw, "alice", caps).await;
    // First, so that the process starts on this call and has no roots yet: it asks for them.
    let stream = open_call(
        gw.addr,
        "alice",
        &session,
        1,
        json!({"name": "ev-get-roots-list", "arguments": {}}),
    )
    .await;
    let listed_roots = drive(&gw, "alice", &session, stream, 1, |r| {
        panic!("only roots/list expected here: {r}")
    })
    .await;
    assert_eq!(listed_roots.requests[0]["method"], "roots/list");
    let text = texts(&listed_roots.response);
    assert!(text.contains("file:///work/project"), "{text}");
    // The server logs once it has the roots, before it answers: that log message reached the
    // call's stream.
    assert!(
        listed_roots
            .notifications
            .iter()
            .any(|n| n["method"] == "notifications/message"
                && n["params"]["data"]
                    .as_str()
                    .is_some_and(|d| d.contains("Roots updated"))),
        "{:?}",
        listed_roots.notifications
    );

    let listed = post(
        &gw,
        "alice",
        &session,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}),
    )
    .await;
    let names = listed.tool_names();
    for tool in [
        "ev-trigger-sampling-request",
        "ev-trigger-elicitation-request",
        "ev-get-roots-list",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} missing: {names:?}");
    }

    let stream = open_call(
        gw.addr,
        "alice",
        &session,
        2,
        json!({"name": "ev-trigger-sampling-request",
               "arguments": {"prompt": "a haiku", "maxTokens": 20}}),
    )
    .await;
    let sampling = drive(&gw, "alice", &session, stream, 2, |_| sampled()).await;
    let request = sampling
        .requests
        .iter()
        .find(|r| r["method"] == "sampling/createMessage")
        .unwrap_or_else(|| panic!("no sampling request: {:?}", sampling.requests));
    assert!(request["id"].is_string(), "a gateway id: {request}");
    assert_eq!(request["params"]["maxTokens"], 20, "{request}");
    let text = texts(&sampling.response);
    assert!(text.contains("sampled by the client"), "{text}");

    let stream = open_call(
        gw.addr,
        "alice",
        &session,
        3,
        json!({"name": "ev-trigger-elicitation-request", "arguments": {}}),
    )
    .await;
    let elicited = drive(
        &gw,
        "alice",
        &session,
        stream,
        3,
        |_| json!({"action": "accept", "content": {"name": "Ferris", "check": true}}),
    )
    .await;
    assert!(
        elicited
            .requests
            .iter()
            .any(|r| r["method"] == "elicitation/create"),
        "{:?}",
        elicited.requests
    );
    let text = texts(&elicited.response);
    assert!(text.contains("- Name: Ferris"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_without_the_capability_gets_the_request_declined() {
    let Some(project) = node_project() else {
        return;
    };
    let gw = gateway(&project, "everything").await;
    // This client declared nothing: the process (started declaring what the gateway relays)
    // still lists the tool, and its request is declined with the reason.
    let session = session(&gw, "alice", json!({})).await;
    let answer = post(
        &gw,
        "alice",
        &session,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "ev-trigger-sampling-request", "arguments": {"prompt": "x"}}}),
    )
    .await;
    let messages = match answer.sse_messages() {
        messages if !messages.is_empty() => messages,
        _ => vec![answer.json()],
    };
    let response = messages.last().expect("a response");
    assert!(
        messages.iter().all(|m| m
            .get("method")
            .is_none_or(|m| m != "sampling/createMessage")),
        "{messages:?}"
    );
    assert_eq!(response["result"]["isError"], true, "{response}");
    let text = texts(response);
    assert!(
        text.contains("-32601")
            && text.contains("the client of this call did not declare the sampling capability"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_answers_a_stdio_servers_sampling_through_input_required() {
    let Some(project) = node_project() else {
        return;
    };
    let gw = gateway(&project, "everything").await;
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"sampling": {}});
    let params = json!({"name": "ev-trigger-sampling-request",
                        "arguments": {"prompt": "a modern haiku", "maxTokens": 7},
                        "_meta": meta});
    let first = gw.modern("alice", "vh", "tools/call", params.clone()).await;
    let result = &first.json()["result"];
    assert_eq!(result["resultType"], "input_required", "{result}");
    let request = &result["inputRequests"]["sampling"];
    assert_eq!(request["method"], "sampling/createMessage", "{result}");
    assert_eq!(request["params"]["maxTokens"], 7, "{result}");
    let mut retry = params;
    retry["inputResponses"] = json!({"sampling": sampled()});
    retry["requestState"] = result["requestState"].clone();
    let done = gw.modern("alice", "vh", "tools/call", retry).await;
    let messages = match done.sse_messages() {
        messages if !messages.is_empty() => messages,
        _ => vec![done.json()],
    };
    let text = texts(messages.last().expect("a response"));
    assert!(text.contains("sampled by the client"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_process_never_relays_a_request_to_another_tenants_call() {
    let Some(project) = node_project() else {
        return;
    };
    let gw = gateway(&project, "everything-shared").await;
    let caps = json!({"sampling": {}, "elicitation": {}, "roots": {}});
    let alice = session(&gw, "alice", caps.clone()).await;
    let bob = session(&gw, "bob", caps).await;
    // Bob's call is in flight on the shared process (progress every second for 3 s: its first
    // progress event has arrived) while alice's call makes the process ask for sampling.
    let mut bobs_call = open_call(
        gw.addr,
        "bob",
        &bob,
        7,
        json!({"name": "ev-trigger-long-running-operation",
               "arguments": {"duration": 3, "steps": 3},
               "_meta": {"progressToken": "bob-1"}}),
    )
    .await;
    let first = bobs_call
        .next_message_where(WAIT, |m| m.get("method").is_some())
        .await;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let answer = post(
        &gw,
        "alice",
        &alice,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "ev-trigger-sampling-request", "arguments": {"prompt": "x"}}}),
    )
    .await;
    let messages = match answer.sse_messages() {
        messages if !messages.is_empty() => messages,
        _ => vec![answer.json()],
    };
    assert!(
        messages.iter().all(|m| m.get("method").is_none()),
        "alice was asked nothing: {messages:?}"
    );
    let response = messages.last().expect("a response");
    let text = texts(response);
    assert!(
        text.contains("-32601") && text.contains("cannot tell which call this request belongs to"),
        "{text}"
    );
    let bobs = drive(&gw, "bob", &bob, bobs_call, 7, |r| {
        panic!("bob was sent alice's request: {r}")
    })
    .await;
    assert!(bobs.requests.is_empty(), "{:?}", bobs.requests);
    assert!(
        texts(&bobs.response).contains("Long running operation completed"),
        "{}",
        bobs.response
    );
}

/// Opens the GET stream of a 2025 session.
async fn get_stream(addr: SocketAddr, sub: &str, session: &str) -> EventStream {
    let auth = bearer(sub);
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let stream =
        mcp_test_support::EventStream::open(addr, "GET", "/servers/vh/mcp", &headers, "").await;
    assert_eq!(stream.status, 200, "GET stream of {sub}");
    stream
}

/// Every message `stream` brings within `window`.
async fn drain(stream: &mut EventStream, window: Duration) -> Vec<Value> {
    let deadline = std::time::Instant::now() + window;
    let mut messages = Vec::new();
    while let Some(event) = stream
        .next_event(deadline.saturating_duration_since(std::time::Instant::now()))
        .await
    {
        if let Ok(message) = serde_json::from_str(&event.data) {
            messages.push(message);
        }
    }
    messages
}

fn is_update(message: &Value) -> bool {
    message["method"] == "notifications/resources/updated"
}

/// Makes `sub`'s process send updates for what was subscribed on it (in a 2025 session).
async fn toggle_updates(gw: &Gateway, sub: &str, session: &str) {
    let toggled = post(
        gw,
        sub,
        session,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "ev-toggle-subscriber-updates", "arguments": {}}}),
    )
    .await;
    assert!(
        toggled.text().contains("Started simulated"),
        "{}",
        toggled.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processs_resource_updates_reach_only_the_sessions_that_subscribed_there() {
    let Some(project) = node_project() else {
        return;
    };
    let gw = gateway(&project, "everything").await;
    let alice = session(&gw, "alice", json!({})).await;
    let unsubscribed = session(&gw, "alice", json!({})).await;
    let bob = session(&gw, "bob", json!({})).await;
    let listed = post(
        &gw,
        "alice",
        &alice,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}),
    )
    .await;
    let uri = listed.json()["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("a resource: {}", listed.text()))
        .to_owned();
    let mut alices_stream = get_stream(gw.addr, "alice", &alice).await;
    let mut unsubscribed_stream = get_stream(gw.addr, "alice", &unsubscribed).await;
    let mut bobs_stream = get_stream(gw.addr, "bob", &bob).await;

    for (sub, session) in [("alice", &alice), ("bob", &bob)] {
        let subscribed = post(
            &gw,
            sub,
            session,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                    "params": {"uri": uri}}),
        )
        .await;
        // The child got it: it logs the request during the call, and the log reaches the caller.
        let messages = subscribed.sse_messages();
        assert!(
            messages
                .iter()
                .any(|m| m["method"] == "notifications/message"
                    && m["params"]["data"]
                        .as_str()
                        .is_some_and(|d| d.contains("Received Subscribe Resource request"))),
            "{sub}: {}",
            subscribed.text()
        );
        assert_eq!(messages.last().map(|m| &m["result"]), Some(&json!({})));
    }

    // Alice's process starts sending updates for what was subscribed on it.
    toggle_updates(&gw, "alice", &alice).await;
    let update = alices_stream.next_message_where(WAIT, is_update).await;
    assert_eq!(
        update["params"]["uri"],
        uri.as_str(),
        "public URI: {update}"
    );
    // Sent at the same moment to every listener of that process: by now it would be on these
    // streams too.
    let quiet = Duration::from_secs(1);
    let others = drain(&mut unsubscribed_stream, quiet).await;
    assert!(
        !others.iter().any(is_update),
        "unsubscribed session: {others:?}"
    );
    let bobs = drain(&mut bobs_stream, quiet).await;
    assert!(
        !bobs.iter().any(is_update),
        "bob got alice's process's update: {bobs:?}"
    );

    // Control: bob's own process sends him his.
    toggle_updates(&gw, "bob", &bob).await;
    let update = bobs_stream.next_message_where(WAIT, is_update).await;
    assert_eq!(update["params"]["uri"], uri.as_str(), "{update}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_answers_an_sse_servers_sampling() {
    let Some(project) = node_project() else {
        return;
    };
    let server = ServerEverything::start(&project, EverythingTransport::Sse).await;
    let url = server.url();
    let gw = Gateway::start_with(
        &[(
            "alice",
            vhost_config(json!({"backends": {"ev": {
                "url": url, "transport": "sse", "timeout_ms": 30000}}})),
        )],
        router(&project),
    )
    .await;
    let session = session(&gw, "alice", json!({"sampling": {}})).await;
    let listed = post(
        &gw,
        "alice",
        &session,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    let names = listed.tool_names();
    assert!(
        names.iter().any(|n| n == "ev-trigger-sampling-request"),
        "{names:?}"
    );
    let stream = open_call(
        gw.addr,
        "alice",
        &session,
        2,
        json!({"name": "ev-trigger-sampling-request",
               "arguments": {"prompt": "over sse", "maxTokens": 9}}),
    )
    .await;
    let sampling = drive(&gw, "alice", &session, stream, 2, |_| sampled()).await;
    assert!(
        sampling
            .requests
            .iter()
            .any(|r| r["method"] == "sampling/createMessage" && r["params"]["maxTokens"] == 9),
        "{:?}",
        sampling.requests
    );
    let text = texts(&sampling.response);
    assert!(text.contains("sampled by the client"), "{text}");
}

/// rmcp's client: answers sampling with a fixed text and roots with one root; records logs.
#[derive(Clone, Default)]
struct RmcpClient {
    logs: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    sampled: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl rmcp::ClientHandler for RmcpClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_sampling()
                .enable_roots()
                .build(),
            rmcp::model::Implementation::new("rmcp-2025-through-gateway", "0.0.0"),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25)
    }

    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let params = serde_json::to_value(&params).expect("serializable");
        self.sampled.lock().expect("lock").push(params);
        Ok(serde_json::from_value(sampled()).expect("a CreateMessageResult"))
    }

    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        Ok(serde_json::from_value(roots()).expect("a ListRootsResult"))
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let params = serde_json::to_value(&params).expect("serializable");
        self.logs.lock().expect("lock").push(params);
    }
}

fn rmcp_call(name: &str) -> rmcp::model::CallToolRequestParams {
    rmcp::model::CallToolRequestParams::new(name.to_owned())
}

fn rmcp_text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcps_2025_client_answers_a_stdio_servers_roots_and_sampling() {
    use rmcp::ClientServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let Some(project) = node_project() else {
        return;
    };
    let gw = gateway(&project, "everything").await;
    let handler = RmcpClient::default();
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/servers/vh/mcp", gw.addr))
            .auth_header(mcp_test_support::stack::token("alice"));
    let client = tokio::time::timeout(
        WAIT,
        handler.clone().serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            rmcp::ClientLifecycleMode::Initialize,
        ),
    )
    .await
    .expect("the client starts")
    .expect("rmcp's 2025 client connects through the gateway");

    // The process starts on this call, without roots yet: it asks this client, then logs.
    let roots = tokio::time::timeout(WAIT, client.call_tool(rmcp_call("ev-get-roots-list")))
        .await
        .expect("get-roots-list in time")
        .expect("get-roots-list");
    assert!(
        rmcp_text(&roots).contains("file:///work/project"),
        "{roots:?}"
    );
    // rmcp may hand the notification to its handler after the response: wait for it.
    let got_log = || {
        handler.logs.lock().expect("lock").iter().any(|l| {
            l["data"]
                .as_str()
                .is_some_and(|d| d.contains("Roots updated"))
        })
    };
    let deadline = std::time::Instant::now() + WAIT;
    while !got_log() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(got_log(), "{:?}", handler.logs.lock().expect("lock"));

    let mut call = rmcp_call("ev-trigger-sampling-request");
    call = call.with_arguments(rmcp::model::JsonObject::from_iter([(
        "prompt".to_owned(),
        json!("from rmcp"),
    )]));
    let sampled = tokio::time::timeout(WAIT, client.call_tool(call))
        .await
        .expect("trigger-sampling-request in time")
        .expect("trigger-sampling-request");
    assert!(
        rmcp_text(&sampled).contains("sampled by the client"),
        "{sampled:?}"
    );
    let asked = handler.sampled.lock().expect("lock").clone();
    assert!(
        asked.iter().any(|p| p.to_string().contains("from rmcp")),
        "{asked:?}"
    );
    let _ = client.cancel().await;
}

/// Alice subscribes to a resource of the shared process and makes it send updates; what alice's
/// and bob's (unsubscribed) GET streams get.
async fn shared_updates(gw: &Gateway) -> (Vec<Value>, Vec<Value>) {
    let alice = session(gw, "alice", json!({})).await;
    let bob = session(gw, "bob", json!({})).await;
    let listed = post(
        gw,
        "alice",
        &alice,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}),
    )
    .await;
    let uri = listed.json()["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("a resource: {}", listed.text()))
        .to_owned();
    let mut alices_stream = get_stream(gw.addr, "alice", &alice).await;
    let mut bobs_stream = get_stream(gw.addr, "bob", &bob).await;
    let subscribed = post(
        gw,
        "alice",
        &alice,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}}),
    )
    .await;
    assert!(subscribed.status == 200, "{}", subscribed.text());
    toggle_updates(gw, "alice", &alice).await;
    // The process sends one update at once and one every 5 s: 6 s cover both.
    let quiet = Duration::from_secs(6);
    let (alices, bobs) = tokio::join!(
        drain(&mut alices_stream, quiet),
        drain(&mut bobs_stream, quiet)
    );
    let updates = |messages: Vec<Value>| messages.into_iter().filter(is_update).collect();
    (updates(alices), updates(bobs))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_processs_updates_reach_only_subscribed_sessions_or_none_without_lists() {
    let Some(project) = node_project() else {
        return;
    };
    // Control: the memory store keeps each session's subscriptions.
    let gw = gateway(&project, "everything-shared").await;
    let (alices, bobs) = shared_updates(&gw).await;
    assert!(!alices.is_empty(), "alice subscribed and gets the updates");
    assert!(bobs.is_empty(), "bob did not subscribe: {bobs:?}");

    // The sealed store keeps no lists: nobody can be told apart, so nobody gets them.
    let ring =
        mcp_router::session::KeyRing::parse("k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
            .expect("key ring");
    let store = std::sync::Arc::new(mcp_router::session::SealedSessionStore::new(ring));
    let gw = Gateway::start_with(
        &[
            ("alice", user("everything-shared")),
            ("bob", user("everything-shared")),
        ],
        router_with(&project, Some(store)),
    )
    .await;
    let (alices, bobs) = shared_updates(&gw).await;
    assert!(alices.is_empty() && bobs.is_empty(), "{alices:?} {bobs:?}");
}

/// Opens a 2026-07-28 `subscriptions/listen` of `sub` for `notifications`.
async fn modern_listen(gw: &Gateway, sub: &str, notifications: Value) -> EventStream {
    let (headers, body) = mcp_test_support::stack::modern_request_with_id(
        json!(7),
        "subscriptions/listen",
        json!({ "notifications": notifications }),
    );
    let auth = bearer(sub);
    let mut all: Vec<(&str, &str)> = vec![("authorization", &auth)];
    all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
    let stream = EventStream::open(gw.addr, "POST", "/servers/vh/mcp", &all, &body).await;
    assert_eq!(stream.status, 200, "subscriptions/listen is a stream");
    stream
}

/// A 2026-07-28 client's `subscriptions/listen` follows a stdio 2025 server: the URI is
/// subscribed on the caller's process (`resources/subscribe` sent on the link) and its
/// `notifications/resources/updated` arrive on the listen stream under the public URI and the
/// listen's subscription id. Bob listens to the same URI on his own process and gets nothing of
/// Alice's; control: his own process's updates reach him.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_listen_follows_a_stdio_servers_resource_updates_of_its_own_process() {
    let Some(project) = node_project() else {
        return;
    };
    let gw = gateway(&project, "everything").await;
    let listed = gw
        .modern(
            "alice",
            "vh",
            "resources/list",
            json!({"_meta": modern_meta()}),
        )
        .await;
    let uri = listed.json()["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("a resource: {}", listed.text()))
        .to_owned();
    let wanted = json!({"resourceSubscriptions": [uri]});
    let mut alices = modern_listen(&gw, "alice", wanted.clone()).await;
    let ack = alices
        .next_message_where(WAIT, |m| {
            m["method"] == "notifications/subscriptions/acknowledged"
        })
        .await;
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([uri]),
        "{ack}"
    );
    let mut bobs = modern_listen(&gw, "bob", wanted).await;
    bobs.next_message_where(WAIT, |m| {
        m["method"] == "notifications/subscriptions/acknowledged"
    })
    .await;

    let toggle = json!({"name": "ev-toggle-subscriber-updates", "arguments": {},
                        "_meta": modern_meta()});
    let toggled = gw.modern("alice", "vh", "tools/call", toggle.clone()).await;
    assert!(
        toggled.text().contains("Started simulated"),
        "{}",
        toggled.text()
    );
    let update = alices.next_message_where(WAIT, is_update).await;
    assert_eq!(
        update["params"]["uri"],
        uri.as_str(),
        "public URI: {update}"
    );
    assert_eq!(
        update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "{update}"
    );
    let quiet = drain(&mut bobs, Duration::from_secs(1)).await;
    assert!(
        !quiet.iter().any(is_update),
        "bob got alice's process's update: {quiet:?}"
    );

    // Control: bob's own process, toggled by him, sends him his.
    let toggled = gw.modern("bob", "vh", "tools/call", toggle).await;
    assert!(
        toggled.text().contains("Started simulated"),
        "{}",
        toggled.text()
    );
    let update = bobs.next_message_where(WAIT, is_update).await;
    assert_eq!(update["params"]["uri"], uri.as_str(), "{update}");
}

/// A Python SDK stdio server whose own `sampling/createMessage` asks for progress
/// (`_meta.progressToken`): the 2025 client sees the gateway id as the token, and the progress it
/// reports under it reaches the process under the process's own token (the tool says which
/// progress values its callback got), before the answer completes the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_progress_on_a_stdio_servers_request_reaches_the_process() {
    // `python` reports the skip (or fails under CI=true) itself.
    let Some(python) = mcp_test_support::peers::python("mcp1") else {
        return;
    };
    let mut server = StdioServer::new(python.to_str().expect("utf-8 path"));
    server.args = vec![
        root()
            .join("tests/interop/py_stdio_server.py")
            .to_str()
            .expect("utf-8 path")
            .to_owned(),
    ];
    let router = McpRouter::builder()
        .fanout_deadline(WAIT)
        .stdio_servers(BTreeMap::from([("py".to_owned(), server)]))
        .build();
    let gw = Gateway::start_with(
        &[(
            "alice",
            vhost_config(json!({"backends": {"py": {"stdio": "py", "timeout_ms": 30000}}})),
        )],
        router,
    )
    .await;
    let session = session(&gw, "alice", json!({"sampling": {}})).await;
    let mut stream = open_call(
        gw.addr,
        "alice",
        &session,
        5,
        json!({"name": "py-sample_with_progress", "arguments": {}}),
    )
    .await;
    let request = stream
        .next_message_where(WAIT, |m| m["method"] == "sampling/createMessage")
        .await;
    let token = request["params"]["_meta"]["progressToken"].clone();
    assert_eq!(
        token, request["id"],
        "the gateway id stands for the process's token: {request}"
    );
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": token, "progress": 0.5, "total": 1.0}});
    let delivered = post(&gw, "alice", &session, &progress).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": sampled()});
    let delivered = post(&gw, "alice", &session, &answer).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
    let response = stream
        .next_message_where(WAIT, |m| m["id"] == 5 && m.get("method").is_none())
        .await;
    let text = texts(&response);
    assert!(
        text.contains("progress [0.5]"),
        "the process saw the client's progress: {text}"
    );
}
