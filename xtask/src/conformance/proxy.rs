//! The bearer-injecting reverse-proxy hop in front of the gateway.
//!
//! The conformance suite sends no `Authorization` header and has no option to add one, while
//! the gateway (rightly) answers 401 without a token. This hop adds `Authorization: Bearer <token>`
//! to every request and passes everything else through byte for byte, so the gateway under test
//! keeps its real authentication.
//!
//! One request per client connection: the hop adds `Connection: close` upstream, the gateway
//! then answers with `connection: close`, and the client opens a new connection for its next
//! request. That keeps the hop a plain byte pipe after the request head (no HTTP framing to
//! parse), streams (SSE) included.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// Largest request head accepted (the suite's heads are far smaller).
const MAX_HEAD: usize = 64 * 1024;

/// A running hop; stops accepting when dropped.
pub(crate) struct BearerProxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl BearerProxy {
    /// Listens on a free loopback port and forwards to `upstream` with `token`.
    pub(crate) fn start(upstream: SocketAddr, token: &str) -> Result<Self, String> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("proxy: cannot listen: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("proxy: no local address: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let authorization: Arc<str> = format!("Authorization: Bearer {token}\r\n").into();
        let stopping = Arc::clone(&stop);
        let accept = std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let authorization = Arc::clone(&authorization);
                std::thread::spawn(move || {
                    // A failed exchange only ends that connection; the client sees it closed.
                    let _ = forward(client, upstream, &authorization);
                });
            }
        });
        Ok(Self {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    /// The address clients connect to.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for BearerProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Relays one request: its head with the bearer token and `Connection: close`, then bytes both
/// ways until the upstream closes.
fn forward(
    mut client: TcpStream,
    upstream: SocketAddr,
    authorization: &str,
) -> std::io::Result<()> {
    let (head, rest) = read_head(&mut client)?;
    let mut server = TcpStream::connect(upstream)?;
    server.set_nodelay(true)?;
    client.set_nodelay(true)?;
    server.write_all(rewrite_head(&head, authorization).as_bytes())?;
    server.write_all(&rest)?;
    // The rest of the body (whatever its framing) flows on a thread; it ends when the client
    // closes, which the shutdown below forces once the answer is complete.
    let mut client_reader = client.try_clone()?;
    let mut server_writer = server.try_clone()?;
    let body = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_reader, &mut server_writer);
    });
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
    let _ = body.join();
    Ok(())
}

/// Reads until the end of the request head; returns the head (without the blank line) and any
/// body bytes read past it.
fn read_head(client: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0_u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            return Ok((head, buffer[end + 4..].to_vec()));
        }
        if buffer.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
        let read = client.read(&mut chunk)?;
        if read == 0 {
            return Err(std::io::Error::other("client closed before the head ended"));
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// The head with any client `Authorization`, `Connection` and `Keep-Alive` header replaced by
/// the token and `Connection: close`.
fn rewrite_head(head: &str, authorization: &str) -> String {
    let mut lines = head.split("\r\n");
    let mut out = String::with_capacity(head.len() + authorization.len() + 32);
    out.push_str(lines.next().unwrap_or_default());
    out.push_str("\r\n");
    for line in lines {
        let name = line.split(':').next().unwrap_or_default().trim();
        if ["authorization", "connection", "keep-alive"]
            .iter()
            .any(|dropped| name.eq_ignore_ascii_case(dropped))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str(authorization);
    out.push_str("Connection: close\r\n\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::rewrite_head;

    #[test]
    fn the_head_gets_the_token_and_connection_close_instead_of_the_clients() {
        let head = "POST /servers/c/mcp HTTP/1.1\r\nHost: x\r\nauthorization: Basic abc\r\n\
                    connection: keep-alive\r\nKeep-Alive: timeout=5\r\ncontent-length: 2";
        assert_eq!(
            rewrite_head(head, "Authorization: Bearer t\r\n"),
            "POST /servers/c/mcp HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\n\
             Authorization: Bearer t\r\nConnection: close\r\n\r\n"
        );
    }
}
