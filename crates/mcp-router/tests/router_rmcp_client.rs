//! rmcp's own 2026-07-28 client (`server/discover`, then stateless requests) through the whole
//! gateway stack: bearer token on every request, merged and prefixed lists, routed calls to a
//! modern and a legacy backend, progress, MRTR driven by the client's elicitation handler.

// Log notifications are deprecated by SEP-2577; the handler still records them.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::stack::{Gateway, token, user_config};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorCode, Implementation, JsonObject,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use serde_json::{Value, json};

/// Records progress; answers elicitations `name` -> `Ferris`, `color` -> `orange`.
#[derive(Clone, Default)]
struct Handler {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    elicitations: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("rmcp-through-gateway", "0.0.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().expect("progress lock").push(params);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let schema = serde_json::to_value(&request).expect("serializable elicitation");
        let key = if schema["requestedSchema"]["properties"]
            .get("name")
            .is_some()
        {
            "name"
        } else {
            "color"
        };
        let answer = if key == "name" { "Ferris" } else { "orange" };
        self.elicitations
            .lock()
            .expect("elicitations lock")
            .push(key.to_owned());
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({ key: answer })))
    }
}

type Client = RunningService<RoleClient, Handler>;

async fn setup() -> (TestBackend, TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gw = Gateway::start(&[(
        "alice",
        user_config(&[("alpha", alpha.url()), ("beta", beta.url())]),
    )])
    .await;
    (alpha, beta, gw)
}

async fn connect(gw: &Gateway, handler: Handler) -> Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/servers/vh/mcp", gw.addr))
            .auth_header(token("alice"));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let start = handler.serve_with_lifecycle(
        StreamableHttpClientTransport::from_config(config),
        lifecycle,
    );
    tokio::time::timeout(Duration::from_secs(10), start)
        .await
        .expect("rmcp client starts within 10 s")
        .expect("rmcp's modern client connects through the gateway")
}

fn call(name: &'static str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name).with_arguments(JsonObject::from_iter(args))
}

fn first_text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_else(|| panic!("no text content in {result:?}"))
}

async fn bounded<F: std::future::IntoFuture>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 10 s"))
}

#[tokio::test]
async fn rmcp_modern_client_lists_and_calls_through_the_gateway() {
    let (alpha, beta, gw) = setup().await;
    let client = connect(&gw, Handler::default()).await;

    let info = client.peer_info().expect("discover result");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("mcp-gateway")
    );

    let tools = bounded("tools/list", client.list_all_tools())
        .await
        .expect("tools/list");
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    let base = ["echo", "add", "get-sum", "fail", "slow", "ask", "headers"];
    let expected: Vec<String> = ["alpha", "beta"]
        .iter()
        .flat_map(|b| base.iter().map(move |t| format!("{b}-{t}")))
        .collect();
    assert_eq!(names, expected);

    let echo = bounded(
        "alpha-echo",
        client.call_tool(call("alpha-echo", json!({"text": "hi"}))),
    )
    .await
    .expect("alpha-echo");
    assert_eq!(first_text(&echo), "alpha: hi");
    let sum = bounded(
        "beta-get-sum",
        client.call_tool(call("beta-get-sum", json!({"a": 2, "b": 3}))),
    )
    .await
    .expect("beta-get-sum");
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})));

    let unknown = bounded(
        "zeta-echo",
        client.call_tool(call("zeta-echo", json!({"text": "x"}))),
    )
    .await
    .expect_err("unknown tool");
    match unknown {
        ServiceError::McpError(error) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(error.message, "wrong tool name: zeta-echo");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }

    let read = bounded(
        "resources/read",
        client.read_resource(ReadResourceRequestParams::new("beta-test://beta/static")),
    )
    .await
    .expect("resources/read");
    match &read.contents[..] {
        [ResourceContents::TextResourceContents { uri, text, .. }] => {
            assert_eq!(uri, "beta-test://beta/static");
            assert_eq!(text, "static from beta");
        }
        other => panic!("unexpected contents {other:?}"),
    }

    // Every request carried the client's token to the gateway, and none of it went further.
    for backend in [&alpha, &beta] {
        assert!(
            backend
                .requests()
                .iter()
                .all(|r| !r.has_header("authorization"))
        );
    }
    let _ = client.cancel().await;
}

#[tokio::test]
async fn rmcp_modern_client_gets_progress_through_the_gateway() {
    let (_alpha, _beta, gw) = setup().await;
    let handler = Handler::default();
    let client = connect(&gw, handler.clone()).await;
    for backend in ["alpha-slow", "beta-slow"] {
        handler.progress.lock().expect("lock").clear();
        let done = bounded(
            backend,
            client.call_tool(call(backend, json!({"steps": 3, "delay_ms": 10}))),
        )
        .await
        .expect(backend);
        assert!(first_text(&done).ends_with(": done"), "{done:?}");
        let deadline = Instant::now() + Duration::from_secs(2);
        while handler.progress.lock().expect("lock").len() < 3 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let steps: Vec<f64> = handler
            .progress
            .lock()
            .expect("lock")
            .iter()
            .map(|p| p.progress)
            .collect();
        assert_eq!(steps, [1.0, 2.0, 3.0], "{backend}");
    }
    let _ = client.cancel().await;
}

#[tokio::test]
async fn rmcp_modern_client_completes_mrtr_through_the_gateway() {
    let (alpha, _beta, gw) = setup().await;
    let handler = Handler::default();
    let client = connect(&gw, handler.clone()).await;
    let result = bounded("alpha-ask", client.call_tool(call("alpha-ask", json!({}))))
        .await
        .expect("alpha-ask");
    assert_eq!(first_text(&result), "alpha: Ferris likes orange");
    assert_eq!(
        *handler.elicitations.lock().expect("lock"),
        ["name", "color"]
    );
    assert_eq!(alpha.calls("ask").finished, 3);
    let _ = client.cancel().await;
}
