//! book: docs/src/failure-modes.md (routing and backends) for the stateless 2026-07-28 engine, over real
//! sockets: every row asserts the exact JSON-RPC code and message, and what reached the backends.

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::rpc_error_200;
use mcp_test_support::stack::{Gateway, user_config, vhost_config};
use serde_json::{Value, json};

/// One modern and one legacy backend behind `vh`.
async fn two_backends() -> (TestBackend, TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config)]).await;
    (alpha, beta, gw)
}

fn targeted(backend: &TestBackend) -> usize {
    [
        "tools/call",
        "prompts/get",
        "resources/read",
        "completion/complete",
    ]
    .iter()
    .map(|m| backend.requests_for(m).len())
    .sum()
}

fn echo(name: &str, text: &str) -> Value {
    json!({"name": name, "arguments": {"text": text}})
}

// ---- routing -------------------------------------------------------------------------------

#[tokio::test]
async fn a_wrong_tool_name_is_invalid_params_naming_it() {
    let (alpha, beta, gw) = two_backends().await;
    for name in ["zeta-echo", "echo", "alpha", "alpha-", "alphaecho", "-echo"] {
        let reply = gw
            .modern("alice", "vh", "tools/call", echo(name, "x"))
            .await;
        assert_eq!(
            rpc_error_200(&reply),
            (-32602, format!("wrong tool name: {name}")),
            "{name}"
        );
        assert_eq!(reply.json()["id"], 1);
    }
    assert_eq!(targeted(&alpha) + targeted(&beta), 0);
}

#[tokio::test]
async fn a_wrong_prompt_name_is_invalid_params_naming_it() {
    let (alpha, beta, gw) = two_backends().await;
    for name in ["zeta-greet", "greet"] {
        let reply = gw
            .modern(
                "alice",
                "vh",
                "prompts/get",
                json!({"name": name, "arguments": {"who": "x"}}),
            )
            .await;
        assert_eq!(
            rpc_error_200(&reply),
            (-32602, format!("wrong prompt name: {name}"))
        );
    }
    assert_eq!(targeted(&alpha) + targeted(&beta), 0);
}

#[tokio::test]
async fn a_wrong_resource_uri_is_invalid_params_naming_it() {
    let (alpha, beta, gw) = two_backends().await;
    for uri in ["test://alpha/static", "zeta-test://alpha/static"] {
        let reply = gw
            .modern("alice", "vh", "resources/read", json!({"uri": uri}))
            .await;
        assert_eq!(
            rpc_error_200(&reply),
            (-32602, format!("wrong resource name: {uri}"))
        );
    }
    assert_eq!(targeted(&alpha) + targeted(&beta), 0);
}

#[tokio::test]
async fn a_wrong_completion_reference_is_invalid_params_naming_it() {
    let (alpha, beta, gw) = two_backends().await;
    let cases = [
        (
            json!({"type": "ref/prompt", "name": "zeta-greet"}),
            "wrong completion reference: zeta-greet",
        ),
        (
            json!({"type": "ref/resource", "uri": "test://alpha/item/{id}"}),
            "wrong completion reference: test://alpha/item/{id}",
        ),
        (
            json!({"type": "ref/other", "name": "alpha-greet"}),
            "wrong completion reference: unknown ref type",
        ),
    ];
    for (reference, message) in cases {
        let params = json!({"ref": reference, "argument": {"name": "who", "value": "a"}});
        let reply = gw
            .modern("alice", "vh", "completion/complete", params)
            .await;
        assert_eq!(rpc_error_200(&reply), (-32602, message.to_owned()));
    }
    assert_eq!(targeted(&alpha) + targeted(&beta), 0);
}

#[tokio::test]
async fn a_name_several_backends_expose_is_invalid_request() {
    let a = TestBackend::start(BackendSpec::modern("a")).await;
    let ab = TestBackend::start(BackendSpec::modern("a-b")).await;
    // `a`'s prompt `greet` is exposed as `a-b-greet`, which is also `a-b`'s `greet`.
    let config = vhost_config(json!({"backends": {
        "a": {"url": a.url(), "timeout_ms": 5000, "aliases": {"a-b-greet": "greet"}},
        "a-b": {"url": ab.url(), "timeout_ms": 5000}}}));
    let gw = Gateway::start(&[("alice", config)]).await;

    let reply = gw
        .modern(
            "alice",
            "vh",
            "prompts/get",
            json!({"name": "a-b-greet", "arguments": {"who": "x"}}),
        )
        .await;
    assert_eq!(
        rpc_error_200(&reply),
        (
            -32600,
            "ambiguous name: a-b-greet (several backends expose it)".to_owned()
        )
    );
    let list = gw.modern("alice", "vh", "prompts/list", json!({})).await;
    let result = &list.json()["result"];
    assert_eq!(result["prompts"], json!([]), "{result}");
    assert_eq!(
        result["_meta"]["mcp-gateway/degraded"]["items"],
        json!([{"name": "a-b-greet", "reason": "ambiguous"}])
    );
    assert_eq!(targeted(&a) + targeted(&ab), 0);
}

#[tokio::test]
async fn a_name_only_one_overlapping_backend_exposes_goes_to_it() {
    // `a-b-echo` could be `a`'s `b-echo` or `a-b`'s `echo`; only `a-b` lists it.
    let a = TestBackend::start(BackendSpec::modern("a")).await;
    let ab = TestBackend::start(BackendSpec::legacy("a-b")).await;
    let config = user_config(&[("a", a.url()), ("a-b", ab.url())]);
    let gw = Gateway::start(&[("alice", config)]).await;
    let reply = gw
        .modern("alice", "vh", "tools/call", echo("a-b-echo", "x"))
        .await;
    assert_eq!(reply.result_text(), "a-b: x");
    assert_eq!(targeted(&a), 0);
}

// ---- backends ------------------------------------------------------------------------------

fn degraded_backends(result: &Value) -> Value {
    result["_meta"]["mcp-gateway/degraded"]["backends"].clone()
}

#[tokio::test]
async fn a_modern_backend_down_is_left_out_of_discover_and_every_list() {
    let (alpha, _beta, gw) = two_backends().await;
    alpha.stop().await;
    let down = json!([{"name": "alpha", "reason": "backend unreachable"}]);

    let discover = gw.modern("alice", "vh", "server/discover", json!({})).await;
    assert_eq!(discover.status, 200, "{}", discover.text());
    let result = &discover.json()["result"];
    assert_eq!(degraded_backends(result), down, "{result}");
    assert!(
        result["capabilities"]["tools"].is_object(),
        "beta's capabilities remain: {result}"
    );

    for (method, key, field, expected) in [
        ("tools/list", "tools", "name", "beta-echo"),
        ("prompts/list", "prompts", "name", "beta-greet"),
        (
            "resources/list",
            "resources",
            "uri",
            "beta-test://beta/static",
        ),
        (
            "resources/templates/list",
            "resourceTemplates",
            "uriTemplate",
            "beta-test://beta/item/{id}",
        ),
    ] {
        let reply = gw.modern("alice", "vh", method, json!({})).await;
        assert_eq!(reply.status, 200, "{method}: {}", reply.text());
        let result = &reply.json()["result"];
        assert!(result.get("error").is_none());
        assert_eq!(degraded_backends(result), down, "{method}: {result}");
        let items = result[key]
            .as_array()
            .unwrap_or_else(|| panic!("{method}: {result}"));
        assert!(
            items
                .iter()
                .all(|i| i[field].as_str().is_some_and(|n| n.starts_with("beta-"))),
            "{method}: {result}"
        );
        assert!(
            items.iter().any(|i| i[field] == expected),
            "{method}: {result}"
        );
    }
}

#[tokio::test]
async fn all_backends_down_still_answers_lists_with_the_marker() {
    let (alpha, beta, gw) = two_backends().await;
    alpha.stop().await;
    beta.stop().await;
    let reply = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert_eq!(reply.status, 200);
    let result = &reply.json()["result"];
    assert_eq!(result["tools"], json!([]));
    assert_eq!(
        degraded_backends(result),
        json!([{"name": "alpha", "reason": "backend unreachable"}, {"name": "beta", "reason": "backend unreachable"}])
    );
}

#[tokio::test]
async fn a_modern_backend_down_during_a_call_fails_only_that_call() {
    let (alpha, beta, gw) = two_backends().await;
    let ok = gw
        .modern("alice", "vh", "tools/call", echo("alpha-echo", "up"))
        .await;
    assert_eq!(ok.result_text(), "alpha: up");
    alpha.stop().await;

    for (method, params) in [
        ("tools/call", echo("alpha-echo", "down")),
        (
            "prompts/get",
            json!({"name": "alpha-greet", "arguments": {"who": "x"}}),
        ),
        (
            "resources/read",
            json!({"uri": "alpha-test://alpha/static"}),
        ),
    ] {
        let reply = gw.modern("alice", "vh", method, params).await;
        assert_eq!(
            rpc_error_200(&reply),
            (
                -32603,
                "Backend alpha failed: backend unreachable".to_owned()
            ),
            "{method}"
        );
    }
    let other = gw
        .modern("alice", "vh", "tools/call", echo("beta-echo", "fine"))
        .await;
    assert_eq!(other.result_text(), "beta: fine");
    assert_eq!(beta.requests_for("tools/call").len(), 1);
}

#[tokio::test]
async fn a_restarted_modern_backend_serves_the_next_call() {
    let (alpha, _beta, gw) = two_backends().await;
    assert_eq!(
        gw.modern("alice", "vh", "tools/call", echo("alpha-echo", "1"))
            .await
            .result_text(),
        "alpha: 1"
    );
    alpha.stop().await;
    let failed = gw
        .modern("alice", "vh", "tools/call", echo("alpha-echo", "2"))
        .await;
    assert_eq!(rpc_error_200(&failed).0, -32603);
    alpha.restart().await;
    let again = gw
        .modern("alice", "vh", "tools/call", echo("alpha-echo", "3"))
        .await;
    assert_eq!(again.result_text(), "alpha: 3");
    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert!(
        list.json()["result"]["_meta"]["mcp-gateway/degraded"].is_null(),
        "{}",
        list.text()
    );
}

#[tokio::test]
async fn a_restarted_legacy_backend_is_reinitialised_transparently() {
    let (_alpha, beta, gw) = two_backends().await;
    assert_eq!(
        gw.modern("alice", "vh", "tools/call", echo("beta-echo", "1"))
            .await
            .result_text(),
        "beta: 1"
    );
    assert_eq!(beta.requests_for("initialize").len(), 1);
    let old_session = beta.requests_for("tools/call")[0]
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();

    // The backend forgets every session; the gateway's next call meets a 404 and re-initialises.
    beta.restart().await;
    let again = gw
        .modern("alice", "vh", "tools/call", echo("beta-echo", "2"))
        .await;
    assert_eq!(again.result_text(), "beta: 2");
    assert_eq!(beta.requests_for("initialize").len(), 2, "one new session");
    let calls = beta.requests_for("tools/call");
    assert_eq!(
        calls.len(),
        3,
        "the call on the dead session, then its retry"
    );
    assert_eq!(
        calls[1].header("mcp-session-id"),
        Some(old_session.as_str())
    );
    let new_session = calls[2].header("mcp-session-id").expect("new session id");
    assert_ne!(new_session, old_session);
    assert_eq!(
        beta.calls_finished("echo"),
        2,
        "the call ran once per client request"
    );

    // Lists use the new session too.
    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert!(
        list.json()["result"]["_meta"]["mcp-gateway/degraded"].is_null(),
        "{}",
        list.text()
    );
}

#[tokio::test]
async fn a_legacy_backend_down_then_restarted_serves_the_next_call() {
    let (alpha, beta, gw) = two_backends().await;
    assert_eq!(
        gw.modern("alice", "vh", "tools/call", echo("beta-echo", "1"))
            .await
            .result_text(),
        "beta: 1"
    );
    beta.stop().await;
    let failed = gw
        .modern("alice", "vh", "tools/call", echo("beta-echo", "2"))
        .await;
    assert_eq!(
        rpc_error_200(&failed),
        (
            -32603,
            "Backend beta failed: backend unreachable".to_owned()
        )
    );
    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert_eq!(
        degraded_backends(&list.json()["result"]),
        json!([{"name": "beta", "reason": "backend unreachable"}])
    );
    assert_eq!(
        gw.modern("alice", "vh", "tools/call", echo("alpha-echo", "a"))
            .await
            .result_text(),
        "alpha: a"
    );

    beta.restart().await;
    let again = gw
        .modern("alice", "vh", "tools/call", echo("beta-echo", "3"))
        .await;
    assert_eq!(again.result_text(), "beta: 3");
    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert!(
        list.json()["result"]["_meta"]["mcp-gateway/degraded"].is_null(),
        "{}",
        list.text()
    );
    drop(alpha);
}

#[tokio::test]
async fn a_backend_tool_error_is_relayed_as_a_result() {
    let (_alpha, _beta, gw) = two_backends().await;
    for backend in ["alpha", "beta"] {
        let reply = gw
            .modern(
                "alice",
                "vh",
                "tools/call",
                json!({"name": format!("{backend}-fail"), "arguments": {}}),
            )
            .await;
        let result = &reply.json()["result"];
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(
            result["content"][0]["text"],
            format!("{backend}: failed on purpose")
        );
    }
}

#[tokio::test]
async fn a_slow_backend_times_out_with_an_error_naming_it() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::modern("beta")).await;
    let config = vhost_config(json!({"backends": {
        "alpha": {"url": alpha.url(), "timeout_ms": 300},
        "beta": {"url": beta.url(), "timeout_ms": 5000}}}));
    let gw = Gateway::start(&[("alice", config)]).await;
    // 20 s of work against the 300 ms timeout: the answer comes long before the work would end,
    // by a margin a loaded machine meets.
    let params = json!({"name": "alpha-slow", "arguments": {"steps": 10, "delay_ms": 2000}});
    let started = std::time::Instant::now();
    let reply = gw.modern("alice", "vh", "tools/call", params).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        rpc_error_200(&reply),
        (
            -32603,
            "Backend alpha failed: backend timed out after 300ms".to_owned()
        )
    );
    let cancelled = alpha
        .wait_for_calls("slow", std::time::Duration::from_secs(5), |c| {
            c.cancelled == 1
        })
        .await;
    assert!(
        cancelled,
        "giving up on the call closes it upstream: {:?}",
        alpha.calls("slow")
    );
    assert_eq!(
        gw.modern("alice", "vh", "tools/call", echo("beta-echo", "b"))
            .await
            .result_text(),
        "beta: b"
    );
}

#[tokio::test]
async fn a_slow_legacy_backend_times_out_and_its_call_is_cancelled() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = vhost_config(json!({"backends": {
        "alpha": {"url": alpha.url(), "timeout_ms": 5000},
        "beta": {"url": beta.url(), "timeout_ms": 300}}}));
    let gw = Gateway::start(&[("alice", config)]).await;
    let params = json!({"name": "beta-slow", "arguments": {"steps": 2, "delay_ms": 2000}});
    let reply = gw.modern("alice", "vh", "tools/call", params).await;
    assert_eq!(
        rpc_error_200(&reply),
        (
            -32603,
            "Backend beta failed: backend timed out after 300ms".to_owned()
        )
    );
    // A legacy backend is not cancelled by a closed stream: the gateway tells it.
    let cancelled = beta
        .wait_for_calls("slow", std::time::Duration::from_secs(3), |c| {
            c.cancelled == 1
        })
        .await;
    assert!(
        cancelled,
        "the gateway gave up, so the backend should stop: {:?}",
        beta.calls("slow")
    );
    assert_eq!(beta.requests_for("notifications/cancelled").len(), 1);
    // The session is still usable.
    assert_eq!(
        gw.modern("alice", "vh", "tools/call", echo("beta-echo", "b"))
            .await
            .result_text(),
        "beta: b"
    );
    drop(alpha);
}

#[tokio::test]
async fn a_backend_that_fails_at_initialize_is_degraded_and_its_calls_fail() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    // Not an MCP endpoint: the probe and `initialize` get a plain-text 404.
    let broken = alpha.url().replace("/mcp", "/not-mcp");
    let config = user_config(&[("alpha", alpha.url()), ("beta", broken)]);
    let gw = Gateway::start(&[("alice", config)]).await;

    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    let result = &list.json()["result"];
    assert_eq!(
        degraded_backends(result),
        json!([{"name": "beta", "reason": "backend answered HTTP 404"}]),
        "{result}"
    );
    assert_eq!(result["tools"].as_array().map(Vec::len), Some(7));
    let discover = gw.modern("alice", "vh", "server/discover", json!({})).await;
    assert_eq!(
        degraded_backends(&discover.json()["result"]),
        json!([{"name": "beta", "reason": "backend answered HTTP 404"}])
    );
    let call = gw
        .modern("alice", "vh", "tools/call", echo("beta-echo", "x"))
        .await;
    assert_eq!(
        rpc_error_200(&call),
        (
            -32603,
            "Backend beta failed: backend answered HTTP 404".to_owned()
        )
    );
    assert_eq!(
        gw.modern("alice", "vh", "tools/call", echo("alpha-echo", "a"))
            .await
            .result_text(),
        "alpha: a"
    );
}
