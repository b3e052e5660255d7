//! Shared helpers for the over-the-socket tests: serve a tower service on 127.0.0.1:0 with hyper,
//! and send raw HTTP requests to it with hyper's client.

#![allow(dead_code, unreachable_pub)] // each test binary uses a different subset

pub mod gateway;
pub mod peers;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::Service;

/// Serves `service` on a fresh loopback port until the test ends.
pub async fn serve<S, B>(service: S) -> SocketAddr
where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let _ = stream.set_nodelay(true);
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

/// A received response, fully read.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("utf-8 body")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ascii header"))
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// The text of a JSON answer's first content block (`result.content[0].text`).
    pub fn result_text(&self) -> String {
        let body = self.json();
        body["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("a text result: {body}"))
            .to_owned()
    }

    /// The tool names of a JSON `tools/list` answer.
    pub fn tool_names(&self) -> Vec<String> {
        self.json()["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools: {}", self.text()))
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The JSON messages of an SSE body, in order.
    pub fn sse_messages(&self) -> Vec<serde_json::Value> {
        self.text()
            .split("\n\n")
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
}

/// Sends one request with body `{}`; `headers` are `(name, value)` pairs.
pub async fn send(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    send_body(addr, method, path, headers, "{}").await
}

/// Sends one request with `body`.
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

use mcp_test_support::exchange;

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

pub use mcp_test_support::EventStream;

/// Opens a request whose answer is an SSE stream and returns it unread.
pub async fn open_stream(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> EventStream {
    open_stream_with_body(addr, method, path, headers, "").await
}

/// Like [`open_stream`] with a request body: POSTs `body` (e.g. a `subscriptions/listen`) and
/// returns the SSE answer unread, so a test can read it event by event while it stays open.
pub async fn open_stream_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> EventStream {
    EventStream::open(addr, method, path, headers, body).await
}
