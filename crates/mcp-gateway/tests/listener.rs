//! The plain listener: HTTP/2 with prior knowledge next to HTTP/1.1 on one port; the connection
//! limit (extra clients wait) and the header-read timeout (an idle or silent connection is closed,
//! which frees its slot).

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
    let dir = workdir("gw-listener");
    write(dir.path(), "users.json", &users_json(&[]));
    let config = base_config("\n[limits]\nmax_connections = 1\nheader_read_timeout_ms = 700\n");
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
    let waiting =
        tokio::spawn(
            async move { support::send(addr, "POST", "/servers/vh1/mcp", &[], "{}").await },
        );
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
