//! Each era driven by rmcp's own client: modern clients on Modern/Both, legacy clients on
//! Legacy/Both, refusal on the wrong era, auto mode landing where it should.

use mcp_test_backends::{BackendSpec, Era, TestBackend};
use rmcp::{
    ServiceError,
    model::{
        CallToolRequestParams, CallToolResult, ErrorCode, GetPromptRequestParams, JsonObject,
        ReadResourceRequestParams,
    },
};
use serde_json::{Value, json};

use crate::clients::{self, Client, negotiated_version};

pub(crate) fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("arguments must be an object, got {other}"),
    }
}

pub(crate) fn call(name: &'static str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name).with_arguments(arguments(args))
}

pub(crate) fn first_text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_else(|| panic!("no text content in {result:?}"))
}

fn error_code(error: ServiceError) -> ErrorCode {
    match error {
        ServiceError::McpError(error) => error.code,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// Everything a backend offers, through `client`; `backend` is the expected name prefix.
async fn exercise(client: &Client, backend: &str) {
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<String> = tools.iter().map(|tool| tool.name.to_string()).collect();
    assert_eq!(
        names,
        ["echo", "add", "get-sum", "fail", "slow", "ask", "headers"]
    );

    let echo = client
        .call_tool(call("echo", json!({ "text": "hi" })))
        .await
        .expect("echo");
    assert_eq!(first_text(&echo), format!("{backend}: hi"));

    for tool in ["add", "get-sum"] {
        let sum = client
            .call_tool(call(tool, json!({ "a": 2, "b": 3 })))
            .await
            .expect("add");
        assert_eq!(sum.structured_content, Some(json!({ "sum": 5 })), "{tool}");
        assert_eq!(first_text(&sum), format!("{backend}: 5"), "{tool}");
        assert_ne!(sum.is_error, Some(true));
    }

    let fail = client
        .call_tool(call("fail", json!({})))
        .await
        .expect("fail is a result, not a protocol error");
    assert_eq!(fail.is_error, Some(true));
    assert!(first_text(&fail).starts_with(&format!("{backend}: ")));

    let unknown = client
        .call_tool(call("nope", json!({})))
        .await
        .expect_err("unknown tool");
    assert_eq!(error_code(unknown), ErrorCode::INVALID_PARAMS);

    let resources = client.list_all_resources().await.expect("resources/list");
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, format!("test://{backend}/static"));
    let templates = client
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    assert_eq!(
        templates[0].uri_template,
        format!("test://{backend}/item/{{id}}")
    );

    for (uri, text) in [
        (
            format!("test://{backend}/static"),
            format!("static from {backend}"),
        ),
        (
            format!("test://{backend}/item/42"),
            format!("item 42 from {backend}"),
        ),
    ] {
        let read = client
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await
            .expect("resources/read");
        let read = serde_json::to_value(read).expect("serializable");
        assert_eq!(read["contents"][0]["text"], text, "{uri}");
    }

    let prompts = client.list_all_prompts().await.expect("prompts/list");
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "greet");
    let mut greet = GetPromptRequestParams::new("greet");
    greet.arguments = Some(arguments(json!({ "who": "Ann" })));
    let prompt = client.get_prompt(greet).await.expect("prompts/get");
    let prompt = serde_json::to_value(prompt).expect("serializable");
    assert_eq!(prompt["messages"][0]["role"], "user");
    assert_eq!(
        prompt["messages"][0]["content"]["text"],
        format!("Hello Ann from {backend}")
    );

    let completions = client
        .complete_prompt_simple("greet", "who", "a")
        .await
        .expect("completion/complete");
    assert_eq!(completions, ["alice"]);
    let completions = client
        .complete_prompt_simple("greet", "who", "")
        .await
        .expect("completion/complete");
    assert_eq!(completions, ["alice", "bob"]);
}

#[tokio::test]
async fn modern_client_lists_and_calls_on_modern_and_both() {
    for era in [Era::Modern, Era::Both] {
        let name = format!("m-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era)).await;
        let (client, _) = clients::modern(&backend.url()).await;
        assert_eq!(negotiated_version(&client), "2026-07-28", "{era}");
        exercise(&client, &name).await;
        assert!(
            backend.requests_for("initialize").is_empty(),
            "a modern client never initializes"
        );
        client.cancel().await.expect("cancel client");
    }
}

#[tokio::test]
async fn legacy_client_works_on_legacy_and_both() {
    for era in [Era::Legacy, Era::Both] {
        let name = format!("l-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era)).await;
        let (client, _) = clients::legacy(&backend.url())
            .await
            .expect("legacy client should initialize");
        assert_eq!(negotiated_version(&client), "2025-11-25", "{era}");
        exercise(&client, &name).await;
        let posts = backend.requests_for("tools/call");
        assert!(
            posts
                .iter()
                .all(|request| request.has_header("mcp-session-id")),
            "legacy calls ride the session"
        );
        client.cancel().await.expect("cancel client");
    }
}

#[tokio::test]
async fn legacy_client_is_refused_by_modern() {
    let backend = TestBackend::start(BackendSpec::modern("only-modern")).await;
    let error = clients::legacy(&backend.url())
        .await
        .err()
        .expect("a modern-only backend must refuse initialize");
    let message = error.to_string();
    assert!(
        message.contains("2026-07-28"),
        "refusal names the supported version: {message}"
    );
    assert_eq!(backend.requests_for("initialize").len(), 1);
    assert!(backend.requests_for("tools/list").is_empty());
}

#[tokio::test]
async fn modern_client_is_refused_by_legacy() {
    let backend = TestBackend::start(BackendSpec::legacy("only-legacy")).await;
    let handler = clients::RecordingClient::new(rmcp::model::ProtocolVersion::V_2026_07_28);
    let started = rmcp::ClientServiceExt::serve_with_lifecycle(
        handler,
        rmcp::transport::StreamableHttpClientTransport::from_uri(backend.url()),
        rmcp::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    )
    .await;
    assert!(
        started.is_err(),
        "discover-only client must not start on a legacy backend"
    );
}

#[tokio::test]
async fn auto_client_lands_on_the_backend_era() {
    for (era, expected) in [
        (Era::Modern, "2026-07-28"),
        (Era::Both, "2026-07-28"),
        (Era::Legacy, "2025-11-25"),
    ] {
        let backend = TestBackend::start(BackendSpec::new(format!("a-{era}"), era)).await;
        let (client, _) = clients::auto(&backend.url()).await;
        assert_eq!(negotiated_version(&client), expected, "{era}");
        let echo = client
            .call_tool(call("echo", json!({ "text": "x" })))
            .await
            .expect("echo");
        assert_eq!(first_text(&echo), format!("a-{era}: x"));
        let initialized = !backend.requests_for("initialize").is_empty();
        assert_eq!(
            initialized,
            era == Era::Legacy,
            "{era}: fallback only on legacy"
        );
        client.cancel().await.expect("cancel client");
    }
}

#[tokio::test]
async fn unknown_resource_code_follows_the_request_era() {
    let backend = TestBackend::start(BackendSpec::both("nf")).await;
    let missing = || ReadResourceRequestParams::new("test://nf/missing");

    let (modern, _) = clients::modern(&backend.url()).await;
    let error = modern.read_resource(missing()).await.expect_err("missing");
    assert_eq!(error_code(error), ErrorCode::INVALID_PARAMS);
    modern.cancel().await.expect("cancel");

    let (legacy, _) = clients::legacy(&backend.url()).await.expect("legacy");
    let error = legacy.read_resource(missing()).await.expect_err("missing");
    assert_eq!(error_code(error), ErrorCode::RESOURCE_NOT_FOUND);
    legacy.cancel().await.expect("cancel");
}
