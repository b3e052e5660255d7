//! Paginated lists and cache hints.

use mcp_test_backends::{BackendSpec, CacheScope, Era, TestBackend};
use rmcp::model::PaginatedRequestParams;
use serde_json::{Value, json};

use crate::{clients, raw_http};

fn expected_tools() -> Vec<String> {
    let mut names: Vec<String> = ["echo", "add", "get-sum", "fail", "slow", "ask", "headers"]
        .map(str::to_owned)
        .into();
    names.extend((0..5).map(|index| format!("tool_{index:02}")));
    names
}

#[tokio::test]
async fn page_size_two_yields_every_tool_exactly_once_with_rmcp_clients() {
    for era in [Era::Modern, Era::Legacy, Era::Both] {
        let backend = TestBackend::start(
            BackendSpec::new(format!("p-{era}"), era)
                .page_size(2)
                .extra_tools(5),
        )
        .await;
        let (client, _) = if era == Era::Legacy {
            clients::legacy(&backend.url())
                .await
                .expect("legacy client")
        } else {
            clients::modern(&backend.url()).await
        };
        let mut names = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            let page = client
                .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await
                .expect("tools/list page");
            assert!(page.tools.len() <= 2, "{era}: page too long");
            pages += 1;
            names.extend(page.tools.iter().map(|tool| tool.name.to_string()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(pages, 6, "{era}: 12 tools in pages of 2");
        assert_eq!(names, expected_tools(), "{era}");
        assert_eq!(backend.requests_for("tools/list").len(), 6, "{era}");

        // rmcp's own "list everything" helper follows the cursors too.
        let all = client.list_all_tools().await.expect("list_all_tools");
        assert_eq!(all.len(), 12);
        client.cancel().await.expect("cancel");
    }
}

#[tokio::test]
async fn raw_cursors_are_opaque_and_bad_ones_are_invalid_params() {
    let backend = TestBackend::start(BackendSpec::modern("cur").page_size(2).extra_tools(1)).await;
    let first = raw_http::modern_request(&backend.url(), 1, "tools/list", json!({})).await;
    let cursor = first.reply()["result"]["nextCursor"]
        .as_str()
        .expect("a next cursor")
        .to_owned();
    assert!(
        !cursor.contains("tool"),
        "cursor should not expose item names"
    );

    let second =
        raw_http::modern_request(&backend.url(), 2, "tools/list", json!({ "cursor": cursor }))
            .await;
    let tools = &second.reply()["result"]["tools"];
    assert_eq!(tools[0]["name"], "get-sum");

    let bad =
        raw_http::modern_request(&backend.url(), 3, "tools/list", json!({ "cursor": "nope" }))
            .await;
    assert_eq!(bad.reply()["error"]["code"], -32602);
}

#[tokio::test]
async fn every_list_is_paginated() {
    // One item each, so a page of 1 ends each list at once; with extra tools the tools list goes on.
    let backend = TestBackend::start(BackendSpec::modern("lists").page_size(1)).await;
    for (method, key) in [
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ] {
        let response = raw_http::modern_request(&backend.url(), 1, method, json!({})).await;
        let result = &response.reply()["result"];
        assert_eq!(result[key].as_array().map(Vec::len), Some(1), "{method}");
        assert!(result.get("nextCursor").is_none(), "{method}");
    }
    let tools = raw_http::modern_request(&backend.url(), 2, "tools/list", json!({})).await;
    assert_eq!(
        tools.reply()["result"]["tools"].as_array().map(Vec::len),
        Some(1)
    );
    assert!(tools.reply()["result"]["nextCursor"].is_string());
}

#[tokio::test]
async fn modern_results_carry_configured_cache_hints() {
    let backend = TestBackend::start(
        BackendSpec::both("hints")
            .ttl_ms(12_345)
            .cache_scope(CacheScope::Public),
    )
    .await;
    for method in [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ] {
        let response = raw_http::modern_request(&backend.url(), 1, method, json!({})).await;
        let result = &response.reply()["result"];
        assert_eq!(result["ttlMs"], 12_345, "{method}");
        assert_eq!(result["cacheScope"], "public", "{method}");
    }
    let read = raw_http::modern_request(
        &backend.url(),
        2,
        "resources/read",
        json!({ "uri": "test://hints/static" }),
    )
    .await;
    assert_eq!(read.reply()["result"]["ttlMs"], 12_345);
    assert_eq!(
        read.reply()["result"]["contents"][0]["text"],
        "static from hints"
    );

    // Without configured hints rmcp still stamps the required defaults on modern results.
    let plain = TestBackend::start(BackendSpec::modern("plain")).await;
    let response = raw_http::modern_request(&plain.url(), 1, "tools/list", json!({})).await;
    let result: &Value = &response.reply()["result"];
    assert_eq!(result["ttlMs"], 0);
    assert_eq!(result["cacheScope"], "private");
}
