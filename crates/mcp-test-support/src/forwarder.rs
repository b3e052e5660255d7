//! [`Forwarder`]: a plain TCP forwarder on a fresh loopback port, standing for any TLS proxy or
//! load balancer in front of a server, which counts the HTTP requests it passed on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Forwards every connection to its target, byte for byte, and counts the request lines
/// (`POST /`, `GET /`, `DELETE /` at the start of a read) going towards the target. The target
/// may be set after the forwarder is bound ([`Forwarder::forward_to`]), so a server's
/// configuration can name the forwarder before the server starts. Stops when dropped.
pub struct Forwarder {
    addr: SocketAddr,
    target: watch::Sender<Option<SocketAddr>>,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// Binds a loopback port; connections wait until a target is set.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (target, watching) = watch::channel(None::<SocketAddr>);
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut watching = watching.clone();
                let counted = Arc::clone(&counted);
                tokio::spawn(async move {
                    let Ok(target) = watching.wait_for(Option::is_some).await.map(|t| *t) else {
                        return;
                    };
                    let Some(target) = target else { return };
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    pipe(client, server, counted).await;
                });
            }
        });
        Self {
            addr,
            target,
            requests,
            task,
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where connections go from now on.
    pub fn forward_to(&self, target: SocketAddr) {
        self.target.send_replace(Some(target));
    }

    /// HTTP requests passed towards the target so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies both ways until either side closes, counting request lines towards the server.
async fn pipe(client: TcpStream, server: TcpStream, requests: Arc<AtomicUsize>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = client_read.read(&mut buf).await
            && n > 0
        {
            let chunk = &buf[..n];
            if [&b"POST /"[..], b"GET /", b"DELETE /"]
                .iter()
                .any(|line| chunk.starts_with(line))
            {
                requests.fetch_add(1, Ordering::SeqCst);
            }
            if server_write.write_all(chunk).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}
