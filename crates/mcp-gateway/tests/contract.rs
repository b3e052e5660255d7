//! book: docs/src/failure-modes.md against the real `mcp-gateway` process: every HTTP row (status, headers, exact
//! body), 403 Origin, 413, 431, RFC 9728 documents, a routed MCP call to a real backend, the admin
//! listener (`/healthz`, `/readyz`, `/metrics` counters after traffic), and logs free of secrets; on
//! the work-stealing runtime and with one runtime per serving thread.

mod support;

use jsonwebtoken::Algorithm;
use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::json;
use support::{
    AUDIENCE, GatewayProcess, ISSUER, SECRET, admin_get, base_config, bearer, modern, send_body,
    token, token_with, unix_now, users_json, workdir,
};

const PATH: &str = "/servers/vh1/mcp";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_row_over_the_socket() {
    every_http_row("").await;
}

/// The same rows with one runtime per serving thread (each request on a new connection, so
/// they land on either thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_row_over_the_socket_thread_per_core() {
    every_http_row(&support::thread_per_core(2)).await;
}

async fn every_http_row(runtime: &str) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("gw-contract");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh1", &[("alpha", alpha.url())])]),
    );
    let config = base_config(&format!(
        r#"
[limits]
max_body_bytes = 4096
max_mcp_headers = 8
max_mcp_header_bytes = 256

[security]
allowed_origins = ["http://localhost"]
{runtime}"#
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let addr = gw.addr;
    let alice = bearer("alice");
    let challenge = format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"http://{addr}/.well-known/oauth-protected-resource/servers/vh1/mcp\""
    );
    let assert_401 = |reply: &support::Reply, detail: &str| {
        reply.assert_detail(401, detail);
        assert_eq!(reply.header("www-authenticate"), Some(challenge.as_str()));
    };

    // Success: a 2026-07-28 tools/list reaches the backend; names are prefixed.
    let ok = modern(addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let names = ok.tool_names();
    assert!(names.iter().any(|n| n == "alpha-echo"), "{names:?}");
    let call = modern(
        addr,
        "alice",
        "vh1",
        "tools/call",
        json!({"name": "alpha-echo", "arguments": {"text": "hi"}}),
        &[],
    )
    .await;
    assert_eq!(call.status, 200, "{}", call.text());
    let last = call.messages().pop().expect("a response");
    assert_eq!(last["result"]["content"][0]["text"], "alpha: hi");

    // Row 1: not /servers/{id}/mcp -> 400 (before authentication).
    send_body(
        addr,
        "POST",
        "/servers/vh1",
        &[("authorization", &alice)],
        "{}",
    )
    .await
    .assert_detail(400, "Not an MCP endpoint path");
    send_body(addr, "POST", "/other", &[], "{}")
        .await
        .assert_detail(400, "Not an MCP endpoint path");
    send_body(addr, "POST", "/servers/a%20b/mcp", &[], "{}")
        .await
        .assert_detail(400, "Invalid virtual host id");

    // Row 2: missing Authorization, or not Bearer -> 401 + challenge with resource_metadata.
    assert_401(
        &send_body(addr, "POST", PATH, &[], "{}").await,
        "Missing bearer token",
    );
    assert_401(
        &send_body(
            addr,
            "POST",
            PATH,
            &[("authorization", "Basic YWxpY2U6cHc=")],
            "{}",
        )
        .await,
        "Authorization scheme must be Bearer",
    );

    // Row 3: undecodable, unsupported algorithm / no key for it, wrong key.
    assert_401(
        &send_body(
            addr,
            "POST",
            PATH,
            &[("authorization", "Bearer not.a.jwt")],
            "{}",
        )
        .await,
        "Malformed token",
    );
    let claims =
        || json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": unix_now() + 600});
    let hs384 = token_with(claims(), Algorithm::HS384, SECRET.as_bytes());
    assert_401(
        &send_body(
            addr,
            "POST",
            PATH,
            &[("authorization", &format!("Bearer {hs384}"))],
            "{}",
        )
        .await,
        "Unsupported token algorithm",
    );
    let other_key = token_with(
        claims(),
        Algorithm::HS256,
        b"another-secret-another-secret-xx",
    );
    assert_401(
        &send_body(
            addr,
            "POST",
            PATH,
            &[("authorization", &format!("Bearer {other_key}"))],
            "{}",
        )
        .await,
        "Invalid token signature",
    );

    // Row 4: expired, not yet valid, wrong issuer, wrong audience.
    for (claims, detail) in [
        (
            json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": unix_now() - 60}),
            "Token expired",
        ),
        (
            json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": unix_now() + 600, "nbf": unix_now() + 300}),
            "Token not yet valid",
        ),
        (
            json!({"iss": "https://evil.test", "aud": AUDIENCE, "sub": "alice", "exp": unix_now() + 600}),
            "Invalid token issuer",
        ),
        (
            json!({"iss": ISSUER, "aud": "someone-else", "sub": "alice", "exp": unix_now() + 600}),
            "Invalid token audience",
        ),
    ] {
        let t = token_with(claims, Algorithm::HS256, SECRET.as_bytes());
        assert_401(
            &send_body(
                addr,
                "POST",
                PATH,
                &[("authorization", &format!("Bearer {t}"))],
                "{}",
            )
            .await,
            detail,
        );
    }

    // Row 5: no user config for the subject -> 400.
    send_body(
        addr,
        "POST",
        PATH,
        &[("authorization", &bearer("bob"))],
        "{}",
    )
    .await
    .assert_detail(400, "No user configuration");

    // Row 8: virtual host not in the caller's config -> 404, exact body.
    let missing = send_body(
        addr,
        "POST",
        "/servers/elsewhere/mcp",
        &[("authorization", &alice)],
        "{}",
    )
    .await;
    missing.assert_detail(404, "Server not found");
    assert_eq!(missing.text(), r#"{"detail":"Server not found"}"#);

    // 403: an Origin not in security.allowed_origins, checked before authentication.
    for headers in [
        vec![("origin", "https://evil.example")],
        vec![
            ("origin", "https://evil.example"),
            ("authorization", alice.as_str()),
        ],
    ] {
        send_body(addr, "POST", PATH, &headers, "{}")
            .await
            .assert_detail(403, "Origin not allowed");
    }
    let allowed = modern(
        addr,
        "alice",
        "vh1",
        "tools/list",
        json!({}),
        &[("origin", "http://localhost:6274")],
    )
    .await;
    assert_eq!(allowed.status, 200, "{}", allowed.text());

    // 413: a body over limits.max_body_bytes.
    let big = "x".repeat(8192);
    send_body(addr, "POST", PATH, &[("authorization", &alice)], &big)
        .await
        .assert_detail(413, "Request body too large");

    // 431: too many Mcp-* headers, or one too large.
    let many: Vec<(String, &str)> = (0..9).map(|i| (format!("mcp-param-p{i}"), "1")).collect();
    let mut headers: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    headers.push(("authorization", &alice));
    send_body(addr, "POST", PATH, &headers, "{}")
        .await
        .assert_detail(431, "Too many Mcp-* headers");
    let long = "n".repeat(300);
    send_body(addr, "POST", PATH, &[("mcp-name", &long)], "{}")
        .await
        .assert_detail(431, "Mcp-* header too large");

    // RFC 9728: the per-virtual-host document the challenge points at, and the root one.
    let doc = send_body(
        addr,
        "GET",
        "/.well-known/oauth-protected-resource/servers/vh1/mcp",
        &[],
        "",
    )
    .await;
    assert_eq!(doc.status, 200, "{}", doc.text());
    assert_eq!(doc.header("content-type"), Some("application/json"));
    assert_eq!(
        doc.json(),
        json!({
            "resource": format!("http://{addr}/servers/vh1/mcp"),
            "authorization_servers": [ISSUER],
            "scopes_supported": [],
            "bearer_methods_supported": ["header"],
        })
    );
    let root = send_body(
        addr,
        "GET",
        "/.well-known/oauth-protected-resource",
        &[],
        "",
    )
    .await;
    assert_eq!(root.json()["resource"], format!("http://{addr}"));

    // Admin listener.
    let health = admin_get(&gw, "/healthz").await;
    assert_eq!(
        (health.status.as_u16(), health.json()),
        (200, json!({"status": "ok"}))
    );
    let ready = admin_get(&gw, "/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert_eq!(ready.json()["status"], "ready");
    assert_eq!(ready.json()["checks"]["config_store"]["status"], "ok");
    // The backends called so far, by name, with their circuit breaker states (never a URL).
    let backends = ready.json()["checks"]["backends"].clone();
    let backends = backends.as_array().expect("backend detail");
    assert!(!backends.is_empty(), "{}", ready.text());
    assert!(
        backends.iter().all(|b| b["breaker"] == "closed"
            && b["backend"].is_string()
            && b.get("url").is_none()),
        "{}",
        ready.text()
    );
    let metrics = admin_get(&gw, "/metrics").await;
    assert_eq!(metrics.status, 200);
    let text = metrics.text();
    for needle in [
        r#"mcp_gateway_requests_total{method="tools/list",vhost="vh1",status="200",outcome="ok"}"#,
        r#"mcp_gateway_requests_total{method="tools/call",vhost="vh1",status="200",outcome="ok"}"#,
        r#"mcp_gateway_requests_total{method="-",vhost="-",status="401",outcome="client_error"}"#,
        r#"mcp_gateway_requests_total{method="-",vhost="-",status="404",outcome="client_error"}"#,
        "mcp_gateway_request_duration_seconds_bucket{",
        "mcp_gateway_config_cache_hits_total",
        "mcp_gateway_config_cache_misses_total",
        "mcp_gateway_build_info{",
        // The router's circuit breakers report through the same recorder: their states as
        // counts per backend name, their calls as sums.
        "mcp_gateway_breakers{backend=",
        "mcp_breaker_calls_total{",
    ] {
        assert!(
            text.contains(needle),
            "missing {needle} in /metrics:\n{text}"
        );
    }
    // A path segment of an unauthenticated client never becomes a label.
    assert!(!text.contains("elsewhere"), "{text}");
    assert!(!text.contains("mcp_breaker_state{"), "{text}");

    // Nothing secret in the logs: neither the secret nor any token.
    let logs = gw.logs();
    assert!(
        logs.contains("\"message\":\"request\""),
        "access log missing:\n{logs}"
    );
    // The access log line keeps its own fields (spans' fields are not part of JSON lines).
    assert!(
        logs.lines()
            .any(|line| line.contains("\"message\":\"request\"")
                && line.contains("\"mcp.method\":\"tools/call\"")
                && line.contains("\"vhost\":\"vh1\"")
                && line.contains("\"status\":200")),
        "access log fields missing:\n{logs}"
    );
    assert!(!logs.contains(SECRET), "the secret was logged");
    assert!(!logs.contains(&token("alice")[..40]), "a token was logged");
    assert!(!logs.contains("not.a.jwt"), "a token was logged");
}

/// HTTP/1.1 and HTTP/2 over TLS with the fixture certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listener_serves_http1_and_h2() {
    let fixtures = support::FIXTURES;
    let dir = workdir("gw-tls");
    support::write(dir.path(), "users.json", &users_json(&[]));
    let config = base_config("\n[auth]\npublic_url = \"https://localhost:8443\"\n").replace(
        "admin_addr = \"127.0.0.1:0\"",
        &format!(
            "admin_addr = \"\"\ntls_cert = \"{fixtures}/tls_server.pem\"\ntls_key = \"{fixtures}/tls_server_key.pem\""
        ),
    );
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    assert_eq!(
        gw.admin, None,
        "admin_addr = \"\" disables the admin listener"
    );

    let tls = support::fixture_tls_client();
    for (http2, expected_version) in [
        (false, http::Version::HTTP_11),
        (true, http::Version::HTTP_2),
    ] {
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_only();
        let connector = if http2 {
            builder.enable_http2().build()
        } else {
            builder.enable_http1().build()
        };
        let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .http2_only(http2)
                .build(connector);
        let req = http::Request::post(format!(
            "https://localhost:{}/servers/vh1/mcp",
            gw.addr.port()
        ))
        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
        .expect("request");
        let res = client.request(req).await.expect("TLS request");
        assert_eq!(res.version(), expected_version);
        assert_eq!(res.status(), 401);
        assert_eq!(
            res.headers()["www-authenticate"],
            "Bearer error=\"invalid_token\", resource_metadata=\"https://localhost:8443/.well-known/oauth-protected-resource/servers/vh1/mcp\""
        );
    }
}
