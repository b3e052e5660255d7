//! Building the router's HTTP responses.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use mcp_core::{ErrorObject, RequestId, encode_error};

use crate::body::{self, McpBody};

const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
const EVENT_STREAM: HeaderValue = HeaderValue::from_static("text/event-stream");

/// A JSON response.
pub(crate) fn json(status: StatusCode, bytes: impl Into<Bytes>) -> Response<McpBody> {
    let mut res = Response::new(body::full(bytes));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, APPLICATION_JSON);
    res
}

/// The JSON-RPC error code of an error response the router made itself (for `error.type`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct JsonRpcErrorCode(pub(crate) i64);

/// A JSON-RPC error response with an HTTP status.
pub(crate) fn error(
    status: StatusCode,
    id: Option<&RequestId>,
    error: &ErrorObject,
) -> Response<McpBody> {
    let mut res = json(status, encode_error(id, error));
    res.extensions_mut().insert(JsonRpcErrorCode(error.code));
    res
}

/// `202 Accepted` with no body (an accepted notification).
pub(crate) fn accepted() -> Response<McpBody> {
    let mut res = Response::new(body::empty());
    *res.status_mut() = StatusCode::ACCEPTED;
    res
}

/// An SSE response streaming `body`.
pub(crate) fn sse(body: McpBody) -> Response<McpBody> {
    let mut res = Response::new(body);
    let headers = res.headers_mut();
    headers.insert(header::CONTENT_TYPE, EVENT_STREAM);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Reverse proxies (nginx) must not buffer the stream (2026-07-28 transport recommendation).
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}

/// `405 Method Not Allowed` with `Allow: POST` and a JSON-RPC error body.
pub(crate) fn method_not_allowed(message: &str) -> Response<McpBody> {
    let mut res = error(
        StatusCode::METHOD_NOT_ALLOWED,
        None,
        &ErrorObject::invalid_request(message),
    );
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    res
}

/// `503` with JSON-RPC error `-32603` and `Retry-After: 1`: the session store cannot be reached
/// (a Redis outage or failover); the client retries, the session itself is not lost.
pub(crate) fn store_unavailable(id: Option<&RequestId>, message: String) -> Response<McpBody> {
    let mut res = error(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        &ErrorObject::internal(message),
    );
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    res
}

/// `429` with JSON-RPC error `-32600`: the principal holds its share of notification streams.
pub(crate) fn too_many_streams(max: usize) -> Response<McpBody> {
    let mut res = error(
        StatusCode::TOO_MANY_REQUESTS,
        None,
        &ErrorObject::invalid_request(format!(
            "Too many notification streams for this principal (at most {max} GET and subscriptions/listen streams)"
        )),
    );
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    res
}

/// `508 Loop Detected` with JSON-RPC error `-32600`: the request came from this deployment
/// itself, or through too many intermediaries (`crate::hops`).
pub(crate) fn loop_detected(refusal: crate::hops::HopRefusal) -> Response<McpBody> {
    let message = match refusal {
        crate::hops::HopRefusal::Loop => "Loop detected: this request was sent by this gateway \
             deployment (a backend URL leads back to it)"
            .to_owned(),
        crate::hops::HopRefusal::TooMany(count) => format!(
            "Loop detected: this request passed {count} gateways or proxies (its Via header), more than this gateway accepts"
        ),
    };
    error(
        StatusCode::LOOP_DETECTED,
        None,
        &ErrorObject::invalid_request(message),
    )
}
