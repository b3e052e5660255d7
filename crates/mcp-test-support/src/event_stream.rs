//! Plain-HTTP requests of the over-the-socket tests: [`exchange`] (one request, the response with
//! its body unread) and [`EventStream`] (an SSE answer read event by event while it stays open: a
//! GET stream, a POST stream carrying a backend's request, a `subscriptions/listen`).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcp_core::sse::{SseDecoder, SseEvent};

/// How long [`exchange`] waits for the response head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(20);

/// Sends `method http://{addr}{path}` with `headers` and `body` over plain HTTP/1.1 and returns
/// the response with its body unread. Panics when no response head arrives within 20 s (the
/// server hangs) or the request fails: this is a test helper.
pub async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response<Incoming> {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .expect("a valid test request");
    tokio::time::timeout(HEAD_TIMEOUT, client.request(request))
        .await
        .expect("no answer within 20 s: the server hangs")
        .expect("request failed")
}

/// An open response, read as SSE event by event.
pub struct EventStream {
    /// The response status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    body: Incoming,
    decoder: SseDecoder,
}

impl EventStream {
    /// Sends the request (see [`exchange`]) and returns the answer with its body unread.
    pub async fn open(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Self {
        let (parts, body) = exchange(addr, method, path, headers, body)
            .await
            .into_parts();
        Self {
            status: parts.status,
            headers: parts.headers,
            body,
            decoder: SseDecoder::new(),
        }
    }

    /// The next event (priming events included, as `data == ""`), or `None` when the stream ends
    /// or nothing arrives within `wait`.
    pub async fn next_event(&mut self, wait: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(event) = self.decoder.next_event().expect("valid SSE") {
                return Some(event);
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .ok()??;
            if let Ok(data) = frame.expect("body frame").into_data() {
                self.decoder.push(&data).expect("SSE push");
            }
        }
    }

    /// Whether the stream ends (its body completes or breaks) within `wait`; what arrives
    /// meanwhile is read and dropped. `false` means it was still open when `wait` passed.
    pub async fn ends_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return false,
                Ok(None | Some(Err(_))) => return true,
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        let _ = self.decoder.push(&data);
                    }
                }
            }
        }
    }

    /// Reads events until one whose data is a JSON message matching `wanted`, skipping the others
    /// (priming events, notifications); panics when none arrives within `wait`.
    pub async fn next_message_where(
        &mut self,
        wait: Duration,
        mut wanted: impl FnMut(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(event) = self.next_event(left).await else {
                panic!("the stream ended or stayed silent for {wait:?} before the awaited message");
            };
            let Ok(message) = serde_json::from_str::<serde_json::Value>(&event.data) else {
                continue;
            };
            if wanted(&message) {
                return message;
            }
        }
    }
}
