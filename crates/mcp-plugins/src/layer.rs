//! [`PluginLayer`]: tool hooks for any MCP server's HTTP endpoint, without the gateway's router
//! (the layer's docs say what it does to requests and responses).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use mcp_core::BoxError;
use mcp_core::media::{MediaKind, media_kind};
use mcp_core::sse::{SseDecoder, SseEvent};
use mcp_core::{
    Envelope, ErrorObject, MessageKind, Principal, RawObject, RequestId, VirtualHostId,
    encode_error, encode_request, encode_result,
};
use pin_project_lite::pin_project;
use serde_json::value::RawValue;
use tower_layer::Layer;
use tower_service::Service;

use crate::{Hook, PluginChain, PluginContext, PluginRuntime};

/// The body the layer hands on: the caller's (or backend's) untouched, or one it rebuilt. The same
/// type as [`mcp_core::ResponseBody`] (inner or local bytes; `Default` when the inner body is).
pub type PluginBody<B> = mcp_core::ResponseBody<B>;

/// Default [`PluginLayer::max_body_bytes`]: 4 MiB, the gateway's default body limit.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Tool hooks for any MCP server's HTTP endpoint, without the gateway's router: applies the
/// plugin chain to JSON-RPC `tools/call` requests.
///
/// The layer reads POSTed JSON-RPC `tools/call` requests and runs the `tool_pre_invoke` chain on
/// `params.arguments`:
/// - deny: the caller gets the JSON-RPC error (HTTP 200, `application/json`, the request's id) and
///   the inner service is not called;
/// - rewrite / upstream extras: the body is rebuilt with the new `arguments` and `_meta` entries,
///   extra headers are set on the request, `content-length` is dropped (the body changed);
/// - otherwise the buffered body goes on unchanged.
///
/// When `tool_post_invoke` applies, the response is read: a JSON response's `result` goes through
/// the chain (deny: the result is replaced by the error, same id); an SSE response
/// (`text/event-stream`) is **buffered to its end** (a `tools/call` POST stream ends after its
/// response), the response event goes through the chain and the events are sent again in order.
/// Progress notifications therefore arrive all at once when a post hook applies; they stream as
/// usual otherwise. Other content types pass through.
///
/// A rewrite replaces `params.arguments` in the body only: `Mcp-Param-*` headers a client derived
/// from an argument (2026-07-28) are not recomputed, so a server that checks them may reject the
/// call; do not rewrite arguments that a tool mirrors into headers.
///
/// Cost: a request that is not a POST, or any request while the chain has no tool hook, passes
/// through with no buffering and no boxing. Otherwise the request body is buffered (at most
/// [`max_body_bytes`](PluginLayer::max_body_bytes), else `413`) and parsed once. While the
/// runtime is failed, `tools/call` requests are answered with the internal error
/// [`FAILED_MESSAGE`](crate::FAILED_MESSAGE).
///
/// The context: the principal and the virtual host come from request extensions
/// ([`mcp_core::Principal`], [`mcp_core::VirtualHostId`]; empty virtual host when absent), the
/// backend name from [`PluginLayer::backend`], the tool name from `params.name`.
///
/// ```
/// use bytes::Bytes;
/// use http::{Request, Response};
/// use http_body_util::{BodyExt, Full};
/// use mcp_plugins::{Format, PluginLayer, PluginRuntime};
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let runtime = PluginRuntime::builder()
///     .load_str(r#"{"version":1,"plugins":[{"name":"f","kind":"tool_filter","config":{"deny":["rm"]}}]}"#, Format::Json, "inline")
///     .unwrap();
/// let svc = ServiceBuilder::new()
///     .layer(PluginLayer::new(runtime).backend("files"))
///     .service(service_fn(|_req: Request<_>| async {
///         Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
///     }));
///
/// let call = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"rm","arguments":{}}}"#;
/// let res = svc.oneshot(Request::post("/mcp").body(Full::new(Bytes::from(call))).unwrap()).await.unwrap();
/// assert_eq!(res.status(), 200);
/// let body = res.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(body, r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"Tool not allowed: rm"}}"#);
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct PluginLayer {
    config: Arc<LayerConfig>,
}

#[derive(Debug)]
struct LayerConfig {
    runtime: PluginRuntime,
    backend: String,
    max_body_bytes: usize,
}

impl PluginLayer {
    /// A layer running the chains of `runtime`; backend name `""`.
    pub fn new(runtime: PluginRuntime) -> Self {
        Self {
            config: Arc::new(LayerConfig {
                runtime,
                backend: String::new(),
                max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut LayerConfig)) -> Self {
        let mut config = LayerConfig {
            runtime: self.config.runtime.clone(),
            backend: self.config.backend.clone(),
            max_body_bytes: self.config.max_body_bytes,
        };
        f(&mut config);
        self.config = Arc::new(config);
        self
    }

    /// The backend name plugins see (and conditions match): the server behind this layer.
    #[must_use]
    pub fn backend(self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.edit(|c| c.backend = name)
    }

    /// Largest request or response body the layer buffers (default
    /// [`DEFAULT_MAX_BODY_BYTES`]); a larger request gets `413`, a larger response `502`.
    #[must_use]
    pub fn max_body_bytes(self, max: usize) -> Self {
        self.edit(|c| c.max_body_bytes = max)
    }
}

impl<S> Layer<S> for PluginLayer {
    type Service = PluginService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PluginService {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service of [`PluginLayer`].
#[derive(Clone, Debug)]
pub struct PluginService<S> {
    inner: S,
    config: Arc<LayerConfig>,
}

impl<S> PluginService<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Consumes the service, returning the inner one.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

type BoxResponse<B, E> = Pin<Box<dyn Future<Output = Result<Response<PluginBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of [`PluginService`]: the inner future when no hook can apply, else the boxed
    /// hook path.
    // pin-project-lite cannot carry doc comments on variant fields; the variants document them.
    #[allow(missing_docs)]
    #[project = ResponseFutureProj]
    pub enum ResponseFuture<F, B, E> {
        /// Straight to the inner service.
        Passthrough { #[pin] future: F },
        /// Through the hooks.
        Governed { future: BoxResponse<B, E> },
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<PluginBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ResponseFutureProj::Passthrough { future } => future
                .poll(cx)
                .map(|r| r.map(|res| res.map(PluginBody::inner))),
            ResponseFutureProj::Governed { future } => future.as_mut().poll(cx),
        }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for PluginService<S>
where
    S: Service<Request<PluginBody<ReqBody>>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Body<Data = Bytes> + Send + 'static,
    ReqBody::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<PluginBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let chain = if req.method() == Method::POST {
            Some(self.config.runtime.load())
        } else {
            None
        };
        let hooked = match &chain {
            None => false,
            Some(Ok(chain)) => {
                chain.has_hook(Hook::ToolPreInvoke) || chain.has_hook(Hook::ToolPostInvoke)
            }
            // Failed: tools/call must be refused, so requests are read.
            Some(Err(_)) => true,
        };
        let Some(chain) = chain.filter(|_| hooked) else {
            return ResponseFuture::Passthrough {
                future: self.inner.call(req.map(PluginBody::inner)),
            };
        };
        // Use the instance that was driven to readiness, leave a fresh clone in its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = Arc::clone(&self.config);
        ResponseFuture::Governed {
            future: Box::pin(governed(inner, config, chain.ok(), req)),
        }
    }
}

fn json_response<B>(bytes: Vec<u8>) -> Response<PluginBody<B>> {
    let mut res = Response::new(PluginBody::local(bytes));
    res.headers_mut()
        .insert(header::CONTENT_TYPE, mcp_core::APPLICATION_JSON);
    res
}

/// The facts of a `tools/call` that the response side needs again.
struct Call {
    id: RequestId,
    name: String,
    virtual_host: String,
    principal: Option<Principal>,
}

impl Call {
    fn ctx<'a>(&'a self, hook: Hook, backend: &'a str) -> PluginContext<'a> {
        PluginContext::new(hook, &self.virtual_host, backend, &self.name)
            .with_principal(self.principal.as_ref())
    }
}

async fn governed<S, ReqBody, ResBody>(
    mut inner: S,
    config: Arc<LayerConfig>,
    chain: Option<Arc<PluginChain>>,
    req: Request<ReqBody>,
) -> Result<Response<PluginBody<ResBody>>, S::Error>
where
    S: Service<Request<PluginBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body<Data = Bytes>,
    ReqBody::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    let (mut parts, body) = req.into_parts();
    let bytes = match Limited::new(body, config.max_body_bytes).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Ok(mcp_core::detail_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Request body too large",
            ));
        }
        Err(_) => {
            return Ok(mcp_core::detail_response(
                StatusCode::BAD_REQUEST,
                "Unreadable request body",
            ));
        }
    };
    let forward = |parts: http::request::Parts, bytes: Bytes| {
        Request::from_parts(parts, PluginBody::local(bytes))
    };
    let Some((call, params)) = tools_call(&bytes, &parts) else {
        return inner
            .call(forward(parts, bytes))
            .await
            .map(|r| r.map(PluginBody::inner));
    };
    let Some(chain) = chain else {
        let error = ErrorObject::internal(crate::FAILED_MESSAGE);
        return Ok(json_response(encode_error(Some(&call.id), &error)));
    };
    let backend = config.backend.as_str();
    // A cheap handle on the same buffer (params borrow the original).
    let mut out = bytes.clone();
    if chain.applies(Hook::ToolPreInvoke, &call.virtual_host, backend, &call.name) {
        let ctx = call
            .ctx(Hook::ToolPreInvoke, backend)
            .with_meta(params.get("_meta"));
        let outcome = match chain.pre(&ctx, params.get("arguments")).await {
            Ok(outcome) => outcome,
            Err(error) => return Ok(json_response(encode_error(Some(&call.id), &error))),
        };
        for (name, value) in &outcome.extras.headers {
            parts.headers.insert(name.clone(), value.clone());
        }
        if outcome.arguments.is_some() || !outcome.extras.meta.is_empty() {
            let mut params = params.clone();
            if let Some(arguments) = outcome.arguments {
                params.set_raw("arguments", arguments);
            }
            let mut params = params.to_raw();
            if let Some(merged) = outcome.extras.merge_meta(&params) {
                params = merged;
            }
            out = Bytes::from(encode_request(&call.id, "tools/call", Some(&params)));
            parts.headers.remove(header::CONTENT_LENGTH);
        }
    }
    drop(params);
    let response = inner.call(forward(parts, out)).await?;
    if !chain.applies(
        Hook::ToolPostInvoke,
        &call.virtual_host,
        backend,
        &call.name,
    ) {
        return Ok(response.map(PluginBody::inner));
    }
    Ok(post(&chain, &config, &call, response).await)
}

/// The call's facts and params when `bytes` is a JSON-RPC `tools/call` request with a name.
fn tools_call<'a>(bytes: &'a Bytes, parts: &http::request::Parts) -> Option<(Call, RawObject<'a>)> {
    let envelope = Envelope::parse(bytes).ok()?;
    if envelope.kind() != MessageKind::Request || envelope.method() != Some("tools/call") {
        return None;
    }
    let params = RawObject::from_raw(envelope.params()?).ok()?;
    let call = Call {
        id: envelope.id()?.clone(),
        name: params.get_str("name")?,
        virtual_host: parts
            .extensions
            .get::<VirtualHostId>()
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default(),
        principal: parts.extensions.get::<Principal>().cloned(),
    };
    Some((call, params))
}

/// Runs the post hooks over a JSON or SSE response.
async fn post<B>(
    chain: &PluginChain,
    config: &LayerConfig,
    call: &Call,
    response: Response<B>,
) -> Response<PluginBody<B>>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let sse = match media_kind(response.headers()) {
        MediaKind::EventStream => true,
        MediaKind::Json => false,
        MediaKind::Other => return response.map(PluginBody::inner),
    };
    let (mut parts, body) = response.into_parts();
    let Ok(collected) = Limited::new(body, config.max_body_bytes).collect().await else {
        return mcp_core::detail_response(
            StatusCode::BAD_GATEWAY,
            "Backend response unreadable or too large",
        );
    };
    let bytes = collected.to_bytes();
    let ctx = call.ctx(Hook::ToolPostInvoke, &config.backend);
    let new = if sse {
        post_sse(chain, &ctx, call, &bytes).await
    } else {
        post_message(chain, &ctx, call, &bytes)
            .await
            .map(Bytes::from)
    };
    let body = match new {
        Some(new) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            new
        }
        None => bytes,
    };
    Response::from_parts(parts, PluginBody::local(body))
}

/// The replacement of one JSON-RPC message when it is the call's response and plugins changed it.
async fn post_message(
    chain: &PluginChain,
    ctx: &PluginContext<'_>,
    call: &Call,
    message: &[u8],
) -> Option<Vec<u8>> {
    let envelope = Envelope::parse(message).ok()?;
    if envelope.kind() != MessageKind::Response || envelope.id() != Some(&call.id) {
        return None;
    }
    let result: &RawValue = envelope.result()?;
    match chain.post(ctx, result).await {
        Ok(None) => None,
        Ok(Some(new)) => Some(encode_result(&call.id, &new)),
        Err(error) => Some(encode_error(Some(&call.id), &error)),
    }
}

/// The SSE body again, with the call's response event run through the post hooks.
async fn post_sse(
    chain: &PluginChain,
    ctx: &PluginContext<'_>,
    call: &Call,
    bytes: &[u8],
) -> Option<Bytes> {
    let mut decoder = SseDecoder::with_max_event_size(bytes.len().max(1));
    decoder.push(bytes).ok()?;
    let mut events: Vec<SseEvent> = Vec::new();
    let mut changed = false;
    while let Ok(Some(mut event)) = decoder.next_event() {
        if !changed && let Some(new) = post_message(chain, ctx, call, event.data.as_bytes()).await {
            event.data = String::from_utf8(new).ok()?;
            changed = true;
        }
        events.push(event);
    }
    changed.then(|| {
        let mut out = Vec::with_capacity(bytes.len());
        for event in &events {
            out.extend_from_slice(&event.encode());
        }
        Bytes::from(out)
    })
}
