//! Failure classification: [`DefaultClassifier`] and [`McpClassifier`], implementations of
//! `mcp-core`'s [`Classify`] (shared with `mcp-fallback`).

use std::time::Duration;

use http::{HeaderMap, Response, StatusCode};
use mcp_core::outcome::{Classify, Outcome, classify_mcp_head};
use mcp_core::{Envelope, MessageKind};

/// `Ok` is a success, `Err` a failure: right for clients whose errors are all transport errors.
/// The default of [`BreakerLayer`](crate::BreakerLayer).
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultClassifier;

impl<T, E> Classify<T, E> for DefaultClassifier {
    fn classify(&self, result: &Result<T, E>, _latency: Duration) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
}

/// The MCP classifier (DESIGN §6.5): the backend is unhealthy when it cannot be reached, does not
/// answer in time, answers 5xx, or answers something that is not MCP; a JSON-RPC error or a tool
/// result with `isError: true` is the backend working correctly.
///
/// As a [`Classify`] over `Result<http::Response<B>, E>` it sees only the status line and headers,
/// never the body (the body is still streaming when the response future completes):
///
/// | result | outcome | why |
/// |---|---|---|
/// | `Err(_)` | failure | connect error, timeout (e.g. tower's `Timeout` outside the client), broken connection: anything the client reports as an error |
/// | 5xx | failure | the backend or its proxy is failing |
/// | 408, 429 | failure | timed out / overloaded: shed load from it |
/// | 3xx | failure | not an MCP answer (clients do not follow redirects for POSTs to an MCP endpoint) |
/// | 202, 204 | success | accepted notification / empty answer |
/// | other 2xx with `Content-Type` `application/json` or `text/event-stream` | success | a JSON-RPC message or stream: application errors and `isError` results live in the body, so they are successes by construction |
/// | other 2xx with another or no `Content-Type` (unless `Content-Length: 0`) | failure | malformed answer (an HTML error page from a proxy, say) |
/// | other 4xx | success | the backend is up and answered (auth, bad request, expired session 404) |
///
/// A caller that has read the JSON-RPC message (the router, after buffering a JSON body or
/// reading the final SSE event) refines this with [`McpClassifier::classify_message`] or
/// [`McpClassifier::classify_body`]: a response or an error object is a success, an unparsable
/// body or a message that is not a response is a failure (malformed).
///
/// ```
/// use std::time::Duration;
/// use http::{Response, StatusCode};
/// use mcp_breaker::{Classify, McpClassifier, Outcome};
///
/// let ok = Response::builder().header("content-type", "application/json").body(()).unwrap();
/// assert_eq!(McpClassifier.classify(&Ok::<_, ()>(ok), Duration::ZERO), Outcome::Success);
/// let bad = Response::builder().status(StatusCode::BAD_GATEWAY).body(()).unwrap();
/// assert_eq!(McpClassifier.classify(&Ok::<_, ()>(bad), Duration::ZERO), Outcome::Failure);
///
/// let tool_error = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#;
/// assert_eq!(McpClassifier::classify_body(tool_error), Outcome::Success);
/// let rpc_error = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool"}}"#;
/// assert_eq!(McpClassifier::classify_body(rpc_error), Outcome::Success);
/// assert_eq!(McpClassifier::classify_body(b"<html>"), Outcome::Failure);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct McpClassifier;

impl McpClassifier {
    /// The outcome of a response head (see the table in the type docs).
    pub fn classify_head(status: StatusCode, headers: &HeaderMap) -> Outcome {
        classify_mcp_head(status, headers)
    }

    /// The outcome of the JSON-RPC message a backend answered with: a response (any `result`,
    /// including `isError: true`) or an error object is a success; a request or notification where
    /// a response was due is a failure.
    pub fn classify_message(message: &Envelope<'_>) -> Outcome {
        match message.kind() {
            MessageKind::Response | MessageKind::Error => Outcome::Success,
            MessageKind::Request | MessageKind::Notification => Outcome::Failure,
        }
    }

    /// [`classify_message`](Self::classify_message) on a buffered JSON body; a body that is not a
    /// JSON-RPC message is a failure.
    pub fn classify_body(body: &[u8]) -> Outcome {
        Envelope::parse(body)
            .map(|m| Self::classify_message(&m))
            .unwrap_or(Outcome::Failure)
    }
}

impl<B, E> Classify<Response<B>, E> for McpClassifier {
    fn classify(&self, result: &Result<Response<B>, E>, _latency: Duration) -> Outcome {
        match result {
            Ok(res) => Self::classify_head(res.status(), res.headers()),
            Err(_) => Outcome::Failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use http::header;

    use super::*;

    fn head(status: u16, content_type: Option<&str>) -> Outcome {
        let mut b = Response::builder().status(status);
        if let Some(ct) = content_type {
            b = b.header(header::CONTENT_TYPE, ct);
        }
        let res = b.body(()).expect("response");
        McpClassifier.classify(&Ok::<_, io::Error>(res), Duration::ZERO)
    }

    #[test]
    fn transport_errors_are_failures() {
        for kind in [
            io::ErrorKind::ConnectionRefused,
            io::ErrorKind::TimedOut,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::UnexpectedEof,
        ] {
            let r: Result<Response<()>, io::Error> = Err(io::Error::from(kind));
            assert_eq!(
                McpClassifier.classify(&r, Duration::ZERO),
                Outcome::Failure,
                "{kind:?}"
            );
            assert_eq!(
                DefaultClassifier.classify(&r, Duration::ZERO),
                Outcome::Failure
            );
        }
        assert_eq!(
            DefaultClassifier.classify(&Ok::<_, ()>(1), Duration::ZERO),
            Outcome::Success
        );
    }

    #[test]
    fn status_and_content_type() {
        for s in [500, 502, 503, 504, 599, 408, 429, 301, 307] {
            assert_eq!(head(s, Some("application/json")), Outcome::Failure, "{s}");
        }
        for s in [400, 401, 403, 404, 405, 406, 413] {
            assert_eq!(head(s, None), Outcome::Success, "{s}");
        }
        assert_eq!(head(202, None), Outcome::Success);
        assert_eq!(head(204, None), Outcome::Success);
        assert_eq!(head(200, Some("application/json")), Outcome::Success);
        assert_eq!(
            head(200, Some("Application/JSON; charset=utf-8")),
            Outcome::Success
        );
        assert_eq!(head(200, Some("text/event-stream")), Outcome::Success);
        assert_eq!(head(200, Some("text/html")), Outcome::Failure);
        assert_eq!(head(200, None), Outcome::Failure);
        let empty = Response::builder()
            .header(header::CONTENT_LENGTH, "0")
            .body(())
            .expect("response");
        assert_eq!(
            McpClassifier::classify_head(empty.status(), empty.headers()),
            Outcome::Success
        );
    }

    #[test]
    fn parsed_messages() {
        let ok = br#"{"jsonrpc":"2.0","id":"a","result":{"tools":[]}}"#;
        assert_eq!(McpClassifier::classify_body(ok), Outcome::Success);
        let internal = br#"{"jsonrpc":"2.0","id":"a","error":{"code":-32603,"message":"boom"}}"#;
        assert_eq!(McpClassifier::classify_body(internal), Outcome::Success);
        let null_id_error = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#;
        assert_eq!(
            McpClassifier::classify_body(null_id_error),
            Outcome::Success
        );
        let request = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(McpClassifier::classify_body(request), Outcome::Failure);
        let notification = br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#;
        assert_eq!(McpClassifier::classify_body(notification), Outcome::Failure);
        assert_eq!(McpClassifier::classify_body(b"{"), Outcome::Failure);
        assert_eq!(
            McpClassifier::classify_body(br#"{"id":1,"result":{}}"#),
            Outcome::Failure
        );
        assert_eq!(McpClassifier::classify_body(b""), Outcome::Failure);
    }
}
