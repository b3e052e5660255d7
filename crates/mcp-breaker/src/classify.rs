//! Failure classification: [`DefaultClassifier`] and [`McpClassifier`], implementations of
//! `mcp-core`'s [`Classify`] (shared with `mcp-fallback`), and when an outcome is recorded:
//! [`Settle`], at once for every classifier, or at the end of a streamed answer with [`AtEnd`]
//! and [`CarryPermit`].

use std::time::Duration;

use http::{HeaderMap, Response, StatusCode};
use mcp_core::outcome::{Classify, Outcome, classify_mcp_head};
use mcp_core::{Envelope, MessageKind};

use crate::Permit;

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

/// The MCP classifier (book: docs/src/architecture.md): the backend is unhealthy when it cannot be reached, does not
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

/// Settles a call's permit when its response future completes: the classifiers of this crate and
/// closures record their outcome at once, [`AtEnd`] hands the permit of a good response to the
/// response itself, and [`Now`] records any other [`Classify`] at once.
pub trait Settle<T, E> {
    /// Records the outcome of `result` on `permit`, or hands `permit` on (a permit dropped
    /// unrecorded releases its slot and records nothing).
    fn settle(&self, result: &mut Result<T, E>, permit: Permit);
}

/// Records `classifier`'s outcome of `result` at once.
fn settle_now<C: Classify<T, E>, T, E>(classifier: &C, result: &Result<T, E>, permit: Permit) {
    let latency = permit.elapsed();
    let outcome = classifier.classify(result, latency);
    permit.record(outcome, latency);
}

impl<T, E> Settle<T, E> for DefaultClassifier {
    fn settle(&self, result: &mut Result<T, E>, permit: Permit) {
        settle_now(self, result, permit);
    }
}

impl<B, E> Settle<Response<B>, E> for McpClassifier {
    fn settle(&self, result: &mut Result<Response<B>, E>, permit: Permit) {
        settle_now(self, result, permit);
    }
}

impl<F, T, E> Settle<T, E> for F
where
    F: Fn(&Result<T, E>, Duration) -> Outcome,
{
    fn settle(&self, result: &mut Result<T, E>, permit: Permit) {
        settle_now(self, result, permit);
    }
}

/// Any [`Classify`] of your own, recorded at once when the response future completes (the
/// classifiers of this crate and closures need no wrapper).
#[derive(Debug, Clone, Copy, Default)]
pub struct Now<C>(pub C);

impl<C, T, E> Settle<T, E> for Now<C>
where
    C: Classify<T, E>,
{
    fn settle(&self, result: &mut Result<T, E>, permit: Permit) {
        settle_now(&self.0, result, permit);
    }
}

/// A response that records its call's breaker outcome itself, once it knows it (at the end of a
/// streamed answer): it keeps the [`Permit`] until then.
pub trait CarryPermit {
    /// Keeps `permit` until the outcome is known; then calls [`Permit::record`] (or
    /// [`Permit::record_elapsed`]).
    fn carry_permit(&mut self, permit: Permit);
}

/// Settles a good response's outcome when the response knows it ([`CarryPermit`], like
/// tower-http's `ClassifyEos` for streamed bodies) and classifies errors at once with `C`.
///
/// ```
/// use mcp_breaker::{AtEnd, CarryPermit, CircuitBreaker, DefaultClassifier, Outcome, Permit};
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// /// A streamed answer: its outcome is known when its last part has been read.
/// struct Streamed { permit: Option<Permit>, parts: Vec<Result<&'static str, ()>> }
/// impl CarryPermit for Streamed {
///     fn carry_permit(&mut self, permit: Permit) { self.permit = Some(permit); }
/// }
/// impl Streamed {
///     fn read_all(mut self) {
///         let outcome = if self.parts.iter().all(Result::is_ok) { Outcome::Success } else { Outcome::Failure };
///         if let Some(permit) = self.permit.take() { permit.record_elapsed(outcome); }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let breaker = CircuitBreaker::builder("stream").consecutive_failures(1).build()?;
/// let svc = ServiceBuilder::new()
///     .layer(breaker.layer().classifier(AtEnd(DefaultClassifier)))
///     .service(service_fn(|_: ()| async {
///         Ok::<_, std::io::Error>(Streamed { permit: None, parts: vec![Ok("head"), Err(())] })
///     }));
/// let answer = svc.oneshot(()).await?;
/// // The head was fine: nothing recorded yet.
/// assert_eq!(breaker.snapshot().state, mcp_breaker::BreakerState::Closed);
/// answer.read_all(); // the stream broke: a failure, and one trips this breaker
/// assert_eq!(breaker.snapshot().state, mcp_breaker::BreakerState::Open);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct AtEnd<C = DefaultClassifier>(pub C);

impl<C, T, E> Settle<T, E> for AtEnd<C>
where
    C: Classify<T, E>,
    T: CarryPermit,
{
    fn settle(&self, result: &mut Result<T, E>, permit: Permit) {
        match result {
            Ok(response) => response.carry_permit(permit),
            Err(_) => settle_now(&self.0, result, permit),
        }
    }
}
