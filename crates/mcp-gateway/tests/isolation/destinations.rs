//! Backend destinations (issue #17, item 9): a backend URL may not lead to the gateway's own
//! listeners, to a deny-listed range, or to a host name that resolves into one; the refusal is
//! checked on the connected address and fails the call with `-32603 Backend <name> failed:
//! destination not allowed`. And `headers.passthrough` of `Authorization` needs the operator.

use std::net::Ipv4Addr;
use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::{Value, json};

use crate::support::{
    self, GatewayProcess, SECRET, base_config, modern, poll_until, rpc_error, workdir,
};

/// `alice`'s virtual host `vh` with `backends` (name -> URL).
fn users(backends: &[(&str, String)]) -> String {
    let b: serde_json::Map<String, Value> = backends
        .iter()
        .map(|(name, url)| ((*name).to_owned(), json!({"url": url, "timeout_ms": 10000})))
        .collect();
    json!({"users": {"alice": {"virtual_hosts": {"vh": {"backends": b}}}}}).to_string()
}

/// `tools/call` of `<backend>-echo` for alice: the reply's text, or its JSON-RPC error.
async fn echo(gw: &GatewayProcess, backend: &str) -> Result<String, (i64, String)> {
    let reply = modern(
        gw.addr,
        "alice",
        "vh",
        "tools/call",
        json!({"name": format!("{backend}-echo"), "arguments": {"text": "x"}}),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let last = reply.messages().pop().expect("a final message");
    match last["result"]["content"][0]["text"].as_str() {
        Some(text) => Ok(text.to_owned()),
        None => Err(rpc_error(&reply)),
    }
}

fn refused(backend: &str) -> Result<String, (i64, String)> {
    Err((
        -32603,
        format!("Backend {backend} failed: destination not allowed"),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_at_the_gateways_own_listeners_is_refused() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("iso-dest-self");
    support::write(dir.path(), "users.json", &users(&[("alpha", alpha.url())]));
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;
    let admin = gw.admin.expect("admin listener");
    // The listeners' ports are only known now: point two backends at them (the file is polled).
    support::write(
        dir.path(),
        "users.json",
        &users(&[
            ("alpha", alpha.url()),
            ("admin", format!("http://{admin}/mcp")),
            ("mcp", format!("http://{}/servers/vh/mcp", gw.addr)),
        ]),
    );
    let reloaded = poll_until(Duration::from_secs(30), || async {
        echo(&gw, "admin").await == refused("admin")
    })
    .await;
    assert!(reloaded, "admin backend: {:?}", echo(&gw, "admin").await);
    assert_eq!(echo(&gw, "mcp").await, refused("mcp"));
    // Control: a real backend on another loopback port works, before and after the refusals.
    assert_eq!(echo(&gw, "alpha").await, Ok("alpha: x".to_owned()));
    // The refusal is no backend failure: after more calls than the breaker's failure threshold
    // (5) the answer is still the refusal, not `circuit open`.
    for _ in 0..6 {
        assert_eq!(echo(&gw, "admin").await, refused("admin"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_listed_range_is_refused_on_the_connected_address() {
    let Ok(beta) = TestBackend::try_start_at(
        Ipv4Addr::new(127, 0, 0, 2).into(),
        BackendSpec::modern("beta"),
    )
    .await
    else {
        panic!("cannot bind 127.0.0.2 (Linux routes 127.0.0.0/8 to loopback)");
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("iso-dest-cidr");
    support::write(
        dir.path(),
        "users.json",
        &users(&[("alpha", alpha.url()), ("beta", beta.url())]),
    );
    let denied = base_config("\n[backends]\ndeny_destinations = [\"127.0.0.2/32\"]\n");
    let gw = GatewayProcess::start(dir.path(), &denied, &[]).await;
    assert_eq!(echo(&gw, "beta").await, refused("beta"));
    // Control: the neighbouring address is not in the range.
    assert_eq!(echo(&gw, "alpha").await, Ok("alpha: x".to_owned()));
    drop(gw);

    // Control: without the deny entry the same backend answers.
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;
    assert_eq!(echo(&gw, "beta").await, Ok("beta: x".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_resolving_to_a_denied_address_is_refused() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let by_name = format!("http://localhost:{}/mcp", alpha.addr().port());
    let dir = workdir("iso-dest-name");
    support::write(dir.path(), "users.json", &users(&[("alpha", by_name)]));
    // `localhost` may resolve to ::1 first: deny both loopback forms the name can reach, by
    // address, never by name.
    let denied = base_config("\n[backends]\ndeny_destinations = [\"127.0.0.1/32\", \"::1/128\"]\n");
    let gw = GatewayProcess::start(dir.path(), &denied, &[]).await;
    assert_eq!(echo(&gw, "alpha").await, refused("alpha"));
    drop(gw);

    // Control: the deny removed, the name reaches the backend.
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;
    assert_eq!(echo(&gw, "alpha").await, Ok("alpha: x".to_owned()));
}

#[test]
fn authorization_passthrough_is_refused_at_load_without_the_operators_opt_in() {
    let doc = json!({"users": {"alice": {"virtual_hosts": {"vh": {"backends": {"a": {
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"passthrough": ["x-trace", "authorization"]}
    }}}}}}})
    .to_string();
    let run = |name: &str, extra: &str| {
        let dir = workdir(name);
        support::write(dir.path(), "users.json", &doc);
        let config = support::write(dir.path(), "gateway.toml", &base_config(extra));
        let (code, _, err) = support::run_cli(
            &["serve", "--config", config.to_str().expect("path")],
            &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
        );
        (code, err)
    };
    let (code, err) = run("iso-dest-auth", "");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("users.alice.virtual_hosts.vh.backends.a.headers.passthrough[1]: forwarding the caller's Authorization header (its gateway token) to a backend is refused; the operator allows it with backends.allow_authorization_passthrough = true"),
        "{err}"
    );

    // Control: with the opt-in the same document passes check-config.
    let dir = workdir("iso-dest-auth-ok");
    support::write(dir.path(), "users.json", &doc);
    let config = support::write(
        dir.path(),
        "gateway.toml",
        &base_config("\n[backends]\nallow_authorization_passthrough = true\n"),
    );
    let (code, _, err) = support::run_cli(
        &["check-config", "--config", config.to_str().expect("path")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "{err}");
}
