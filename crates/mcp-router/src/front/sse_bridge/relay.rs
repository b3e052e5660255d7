//! The bridge's side of the inner service: each posted message becomes an internal
//! streamable-HTTP request, and every message of the answer (JSON or SSE) becomes an
//! `event: message` on the client's stream; after `initialize`, the inner GET stream is relayed
//! too; when the client goes away, the inner session is deleted.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{Extensions, HeaderMap, HeaderValue, Method, Request, Response, Uri, header};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use mcp_core::headers::{LAST_EVENT_ID, MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use mcp_core::sse::{SseDecoder, SseEvent};
use mcp_core::{Envelope, ErrorObject, MessageKind, RequestId, encode_error};
use tower_service::Service;

use super::SseTransport;
use super::registry::{BridgeSession, InnerSession, Registry};
use crate::body::{BoxError, McpBody};

/// The answer of one internal request; `None` when the inner service failed (logged).
pub(crate) type InnerFuture = Pin<Box<dyn Future<Output = Option<Response<McpBody>>> + Send>>;

/// Sends an internal request to (a clone of) the inner service.
pub(crate) type InnerCall = Arc<dyn Fn(Request<Full<Bytes>>) -> InnerFuture + Send + Sync>;

/// Wraps `service` as an [`InnerCall`]; its body becomes an [`McpBody`] so the relays need not be
/// generic.
pub(crate) fn caller<S, B>(service: S) -> InnerCall
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // A mutex, not an `S: Sync` bound: the service is only cloned through it.
    let service = Mutex::new(service);
    Arc::new(move |req| {
        let mut service = service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Box::pin(async move {
            let ready = poll_fn(|cx| service.poll_ready(cx))
                .await
                .map_err(Into::into);
            let answer = match ready {
                Ok(()) => service.call(req).await.map_err(Into::into),
                Err(e) => Err(e),
            };
            match answer {
                Ok(res) => Some(res.map(|body| body.map_err(Into::into).boxed_unsync())),
                Err(e) => {
                    tracing::warn!(error = %e, "SSE bridge: the inner service failed");
                    None
                }
            }
        })
    })
}

/// Headers of the client's request that never reach the inner request: hop-by-hop and framing
/// headers, and those the bridge owns (content negotiation, the inner session).
fn owned_by_bridge(name: &header::HeaderName) -> bool {
    [
        header::CONNECTION,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::TE,
        header::UPGRADE,
        header::HOST,
        header::ACCEPT,
        header::CONTENT_TYPE,
        MCP_SESSION_ID,
        MCP_PROTOCOL_VERSION,
        LAST_EVENT_ID,
    ]
    .contains(name)
        || name.as_str() == "keep-alive"
}

/// An internal request with the client's headers (trace context, headers a backend's
/// `passthrough` names) and extensions (virtual host, principal, configs).
fn inner_request(
    method: Method,
    session: &BridgeSession,
    headers: &HeaderMap,
    extensions: Extensions,
    body: Bytes,
) -> Request<Full<Bytes>> {
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = method.clone();
    *req.uri_mut() = Uri::try_from(session.opening.mcp_path.as_str()).unwrap_or_default();
    *req.extensions_mut() = extensions;
    req.extensions_mut().insert(SseTransport);
    let out = req.headers_mut();
    for (name, value) in headers {
        if !owned_by_bridge(name) {
            out.append(name.clone(), value.clone());
        }
    }
    let accept = if method == Method::GET {
        "text/event-stream"
    } else {
        "application/json, text/event-stream"
    };
    out.insert(header::ACCEPT, HeaderValue::from_static(accept));
    if method == Method::POST {
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    let inner = session.inner();
    if let Some(id) = inner.session_id {
        out.insert(MCP_SESSION_ID, id);
    }
    if let Some(version) = inner.protocol_version {
        out.insert(MCP_PROTOCOL_VERSION, version);
    }
    req
}

/// One posted message (or batch, element by element), until the client goes away.
pub(crate) struct Posted {
    pub(crate) session: Arc<BridgeSession>,
    pub(crate) call: InnerCall,
    pub(crate) headers: HeaderMap,
    pub(crate) extensions: Extensions,
    pub(crate) messages: Vec<Bytes>,
}

/// Forwards the posted messages concurrently (a call waiting for the client's answer to a
/// server request must not hold up that answer) and relays their answers.
pub(crate) async fn forward(posted: Posted) {
    let Posted {
        session,
        call,
        headers,
        extensions,
        messages,
    } = posted;
    let work = futures_util::future::join_all(
        messages
            .into_iter()
            .map(|message| forward_one(&session, &call, &headers, extensions.clone(), message)),
    );
    tokio::select! {
        () = session.events.closed() => {}
        _ = work => {}
    }
}

async fn forward_one(
    session: &Arc<BridgeSession>,
    call: &InnerCall,
    headers: &HeaderMap,
    extensions: Extensions,
    message: Bytes,
) {
    let env = Envelope::parse(&message).ok();
    let id = env
        .as_ref()
        .filter(|env| env.kind() == MessageKind::Request)
        .and_then(|env| env.id().cloned());
    // Each `initialize` opens an inner session: only the session's first goes in, so a batch of
    // them (or a racing one) cannot leave inner sessions nobody deletes.
    let initializing = env
        .as_ref()
        .is_some_and(|env| env.method() == Some("initialize"));
    drop(env);
    if initializing && !session.claim_initialize() {
        if let Some(id) = &id {
            let error =
                ErrorObject::invalid_request("SSE bridge: the session is already initialized");
            send(session, &encode_error(Some(id), &error)).await;
        }
        return;
    }
    let req = inner_request(Method::POST, session, headers, extensions, message);
    let Some(res) = call(req).await else {
        fail(
            session,
            id.as_ref(),
            "the gateway could not serve the message",
        )
        .await;
        return;
    };
    let new_session = res
        .headers()
        .get(MCP_SESSION_ID)
        .filter(|_| initializing)
        .cloned();
    if is_event_stream(&res) {
        if !relay_events(session, res.into_body(), id.as_ref()).await {
            fail(session, id.as_ref(), "the answer broke off").await;
        }
    } else {
        relay_json(session, call, res, id.as_ref(), new_session).await;
    }
}

/// Relays a JSON answer; an `initialize` answer (`new_session`) is adopted first.
async fn relay_json(
    session: &Arc<BridgeSession>,
    call: &InnerCall,
    res: Response<McpBody>,
    id: Option<&RequestId>,
    new_session: Option<HeaderValue>,
) {
    let status = res.status();
    let Ok(body) = res.into_body().collect().await.map(|c| c.to_bytes()) else {
        fail(session, id, "the answer broke off").await;
        return;
    };
    if Envelope::parse(&body).is_err() {
        // 202 for notifications and responses; anything else without a JSON-RPC message would
        // leave a request unanswered.
        if !status.is_success() {
            let text = format!("the gateway answered HTTP {}", status.as_u16());
            fail(session, id, &text).await;
        }
        return;
    }
    if let Some(session_id) = new_session {
        adopt(session, call, session_id, &body);
    }
    send(session, &body).await;
}

/// Records the inner session an `initialize` opened (before its answer reaches the client, whose
/// next message needs it) and starts relaying the inner GET stream.
fn adopt(session: &Arc<BridgeSession>, call: &InnerCall, session_id: HeaderValue, body: &[u8]) {
    let protocol_version = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/result/protocolVersion")
                .and_then(|p| p.as_str())
                .and_then(|p| HeaderValue::from_str(p).ok())
        });
    let adopted = session.set_inner(InnerSession {
        session_id: Some(session_id),
        protocol_version,
    });
    if !adopted {
        return;
    }
    if session.events.is_closed() {
        // The client left while `initialize` ran: `end_when_closed` found no inner session to
        // delete, so it is deleted here.
        tokio::spawn(delete_inner(Arc::clone(session), Arc::clone(call)));
        return;
    }
    tokio::spawn(relay_get_stream(Arc::clone(session), Arc::clone(call)));
}

fn is_event_stream<B>(res: &Response<B>) -> bool {
    mcp_core::media::media_kind(res.headers()) == mcp_core::media::MediaKind::EventStream
}

/// Relays the inner GET stream (backend notifications and requests) until it ends or the client
/// goes away.
async fn relay_get_stream(session: Arc<BridgeSession>, call: InnerCall) {
    let req = inner_request(
        Method::GET,
        &session,
        &session.opening.headers,
        session.opening.extensions.clone(),
        Bytes::new(),
    );
    let work = async {
        let Some(res) = call(req).await else { return };
        if res.status().is_success() && is_event_stream(&res) {
            relay_events(&session, res.into_body(), None).await;
        } else {
            tracing::debug!(status = %res.status(), "SSE bridge: no inner GET stream");
        }
        // The inner GET stream ends with its session (expired, or ended on another path): then
        // the client's stream is ended too, which releases everything the bridge holds for it.
        if !inner_session_alive(&session, &call).await {
            tracing::debug!("SSE bridge: the inner session ended; ending the client's stream");
            session.end_stream();
        }
    };
    tokio::select! {
        () = session.events.closed() => {}
        () = work => {}
    }
}

/// Whether the inner session still exists: a `ping` in it is not answered `404`.
async fn inner_session_alive(session: &BridgeSession, call: &InnerCall) -> bool {
    let ping = Bytes::from_static(
        br#"{"jsonrpc":"2.0","id":"mcp-gateway-sse-bridge-probe","method":"ping"}"#,
    );
    let req = inner_request(
        Method::POST,
        session,
        &session.opening.headers,
        session.opening.extensions.clone(),
        ping,
    );
    match call(req).await {
        Some(res) => res.status() != http::StatusCode::NOT_FOUND,
        // The inner service failed: not proof that the session is gone.
        None => true,
    }
}

/// Copies every message of an SSE body onto the client's stream (priming events carry no data
/// and are not dispatched by the decoder). Returns false when the body broke off before the
/// response to `id` (when given) went out, so the caller can answer the request itself.
async fn relay_events(session: &BridgeSession, mut body: McpBody, id: Option<&RequestId>) -> bool {
    let mut decoder = SseDecoder::new();
    let mut answered = id.is_none();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if decoder.push(&data).is_err() {
            return answered;
        }
        while let Ok(Some(event)) = decoder.next_event() {
            answered |= id.is_some_and(|id| answers(event.data.as_bytes(), id));
            if !send(session, event.data.as_bytes()).await {
                return true; // the client is gone: nobody to answer
            }
        }
    }
    answered
}

/// Whether `message` is the response (or error) to request `id`.
fn answers(message: &[u8], id: &RequestId) -> bool {
    Envelope::parse(message).is_ok_and(|env| {
        matches!(env.kind(), MessageKind::Response | MessageKind::Error) && env.id() == Some(id)
    })
}

/// Answers the request `id` (if the message was a request) with an internal error, so the client
/// is not left waiting.
async fn fail(session: &BridgeSession, id: Option<&RequestId>, what: &str) {
    if let Some(id) = id {
        let error = ErrorObject::internal(format!("SSE bridge: {what}"));
        send(session, &encode_error(Some(id), &error)).await;
    }
}

/// Sends one message as `event: message`; false when the client went away.
async fn send(session: &BridgeSession, message: &[u8]) -> bool {
    let data = String::from_utf8_lossy(message);
    let event = SseEvent::message(data.trim_end()).with_event("message");
    session.events.send(event.encode()).await
}

/// Waits until the client's stream is gone, then forgets the session and deletes its inner
/// session (which ends the upstream sessions no other session of the caller uses).
pub(crate) async fn end_when_closed(
    registry: Arc<Registry>,
    session: Arc<BridgeSession>,
    call: InnerCall,
    stream_ends: impl std::future::Future<Output = ()>,
) {
    tokio::select! {
        () = session.events.closed() => {}
        // The stream never outlives the credentials or the configuration it was opened with:
        // the client opens a new session (the 2024-11-05 transport cannot resume one).
        () = stream_ends => session.end_stream(),
    }
    registry.remove(&session.id);
    delete_inner(session, call).await;
}

/// Deletes the session's inner session, if it has one.
async fn delete_inner(session: Arc<BridgeSession>, call: InnerCall) {
    if session.inner().session_id.is_none() {
        return;
    }
    let req = inner_request(
        Method::DELETE,
        &session,
        &session.opening.headers,
        session.opening.extensions.clone(),
        Bytes::new(),
    );
    if let Some(res) = call(req).await {
        tracing::debug!(status = %res.status(), "SSE bridge: inner session deleted");
    }
}
