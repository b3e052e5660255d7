//! The listeners: HTTP/2 with prior knowledge next to HTTP/1.1 on one port; the connection limit
//! (extra clients wait) and the timeouts that free its slots: the header-read timeout (a silent
//! connection, a stalled request head or TLS handshake, an h2 connection that sends only the
//! preface, over TCP or TLS) and the idle timeout (an h2 connection with no request in flight).

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use support::{GatewayProcess, base_config, users_json, workdir, write};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_connection_limit_and_header_read_timeout() {
    connection_limit_and_header_read_timeout("").await;
}

/// With one accept loop per serving thread, the limit is still one for all of them, and the
/// client waiting for the slot is served whichever thread's socket the kernel queued it at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_connection_limit_and_header_read_timeout_thread_per_core() {
    connection_limit_and_header_read_timeout(&support::thread_per_core(4)).await;
}

async fn connection_limit_and_header_read_timeout(runtime: &str) {
    let dir = workdir("gw-listener");
    write(dir.path(), "users.json", &users_json(&[]));
    let config = base_config(&format!(
        "\n[limits]\nmax_connections = 1\nheader_read_timeout_ms = 700\n{runtime}"
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let addr = gw.addr;

    // HTTP/2 with prior knowledge on the plain port.
    let h2: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let res = h2
        .request(
            http::Request::post(format!("http://{addr}/servers/vh1/mcp"))
                .body(Full::new(Bytes::from_static(b"{}")))
                .expect("request"),
        )
        .await
        .expect("h2c request");
    assert_eq!(res.version(), http::Version::HTTP_2);
    assert_eq!(res.status(), 401);
    drop(res);
    drop(h2);
    tokio::time::sleep(Duration::from_millis(100)).await;

    // A silent connection takes the only slot...
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        support::send_body(addr, "POST", "/servers/vh1/mcp", &[], "{}").await
    });
    // ...so the next client waits until the header-read timeout closes the silent one.
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf))
        .await
        .expect("the silent connection is closed by the header read timeout")
        .unwrap_or(0);
    assert_eq!(n, 0, "closed without a response");
    let reply = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting client is served once the slot is free")
        .expect("task");
    assert_eq!(reply.status, 401);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(400),
        "the second client was served while the slot was taken ({waited:?})"
    );

    // A client that starts a request head and stalls is cut off as well.
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"POST /servers/vh1/mcp HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("partial head");
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(
        read.is_ok(),
        "a stalled request head must be closed by the timeout"
    );

    // Keep-alive requests on one connection still work.
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    for _ in 0..3 {
        let res = client
            .request(
                http::Request::get(format!(
                    "http://{addr}/.well-known/oauth-protected-resource"
                ))
                .body(Full::default())
                .expect("request"),
            )
            .await
            .expect("keep-alive request");
        assert_eq!(res.status(), 200);
        let _ = res.into_body().collect().await;
    }
}

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads until the peer closes; `None` if it is still open after `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut sink = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut sink))
        .await
        .ok()
        .map(|_| started.elapsed())
}

/// A fresh HTTP/1.1 request (the RFC 9728 document) on a new connection.
async fn fresh_http1_status(addr: std::net::SocketAddr) -> u16 {
    support::send_body(
        addr,
        "GET",
        "/.well-known/oauth-protected-resource",
        &[],
        "",
    )
    .await
    .status
    .as_u16()
}

/// `limits.max_connections` clients that send only the h2 preface cannot hold the listener: each
/// is closed once `header_read_timeout_ms` passes without a stream, and the HTTP/1.1 client
/// waiting behind them is served. Control: an h2 connection that keeps sending requests (past
/// both timeouts) is not cut, and once it goes idle it is closed after `idle_connection_timeout_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_preface_only_and_idle_connections_are_closed() {
    let dir = workdir("gw-listener-h2-idle");
    write(dir.path(), "users.json", &users_json(&[]));
    let config = base_config(
        "\n[limits]\nmax_connections = 2\nheader_read_timeout_ms = 2000\nidle_connection_timeout_ms = 5000\n",
    );
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let addr = gw.addr;

    let started = Instant::now();
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut holder = TcpStream::connect(addr).await.expect("connect");
        holder.write_all(H2_PREFACE).await.expect("preface");
        holders.push(holder);
    }
    // Both slots are taken: the HTTP/1.1 client waits in the backlog...
    let waiting = tokio::spawn(fresh_http1_status(addr));
    // ...until the preface-only connections are closed (not before the timeout).
    for holder in &mut holders {
        closed_within(holder, Duration::from_secs(10))
            .await
            .expect("a preface-only connection is closed");
    }
    let closed_after = started.elapsed();
    assert!(
        closed_after >= Duration::from_millis(1900),
        "{closed_after:?}"
    );
    let status = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting client is served once the slots are free")
        .expect("task");
    assert_eq!(status, 200);

    // Control: one h2 connection with a request every 300 ms for 7 s (past both timeouts, with
    // seconds of margin for a loaded machine) stays open.
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .handshake::<_, Full<Bytes>>(hyper_util::rt::TokioIo::new(stream))
        .await
        .expect("h2 handshake");
    let mut connection = tokio::spawn(connection);
    let busy_until = Instant::now() + Duration::from_secs(7);
    let mut requests = 0;
    let mut last_answer = Instant::now();
    while Instant::now() < busy_until {
        let res = sender
            .send_request(
                http::Request::get(format!(
                    "http://{addr}/.well-known/oauth-protected-resource"
                ))
                .body(Full::default())
                .expect("request"),
            )
            .await
            .expect("the busy h2 connection is still open");
        assert_eq!(res.status(), 200);
        let _ = res.into_body().collect().await;
        last_answer = Instant::now();
        requests += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(requests >= 2, "{requests}");
    assert!(!connection.is_finished(), "the busy connection was cut");
    // Idle now: closed by the gateway after the idle timeout (never before it).
    tokio::time::timeout(Duration::from_secs(20), &mut connection)
        .await
        .expect("the idle h2 connection is closed")
        .expect("task")
        .ok();
    let idle = last_answer.elapsed();
    assert!(
        idle >= Duration::from_millis(4900),
        "closed after {idle:?} idle"
    );
}

/// A TCP client that starts a TLS handshake and stalls is dropped after
/// `header_read_timeout_ms`, freeing its slot for an HTTPS client; an h2 client over TLS that
/// sends only the preface is closed the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_tls_handshakes_and_tls_h2_prefaces_are_dropped() {
    let fixtures = support::FIXTURES;
    let dir = workdir("gw-listener-tls-stall");
    write(dir.path(), "users.json", &users_json(&[]));
    let config = base_config("\n[limits]\nmax_connections = 1\nheader_read_timeout_ms = 1000\n")
        .replace(
            "admin_addr = \"127.0.0.1:0\"",
            &format!(
                "admin_addr = \"\"\ntls_cert = \"{fixtures}/tls_server.pem\"\ntls_key = \"{fixtures}/tls_server_key.pem\""
            ),
        );
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let addr = gw.addr;

    let tls = support::fixture_tls_client();
    // An HTTPS HTTP/1.1 request on a new connection.
    let https_status = || {
        let tls = tls.clone();
        async move {
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_only()
                .enable_http1()
                .build();
            let client: Client<_, Full<Bytes>> =
                Client::builder(TokioExecutor::new()).build(connector);
            let req = http::Request::get(format!(
                "https://localhost:{}/.well-known/oauth-protected-resource",
                addr.port()
            ))
            .body(Full::default())
            .expect("request");
            client.request(req).await.expect("HTTPS request").status()
        }
    };

    // The first bytes of a ClientHello record, then nothing.
    let started = Instant::now();
    let mut stalled = TcpStream::connect(addr).await.expect("connect");
    stalled
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .expect("partial ClientHello");
    let waiting = tokio::spawn(https_status());
    closed_within(&mut stalled, Duration::from_secs(10))
        .await
        .expect("the stalled handshake is dropped");
    assert!(started.elapsed() >= Duration::from_millis(900));
    let status = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the HTTPS client is served once the slot is free")
        .expect("task");
    assert_eq!(status, 200);

    // A completed TLS handshake with ALPN h2 and only the preface: closed as on plain TCP.
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new({
        let mut tls = tls.clone();
        tls.alpn_protocols = vec![b"h2".to_vec()];
        tls
    }));
    let started = Instant::now();
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut h2 = connector.connect(name, tcp).await.expect("TLS handshake");
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    h2.write_all(H2_PREFACE).await.expect("preface");
    let mut sink = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), h2.read_to_end(&mut sink))
        .await
        .expect("the preface-only TLS connection is closed")
        .ok();
    assert!(started.elapsed() >= Duration::from_millis(900));
    let status = tokio::time::timeout(Duration::from_secs(10), https_status())
        .await
        .expect("served after the preface-only TLS connection is gone");
    assert_eq!(status, 200);
}
