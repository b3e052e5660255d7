//! Features crossing eras (book: docs/src/eras.md): a 2025 backend's mid-call request to a 2026-07-28 client
//! becomes an `input_required` round whose retry answers the same upstream call; a 2025 backend's
//! results get the fields a 2026-07-28 client requires.

use std::time::Duration;

use mcp_router::McpRouter;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::stack::{Gateway, user_config};
use mcp_test_support::{accept_elicitation, ask_params};
use serde_json::{Value, json};

/// `beta-ask`, retried with `inputResponses` and `requestState` when given.
fn ask(answers: Option<Value>, state: Option<&Value>) -> Value {
    ask_params("beta-ask", answers, state)
}

/// The `input_required` result of a reply, asserting its shape.
fn input_required(reply: &mcp_test_support::Reply) -> Value {
    assert_eq!(reply.status, 200);
    let message = reply.last_message();
    let result = message["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{message}");
    assert_eq!(
        result["inputRequests"]["elicitation"]["method"], "elicitation/create",
        "{result}"
    );
    assert!(result["requestState"].is_string(), "{result}");
    result
}

#[tokio::test]
async fn a_legacy_backends_elicitation_reaches_a_modern_client_as_input_required() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = Gateway::start(&[("alice", user_config(&[("beta", beta.url())]))]).await;
    let first = input_required(
        &gw.modern("alice", "vh", "tools/call", ask(None, None))
            .await,
    );
    // The backend's own request, verbatim: its form asks for `name`.
    let schema = &first["inputRequests"]["elicitation"]["params"]["requestedSchema"];
    assert!(schema["properties"]["name"].is_object(), "{first}");
    let state = &first["requestState"];
    let second = input_required(
        &gw.modern(
            "alice",
            "vh",
            "tools/call",
            ask(Some(accept_elicitation("name", "Ada")), Some(state)),
        )
        .await,
    );
    let schema = &second["inputRequests"]["elicitation"]["params"]["requestedSchema"];
    assert!(schema["properties"]["color"].is_object(), "{second}");
    let done = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            ask(
                Some(accept_elicitation("color", "teal")),
                Some(&second["requestState"]),
            ),
        )
        .await;
    let message = done.last_message();
    assert_eq!(message["id"], 1, "{message}");
    assert_eq!(message["result"]["resultType"], "complete", "{message}");
    assert_eq!(
        message["result"]["content"][0]["text"],
        "beta: Ada likes teal"
    );
    // One upstream call answered twice: the backend ran `ask` once.
    let calls = beta
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .filter(|m| m["method"] == "tools/call")
        .count();
    assert_eq!(calls, 1);
    // A state is good for one retry only.
    let replay = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            ask(Some(accept_elicitation("name", "Eve")), Some(state)),
        )
        .await;
    let error = &replay.last_message()["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(
        error["message"],
        "Invalid requestState (its input round is over: answered already, expired, or held by \
         another gateway node); call again without requestState"
    );
}

#[tokio::test]
async fn a_parked_call_is_only_resumed_by_its_caller_with_its_answers() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = user_config(&[("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config.clone()), ("mallory", config)]).await;
    let first = input_required(
        &gw.modern("alice", "vh", "tools/call", ask(None, None))
            .await,
    );
    let state = &first["requestState"];
    let stolen = gw
        .modern(
            "mallory",
            "vh",
            "tools/call",
            ask(Some(accept_elicitation("name", "M")), Some(state)),
        )
        .await;
    let error = &stolen.last_message()["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(
        error["message"],
        "Invalid requestState (invalid or foreign handle)"
    );
    // No answer for the pending request: the client is asked again, for the same input.
    let again = input_required(
        &gw.modern("alice", "vh", "tools/call", ask(None, Some(state)))
            .await,
    );
    assert_eq!(again["inputRequests"], first["inputRequests"]);
    // A declined elicitation is the backend's business: it ends the call its own way.
    let declined = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            ask(
                Some(json!({"elicitation": {"action": "decline"}})),
                Some(&again["requestState"]),
            ),
        )
        .await;
    let message = declined.last_message();
    assert_eq!(message["result"]["isError"], true, "{message}");
    assert_eq!(
        message["result"]["content"][0]["text"],
        "beta: ask was declined"
    );
}

#[tokio::test]
async fn an_abandoned_parked_call_is_cancelled_upstream() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let router = McpRouter::builder()
        .request_state_ttl(Duration::from_secs(1))
        .build();
    let gw = Gateway::start_with(&[("alice", user_config(&[("beta", beta.url())]))], router).await;
    let first = input_required(
        &gw.modern("alice", "vh", "tools/call", ask(None, None))
            .await,
    );
    let cancelled = || {
        beta.requests()
            .iter()
            .filter_map(|r| r.json())
            .any(|m| m["method"] == "notifications/cancelled")
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cancelled() {
        assert!(
            std::time::Instant::now() < deadline,
            "the backend was never told"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let late = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            ask(
                Some(accept_elicitation("name", "Ada")),
                Some(&first["requestState"]),
            ),
        )
        .await;
    let error = &late.last_message()["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Invalid requestState (")),
        "{error}"
    );
}

#[tokio::test]
async fn a_client_without_the_capability_is_not_asked() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = Gateway::start(&[("alice", user_config(&[("beta", beta.url())]))]).await;
    let mut params = ask(None, None);
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"},
    });
    let reply = gw.modern("alice", "vh", "tools/call", params).await;
    let message = reply.last_message();
    // The backend's session with this caller does not declare elicitation either, so the backend
    // answers on its own; nothing is parked or relayed.
    assert_eq!(message["result"]["resultType"], "complete", "{message}");
    assert_eq!(
        message["result"]["content"][0]["text"],
        "beta: ask needs a client that declares elicitation"
    );
}

#[tokio::test]
async fn a_legacy_backends_results_get_the_fields_a_modern_client_requires() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = Gateway::start(&[("alice", user_config(&[("beta", beta.url())]))]).await;
    let call = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "x"}}),
        )
        .await;
    let result = &call.json()["result"];
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(result["content"][0]["text"], "beta: x");
    let read = gw
        .modern(
            "alice",
            "vh",
            "resources/read",
            json!({"uri": "beta-test://beta/static"}),
        )
        .await;
    let result = &read.json()["result"];
    assert_eq!(
        (
            result["resultType"].clone(),
            result["ttlMs"].clone(),
            result["cacheScope"].clone()
        ),
        (json!("complete"), json!(0), json!("private")),
        "{result}"
    );
    assert_eq!(result["contents"][0]["uri"], "beta-test://beta/static");
}

#[tokio::test]
async fn one_caller_cannot_take_every_parking_place() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = user_config(&[("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config.clone()), ("bob", config)]).await;
    // Every call stays parked (nobody answers): alice's share fills up.
    for _ in 0..100 {
        input_required(
            &gw.modern("alice", "vh", "tools/call", ask(None, None))
                .await,
        );
    }
    let over = gw
        .modern("alice", "vh", "tools/call", ask(None, None))
        .await;
    let message = over.last_message();
    // The backend's request was declined instead, and its tool says so in its own error.
    assert_eq!(message["error"]["code"], -32603, "{message}");
    assert!(
        message["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(
                "server-to-client requests are not relayed to 2026-07-28 clients by the gateway"
            )),
        "{message}"
    );
    // Another caller still has room.
    input_required(&gw.modern("bob", "vh", "tools/call", ask(None, None)).await);
}

/// What `backend` received for `tools/call`: (session id present, `MCP-Protocol-Version`).
fn tool_calls(backend: &TestBackend) -> Vec<(bool, Option<String>)> {
    backend
        .requests()
        .iter()
        .filter(|r| r.jsonrpc_method().as_deref() == Some("tools/call"))
        .map(|r| {
            (
                r.has_header("mcp-session-id"),
                r.header("mcp-protocol-version").map(str::to_owned),
            )
        })
        .collect()
}

fn initializes(backend: &TestBackend) -> usize {
    backend
        .requests()
        .iter()
        .filter(|r| r.jsonrpc_method().as_deref() == Some("initialize"))
        .count()
}

#[tokio::test]
async fn a_dual_era_backend_is_spoken_to_in_each_callers_era() {
    let both = TestBackend::start(BackendSpec::both("both")).await;
    let gw = Gateway::start(&[("alice", user_config(&[("both", both.url())]))]).await;
    let echo = json!({"name": "both-echo", "arguments": {"text": "hi"}});

    let modern = gw.modern("alice", "vh", "tools/call", echo.clone()).await;
    assert_eq!(
        modern.last_message()["result"]["content"][0]["text"],
        "both: hi"
    );
    assert_eq!(
        initializes(&both),
        0,
        "a 2026-07-28 caller opened a session"
    );
    assert_eq!(tool_calls(&both), [(false, Some("2026-07-28".to_owned()))]);

    let session = gw.legacy_session("alice", "vh").await;
    let legacy = gw.legacy("alice", "vh", &session, "tools/call", echo).await;
    assert_eq!(
        legacy["result"]["content"][0]["text"], "both: hi",
        "{legacy}"
    );
    // The 2025 session got a 2025 session upstream: one initialize, the call inside it.
    assert_eq!(initializes(&both), 1);
    assert_eq!(
        tool_calls(&both)[1],
        (true, Some("2025-11-25".to_owned())),
        "{:?}",
        tool_calls(&both)
    );
}

#[tokio::test]
async fn a_modern_only_backend_refusing_initialize_is_bridged_and_not_asked_again() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let gw = Gateway::start(&[("alice", user_config(&[("alpha", alpha.url())]))]).await;
    let session = gw.legacy_session("alice", "vh").await;
    for text in ["one", "two"] {
        let echo = json!({"name": "alpha-echo", "arguments": {"text": text}});
        let reply = gw.legacy("alice", "vh", &session, "tools/call", echo).await;
        assert_eq!(
            reply["result"]["content"][0]["text"],
            format!("alpha: {text}"),
            "{reply}"
        );
    }
    // One refused initialize (the session's own) recorded the backend as 2026-07-28 only; both
    // calls were sent statelessly.
    assert_eq!(initializes(&alpha), 1);
    assert_eq!(
        tool_calls(&alpha),
        [
            (false, Some("2026-07-28".to_owned())),
            (false, Some("2026-07-28".to_owned()))
        ]
    );
}
