//! Shared helpers of the process tests: start the `mcp-gateway` binary with a temp config, read
//! its JSON logs, stop it with signals, send raw HTTP requests, speak 2026-07-28.

#![allow(dead_code, unreachable_pub)] // each test binary uses a different subset

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
// Re-exported so that a test file finds every helper in one place; each uses a different subset.
#[allow(unused_imports)]
pub use mcp_test_support::{Reply, poll_until, rpc_error, send_body, sse_messages, unix_now};
use mcp_test_support::{
    TempDir, legacy_headers, modern_meta_with, modern_request_with_meta, post_modern,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

pub const SECRET: &str = "e2e-secret-e2e-secret-e2e-secret-e2e";
pub const ISSUER: &str = "https://issuer.test";
pub const AUDIENCE: &str = "mcp-gateway";

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcp-gateway")
}

/// A fresh temp directory.
pub fn workdir(name: &str) -> TempDir {
    TempDir::new(name).expect("temp dir")
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write file");
    path
}

/// The `[auth.jwt]` line of [`base_config`] that enables HS256 with [`SECRET`] (explicitly: the
/// default variable alone no longer counts next to another key); replace it to configure others.
pub const HS256_LINE: &str = "hs256_secret_env = \"MCP_GATEWAY_JWT_SECRET\"\n";

/// The `[runtime]` section of a gateway serving on `threads` threads of its own, one
/// single-threaded runtime each (`runtime.mode = "thread-per-core"`), for [`base_config`]'s `extra`.
pub fn thread_per_core(threads: usize) -> String {
    format!("\n[runtime]\nmode = \"thread-per-core\"\nthreads = {threads}\n")
}

/// The gateway.toml every process test starts from; `extra` is appended (more sections).
pub fn base_config(extra: &str) -> String {
    format!(
        r#"shutdown_drain_s = 10

[listen]
addr = "127.0.0.1:0"
admin_addr = "127.0.0.1:0"

[auth.jwt]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
leeway_s = 5
{HS256_LINE}
[config_store]
kind = "file"
path = "users.json"
poll_interval_ms = 100

[telemetry]
log_format = "json"
{extra}"#
    )
}

/// One user entry of [`users_json`]: subject, virtual host, `(backend name, url)` pairs.
pub type UserEntry<'a> = (&'a str, &'a str, &'a [(&'a str, String)]);

/// `{"users": {sub: {"virtual_hosts": {vhost: {"backends": {name: {"url": url}}}}}}}`.
pub fn users_json(entries: &[UserEntry<'_>]) -> String {
    let mut users = serde_json::Map::new();
    for (sub, vhost, backends) in entries {
        let mut b = serde_json::Map::new();
        for (name, url) in *backends {
            b.insert(
                (*name).to_owned(),
                json!({ "url": url, "timeout_ms": 10000 }),
            );
        }
        let user = users
            .entry((*sub).to_owned())
            .or_insert_with(|| json!({ "virtual_hosts": {} }));
        user["virtual_hosts"][*vhost] = json!({ "backends": b });
    }
    json!({ "users": users }).to_string()
}

/// An HS256 token with `claims`, signed with `secret`.
pub fn token_with(claims: Value, alg: Algorithm, secret: &[u8]) -> String {
    encode(
        &Header::new(alg),
        &claims,
        &EncodingKey::from_secret(secret).expect("hmac key"),
    )
    .expect("encode")
}

/// The test fixtures directory (PEM keys, TLS certificates).
pub const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// An RS256 token with `claims` (and `kid`), signed with the fixture key `rsa_private.pem`.
pub fn rs256_token(claims: &Value, kid: Option<&str>) -> String {
    let pem = std::fs::read(format!("{FIXTURES}/rsa_private.pem")).expect("private key");
    let mut header = Header::new(Algorithm::RS256);
    header.kid = kid.map(str::to_owned);
    encode(
        &header,
        claims,
        &EncodingKey::from_rsa_pem(&pem).expect("rsa key"),
    )
    .expect("encode")
}

/// A TLS client configuration that trusts the fixture CA (`tls_ca.pem`, which signed the
/// `localhost` certificate `tls_server.pem`).
pub fn fixture_tls_client() -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject;

    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(format!("{FIXTURES}/tls_ca.pem")).expect("ca");
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(cert.expect("pem")).expect("root");
    }
    rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A valid token for `sub`.
pub fn token(sub: &str) -> String {
    token_with(
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": unix_now() + 600}),
        Algorithm::HS256,
        SECRET.as_bytes(),
    )
}

/// `Bearer <token for sub>`.
pub fn bearer(sub: &str) -> String {
    format!("Bearer {}", token(sub))
}

/// A running `mcp-gateway serve` process; killed when dropped.
pub struct GatewayProcess {
    child: Child,
    pub addr: SocketAddr,
    pub admin: Option<SocketAddr>,
    logs: Arc<Mutex<Vec<String>>>,
}

impl GatewayProcess {
    /// Writes `config` as `dir/gateway.toml` and starts `mcp-gateway serve --config` on it with
    /// the test secret in `MCP_GATEWAY_JWT_SECRET`; waits for the `listening` log line.
    pub async fn start(dir: &Path, config: &str, env: &[(&str, &str)]) -> Self {
        let path = write(dir, "gateway.toml", config);
        let mut command = Command::new(bin());
        command
            .arg("serve")
            .arg("--config")
            .arg(&path)
            .env("MCP_GATEWAY_JWT_SECRET", SECRET)
            .env("MCP_GATEWAY_TELEMETRY_LOG_FORMAT", "json")
            .env_remove("MCP_GATEWAY_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("spawn mcp-gateway");
        let stderr = child.stderr.take().expect("stderr piped");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sink = Arc::clone(&logs);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(event) = serde_json::from_str::<Value>(&line)
                    && event["message"] == "listening"
                {
                    let _ = tx.send(event);
                }
                sink.lock().expect("logs").push(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let event = loop {
            match tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
                Ok(Some(event)) => break event,
                Ok(None) | Err(_) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        panic!(
                            "mcp-gateway exited ({status}) before listening:\n{}",
                            logs.lock().expect("logs").join("\n")
                        );
                    }
                    assert!(
                        Instant::now() < deadline,
                        "mcp-gateway did not listen within 60 s:\n{}",
                        logs.lock().expect("logs").join("\n")
                    );
                }
            }
        };
        let addr = event["addr"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .expect("listening line has addr");
        let admin = event["admin_addr"].as_str().and_then(|a| a.parse().ok());
        Self {
            child,
            addr,
            admin,
            logs,
        }
    }

    /// Every log line so far.
    pub fn logs(&self) -> String {
        self.logs.lock().expect("logs").join("\n")
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        let pid = self.child.id().expect("running child has a pid");
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed");
    }

    /// Kills the process at once (SIGKILL): no drain, nothing written anywhere on the way out.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill mcp-gateway");
    }

    /// Waits for the process to exit.
    pub async fn wait(&mut self, limit: Duration) -> ExitStatus {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => status.expect("wait"),
            Err(_) => panic!(
                "mcp-gateway did not exit within {limit:?}:\n{}",
                self.logs()
            ),
        }
    }

    /// `http://<addr>/servers/<vhost>/mcp`.
    pub fn url(&self, vhost: &str) -> String {
        format!("http://{}/servers/{vhost}/mcp", self.addr)
    }
}

/// Runs the binary with `args` (and `env`) to completion: `(exit code, stdout, stderr)`.
pub fn run_cli(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = std::process::Command::new(bin());
    command
        .args(args)
        .env_remove("MCP_GATEWAY_CONFIG")
        .env_remove("MCP_GATEWAY_JWT_SECRET")
        .stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("run mcp-gateway");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `_meta` of a well-formed 2026-07-28 request: the client declares no capability (tests that
/// need one declare it).
pub fn modern_meta() -> Value {
    modern_meta_with(json!({}))
}

/// Headers and body of a well-formed 2026-07-28 request ([`modern_meta`] added unless `params`
/// has a `_meta`).
pub fn modern_request(method: &str, params: Value) -> (Vec<(&'static str, String)>, String) {
    modern_request_with_meta(method, params, modern_meta())
}

/// A 2026-07-28 request for `sub` to `/servers/{vhost}/mcp`, plus `extra` headers.
pub async fn modern(
    addr: SocketAddr,
    sub: &str,
    vhost: &str,
    method: &str,
    params: Value,
    extra: &[(&str, &str)],
) -> Reply {
    modern_with_token(addr, &token(sub), vhost, method, params, extra).await
}

/// [`modern`] with any bearer `token` (another issuer, another algorithm).
pub async fn modern_with_token(
    addr: SocketAddr,
    token: &str,
    vhost: &str,
    method: &str,
    params: Value,
    extra: &[(&str, &str)],
) -> Reply {
    let request = modern_request(method, params);
    post_modern(addr, &format!("Bearer {token}"), vhost, request, extra).await
}

/// GETs `path` on the admin listener.
pub async fn admin_get(process: &GatewayProcess, path: &str) -> Reply {
    send_body(process.admin.expect("admin listener"), "GET", path, &[], "").await
}

impl GatewayProcess {
    /// The process id (for `/proc/<pid>/…` resource checks).
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running child has a pid")
    }
}

/// What a raw exchange got back: the status of the first response (`None` when the server closed
/// without answering) and everything read until the server closed the connection.
#[derive(Debug)]
pub struct RawReply {
    pub status: Option<u16>,
    pub bytes: Vec<u8>,
}

impl RawReply {
    /// The first response's body (after the blank line), lossily decoded.
    pub fn body(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        text.split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default()
    }

    /// Whether the first response's head has `name: value` (case-insensitive name).
    pub fn has_header(&self, name: &str, value: &str) -> bool {
        let text = String::from_utf8_lossy(&self.bytes);
        let head = text.split("\r\n\r\n").next().unwrap_or_default();
        head.lines().skip(1).any(|line| {
            line.split_once(':')
                .is_some_and(|(n, v)| n.trim().eq_ignore_ascii_case(name) && v.trim() == value)
        })
    }
}

/// Writes `request` (raw bytes, so that headers hyper's client would refuse can be sent) on a new
/// connection and reads until the server closes it. Panics when the server neither answers nor
/// closes within 20 s: a hang is a failure, not a slow answer.
pub async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> RawReply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the gateway");
    // The server may answer and close before reading everything (e.g. 431): a failed write is
    // not the test's concern, the answer is.
    let _ = stream.write_all(request).await;
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0_u8; 16 * 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the gateway neither answered nor closed within 20 s; read so far: {}",
        String::from_utf8_lossy(&bytes)
    );
    // "HTTP/1.1 200": the first 12 bytes, whatever the body holds.
    let status = bytes
        .get(..12)
        .and_then(|head| std::str::from_utf8(head).ok())
        .and_then(|t| t.strip_prefix("HTTP/1.1 "))
        .and_then(|code| code.parse().ok());
    RawReply { status, bytes }
}

/// The value of the Prometheus sample `series` (name plus labels, exactly as rendered) in the
/// admin listener's `/metrics`, or `None` when it is not there.
pub async fn metric(process: &GatewayProcess, series: &str) -> Option<f64> {
    let text = admin_get(process, "/metrics").await;
    text.text().lines().find_map(|line| {
        line.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// A 2025-11-25 POST for `sub` to `/servers/{vhost}/mcp`, in `session` when given.
pub async fn legacy_post(
    addr: SocketAddr,
    sub: &str,
    vhost: &str,
    session: Option<&str>,
    body: &Value,
) -> Reply {
    let auth = bearer(sub);
    let headers = legacy_headers(Some(&auth), session);
    send_body(
        addr,
        "POST",
        &format!("/servers/{vhost}/mcp"),
        &headers,
        &body.to_string(),
    )
    .await
}

/// Opens a 2025-11-25 session for `sub` (`initialize` + `notifications/initialized`) and returns
/// its id.
pub async fn legacy_initialize(addr: SocketAddr, sub: &str, vhost: &str) -> String {
    legacy_initialize_with(addr, sub, vhost, json!({})).await
}

/// [`legacy_initialize`] declaring the client `capabilities`.
pub async fn legacy_initialize_with(
    addr: SocketAddr,
    sub: &str,
    vhost: &str,
    capabilities: Value,
) -> String {
    let init = legacy_initialize_reply(addr, sub, vhost, capabilities).await;
    assert_eq!(init.status, 200, "{}", init.text());
    let session = init
        .header("mcp-session-id")
        .expect("initialize answers a session id")
        .to_owned();
    let initialized = legacy_post(
        addr,
        sub,
        vhost,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status, 202, "{}", initialized.text());
    session
}

/// The reply to a 2025-11-25 `initialize` (id 0) of `sub` on `vhost`, whatever it is.
pub async fn legacy_initialize_reply(
    addr: SocketAddr,
    sub: &str,
    vhost: &str,
    capabilities: Value,
) -> Reply {
    legacy_post(
        addr,
        sub,
        vhost,
        None,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "gateway-tests", "version": "0"}}}),
    )
    .await
}

/// Ends the 2025-11-25 session `session` of `sub` on `vhost` (HTTP DELETE).
pub async fn legacy_delete(addr: SocketAddr, sub: &str, vhost: &str, session: &str) -> Reply {
    let auth = bearer(sub);
    send_body(
        addr,
        "DELETE",
        &format!("/servers/{vhost}/mcp"),
        &[
            ("authorization", auth.as_str()),
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        "",
    )
    .await
}

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc status")
}

/// The interpreter of `.venv/mcp1` (Python SDK 1.x) when `cargo xtask test` installed it;
/// otherwise skips loudly, or fails under `CI=true` (`mcp_test_support::peers::python`).
pub fn python_mcp1() -> Option<PathBuf> {
    mcp_test_support::peers::python("mcp1")
}

/// The same for `.venv/mcp2` (Python SDK 2.x).
pub fn python_mcp2() -> Option<PathBuf> {
    mcp_test_support::peers::python("mcp2")
}

/// The JSON body of a request a [`HandMadeServer`] received (`Null` when it is not JSON).
pub async fn request_json(req: http::Request<hyper::body::Incoming>) -> Value {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

/// A response body of a [`HandMadeServer`] handler.
pub type AnyBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// A plain HTTP/1.1 server on a free loopback port answering every request with `handler`: for
/// backends that must misbehave or say something precise that no real MCP server does. Stopped
/// (its task aborted) when dropped.
pub struct HandMadeServer {
    pub addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl HandMadeServer {
    pub async fn start<F, Fut>(handler: F) -> Self
    where
        F: Fn(http::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = http::Response<AnyBody>> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let handler = handler.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let answer = handler(req);
                        async move { Ok::<_, std::convert::Infallible>(answer.await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, server }
    }

    /// `http://<addr>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for HandMadeServer {
    fn drop(&mut self) {
        self.server.abort();
    }
}
