//! A custom plugin in a few lines, run by `PluginLayer` in front of a real MCP server.
//!
//! `cargo run -p mcp-plugins --example custom_plugin`
//!
//! The plugin (`forbid_argument`) denies `tools/call` requests whose arguments carry a configured
//! key. It is registered next to the built-ins, configured from a TOML document together with the
//! built-in `secret_filter`, and the layer sits in front of an rmcp test server (started in this
//! process) through a small forwarding service. The example sends three calls and prints what
//! came back.

#![allow(clippy::print_stdout)]

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mcp_plugins::{
    ConfigError, Format, Plugin, PluginBody, PluginConfig, PluginContext, PluginLayer,
    PluginRuntime, Registry, Verdict,
};
use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::value::RawValue;
use tower::{ServiceBuilder, ServiceExt, service_fn};

/// Denies calls whose arguments have the key `key`.
struct ForbidArgument {
    key: String,
}

impl Plugin for ForbidArgument {
    fn call<'a>(&'a self, ctx: &'a PluginContext<'a>, args: Option<&'a RawValue>) -> Verdict<'a> {
        let has_key = args
            .and_then(|a| mcp_core::RawObject::from_raw(a).ok())
            .is_some_and(|a| a.contains(&self.key));
        if has_key {
            let message = format!(
                "{}: argument `{}` is not allowed here",
                ctx.public_name, self.key
            );
            Verdict::deny(mcp_core::ErrorObject::invalid_params(message))
        } else {
            Verdict::allow()
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ForbidArgumentConfig {
    key: String,
}

const DOCUMENT: &str = r#"
version = 1

[[plugins]]
name = "no-debug-flag"
kind = "forbid_argument"
hooks = ["tool_pre_invoke"]
config = { key = "debug" }

[[plugins]]
name = "secrets"
kind = "secret_filter"
config = { action = "redact" }
"#;

#[tokio::main]
async fn main() -> Result<(), ConfigError> {
    // The few lines that add a kind: a name and a factory from the entry's `config` table.
    let registry = Registry::new().register("forbid_argument", |c: &PluginConfig<'_>| {
        let config: ForbidArgumentConfig = c.parse()?;
        Ok(ForbidArgument { key: config.key })
    });
    let runtime =
        PluginRuntime::builder()
            .registry(registry)
            .load_str(DOCUMENT, Format::Toml, "example")?;

    let backend = TestBackend::start(BackendSpec::modern("demo").json_response(true)).await;
    let target: Uri = backend.url().parse().expect("backend URL");
    let client = Client::builder(TokioExecutor::new()).build_http::<PluginBody<Full<Bytes>>>();
    let service = ServiceBuilder::new()
        .layer(PluginLayer::new(runtime).backend("demo"))
        .service(service_fn(
            move |mut req: Request<PluginBody<Full<Bytes>>>| {
                *req.uri_mut() = target.clone();
                let client = client.clone();
                async move {
                    let res = client.request(req).await.expect("backend reachable");
                    Ok::<_, Infallible>(res)
                }
            },
        ));

    for arguments in [
        r#"{"text":"hello"}"#,
        r#"{"text":"hello","debug":true}"#,
        r#"{"text":"my key is AKIAIOSFODNN7EXAMPLE"}"#,
    ] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        let req = Request::post("/mcp")
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "echo")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let res = service.clone().oneshot(req).await.expect("infallible");
        let bytes = res.into_body().collect().await.expect("body").to_bytes();
        println!(
            "arguments {arguments}\n  -> {}\n",
            String::from_utf8_lossy(&bytes)
        );
    }
    backend.stop().await;
    Ok(())
}
