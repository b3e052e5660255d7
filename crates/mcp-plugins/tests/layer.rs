//! `PluginLayer` over real sockets in front of a real rmcp backend (`mcp-test-backends`): a hyper
//! server runs the layer, a forwarding service sends what the layer lets through to the backend,
//! and a hyper client speaks 2026-07-28 JSON-RPC to the layer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use mcp_core::{Principal, VirtualHostId};
use mcp_plugins::{Format, PluginBody, PluginLayer, PluginRuntime};
use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tower::{ServiceBuilder, service_fn};

/// Serves `PluginLayer(runtime)` in front of `backend` on a fresh loopback port. The caller's
/// `x-test-sub` header becomes its `Principal` (standing in for an authentication layer).
async fn serve(runtime: PluginRuntime, backend: &TestBackend) -> SocketAddr {
    let target: Uri = backend.url().parse().expect("backend url");
    let client: Client<HttpConnector, PluginBody<Incoming>> =
        Client::builder(TokioExecutor::new()).build_http();
    let forward = service_fn(move |mut req: Request<PluginBody<Incoming>>| {
        let client = client.clone();
        *req.uri_mut() = target.clone();
        async move {
            let res = client.request(req).await.expect("backend reachable");
            Ok::<Response<Incoming>, Infallible>(res)
        }
    });
    let service = ServiceBuilder::new()
        .map_request(|mut req: Request<Incoming>| {
            let sub = req
                .headers()
                .get("x-test-sub")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if let Some(sub) = sub {
                req.extensions_mut()
                    .insert(Principal::new("https://issuer.test", sub));
            }
            req.extensions_mut().insert(VirtualHostId::new("vh"));
            req
        })
        .layer(PluginLayer::new(runtime).backend("alpha"))
        .service(forward);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let svc = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

struct Reply {
    content_type: String,
    body: String,
}

impl Reply {
    /// The JSON-RPC response: the JSON body, or the last SSE message carrying an `id`.
    fn message(&self) -> Value {
        if self.content_type.starts_with("text/event-stream") {
            self.sse_messages()
                .into_iter()
                .rev()
                .find(|m| m.get("id").is_some())
                .unwrap_or_else(|| panic!("no response in the stream: {}", self.body))
        } else {
            serde_json::from_str(&self.body)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
        }
    }

    fn sse_messages(&self) -> Vec<Value> {
        self.body
            .split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:").map(str::trim_start))
                    .collect();
                (!data.is_empty() && !data.concat().trim().is_empty()).then(|| data.join("\n"))
            })
            .map(|d| serde_json::from_str(&d).expect("SSE data is JSON"))
            .collect()
    }
}

/// POSTs a 2026-07-28 request as `sub`.
async fn post(addr: SocketAddr, sub: &str, method: &str, mut params: Value) -> Reply {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "plugins-test", "version": "0"},
    });
    if let Some(Value::Object(extra)) = params.get("_meta") {
        for (k, v) in extra {
            meta[k] = v.clone();
        }
    }
    params["_meta"] = meta;
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method.to_owned()),
        ("x-test-sub", sub.to_owned()),
    ];
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        headers.push(("mcp-name", name.to_owned()));
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    exchange(addr, &headers, &body).await.1
}

/// POSTs `body` with the JSON and SSE `accept` and `content-type` plus `headers`.
async fn exchange(
    addr: SocketAddr,
    headers: &[(&str, String)],
    body: &Value,
) -> (http::HeaderMap, Reply) {
    let mut req = Request::post(format!("http://{addr}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let res = tokio::time::timeout(
        Duration::from_secs(10),
        client.request(
            req.body(Full::new(Bytes::from(body.to_string())))
                .expect("request"),
        ),
    )
    .await
    .expect("answer within 10 s")
    .expect("request sent");
    assert!(
        res.status().is_success(),
        "JSON-RPC answers, allowed or denied, are HTTP 2xx: {}",
        res.status()
    );
    let headers = res.headers().clone();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = res.into_body().collect().await.expect("body").to_bytes();
    let reply = Reply {
        content_type,
        body: String::from_utf8(body.to_vec()).expect("utf-8"),
    };
    (headers, reply)
}

async fn call_tool(addr: SocketAddr, sub: &str, tool: &str, arguments: Value) -> Value {
    post(
        addr,
        sub,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await
    .message()
}

fn runtime(doc: Value) -> PluginRuntime {
    PluginRuntime::builder()
        .load_str(&doc.to_string(), Format::Json, "test")
        .expect("valid document")
}

fn text(message: &Value) -> &str {
    message["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {message}"))
}

fn error(message: &Value) -> (i64, &str) {
    (
        message["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no error: {message}")),
        message["error"]["message"].as_str().unwrap_or(""),
    )
}

const FAKE_KEY: &str = "AKIAIOSFODNN7EXAMPLE";

#[tokio::test]
async fn denied_tool_is_refused_before_the_backend_and_others_pass() {
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let addr = serve(
        runtime(json!({"version": 1, "plugins": [
            {"name": "no-add", "kind": "tool_filter", "conditions": {"backends": ["alpha"]}, "config": {"deny": ["add"]}}
        ]})),
        &backend,
    )
    .await;
    let denied = call_tool(addr, "alice", "add", json!({"a": 1, "b": 2})).await;
    assert_eq!(denied["id"], 7);
    assert_eq!(error(&denied), (-32600, "Tool not allowed: add"));
    assert_eq!(
        backend.calls_started("add"),
        0,
        "the backend never saw the denied call"
    );

    let allowed = call_tool(addr, "alice", "echo", json!({"text": "hi"})).await;
    assert_eq!(text(&allowed), "alpha: hi");
    // Lists go through the layer untouched (the router filters them, see PluginChain::listed).
    let list = post(addr, "alice", "tools/list", json!({})).await.message();
    assert!(
        list["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
}

#[tokio::test]
async fn cloud_access_key_in_arguments_is_denied_or_redacted_per_action() {
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let rt = runtime(json!({"version": 1, "plugins": [
        {"name": "secrets", "kind": "secret_filter", "hooks": ["tool_pre_invoke"]}
    ]}));
    let addr = serve(rt.clone(), &backend).await;
    let denied = call_tool(
        addr,
        "alice",
        "echo",
        json!({"text": format!("key {FAKE_KEY}")}),
    )
    .await;
    assert_eq!(
        error(&denied),
        (
            -32600,
            "Blocked: arguments contain a secret (aws_access_key)"
        )
    );
    assert!(
        !denied.to_string().contains(FAKE_KEY),
        "the secret is not echoed"
    );
    assert_eq!(backend.calls_started("echo"), 0);

    rt.apply_str(
        &json!({"version": 1, "plugins": [
            {"name": "secrets", "kind": "secret_filter", "hooks": ["tool_pre_invoke"], "config": {"action": "redact"}}
        ]})
        .to_string(),
        Format::Json,
        "test",
    )
    .expect("valid");
    let redacted = call_tool(
        addr,
        "alice",
        "echo",
        json!({"text": format!("key {FAKE_KEY}")}),
    )
    .await;
    assert_eq!(text(&redacted), "alpha: key [REDACTED]");
    let seen = backend.requests_for("tools/call");
    assert!(
        seen.iter()
            .all(|r| !String::from_utf8_lossy(&r.body).contains(FAKE_KEY))
    );
}

#[tokio::test]
async fn secrets_in_results_are_redacted_in_json_and_sse_responses() {
    for json_response in [true, false] {
        let backend =
            TestBackend::start(BackendSpec::modern("alpha").json_response(json_response)).await;
        let addr = serve(
            runtime(json!({"version": 1, "plugins": [
                {"name": "out", "kind": "secret_filter", "hooks": ["tool_post_invoke"], "config": {"action": "redact"}}
            ]})),
            &backend,
        )
        .await;
        let reply = post(
            addr,
            "alice",
            "tools/call",
            json!({"name": "echo", "arguments": {"text": FAKE_KEY}}),
        )
        .await;
        assert_eq!(
            reply.content_type.starts_with("text/event-stream"),
            !json_response,
            "the backend answered in the form under test"
        );
        assert_eq!(
            text(&reply.message()),
            "alpha: [REDACTED]",
            "json_response={json_response}"
        );
        assert!(!reply.body.contains(FAKE_KEY));
    }
}

#[tokio::test]
async fn post_hook_denial_replaces_a_streamed_result_and_keeps_progress() {
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let addr = serve(
        runtime(json!({"version": 1, "plugins": [
            {"name": "small", "kind": "size_limit", "conditions": {"tools": ["slow"]}, "config": {"max_result_bytes": 8}}
        ]})),
        &backend,
    )
    .await;
    let reply = post(addr, "alice", "tools/call", json!({
        "name": "slow", "arguments": {"steps": 2, "delay_ms": 1}, "_meta": {"progressToken": "p1"}
    }))
    .await;
    let message = reply.message();
    let (code, msg) = error(&message);
    assert_eq!(code, -32600);
    assert!(msg.starts_with("Result too large: "), "{msg}");
    assert_eq!(message["id"], 7);
    // The stream's other events are still there, in order, before the response.
    let all = reply.sse_messages();
    assert_eq!(all.last(), Some(&message));
    let progress: Vec<f64> = all
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .filter_map(|m| m["params"]["progress"].as_f64())
        .collect();
    assert_eq!(progress, [1.0, 2.0], "{}", reply.body);
}

#[tokio::test]
async fn oversize_arguments_are_denied() {
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let addr = serve(
        runtime(json!({"version": 1, "plugins": [
            {"name": "sizes", "kind": "size_limit", "config": {"max_argument_bytes": 64}}
        ]})),
        &backend,
    )
    .await;
    let big = "x".repeat(100);
    let denied = call_tool(addr, "alice", "echo", json!({"text": big})).await;
    assert_eq!(
        error(&denied),
        (-32600, "Arguments too large: 111 bytes (limit 64)")
    );
    let small = call_tool(addr, "alice", "echo", json!({"text": "ok"})).await;
    assert_eq!(text(&small), "alpha: ok");
}

#[tokio::test]
async fn rate_limit_refuses_after_n_calls_and_recovers_after_retry_after() {
    // A bucket of 2 refilled every 2 s: the third call is refused unless the first three took
    // more than 2 s, and the refusal tells when to come back.
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let addr = serve(
        runtime(json!({"version": 1, "plugins": [
            {"name": "rl", "kind": "rate_limit", "config": {"limit": 2, "window_s": 4, "per": "principal"}}
        ]})),
        &backend,
    )
    .await;
    for _ in 0..2 {
        assert_eq!(
            text(&call_tool(addr, "alice", "echo", json!({"text": "a"})).await),
            "alpha: a"
        );
    }
    let refused = call_tool(addr, "alice", "echo", json!({"text": "a"})).await;
    assert_eq!(
        refused["error"]["code"],
        mcp_plugins::builtin::rate_limit::RATE_LIMITED
    );
    let retry_after = refused["error"]["data"]["retryAfterSeconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("retryAfterSeconds: {refused}"));
    assert!(retry_after >= 1);
    assert_eq!(
        refused["error"]["message"],
        format!("Rate limit exceeded; retry in {retry_after} s")
    );
    // Another principal is not limited by alice's calls.
    assert_eq!(
        text(&call_tool(addr, "bob", "echo", json!({"text": "b"})).await),
        "alpha: b"
    );
    // After the window the bucket is full again. The limiter reads tokio's clock, so the test
    // moves that clock a window forward (nothing is in flight meanwhile) instead of sleeping.
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(retry_after)).await;
    tokio::time::resume();
    assert_eq!(
        text(&call_tool(addr, "alice", "echo", json!({"text": "a"})).await),
        "alpha: a"
    );
}

#[tokio::test]
async fn upstream_headers_and_meta_reach_the_backend() {
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let addr = serve(
        runtime(json!({"version": 1, "plugins": [
            {"name": "identity", "kind": "upstream_headers", "config": {
                "headers": {"x-caller": "{subject}", "x-vhost": "{virtual_host}/{backend}"},
                "meta": {"example.com/caller": "{subject}"}
            }}
        ]})),
        &backend,
    )
    .await;
    let reply = call_tool(addr, "alice", "headers", json!({})).await;
    let headers = &reply["result"]["structuredContent"]["headers"];
    assert_eq!(headers["x-caller"], "alice", "{reply}");
    assert_eq!(headers["x-vhost"], "vh/alpha");
    let sent = backend.requests_for("tools/call");
    let body = sent.last().and_then(|r| r.json()).expect("recorded call");
    assert_eq!(body["params"]["_meta"]["example.com/caller"], "alice");
    assert_eq!(
        body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "the client's own _meta entries are kept"
    );
}

#[tokio::test]
async fn invalid_reload_fails_closed_until_a_valid_document_arrives() {
    let backend = TestBackend::start(BackendSpec::modern("alpha")).await;
    let rt = runtime(json!({"version": 1, "plugins": []}));
    let addr = serve(rt.clone(), &backend).await;
    assert_eq!(
        text(&call_tool(addr, "alice", "echo", json!({"text": "a"})).await),
        "alpha: a"
    );

    let err = rt
        .apply_str(
            r#"{"version": 1, "plugins": [{"name": "x", "kind": "nope"}]}"#,
            Format::Json,
            "test",
        )
        .expect_err("invalid");
    assert!(
        err.to_string()
            .starts_with("test: plugins[0].kind: unknown plugin kind `nope`")
    );
    let failed = call_tool(addr, "alice", "echo", json!({"text": "a"})).await;
    assert_eq!(error(&failed), (-32603, mcp_plugins::FAILED_MESSAGE));
    assert_eq!(
        backend.calls_started("echo"),
        1,
        "no call reached the backend while failed"
    );

    rt.apply_str(r#"{"version": 1, "plugins": []}"#, Format::Json, "test")
        .expect("valid");
    assert_eq!(
        text(&call_tool(addr, "alice", "echo", json!({"text": "b"})).await),
        "alpha: b"
    );
}

#[tokio::test]
async fn a_2025_session_client_is_governed_the_same_way() {
    let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let addr = serve(
        runtime(json!({"version": 1, "plugins": [
            {"name": "no-add", "kind": "tool_filter", "config": {"deny": ["add"]}},
            {"name": "secrets", "kind": "secret_filter", "config": {"action": "redact"}}
        ]})),
        &backend,
    )
    .await;
    let (headers, init) = exchange(
        addr,
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "plugins-test", "version": "0"}
        }}),
    )
    .await;
    assert!(
        init.message()["result"]["serverInfo"].is_object(),
        "{}",
        init.body
    );
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a legacy session")
        .to_owned();
    let session_headers = [
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-06-18".to_owned()),
    ];
    exchange(
        addr,
        &session_headers,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;

    let call = |tool: &str, arguments: Value| json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let denied = exchange(
        addr,
        &session_headers,
        &call("add", json!({"a": 1, "b": 2})),
    )
    .await
    .1
    .message();
    assert_eq!(error(&denied), (-32600, "Tool not allowed: add"));
    let redacted = exchange(
        addr,
        &session_headers,
        &call("echo", json!({"text": FAKE_KEY})),
    )
    .await
    .1
    .message();
    assert_eq!(text(&redacted), "alpha: [REDACTED]");
    assert_eq!(backend.calls_started("add"), 0);
}
