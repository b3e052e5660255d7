//! Accept loops: TCP or TLS, `TCP_NODELAY`, a connection limit, HTTP/1.1 and h2 (by ALPN on TLS,
//! by the h2 preface on plain TCP), a header-read timeout that also bounds the TLS handshake, the
//! first bytes of a connection and the wait for its first request (an h2 client that sends only
//! the preface), an idle timeout between requests ([`crate::idle`]) and h2 keep-alive PINGs (so
//! neither silent nor idle connections can hold connection slots), and graceful shutdown
//! (hyper-util `GracefulShutdown`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower_service::Service;

use crate::body::GatewayBody;
use crate::idle::{Activity, Tracked};
use crate::metrics::OpenConnection;

/// The connection builders: HTTP/1.1 only and h2 only, chosen per connection by ALPN (TLS) or by
/// sniffing the first bytes for the h2 preface (plain TCP, h2c with prior knowledge).
pub(crate) struct Builders {
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
    /// Time allowed for the request head; also bounds the TLS handshake, the sniffing and the
    /// wait for a connection's first request.
    header_read_timeout: Duration,
    /// Time a connection may stay without a request in flight after its first one.
    idle_timeout: Duration,
}

impl Builders {
    /// `header_read_timeout` also answers an h2 keep-alive PING; `idle_timeout` is also the PING
    /// interval, so a peer that vanished during a long stream is noticed.
    pub(crate) fn new(header_read_timeout: Duration, idle_timeout: Duration) -> Self {
        let configure = |mut builder: auto::Builder<TokioExecutor>| {
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .keep_alive(true);
            builder
                .http2()
                .timer(TokioTimer::new())
                .keep_alive_interval(idle_timeout)
                .keep_alive_timeout(header_read_timeout);
            builder
        };
        Self {
            h1: configure(auto::Builder::new(TokioExecutor::new()).http1_only()),
            h2: configure(auto::Builder::new(TokioExecutor::new()).http2_only()),
            header_read_timeout,
            idle_timeout,
        }
    }

    fn for_protocol(&self, protocol: Protocol) -> &auto::Builder<TokioExecutor> {
        match protocol {
            Protocol::Http1 => &self.h1,
            Protocol::Http2 => &self.h2,
        }
    }
}

/// The HTTP version a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

/// The client connection preface of HTTP/2 (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Peeks at the first bytes (without consuming them) until they either are the h2 preface or
/// cannot be; `None` when the client sends nothing decisive within `limit` or goes away.
async fn sniff(stream: &TcpStream, limit: Duration) -> Option<Protocol> {
    let decide = async {
        let mut buf = [0u8; 24];
        loop {
            let n = stream.peek(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            if buf[..n] != H2_PREFACE[..n] {
                return Some(Protocol::Http1);
            }
            if n == H2_PREFACE.len() {
                return Some(Protocol::Http2);
            }
            // A prefix of the preface: wait for more bytes.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(limit, decide).await.ok().flatten()
}

/// One listener's settings.
pub(crate) struct AcceptLoop<S> {
    pub(crate) name: &'static str,
    pub(crate) listener: TcpListener,
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) service: S,
    pub(crate) builders: Arc<Builders>,
    pub(crate) graceful: Arc<GracefulShutdown>,
    /// One permit per open connection; shared by every accept loop of one listener address.
    pub(crate) limit: Arc<Semaphore>,
}

impl<S> AcceptLoop<S>
where
    S: Service<Request<Incoming>, Response = Response<GatewayBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    /// Accepts until `stop` turns true (or its sender is dropped); returns the connection tasks
    /// still running, so the caller can abort them after the drain deadline.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) -> JoinSet<()> {
        let mut connections = JoinSet::new();
        loop {
            while connections.try_join_next().is_some() {}
            if *stop.borrow() {
                break;
            }
            let (stream, peer) = tokio::select! {
                biased;
                _ = stop.changed() => break,
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // E.g. out of file descriptors: back off instead of spinning.
                        tracing::warn!(listener = self.name, error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            // The slot is taken after the accept, not before: with several accept loops on one
            // address (thread-per-core), a loop holding the last slot while it waits in accept
            // would leave a client queued at another loop's socket waiting for good. So each
            // loop holds at most one accepted connection unread while the limit is reached.
            let permit = tokio::select! {
                biased;
                _ = stop.changed() => break,
                permit = Arc::clone(&self.limit).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            };
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(listener = self.name, error = %e, "cannot set TCP_NODELAY");
            }
            let accepted = Instant::now();
            let watcher = self.graceful.watcher();
            let service = self.service.clone();
            let builders = Arc::clone(&self.builders);
            let tls = self.tls.clone();
            let name = self.name;
            connections.spawn(async move {
                let _permit = permit;
                let _open = OpenConnection::start(name);
                let limit = builders.header_read_timeout;
                let activity = Activity::new(accepted, limit, builders.idle_timeout);
                let service = TowerToHyperService::new(Tracked::new(service, Arc::clone(&activity)));
                let connection = Connection {
                    builders: &builders,
                    service,
                    watcher,
                    activity: &activity,
                };
                match tls {
                    None => match sniff(&stream, limit).await {
                        Some(protocol) => connection.serve(protocol, TokioIo::new(stream)).await,
                        None => {
                            tracing::debug!(listener = name, %peer, "no request within the header read timeout");
                        }
                    },
                    Some(acceptor) => {
                        match tokio::time::timeout(limit, acceptor.accept(stream)).await {
                            Ok(Ok(stream)) => {
                                let protocol = match stream.get_ref().1.alpn_protocol() {
                                    Some(b"h2") => Protocol::Http2,
                                    _ => Protocol::Http1,
                                };
                                connection.serve(protocol, TokioIo::new(stream)).await;
                            }
                            Ok(Err(e)) => {
                                tracing::debug!(listener = name, %peer, error = %e, "TLS handshake failed");
                            }
                            Err(_) => {
                                tracing::debug!(listener = name, %peer, "TLS handshake timed out");
                            }
                        }
                    }
                }
            });
        }
        connections
    }
}

/// What serving one accepted connection needs.
struct Connection<'a, S> {
    builders: &'a Builders,
    service: TowerToHyperService<Tracked<S>>,
    watcher: Watcher,
    activity: &'a Activity,
}

impl<S> Connection<'_, S>
where
    S: Service<Request<Incoming>, Response = Response<GatewayBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    /// Serves the connection until it ends, the graceful shutdown closes it, or it stays idle
    /// past its allowance ([`Activity::idle`]; then it is dropped: no request is in flight).
    async fn serve<I>(self, protocol: Protocol, io: TokioIo<I>)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let connection = self
            .builders
            .for_protocol(protocol)
            .serve_connection(io, self.service);
        tokio::select! {
            ended = self.watcher.watch(connection) => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            }
            () = self.activity.idle() => {
                tracing::debug!(?protocol, "closing a connection without a request in flight");
            }
        }
    }
}
