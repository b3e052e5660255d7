//! `mcp-test-peer`: rmcp as a separate process, for the interop matrix of
//! `cargo xtask conformance` (the xtask runs peers as processes and links no MCP library).
//!
//! ```text
//! mcp-test-peer serve NAME PORT         a dual-era TestBackend (with its `sample` and `touch`
//!                                       tools) on
//!                                       127.0.0.1:PORT (0: a free port); prints its URL, serves
//!                                       until killed
//! mcp-test-peer client legacy|auto URL TOKEN PLAN_JSON
//! ```
//!
//! `client` connects with rmcp's 2025 client (`initialize`) or its auto mode (`server/discover`
//! first, falling back to `initialize`), sends `Authorization: Bearer TOKEN` when TOKEN is not
//! empty, lists every tool, then per entry of PLAN_JSON
//! (`[{"backend", "tool", "arguments", "resource", "prompt", "prompt_arguments"}]`) calls the
//! tool, reads the resource and gets the prompt (and, when the entry names them, calls
//! `progress_tool` counting progress notifications and asks for completions of
//! `complete_prompt`'s `complete_argument`, and calls `elicit_tool` answering its elicitations:
//! `name` -> Ferris, `color` -> orange, a plain value for other required fields, and calls
//! `sample_tool` answering its sampling request; log messages received during the progress call
//! are counted; with `subscribe_resource` it subscribes to that resource (`resources/subscribe`
//! in a 2025 session, `subscriptions/listen` in 2026-07-28), calls `touch_tool` (again on each
//! retry when `touch_repeat`, and at once when its answer contains `touch_off_text`: a tool that
//! toggles updates, found on, was switched off) and waits for `notifications/resources/updated`
//! naming it), and
//! prints one JSON line with the texts seen or
//! the error of each operation (the same shape as the Python and TypeScript matrix clients).

// A command-line peer: printing its URL and its summary is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]
// Sampling and logging are deprecated by SEP-2577 but still part of the protocol that peers
// speak; the matrix checks that they cross the gateway.
#![allow(deprecated)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use rmcp::model::{
    ArgumentInfo, CallToolRequestParams, ClientCapabilities, ClientConfig, CompleteRequestParams,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, GetPromptRequestParams, Implementation, JsonObject,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion,
    ReadResourceRequestParams, Reference, ResourceUpdatedNotificationParam, ServerNotification,
    SubscribeRequestParams, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData};
use serde_json::{Value, json};

/// Counts the progress and log notifications it receives and records the URIs of 2025
/// `notifications/resources/updated`; answers elicitations (`name` -> Ferris, `color` ->
/// orange, a plain value for other required fields) and sampling requests (`sampled by the
/// matrix`).
#[derive(Clone, Default)]
struct Handler {
    progress: Arc<AtomicUsize>,
    logs: Arc<AtomicUsize>,
    updated: Arc<Mutex<Vec<String>>>,
}

impl Handler {
    /// How many updates named `uri` so far.
    fn updates_of(&self, uri: &str) -> usize {
        let updated = self.updated.lock().unwrap_or_else(PoisonError::into_inner);
        updated.iter().filter(|u| *u == uri).count()
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_elicitation()
                .enable_sampling()
                .build(),
            Implementation::new("mcp-test-peer", "0.0.0"),
        )
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        serde_json::from_value(json!({
            "role": "assistant",
            "content": {"type": "text", "text": "sampled by the matrix"},
            "model": "matrix",
        }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn on_logging_message(
        &self,
        _params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.fetch_add(1, Ordering::SeqCst);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = serde_json::to_value(&request).unwrap_or(Value::Null);
        let content = answer_form(&request["requestedSchema"]);
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut updated = self.updated.lock().unwrap_or_else(PoisonError::into_inner);
        updated.push(params.uri);
    }

    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.fetch_add(1, Ordering::SeqCst);
    }
}

/// Longest wait for one MCP operation.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
/// Touches (and waits for the update) this many times: a 2025 session's notifications ride its
/// GET stream, which opens a moment after `initialize`, so a first touch may go unheard.
const TOUCH_ATTEMPTS: usize = 3;
/// How long one attempt waits for the update.
const UPDATE_WAIT: Duration = Duration::from_secs(4);

const USAGE: &str =
    "usage: mcp-test-peer serve NAME PORT | mcp-test-peer client legacy|auto URL TOKEN PLAN_JSON";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["serve", name, port] => match port.parse() {
            Ok(port) => serve(name, port).await,
            Err(_) => Err(USAGE.to_owned()),
        },
        ["client", mode, url, token, plan] => client(mode, url, token, plan).await,
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mcp-test-peer: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(name: &str, port: u16) -> Result<(), String> {
    // Not recording requests: the process serves many of them and nobody reads the log.
    let spec = BackendSpec::both(name)
        .port(port)
        .record_requests(false)
        .sampling_tool(true)
        .touch_tool(true);
    let backend = TestBackend::try_start(spec)
        .await
        .map_err(|e| format!("cannot listen: {e}"))?;
    println!("{}", backend.url());
    std::future::pending::<()>().await;
    Ok(())
}

async fn client(mode: &str, url: &str, token: &str, plan: &str) -> Result<(), String> {
    let plan: Vec<Value> = serde_json::from_str(plan).map_err(|e| format!("PLAN_JSON: {e}"))?;
    let lifecycle = match mode {
        "legacy" => ClientLifecycleMode::Initialize,
        "auto" => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: None,
        },
        _ => return Err(USAGE.to_owned()),
    };
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if !token.is_empty() {
        config = config.auth_header(token.to_owned());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let client = tokio::time::timeout(
        OPERATION_TIMEOUT,
        Handler::default().serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .map_err(|_| "no connection within 30 s".to_owned())?
    .map_err(|e| format!("connect: {e}"))?;
    let mut summary = exercise(&client, &plan).await;
    for entry in &plan {
        if let (Some(uri), Some(backend)) = (
            entry["subscribe_resource"].as_str(),
            entry["backend"].as_str(),
        ) {
            summary.1[backend]["subscribe"] = watch(&client, entry, uri)
                .await
                .unwrap_or_else(|e| json!({ "error": e }));
        }
    }
    let info = client
        .peer_info()
        .and_then(|info| serde_json::to_value(&*info).ok())
        .unwrap_or(Value::Null);
    let _ = client.cancel().await;
    let line = json!({
        "sdk": "rmcp 3.11.0",
        "mode": mode,
        "protocol_version": info.get("protocolVersion").cloned().unwrap_or(Value::Null),
        "tools": summary.0,
        "ops": summary.1,
    });
    println!("{line}");
    Ok(())
}

/// Lists the tools, then runs the plan: (tool names, per-backend results).
async fn exercise(client: &RunningService<RoleClient, Handler>, plan: &[Value]) -> (Value, Value) {
    let tools = match bounded(client.list_all_tools()).await {
        Ok(tools) => json!(tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()),
        Err(error) => json!({ "error": error }),
    };
    let mut ops = serde_json::Map::new();
    for entry in plan {
        let text = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
        let object = |key: &str| match &entry[key] {
            Value::Object(map) => map.clone(),
            _ => JsonObject::new(),
        };
        let call = CallToolRequestParams::new(text("tool")).with_arguments(object("arguments"));
        let call = bounded(client.call_tool(call)).await.map(|result| {
            let value = serde_json::to_value(&result).unwrap_or(Value::Null);
            json!({ "text": texts(&value["content"]), "is_error": value["isError"].as_bool().unwrap_or(false) })
        });
        let read = bounded(client.read_resource(ReadResourceRequestParams::new(text("resource"))))
            .await
            .map(|result| {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                json!({ "text": texts(&value["contents"]) })
            });
        let prompt =
            GetPromptRequestParams::new(text("prompt")).with_arguments(object("prompt_arguments"));
        let prompt = bounded(client.get_prompt(prompt)).await.map(|result| {
            let value = serde_json::to_value(&result).unwrap_or(Value::Null);
            let contents: Vec<Value> = value["messages"]
                .as_array()
                .map(|messages| messages.iter().map(|m| m["content"].clone()).collect())
                .unwrap_or_default();
            json!({ "text": texts(&Value::Array(contents)) })
        });
        let report =
            |result: Result<Value, String>| result.unwrap_or_else(|e| json!({ "error": e }));
        let mut entry_ops =
            json!({ "call": report(call), "read": report(read), "prompt": report(prompt) });
        if entry["progress_tool"].is_string() {
            let counter = &client.service().progress;
            let logs = &client.service().logs;
            counter.store(0, Ordering::SeqCst);
            logs.store(0, Ordering::SeqCst);
            let call = CallToolRequestParams::new(text("progress_tool"))
                .with_arguments(object("progress_arguments"));
            let progress = bounded(client.call_tool(call)).await.map(|result| {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                json!({
                    "text": texts(&value["content"]),
                    "progress": counter.load(Ordering::SeqCst),
                    "logs": logs.load(Ordering::SeqCst),
                })
            });
            entry_ops["progress"] = report(progress);
        }
        if entry["elicit_tool"].is_string() {
            let call = CallToolRequestParams::new(text("elicit_tool"))
                .with_arguments(object("elicit_arguments"));
            let elicit = bounded(client.call_tool(call)).await.map(|result| {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                json!({ "text": texts(&value["content"]), "is_error": value["isError"].as_bool().unwrap_or(false) })
            });
            entry_ops["elicit"] = report(elicit);
        }
        if entry["sample_tool"].is_string() {
            let call = CallToolRequestParams::new(text("sample_tool"))
                .with_arguments(object("sample_arguments"));
            let sample = bounded(client.call_tool(call)).await.map(|result| {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                json!({ "text": texts(&value["content"]), "is_error": value["isError"].as_bool().unwrap_or(false) })
            });
            entry_ops["sample"] = report(sample);
        }
        if entry["complete_prompt"].is_string() {
            let argument = ArgumentInfo::new(text("complete_argument"), text("complete_value"));
            let request = CompleteRequestParams::new(
                Reference::for_prompt(text("complete_prompt")),
                argument,
            );
            let complete = bounded(client.complete(request))
                .await
                .map(|result| json!({ "values": result.completion.values }));
            entry_ops["complete"] = report(complete);
        }
        ops.insert(text("backend"), entry_ops);
    }
    (tools, Value::Object(ops))
}

/// Subscribes to `uri`, touches, and waits for `notifications/resources/updated` naming it:
/// `{"via", "updated"}` (and `honored`, the URIs a 2026-07-28 listen was acknowledged for).
async fn watch(
    client: &RunningService<RoleClient, Handler>,
    entry: &Value,
    uri: &str,
) -> Result<Value, String> {
    let modern = client
        .peer_info()
        .and_then(|info| serde_json::to_value(&*info).ok())
        .is_some_and(|info| info["protocolVersion"] == ProtocolVersion::V_2026_07_28.to_string());
    let repeat = entry["touch_repeat"].as_bool().unwrap_or(false);
    if !modern {
        bounded(client.subscribe(SubscribeRequestParams::new(uri.to_owned()))).await?;
        let handler = client.service();
        for attempt in 0..TOUCH_ATTEMPTS {
            if attempt == 0 || repeat {
                touch(client, entry).await?;
            }
            let heard = async {
                while handler.updates_of(uri) == 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            if tokio::time::timeout(UPDATE_WAIT, heard).await.is_ok() {
                break;
            }
        }
        return Ok(json!({ "via": "subscribe", "updated": handler.updates_of(uri) }));
    }
    let mut filter = SubscriptionFilter::new();
    filter.resource_subscriptions = Some(vec![uri.to_owned()]);
    let mut subscription = bounded(client.listen(filter)).await?;
    let honored = subscription
        .acknowledged()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let mut updated = 0;
    for attempt in 0..TOUCH_ATTEMPTS {
        if attempt == 0 || repeat {
            touch(client, entry).await?;
        }
        // The listen's notifications reach only the subscription (not the handler).
        let heard = async {
            while let Ok(Some(notification)) = subscription.next().await {
                if let ServerNotification::ResourceUpdatedNotification(update) = notification
                    && update.params.uri == uri
                {
                    return true;
                }
            }
            false
        };
        if tokio::time::timeout(UPDATE_WAIT, heard).await == Ok(true) {
            updated += 1;
            break;
        }
    }
    Ok(json!({ "via": "listen", "honored": honored, "updated": updated }))
}

/// Calls the entry's `touch_tool`, twice when its answer contains `touch_off_text`.
async fn touch(client: &RunningService<RoleClient, Handler>, entry: &Value) -> Result<(), String> {
    let call = || {
        let arguments = match &entry["touch_arguments"] {
            Value::Object(map) => map.clone(),
            _ => JsonObject::new(),
        };
        let name = entry["touch_tool"].as_str().unwrap_or_default().to_owned();
        bounded(client.call_tool(CallToolRequestParams::new(name).with_arguments(arguments)))
    };
    let answer = serde_json::to_value(call().await?).unwrap_or(Value::Null);
    if let Some(off) = entry["touch_off_text"].as_str()
        && texts(&answer["content"])
            .iter()
            .any(|text| text.contains(off))
    {
        call().await?;
    }
    Ok(())
}

/// The content of an elicitation form answer.
fn answer_form(schema: &Value) -> Value {
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut wanted: Vec<String> = schema["required"]
        .as_array()
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for key in ["name", "color"] {
        if properties.contains_key(key) && !wanted.iter().any(|w| w == key) {
            wanted.push(key.to_owned());
        }
    }
    let mut content = serde_json::Map::new();
    for key in wanted {
        let spec = properties.get(&key).cloned().unwrap_or(Value::Null);
        let value = match (key.as_str(), spec["type"].as_str()) {
            ("name", _) => json!("Ferris"),
            ("color", _) => json!("orange"),
            _ if spec["enum"].is_array() => spec["enum"][0].clone(),
            (_, Some("boolean")) => json!(true),
            (_, Some("integer" | "number")) => {
                json!(spec["minimum"].as_f64().unwrap_or(1.0).max(1.0) as i64)
            }
            _ => json!("x"),
        };
        content.insert(key, value);
    }
    Value::Object(content)
}

/// An rmcp call within [`OPERATION_TIMEOUT`], its error as text.
async fn bounded<T, E: std::fmt::Display>(
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(OPERATION_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("no answer within 30 s".to_owned()),
    }
}

/// The `text` of every block that has one.
fn texts(blocks: &Value) -> Vec<String> {
    blocks
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|block| block["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
