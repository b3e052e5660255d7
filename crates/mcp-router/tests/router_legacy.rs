//! 2025 clients on the same endpoint: sessions bound to the principal and virtual host, lists and
//! routed calls through modern and legacy backends, the gateway's own ping/setLevel, DELETE, and
//! rmcp's legacy client end to end.

use mcp_test_support::rpc_request as request;
use std::time::Duration;

use futures_util::future::join_all;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::Reply;
use mcp_test_support::stack::{Gateway, token, user_config};
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};

const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("content-type", "application/json");

/// Whether `id` is a POST stream's event id, `<node>.p<k>:<n>` (book: docs/src/several-nodes.md).
fn post_stream_id(id: &str) -> bool {
    id.split_once('.')
        .is_some_and(|(node, rest)| node.len() == 12 && rest.starts_with('p') && rest.contains(':'))
}

async fn setup() -> (TestBackend, TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config.clone()), ("bob", config)]).await;
    (alpha, beta, gw)
}

/// rmcp's 2025 client (`initialize` lifecycle) with `handler`, connected through the gateway as
/// alice.
async fn legacy_client<H: rmcp::ClientHandler>(
    gw: &Gateway,
    handler: H,
) -> rmcp::service::RunningService<rmcp::RoleClient, H> {
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/servers/vh/mcp", gw.addr))
            .auth_header(token("alice"));
    tokio::time::timeout(
        Duration::from_secs(10),
        handler.serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Initialize,
        ),
    )
    .await
    .expect("connects within 10 s")
    .expect("rmcp's 2025 client initializes through the gateway")
}

/// The first text of a tool call's result, within 10 s.
async fn call_text<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    params: CallToolRequestParams,
) -> Option<String> {
    let result = tokio::time::timeout(Duration::from_secs(10), client.call_tool(params))
        .await
        .expect("answered within 10 s")
        .expect("tools/call");
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
}

/// POSTs a JSON-RPC message in a 2025 session (no session header when `session` is `None`).
async fn post(gw: &Gateway, sub: &str, vhost: &str, session: Option<&str>, body: Value) -> Reply {
    gw.legacy_post(sub, vhost, session, body).await
}

async fn initialize(gw: &Gateway, sub: &str) -> String {
    let reply = post(gw, sub, "vh", None, request(0, "initialize", json!({
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "legacy-e2e", "version": "1"}
    })))
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let result = &reply.json()["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["serverInfo"]["name"], "mcp-gateway");
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let initialized = post(
        gw,
        sub,
        "vh",
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status, 202);
    session
}

#[tokio::test]
async fn a_legacy_session_lists_and_calls_backends_of_both_eras() {
    let (_alpha, beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;

    let list = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(1, "tools/list", json!({})),
    )
    .await;
    let names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect();
    assert!(
        names.contains(&"alpha-echo".to_owned()) && names.contains(&"beta-echo".to_owned()),
        "{names:?}"
    );

    for (tool, expected) in [("alpha-echo", "alpha: hi"), ("beta-echo", "beta: hi")] {
        let call = post(
            &gw,
            "alice",
            "vh",
            Some(&session),
            request(
                2,
                "tools/call",
                json!({"name": tool, "arguments": {"text": "hi"}}),
            ),
        )
        .await;
        assert_eq!(
            call.json()["result"]["content"][0]["text"],
            expected,
            "{}",
            call.text()
        );
    }
    // The legacy backend saw the gateway's own upstream session, never the client's id.
    assert!(
        beta.requests_for("tools/call")
            .iter()
            .all(|r| r.header("mcp-session-id") != Some(session.as_str()))
    );

    let ping = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(3, "ping", json!({})),
    )
    .await;
    assert_eq!(
        ping.json(),
        json!({"jsonrpc": "2.0", "id": 3, "result": {}})
    );
    let level = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(4, "logging/setLevel", json!({"level": "debug"})),
    )
    .await;
    assert_eq!(level.json()["result"], json!({}));
    let bad_level = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(5, "logging/setLevel", json!({"level": "loud"})),
    )
    .await;
    assert_eq!(bad_level.json()["error"]["code"], -32602);

    // Legacy clients get the original error codes for routing failures.
    let wrong = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            6,
            "tools/call",
            json!({"name": "zeta-echo", "arguments": {}}),
        ),
    )
    .await;
    assert_eq!(
        wrong.json()["error"],
        json!({"code": -32603, "message": "wrong tool name: zeta-echo"})
    );
}

#[tokio::test]
async fn sessions_are_bound_to_principal_and_virtual_host_and_end_with_delete() {
    let (_alpha, _beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;

    let missing = post(
        &gw,
        "alice",
        "vh",
        None,
        request(1, "tools/list", json!({})),
    )
    .await;
    assert_eq!(missing.status, 400);
    assert_eq!(
        missing.json()["error"]["message"],
        "Bad Request: missing Mcp-Session-Id header"
    );

    let unknown = post(
        &gw,
        "alice",
        "vh",
        Some("not-a-session"),
        request(1, "tools/list", json!({})),
    )
    .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["error"]["message"], "Session not found");

    let stolen = post(
        &gw,
        "bob",
        "vh",
        Some(&session),
        request(1, "tools/list", json!({})),
    )
    .await;
    assert_eq!(
        stolen.status, 404,
        "another principal's token must not reach the session"
    );

    let bad_version = gw
        .raw(
            "alice",
            "vh",
            "POST",
            &[
                ACCEPT,
                JSON,
                ("mcp-session-id", &session),
                ("mcp-protocol-version", "1999-01-01"),
            ],
            &request(1, "ping", json!({})).to_string(),
        )
        .await;
    assert_eq!(bad_version.status, 400);
    assert_eq!(bad_version.json()["error"]["code"], -32022);

    let get = mcp_test_support::EventStream::open(
        gw.addr,
        "GET",
        "/servers/vh/mcp",
        &[
            ("authorization", &mcp_test_support::stack::bearer("bob")),
            ("accept", "text/event-stream"),
            ("mcp-session-id", &session),
        ],
        "",
    )
    .await;
    assert_eq!(
        get.status, 404,
        "another principal cannot open the session's stream either"
    );

    let delete = gw
        .raw("alice", "vh", "DELETE", &[("mcp-session-id", &session)], "")
        .await;
    assert_eq!(delete.status, 200);
    let after = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(1, "tools/list", json!({})),
    )
    .await;
    assert_eq!(after.status, 404, "an ended session is unknown");
}

#[tokio::test]
async fn concurrent_requests_on_one_session_all_succeed() {
    let (_alpha, _beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;
    let calls = (0..40u64).map(|i| {
        let (gw, session) = (&gw, session.clone());
        async move {
            let tool = if i % 2 == 0 {
                "alpha-echo"
            } else {
                "beta-echo"
            };
            let reply = post(
                gw,
                "alice",
                "vh",
                Some(&session),
                request(
                    i,
                    "tools/call",
                    json!({"name": tool, "arguments": {"text": i.to_string()}}),
                ),
            )
            .await;
            (i, reply.json())
        }
    });
    for (i, body) in join_all(calls).await {
        assert_eq!(body["id"], i);
        let text = body["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(text.ends_with(&format!(": {i}")), "call {i}: {body}");
    }
}

#[tokio::test]
async fn a_backend_down_at_initialize_is_degraded_not_fatal() {
    let (alpha, beta, gw) = setup().await;
    beta.stop().await;
    let session = initialize(&gw, "alice").await;
    let ok = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            1,
            "tools/call",
            json!({"name": "alpha-echo", "arguments": {"text": "up"}}),
        ),
    )
    .await;
    assert_eq!(ok.json()["result"]["content"][0]["text"], "alpha: up");
    let down = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            2,
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "x"}}),
        ),
    )
    .await;
    let error = &down.json()["error"];
    assert_eq!(error["code"], -32603);
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Backend beta failed"),
        "{error}"
    );
    // Retried lazily: once the backend is back, the same session reaches it.
    beta.restart().await;
    let back = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            3,
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "back"}}),
        ),
    )
    .await;
    assert_eq!(
        back.json()["result"]["content"][0]["text"],
        "beta: back",
        "{}",
        back.text()
    );
    drop(alpha);
}

#[tokio::test]
async fn rmcp_legacy_client_works_through_the_gateway() {
    let (_alpha, _beta, gw) = setup().await;
    let client = legacy_client(&gw, ()).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "beta-get-sum"), "{tools:?}");
    let Value::Object(args) = json!({"a": 20, "b": 22}) else {
        unreachable!()
    };
    let result = client
        .call_tool(
            CallToolRequestParams::new("beta-get-sum").with_arguments(JsonObject::from_iter(args)),
        )
        .await
        .expect("tools/call");
    assert_eq!(result.structured_content, Some(json!({"sum": 42})));
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn the_last_delete_of_a_caller_ends_the_shared_upstream_session() {
    let (_alpha, beta, gw) = setup().await;
    let first = initialize(&gw, "alice").await;
    let second = initialize(&gw, "alice").await;
    let upstream_deletes = || {
        beta.requests()
            .iter()
            .filter(|r| r.method == "DELETE")
            .count()
    };
    assert_eq!(
        beta.requests_for("initialize").len(),
        1,
        "the caller's sessions share one upstream session"
    );

    let delete = gw
        .raw("alice", "vh", "DELETE", &[("mcp-session-id", &first)], "")
        .await;
    assert_eq!(delete.status, 200);
    assert_eq!(upstream_deletes(), 0, "the other session still uses it");
    let still = post(
        &gw,
        "alice",
        "vh",
        Some(&second),
        request(
            1,
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "on"}}),
        ),
    )
    .await;
    assert_eq!(still.json()["result"]["content"][0]["text"], "beta: on");

    let delete = gw
        .raw("alice", "vh", "DELETE", &[("mcp-session-id", &second)], "")
        .await;
    assert_eq!(delete.status, 200);
    // The upstream DELETE goes out once no call uses the session any more (in the background).
    assert!(
        beta.wait_until(Duration::from_secs(5), |b| b
            .requests()
            .iter()
            .any(|r| r.method == "DELETE"))
            .await,
        "the last session's DELETE ends the upstream session"
    );
    assert_eq!(upstream_deletes(), 1);
}

#[tokio::test]
async fn set_level_reaches_legacy_backends_and_is_stamped_on_modern_calls() {
    let (alpha, beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;

    // Before any setLevel a 2025 client hears a modern backend's logs, as it would a 2025 server's.
    let before = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            9,
            "tools/call",
            json!({"name": "alpha-slow", "arguments": {"steps": 2, "delay_ms": 1}}),
        ),
    )
    .await;
    let logs = before
        .sse_messages()
        .into_iter()
        .filter(|m| m["method"] == "notifications/message")
        .count();
    assert_eq!(logs, 2, "{}", before.text());
    let call = alpha
        .requests_for("tools/call")
        .pop()
        .expect("call at alpha");
    assert_eq!(
        call.json().expect("json")["params"]["_meta"]["io.modelcontextprotocol/logLevel"],
        "debug"
    );

    let level = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(1, "logging/setLevel", json!({"level": "warning"})),
    )
    .await;
    assert_eq!(level.json()["result"], json!({}));
    let upstream = beta.requests_for("logging/setLevel");
    assert_eq!(upstream.len(), 1);
    assert_eq!(
        upstream[0].json().expect("json")["params"]["level"],
        "warning"
    );

    post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            2,
            "tools/call",
            json!({"name": "alpha-echo", "arguments": {"text": "x"}}),
        ),
    )
    .await;
    let call = alpha
        .requests_for("tools/call")
        .pop()
        .expect("call at alpha");
    let meta = &call.json().expect("json")["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/logLevel"], "warning",
        "{meta}"
    );
}

/// Answers elicitations `name` -> `Ferris`, `color` -> `orange`, like a user would.
#[derive(Clone, Default)]
struct Elicitor;

impl rmcp::ClientHandler for Elicitor {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_elicitation()
                .build(),
            rmcp::model::Implementation::new("legacy-elicitor", "0.0.0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let schema = serde_json::to_value(&request).expect("serializable elicitation");
        let (key, answer) = if schema["requestedSchema"]["properties"]
            .get("name")
            .is_some()
        {
            ("name", "Ferris")
        } else {
            ("color", "orange")
        };
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
                .with_content(json!({ key: answer })),
        )
    }
}

#[tokio::test]
async fn a_legacy_backends_elicitation_requests_reach_a_legacy_client_and_the_answers_route_back() {
    let (_alpha, beta, gw) = setup().await;
    let client = legacy_client(&gw, Elicitor).await;
    let text = call_text(&client, CallToolRequestParams::new("beta-ask")).await;
    assert_eq!(text.as_deref(), Some("beta: Ferris likes orange"));
    // The backend got the answers under its own request ids, in its own session.
    let answers: Vec<Value> = beta
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .filter(|m| m.get("result").is_some() && m.get("method").is_none())
        .collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|a| !a["id"].as_str().is_some_and(|id| id.starts_with("gw-")))
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn notifications_cancelled_stops_the_named_call_on_either_backend_era() {
    let (alpha, beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;
    for (backend, tool) in [(&beta, "beta-slow"), (&alpha, "alpha-slow")] {
        let id = if backend.name() == "beta" { 41 } else { 42 };
        let call = post(
            &gw,
            "alice",
            "vh",
            Some(&session),
            request(
                id,
                "tools/call",
                json!({"name": tool, "arguments": {"steps": 100, "delay_ms": 300}}),
            ),
        );
        let cancel = async {
            assert!(
                backend
                    .wait_for_calls("slow", Duration::from_secs(5), |c| c.started >= 1)
                    .await
            );
            let notification = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "user"}});
            let reply = post(&gw, "alice", "vh", Some(&session), notification).await;
            assert_eq!(reply.status, 202);
        };
        let started = std::time::Instant::now();
        let (reply, ()) = tokio::join!(call, cancel);
        // 30 s of work against a 15 s bound: a margin a loaded machine meets.
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the call ended long before its 30 s of work"
        );
        assert!(reply.status.is_success(), "{}", reply.status);
        assert!(
            backend
                .wait_for_calls("slow", Duration::from_secs(5), |c| c.cancelled >= 1)
                .await,
            "{} was not cancelled: {:?}",
            backend.name(),
            backend.calls("slow")
        );
    }
}

#[tokio::test]
async fn the_get_stream_merges_backend_messages_with_event_ids_and_resumes() {
    let (_alpha, _beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;
    let auth = mcp_test_support::stack::bearer("alice");
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
    ];
    let mut stream =
        mcp_test_support::EventStream::open(gw.addr, "GET", "/servers/vh/mcp", &headers, "").await;
    assert_eq!(stream.status, 200);
    let priming = stream
        .next_event(Duration::from_secs(5))
        .await
        .expect("priming event");
    assert_eq!(
        priming.data, "",
        "2025-11-25 streams start with a priming event"
    );
    let primed_id = priming.id.expect("the priming event has an id");

    // beta (legacy) logs on its session's GET stream while `slow` runs.
    let call = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            1,
            "tools/call",
            json!({"name": "beta-slow", "arguments": {"steps": 2, "delay_ms": 50}}),
        ),
    )
    .await;
    assert_eq!(call.status, 200);
    let mut logs = Vec::new();
    while logs.len() < 2 {
        let event = stream
            .next_event(Duration::from_secs(5))
            .await
            .expect("log events on the GET stream");
        let message: Value = serde_json::from_str(&event.data).expect("JSON message");
        if message["method"] == "notifications/message" {
            logs.push((event.id.expect("event id"), message));
        }
    }
    let number = |id: &str| -> u64 {
        let (stream, n) = id.split_once(':').expect("<node>.<stream>:<n> ids");
        let (node, stream) = stream.split_once('.').expect("<node>.<stream>:<n> ids");
        assert_eq!(node.len(), 12, "the node's id: {id}");
        assert_eq!(stream, "g", "GET stream ids");
        n.parse().expect("numeric")
    };
    assert!(number(&logs[0].0) > number(&primed_id));
    drop(stream);

    // Reconnecting after the first log replays the second.
    let resume_headers = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("last-event-id", logs[0].0.as_str()),
    ];
    let mut resumed =
        mcp_test_support::EventStream::open(gw.addr, "GET", "/servers/vh/mcp", &resume_headers, "")
            .await;
    let replayed = resumed
        .next_event(Duration::from_secs(5))
        .await
        .expect("replayed event");
    assert_eq!(replayed.id.as_deref(), Some(logs[1].0.as_str()));
    assert_eq!(
        serde_json::from_str::<Value>(&replayed.data).expect("JSON"),
        logs[1].1
    );
}

#[tokio::test]
async fn a_modern_backends_input_required_becomes_real_requests_for_a_legacy_client() {
    let (alpha, _beta, gw) = setup().await;
    let client = legacy_client(&gw, Elicitor).await;
    let text = call_text(&client, CallToolRequestParams::new("alpha-ask")).await;
    assert_eq!(text.as_deref(), Some("alpha: Ferris likes orange"));
    // The modern backend saw three rounds: the call, then two retries carrying inputResponses.
    let calls = alpha.requests_for("tools/call");
    assert_eq!(calls.len(), 3);
    assert!(calls[1].json().expect("json")["params"]["inputResponses"]["name"].is_object());
    assert!(calls[2].json().expect("json")["params"]["inputResponses"]["color"].is_object());
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_ambiguous_call_cleans_up_the_sessions_backends_which_come_back_lazily() {
    let a = TestBackend::start(BackendSpec::legacy("a")).await;
    let ab = TestBackend::start(BackendSpec::legacy("a-b")).await;
    // `a`'s prompt `greet` is exposed as `a-b-greet`, which is also `a-b`'s `greet`.
    let config = mcp_test_support::stack::vhost_config(json!({"backends": {
        "a": {"url": a.url(), "timeout_ms": 5000, "aliases": {"a-b-greet": "greet"}},
        "a-b": {"url": ab.url(), "timeout_ms": 5000}}}));
    let gw = Gateway::start(&[("alice", config)]).await;
    let session = initialize(&gw, "alice").await;
    let deletes = |b: &TestBackend| b.requests().iter().filter(|r| r.method == "DELETE").count();

    let reply = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            1,
            "prompts/get",
            json!({"name": "a-b-greet", "arguments": {"who": "x"}}),
        ),
    )
    .await;
    assert_eq!(
        reply.json()["error"],
        json!({"code": -32600, "message": "ambiguous name: a-b-greet (several backends expose it)"})
    );
    // Cleaned up: both upstream sessions of this (only) downstream session were ended (the
    // upstream DELETEs go out in the background).
    for backend in [&a, &ab] {
        assert!(
            backend
                .wait_until(Duration::from_secs(5), |b| deletes(b) == 1)
                .await,
            "{} got its DELETE",
            backend.name()
        );
    }

    // The next call re-establishes the backends.
    let call = post(
        &gw,
        "alice",
        "vh",
        Some(&session),
        request(
            2,
            "tools/call",
            json!({"name": "a-b-echo", "arguments": {"text": "again"}}),
        ),
    )
    .await;
    assert_eq!(
        call.json()["result"]["content"][0]["text"],
        "a-b: again",
        "{}",
        call.text()
    );
    assert_eq!(
        ab.requests_for("initialize").len(),
        2,
        "a fresh upstream session"
    );
}

#[tokio::test]
async fn a_legacy_client_gets_progress_with_its_own_token_from_either_backend_era() {
    let (_alpha, _beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;
    for tool in ["alpha-slow", "beta-slow"] {
        let params = json!({"name": tool, "arguments": {"steps": 3, "delay_ms": 10}, "_meta": {"progressToken": 77}});
        let reply = post(
            &gw,
            "alice",
            "vh",
            Some(&session),
            request(9, "tools/call", params),
        )
        .await;
        assert_eq!(
            reply.header("content-type"),
            Some("text/event-stream"),
            "{tool}: {}",
            reply.text()
        );
        let messages = reply.sse_messages();
        let progress: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3, "{tool}: {messages:?}");
        assert!(
            progress.iter().all(|p| p["params"]["progressToken"] == 77),
            "{tool}: {progress:?}"
        );
        let last = messages.last().expect("final");
        assert_eq!(last["id"], 9);
        assert!(
            last["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.ends_with(": done")),
            "{last}"
        );
    }
}

/// Answers sampling requests with `model says: <prompt>`, like a host with an LLM would.
#[derive(Clone, Default)]
struct Sampler;

// Sampling is deprecated by SEP-2577 but part of the 2025 revisions under test.
#[allow(deprecated)]
impl rmcp::ClientHandler for Sampler {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_sampling()
                .build(),
            rmcp::model::Implementation::new("legacy-sampler", "0.0.0"),
        )
    }

    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let prompt = params
            .messages
            .first()
            .and_then(|m| m.content.first())
            .and_then(|c| c.as_text())
            .map(|t| t.text.clone())
            .unwrap_or_default();
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text(format!("model says: {prompt}")),
            "test-model".to_owned(),
        ))
    }
}

#[tokio::test]
async fn a_legacy_backends_sampling_request_reaches_the_client_and_the_answer_routes_back() {
    let beta = TestBackend::start(BackendSpec::legacy("beta").sampling_tool(true)).await;
    let gamma = TestBackend::start(BackendSpec::legacy("gamma").sampling_tool(true)).await;
    let config = user_config(&[("beta", beta.url()), ("gamma", gamma.url())]);
    let gw = Gateway::start(&[("alice", config)]).await;
    let client = legacy_client(&gw, Sampler).await;
    let Value::Object(args) = json!({"prompt": "hi from gamma"}) else {
        unreachable!()
    };
    let text = call_text(
        &client,
        CallToolRequestParams::new("gamma-sample").with_arguments(JsonObject::from_iter(args)),
    )
    .await;
    assert_eq!(
        text.as_deref(),
        Some("gamma: sampled model says: hi from gamma")
    );
    // The answer reached the backend that asked, and only that one.
    let answered = |b: &TestBackend| {
        b.requests()
            .iter()
            .filter_map(|r| r.json())
            .filter(|m| m.get("result").is_some() && m.get("method").is_none())
            .count()
    };
    assert_eq!((answered(&gamma), answered(&beta)), (1, 0));
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_modern_backends_sampling_round_becomes_a_real_request_to_a_2025_client() {
    let delta = TestBackend::start(BackendSpec::modern("delta").sampling_tool(true)).await;
    let gw = Gateway::start(&[("alice", user_config(&[("delta", delta.url())]))]).await;
    let client = legacy_client(&gw, Sampler).await;
    let Value::Object(args) = json!({"prompt": "hi from delta"}) else {
        unreachable!()
    };
    let text = call_text(
        &client,
        CallToolRequestParams::new("delta-sample").with_arguments(JsonObject::from_iter(args)),
    )
    .await;
    assert_eq!(
        text.as_deref(),
        Some("delta: sampled model says: hi from delta")
    );
    // Two stateless rounds upstream: the input_required one, then the retry with the answer.
    let calls: Vec<Value> = delta
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[1]["params"]["inputResponses"]["sample"]["model"],
        "test-model"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_broken_post_stream_is_resumed_with_last_event_id_and_the_call_still_finishes() {
    let (_alpha, beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;
    let auth = mcp_test_support::stack::bearer("alice");
    let body = request(5, "tools/call", json!({"name": "beta-slow", "arguments": {"steps": 4, "delay_ms": 150}, "_meta": {"progressToken": "p"}})).to_string();
    let headers = [
        ("authorization", auth.as_str()),
        ACCEPT,
        JSON,
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let mut post =
        mcp_test_support::EventStream::open(gw.addr, "POST", "/servers/vh/mcp", &headers, &body)
            .await;
    let priming = post
        .next_event(Duration::from_secs(5))
        .await
        .expect("priming event");
    assert_eq!(
        priming.data, "",
        "2025-11-25: the stream starts with a priming event"
    );
    let first = post
        .next_event(Duration::from_secs(5))
        .await
        .expect("first progress event");
    let first_id = first.id.clone().expect("POST stream events carry ids");
    assert!(post_stream_id(&first_id), "{first_id}");
    drop(post); // the connection breaks mid-call

    // A 2025 disconnect is not a cancellation: the call goes on and the rest is kept.
    assert!(
        beta.wait_for_calls("slow", Duration::from_secs(5), |c| c.finished >= 1)
            .await
    );
    let resume = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("last-event-id", first_id.as_str()),
    ];
    let mut resumed =
        mcp_test_support::EventStream::open(gw.addr, "GET", "/servers/vh/mcp", &resume, "").await;
    let mut replayed = Vec::new();
    while let Some(event) = resumed.next_event(Duration::from_secs(2)).await {
        let message: Value = serde_json::from_str(&event.data).expect("JSON");
        let done = message["id"] == 5;
        replayed.push((event.id.expect("id"), message));
        if done {
            break;
        }
    }
    let (_, last) = replayed.last().expect("replayed events");
    assert_eq!(
        last["result"]["content"][0]["text"], "beta: done",
        "{replayed:?}"
    );
    let progress = replayed
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .count();
    assert_eq!(
        progress, 3,
        "the three progress events after the first: {replayed:?}"
    );
    assert!(
        replayed
            .iter()
            .all(|(id, _)| id.split(':').next() == first_id.split(':').next()),
        "only that stream is replayed"
    );
}

#[tokio::test]
async fn a_backend_restarted_mid_session_is_reinitialised_transparently_for_a_legacy_client() {
    let (_alpha, beta, gw) = setup().await;
    let session = initialize(&gw, "alice").await;
    let call = |id: u64| {
        post(
            &gw,
            "alice",
            "vh",
            Some(&session),
            request(
                id,
                "tools/call",
                json!({"name": "beta-echo", "arguments": {"text": "x"}}),
            ),
        )
    };
    assert_eq!(
        call(1).await.json()["result"]["content"][0]["text"],
        "beta: x"
    );
    beta.restart().await; // the backend forgets every session
    let after = call(2).await;
    assert_eq!(
        after.json()["result"]["content"][0]["text"],
        "beta: x",
        "{}",
        after.text()
    );
    assert_eq!(
        beta.requests_for("initialize").len(),
        2,
        "one transparent re-initialisation"
    );
}

/// A 2025 session's POST stream: `(session, status, events)` of a `beta-slow` call with a
/// progress token, read to its end, in a new session of alice that negotiated `version`.
async fn slow_call_events(
    gw: &Gateway,
    version: &str,
) -> (String, http::StatusCode, Vec<mcp_core::sse::SseEvent>) {
    let reply = post(gw, "alice", "vh", None, request(0, "initialize", json!({
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "priming", "version": "1"}
    })))
    .await;
    assert_eq!(reply.json()["result"]["protocolVersion"], version);
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let auth = mcp_test_support::stack::bearer("alice");
    let body = request(7, "tools/call", json!({"name": "beta-slow", "arguments": {"steps": 2, "delay_ms": 50}, "_meta": {"progressToken": "p"}})).to_string();
    let headers = [
        ("authorization", auth.as_str()),
        ACCEPT,
        JSON,
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", version),
    ];
    let mut stream =
        mcp_test_support::EventStream::open(gw.addr, "POST", "/servers/vh/mcp", &headers, &body)
            .await;
    let mut events = Vec::new();
    while let Some(event) = stream.next_event(Duration::from_secs(5)).await {
        let last = serde_json::from_str::<Value>(&event.data).is_ok_and(|m| m["id"] == 7);
        events.push(event);
        if last {
            break;
        }
    }
    (session, stream.status, events)
}

#[tokio::test]
async fn a_2025_11_25_post_stream_starts_with_a_priming_event_and_resumes_from_it() {
    let (_alpha, _beta, gw) = setup().await;
    let (session, status, events) = slow_call_events(&gw, "2025-11-25").await;
    assert_eq!(status, 200);
    let priming = &events[0];
    assert_eq!(
        priming.data, "",
        "the first event carries no message: {events:?}"
    );
    let primed = priming.id.clone().expect("the priming event has an id");
    assert!(post_stream_id(&primed), "a POST stream id: {primed}");
    let messages: Vec<Value> = events[1..]
        .iter()
        .map(|e| serde_json::from_str(&e.data).expect("JSON message"))
        .collect();
    assert_eq!(
        messages
            .last()
            .map(|m| m["result"]["content"][0]["text"].clone()),
        Some(json!("beta: done")),
        "{messages:?}"
    );
    assert!(
        events[1..].iter().all(|e| e
            .id
            .as_deref()
            .is_some_and(|id| id.split(':').next() == primed.split(':').next())),
        "every event of the stream has an id of that stream: {events:?}"
    );

    // Resuming from the priming event replays the whole call: nothing was sent before it.
    let auth = mcp_test_support::stack::bearer("alice");
    let resume = [
        ("authorization", auth.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("last-event-id", primed.as_str()),
    ];
    let mut resumed =
        mcp_test_support::EventStream::open(gw.addr, "GET", "/servers/vh/mcp", &resume, "").await;
    assert_eq!(resumed.status, 200);
    let mut replayed = Vec::new();
    while replayed.len() < messages.len() {
        let event = resumed
            .next_event(Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("replay ended after {replayed:?}"));
        replayed.push(serde_json::from_str::<Value>(&event.data).expect("JSON message"));
    }
    assert_eq!(replayed, messages);
}

#[tokio::test]
async fn sessions_before_2025_11_25_get_no_priming_event() {
    let (_alpha, _beta, gw) = setup().await;
    let (_session, status, events) = slow_call_events(&gw, "2025-06-18").await;
    assert_eq!(status, 200);
    assert!(!events.is_empty());
    for event in &events {
        let message: Value = serde_json::from_str(&event.data)
            .unwrap_or_else(|_| panic!("every event is a message (no priming): {events:?}"));
        assert!(message.is_object());
    }
}

/// A 2025-11-25 session of `sub` whose client declared sampling.
async fn sampling_session(gw: &Gateway, sub: &str) -> String {
    let reply = post(gw, sub, "vh", None, request(0, "initialize", json!({
        "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "progress", "version": "1"}
    })))
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        post(gw, sub, "vh", Some(&session), initialized)
            .await
            .status,
        202
    );
    session
}

/// The client notifications `backend` received for `method`.
fn received(backend: &TestBackend, method: &str) -> Vec<Value> {
    backend
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .filter(|m| m["method"] == method)
        .collect()
}

#[tokio::test]
async fn client_progress_and_cancellation_of_a_relayed_backend_request_reach_that_backend_under_its_own_ids()
 {
    let beta = TestBackend::start(BackendSpec::legacy("beta").sampling_tool(true)).await;
    let gamma = TestBackend::start(BackendSpec::legacy("gamma").sampling_tool(true)).await;
    let config = user_config(&[("beta", beta.url()), ("gamma", gamma.url())]);
    let gw = Gateway::start(&[("alice", config.clone()), ("bob", config)]).await;
    let session = sampling_session(&gw, "alice").await;
    let auth = mcp_test_support::stack::bearer("alice");
    let headers = [
        ("authorization", auth.as_str()),
        ACCEPT,
        JSON,
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let body = request(
        3,
        "tools/call",
        json!({"name": "gamma-sample", "arguments": {"prompt": "hi"}}),
    )
    .to_string();
    let mut call =
        mcp_test_support::EventStream::open(gw.addr, "POST", "/servers/vh/mcp", &headers, &body)
            .await;
    let sampling = loop {
        let event = call
            .next_event(Duration::from_secs(5))
            .await
            .expect("the backend's sampling request on the call's stream");
        let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
            continue;
        };
        if message["method"] == "sampling/createMessage" {
            break message;
        }
    };
    let relayed_id = sampling["id"].as_str().expect("a gateway id").to_owned();
    assert_eq!(
        sampling["params"]["_meta"]["progressToken"], relayed_id,
        "the client reports progress under the gateway's token, never the backend's: {sampling}"
    );
    let progress = |token: &str| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": token, "progress": 1, "total": 2, "message": "thinking"}})
    };

    // Another session (bob's, or another of alice's) cannot report progress for it.
    let bobs = sampling_session(&gw, "bob").await;
    let other = sampling_session(&gw, "alice").await;
    for (sub, s) in [("bob", &bobs), ("alice", &other)] {
        let reply = post(&gw, sub, "vh", Some(s), progress(&relayed_id)).await;
        assert_eq!(reply.status, 202);
    }
    // Passing a notification on completes before its 202: had one gone through, it would be here.
    assert!(received(&gamma, "notifications/progress").is_empty());

    let reply = post(&gw, "alice", "vh", Some(&session), progress(&relayed_id)).await;
    assert_eq!(reply.status, 202);
    let at_gamma = received(&gamma, "notifications/progress");
    assert_eq!(at_gamma.len(), 1, "{at_gamma:?}");
    // rmcp numbers the progress tokens of its requests itself: the backend's own is a number,
    // the gateway's a sealed string.
    let mut params = at_gamma[0]["params"].clone();
    let token = params["progressToken"].take();
    assert!(token.is_number(), "the backend's own token: {token}");
    assert_eq!(
        params,
        json!({"progressToken": null, "progress": 1, "total": 2, "message": "thinking"})
    );
    assert!(
        received(&beta, "notifications/progress").is_empty(),
        "only the backend that asked"
    );

    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": relayed_id, "reason": "user gave up"}});
    let reply = post(&gw, "alice", "vh", Some(&session), cancel).await;
    assert_eq!(reply.status, 202);
    let cancelled = received(&gamma, "notifications/cancelled");
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    let upstream_id = &cancelled[0]["params"]["requestId"];
    assert!(
        upstream_id.is_number() || upstream_id.as_str().is_some_and(|id| id != relayed_id),
        "the backend's own request id: {upstream_id}"
    );
    assert_eq!(cancelled[0]["params"]["reason"], "user gave up");
    assert!(received(&beta, "notifications/cancelled").is_empty());
}
