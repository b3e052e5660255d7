//! `stop` makes the backend unreachable; `restart` serves again on the same port, fresh.

use std::time::Duration;

use http::StatusCode;
use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::json;
use tokio::net::TcpStream;

use crate::{
    clients,
    eras::{call, first_text},
    raw_http,
};

async fn connection_refused(backend_addr: std::net::SocketAddr) -> bool {
    match tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(backend_addr)).await {
        Ok(Err(error)) => error.kind() == std::io::ErrorKind::ConnectionRefused,
        _ => false,
    }
}

#[tokio::test]
async fn stop_refuses_connections_and_restart_serves_the_same_port() {
    let backend = TestBackend::start(BackendSpec::both("phoenix")).await;
    let addr = backend.addr();
    assert_eq!(backend.url(), format!("http://{addr}/mcp"));
    assert_eq!(backend.name(), "phoenix");
    let (_, session) = raw_http::legacy_initialize(&backend.url()).await;
    let session = session.expect("session");
    let list = json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/list" });
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", raw_http::LEGACY),
    ];
    assert_eq!(
        raw_http::post(&backend.url(), &headers, &list).await.status,
        StatusCode::OK
    );

    backend.stop().await;
    assert!(!backend.is_running());
    assert!(
        connection_refused(addr).await,
        "stopped backend must refuse connections"
    );
    backend.stop().await; // idempotent

    backend.restart().await;
    assert!(backend.is_running());
    assert_eq!(backend.addr(), addr);
    let response = raw_http::post(&backend.url(), &headers, &list).await;
    assert_eq!(
        response.status,
        StatusCode::NOT_FOUND,
        "old sessions are unknown after restart"
    );
    let (response, new_session) = raw_http::legacy_initialize(&backend.url()).await;
    assert_eq!(response.status, StatusCode::OK);
    assert_ne!(new_session.as_deref(), Some(session.as_str()));
}

#[tokio::test]
async fn stop_closes_open_streams_and_clients_recover_after_restart() {
    let backend = TestBackend::start(BackendSpec::modern("bounce")).await;
    let (client, _) = clients::modern(&backend.url()).await;
    let echo = client
        .call_tool(call("echo", json!({ "text": "before" })))
        .await
        .expect("echo before");
    assert_eq!(first_text(&echo), "bounce: before");

    backend.stop().await;
    let during = client
        .call_tool(call("echo", json!({ "text": "during" })))
        .await;
    assert!(during.is_err(), "no answer from a stopped backend");

    backend.restart().await;
    let after = client
        .call_tool(call("echo", json!({ "text": "after" })))
        .await
        .expect("a stateless client works again after restart");
    assert_eq!(first_text(&after), "bounce: after");
    client.cancel().await.expect("cancel");
}

#[tokio::test]
async fn dropping_the_handle_stops_the_backend() {
    let backend = TestBackend::start(BackendSpec::legacy("dropped")).await;
    let addr = backend.addr();
    drop(backend);
    let mut refused = false;
    for _ in 0..100 {
        if connection_refused(addr).await {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "a dropped backend must stop listening");
}

#[tokio::test]
async fn start_on_a_chosen_port_and_counters_survive_restart() {
    let first = TestBackend::start(BackendSpec::modern("port-probe")).await;
    let port = first.addr().port();
    drop(first);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let backend = TestBackend::start(BackendSpec::modern("fixed").port(port)).await;
    assert_eq!(backend.addr().port(), port);
    let response = raw_http::modern_request(
        &backend.url(),
        1,
        "tools/call",
        json!({ "name": "echo", "arguments": { "text": "x" } }),
    )
    .await;
    assert_eq!(response.reply()["result"]["content"][0]["text"], "fixed: x");
    backend.restart().await;
    assert_eq!(backend.calls_finished("echo"), 1);
    assert!(
        !backend.requests().is_empty(),
        "the request log survives restart"
    );
}
