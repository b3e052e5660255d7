//! Plugins around routed calls (book: docs/src/failure-modes.md and docs/src/plugins.md) through the router with real rmcp backends, over
//! the socket: built-ins (tool allow/deny lists that also hide tools from `tools/list`, secret
//! deny and redact, argument size limits, rate limits, upstream headers), a custom plugin on the
//! prompt and resource hooks, soft and enforce-mode plugin errors, and the fail-closed runtime
//! after an invalid reload, for 2026-07-28 clients and a 2025 session.

use mcp_test_support::rpc_error;
use std::sync::Arc;
use std::time::Duration;

use mcp_core::ErrorObject;
use mcp_plugins::{
    Format, Hook, Plugin, PluginConfig, PluginContext, PluginRuntime, Registry, Verdict,
};
use mcp_router::McpRouter;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::Reply;
use mcp_test_support::stack::{Gateway, user_config};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// A fake AWS access key id (the documented example key).
const FAKE_KEY: &str = "AKIAIOSFODNN7EXAMPLE";

const DOCUMENT: &str = r#"
version = 1

[[plugins]]
name = "no-fail"
kind = "tool_filter"
config = { deny = ["fail"] }

[[plugins]]
name = "secrets-in"
kind = "secret_filter"
hooks = ["tool_pre_invoke"]
conditions = { backends = ["alpha"] }

[[plugins]]
name = "secrets-out"
kind = "secret_filter"
hooks = ["tool_post_invoke"]
conditions = { backends = ["beta"] }
config = { action = "redact" }

[[plugins]]
name = "sizes"
kind = "size_limit"
conditions = { tools = ["echo"] }
config = { max_argument_bytes = 200 }

[[plugins]]
name = "sums"
kind = "rate_limit"
conditions = { tools = ["add"] }
config = { limit = 2, window_s = 1, per = "principal_tool" }

[[plugins]]
name = "identity"
kind = "upstream_headers"
conditions = { tools = ["headers"] }
config = { headers = { x-caller = "{subject}", x-backend = "{backend}" } }

[[plugins]]
name = "guard"
kind = "guard"
hooks = ["resource_pre_read", "prompt_post_fetch"]

[[plugins]]
name = "guard-soft"
kind = "guard"
mode = "permissive"
hooks = ["tool_post_invoke"]
conditions = { tools = ["get-sum"] }

[[plugins]]
name = "guard-strict"
kind = "guard"
hooks = ["tool_post_invoke"]
conditions = { tools = ["slow"] }
"#;

/// A custom plugin: private item resources (custom code), a prompt description stamp, and a
/// failure on tool results (its mode decides what that does).
struct Guard;

impl Plugin for Guard {
    fn call<'a>(
        &'a self,
        ctx: &'a PluginContext<'a>,
        payload: Option<&'a RawValue>,
    ) -> Verdict<'a> {
        match ctx.hook {
            Hook::ResourcePreRead if ctx.name.contains("/item/") => {
                Verdict::deny(ErrorObject::new(-32042, "Items are private"))
            }
            Hook::PromptPostFetch => {
                let Some(Ok(mut result)) = payload.map(|p| serde_json::from_str::<Value>(p.get()))
                else {
                    return Verdict::error("no prompt result");
                };
                result["description"] = json!(format!("checked: {}", ctx.public_name));
                match serde_json::value::to_raw_value(&result) {
                    Ok(raw) => Verdict::rewrite(raw),
                    Err(e) => Verdict::error(e.to_string()),
                }
            }
            Hook::ToolPostInvoke => Verdict::error("the guard is broken"),
            _ => Verdict::allow(),
        }
    }
}

fn runtime(document: &str) -> Arc<PluginRuntime> {
    let registry = Registry::new().register("guard", |_: &PluginConfig<'_>| Ok(Guard));
    Arc::new(
        PluginRuntime::builder()
            .registry(registry)
            .load_str(document, Format::Toml, "test document")
            .expect("valid document"),
    )
}

async fn gateway(runtime: Arc<PluginRuntime>) -> (TestBackend, TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let router = McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .plugins(runtime)
        .build();
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start_with(&[("alice", config.clone()), ("bob", config)], router).await;
    (alpha, beta, gw)
}

async fn call(gw: &Gateway, sub: &str, tool: &str, arguments: Value) -> Reply {
    let reply = gw
        .modern(
            sub,
            "vh",
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply
}

#[tokio::test]
async fn a_denied_tool_is_not_listed_and_its_call_is_refused() {
    let (alpha, _beta, gw) = gateway(runtime(DOCUMENT)).await;
    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    let names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    let listed = |name: &str| names.iter().any(|n| n == name);
    assert!(listed("alpha-echo") && listed("beta-echo"), "{names:?}");
    assert!(
        !listed("alpha-fail") && !listed("beta-fail"),
        "denied tools are not advertised: {names:?}"
    );
    let denied = call(&gw, "alice", "alpha-fail", json!({})).await;
    assert_eq!(
        rpc_error(&denied),
        (-32600, "Tool not allowed: alpha-fail".to_owned())
    );
    assert!(
        alpha.requests_for("tools/call").is_empty(),
        "the backend never saw the denied call"
    );
}

#[tokio::test]
async fn secrets_are_denied_on_the_way_in_and_redacted_on_the_way_out() {
    let (alpha, beta, gw) = gateway(runtime(DOCUMENT)).await;
    let denied = call(&gw, "alice", "alpha-echo", json!({"text": FAKE_KEY})).await;
    assert_eq!(
        rpc_error(&denied),
        (
            -32600,
            "Blocked: arguments contain a secret (aws_access_key)".to_owned()
        )
    );
    assert!(!denied.text().contains(FAKE_KEY), "never echoed");
    assert!(alpha.requests_for("tools/call").is_empty());

    let redacted = call(&gw, "alice", "beta-echo", json!({"text": FAKE_KEY})).await;
    let text = redacted.result_text();
    assert!(!text.contains(FAKE_KEY), "{text}");
    assert!(text.contains("[REDACTED]"), "{text}");
    assert_eq!(
        beta.requests_for("tools/call").len(),
        1,
        "the call itself ran"
    );
}

#[tokio::test]
async fn oversize_arguments_are_denied() {
    let (alpha, _beta, gw) = gateway(runtime(DOCUMENT)).await;
    let big = "x".repeat(500);
    let denied = call(&gw, "alice", "alpha-echo", json!({"text": big})).await;
    let (code, message) = rpc_error(&denied);
    assert_eq!(code, -32600);
    assert!(
        message.starts_with("Arguments too large: ") && message.ends_with("(limit 200)"),
        "{message}"
    );
    assert!(alpha.requests_for("tools/call").is_empty());
    let small = call(&gw, "alice", "alpha-echo", json!({"text": "small"})).await;
    assert_eq!(small.result_text(), "alpha: small");
}

#[tokio::test]
async fn the_rate_limit_refuses_after_n_calls_per_principal_and_recovers() {
    let (_alpha, _beta, gw) = gateway(runtime(DOCUMENT)).await;
    for _ in 0..2 {
        let ok = call(&gw, "alice", "alpha-add", json!({"a": 1, "b": 2})).await;
        assert_eq!(ok.result_text(), "alpha: 3");
    }
    let limited = call(&gw, "alice", "alpha-add", json!({"a": 1, "b": 2})).await;
    let (code, message) = rpc_error(&limited);
    assert_eq!(code, -32000);
    assert_eq!(message, "Rate limit exceeded; retry in 1 s");
    assert_eq!(limited.json()["error"]["data"]["retryAfterSeconds"], 1);
    // Another principal has its own bucket.
    let bob = call(&gw, "bob", "alpha-add", json!({"a": 2, "b": 2})).await;
    assert_eq!(bob.result_text(), "alpha: 4");
    // After the window the bucket is full again. The limiter reads tokio's clock, so the test
    // moves that clock a window forward (nothing is in flight meanwhile) instead of sleeping.
    tokio::time::pause();
    tokio::time::advance(Duration::from_millis(1100)).await;
    tokio::time::resume();
    let again = call(&gw, "alice", "alpha-add", json!({"a": 1, "b": 2})).await;
    assert_eq!(again.result_text(), "alpha: 3");
}

#[tokio::test]
async fn plugins_add_headers_upstream() {
    let (_alpha, _beta, gw) = gateway(runtime(DOCUMENT)).await;
    let reply = call(&gw, "alice", "alpha-headers", json!({})).await;
    let headers = &reply.json()["result"]["structuredContent"]["headers"];
    assert_eq!(headers["x-caller"], "alice", "{headers}");
    assert_eq!(headers["x-backend"], "alpha", "{headers}");
    let plain = call(&gw, "alice", "alpha-echo", json!({"text": "hi"})).await;
    assert_eq!(plain.result_text(), "alpha: hi");
}

#[tokio::test]
async fn a_custom_plugin_governs_resources_and_prompts() {
    let (_alpha, _beta, gw) = gateway(runtime(DOCUMENT)).await;
    let private = gw
        .modern(
            "alice",
            "vh",
            "resources/read",
            json!({"uri": "alpha-test://alpha/item/7"}),
        )
        .await;
    assert_eq!(
        rpc_error(&private),
        (-32042, "Items are private".to_owned())
    );
    let public = gw
        .modern(
            "alice",
            "vh",
            "resources/read",
            json!({"uri": "alpha-test://alpha/static"}),
        )
        .await;
    assert_eq!(
        public.json()["result"]["contents"][0]["text"],
        "static from alpha",
        "{}",
        public.text()
    );
    let prompt = gw
        .modern(
            "alice",
            "vh",
            "prompts/get",
            json!({"name": "beta-greet", "arguments": {"who": "Ada"}}),
        )
        .await;
    let result = &prompt.json()["result"];
    assert_eq!(result["description"], "checked: beta-greet", "{result}");
    assert_eq!(
        result["messages"][0]["content"]["text"],
        "Hello Ada from beta"
    );
}

#[tokio::test]
async fn a_soft_plugin_error_lets_the_call_proceed_an_enforced_one_denies() {
    let (_alpha, _beta, gw) = gateway(runtime(DOCUMENT)).await;
    let soft = call(&gw, "alice", "alpha-get-sum", json!({"a": 2, "b": 3})).await;
    assert_eq!(
        soft.result_text(),
        "alpha: 5",
        "permissive: logged, call proceeds"
    );
    let strict = call(
        &gw,
        "alice",
        "alpha-slow",
        json!({"steps": 1, "delay_ms": 1}),
    )
    .await;
    assert_eq!(
        rpc_error(&strict),
        (-32603, "Plugin guard-strict failed".to_owned())
    );
}

#[tokio::test]
async fn a_2025_session_gets_the_same_policy() {
    let (_alpha, beta, gw) = gateway(runtime(DOCUMENT)).await;
    let init = gw
        .raw(
            "alice",
            "vh",
            "POST",
            &[
                ("accept", "application/json, text/event-stream"),
                ("content-type", "application/json"),
            ],
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "plugins", "version": "1"}}})
            .to_string(),
        )
        .await;
    let session = init.header("mcp-session-id").expect("session").to_owned();
    let headers = [
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let denied = gw
        .raw(
            "alice",
            "vh",
            "POST",
            &headers,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "beta-fail", "arguments": {}}})
            .to_string(),
        )
        .await;
    let message = denied.json();
    assert_eq!(message["error"]["code"], -32600, "{message}");
    assert_eq!(message["error"]["message"], "Tool not allowed: beta-fail");
    assert!(beta.requests_for("tools/call").is_empty());
}

#[tokio::test]
async fn an_invalid_reload_fails_closed_until_a_valid_document_is_applied() {
    let runtime = runtime(DOCUMENT);
    let (_alpha, _beta, gw) = gateway(Arc::clone(&runtime)).await;
    let broken = runtime.apply_str("version = 2\n", Format::Toml, "reload");
    assert!(broken.is_err(), "wrong version is refused");
    assert!(!runtime.state().is_ready());
    let failed = call(&gw, "alice", "alpha-echo", json!({"text": "hi"})).await;
    assert_eq!(
        rpc_error(&failed),
        (-32603, mcp_plugins::FAILED_MESSAGE.to_owned())
    );
    runtime
        .apply_str("version = 1\nplugins = []\n", Format::Toml, "reload")
        .expect("valid document");
    assert!(runtime.state().is_ready());
    let ok = call(&gw, "alice", "alpha-fail", json!({})).await;
    assert_eq!(
        ok.json()["result"]["isError"],
        true,
        "no plugin any more: the backend answers: {}",
        ok.text()
    );
}
