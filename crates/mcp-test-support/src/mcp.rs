//! The JSON-RPC and MCP messages tests send, in both eras, and readers of the answers: one copy
//! for every test binary.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::{Reply, send_body};

/// A JSON-RPC request.
pub fn rpc_request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The `_meta` of a well-formed 2026-07-28 request, declaring the client `capabilities`.
pub fn modern_meta_with(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-test-support", "version": "0"},
    })
}

/// Headers and body of a well-formed 2026-07-28 request (JSON-RPC id 1): `params._meta` is `meta`
/// unless the caller put its own `_meta` there; `Mcp-Name` is encoded as a client must.
pub fn modern_request_with_meta(
    method: &str,
    mut params: Value,
    meta: Value,
) -> (Vec<(&'static str, String)>, String) {
    if params.get("_meta").is_none() {
        params["_meta"] = meta;
    }
    let mut headers = vec![
        ("accept", "application/json, text/event-stream".to_owned()),
        ("content-type", "application/json".to_owned()),
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method.to_owned()),
    ];
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" => params["uri"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        let value = mcp_core::headers::encode_header_value(name);
        headers.push(("mcp-name", value.to_str().expect("ascii").to_owned()));
    }
    (headers, rpc_request(1, method, params).to_string())
}

/// POSTs the 2026-07-28 `request` (headers and body, from [`modern_request_with_meta`]) to
/// `/servers/{vhost}/mcp` on `addr`, with `authorization` and the `extra` headers.
pub async fn post_modern(
    addr: SocketAddr,
    authorization: &str,
    vhost: &str,
    request: (Vec<(&'static str, String)>, String),
    extra: &[(&str, &str)],
) -> Reply {
    let (headers, body) = request;
    let mut all: Vec<(&str, &str)> = vec![("authorization", authorization)];
    all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
    all.extend_from_slice(extra);
    send_body(addr, "POST", &format!("/servers/{vhost}/mcp"), &all, &body).await
}

/// The headers of a 2025-11-25 POST: `Authorization` when given, and in `session` when given (then
/// with the negotiated protocol version), or outside any for `initialize`.
pub fn legacy_headers<'a>(
    authorization: Option<&'a str>,
    session: Option<&'a str>,
) -> Vec<(&'static str, &'a str)> {
    let mut headers = Vec::with_capacity(5);
    if let Some(authorization) = authorization {
        headers.push(("authorization", authorization));
    }
    headers.push(("accept", "application/json, text/event-stream"));
    headers.push(("content-type", "application/json"));
    if let Some(session) = session {
        headers.push(("mcp-session-id", session));
        headers.push(("mcp-protocol-version", "2025-11-25"));
    }
    headers
}

/// The params of a `tools/call` of `tool` (no arguments) that asks the client for input, retried
/// with `inputResponses` and `requestState` when given.
pub fn ask_params(tool: &str, answers: Option<Value>, state: Option<&Value>) -> Value {
    let mut params = json!({"name": tool, "arguments": {}});
    if let Some(answers) = answers {
        params["inputResponses"] = answers;
    }
    if let Some(state) = state {
        params["requestState"] = state.clone();
    }
    params
}

/// An `inputResponses` answer accepting an elicitation with the content `{key: value}`.
pub fn accept_elicitation(key: &str, value: &str) -> Value {
    json!({"elicitation": {"action": "accept", "content": {key: value}}})
}

/// `(code, message)` of the JSON-RPC error in `message`, or `None` when it is not an error.
pub fn message_error(message: &Value) -> Option<(i64, String)> {
    let error = message.get("error")?;
    Some((
        error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("an error without a code: {message}")),
        error["message"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// The text of the first content block of a tool `result` (`content[0].text`).
pub fn result_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {result}"))
        .to_owned()
}

/// The tool names of a `tools/list` `result`, in order.
pub fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools: {result}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}
