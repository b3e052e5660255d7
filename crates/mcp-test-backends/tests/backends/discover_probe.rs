//! The era answers on the wire, with raw HTTP: what a gateway's era probe sees.

use http::{Method, StatusCode};
use mcp_test_backends::{BackendSpec, CacheScope, Era, LEGACY_REJECTION_BODY, TestBackend};
use serde_json::{Value, json};

use crate::raw_http::{self, LEGACY, MODERN};

const MODERN_ERROR_CODES: [i64; 3] = [-32020, -32021, -32022];

#[tokio::test]
async fn discover_gets_a_discover_result_from_modern_and_both() {
    for (era, versions) in [
        (Era::Modern, json!([MODERN])),
        (
            Era::Both,
            json!([
                "2024-11-05",
                "2025-03-26",
                "2025-06-18",
                "2025-11-25",
                MODERN
            ]),
        ),
    ] {
        let backend = TestBackend::start(
            BackendSpec::new(format!("d-{era}"), era)
                .instructions("be nice")
                .ttl_ms(30_000)
                .cache_scope(CacheScope::Public),
        )
        .await;
        let response =
            raw_http::modern_request(&backend.url(), 1, "server/discover", json!({})).await;
        assert_eq!(
            response.status,
            StatusCode::OK,
            "{era}: {}",
            response.text()
        );
        assert!(response.headers.get("mcp-session-id").is_none());
        let result = &response.reply()["result"];
        assert_eq!(result["resultType"], "complete");
        assert_eq!(result["supportedVersions"], versions, "{era}");
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            format!("d-{era}")
        );
        assert_eq!(result["instructions"], "be nice");
        assert_eq!(result["ttlMs"], 30_000);
        assert_eq!(result["cacheScope"], "public");
        for capability in ["tools", "resources", "prompts", "completions", "logging"] {
            assert!(
                result["capabilities"].get(capability).is_some(),
                "{era}: {capability}"
            );
        }
    }
}

#[tokio::test]
async fn legacy_answers_modern_probes_with_a_non_modern_400() {
    let backend = TestBackend::start(BackendSpec::legacy("old")).await;
    let probes = [
        // A discover with the full modern shape.
        raw_http::modern_request(&backend.url(), 1, "server/discover", json!({})).await,
        // A discover with no headers at all.
        raw_http::post(
            &backend.url(),
            &[],
            &json!({ "jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {} }),
        )
        .await,
        // An ordinary modern request.
        raw_http::modern_request(&backend.url(), 3, "tools/list", json!({})).await,
    ];
    for response in probes {
        assert_eq!(response.status, StatusCode::BAD_REQUEST);
        assert_eq!(response.text(), LEGACY_REJECTION_BODY);
        let body: Value = serde_json::from_slice(&response.body).expect("JSON body");
        let code = body["error"]["code"].as_i64().expect("error code");
        assert!(
            !MODERN_ERROR_CODES.contains(&code),
            "{code} would say 'modern server'"
        );
        assert!(body.get("result").is_none());
    }
    assert_eq!(
        backend.requests().len(),
        3,
        "rejected probes are still recorded"
    );
}

#[tokio::test]
async fn modern_refuses_initialize_and_sessionless_legacy_requests() {
    let backend = TestBackend::start(BackendSpec::modern("new")).await;
    let (response, session) = raw_http::legacy_initialize(&backend.url()).await;
    assert!(session.is_none(), "no session from a modern-only backend");
    let error = &response.reply()["error"];
    assert_eq!(error["code"], -32022, "{}", response.text());
    assert_eq!(error["data"]["supported"], json!([MODERN]));
    assert_eq!(error["data"]["requested"], LEGACY);

    // A legacy-shaped request without any version: 400, never served as 2025-03-26.
    let response = raw_http::post(
        &backend.url(),
        &[],
        &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
    )
    .await;
    assert_eq!(
        response.status,
        StatusCode::BAD_REQUEST,
        "{}",
        response.text()
    );

    for method in [Method::GET, Method::DELETE] {
        let response = raw_http::send(method.clone(), &backend.url(), &[], None).await;
        assert_eq!(response.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
    }
}

#[tokio::test]
async fn legacy_and_both_open_sessions_on_initialize() {
    for era in [Era::Legacy, Era::Both] {
        let backend = TestBackend::start(BackendSpec::new(format!("s-{era}"), era)).await;
        let (response, session) = raw_http::legacy_initialize(&backend.url()).await;
        assert_eq!(response.status, StatusCode::OK);
        assert!(session.is_some(), "{era}: session id expected");
        let result = &response.reply()["result"];
        assert_eq!(result["protocolVersion"], LEGACY);
        assert_eq!(result["serverInfo"]["name"], format!("s-{era}"));

        // Without the session, a legacy request is a 400 (rmcp's own legacy answer).
        let response = raw_http::post(
            &backend.url(),
            &[("mcp-protocol-version", LEGACY)],
            &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
        )
        .await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{era}");
    }
}

#[tokio::test]
async fn legacy_backend_never_negotiates_modern_in_initialize() {
    let backend = TestBackend::start(BackendSpec::legacy("old2")).await;
    let body = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": MODERN,
            "capabilities": {},
            "clientInfo": { "name": "raw", "version": "0" }
        }
    });
    let response = raw_http::post(&backend.url(), &[], &body).await;
    assert_eq!(response.reply()["result"]["protocolVersion"], LEGACY);
}

#[tokio::test]
async fn modern_answers_are_sse_unless_json_response_is_set() {
    let sse = TestBackend::start(BackendSpec::modern("sse")).await;
    let json_backend = TestBackend::start(BackendSpec::modern("json").json_response(true)).await;
    for (backend, content_type) in [
        (&sse, "text/event-stream"),
        (&json_backend, "application/json"),
    ] {
        let response = raw_http::modern_request(&backend.url(), 1, "tools/list", json!({})).await;
        let actual = response
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        assert!(
            actual.starts_with(content_type),
            "{}: {actual}",
            backend.name()
        );
        assert_eq!(response.reply()["result"]["tools"][0]["name"], "echo");
    }
}

#[tokio::test]
async fn legacy_results_carry_no_modern_fields() {
    let backend = TestBackend::start(BackendSpec::both("plainold").ttl_ms(5_000)).await;
    let (_, session) = raw_http::legacy_initialize(&backend.url()).await;
    let session = session.expect("session");
    let response = raw_http::post(
        &backend.url(),
        &[
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", LEGACY),
        ],
        &json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }),
    )
    .await;
    let result = &response.reply()["result"];
    assert_eq!(result["tools"][0]["name"], "echo");
    for field in ["ttlMs", "cacheScope", "resultType"] {
        assert!(
            result.get(field).is_none(),
            "{field} in a legacy result: {result}"
        );
    }
}
