//! The stateless 2026-07-28 endpoint end to end: foundation layers + router in front of real rmcp
//! backends (modern and legacy), driven over real sockets with raw HTTP.

use mcp_test_support::{result_text, rpc_error_200, tool_names};
use std::time::Duration;

use mcp_router::McpRouter;
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::stack::{Gateway, modern_meta, user_config, vhost_config};
use serde_json::{Value, json};

/// One modern and one legacy backend behind one virtual host.
async fn two_backends() -> (TestBackend, TestBackend, Gateway) {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config)]).await;
    (alpha, beta, gw)
}

#[tokio::test]
async fn lists_merge_with_prefixes_and_calls_route_to_either_era() {
    let (alpha, beta, gw) = two_backends().await;

    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let result = &list.json()["result"];
    let names = tool_names(result);
    for expected in ["alpha-echo", "alpha-get-sum", "beta-echo", "beta-get-sum"] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected} missing from {names:?}"
        );
    }
    // Deterministic order: every alpha item before every beta item.
    let first_beta = names
        .iter()
        .position(|n| n.starts_with("beta-"))
        .expect("beta items");
    assert!(names[..first_beta].iter().all(|n| n.starts_with("alpha-")));
    assert_eq!(result["cacheScope"], "private");
    assert_eq!(result["ttlMs"], 0, "a legacy backend contributes ttlMs 0");
    assert_eq!(result["resultType"], "complete");
    assert!(
        result["_meta"]["mcp-gateway/degraded"].is_null(),
        "{result}"
    );

    let modern = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "alpha-echo", "arguments": {"text": "hi"}}),
        )
        .await;
    assert_eq!(modern.status, 200, "{}", modern.text());
    assert_eq!(result_text(&modern.json()["result"]), "alpha: hi");
    let legacy = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-get-sum", "arguments": {"a": 2, "b": 3}}),
        )
        .await;
    assert_eq!(
        legacy.json()["result"]["structuredContent"]["sum"],
        5,
        "{}",
        legacy.text()
    );

    // The backends saw un-prefixed names and never the client's token.
    let called: Vec<String> = alpha
        .requests()
        .iter()
        .filter_map(|r| r.called_name())
        .collect();
    assert!(called.contains(&"echo".to_owned()), "{called:?}");
    for backend in [&alpha, &beta] {
        assert!(
            backend
                .requests()
                .iter()
                .all(|r| !r.has_header("authorization"))
        );
    }
    let modern_call = alpha
        .requests_for("tools/call")
        .pop()
        .expect("a tools/call at alpha");
    assert_eq!(modern_call.header("mcp-name"), Some("echo"));
    assert_eq!(
        modern_call.header("mcp-protocol-version"),
        Some("2026-07-28")
    );
    assert!(
        beta.requests_for("tools/call")
            .iter()
            .all(|r| r.has_header("mcp-session-id"))
    );
}

#[tokio::test]
async fn discover_merges_capabilities_and_names_the_gateway() {
    let (_alpha, _beta, gw) = two_backends().await;
    let reply = gw.modern("alice", "vh", "server/discover", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let result = &reply.json()["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    for family in ["tools", "prompts", "resources", "completions"] {
        assert!(
            result["capabilities"][family].is_object(),
            "{family}: {result}"
        );
    }
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-gateway"
    );
    assert_eq!(result["cacheScope"], "private");
}

#[tokio::test]
async fn discover_joins_the_instructions_of_both_eras_under_a_heading_each() {
    let alpha =
        TestBackend::start(BackendSpec::modern("alpha").instructions("Use alpha for echoes."))
            .await;
    let beta = TestBackend::start(BackendSpec::legacy("beta").instructions("Beta adds.")).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let router = McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .instructions("One gateway.")
        .build();
    let gw = Gateway::start_with(&[("alice", config)], router).await;
    let reply = gw.modern("alice", "vh", "server/discover", json!({})).await;
    assert_eq!(
        reply.json()["result"]["instructions"],
        "One gateway.\n\n## alpha\nUse alpha for echoes.\n\n## beta\nBeta adds.",
        "{}",
        reply.text()
    );
}

#[tokio::test]
async fn a_down_backend_is_left_out_of_lists_and_fails_only_its_own_calls() {
    let (alpha, beta, gw) = two_backends().await;
    beta.stop().await;

    let list = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert_eq!(list.status, 200);
    let result = &list.json()["result"];
    assert!(tool_names(result).iter().all(|n| n.starts_with("alpha-")));
    assert_eq!(
        result["_meta"]["mcp-gateway/degraded"]["backends"][0]["name"],
        "beta"
    );

    let discover = gw.modern("alice", "vh", "server/discover", json!({})).await;
    assert_eq!(
        discover.json()["result"]["_meta"]["mcp-gateway/degraded"]["backends"][0]["name"],
        "beta"
    );

    let failed = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(failed.status, 200);
    let error = &failed.json()["error"];
    assert_eq!(error["code"], -32603);
    assert!(
        error["message"].as_str().expect("message").contains("beta"),
        "{error}"
    );

    let ok = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "alpha-echo", "arguments": {"text": "still"}}),
        )
        .await;
    assert_eq!(result_text(&ok.json()["result"]), "alpha: still");
    drop(alpha);
}

#[tokio::test]
async fn routing_errors_follow_the_contract() {
    let (_alpha, _beta, gw) = two_backends().await;
    let wrong = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "zeta-echo", "arguments": {}}),
        )
        .await;
    let error = &wrong.json()["error"];
    assert_eq!(error["code"], -32602);
    assert_eq!(error["message"], "wrong tool name: zeta-echo");
    let prompt = gw
        .modern("alice", "vh", "prompts/get", json!({"name": "nope"}))
        .await;
    assert_eq!(prompt.json()["error"]["message"], "wrong prompt name: nope");
    let resource = gw
        .modern("alice", "vh", "resources/read", json!({"uri": "test://x"}))
        .await;
    assert_eq!(
        resource.json()["error"]["message"],
        "wrong resource name: test://x"
    );
}

#[tokio::test]
async fn progress_notifications_stream_before_the_result() {
    let (_alpha, _beta, gw) = two_backends().await;
    let mut params = json!({"name": "alpha-slow", "arguments": {"steps": 3, "delay_ms": 10}});
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "client-token-7",
    });
    let reply = gw.modern("alice", "vh", "tools/call", params).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/event-stream"),
        "{}",
        reply.text()
    );
    let messages = reply.sse_messages();
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{messages:?}");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "client-token-7")
    );
    let last = messages.last().expect("final");
    assert_eq!(last["id"], 1);
    assert_eq!(result_text(&last["result"]), "alpha: done");
}

/// The tools every test backend offers, in its order.
const BASE_TOOLS: [&str; 7] = ["echo", "add", "get-sum", "fail", "slow", "ask", "headers"];

fn prefixed(backend: &str, names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("{backend}-{n}")).collect()
}

async fn tools_list(gw: &Gateway, sub: &str) -> Value {
    let reply = gw.modern(sub, "vh", "tools/list", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()["result"].clone()
}

// ---- merging and naming ------------------------------------------------------------------

#[tokio::test]
async fn three_backends_merge_in_backend_order_and_each_is_callable() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gamma = TestBackend::start(BackendSpec::both("gamma")).await;
    let config = user_config(&[
        ("alpha", alpha.url()),
        ("beta", beta.url()),
        ("gamma", gamma.url()),
    ]);
    let gw = Gateway::start(&[("alice", config)]).await;

    let result = tools_list(&gw, "alice").await;
    let mut expected = prefixed("alpha", &BASE_TOOLS);
    expected.extend(prefixed("beta", &BASE_TOOLS));
    expected.extend(prefixed("gamma", &BASE_TOOLS));
    assert_eq!(tool_names(&result), expected);
    assert!(result.get("nextCursor").is_none(), "{result}");

    for backend in ["alpha", "beta", "gamma"] {
        let reply = gw
            .modern(
                "alice",
                "vh",
                "tools/call",
                json!({"name": format!("{backend}-echo"), "arguments": {"text": "x"}}),
            )
            .await;
        assert_eq!(
            result_text(&reply.json()["result"]),
            format!("{backend}: x"),
            "{}",
            reply.text()
        );
    }
    for backend in [&alpha, &beta, &gamma] {
        let called: Vec<String> = backend
            .requests_for("tools/call")
            .iter()
            .filter_map(|r| r.called_name())
            .collect();
        assert_eq!(called, ["echo"], "{}", backend.name());
    }
}

#[tokio::test]
async fn auto_naming_with_one_backend_keeps_upstream_names() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let config = vhost_config(
        json!({"naming": "auto", "backends": {"alpha": {"url": alpha.url(), "timeout_ms": 5000}}}),
    );
    let gw = Gateway::start(&[("alice", config)]).await;

    let result = tools_list(&gw, "alice").await;
    assert_eq!(tool_names(&result), BASE_TOOLS);
    let prompts = gw.modern("alice", "vh", "prompts/list", json!({})).await;
    assert_eq!(prompts.json()["result"]["prompts"][0]["name"], "greet");
    let resources = gw.modern("alice", "vh", "resources/list", json!({})).await;
    assert_eq!(
        resources.json()["result"]["resources"][0]["uri"],
        "test://alpha/static"
    );

    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "plain"}}),
        )
        .await;
    assert_eq!(
        result_text(&reply.json()["result"]),
        "alpha: plain",
        "{}",
        reply.text()
    );
    let read = gw
        .modern(
            "alice",
            "vh",
            "resources/read",
            json!({"uri": "test://alpha/static"}),
        )
        .await;
    assert_eq!(
        read.json()["result"]["contents"][0]["uri"],
        "test://alpha/static",
        "{}",
        read.text()
    );
    assert_eq!(
        alpha.requests_for("tools/call")[0].called_name().as_deref(),
        Some("echo")
    );
    // Without prefixes every name belongs to the one backend, which judges it.
    let prefixed = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "alpha-echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(rpc_error_200(&prefixed).0, -32602, "{}", prefixed.text());
    assert_eq!(
        alpha.requests_for("tools/call")[1].called_name().as_deref(),
        Some("alpha-echo")
    );
}

#[tokio::test]
async fn auto_naming_with_two_backends_still_prefixes() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::modern("beta")).await;
    let config = vhost_config(json!({"naming": "auto", "backends": {
        "alpha": {"url": alpha.url(), "timeout_ms": 5000},
        "beta": {"url": beta.url(), "timeout_ms": 5000}}}));
    let gw = Gateway::start(&[("alice", config)]).await;

    let mut expected = prefixed("alpha", &BASE_TOOLS);
    expected.extend(prefixed("beta", &BASE_TOOLS));
    assert_eq!(tool_names(&tools_list(&gw, "alice").await), expected);
    let unprefixed = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(
        rpc_error_200(&unprefixed),
        (-32602, "wrong tool name: echo".to_owned())
    );
    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(result_text(&reply.json()["result"]), "beta: x");
}

#[tokio::test]
async fn aliases_are_listed_under_the_alias_and_callable_by_it() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = vhost_config(json!({"backends": {
        "alpha": {"url": alpha.url(), "timeout_ms": 5000, "aliases": {"say": "echo", "hello": "greet"}},
        "beta": {"url": beta.url(), "timeout_ms": 5000, "aliases": {"sum": "get-sum"}}}}));
    let gw = Gateway::start(&[("alice", config)]).await;

    let names = tool_names(&tools_list(&gw, "alice").await);
    assert_eq!(names.iter().filter(|n| *n == "say").count(), 1, "{names:?}");
    assert_eq!(names.iter().filter(|n| *n == "sum").count(), 1, "{names:?}");
    assert!(
        !names.contains(&"alpha-echo".to_owned()),
        "an aliased tool is listed only under its alias: {names:?}"
    );
    assert!(!names.contains(&"beta-get-sum".to_owned()), "{names:?}");
    assert!(names.contains(&"alpha-add".to_owned()) && names.contains(&"beta-echo".to_owned()));
    let prompts = gw.modern("alice", "vh", "prompts/list", json!({})).await;
    let prompt_names: Vec<Value> = prompts.json()["result"]["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .map(|p| p["name"].clone())
        .collect();
    assert_eq!(prompt_names, [json!("hello"), json!("beta-greet")]);

    let said = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "say", "arguments": {"text": "aliased"}}),
        )
        .await;
    assert_eq!(
        result_text(&said.json()["result"]),
        "alpha: aliased",
        "{}",
        said.text()
    );
    let sum = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "sum", "arguments": {"a": 20, "b": 22}}),
        )
        .await;
    assert_eq!(
        sum.json()["result"]["structuredContent"]["sum"],
        42,
        "{}",
        sum.text()
    );
    let hello = gw
        .modern(
            "alice",
            "vh",
            "prompts/get",
            json!({"name": "hello", "arguments": {"who": "Ada"}}),
        )
        .await;
    assert_eq!(
        hello.json()["result"]["messages"][0]["content"]["text"],
        "Hello Ada from alpha",
        "{}",
        hello.text()
    );

    assert_eq!(
        alpha.requests_for("tools/call")[0].called_name().as_deref(),
        Some("echo")
    );
    assert_eq!(
        alpha.requests_for("tools/call")[0].header("mcp-name"),
        Some("echo")
    );
    assert_eq!(
        alpha.requests_for("prompts/get")[0]
            .called_name()
            .as_deref(),
        Some("greet")
    );
    assert_eq!(
        beta.requests_for("tools/call")[0].called_name().as_deref(),
        Some("get-sum")
    );
}

/// Follows `nextCursor` until it is absent; returns every name and the number of pages.
async fn walk_tools(gw: &Gateway, sub: &str) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 1..=50 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let reply = gw.modern(sub, "vh", "tools/list", params).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let result = &reply.json()["result"];
        assert!(
            result["_meta"]["mcp-gateway/degraded"].is_null(),
            "{result}"
        );
        names.extend(tool_names(result));
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (names, page),
        }
    }
    panic!("more than 50 pages: the cursor never ends");
}

fn all_tools(backend: &str, extra: usize) -> Vec<String> {
    let mut names = prefixed(backend, &BASE_TOOLS);
    names.extend((0..extra).map(|i| format!("{backend}-tool_{i:02}")));
    names
}

#[tokio::test]
async fn pagination_across_backends_lists_every_tool_once_in_a_stable_order() {
    let spec = |name: &str| BackendSpec::modern(name).page_size(2).extra_tools(5);
    let alpha = TestBackend::start(spec("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta").page_size(2).extra_tools(5)).await;
    let gamma = TestBackend::start(spec("gamma")).await;
    let config = user_config(&[
        ("alpha", alpha.url()),
        ("beta", beta.url()),
        ("gamma", gamma.url()),
    ]);
    let gw = Gateway::start(&[("alice", config)]).await;

    let (first, pages) = walk_tools(&gw, "alice").await;
    // 12 tools per backend, 2 per page: 6 gateway pages of 2 + 2 + 2.
    assert_eq!(pages, 6, "{first:?}");
    let mut sorted = first.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), first.len(), "a tool listed twice: {first:?}");
    let mut expected: Vec<String> = ["alpha", "beta", "gamma"]
        .iter()
        .flat_map(|b| all_tools(b, 5))
        .collect();
    expected.sort();
    assert_eq!(sorted, expected);
    // Within one backend, its own order.
    for backend in ["alpha", "beta", "gamma"] {
        let own: Vec<&String> = first
            .iter()
            .filter(|n| n.starts_with(&format!("{backend}-")))
            .collect();
        assert_eq!(own, all_tools(backend, 5).iter().collect::<Vec<_>>());
    }

    let (second, _) = walk_tools(&gw, "alice").await;
    assert_eq!(
        second, first,
        "a second walk lists the same tools in the same order"
    );
    for backend in [&alpha, &beta, &gamma] {
        assert_eq!(
            backend.requests_for("tools/list").len(),
            12,
            "6 pages per walk at {}",
            backend.name()
        );
    }
}

#[tokio::test]
async fn an_exhausted_backend_is_not_asked_again() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").page_size(2).extra_tools(5)).await;
    let beta = TestBackend::start(BackendSpec::modern("beta")).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config)]).await;

    let (names, pages) = walk_tools(&gw, "alice").await;
    assert_eq!(pages, 6);
    assert_eq!(names.len(), 12 + 7);
    assert_eq!(alpha.requests_for("tools/list").len(), 6);
    assert_eq!(
        beta.requests_for("tools/list").len(),
        1,
        "beta had everything on the first page"
    );
}

#[tokio::test]
async fn tampered_foreign_and_cross_list_cursors_are_invalid_params() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").page_size(2)).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta").page_size(2)).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config.clone()), ("bob", config)]).await;

    let first = tools_list(&gw, "alice").await;
    let cursor = first["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let asked =
        |b: &TestBackend| b.requests_for("tools/list").len() + b.requests_for("prompts/list").len();
    let before = (asked(&alpha), asked(&beta));

    let invalid = (-32602, "Invalid cursor".to_owned());
    // One character of the sealed payload changed.
    let mut tampered = cursor.clone().into_bytes();
    tampered[3] = if tampered[3] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let reply = gw
        .modern("alice", "vh", "tools/list", json!({"cursor": tampered}))
        .await;
    assert_eq!(rpc_error_200(&reply), invalid, "tampered");
    // Another principal with the very same configuration.
    let reply = gw
        .modern("bob", "vh", "tools/list", json!({"cursor": cursor}))
        .await;
    assert_eq!(
        rpc_error_200(&reply),
        invalid,
        "bob replaying alice's cursor"
    );
    // Another list method.
    let reply = gw
        .modern("alice", "vh", "prompts/list", json!({"cursor": cursor}))
        .await;
    assert_eq!(
        rpc_error_200(&reply),
        invalid,
        "tools cursor on prompts/list"
    );
    // A backend's own cursor is not a gateway cursor.
    let reply = gw
        .modern("alice", "vh", "tools/list", json!({"cursor": "616c706861"}))
        .await;
    assert_eq!(rpc_error_200(&reply), invalid, "raw backend cursor");
    assert_eq!(
        (asked(&alpha), asked(&beta)),
        before,
        "refused cursors reach no backend"
    );

    // The genuine cursor still works for its owner.
    let second = gw
        .modern("alice", "vh", "tools/list", json!({"cursor": cursor}))
        .await;
    assert_eq!(
        tool_names(&second.json()["result"]),
        ["alpha-get-sum", "alpha-fail", "beta-get-sum", "beta-fail"]
    );
}

#[tokio::test]
async fn cache_hints_take_the_smallest_ttl_and_stay_private() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").ttl_ms(5000)).await;
    let beta = TestBackend::start(BackendSpec::modern("beta").ttl_ms(2000)).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config)]).await;

    for method in [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "server/discover",
    ] {
        let reply = gw.modern("alice", "vh", method, json!({})).await;
        let result = &reply.json()["result"];
        assert_eq!(result["ttlMs"], 2000, "{method}: {result}");
        assert_eq!(result["cacheScope"], "private", "{method}: {result}");
    }
}

#[tokio::test]
async fn tool_names_with_a_dash_route_to_the_right_tool() {
    let (alpha, beta, gw) = two_backends().await;
    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "alpha-get-sum", "arguments": {"a": 40, "b": 2}}),
        )
        .await;
    let result = &reply.json()["result"];
    assert_eq!(result["structuredContent"]["sum"], 42, "{}", reply.text());
    assert_eq!(result_text(result), "alpha: 42");
    let call = alpha
        .requests_for("tools/call")
        .pop()
        .expect("call at alpha");
    assert_eq!(call.called_name().as_deref(), Some("get-sum"));
    assert_eq!(call.header("mcp-name"), Some("get-sum"));
    assert!(beta.requests_for("tools/call").is_empty());
}

/// Backends named `a` and `a-b` (overlapping prefixes).
async fn overlapping(a_extra: Value) -> (TestBackend, TestBackend, Gateway) {
    let a = TestBackend::start(BackendSpec::modern("a")).await;
    let ab = TestBackend::start(BackendSpec::legacy("a-b")).await;
    let mut a_config = json!({"url": a.url(), "timeout_ms": 5000});
    if let (Some(target), Some(extra)) = (a_config.as_object_mut(), a_extra.as_object()) {
        target.extend(extra.clone());
    }
    let config = vhost_config(
        json!({"backends": {"a": a_config, "a-b": {"url": ab.url(), "timeout_ms": 5000}}}),
    );
    let gw = Gateway::start(&[("alice", config)]).await;
    (a, ab, gw)
}

#[tokio::test]
async fn backend_names_with_a_dash_route_on_the_configured_name() {
    let (a, ab, gw) = overlapping(json!({})).await;
    let mut expected = prefixed("a", &BASE_TOOLS);
    expected.extend(prefixed("a-b", &BASE_TOOLS));
    let result = tools_list(&gw, "alice").await;
    assert_eq!(tool_names(&result), expected);
    assert!(
        result["_meta"]["mcp-gateway/degraded"].is_null(),
        "{result}"
    );

    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "a-b-echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(
        result_text(&reply.json()["result"]),
        "a-b: x",
        "{}",
        reply.text()
    );
    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "a-echo", "arguments": {"text": "y"}}),
        )
        .await;
    assert_eq!(
        result_text(&reply.json()["result"]),
        "a: y",
        "{}",
        reply.text()
    );
    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "a-b-get-sum", "arguments": {"a": 1, "b": 2}}),
        )
        .await;
    assert_eq!(
        result_text(&reply.json()["result"]),
        "a-b: 3",
        "{}",
        reply.text()
    );
    let at_a: Vec<String> = a
        .requests_for("tools/call")
        .iter()
        .filter_map(|r| r.called_name())
        .collect();
    let at_ab: Vec<String> = ab
        .requests_for("tools/call")
        .iter()
        .filter_map(|r| r.called_name())
        .collect();
    assert_eq!(at_a, ["echo"]);
    assert_eq!(at_ab, ["echo", "get-sum"]);
}

#[tokio::test]
async fn a_public_name_two_backends_expose_is_left_out_and_refused() {
    // `a` exposes its `echo` as `a-b-echo`, which is also `a-b`'s `echo`.
    let (a, ab, gw) = overlapping(json!({"aliases": {"a-b-echo": "echo"}})).await;
    let result = tools_list(&gw, "alice").await;
    let names = tool_names(&result);
    assert!(
        !names.iter().any(|n| n == "a-b-echo" || n == "a-echo"),
        "{names:?}"
    );
    assert!(
        names.contains(&"a-b-add".to_owned()) && names.contains(&"a-add".to_owned()),
        "{names:?}"
    );
    assert_eq!(
        result["_meta"]["mcp-gateway/degraded"],
        json!({"items": [{"name": "a-b-echo", "reason": "ambiguous"}]})
    );

    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "a-b-echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(
        rpc_error_200(&reply),
        (
            -32600,
            "ambiguous name: a-b-echo (several backends expose it)".to_owned()
        )
    );
    assert!(a.requests_for("tools/call").is_empty() && ab.requests_for("tools/call").is_empty());
}

#[tokio::test]
async fn allowed_tools_filter_the_list_and_refuse_other_calls() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = vhost_config(json!({"backends": {
        "alpha": {"url": alpha.url(), "timeout_ms": 5000, "allowed_tools": ["echo", "get-sum"]},
        "beta": {"url": beta.url(), "timeout_ms": 5000}}}));
    let gw = Gateway::start(&[("alice", config)]).await;

    let mut expected = vec!["alpha-echo".to_owned(), "alpha-get-sum".to_owned()];
    expected.extend(prefixed("beta", &BASE_TOOLS));
    assert_eq!(tool_names(&tools_list(&gw, "alice").await), expected);

    let refused = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "alpha-add", "arguments": {"a": 1, "b": 1}}),
        )
        .await;
    assert_eq!(
        rpc_error_200(&refused),
        (-32602, "wrong tool name: alpha-add".to_owned())
    );
    assert!(
        alpha.requests_for("tools/call").is_empty(),
        "a filtered tool never reaches the backend"
    );
    let allowed = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "alpha-get-sum", "arguments": {"a": 1, "b": 1}}),
        )
        .await;
    assert_eq!(result_text(&allowed.json()["result"]), "alpha: 2");
    let other = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "beta-add", "arguments": {"a": 1, "b": 1}}),
        )
        .await;
    assert_eq!(
        result_text(&other.json()["result"]),
        "beta: 2",
        "the filter is per backend"
    );
}

#[tokio::test]
async fn names_over_the_length_limit_are_left_out_unless_an_alias_fixes_them() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let config = vhost_config(json!({"backends": {
        "alpha": {"url": alpha.url(), "timeout_ms": 5000, "aliases": {"sum": "get-sum"}}}}));
    let router = McpRouter::builder()
        .fanout_deadline(Duration::from_secs(5))
        .max_name_len(10)
        .build();
    let gw = Gateway::start_with(&[("alice", config)], router).await;

    let result = tools_list(&gw, "alice").await;
    assert_eq!(
        tool_names(&result),
        [
            "alpha-echo",
            "alpha-add",
            "sum",
            "alpha-fail",
            "alpha-slow",
            "alpha-ask"
        ]
    );
    assert_eq!(
        result["_meta"]["mcp-gateway/degraded"],
        json!({"items": [{"name": "alpha-headers", "reason": "name too long"}]})
    );
    let prompts = gw.modern("alice", "vh", "prompts/list", json!({})).await;
    let result = &prompts.json()["result"];
    assert_eq!(
        result["prompts"],
        json!([]),
        "alpha-greet is 11 characters: {result}"
    );
    assert_eq!(
        result["_meta"]["mcp-gateway/degraded"]["items"],
        json!([{"name": "alpha-greet", "reason": "name too long"}])
    );
    let resources = gw.modern("alice", "vh", "resources/list", json!({})).await;
    assert_eq!(
        resources.json()["result"]["resources"][0]["uri"],
        "alpha-test://alpha/static",
        "URIs have no length limit"
    );
}

#[tokio::test]
async fn concurrent_calls_with_equal_ids_and_progress_tokens_do_not_collide() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let config = user_config(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let gw = Gateway::start(&[("alice", config.clone()), ("bob", config)]).await;

    // Every client uses id "same" and progress token "same"; each asks for a different step count.
    let calls = (0..8u64).map(|k| {
        let gw = &gw;
        async move {
            let backend = if k % 2 == 0 { "alpha" } else { "beta" };
            let sub = if k % 4 < 2 { "alice" } else { "bob" };
            let steps = k + 1;
            let mut meta = modern_meta();
            meta["progressToken"] = json!("same");
            let params = json!({"name": format!("{backend}-slow"), "arguments": {"steps": steps, "delay_ms": 20}, "_meta": meta});
            let reply = gw.modern_id(sub, "vh", json!("same"), "tools/call", params).await;
            (backend, steps, reply)
        }
    });
    for (backend, steps, reply) in join_all(calls).await {
        let messages = reply.sse_messages();
        let progress: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(
            progress.len() as u64,
            steps,
            "{backend}/{steps}: {messages:?}"
        );
        for p in &progress {
            assert_eq!(p["params"]["progressToken"], "same");
            assert_eq!(
                p["params"]["total"].as_f64(),
                Some(steps as f64),
                "{backend}/{steps}: a foreign progress: {p}"
            );
            assert_eq!(
                p["params"]["message"]
                    .as_str()
                    .map(|m| m.starts_with(&format!("{backend}: "))),
                Some(true)
            );
        }
        let last = messages.last().expect("final");
        assert_eq!(last["id"], "same");
        assert_eq!(result_text(&last["result"]), format!("{backend}: done"));
    }
    for backend in [&alpha, &beta] {
        let calls = backend.requests_for("tools/call");
        assert_eq!(calls.len(), 4);
        let mut ids: Vec<String> = calls
            .iter()
            .map(|c| c.json().expect("json")["id"].to_string())
            .collect();
        let mut tokens: Vec<String> = calls
            .iter()
            .map(|c| c.json().expect("json")["params"]["_meta"]["progressToken"].to_string())
            .collect();
        ids.sort();
        ids.dedup();
        tokens.sort();
        tokens.dedup();
        assert_eq!(
            (ids.len(), tokens.len()),
            (4, 4),
            "upstream ids and tokens are unique at {}",
            backend.name()
        );
    }
    assert_eq!(
        beta.requests_for("initialize").len(),
        2,
        "one upstream session per principal"
    );
}

/// Runs `futures` concurrently on this task and returns their outputs in order (a small
/// `join_all`; the futures borrow the gateway, so they cannot be spawned).
async fn join_all<F: std::future::Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    let mut futures: Vec<Option<_>> = futures.into_iter().map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => {
                        *output = Some(value);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

// ---- resources, prompts, completion ------------------------------------------------------

#[tokio::test]
async fn resources_and_templates_are_listed_under_public_uris() {
    let (_alpha, _beta, gw) = two_backends().await;
    let reply = gw.modern("alice", "vh", "resources/list", json!({})).await;
    let uris: Vec<Value> = reply.json()["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r["uri"].clone())
        .collect();
    assert_eq!(
        uris,
        [
            json!("alpha-test://alpha/static"),
            json!("beta-test://beta/static")
        ]
    );

    let reply = gw
        .modern("alice", "vh", "resources/templates/list", json!({}))
        .await;
    let result = &reply.json()["result"];
    let templates: Vec<Value> = result["resourceTemplates"]
        .as_array()
        .unwrap_or_else(|| panic!("resourceTemplates: {result}"))
        .iter()
        .map(|r| r["uriTemplate"].clone())
        .collect();
    assert_eq!(
        templates,
        [
            json!("alpha-test://alpha/item/{id}"),
            json!("beta-test://beta/item/{id}")
        ]
    );
    // Other fields pass through untouched.
    assert_eq!(result["resourceTemplates"][0]["name"], "item");
    assert_eq!(result["resourceTemplates"][0]["mimeType"], "text/plain");
}

#[tokio::test]
async fn resources_read_answers_with_the_public_uri() {
    let (alpha, beta, gw) = two_backends().await;
    for (public, text) in [
        ("alpha-test://alpha/static", "static from alpha"),
        ("alpha-test://alpha/item/42", "item 42 from alpha"),
        ("beta-test://beta/static", "static from beta"),
        ("beta-test://beta/item/7", "item 7 from beta"),
    ] {
        let reply = gw
            .modern("alice", "vh", "resources/read", json!({"uri": public}))
            .await;
        let contents = &reply.json()["result"]["contents"];
        assert_eq!(
            contents.as_array().map(Vec::len),
            Some(1),
            "{}",
            reply.text()
        );
        assert_eq!(contents[0]["uri"], public);
        assert_eq!(contents[0]["text"], text);
        assert_eq!(contents[0]["mimeType"], "text/plain");
    }
    let read = alpha
        .requests_for("resources/read")
        .pop()
        .expect("read at alpha");
    assert_eq!(
        read.json().expect("json")["params"]["uri"],
        "test://alpha/item/42"
    );
    assert_eq!(read.header("mcp-name"), Some("test://alpha/item/42"));
    let read = beta
        .requests_for("resources/read")
        .pop()
        .expect("read at beta");
    assert_eq!(
        read.json().expect("json")["params"]["uri"],
        "test://beta/item/7"
    );
}

#[tokio::test]
async fn a_non_ascii_uri_routes_with_an_encoded_name_header() {
    let (alpha, _beta, gw) = two_backends().await;
    let public = "alpha-test://alpha/item/gr\u{fc}n tee";
    let reply = gw
        .modern("alice", "vh", "resources/read", json!({"uri": public}))
        .await;
    let contents = &reply.json()["result"]["contents"];
    assert_eq!(contents[0]["uri"], public, "{}", reply.text());
    assert_eq!(contents[0]["text"], "item gr\u{fc}n tee from alpha");
    let read = alpha
        .requests_for("resources/read")
        .pop()
        .expect("read at alpha");
    let header = read.headers.get("mcp-name").expect("Mcp-Name upstream");
    assert!(
        header.to_str().is_ok_and(|h| h.starts_with("=?base64?")),
        "{header:?}"
    );
    let decoded = mcp_core::headers::decode_header_value(header).expect("decodable");
    assert_eq!(decoded, "test://alpha/item/gr\u{fc}n tee");
}

#[tokio::test]
async fn prompts_get_routes_by_public_name() {
    let (alpha, beta, gw) = two_backends().await;
    let reply = gw
        .modern(
            "alice",
            "vh",
            "prompts/get",
            json!({"name": "alpha-greet", "arguments": {"who": "Ada"}}),
        )
        .await;
    let result = &reply.json()["result"];
    assert_eq!(
        result["messages"][0]["content"]["text"],
        "Hello Ada from alpha",
        "{}",
        reply.text()
    );
    assert_eq!(result["description"], "alpha: greeting");
    let reply = gw
        .modern(
            "alice",
            "vh",
            "prompts/get",
            json!({"name": "beta-greet", "arguments": {"who": "Bo"}}),
        )
        .await;
    assert_eq!(
        reply.json()["result"]["messages"][0]["content"]["text"],
        "Hello Bo from beta",
        "{}",
        reply.text()
    );
    assert_eq!(
        alpha.requests_for("prompts/get")[0]
            .called_name()
            .as_deref(),
        Some("greet")
    );
    assert_eq!(
        beta.requests_for("prompts/get")[0].called_name().as_deref(),
        Some("greet")
    );
}

#[tokio::test]
async fn completion_routes_on_the_prompt_reference() {
    let (alpha, beta, gw) = two_backends().await;
    for (backend, value, expected) in [
        ("alpha", "a", json!(["alice"])),
        ("beta", "b", json!(["bob"])),
    ] {
        let params = json!({
            "ref": {"type": "ref/prompt", "name": format!("{backend}-greet")},
            "argument": {"name": "who", "value": value},
        });
        let reply = gw
            .modern("alice", "vh", "completion/complete", params)
            .await;
        assert_eq!(
            reply.json()["result"]["completion"]["values"],
            expected,
            "{}",
            reply.text()
        );
    }
    for backend in [&alpha, &beta] {
        let sent = backend
            .requests_for("completion/complete")
            .pop()
            .expect("completion at backend");
        assert_eq!(
            sent.json().expect("json")["params"]["ref"],
            json!({"type": "ref/prompt", "name": "greet"})
        );
    }
}

#[tokio::test]
async fn completion_routes_on_a_resource_template_reference() {
    let (alpha, beta, gw) = two_backends().await;
    let params = json!({
        "ref": {"type": "ref/resource", "uri": "alpha-test://alpha/item/{id}"},
        "argument": {"name": "id", "value": "4"},
    });
    let reply = gw
        .modern("alice", "vh", "completion/complete", params)
        .await;
    assert_eq!(
        reply.json()["result"]["completion"]["values"],
        json!([]),
        "{}",
        reply.text()
    );
    let sent = alpha
        .requests_for("completion/complete")
        .pop()
        .expect("completion at alpha");
    assert_eq!(
        sent.json().expect("json")["params"]["ref"],
        json!({"type": "ref/resource", "uri": "test://alpha/item/{id}"})
    );
    assert!(beta.requests_for("completion/complete").is_empty());
}

#[tokio::test]
async fn an_unknown_resource_on_a_legacy_backend_is_invalid_params() {
    let (_alpha, beta, gw) = two_backends().await;
    let reply = gw
        .modern(
            "alice",
            "vh",
            "resources/read",
            json!({"uri": "beta-test://beta/nope"}),
        )
        .await;
    let (code, message) = rpc_error_200(&reply);
    assert_eq!(
        code,
        -32602,
        "legacy -32002 is translated for a modern client: {}",
        reply.text()
    );
    assert_eq!(message, "resource not found: test://beta/nope");
    assert_eq!(beta.requests_for("resources/read").len(), 1);
}

// ---- streaming ----------------------------------------------------------------------------

#[tokio::test]
async fn log_notifications_stream_before_the_result() {
    let (_alpha, _beta, gw) = two_backends().await;
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/logLevel"] = json!("info");
    let params =
        json!({"name": "alpha-slow", "arguments": {"steps": 2, "delay_ms": 10}, "_meta": meta});
    let reply = gw.modern("alice", "vh", "tools/call", params).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/event-stream"),
        "{}",
        reply.text()
    );
    let messages = reply.sse_messages();
    assert_eq!(messages.len(), 3, "{messages:?}");
    for (i, log) in messages[..2].iter().enumerate() {
        assert_eq!(log["method"], "notifications/message", "{messages:?}");
        assert_eq!(log["params"]["level"], "info");
        assert_eq!(log["params"]["logger"], "alpha");
        assert_eq!(
            log["params"]["data"]["message"],
            format!("alpha: step {}/2", i + 1)
        );
    }
    assert_eq!(messages[2]["id"], 1);
    assert_eq!(result_text(&messages[2]["result"]), "alpha: done");
}

/// Sends a streamed `tools/call` of `tool` (`slow`, 50 steps 100 ms apart, with a progress token)
/// over a raw HTTP/1.1 connection, reads until the first SSE `data:` line, then drops the socket.
async fn call_slow_then_disconnect(gw: &Gateway, tool: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut meta = modern_meta();
    meta["progressToken"] = json!("p-1");
    let params = json!({"name": tool, "arguments": {"steps": 50, "delay_ms": 100}, "_meta": meta});
    let (headers, body) = mcp_test_support::stack::modern_request("tools/call", params);
    let mut head = format!(
        "POST /servers/vh/mcp HTTP/1.1\r\nhost: {}\r\nauthorization: {}\r\ncontent-length: {}\r\n",
        gw.addr,
        mcp_test_support::stack::bearer("alice"),
        body.len()
    );
    for (name, value) in &headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");

    let mut stream = tokio::net::TcpStream::connect(gw.addr)
        .await
        .expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(body.as_bytes()).await.expect("write body");
    let mut seen = Vec::new();
    let read_first_event = async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("data:") {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(
                n > 0,
                "connection closed before any event: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read_first_event)
        .await
        .expect("a first event within 5 s");
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("notifications/progress"), "{text}");
    drop(stream);
}

#[tokio::test]
async fn a_client_that_disconnects_mid_call_cancels_the_backend_call() {
    let (alpha, _beta, gw) = two_backends().await;
    call_slow_then_disconnect(&gw, "alpha-slow").await;
    assert_eq!(alpha.calls_started("slow"), 1);
    let cancelled = alpha
        .wait_for_calls("slow", Duration::from_secs(5), |c| c.cancelled == 1)
        .await;
    assert!(
        cancelled,
        "the backend call was not cancelled: {:?}",
        alpha.calls("slow")
    );
    assert_eq!(alpha.calls_finished("slow"), 0);
}

#[tokio::test]
async fn a_client_that_disconnects_mid_call_cancels_a_legacy_backend_call() {
    // A legacy backend does not take a closed stream as cancellation (2025 transports): the
    // gateway has to send it `notifications/cancelled` for the call's upstream id.
    let (_alpha, beta, gw) = two_backends().await;
    call_slow_then_disconnect(&gw, "beta-slow").await;
    assert_eq!(beta.calls_started("slow"), 1);
    let cancelled = beta
        .wait_for_calls("slow", Duration::from_secs(3), |c| c.cancelled == 1)
        .await;
    assert!(
        cancelled,
        "the legacy backend call was not cancelled: {:?}",
        beta.calls("slow")
    );
    assert_eq!(beta.calls_finished("slow"), 0);
    let call = beta
        .requests_for("tools/call")
        .pop()
        .expect("the call at beta");
    let call_id = call.json().expect("json")["id"].clone();
    let cancel = beta
        .requests_for("notifications/cancelled")
        .pop()
        .expect("a notifications/cancelled at beta");
    assert_eq!(cancel.json().expect("json")["params"]["requestId"], call_id);
    assert_eq!(
        cancel.header("mcp-session-id"),
        call.header("mcp-session-id")
    );
}

/// Every page of `tools/list` for alice: (the names of each page, the degraded marker of each).
async fn all_tool_pages(gw: &Gateway) -> Vec<(Vec<String>, Value)> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let reply = gw.modern("alice", "vh", "tools/list", params).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let result = reply.json()["result"].clone();
        pages.push((
            tool_names(&result),
            result["_meta"]["mcp-gateway/degraded"].clone(),
        ));
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return pages,
        }
        assert!(pages.len() < 10, "the pages never end: {pages:?}");
    }
}

#[tokio::test]
async fn the_cross_page_check_reads_each_candidate_backends_list_once() {
    // Every `a-b-<tool>` of `a-b` (listed whole on page one) could also be `a`'s `b-<tool>`, and
    // `a` (two tools a page) is not whole on page one: seven names to check against `a`.
    let a = TestBackend::start(BackendSpec::modern("a").page_size(2)).await;
    let ab = TestBackend::start(BackendSpec::legacy("a-b")).await;
    let vhost = vhost_config(json!({"backends": {
        "a": {"url": a.url(), "timeout_ms": 5000},
        "a-b": {"url": ab.url(), "timeout_ms": 5000}}}));
    let gw = Gateway::start(&[("alice", vhost)]).await;
    a.clear_requests();
    let reply = gw.modern("alice", "vh", "tools/list", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let pages_of_a = BASE_TOOLS.len().div_ceil(2);
    let asked = a.requests_for("tools/list").len();
    // The fan-out's first page, then `a`'s whole list once for all seven questions (not once
    // per question: 7 x 4 pages).
    assert!(
        asked <= 1 + pages_of_a,
        "a was asked {asked} times for one list call"
    );
    assert!(asked > 1, "the check did read a's list: {asked}");
}

#[tokio::test]
async fn a_collision_across_pages_is_left_out_and_reported_on_each_page_it_meets() {
    // `a` pages two tools at a time and exposes its `slow` (third page) as `a-b-slow`, which is
    // also `a-b`'s `slow`, listed whole on the first page.
    let a = TestBackend::start(BackendSpec::modern("a").page_size(2)).await;
    let ab = TestBackend::start(BackendSpec::legacy("a-b")).await;
    let backends = |aliases: Value| {
        vhost_config(json!({"backends": {
            "a": {"url": a.url(), "timeout_ms": 5000, "aliases": aliases},
            "a-b": {"url": ab.url(), "timeout_ms": 5000}}}))
    };
    let gw = Gateway::start(&[("alice", backends(json!({"a-b-slow": "slow"})))]).await;
    let pages = all_tool_pages(&gw).await;
    assert_eq!(pages.len(), 4, "{pages:?}");
    let ambiguous = json!({"items": [{"name": "a-b-slow", "reason": "ambiguous"}]});
    // Page one holds `a-b`'s `slow`, page three `a`'s: both report it as one page would.
    for (n, (names, degraded)) in pages.iter().enumerate() {
        assert!(
            !names.iter().any(|name| name == "a-b-slow"),
            "page {n}: {names:?}"
        );
        if n == 0 || n == 2 {
            assert_eq!(degraded, &ambiguous, "page {n}: {names:?}");
        } else {
            assert!(degraded.is_null(), "page {n}: {degraded}");
        }
    }
    let listed: Vec<String> = pages.iter().flat_map(|(names, _)| names.clone()).collect();
    let mut expected: Vec<String> = prefixed("a", &BASE_TOOLS)
        .into_iter()
        .filter(|name| name != "a-slow")
        .collect();
    expected.extend(
        prefixed("a-b", &BASE_TOOLS)
            .into_iter()
            .filter(|name| name != "a-b-slow"),
    );
    let mut sorted = listed.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected, "everything else is listed once");
    let reply = gw
        .modern(
            "alice",
            "vh",
            "tools/call",
            json!({"name": "a-b-slow", "arguments": {"steps": 0}}),
        )
        .await;
    assert_eq!(
        rpc_error_200(&reply),
        (
            -32600,
            "ambiguous name: a-b-slow (several backends expose it)".to_owned()
        ),
        "the list says what a call finds"
    );

    // Control: without the alias, `a-b-slow` could still be `a`'s `b-slow`, which `a` does not
    // list: nothing is ambiguous on any page.
    let plain = Gateway::start(&[("alice", backends(json!({})))]).await;
    let pages = all_tool_pages(&plain).await;
    assert!(
        pages.iter().all(|(_, degraded)| degraded.is_null()),
        "{pages:?}"
    );
    let mut listed: Vec<String> = pages.into_iter().flat_map(|(names, _)| names).collect();
    listed.sort();
    let mut all = prefixed("a", &BASE_TOOLS);
    all.extend(prefixed("a-b", &BASE_TOOLS));
    all.sort();
    assert_eq!(listed, all);
}
