//! A tiny raw HTTP client: POST JSON-RPC bodies with chosen headers, read JSON or SSE answers.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use serde_json::{Value, json};

pub(crate) const MODERN: &str = "2026-07-28";
pub(crate) const LEGACY: &str = "2025-11-25";

/// A response read to its end.
#[derive(Debug)]
pub(crate) struct RawResponse {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl RawResponse {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Every JSON-RPC message: the JSON body, or each SSE `data:` that is JSON.
    pub(crate) fn messages(&self) -> Vec<Value> {
        let is_sse = self
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !is_sse {
            return serde_json::from_slice(&self.body).into_iter().collect();
        }
        self.text()
            .split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                serde_json::from_str(&data.join("\n")).ok()
            })
            .collect()
    }

    /// The message carrying `result` or `error` (the last one).
    pub(crate) fn reply(&self) -> Value {
        self.messages()
            .into_iter()
            .rfind(|message| message.get("result").is_some() || message.get("error").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC reply in {} {}", self.status, self.text()))
    }
}

pub(crate) fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// POSTs `body` with the usual MCP `Accept`/`Content-Type` and `headers`.
pub(crate) async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> RawResponse {
    send(Method::POST, url, headers, Some(body)).await
}

pub(crate) async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> RawResponse {
    let mut request = Request::builder()
        .method(method)
        .uri(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = body
        .map(|body| Bytes::from(body.to_string()))
        .unwrap_or_default();
    let response = client()
        .request(request.body(Full::new(body)).expect("valid request"))
        .await
        .expect("request should reach the backend");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("readable body").to_bytes();
    RawResponse {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// Modern `_meta`: protocol version, client info, capabilities (elicitation declared).
pub(crate) fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": { "name": "raw-test-client", "version": "0.0.0" },
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": { "form": {} } }
    })
}

/// A modern request: `_meta` merged into `params`, and the headers that go with it.
pub(crate) async fn modern_request(url: &str, id: u64, method: &str, params: Value) -> RawResponse {
    let mut params = match params {
        Value::Object(params) => params,
        _ => serde_json::Map::new(),
    };
    let mut meta = modern_meta();
    if let Some(Value::Object(extra)) = params.remove("_meta")
        && let Value::Object(meta) = &mut meta
    {
        meta.extend(extra);
    }
    params.insert("_meta".into(), meta);
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name));
    }
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    post(url, &headers, &body).await
}

/// A legacy `initialize` (no version header), returning the session id from the answer.
pub(crate) async fn legacy_initialize(url: &str) -> (RawResponse, Option<String>) {
    let body = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": { "name": "raw-test-client", "version": "0.0.0" }
        }
    });
    let response = post(url, &[], &body).await;
    let session = response
        .headers
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    (response, session)
}
