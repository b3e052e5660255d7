//! Two gateway nodes behind no sticky routing (book: docs/src/several-nodes.md): a 2025 session created on node
//! A continues on node B — lists, calls, and a backend's sampling request relayed on A's stream and
//! answered through B — with a shared Redis session store, and with the stateless sealed store.

use std::sync::Arc;
use std::time::Duration;

use mcp_router::McpRouter;
use mcp_router::session::{
    KeyRing, RedisSessionStore, RedisSessionStoreConfig, SealedSessionStore, SessionStore,
};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::RedisServer;
use mcp_test_support::stack::{Gateway, bearer, user_config};
use mcp_test_support::{accept_elicitation, ask_params, legacy_headers, rpc_request};
use serde_json::{Value, json};

const SEALING: &[u8] = b"shared-sealing-secret-shared-sealing";

fn node(store: Arc<dyn SessionStore>) -> McpRouter {
    McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .sealing_secret(SEALING)
        .session_store(store)
        .build()
}

async fn two_nodes(store: Arc<dyn SessionStore>, config: Value) -> (Gateway, Gateway) {
    let a = Gateway::start_with(&[("alice", config.clone())], node(Arc::clone(&store))).await;
    let b = Gateway::start_with(&[("alice", config)], node(store)).await;
    (a, b)
}

async fn post(gw: &Gateway, session: Option<&str>, body: Value) -> mcp_test_support::Reply {
    gw.legacy_post("alice", "vh", session, body).await
}

/// Initialize on `a`; then list and call on `b`; then a sampling request relayed on `a`'s POST
/// stream is answered through `b`.
async fn session_moves_between_nodes(a: &Gateway, b: &Gateway) {
    let init = post(
        a,
        None,
        rpc_request(
            0,
            "initialize",
            json!({
                "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
                "clientInfo": {"name": "two-nodes", "version": "1"}
            }),
        ),
    )
    .await;
    assert_eq!(init.status, 200, "{}", init.text());
    let session = init
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();

    let list = post(b, Some(&session), rpc_request(1, "tools/list", json!({}))).await;
    assert_eq!(
        list.status,
        200,
        "node B serves node A's session: {}",
        list.text()
    );
    let names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    assert!(names.contains(&"beta-sample".to_owned()), "{names:?}");
    let call = post(
        b,
        Some(&session),
        rpc_request(
            2,
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "on b"}}),
        ),
    )
    .await;
    assert_eq!(call.json()["result"]["content"][0]["text"], "beta: on b");

    // The sampling request arrives on node A's POST stream; the answer goes to node B.
    let auth = bearer("alice");
    let headers = legacy_headers(Some(&auth), Some(&session));
    let body = rpc_request(
        3,
        "tools/call",
        json!({"name": "beta-sample", "arguments": {"prompt": "two nodes"}}),
    )
    .to_string();
    let mut stream =
        mcp_test_support::EventStream::open(a.addr, "POST", "/servers/vh/mcp", &headers, &body)
            .await;
    let sampling = loop {
        let event = stream
            .next_event(Duration::from_secs(5))
            .await
            .expect("the sampling request");
        if event.data.is_empty() {
            continue; // the 2025-11-25 priming event
        }
        let message: Value = serde_json::from_str(&event.data).expect("JSON");
        if message["method"] == "sampling/createMessage" {
            break message;
        }
    };
    let answer = json!({"jsonrpc": "2.0", "id": sampling["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "answered via B"}, "model": "m"}});
    let delivered = post(b, Some(&session), answer).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text());
    let done = loop {
        let event = stream
            .next_event(Duration::from_secs(5))
            .await
            .expect("the call's result");
        if event.data.is_empty() {
            continue; // the 2025-11-25 priming event
        }
        let message: Value = serde_json::from_str(&event.data).expect("JSON");
        if message["id"] == 3 {
            break message;
        }
    };
    assert_eq!(
        done["result"]["content"][0]["text"], "beta: sampled answered via B",
        "{done}"
    );

    let delete = b
        .raw("alice", "vh", "DELETE", &[("mcp-session-id", &session)], "")
        .await;
    assert_eq!(delete.status, 200);
}

#[tokio::test]
async fn a_session_continues_on_another_node_with_a_shared_redis_store() {
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start already said loudly why.
    };
    let beta = TestBackend::start(BackendSpec::legacy("beta").sampling_tool(true)).await;
    let store = RedisSessionStore::new(RedisSessionStoreConfig::new(redis.url())).expect("store");
    let (a, b) = two_nodes(Arc::new(store), user_config(&[("beta", beta.url())])).await;
    session_moves_between_nodes(&a, &b).await;
}

#[tokio::test]
async fn a_session_continues_on_another_node_with_sealed_ids() {
    let beta = TestBackend::start(BackendSpec::legacy("beta").sampling_tool(true)).await;
    let ring = KeyRing::parse("k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=").expect("key ring");
    let (a, b) = two_nodes(
        Arc::new(SealedSessionStore::new(ring)),
        user_config(&[("beta", beta.url())]),
    )
    .await;
    session_moves_between_nodes(&a, &b).await;
}

#[tokio::test]
async fn a_session_store_outage_fails_fast_and_recovers() {
    let Some(mut redis) = RedisServer::start().await else {
        return; // RedisServer::start already said loudly why.
    };
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = RedisSessionStoreConfig::new(redis.url());
    // The session lookup on a dead Redis may spend the store's own timeouts once (a pool wait, a
    // connection attempt, a recycle check, the command); 5 s on top absorb a loaded 2-core machine
    // (a release build beside the tests). A store that waited on reconnects would still miss it.
    let outage_limit = config.pool_wait_timeout
        + config.connect_timeout
        + 2 * config.response_timeout
        + Duration::from_secs(5);
    let store = RedisSessionStore::new(config).expect("store");
    let (a, b) = two_nodes(Arc::new(store), user_config(&[("beta", beta.url())])).await;
    let init = post(&a, None, rpc_request(0, "initialize", json!({
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "outage", "version": "1"}
    })))
    .await;
    let session = init
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let Some(redis) = redis.controllable() else {
        return; // External REDIS_URL: the outage part is skipped (announced by the helper).
    };
    redis.stop().await;
    let started = std::time::Instant::now();
    let down = post(&b, Some(&session), rpc_request(1, "tools/list", json!({}))).await;
    assert_eq!(down.status, 503, "{}", down.text());
    assert_eq!(down.json()["error"]["message"], "Session store unavailable");
    assert!(
        started.elapsed() < outage_limit,
        "no waiting on the dead store: {:?}",
        started.elapsed()
    );
    let init_down = post(&a, None, rpc_request(2, "initialize", json!({
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "outage", "version": "1"}
    })))
    .await;
    assert_eq!(init_down.status, 503, "{}", init_down.text());

    redis.restart().await;
    // The record was lost with the (non-persistent) Redis: the session is unknown, and a new one works.
    let gone = post(&b, Some(&session), rpc_request(3, "tools/list", json!({}))).await;
    assert_eq!(gone.status, 404, "{}", gone.text());
    let again = post(&b, None, rpc_request(4, "initialize", json!({
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "outage", "version": "1"}
    })))
    .await;
    assert_eq!(again.status, 200, "{}", again.text());
}

/// A 2026-07-28 node with the shared sealing secret and, when given, a node bus on that Redis.
fn modern_node(bus: Option<&RedisSessionStoreConfig>) -> McpRouter {
    let mut builder = McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .sealing_secret(SEALING);
    if let Some(config) = bus {
        builder = builder.node_bus(mcp_router::bus::NodeBus::redis(config).expect("bus"));
    }
    builder.build()
}

/// `beta-ask`, retried with `inputResponses` and `requestState` when given.
fn ask(answers: Option<Value>, state: Option<&Value>) -> Value {
    ask_params("beta-ask", answers, state)
}

/// The final JSON-RPC message of a reply, whether it came as JSON or as an SSE stream.
fn last_message(reply: &mcp_test_support::Reply) -> Value {
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.last_message()
}

/// The `requestState` of an `input_required` answer asking for `key`.
fn input_required(reply: &mcp_test_support::Reply, key: &str) -> Value {
    let result = last_message(reply)["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{result}");
    let schema = &result["inputRequests"]["elicitation"]["params"]["requestedSchema"];
    assert!(schema["properties"][key].is_object(), "{result}");
    result["requestState"].clone()
}

const HELD_ELSEWHERE: &str = "Invalid requestState (its input round is over: answered already, \
    expired, or held by another gateway node); call again without requestState";

#[tokio::test]
async fn a_parked_call_is_resumed_through_any_node_over_the_node_bus() {
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start already said loudly why.
    };
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = user_config(&[("beta", beta.url())]);
    let users = [("alice", config.clone()), ("bob", config)];
    let bus = RedisSessionStoreConfig::new(redis.url());
    let a = Gateway::start_with(&users, modern_node(Some(&bus))).await;
    let b = Gateway::start_with(&users, modern_node(Some(&bus))).await;

    // The call is parked on A; both retries reach B, which passes them on to A.
    let first = a.modern("alice", "vh", "tools/call", ask(None, None)).await;
    let state = input_required(&first, "name");
    let retry = ask(Some(accept_elicitation("name", "Ada")), Some(&state));
    let second = b.modern("alice", "vh", "tools/call", retry.clone()).await;
    let second_state = input_required(&second, "color");
    // Bob cannot use alice's state on either node (it is bound to her).
    let bobs = b.modern("bob", "vh", "tools/call", retry.clone()).await;
    assert_eq!(last_message(&bobs)["error"]["code"], -32602);
    let done = b
        .modern(
            "alice",
            "vh",
            "tools/call",
            ask(
                Some(accept_elicitation("color", "teal")),
                Some(&second_state),
            ),
        )
        .await;
    let message = last_message(&done);
    assert_eq!(message["id"], 1, "{message}");
    assert_eq!(
        message["result"]["content"][0]["text"], "beta: Ada likes teal",
        "{message}"
    );
    let calls = beta
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .filter(|m| m["method"] == "tools/call")
        .count();
    assert_eq!(calls, 1, "one upstream call, answered twice through B");

    // A used state is refused through B as on A: the holder no longer has the call.
    let replay = b.modern("alice", "vh", "tools/call", retry).await;
    let error = &last_message(&replay)["error"];
    assert_eq!(
        (error["code"].as_i64(), error["message"].as_str()),
        (Some(-32602), Some(HELD_ELSEWHERE)),
        "{error}"
    );
}

#[tokio::test]
async fn without_a_node_bus_a_retry_on_another_node_gets_32602() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let users = [("alice", user_config(&[("beta", beta.url())]))];
    let a = Gateway::start_with(&users, modern_node(None)).await;
    let b = Gateway::start_with(&users, modern_node(None)).await;
    let first = a.modern("alice", "vh", "tools/call", ask(None, None)).await;
    let state = input_required(&first, "name");
    let retry = ask(Some(accept_elicitation("name", "Ada")), Some(&state));
    let elsewhere = b.modern("alice", "vh", "tools/call", retry.clone()).await;
    let error = &last_message(&elsewhere)["error"];
    assert_eq!(
        (error["code"].as_i64(), error["message"].as_str()),
        (Some(-32602), Some(HELD_ELSEWHERE)),
        "{error}"
    );
    // Control: the same retry on the holder resumes the call.
    let here = a.modern("alice", "vh", "tools/call", retry).await;
    input_required(&here, "color");
}
