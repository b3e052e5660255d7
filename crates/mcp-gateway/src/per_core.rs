//! Thread-per-core serving (`runtime.mode = "thread-per-core"`; book: docs/src/performance.md,
//! "Thread per core"): one OS thread per listener, each running a single-threaded tokio runtime
//! that accepts on its own `SO_REUSEPORT` socket of `listen.addr`.
//!
//! Why: on the work-stealing runtime a connection's task, its upstream connection's task and the
//! tasks they wake hop between worker threads, and every hop wakes a parked worker (a `futex`
//! call and a cache miss). Here the kernel spreads new connections over the sockets, and a
//! connection, the tasks it spawns and the upstream connections they open stay on the thread that
//! accepted it. What the threads share (caches, session tables, breakers, the credential-scope
//! tables) is the same thread-safe state as on the work-stealing runtime, so isolation is
//! unchanged. Shared tasks started lazily by a request (the session sweeper, Redis connection
//! drivers and the node bus, stdio processes' I/O, the JWKS refresh) run on the thread whose
//! request started them, serving every thread from there.
//!
//! Shutdown keeps the work-stealing runtime's contract: every accept loop stops, the connections
//! drain for at most `shutdown_drain_s` while their threads keep running them, then what is left
//! is closed and the threads end.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use mcp_router::McpRouter;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tower_service::Service;

use crate::body::GatewayBody;
use crate::server::AcceptLoop;

/// Pending connections a serving thread's socket queues before it accepts them.
const BACKLOG: u32 = 1024;

/// Binds `count` listening sockets to `addr` with `SO_REUSEPORT`, so that the kernel spreads new
/// connections over them; with port 0 the first socket picks the port and the others join it.
/// Each socket is returned unregistered from any runtime, for the thread that will serve it.
///
/// A port another socket already listens on is refused, as a plain bind refuses it: without the
/// probe, `SO_REUSEPORT` would quietly join a socket of another process of the same user that
/// set the option too (a second gateway instance, say), and the kernel would hand it a share of
/// the clients.
pub(crate) fn bind(addr: SocketAddr, count: usize) -> io::Result<Vec<std::net::TcpListener>> {
    if addr.port() != 0 {
        drop(std::net::TcpListener::bind(addr)?);
    }
    let mut listeners = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let listener = bind_one(addr)?;
        addr = listener.local_addr()?;
        listeners.push(listener.into_std()?);
    }
    Ok(listeners)
}

/// Linux (and Android) only: there the kernel spreads connections over the sockets of a port
/// bound with `SO_REUSEPORT`; elsewhere that option only lets sockets share the port, and one of
/// them would get every connection.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does on Unix: a restarted gateway can bind while old connections
    // are in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    // Linux lets only sockets of the same effective user join a port this way.
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn bind_one(_addr: SocketAddr) -> io::Result<TcpListener> {
    // Configuration refuses the mode on such platforms; this keeps the error honest if a
    // caller builds the configuration by hand.
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "thread-per-core serving needs Linux's SO_REUSEPORT",
    ))
}

/// The serving threads of one listener address.
pub(crate) struct Cores {
    /// One per thread: answered with the number of connections still open when its accept loop
    /// has stopped.
    stopped: Vec<oneshot::Receiver<usize>>,
    /// Turns true when the drain is over: the threads close what is left and end.
    drained: watch::Sender<bool>,
    /// Each thread ends saying whether what its calls owed backends went out.
    threads: Vec<JoinHandle<bool>>,
}

impl Cores {
    /// Starts one thread per listener, each serving the accept loop `accept_loop` makes for its
    /// listener until `stop` turns true; returns once every thread runs its runtime.
    pub(crate) async fn start<S, F>(
        name: &'static str,
        listeners: Vec<std::net::TcpListener>,
        accept_loop: F,
        stop: &watch::Receiver<bool>,
        owed: Owed,
    ) -> io::Result<Self>
    where
        F: FnOnce(TcpListener) -> AcceptLoop<S> + Clone + Send + 'static,
        S: Service<Request<Incoming>, Response = Response<GatewayBody>, Error = Infallible>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
        let (drained, drained_rx) = watch::channel(false);
        let mut cores = Self {
            stopped: Vec::with_capacity(listeners.len()),
            drained,
            threads: Vec::with_capacity(listeners.len()),
        };
        for (index, listener) in listeners.into_iter().enumerate() {
            let accept_loop = accept_loop.clone();
            let stop = stop.clone();
            let drained = drained_rx.clone();
            let owed = owed.clone();
            let (stopped_tx, stopped_rx) = oneshot::channel();
            let (started_tx, started_rx) = oneshot::channel();
            // The runtime is built on its thread: a runtime dropped on this (async) thread,
            // as a closure whose spawn failed would be, panics.
            let thread = std::thread::Builder::new()
                .name(format!("{name}-core-{index}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .and_then(|runtime| {
                            // Registered with this thread's runtime, not the caller's.
                            let listener = {
                                let _entered = runtime.enter();
                                TcpListener::from_std(listener)?
                            };
                            Ok((runtime, listener))
                        });
                    let (runtime, listener) = match runtime {
                        Ok(built) => built,
                        Err(e) => {
                            let _ = started_tx.send(Err(e));
                            return true;
                        }
                    };
                    let _ = started_tx.send(Ok(()));
                    // Upstream keep-alive connections this thread opens stay its own.
                    mcp_router::set_pool_lane(index);
                    runtime.block_on(async move {
                        serve(accept_loop(listener), stop, stopped_tx, drained).await;
                        // The closed connections' calls may owe their backends a message, sent
                        // on this runtime: it must run until they went out.
                        owed.settle().await
                    })
                })?;
            cores.threads.push(thread);
            cores.stopped.push(stopped_rx);
            started_rx.await.unwrap_or_else(|_| {
                Err(io::Error::other("a serving thread ended while starting"))
            })?;
        }
        Ok(cores)
    }

    /// Waits until every thread's accept loop has stopped; the connections still open.
    pub(crate) async fn accepting_stopped(&mut self) -> usize {
        let mut open = 0;
        for stopped in &mut self.stopped {
            open += stopped.await.unwrap_or(0);
        }
        open
    }

    /// Closes every connection still open and waits for the threads to end; whether every
    /// thread's owed messages went out (see [`Owed`]).
    pub(crate) async fn close(mut self) -> bool {
        let _ = self.drained.send(true);
        let threads = std::mem::take(&mut self.threads);
        let joined = tokio::task::spawn_blocking(move || {
            let mut settled = true;
            for thread in threads {
                match thread.join() {
                    Ok(done) => settled &= done,
                    Err(_) => tracing::error!("a serving thread panicked"),
                }
            }
            settled
        });
        joined.await.unwrap_or(false)
    }
}

/// One serving thread's work: accept until `stop`, report the connections still open, keep
/// running them until the drain is over, then close them.
async fn serve<S>(
    accept_loop: AcceptLoop<S>,
    stop: watch::Receiver<bool>,
    stopped: oneshot::Sender<usize>,
    mut drained: watch::Receiver<bool>,
) where
    S: Service<Request<Incoming>, Response = Response<GatewayBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let mut connections = accept_loop.run(stop).await;
    let _ = stopped.send(connections.len());
    // The connections keep running on this thread while they drain.
    let _ = drained.wait_for(|drained| *drained).await;
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// The router whose owed messages (see [`McpRouter::settle`]) a serving thread lets go out
/// before its runtime ends, and for how long at most.
#[derive(Clone)]
pub(crate) struct Owed {
    pub(crate) router: McpRouter,
    pub(crate) within: Duration,
}

impl Owed {
    /// Waits for the router's owed messages, at most `within`; whether none is left.
    pub(crate) async fn settle(&self) -> bool {
        self.router.settle(self.within).await
    }
}

impl Drop for Cores {
    fn drop(&mut self) {
        // Threads not joined by `close` (an error while starting) must still end.
        let _ = self.drained.send(true);
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    /// A port another socket listens on is refused even when that socket set `SO_REUSEPORT`
    /// (which would otherwise let the group join it and take a share of its clients). Control:
    /// the group's own sockets share one port.
    #[tokio::test]
    async fn a_port_in_use_is_refused_even_with_so_reuseport() {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let other = bind_one(loopback).expect("another socket with SO_REUSEPORT");
        let taken = other.local_addr().expect("addr");
        let refused = bind(taken, 2).expect_err("a port in use is refused");
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse, "{refused}");

        let group = bind(loopback, 3).expect("a free port");
        assert_eq!(group.len(), 3);
        let ports: Vec<u16> = group
            .iter()
            .map(|l| l.local_addr().expect("addr").port())
            .collect();
        assert!(ports.iter().all(|&p| p == ports[0] && p != 0), "{ports:?}");
    }
}
