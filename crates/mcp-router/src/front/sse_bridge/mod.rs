//! The deprecated 2024-11-05 HTTP+SSE transport for clients, bridged onto the 2025 session engine.
//!
//! [`SseBridgeLayer`] wraps the router (or anything serving streamable HTTP at `…/mcp` behind the
//! foundation layers) and adds, for virtual hosts whose configuration sets `sse_downstream = true`:
//!
//! - `GET …/sse` opens a session: `200 text/event-stream` whose first event is
//!   `event: endpoint` with `data: …/messages?sessionId=<id>` (the path the client used, `/sse`
//!   replaced); every server message follows as `event: message`; an SSE comment
//!   (`: keep-alive`) is sent after each idle period (15 s by default).
//! - `POST …/messages?sessionId=<id>` takes one JSON-RPC message or a batch and answers
//!   `202 Accepted`. Each message becomes an internal streamable-HTTP POST to the inner service
//!   with the request's extensions (virtual host, principal, configs) and headers, plus the
//!   `Mcp-Session-Id` and `MCP-Protocol-Version` that the inner `initialize` negotiated; every
//!   message of the inner answer (JSON or SSE) is copied onto the client's stream. After
//!   `initialize` the inner GET stream (backend notifications and requests) is relayed too.
//! - When the client's stream closes, the session's tasks end and the inner session is deleted
//!   (an internal DELETE), which ends the upstream sessions no other session of the caller uses.
//!   When the inner session ends first (it expired: its GET stream ended and a `ping` in it gets
//!   `404`), or the credentials the stream was opened with expire (token `exp` plus leeway,
//!   `mcp_core::ValidUntil`), the client's stream is ended, which releases the same way.
//!
//! So there is one protocol implementation: the bridge only moves messages between the two
//! transports. It lives in `mcp-router` rather than in the gateway because it is MCP transport
//! logic that an integrator mounting the router alone needs as much as the reference gateway does,
//! and because it reads the same request facts as the router (the `VirtualHost` configuration
//! and the `Principal`) and answers with the router's error conventions.
//!
//! | request | answer |
//! |---|---|
//! | virtual host without `sse_downstream` | `404` `{"detail":"SSE transport not enabled for this virtual host"}` |
//! | `GET …/sse` by a principal holding [`max_sessions_per_principal`](SseBridgeLayer::max_sessions_per_principal) open streams (default 16) | `429` + `Retry-After: 5`, `{"detail":"Too many open SSE sessions for this principal"}` |
//! | `GET …/sse` with [`max_sessions`](SseBridgeLayer::max_sessions) streams open (default 1024) | `503` + `Retry-After: 5`, `{"detail":"Too many open SSE sessions"}` |
//! | a client that leaves [`max_queued_bytes_per_principal`](SseBridgeLayer::max_queued_bytes_per_principal) of events unread (default 16 MiB; 64 events per session) | its sessions take nothing more from their backends until it reads (backpressure, nothing dropped); a session with nothing queued still sends one event at a time |
//! | `POST …/messages` whose messages (a batch counts each) do not fit in the 64 the session may have being forwarded | `429` + `Retry-After: 1`, `{"detail":"Too many messages in flight for this session"}` |
//! | a batch of more than [`max_batch`](SseBridgeLayer::max_batch) messages (default 32) | `400` JSON-RPC error `-32600` `Batch too large: …`, `id: null`; nothing is forwarded |
//! | a second `initialize` in a session (also inside a batch) | JSON-RPC error `-32600` on the stream; only the first opens an inner session |
//! | `POST …/messages` without `sessionId` | `400` `{"detail":"Missing sessionId query parameter"}` |
//! | unknown session id, or one another principal (or virtual host) opened | `404` `{"detail":"Session not found"}` |
//! | body over [`max_body_bytes`](SseBridgeLayer::max_body_bytes) | `413` `{"detail":"Request body too large"}` |
//! | body not JSON (empty batch) | `400` JSON-RPC error `-32700` (`-32600`), `id: null` |
//! | other methods | `405` with `Allow` |
//! | missing virtual host id or principal (no foundation layers) | `400` `{"detail":"Routing problem: …"}` |
//!
//! Session ids are 128 random bits (hex) and bound to the principal and virtual host that opened
//! the stream. Sessions live in this process: behind several gateway nodes, a client's stream and
//! its POSTs must reach the same node (sticky routing), whatever the session store of the router.
//! The stream's `endpoint` is an absolute path as this layer sees it: a proxy that strips a prefix
//! in front of the gateway must rewrite it. The inner GET stream is not reopened when it ends.
//!
//! ```
//! use mcp_router::McpRouter;
//! use mcp_router::sse_bridge::SseBridgeLayer;
//! use tower_layer::Layer;
//!
//! // Behind the foundation layers, with `PathPattern::default().also_suffix("/sse")
//! // .also_suffix("/messages")` in `mcp-vhost` so that the two paths get through.
//! let service = SseBridgeLayer::new()
//!     .max_body_bytes(4 * 1024 * 1024)
//!     .layer(McpRouter::builder().build());
//! # let _ = service;
//! ```

mod body;
mod open;
mod post;
mod queue;
mod registry;
mod relay;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Extensions, HeaderValue, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::Full;
use mcp_core::{Budget, Era};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

pub use body::{EventStream, SseBridgeBody};
use registry::Registry;

use crate::body::BoxError;
use crate::context::{self, RequestContext};

/// Path suffix of the stream endpoint.
pub const SSE_PATH_SUFFIX: &str = "/sse";
/// Path suffix of the message endpoint.
pub const MESSAGES_PATH_SUFFIX: &str = "/messages";
/// Path suffix of the inner streamable-HTTP endpoint the internal requests name.
const MCP_PATH_SUFFIX: &str = "/mcp";
/// Detail of the 404 for a virtual host without `sse_downstream`.
pub const DETAIL_NOT_ENABLED: &str = "SSE transport not enabled for this virtual host";
/// Detail of the 404 for an unknown (or another principal's) session id.
pub const DETAIL_SESSION_NOT_FOUND: &str = "Session not found";
/// Detail of the 503 when [`SseBridgeLayer::max_sessions`] streams are open.
pub const DETAIL_TOO_MANY_SESSIONS: &str = "Too many open SSE sessions";
/// Detail of the 429 when the principal holds [`SseBridgeLayer::max_sessions_per_principal`]
/// open streams.
pub const DETAIL_TOO_MANY_PRINCIPAL_SESSIONS: &str =
    "Too many open SSE sessions for this principal";
/// Most posted messages of one session being forwarded at once (each message of a batch counts):
/// a client that posts without reading its stream cannot pile up work without bound.
pub const MAX_POSTS_IN_FLIGHT: usize = 64;
/// Detail of the 429 when the posted messages do not fit in the session's
/// [`MAX_POSTS_IN_FLIGHT`].
pub const DETAIL_TOO_MANY_POSTS: &str = "Too many messages in flight for this session";

/// Request extension of the bridge's internal requests: the client speaks the HTTP+SSE transport,
/// so the session engine may negotiate its revision, 2024-11-05 (refused over streamable HTTP).
/// Extensions cannot come from the wire, so a client of `…/mcp` cannot claim it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SseTransport;

/// State shared by the layer and every service it made.
#[derive(Debug)]
struct Shared {
    registry: Arc<Registry>,
    max_body_bytes: usize,
    max_batch: usize,
    keep_alive: Duration,
}

/// Adds the 2024-11-05 HTTP+SSE transport in front of a streamable-HTTP MCP service; see the
/// [module docs](self).
#[derive(Clone, Debug)]
pub struct SseBridgeLayer {
    shared: Arc<Shared>,
}

impl Default for SseBridgeLayer {
    fn default() -> Self {
        Self {
            shared: Arc::new(Shared {
                registry: Arc::new(Registry::new(
                    Budget::new("sse_sessions")
                        .with_slots(16, 1024)
                        .with_bytes(16 << 20, 256 << 20),
                )),
                max_body_bytes: 4 * 1024 * 1024,
                max_batch: 32,
                keep_alive: Duration::from_secs(15),
            }),
        }
    }
}

impl SseBridgeLayer {
    /// A layer with the defaults: 1024 open streams (16 per principal), 256 MiB of events
    /// queued for clients (16 MiB per principal), 4 MiB messages, batches of 32, keep-alive
    /// after 15 s idle.
    pub fn new() -> Self {
        Self::default()
    }

    /// The most SSE streams open at once (default 1024); more get `503`. Each holds a task, an
    /// inner session and its upstream sessions, so this bounds what idle clients can pin.
    #[must_use]
    pub fn max_sessions(self, max: usize) -> Self {
        self.with_budget(|b| {
            let share = b.slots_share();
            b.with_slots(share, max)
        })
    }

    /// The most SSE streams one principal may hold open (default 16); more get `429`, while
    /// other principals still connect up to [`max_sessions`](Self::max_sessions) in all.
    #[must_use]
    pub fn max_sessions_per_principal(self, max: usize) -> Self {
        self.with_budget(|b| {
            let ceiling = b.slots_ceiling();
            b.with_slots(max, ceiling)
        })
    }

    /// The most bytes of events one principal's clients may leave unread in all its sessions'
    /// queues (default 16 MiB). Past it, a session that still has events queued waits for its
    /// client before it takes more from the backend (backpressure; nothing is dropped), and a
    /// session with nothing queued sends one event at a time.
    #[must_use]
    pub fn max_queued_bytes_per_principal(self, max: usize) -> Self {
        self.with_budget(|b| {
            let ceiling = b.bytes_ceiling();
            b.with_bytes(max, ceiling)
        })
    }

    /// The most bytes of events all clients may leave unread (default 256 MiB); past it,
    /// sessions wait as under
    /// [`max_queued_bytes_per_principal`](Self::max_queued_bytes_per_principal).
    #[must_use]
    pub fn max_queued_bytes(self, max: usize) -> Self {
        self.with_budget(|b| {
            let share = b.bytes_share();
            b.with_bytes(share, max)
        })
    }

    /// The most messages in one posted batch (default 32); a larger batch gets `400` with
    /// JSON-RPC error `-32600` and none of it is forwarded.
    #[must_use]
    pub fn max_batch(self, max: usize) -> Self {
        self.with(|s| s.max_batch = max)
    }

    /// The largest posted body (default 4 MiB); larger gets `413`. Use the limit of `…/mcp`.
    #[must_use]
    pub fn max_body_bytes(self, max: usize) -> Self {
        self.with(|s| s.max_body_bytes = max)
    }

    /// How long a stream may stay silent before a keep-alive comment (default 15 s).
    #[must_use]
    pub fn keep_alive(self, idle: Duration) -> Self {
        self.with(|s| s.keep_alive = idle)
    }

    /// How many SSE streams are open now (for metrics and tests).
    pub fn open_sessions(&self) -> usize {
        self.shared.registry.len()
    }

    /// The budget the open sessions draw from (a slot each, and the bytes of their queued
    /// events), for metrics.
    pub fn budget(&self) -> mcp_core::Budget {
        self.shared.registry.budget().clone()
    }

    /// Limits are set on a new budget: sessions already open keep the one they were opened with.
    fn with_budget(self, change: impl FnOnce(Budget) -> Budget) -> Self {
        self.with(|s| s.registry = Arc::new(Registry::new(change(s.registry.budget().clone()))))
    }

    fn with(self, change: impl FnOnce(&mut Shared)) -> Self {
        let mut shared = Shared {
            registry: Arc::clone(&self.shared.registry),
            max_body_bytes: self.shared.max_body_bytes,
            max_batch: self.shared.max_batch,
            keep_alive: self.shared.keep_alive,
        };
        change(&mut shared);
        Self {
            shared: Arc::new(shared),
        }
    }
}

impl<S> Layer<S> for SseBridgeLayer {
    type Service = SseBridge<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SseBridge {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service of [`SseBridgeLayer`]: serves `…/sse` and `…/messages`, passes everything else to
/// the inner service untouched.
#[derive(Clone, Debug)]
pub struct SseBridge<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> SseBridge<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for SseBridge<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>
        + Service<Request<Full<Bytes>>, Response = Response<ResBody>>
        + Clone
        + Send
        + 'static,
    <S as Service<Request<Full<Bytes>>>>::Future: Send + 'static,
    <S as Service<Request<Full<Bytes>>>>::Error: Into<BoxError>,
    ReqBody: Body<Data = Bytes> + Send + 'static,
    ReqBody::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<SseBridgeBody<ResBody>>;
    type Error = <S as Service<Request<ReqBody>>>::Error;
    type Future = ResponseFuture<<S as Service<Request<ReqBody>>>::Future, ResBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<Request<ReqBody>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let path = req.uri().path();
        let kind = if path.ends_with(SSE_PATH_SUFFIX) {
            let (parts, _body) = req.into_parts();
            let call = relay::caller(self.inner.clone());
            Kind::Ready {
                response: Some(open::open(&self.shared, parts, call)),
            }
        } else if path.ends_with(MESSAGES_PATH_SUFFIX) {
            let call = relay::caller(self.inner.clone());
            Kind::Post {
                fut: Box::pin(post::post(Arc::clone(&self.shared), req, call)),
            }
        } else {
            Kind::Inner {
                fut: self.inner.call(req),
            }
        };
        ResponseFuture { kind }
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, B> {
        Inner { #[pin] fut: F },
        Ready { response: Option<Response<SseBridgeBody<B>>> },
        Post { fut: Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send>> },
    }
}

pin_project! {
    /// Response future of [`SseBridge`].
    pub struct ResponseFuture<F, B> {
        #[pin]
        kind: Kind<F, B>,
    }
}

impl<F, B, E> Future for ResponseFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<SseBridgeBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { fut } => {
                let res = ready!(fut.poll(cx))?;
                Poll::Ready(Ok(res.map(|body| SseBridgeBody::Inner { body })))
            }
            KindProj::Ready { response } => Poll::Ready(Ok(response.take().unwrap_or_else(|| {
                local(detail(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Response already taken",
                ))
            }))),
            KindProj::Post { fut } => Poll::Ready(Ok(local(ready!(fut.as_mut().poll(cx))))),
        }
    }
}

fn local<B>(res: Response<Full<Bytes>>) -> Response<SseBridgeBody<B>> {
    res.map(|body| SseBridgeBody::Local { body })
}

/// `{"detail": text}` with `status`.
fn detail(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(mcp_core::detail_body(text))));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// A refusal, boxed: it is the rare path, and keeps `Result`s small.
type Refusal = Box<Response<Full<Bytes>>>;

/// The request's context when its virtual host serves the SSE transport, else the answer.
fn admitted(extensions: &Extensions) -> Result<RequestContext, Refusal> {
    let ctx = context::extract(extensions, Era::Legacy).map_err(|error| {
        let status = if error.message.starts_with("Routing problem") {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::NOT_FOUND
        };
        Box::new(detail(status, &error.message))
    })?;
    if !ctx.vhost.sse_downstream {
        return Err(Box::new(detail(StatusCode::NOT_FOUND, DETAIL_NOT_ENABLED)));
    }
    Ok(ctx)
}
