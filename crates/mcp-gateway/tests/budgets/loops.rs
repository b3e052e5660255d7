//! Loops (book: docs/src/security.md, "Loops"): a backend URL that leads back to the gateway,
//! through a forwarder, another node of the same deployment or its public name, costs one refused
//! request per backend, not every connection the gateway may open.

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::Forwarder;
use serde_json::{Value, json};

use crate::support::{self, GatewayProcess, base_config, workdir};

/// A backend entry calling `url` with `sub`'s own token, as a tenant would write it.
fn backend_as(sub: &str, url: &str) -> Value {
    json!({"url": url, "headers": {"add": {"Authorization": support::bearer(sub)}}})
}

/// The JSON-RPC error message of `reply`.
fn error_message(reply: &support::Reply) -> String {
    reply.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_url_leading_back_through_a_forwarder_is_refused_as_a_loop() {
    let to_gateway = Forwarder::start().await;
    let real = TestBackend::start(BackendSpec::modern("real")).await;
    let to_real = Forwarder::start().await;
    to_real.forward_to(real.addr());
    let looping = |sub: &str| {
        let url = format!("http://{}/servers/loop/mcp", to_gateway.addr());
        json!({"backends": {"a": backend_as(sub, &url), "b": backend_as(sub, &url)}})
    };
    let proxied = json!({"backends": {"r": {"url": format!("http://{}/mcp", to_real.addr())}}});
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"loop": looping("alice"), "proxied": proxied}},
        "bob": {"virtual_hosts": {"loop": looping("bob"), "proxied": proxied}},
    }});
    let dir = workdir("gw-budgets-loop");
    support::write(dir.path(), "users.json", &users.to_string());
    let config = base_config("\n[router]\ngateway_id = \"gw-test\"\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    to_gateway.forward_to(gw.addr);

    // The control: a backend behind the same kind of forwarder is served.
    let served = support::modern(gw.addr, "bob", "proxied", "tools/list", json!({}), &[]).await;
    assert_eq!(served.status, 200, "{}", served.text());
    assert!(
        served.tool_names().contains(&"r-echo".to_owned()),
        "{}",
        served.text()
    );
    assert!(
        to_real.requests() >= 1,
        "the control went through its forwarder"
    );

    // Alice's list fans out to both backends, which are the gateway itself: each comes back
    // marked and is refused at once, and the list says why.
    let list = support::modern(gw.addr, "alice", "loop", "tools/list", json!({}), &[]).await;
    let text = list.text().to_owned();
    assert!(text.contains("HTTP 508"), "{text}");
    let looped = to_gateway.requests();
    assert!(
        (2..=8).contains(&looped),
        "one refused request per backend and attempt, not a flood: {looped}"
    );
    let call = support::modern(
        gw.addr,
        "alice",
        "loop",
        "tools/call",
        json!({"name": "a-echo", "arguments": {"text": "hi"}}),
        &[],
    )
    .await;
    assert!(error_message(&call).contains("HTTP 508"), "{}", call.text());
    // Bob is served meanwhile.
    let bob = support::modern(gw.addr, "bob", "proxied", "tools/list", json!({}), &[]).await;
    assert_eq!(bob.status, 200, "{}", bob.text());
}

/// Alice's `tools/list` on `vh`, with `via` as its `Via` header (none when empty).
async fn list_via(addr: std::net::SocketAddr, via: &str) -> support::Reply {
    let extra = [("via", via)];
    let extra: &[(&str, &str)] = if via.is_empty() { &[] } else { &extra };
    support::modern(addr, "alice", "vh", "tools/list", json!({}), extra).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_marked_by_this_deployment_or_past_the_hop_limit_get_508() {
    let real = TestBackend::start(BackendSpec::modern("real")).await;
    let dir = workdir("gw-budgets-via");
    let users = support::users_json(&[("alice", "vh", &[("r", real.url())])]);
    support::write(dir.path(), "users.json", &users);
    let config = base_config("\n[router]\ngateway_id = \"gw-test\"\nmax_hops = 3\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let list = |via: &'static str| list_via(gw.addr, via);

    // Controls: no Via, another deployment's entry, and three intermediaries are served.
    for via in [
        "",
        "1.1 mcp-gateway-other",
        "1.1 a, 1.1 b (x, y), 1.1 mcp-gateway-other",
    ] {
        let served = list(via).await;
        assert_eq!(served.status, 200, "Via {via:?}: {}", served.text());
    }
    let own = list("1.0 corp-proxy, 1.1 MCP-Gateway-gw-test").await;
    assert_eq!(own.status.as_u16(), 508, "{}", own.text());
    assert_eq!(own.json()["error"]["code"], -32600);
    assert!(
        error_message(&own).starts_with("Loop detected: this request was sent by this gateway"),
        "{}",
        own.text()
    );
    let long = list("1.1 a, 1.1 b, 1.1 c, 1.1 d").await;
    assert_eq!(long.status.as_u16(), 508, "{}", long.text());
    assert!(
        error_message(&long).contains("passed 4 gateways or proxies"),
        "{}",
        long.text()
    );
    // What the backend sees: the client's intermediaries, then this deployment.
    let seen = real.requests();
    let via: Vec<&str> = seen
        .last()
        .map(|r| {
            r.headers
                .get_all("via")
                .iter()
                .map(|v| v.to_str().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        via.join(", "),
        "1.1 a, 1.1 b (x, y), 1.1 mcp-gateway-other, 1.1 mcp-gateway-gw-test",
        "{:?}",
        seen.last().map(|r| &r.headers)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_sharing_a_sealing_secret_refuse_each_others_requests() {
    const SEALING: (&str, &str) = (
        "MCP_GATEWAY_SEALING_SECRET",
        "0123456789abcdef0123456789abcdef",
    );
    let real = TestBackend::start(BackendSpec::modern("real")).await;
    let sealed = "\n[router]\nsealing_secret_env = \"MCP_GATEWAY_SEALING_SECRET\"\n";
    let start = |users: String,
                 config: &'static str,
                 env: &'static [(&'static str, &'static str)]| async move {
        let dir = workdir("gw-budgets-nodes");
        support::write(dir.path(), "users.json", &users);
        let gw = GatewayProcess::start(dir.path(), &base_config(config), env).await;
        (dir, gw)
    };
    let served = support::users_json(&[("alice", "vh", &[("real", real.url())])]);
    // B shares A's secret; C is another deployment.
    let (_b_dir, b) = start(served.clone(), sealed, &[SEALING]).await;
    let (_c_dir, c) = start(served, "", &[]).await;
    let users = json!({"users": {"alice": {"virtual_hosts": {
        "to_b": {"backends": {"b": backend_as("alice", &b.url("vh"))}},
        "to_c": {"backends": {"c": backend_as("alice", &c.url("vh"))}},
    }}}});
    let (_a_dir, a) = start(users.to_string(), sealed, &[SEALING]).await;
    let call = |vhost: &'static str, tool: &'static str| {
        support::modern(
            a.addr,
            "alice",
            vhost,
            "tools/call",
            json!({"name": tool, "arguments": {"text": "hi"}}),
            &[],
        )
    };

    // The control: through another deployment, the chain is served.
    let chained = call("to_c", "c-real-echo").await;
    assert_eq!(chained.result_text(), "real: hi", "{}", chained.text());
    let refused = call("to_b", "b-real-echo").await;
    assert!(
        error_message(&refused).contains("HTTP 508"),
        "{}",
        refused.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_host_name_is_never_a_backend_destination() {
    let to_gateway = Forwarder::start().await;
    let port = to_gateway.addr().port();
    let by_name = format!("http://localhost:{port}/servers/vh/mcp");
    let by_address = format!("http://127.0.0.1:{port}/servers/vh/mcp");
    let users = json!({"users": {
        "alice": {"virtual_hosts": {"vh": {"backends": {"n": backend_as("alice", &by_name)}}}},
        "bob": {"virtual_hosts": {"vh": {"backends": {"a": backend_as("bob", &by_address)}}}},
    }});
    let dir = workdir("gw-budgets-public-host");
    support::write(dir.path(), "users.json", &users.to_string());
    let config = base_config(&format!(
        "\n[auth]\npublic_url = \"http://localhost:{port}\"\n"
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    to_gateway.forward_to(gw.addr);
    let call = |sub: &'static str, tool: &'static str| {
        support::modern(
            gw.addr,
            sub,
            "vh",
            "tools/call",
            json!({"name": tool, "arguments": {"text": "hi"}}),
            &[],
        )
    };

    let denied = call("alice", "n-echo").await;
    assert!(
        error_message(&denied).contains("destination not allowed"),
        "{}",
        denied.text()
    );
    assert_eq!(
        to_gateway.requests(),
        0,
        "nothing was sent to the public name"
    );
    // The control: the same forwarder by address is reached (and is a loop, refused by mark).
    let reached = call("bob", "a-echo").await;
    assert!(
        error_message(&reached).contains("HTTP 508"),
        "{}",
        reached.text()
    );
    assert!(to_gateway.requests() >= 1);
}
