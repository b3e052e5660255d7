//! [`GatewayService`]: the whole MCP endpoint as one tower `Service`: request limits, RFC 9728
//! metadata, then vhost -> claims -> each principal's share of requests in flight -> config store -> virtual host config -> JSON POSTs -> router; with a
//! `tracing` span, an access log line and metrics per request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body::Body;
use http_body_util::BodyExt;
use mcp_claims::ClaimsService;
use mcp_config_store::{ConfigStoreService, PrincipalKey, VirtualHostConfigService};
use mcp_core::{Method, ResponseBody};
use mcp_router::sse_bridge::{SseBridge, SseBridgeBody};
use mcp_router::telemetry::Operation;
use mcp_router::{McpBody, McpRouter};
use mcp_vhost::Vhost;
use pin_project_lite::pin_project;
use tower_service::Service;
use tracing::Span;

use crate::body::{BoxError, GatewayBody};
use crate::in_flight_share::{Held, InFlightShare};
use crate::json_posts::JsonPosts;
use crate::limits::RequestLimits;
use crate::metadata::{ResourceMetadata, detail};
use crate::metrics::{InFlight, RequestMetrics};
use crate::routed::{Routed, RoutedVhost};

/// The layered MCP stack inside a [`GatewayService`]: vhost -> claims -> config store -> virtual
/// host config -> JSON POSTs (415) -> router (behind the 2024-11-05 SSE bridge).
///
/// Crate-private so the layering can change without a breaking release: users name
/// [`GatewayService`] and its [`ResponseFuture`] only.
pub(crate) type McpStack = Vhost<
    ClaimsService<
        InFlightShare<
            ConfigStoreService<
                VirtualHostConfigService<JsonPosts<Routed<SseBridge<McpRouter>>>>,
                PrincipalKey,
            >,
        >,
    >,
>;

/// The response body of [`McpStack`].
pub(crate) type StackBody = ResponseBody<
    ResponseBody<
        ResponseBody<Held<ResponseBody<ResponseBody<ResponseBody<SseBridgeBody<McpBody>>>>>>,
    >,
>;

/// State shared by every clone of a [`GatewayService`].
#[derive(Debug)]
pub(crate) struct Shared {
    /// Replaced by a reload (`limits.max_mcp_headers`, `limits.max_mcp_header_bytes`).
    pub(crate) limits: Arc<ArcSwap<RequestLimits>>,
    /// Replaced by a reload (its `authorization_servers` default to the issuers).
    pub(crate) metadata: Arc<ArcSwap<ResourceMetadata>>,
    pub(crate) access_log: bool,
    pub(crate) metrics: Arc<RequestMetrics>,
}

/// The gateway's MCP listener as a tower `Service`, for embedding in your own hyper or axum
/// server ([`Gateway::service`](crate::Gateway::service)).
///
/// Serves `/servers/{vhost}/mcp` through the layers and the RFC 9728 documents under
/// `/.well-known/oauth-protected-resource`; answers everything with a response (never an error).
/// Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct GatewayService {
    mcp: McpStack,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for GatewayService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayService")
            .field("limits", &self.shared.limits)
            .finish_non_exhaustive()
    }
}

impl GatewayService {
    pub(crate) fn new(mcp: McpStack, shared: Arc<Shared>) -> Self {
        Self { mcp, shared }
    }
}

impl<B> Service<Request<B>> for GatewayService
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    McpStack: Service<Request<B>, Response = Response<StackBody>, Error = Infallible>,
{
    type Response = Response<GatewayBody>;
    type Error = Infallible;
    type Future = ResponseFuture<B>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.mcp.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let mcp_method = req
            .headers()
            .get(mcp_core::headers::MCP_METHOD)
            .and_then(|v| v.to_str().ok())
            .and_then(Method::from_name)
            .map_or("-", Method::as_str);
        // `trace_id`: the client's `traceparent` header's trace, replaced by the router's reading
        // (the server span's trace, or `params._meta.traceparent`): every log line of the
        // request carries it (`telemetry::TraceIdJson`).
        let span = tracing::info_span!(
            "request",
            http.method = %req.method(),
            path = %req.uri().path(),
            mcp.method = mcp_method,
            trace_id = tracing::field::Empty,
        );
        if let Some(trace_id) = req
            .headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(mcp_router::telemetry::traceparent_trace_id)
        {
            span.record("trace_id", trace_id);
        }
        let log = Log {
            started: Instant::now(),
            mcp_method,
            http_method: req.method().clone(),
            uri: req.uri().clone(),
            span,
            access_log: self.shared.access_log,
            _in_flight: self.shared.metrics.start(),
            metrics: Arc::clone(&self.shared.metrics),
        };
        let path = req.uri().path();
        let kind = if ResourceMetadata::handles(path) {
            let (parts, _body) = req.into_parts();
            Kind::Ready {
                response: Some(self.shared.metadata.load().respond(&parts)),
            }
        } else if let Some((status, text)) = self.shared.limits.load().check(req.headers()) {
            Kind::Ready {
                response: Some(detail(status, text)),
            }
        } else {
            let _entered = log.span.enter();
            Kind::Inner {
                fut: self.mcp.call(req),
            }
        };
        ResponseFuture {
            kind,
            log: Some(log),
        }
    }
}

/// What is logged and measured when a response head is ready.
struct Log {
    started: Instant,
    mcp_method: &'static str,
    http_method: http::Method,
    uri: Uri,
    span: Span,
    access_log: bool,
    _in_flight: InFlight,
    metrics: Arc<RequestMetrics>,
}

impl Log {
    fn finish(self, response: &Response<GatewayBody>) {
        let status = response.status().as_u16();
        let vhost = response
            .extensions()
            .get::<RoutedVhost>()
            .map_or("-", |v| v.0.as_str());
        let latency = self.started.elapsed();
        // The router names what it served, of either era (a 2025 request has no `Mcp-Method`
        // header); the header's method stands for answers before the router.
        let operation = response.extensions().get::<Operation>();
        let mcp_method = operation.map_or(self.mcp_method, |op| op.method);
        self.metrics.record(mcp_method, vhost, status, latency);
        if self.access_log {
            let mcp_name = operation.and_then(|op| op.target.as_deref()).unwrap_or("-");
            tracing::info!(
                parent: &self.span,
                http.method = %self.http_method,
                path = %self.uri.path(),
                mcp.method = mcp_method,
                mcp.name = mcp_name,
                vhost,
                status,
                latency_ms = latency.as_secs_f64() * 1000.0,
                "request"
            );
        }
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Inner { #[pin] fut: F },
        Ready { response: Option<Response<GatewayBody>> },
    }
}

pin_project! {
    /// Response future of [`GatewayService`] for a request body `B`.
    ///
    /// Generic over the request body only: the future of the layers inside is not part of the
    /// public API.
    pub struct ResponseFuture<B>
    where
        McpStack: Service<Request<B>>,
    {
        #[pin]
        kind: Kind<<McpStack as Service<Request<B>>>::Future>,
        log: Option<Log>,
    }
}

impl<B> Future for ResponseFuture<B>
where
    McpStack: Service<Request<B>, Response = Response<StackBody>, Error = Infallible>,
{
    type Output = Result<Response<GatewayBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = match this.kind.project() {
            KindProj::Inner { fut } => {
                let polled = match this.log.as_ref() {
                    Some(log) => {
                        let _entered = log.span.enter();
                        fut.poll(cx)
                    }
                    None => fut.poll(cx),
                };
                match ready!(polled) {
                    Ok(response) => response.map(BodyExt::boxed_unsync),
                    Err(never) => match never {},
                }
            }
            KindProj::Ready { response } => response.take().unwrap_or_else(|| {
                detail(StatusCode::INTERNAL_SERVER_ERROR, "Response already taken")
            }),
        };
        if let Some(log) = this.log.take() {
            log.finish(&response);
        }
        Poll::Ready(Ok(response))
    }
}
