//! Reloading a running `mcp-gateway serve` (book: docs/src/deploying.md, "Reloading without a
//! restart"), against the real process over sockets: SIGHUP applies a new token key while a
//! call in flight finishes; a change that needs a restart and an invalid file are refused, named
//! in the log, and leave the running configuration serving; a renewed TLS certificate is what new
//! handshakes see while an open TLS connection goes on; an edit of the watched file reloads it
//! without a signal; `/readyz` and `/metrics` show the generation.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use jsonwebtoken::Algorithm;
use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::{Value, json};
use support::{
    AUDIENCE, GatewayProcess, HS256_LINE, ISSUER, admin_get, base_config, legacy_initialize,
    legacy_post, modern, modern_with_token, poll_until, token_with, unix_now, users_json, workdir,
    write,
};

/// The second HS256 secret, in its own variable: a reload that names it rotates the key.
const SECRET_2: &str = "rotated-secret-rotated-secret-rotated";

fn token_2(sub: &str) -> String {
    token_with(
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": unix_now() + 600}),
        Algorithm::HS256,
        SECRET_2.as_bytes(),
    )
}

/// alice's `tools/list` with a token signed with the second key.
async fn list_with_second_key(gw: &GatewayProcess) -> support::Reply {
    let token = token_2("alice");
    modern_with_token(gw.addr, &token, "vh1", "tools/list", json!({}), &[]).await
}

fn sighup(gw: &GatewayProcess) {
    let status = std::process::Command::new("kill")
        .arg("-HUP")
        .arg(gw.pid().to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -HUP failed");
}

async fn generation(gw: &GatewayProcess) -> u64 {
    let reply = admin_get(gw, "/readyz").await;
    let body: Value = serde_json::from_str(reply.text()).expect("readyz JSON");
    body["config"]["generation"]
        .as_u64()
        .expect("config.generation")
}

/// Waits (generously: a loaded machine) for `/readyz` to show `wanted`.
async fn wait_for_generation(gw: &GatewayProcess, wanted: u64) {
    let reached = poll_until(Duration::from_secs(30), || async {
        generation(gw).await == wanted
    })
    .await;
    assert!(reached, "generation {wanted} not reached:\n{}", gw.logs());
}

/// Waits for a log line with `message` that contains `needle`.
async fn wait_for_log(gw: &GatewayProcess, message: &str, needle: &str) -> String {
    let found = poll_until(Duration::from_secs(30), || async {
        line_with(gw, message, needle).is_some()
    })
    .await;
    assert!(found, "no `{message}` line with {needle}:\n{}", gw.logs());
    line_with(gw, message, needle).unwrap_or_default()
}

fn line_with(gw: &GatewayProcess, message: &str, needle: &str) -> Option<String> {
    gw.logs()
        .lines()
        .find(|line| line.contains(&format!("\"message\":\"{message}\"")) && line.contains(needle))
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rotates_the_token_key_and_refuses_what_needs_a_restart() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-reload-keys");
    write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh1", &[("beta", beta.url())])]),
    );
    // SIGHUP only: the file watch would race the signal for the same edit.
    let first = base_config("").replacen(
        "shutdown_drain_s = 10\n",
        "shutdown_drain_s = 10\nconfig_watch_ms = 0\n",
        1,
    );
    let gw = GatewayProcess::start(
        dir.path(),
        &first,
        &[("MCP_GATEWAY_JWT_SECRET_2", SECRET_2)],
    )
    .await;
    assert_eq!(generation(&gw).await, 1);
    let listed = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    let rotated = list_with_second_key(&gw).await;
    assert_eq!(rotated.status, 401, "the second key is not trusted yet");

    // A call that outlives the reload: 8 s of backend work, a margin no reload needs.
    let addr = gw.addr;
    let in_flight = tokio::spawn(async move {
        modern(
            addr,
            "alice",
            "vh1",
            "tools/call",
            json!({"name": "beta-slow", "arguments": {"steps": 2, "delay_ms": 8000}}),
            &[],
        )
        .await
    });
    // Authenticated and at the backend before the key changes.
    assert!(
        beta.wait_for_calls("slow", Duration::from_secs(30), |calls| calls.started == 1)
            .await,
        "the slow call did not reach the backend:\n{}",
        gw.logs()
    );
    let second = first.replace(
        HS256_LINE,
        "hs256_secret_env = \"MCP_GATEWAY_JWT_SECRET_2\"\n",
    );
    assert_ne!(first, second);
    write(dir.path(), "gateway.toml", &second);
    sighup(&gw);
    wait_for_generation(&gw, 2).await;
    let line = wait_for_log(&gw, "configuration reloaded", "auth.jwt.hs256_secret_env").await;
    assert!(line.contains("SIGHUP"), "{line}");
    if beta.calls_finished("slow") > 0 {
        let early = in_flight.await.expect("the call task");
        panic!(
            "the call in flight ended before the reload was applied: {} {}",
            early.status,
            early.text()
        );
    }
    let rotated = list_with_second_key(&gw).await;
    assert_eq!(rotated.status, 200, "{}", rotated.text());
    let old = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(old.status, 401, "the old key is no longer trusted");
    let finished = in_flight.await.expect("the call task");
    assert_eq!(finished.status, 200, "{}", finished.text());
    assert!(
        finished.text().contains("beta: done"),
        "{}",
        finished.text()
    );

    // A key a running gateway cannot take: refused, named, and the running config stays.
    let needs_restart = second.replace("shutdown_drain_s = 10", "shutdown_drain_s = 11");
    assert_ne!(needs_restart, second);
    write(dir.path(), "gateway.toml", &needs_restart);
    sighup(&gw);
    let line = wait_for_log(&gw, "configuration not reloaded", "shutdown_drain_s").await;
    assert!(line.contains("needs a restart"), "{line}");
    // A file that does not parse: refused, the running config stays.
    write(dir.path(), "gateway.toml", "[listen\naddr = ");
    sighup(&gw);
    wait_for_log(&gw, "configuration not reloaded", "gateway.toml").await;
    assert_eq!(generation(&gw).await, 2);
    let still = list_with_second_key(&gw).await;
    assert_eq!(still.status, 200, "{}", still.text());

    let metrics = admin_get(&gw, "/metrics").await;
    let text = metrics.text();
    for series in [
        "mcp_gateway_config_generation 2",
        r#"mcp_gateway_config_reloads_total{result="applied"} 1"#,
        r#"mcp_gateway_config_reloads_total{result="refused"} 1"#,
        r#"mcp_gateway_config_reloads_total{result="invalid"} 1"#,
    ] {
        assert!(text.contains(series), "missing {series}:\n{text}");
    }
}

/// A self-signed certificate for `localhost` and its key, as PEM.
fn certificate() -> (String, String, rustls::pki_types::CertificateDer<'static>) {
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    (cert.pem(), signing_key.serialize_pem(), cert.der().clone())
}

/// A TLS client that trusts only `root`.
fn trusting(root: &rustls::pki_types::CertificateDer<'static>) -> tokio_rustls::TlsConnector {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).expect("root");
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Each handshake a full one: a resumed session presents no certificate.
    config.resumption = rustls::client::Resumption::disabled();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn handshake(
    connector: &tokio_rustls::TlsConnector,
    addr: std::net::SocketAddr,
) -> std::io::Result<Tls> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    connector.connect(name, tcp).await
}

/// An HTTP/1.1 connection over `tls`, kept open for several requests.
async fn http1(tls: Tls) -> hyper::client::conn::http1::SendRequest<Empty<bytes::Bytes>> {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(connection);
    sender
}

async fn status_of(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<bytes::Bytes>>,
) -> u16 {
    let request = http::Request::get("/servers/vh1/mcp")
        .header("host", "localhost")
        .body(Empty::new())
        .expect("request");
    // Ready first: the connection takes the next request once it has finished the last one.
    sender.ready().await.expect("connection ready");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

fn write_certificate(dir: &Path, cert: &str, key: &str) {
    write(dir, "tls.pem", cert);
    write(dir, "tls_key.pem", key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_reaches_new_handshakes_and_an_edited_file_reloads_itself() {
    let dir = workdir("gw-reload-tls");
    write(dir.path(), "users.json", &users_json(&[]));
    let (cert_a, key_a, root_a) = certificate();
    let (cert_b, key_b, root_b) = certificate();
    write_certificate(dir.path(), &cert_a, &key_a);
    let tls_lines = format!(
        "tls_cert = \"{0}/tls.pem\"\ntls_key = \"{0}/tls_key.pem\"\n",
        dir.path().display()
    );
    let first = base_config("").replacen(
        "[listen]\n",
        &format!("config_watch_ms = 200\n\n[listen]\n{tls_lines}"),
        1,
    );
    let gw = GatewayProcess::start(dir.path(), &first, &[]).await;
    let (to_a, to_b) = (trusting(&root_a), trusting(&root_b));

    let mut open = http1(handshake(&to_a, gw.addr).await.expect("certificate A")).await;
    assert_eq!(status_of(&mut open).await, 401);
    assert!(
        handshake(&to_b, gw.addr).await.is_err(),
        "B is not served yet"
    );

    // Renewed at the same paths: the configuration file does not change, so SIGHUP reloads.
    write_certificate(dir.path(), &cert_b, &key_b);
    sighup(&gw);
    wait_for_generation(&gw, 2).await;
    let mut renewed = http1(handshake(&to_b, gw.addr).await.expect("certificate B")).await;
    assert_eq!(status_of(&mut renewed).await, 401);
    assert!(
        handshake(&to_a, gw.addr).await.is_err(),
        "A is no longer served"
    );
    // The connection made before the reload goes on.
    assert_eq!(status_of(&mut open).await, 401);

    // An edit of the watched file reloads it without a signal: one Mcp-* header at most, and
    // another issuer, which the discovery document names from then on.
    let limited = format!("{first}\n[limits]\nmax_mcp_headers = 1\n")
        .replace(ISSUER, "https://issuer-2.test");
    write(dir.path(), "gateway.toml", &limited);
    wait_for_generation(&gw, 3).await;
    wait_for_log(&gw, "configuration reloaded", "file changed").await;
    let request = http::Request::get("/servers/vh1/mcp")
        .header("host", "localhost")
        .header("mcp-method", "tools/list")
        .header("mcp-name", "x")
        .body(Empty::new())
        .expect("request");
    renewed.ready().await.expect("connection ready");
    let response = renewed.send_request(request).await.expect("response");
    assert_eq!(response.status(), 431, "the reloaded header limit applies");
    // A new connection: the gateway may close one after refusing a request head.
    let mut fresh = http1(handshake(&to_b, gw.addr).await.expect("certificate B")).await;
    let request = http::Request::get("/.well-known/oauth-protected-resource/servers/vh1/mcp")
        .header("host", "localhost")
        .body(Empty::new())
        .expect("request");
    fresh.ready().await.expect("connection ready");
    let response = fresh.send_request(request).await.expect("response");
    assert_eq!(response.status(), 200);
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let document: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(
        document["authorization_servers"],
        json!(["https://issuer-2.test"]),
        "{document}"
    );
}

/// A key ring in `sessions.keys_env`'s format: `id:base64 key`, newest first.
fn ring(keys: &[(&str, u8)]) -> String {
    use base64::Engine as _;
    keys.iter()
        .map(|(id, byte)| {
            let key = base64::engine::general_purpose::STANDARD.encode([*byte; 32]);
            format!("{id}:{key}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

async fn listed_in(gw: &GatewayProcess, session: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    legacy_post(gw.addr, "alice", "vh1", Some(session), &body)
        .await
        .status
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_rotates_the_sealed_session_key_ring() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-reload-ring");
    write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh1", &[("beta", beta.url())])]),
    );
    let (first, both, second) = (
        ring(&[("k1", 1)]),
        ring(&[("k2", 2), ("k1", 1)]),
        ring(&[("k2", 2)]),
    );
    let config = |keys_env: &str| {
        base_config(&format!(
            "\n[sessions]\nkind = \"sealed\"\nkeys_env = \"{keys_env}\"\n"
        ))
        .replacen(
            "shutdown_drain_s = 10\n",
            "shutdown_drain_s = 10\nconfig_watch_ms = 0\n",
            1,
        )
    };
    let gw = GatewayProcess::start(
        dir.path(),
        &config("RING_1"),
        &[("RING_1", &first), ("RING_2", &both), ("RING_3", &second)],
    )
    .await;
    let old = legacy_initialize(gw.addr, "alice", "vh1").await;
    assert!(old.starts_with("k1."), "{old}");
    assert_eq!(listed_in(&gw, &old).await, 200);

    // The new key seals new sessions; the old one, still in the ring, keeps its sessions.
    write(dir.path(), "gateway.toml", &config("RING_2"));
    sighup(&gw);
    wait_for_generation(&gw, 2).await;
    assert_eq!(listed_in(&gw, &old).await, 200);
    let new = legacy_initialize(gw.addr, "alice", "vh1").await;
    assert!(new.starts_with("k2."), "{new}");

    // The old key leaves the ring: its sessions are unknown from then on.
    write(dir.path(), "gateway.toml", &config("RING_3"));
    sighup(&gw);
    wait_for_generation(&gw, 3).await;
    assert_eq!(listed_in(&gw, &old).await, 404);
    assert_eq!(listed_in(&gw, &new).await, 200);
}
