//! Graceful shutdown of the process: SIGTERM during a long streaming tool call stops new
//! connections at once, lets the call stream to its end within the drain deadline, then the
//! process exits 0; on the work-stealing runtime and with one runtime per serving thread
//! (`runtime.mode = "thread-per-core"`), whose threads must keep running the call while it
//! drains. A call the drain deadline cuts still has its 2025 backend told
//! (`notifications/cancelled`) before the process exits.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::json;
use support::{GatewayProcess, base_config, bearer, modern_meta, modern_request, sse_messages};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_streaming_call_and_exits_zero() {
    drains_a_streaming_call_and_exits_zero("", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_streaming_call_and_exits_zero_thread_per_core() {
    drains_a_streaming_call_and_exits_zero(&support::thread_per_core(3), 3).await;
}

/// `serving_threads`: the threads of their own the listener is served by (0: the runtime's
/// workers), as the "listening" line says.
async fn drains_a_streaming_call_and_exits_zero(runtime: &str, serving_threads: usize) {
    let (alpha, mut gw, _dir) = gateway_for(BackendSpec::modern("alpha"), runtime, 20).await;

    // A 30-step call, 100 ms apart, streaming progress.
    let (mut body, mut received) = streaming_call(&gw, 30).await;
    let signalled = Instant::now();
    gw.sigterm();

    // New connections are refused soon after the signal, while the call still streams.
    let addr = gw.addr;
    let refused = support::poll_until(Duration::from_secs(2), || async move {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    assert!(refused, "the listener still accepts after SIGTERM");

    // The call streams to its end.
    while let Some(frame) = tokio::time::timeout(Duration::from_secs(15), body.frame())
        .await
        .expect("the stream keeps going during the drain")
    {
        if let Ok(data) = frame.expect("frame").into_data() {
            received.extend_from_slice(&data);
        }
    }
    let messages = sse_messages(&String::from_utf8_lossy(&received));
    let progress = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert!(progress >= 20, "{progress} progress events: {messages:?}");
    let last = messages.last().expect("a final response");
    assert_eq!(
        last["result"]["content"][0]["text"], "alpha: done",
        "{last}"
    );
    assert!(
        signalled.elapsed() > Duration::from_secs(1),
        "the call was cut short"
    );

    let status = gw.wait(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "{}", gw.logs());
    let logs = gw.logs();
    assert!(logs.contains("drained"), "{logs}");
    assert!(
        logs.contains(&format!("\"serving_threads\":{serving_threads}")),
        "{logs}"
    );
    assert_eq!(alpha.calls_finished("slow"), 1);
    assert_eq!(alpha.calls_cancelled("slow"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_drain_cuts_is_cancelled_at_its_2025_backend() {
    drain_cut_call_is_cancelled_upstream("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_drain_cuts_is_cancelled_at_its_2025_backend_thread_per_core() {
    drain_cut_call_is_cancelled_upstream(&support::thread_per_core(2)).await;
}

/// A 2026-07-28 client's call relayed over the caller's upstream 2025 session outlives the
/// drain deadline: its connection is closed, and the backend still gets the call's
/// `notifications/cancelled` (a 2025 server cannot tell a closed stream from a disconnection)
/// before the process exits, whichever runtime ran the call.
async fn drain_cut_call_is_cancelled_upstream(runtime: &str) {
    let (alpha, mut gw, _dir) = gateway_for(BackendSpec::legacy("alpha"), runtime, 1).await;

    // 600 steps 100 ms apart: a minute, far past the one-second drain.
    let (mut body, _) = streaming_call(&gw, 600).await;
    gw.sigterm();
    let status = gw.wait(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "{}", gw.logs());
    let logs = gw.logs();
    assert!(logs.contains("drain deadline reached"), "{logs}");
    // The client's stream ends without a final answer: its connection was closed.
    while let Ok(Some(Ok(_))) = tokio::time::timeout(Duration::from_secs(10), body.frame()).await {}

    let calls = alpha.requests_for("tools/call");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let upstream_id = calls[0].json().expect("json")["id"].clone();
    let cancels = alpha.requests_for("notifications/cancelled");
    assert_eq!(cancels.len(), 1, "the backend was not told: {logs}");
    let cancel = cancels[0].json().expect("json");
    assert_eq!(cancel["params"]["requestId"], upstream_id, "{cancel}");
    assert!(
        alpha
            .wait_for_calls("slow", Duration::from_secs(10), |c| c.cancelled == 1)
            .await,
        "the backend's handler was not cancelled: {:?}",
        alpha.calls("slow")
    );
    assert_eq!(alpha.calls_finished("slow"), 0);
}

/// Backend `alpha` from `spec` and a gateway (its `[runtime]` section `runtime`, draining for
/// `drain_s` seconds) where alice's virtual host vh1 holds it; the directory must outlive it.
async fn gateway_for(
    spec: BackendSpec,
    runtime: &str,
    drain_s: u64,
) -> (TestBackend, GatewayProcess, mcp_test_support::TempDir) {
    let alpha = TestBackend::start(spec).await;
    let dir = support::workdir("gw-shutdown");
    support::write(
        dir.path(),
        "users.json",
        &support::users_json(&[("alice", "vh1", &[("alpha", alpha.url())])]),
    );
    let config = base_config(runtime).replace(
        "shutdown_drain_s = 10",
        &format!("shutdown_drain_s = {drain_s}"),
    );
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    (alpha, gw, dir)
}

/// Starts `alpha-slow` with `steps` steps 100 ms apart, progress streaming, as alice on vh1;
/// returns the response body once its first event arrived, and what was read of it.
async fn streaming_call(gw: &GatewayProcess, steps: u64) -> (Incoming, Vec<u8>) {
    let mut meta = modern_meta();
    meta["progressToken"] = json!("p1");
    let (headers, body) = modern_request(
        "tools/call",
        json!({"name": "alpha-slow", "arguments": {"steps": steps, "delay_ms": 100}, "_meta": meta}),
    );
    let mut request = http::Request::post(gw.url("vh1")).header("authorization", bearer("alice"));
    for (name, value) in &headers {
        request = request.header(*name, value);
    }
    let request = request.body(Full::new(Bytes::from(body))).expect("request");
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let response = client.request(request).await.expect("call accepted");
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/event-stream"),
        "a progress-streaming call answers with SSE"
    );
    let mut body = response.into_body();
    let mut received = Vec::new();
    // Wait for the first event.
    while !String::from_utf8_lossy(&received).contains("\n\n") {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("first event within 10 s")
            .expect("stream open")
            .expect("frame");
        if let Ok(data) = frame.into_data() {
            received.extend_from_slice(&data);
        }
    }
    (body, received)
}
