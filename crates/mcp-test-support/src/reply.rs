//! [`Reply`]: a response read to its end, with the readers the tests assert on (JSON, SSE
//! messages, JSON-RPC errors), and [`send`] / [`send_body`], which produce one.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::{exchange, mcp};

/// A received response, fully read.
#[derive(Debug)]
pub struct Reply {
    /// The response status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Reply {
    /// The body as UTF-8 text.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("utf-8 body")
    }

    /// The value of header `name`, when present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ascii header"))
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// The text of the final answer's first content block (`result.content[0].text`), JSON or
    /// SSE.
    pub fn result_text(&self) -> String {
        mcp::result_text(&self.last_message()["result"])
    }

    /// The tool names of a `tools/list` answer, JSON or SSE.
    pub fn tool_names(&self) -> Vec<String> {
        mcp::tool_names(&self.last_message()["result"])
    }

    /// The JSON messages of an SSE body, in order.
    pub fn sse_messages(&self) -> Vec<Value> {
        sse_messages(self.text())
    }

    /// The JSON messages of an SSE body, or the JSON body itself.
    pub fn messages(&self) -> Vec<Value> {
        if self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            self.sse_messages()
        } else {
            vec![self.json()]
        }
    }

    /// The final JSON-RPC message, whether it came as JSON or as an SSE stream.
    pub fn last_message(&self) -> Value {
        self.messages()
            .pop()
            .unwrap_or_else(|| panic!("a final message: {}", self.text()))
    }

    /// Asserts a `{"detail": ...}` answer with `status`.
    pub fn assert_detail(&self, status: u16, detail: &str) {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text());
        assert_eq!(self.header("content-type"), Some("application/json"));
        assert_eq!(self.text(), json!({ "detail": detail }).to_string());
    }
}

/// The JSON data of each SSE event in `text`, in order (events without data are skipped).
pub fn sse_messages(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("data:")
                        .map(|d| d.strip_prefix(' ').unwrap_or(d))
                })
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(&d).expect("SSE data is JSON"))
        .collect()
}

/// `(code, message)` of the JSON-RPC error `reply` ends with (the last message of an SSE answer),
/// whatever the HTTP status.
pub fn rpc_error(reply: &Reply) -> (i64, String) {
    let message = reply.last_message();
    mcp::message_error(&message).unwrap_or_else(|| panic!("not a JSON-RPC error: {message}"))
}

/// [`rpc_error`] of an HTTP 200 answer: routing and backend failures are JSON-RPC errors that
/// travel with 200, which this asserts too.
pub fn rpc_error_200(reply: &Reply) -> (i64, String) {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    rpc_error(reply)
}

/// Sends one request with body `{}`; `headers` are `(name, value)` pairs.
pub async fn send(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    send_body(addr, method, path, headers, "{}").await
}

/// Sends one request with `body` and reads the answer to its end.
pub async fn send_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let (parts, body) = exchange(addr, method, path, headers, body)
        .await
        .into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}
