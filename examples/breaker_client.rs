//! An MCP client wrapped in `mcp-breaker` alone: a tower `service_fn` that POSTs a JSON-RPC
//! `tools/list` (MCP 2026-07-28 headers and `_meta`) with hyper-util's client, behind a
//! [`BreakerLayer`] that trips after three failures in a row.
//!
//! ```text
//! cargo run --example breaker_client -- --demo                          # against a closed local port
//! cargo run --example breaker_client -- http://127.0.0.1:9001/mcp [N]   # N calls (default 5) to a server
//! ```
//! `--demo` sends twelve calls, 250 ms apart, to a loopback port nobody listens on: three
//! connection failures open the breaker, the next calls fail fast without touching the network,
//! after the open period one probe goes out, fails, and the breaker reopens for longer.
//! Each line shows the outcome and its latency.

// An example program: printing is how it talks to the user.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::error::Error;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mcp_breaker::{BreakerError, CircuitBreaker, McpClassifier, Outcome};
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

type BoxError = Box<dyn Error + Send + Sync>;

const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"breaker_client","version":"0.1.0"}}}}"#;

/// The head decides first (errors, 5xx, wrong content type); a JSON body must then be a JSON-RPC
/// response, where an `error` member or an `isError` result still counts as a success.
fn classify(result: &Result<Response<Bytes>, BoxError>, _latency: Duration) -> Outcome {
    let Ok(res) = result else {
        return Outcome::Failure;
    };
    match McpClassifier::classify_head(res.status(), res.headers()) {
        Outcome::Success if is_json(res) => McpClassifier::classify_body(res.body()),
        outcome => outcome,
    }
}

fn is_json(res: &Response<Bytes>) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, calls, pause) = match args.first().map(String::as_str) {
        Some("--demo") => {
            // Bind an ephemeral port and close it again: connecting there is refused.
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            (format!("http://127.0.0.1:{port}/mcp"), 12, 250)
        }
        Some(url) if url.starts_with("http://") => {
            let n = args.get(1).map(|n| n.parse()).transpose()?.unwrap_or(5);
            (url.to_owned(), n, 500)
        }
        _ => {
            eprintln!(
                "usage: breaker_client --demo | breaker_client http://HOST:PORT/PATH [CALLS]"
            );
            std::process::exit(2);
        }
    };

    let breaker = CircuitBreaker::builder("demo")
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(1))
        .build()?;

    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let post = service_fn(move |url: String| {
        let client = client.clone();
        async move {
            let req = Request::post(url)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/list")
                .body(Full::new(Bytes::from_static(TOOLS_LIST.as_bytes())))?;
            let res = tokio::time::timeout(Duration::from_secs(2), client.request(req)).await??;
            let (parts, body) = res.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, BoxError>(Response::from_parts(parts, body))
        }
    });
    let mut svc = ServiceBuilder::new()
        .layer(breaker.layer().classifier(classify))
        .service(post);

    println!("tools/list -> {url}, breaker: 3 failures in a row open it for 1 s (growing)");
    for i in 1..=calls {
        let started = tokio::time::Instant::now();
        let result = svc.ready().await?.call(url.clone()).await;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let what = match &result {
            Ok(res) => format!("HTTP {} ({} bytes)", res.status(), res.body().len()),
            Err(BreakerError::Open { retry_after }) => {
                format!("rejected: circuit open, retry in {retry_after:.1?}")
            }
            Err(BreakerError::Inner(e)) => {
                let mut text = format!("error: {e}");
                let mut source = e.source();
                while let Some(cause) = source {
                    text.push_str(&format!(": {cause}"));
                    source = cause.source();
                }
                text
            }
        };
        println!(
            "#{i:<2} {ms:>8.2} ms  state after: {:<9}  {what}",
            breaker.state()
        );
        if i < calls {
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }
    Ok(())
}
