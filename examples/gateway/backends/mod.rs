//! The two demo MCP backends of the example (real rmcp servers on free loopback ports).

pub(crate) mod clock;
pub(crate) mod notes;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rmcp::ServerHandler;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

/// Serves an rmcp handler at `http://127.0.0.1:<free port>/mcp`, for the life of the process.
pub(crate) async fn serve_backend<H, F>(make: F) -> std::io::Result<SocketAddr>
where
    H: ServerHandler + Send + 'static,
    F: Fn() -> H + Send + Sync + 'static,
{
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    // Loopback-only backends: the gateway sends the backend's own Host, any Host is fine here.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let service: StreamableHttpService<H, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(make()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let service = TowerToHyperService::new(Mcp(service.clone()));
            tokio::spawn(async move {
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// Routes `/mcp` to rmcp and answers 404 elsewhere.
#[derive(Clone)]
struct Mcp<S>(S);

impl<S, B> tower::Service<http::Request<B>> for Mcp<S>
where
    S: tower::Service<http::Request<B>, Error = Infallible> + Clone + Send + 'static,
    S::Response: Send,
    S::Future: Send + 'static,
    S: tower::Service<
            http::Request<B>,
            Response = http::Response<
                http_body_util::combinators::BoxBody<bytes::Bytes, Infallible>,
            >,
        >,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<S::Response, Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() == "/mcp" {
            let fut = self.0.call(req);
            Box::pin(fut)
        } else {
            Box::pin(async {
                use http_body_util::BodyExt;
                let body =
                    http_body_util::Full::new(bytes::Bytes::from_static(b"Not Found")).boxed();
                let mut res = http::Response::new(body);
                *res.status_mut() = http::StatusCode::NOT_FOUND;
                Ok(res)
            })
        }
    }
}

pub(crate) fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}
