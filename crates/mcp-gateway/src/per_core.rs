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
//! unchanged.
//!
//! Shutdown keeps the work-stealing runtime's contract: every accept loop stops, the connections
//! drain for at most `shutdown_drain_s` while their threads keep running them, then what is left
//! is closed and the threads end.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;

use http::{Request, Response};
use hyper::body::Incoming;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{oneshot, watch};
use tower_service::Service;

use crate::body::GatewayBody;
use crate::server::AcceptLoop;

/// Pending connections a serving thread's socket queues before it accepts them.
const BACKLOG: u32 = 1024;

/// Binds `count` listening sockets to `addr` with `SO_REUSEPORT`, so that the kernel spreads new
/// connections over them; with port 0 the first socket picks the port and the others join it.
/// Each socket is returned unregistered from any runtime, for the thread that will serve it.
pub(crate) fn bind(addr: SocketAddr, count: usize) -> io::Result<Vec<std::net::TcpListener>> {
    let mut listeners = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let listener = bind_one(addr)?;
        addr = listener.local_addr()?;
        listeners.push(listener.into_std()?);
    }
    Ok(listeners)
}

#[cfg(unix)]
fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does on Unix: a restarted gateway can bind while old connections
    // are in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    // Linux lets only sockets of the same effective user join a port this way.
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

#[cfg(not(unix))]
fn bind_one(_addr: SocketAddr) -> io::Result<TcpListener> {
    // Configuration refuses the mode on such platforms; this keeps the error honest if a
    // caller builds the configuration by hand.
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "thread-per-core serving needs SO_REUSEPORT",
    ))
}

/// The serving threads of one listener address.
pub(crate) struct Cores {
    /// One per thread: answered with the number of connections still open when its accept loop
    /// has stopped.
    stopped: Vec<oneshot::Receiver<usize>>,
    /// Turns true when the drain is over: the threads close what is left and end.
    drained: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

impl Cores {
    /// Starts one thread per listener, each serving the accept loop `accept_loop` makes for its
    /// listener until `stop` turns true.
    pub(crate) fn start<S, F>(
        name: &'static str,
        listeners: Vec<std::net::TcpListener>,
        accept_loop: F,
        stop: &watch::Receiver<bool>,
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
            // Built here so that a failure is this call's error, not a thread's panic.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let accept_loop = accept_loop.clone();
            let stop = stop.clone();
            let mut drained = drained_rx.clone();
            let (stopped_tx, stopped_rx) = oneshot::channel();
            let thread = std::thread::Builder::new()
                .name(format!("{name}-core-{index}"))
                .spawn(move || {
                    // Upstream keep-alive connections this thread opens stay its own.
                    mcp_router::set_pool_lane(index);
                    runtime.block_on(async move {
                        let listener = match TcpListener::from_std(listener) {
                            Ok(listener) => listener,
                            Err(e) => {
                                tracing::error!(listener = name, core = index, error = %e, "cannot register the listener");
                                let _ = stopped_tx.send(0);
                                return;
                            }
                        };
                        let mut connections = accept_loop(listener).run(stop).await;
                        let _ = stopped_tx.send(connections.len());
                        // The connections keep running on this thread while they drain.
                        let _ = drained.wait_for(|drained| *drained).await;
                        connections.abort_all();
                        while connections.join_next().await.is_some() {}
                    });
                });
            match thread {
                Ok(thread) => {
                    cores.threads.push(thread);
                    cores.stopped.push(stopped_rx);
                }
                Err(e) => {
                    // The threads already started end with `stop`; dropping `cores` ends them.
                    return Err(e);
                }
            }
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

    /// Closes every connection still open and waits for the threads to end.
    pub(crate) async fn close(mut self) {
        let _ = self.drained.send(true);
        let threads = std::mem::take(&mut self.threads);
        let joined = tokio::task::spawn_blocking(move || {
            for thread in threads {
                if thread.join().is_err() {
                    tracing::error!("a serving thread panicked");
                }
            }
        });
        let _ = joined.await;
    }
}

impl Drop for Cores {
    fn drop(&mut self) {
        // Threads not joined by `close` (an error while starting) must still end.
        let _ = self.drained.send(true);
    }
}
