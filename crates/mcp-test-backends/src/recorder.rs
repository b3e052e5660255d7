//! The log of every HTTP request a backend received, as it arrived.

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use http::{HeaderMap, Method, Uri};

/// One HTTP request exactly as the backend received it, before any MCP processing.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: Method,
    /// Request target (path and query).
    pub uri: Uri,
    /// Every header, with its original values (names are case-insensitive).
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
    /// The peer address of the connection it came over: requests with equal peers shared a
    /// keep-alive connection.
    pub peer: SocketAddr,
}

impl RecordedRequest {
    /// The path of the request target.
    pub fn path(&self) -> &str {
        self.uri.path()
    }

    /// The first value of header `name` (any case), if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// Every value of header `name` (any case) that is visible ASCII.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect()
    }

    /// True when header `name` (any case) is present.
    pub fn has_header(&self, name: &str) -> bool {
        self.headers.contains_key(name)
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The JSON-RPC `method` of the body, if any (requests and notifications).
    pub fn jsonrpc_method(&self) -> Option<String> {
        self.json()?.get("method")?.as_str().map(str::to_owned)
    }

    /// `params.name` of a `tools/call` or `prompts/get` body: the exact upstream name.
    pub fn called_name(&self) -> Option<String> {
        let body = self.json()?;
        body.get("params")?.get("name")?.as_str().map(str::to_owned)
    }
}

/// Shared, append-only (until cleared) request log.
#[derive(Debug, Default)]
pub(crate) struct RequestLog {
    requests: Mutex<Vec<RecordedRequest>>,
}

impl RequestLog {
    pub(crate) fn record(&self, request: RecordedRequest) {
        self.lock().push(request);
    }

    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        self.lock().clone()
    }

    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<RecordedRequest>> {
        // Appending and cloning cannot leave the vector half-updated.
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_read_headers_and_body() {
        let mut headers = HeaderMap::new();
        headers.insert("mcp-method", "tools/call".parse().expect("header value"));
        headers.append("x-multi", "a".parse().expect("header value"));
        headers.append("x-multi", "b".parse().expect("header value"));
        let request = RecordedRequest {
            method: Method::POST,
            uri: "/mcp?x=1".parse().expect("uri"),
            headers,
            body: Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum"}}"#,
            ),
            peer: SocketAddr::from(([127, 0, 0, 1], 40000)),
        };
        assert_eq!(request.path(), "/mcp");
        assert_eq!(request.header("MCP-Method"), Some("tools/call"));
        assert_eq!(request.header_all("x-multi"), vec!["a", "b"]);
        assert!(!request.has_header("authorization"));
        assert_eq!(request.jsonrpc_method().as_deref(), Some("tools/call"));
        assert_eq!(request.called_name().as_deref(), Some("get-sum"));
    }
}
