//! `GET …/sse`: opens a session and answers with its event stream, whose first event names the
//! endpoint for the client's messages.

use std::sync::Arc;

use http::request::Parts;
use http::{HeaderValue, Method, Response, StatusCode, header};
use mcp_core::sse::SseEvent;
use tokio::sync::oneshot;

use super::body::{EventStream, SseBridgeBody};
use super::queue::queue;
use super::registry::{BridgeSession, Full, Opening, new_session_id};
use super::relay::{self, InnerCall};
use super::{
    DETAIL_TOO_MANY_PRINCIPAL_SESSIONS, DETAIL_TOO_MANY_SESSIONS, MCP_PATH_SUFFIX,
    MESSAGES_PATH_SUFFIX, Refusal, SSE_PATH_SUFFIX, Shared, admitted, detail, local,
};

pub(crate) fn open<B>(
    shared: &Shared,
    parts: Parts,
    call: InnerCall,
) -> Response<SseBridgeBody<B>> {
    let stream = match start(shared, parts, call) {
        Ok(stream) => stream,
        Err(res) => return local(*res),
    };
    let mut res = Response::new(SseBridgeBody::Events { body: stream });
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Reverse proxies that buffer responses (nginx) would hold the events back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}

/// Registers the session and starts the task that ends it when the client goes away, the
/// credentials it was opened with expire or the caller's configuration drops the virtual host.
fn start(shared: &Shared, parts: Parts, call: InnerCall) -> Result<EventStream, Refusal> {
    if parts.method != Method::GET {
        let mut res = detail(
            StatusCode::METHOD_NOT_ALLOWED,
            "Only GET opens the SSE stream",
        );
        res.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return Err(Box::new(res));
    }
    let ctx = admitted(&parts.extensions)?;
    let stream_ends = ctx.stream_ends();
    let id = new_session_id().ok_or_else(|| {
        Box::new(detail(
            StatusCode::INTERNAL_SERVER_ERROR,
            "No system randomness",
        ))
    })?;
    let path = parts.uri.path();
    let base = path.strip_suffix(SSE_PATH_SUFFIX).unwrap_or(path);
    let endpoint = format!("{base}{MESSAGES_PATH_SUFFIX}?sessionId={id}");
    let slot = shared.registry.admit(&ctx.principal).map_err(|full| {
        // 429 when the principal holds its share (its own doing), 503 when the gateway is full.
        let mut res = match full {
            Full::Principal => detail(
                StatusCode::TOO_MANY_REQUESTS,
                DETAIL_TOO_MANY_PRINCIPAL_SESSIONS,
            ),
            Full::All => detail(StatusCode::SERVICE_UNAVAILABLE, DETAIL_TOO_MANY_SESSIONS),
        };
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        Box::new(res)
    })?;
    let (events, receiver) = queue(slot.account().clone());
    let (end, ended) = oneshot::channel();
    let session = Arc::new(BridgeSession::new(
        id,
        ctx.principal,
        ctx.vhost_id,
        events,
        end,
        Opening {
            mcp_path: format!("{base}{MCP_PATH_SUFFIX}"),
            headers: parts.headers,
            extensions: parts.extensions,
        },
    ));
    shared.registry.insert(Arc::clone(&session), slot);
    tokio::spawn(relay::end_when_closed(
        Arc::clone(&shared.registry),
        session,
        call,
        stream_ends,
    ));
    let endpoint = SseEvent::message(endpoint).with_event("endpoint").encode();
    Ok(EventStream::new(
        endpoint,
        receiver,
        ended,
        shared.keep_alive,
    ))
}
