//! The hyper server in front of rmcp: accept loop, request recording, the legacy filter, and a
//! stop that closes the listener and every connection.

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::{
    net::{TcpListener, TcpSocket, TcpStream},
    sync::oneshot,
    task::{JoinHandle, JoinSet},
};

use crate::{
    legacy_filter,
    recorder::{RecordedRequest, RequestLog},
    server::{Shared, TestServer},
    spec::Era,
    task_listen,
};

/// The MCP endpoint path.
pub(crate) const MCP_PATH: &str = "/mcp";

type HttpResponse = Response<BoxBody<Bytes, Infallible>>;
type McpService = StreamableHttpService<TestServer, LocalSessionManager>;

/// How long rmcp keeps finished legacy request streams for resumption (its default is 60 s).
const COMPLETED_CACHE_TTL: Duration = Duration::from_secs(5);

/// What one HTTP request goes through: record, route, filter, rmcp.
struct App {
    shared: Arc<Shared>,
    log: Arc<RequestLog>,
    mcp: McpService,
}

impl App {
    async fn handle(&self, request: Request<Incoming>, peer: SocketAddr) -> HttpResponse {
        let (parts, body) = request.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => return plain(StatusCode::BAD_REQUEST, "Bad Request: unreadable body"),
        };
        if self.shared.spec.record_requests {
            self.log.record(RecordedRequest {
                method: parts.method.clone(),
                uri: parts.uri.clone(),
                headers: parts.headers.clone(),
                body: body.clone(),
                peer,
            });
        }
        if parts.uri.path() != MCP_PATH {
            return plain(StatusCode::NOT_FOUND, "Not Found");
        }
        if self.shared.spec.era == Era::Legacy
            && legacy_filter::is_modern_request(&parts.method, &parts.headers, &body)
        {
            return legacy_filter::rejection();
        }
        if self.shared.spec.tasks
            && self.shared.spec.era.speaks_modern()
            && parts.method == http::Method::POST
            && let Some((id, ids)) = task_listen::task_listen(&body)
        {
            return task_listen::serve(&self.shared, id, ids);
        }
        self.mcp
            .handle(Request::from_parts(parts, Full::new(body)))
            .await
    }
}

fn plain(status: StatusCode, text: &'static str) -> HttpResponse {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(text.as_bytes())).boxed())
        .expect("static response parts are valid")
}

/// A fresh rmcp service: no sessions, no in-flight requests.
fn mcp_service(shared: &Arc<Shared>) -> McpService {
    let era = shared.spec.era;
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.completed_cache_ttl = COMPLETED_CACHE_TTL;
    let config = StreamableHttpServerConfig::default()
        // Loopback-only test server: gateways may forward any Host.
        .disable_allowed_hosts()
        .with_legacy_session_mode(era != Era::Modern)
        .with_stateless_protocol_metadata_required(era == Era::Modern)
        .with_json_response(shared.spec.json_response);
    let factory_shared = shared.clone();
    StreamableHttpService::new(
        move || Ok(TestServer::new(factory_shared.clone())),
        Arc::new(sessions),
        config,
    )
}

/// A listener bound with `SO_REUSEADDR`, so a restart can take the same port back at once.
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// One serving period of a backend, from start (or restart) to stop.
pub(crate) struct Running {
    stop: Option<oneshot::Sender<()>>,
    accept_task: JoinHandle<()>,
    rmcp_cancel: Box<dyn Fn() + Send + Sync>,
}

impl Running {
    /// Serves `listener` with a fresh rmcp service until stopped.
    pub(crate) fn spawn(listener: TcpListener, shared: Arc<Shared>, log: Arc<RequestLog>) -> Self {
        let mcp = mcp_service(&shared);
        let rmcp_token = mcp.config.cancellation_token.clone();
        let app = Arc::new(App { shared, log, mcp });
        let (stop, stopped) = oneshot::channel();
        Self {
            stop: Some(stop),
            accept_task: tokio::spawn(accept_loop(listener, app, stopped)),
            rmcp_cancel: Box::new(move || rmcp_token.cancel()),
        }
    }

    /// Closes the listener and every connection, ends rmcp's sessions, and waits until all of
    /// it is gone.
    pub(crate) async fn stop(mut self) {
        (self.rmcp_cancel)();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.accept_task).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Dropped without `stop` (e.g. the backend handle went away): abort, which drops the
        // listener and the connection set, closing everything.
        (self.rmcp_cancel)();
        self.accept_task.abort();
    }
}

async fn accept_loop(listener: TcpListener, app: Arc<App>, mut stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(serve_connection(stream, peer, app.clone()));
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

async fn serve_connection(stream: TcpStream, peer: SocketAddr, app: Arc<App>) {
    // Without it small responses wait for the peer's delayed ACK (~40 ms).
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |request| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(app.handle(request, peer).await) }
    });
    let _ = auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
}
