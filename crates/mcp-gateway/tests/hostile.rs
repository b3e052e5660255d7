//! Hostile input against the real `mcp-gateway` process over a real socket (issue #11, part 2):
//! every answer is a precise 4xx or JSON-RPC error — never a 5xx, a panic or a hang. Covers
//! malformed, truncated, deeply nested and non-UTF-8 JSON, huge numbers, duplicate keys,
//! JSON-RPC batches, content types, oversize bodies and headers, control characters and CRLF in
//! `Mcp-*` headers, path traversal in the virtual host id, JWT attacks (algorithm confusion,
//! `alg: none`, `kid` injection, embedded keys, foreign audiences), other principals' sessions,
//! tampered cursors and request states, and backends that answer garbage, gigantic or endless
//! bodies, or never send their response head (small hyper servers below).
//!
//! What `crates/mcp-gateway/tests/http_contract.rs`, `contract.rs` and the router suites already prove is not
//! repeated here; `SECURITY.md` maps each class of input to the test that covers it.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, jwk::Jwk};
use mcp_test_backends::{BackendSpec, TestBackend};
use serde_json::{Value, json};
use support::{
    AUDIENCE, AnyBody, FIXTURES, GatewayProcess, HS256_LINE, HandMadeServer, ISSUER, Reply,
    base_config, bearer, legacy_initialize, legacy_post, modern, modern_meta, modern_request,
    raw_exchange, rpc_error, rs256_token, send_body, unix_now, users_json, workdir,
};

const PATH: &str = "/servers/vh1/mcp";
/// The key set of the claims crate's tests: `rsa-1` there is this crate's `rsa_public.pem`.
const CLAIMS_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../mcp-claims/tests/fixtures");

/// A gateway with one rmcp backend `alpha` on `vh1` for `alice` and `bob`; bodies up to 64 KiB.
async fn gateway_with_alpha(alpha: &TestBackend) -> (GatewayProcess, mcp_test_support::TempDir) {
    let dir = workdir("gw-hostile");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[
            ("alice", "vh1", &[("alpha", alpha.url())]),
            ("bob", "vh1", &[("alpha", alpha.url())]),
        ]),
    );
    let config = base_config("\n[limits]\nmax_body_bytes = 65536\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    (gw, dir)
}

/// The standard 2026-07-28 headers for `method` with the `auth` header value.
fn modern_headers(auth: &str, method: &str) -> Vec<(String, String)> {
    let (headers, _) = modern_request(method, json!({}));
    let mut all = vec![("authorization".to_owned(), auth.to_owned())];
    all.extend(headers.into_iter().map(|(k, v)| (k.to_owned(), v)));
    all
}

async fn post_raw_body(addr: SocketAddr, headers: &[(String, String)], body: &str) -> Reply {
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    send_body(addr, "POST", PATH, &headers, body).await
}

/// Asserts a JSON-RPC error answer with HTTP `status`, `id`, `code` and `message`.
fn assert_rpc(reply: &Reply, status: u16, id: &Value, code: i64, message: &str) {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.json(),
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_truncated_nested_and_odd_json_get_precise_jsonrpc_errors() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    let auth = bearer("alice");
    let headers = modern_headers(&auth, "tools/list");
    let meta = modern_meta().to_string();
    let list = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{meta}}}}}"#
        )
    };

    for (body, message) in [
        (
            r#"{"jsonrpc":"2.0","id":1,"#.to_owned(),
            "Parse error: EOF while parsing a value at line 1 column 24",
        ),
        (
            String::new(),
            "Parse error: EOF while parsing a value at line 1 column 0",
        ),
        (
            list("1")[..60].to_owned(),
            "Parse error: EOF while parsing a string at line 1 column 60",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"a	b"}}"#.to_owned(),
            "Parse error: control character (\\u0000-\\u001F) found while parsing a string at line 1 column 62",
        ),
        // 10,000 levels of nesting, well under the body limit: no stack is exhausted.
        (
            format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000)),
            "",
        ),
    ] {
        let reply = post_raw_body(gw.addr, &headers, &body).await;
        if message.is_empty() {
            // The envelope skips unknown members without building them (no recursion), then
            // finds no `jsonrpc` member.
            assert_rpc(
                &reply,
                400,
                &Value::Null,
                -32600,
                "Invalid request: jsonrpc must be \"2.0\"",
            );
        } else {
            assert_rpc(&reply, 400, &Value::Null, -32700, message);
        }
    }

    // Non-UTF-8 bytes in a string: refused as a parse error (raw socket: the body is not text).
    let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":""#.to_vec();
    body.extend_from_slice(b"\xff\xfe\"}}");
    let mut request = format!(
        "POST {PATH} HTTP/1.1\r\nhost: gw\r\nauthorization: {auth}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: tools/list\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let raw = raw_exchange(gw.addr, &request).await;
    assert_eq!(raw.status, Some(400), "{}", raw.body());
    assert_eq!(
        serde_json::from_str::<Value>(&raw.body()).expect("JSON"),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700,
            "message": "Parse error: invalid unicode code point at line 1 column 62"}})
    );

    // Valid JSON that is not a JSON-RPC request object; duplicate keys are ambiguous (which
    // `method` would a backend act on?), so they are refused too.
    for body in [
        "42".to_owned(),
        "null".to_owned(),
        r#""tools/list""#.to_owned(),
        list("1").replace(
            r#""method":"tools/list""#,
            r#""method":"tools/list","method":"tools/call""#,
        ),
        list("1").replace(r#""id":1"#, r#""id":1,"id":2"#),
    ] {
        let reply = post_raw_body(gw.addr, &headers, &body).await;
        assert_rpc(
            &reply,
            400,
            &Value::Null,
            -32600,
            "Invalid request: not a JSON-RPC object",
        );
    }

    // Huge numbers as ids are echoed exactly (ids are kept raw, never rounded through f64).
    for id in [
        "123456789012345678901234567890",
        "1e999999",
        "-0.000000000000000000001",
    ] {
        let reply = post_raw_body(gw.addr, &headers, &list(id)).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let text = reply.text();
        assert!(
            text.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#)),
            "{text}"
        );
    }
    // Huge numbers inside arguments are payload: passed to the backend byte for byte (this rmcp
    // backend cannot parse them and refuses the request, which ends the call in -32603).
    alpha.clear_requests();
    let call_headers = modern_headers(&auth, "tools/call")
        .into_iter()
        .chain([("mcp-name".to_owned(), "alpha-add".to_owned())])
        .collect::<Vec<_>>();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"alpha-add","arguments":{{"a":1e400,"b":123456789012345678901234567890}},"_meta":{meta}}}}}"#
    );
    let reply = post_raw_body(gw.addr, &call_headers, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let (code, message) = rpc_error(&reply);
    assert_eq!(code, -32603, "{message}");
    assert!(message.starts_with("Backend alpha failed: "), "{message}");
    // (The recorder cannot classify a body serde_json refuses, so look at every request.)
    let forwarded: Vec<String> = alpha
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .filter(|body| body.contains(r#""name":"add""#))
        .collect();
    assert_eq!(forwarded.len(), 1, "{forwarded:?}");
    assert!(
        forwarded[0].contains(r#""a":1e400"#)
            && forwarded[0].contains(r#""b":123456789012345678901234567890"#),
        "{forwarded:?}"
    );

    // Deep nesting inside params is kept raw by the gateway: the call still works.
    let deep = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
    let body = list("7").replace(r#""params":{"#, &format!(r#""params":{{"deep":{deep},"#));
    let reply = post_raw_body(gw.addr, &headers, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["id"], 7);
}

/// The 2025-03-26 revision allowed JSON-RPC batches; 2025-06-18 removed them and 2026-07-28 has
/// none. Decision: the gateway refuses an array body in every era (a batch cannot carry the
/// per-request `Mcp-Method` / `Mcp-Name` routing headers, and no SDK sends one), with 400 and
/// `-32600`, even for a client that negotiated 2025-03-26 (book: docs/src/failure-modes.md, MCP-level contract).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_refused_in_every_era() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    let auth = bearer("alice");
    let init = |version: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "batcher", "version": "1"}}})
    };
    // 2025-03-26 itself is served (a single initialize negotiates it) ...
    let single = legacy_post(gw.addr, "alice", "vh1", None, &init("2025-03-26")).await;
    assert_eq!(single.status, 200, "{}", single.text());
    assert_eq!(single.json()["result"]["protocolVersion"], "2025-03-26");
    let session = single.header("mcp-session-id").expect("session").to_owned();

    let refused = "Invalid request: batch requests are not supported";
    // ... but a batch is not, whether it opens a session, runs in one, or is 2026-07-28.
    for (version, session, body) in [
        ("2025-03-26", None, json!([init("2025-03-26")])),
        (
            "2025-03-26",
            Some(session.as_str()),
            json!([{"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                   {"jsonrpc": "2.0", "id": 3, "method": "ping"}]),
        ),
        (
            "2026-07-28",
            None,
            json!([{"jsonrpc": "2.0", "id": 4, "method": "tools/list",
            "params": {"_meta": modern_meta()}}]),
        ),
        ("2026-07-28", None, json!([])),
    ] {
        let mut headers = vec![
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", version),
        ];
        if let Some(session) = session {
            headers.push(("mcp-session-id", session));
        }
        if version == "2026-07-28" {
            headers.push(("mcp-method", "tools/list"));
        }
        let reply = send_body(gw.addr, "POST", PATH, &headers, &body.to_string()).await;
        assert_rpc(&reply, 400, &Value::Null, -32600, refused);
    }
    assert!(
        alpha.requests_for("tools/list").is_empty(),
        "no batch member reached the backend"
    );
}

/// A POST must declare `application/json` (parameters and case do not matter): anything else,
/// or no `Content-Type` at all, is 415 before any MCP handling, on the MCP endpoint and on the
/// HTTP+SSE bridge's `/messages` (a `text/plain` POST is a browser "simple request" that needs no
/// CORS preflight). A declared JSON body that is not JSON is still a parse error; `Accept` stays
/// lenient, and GET / DELETE are not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_must_declare_json_and_bodies_must_parse() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    let auth = bearer("alice");
    let (_, body) = modern_request("tools/list", json!({}));
    let with_type = |content_type: Option<&str>| {
        let mut headers = modern_headers(&auth, "tools/list");
        headers.retain(|(k, _)| k != "content-type");
        if let Some(value) = content_type {
            headers.push(("content-type".into(), value.into()));
        }
        headers
    };
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/json-seq"),
        None,
    ] {
        let reply = post_raw_body(gw.addr, &with_type(content_type), &body).await;
        reply.assert_detail(
            415,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    // The same on the HTTP+SSE bridge's message endpoint, whatever the session.
    let messages = PATH.replace("/mcp", "/messages?sessionId=nope");
    for (content_type, refused) in [("text/plain", true), ("application/json", false)] {
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", content_type),
        ];
        let reply = send_body(gw.addr, "POST", &messages, &headers, &body).await;
        assert_eq!(
            reply.status == 415,
            refused,
            "{content_type}: {}",
            reply.text()
        );
    }
    assert!(
        alpha.requests_for("tools/list").is_empty(),
        "nothing refused reached the backend"
    );

    // Control: JSON with parameters or in capitals is served; a JSON-declared body that is not
    // JSON is a parse error.
    for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
        let reply = post_raw_body(gw.addr, &with_type(Some(content_type)), &body).await;
        assert_eq!(reply.status, 200, "{content_type}: {}", reply.text());
        assert_eq!(reply.json()["id"], 1);
        let reply = post_raw_body(gw.addr, &with_type(Some(content_type)), "a=1&b=2").await;
        assert_rpc(
            &reply,
            400,
            &Value::Null,
            -32700,
            "Parse error: expected value at line 1 column 1",
        );
    }
    // No Accept at all: answered as JSON.
    let mut headers = modern_headers(&auth, "tools/list");
    headers.retain(|(k, _)| k != "accept");
    let reply = post_raw_body(gw.addr, &headers, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    // GET and DELETE carry no body: never 415.
    for method in ["GET", "DELETE"] {
        let reply = send_body(
            gw.addr,
            method,
            PATH,
            &[("authorization", auth.as_str())],
            "",
        )
        .await;
        assert_ne!(reply.status, 415, "{method}: {}", reply.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_bodies_and_headers_are_refused_before_any_work() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    let auth = bearer("alice");
    let big = "x".repeat(100_000);

    // Declared length over the limit: 413 from the gateway's limit layer (tested in contract.rs);
    // a chunked body without a length is cut while streaming, by the router, with a JSON-RPC body.
    let head = format!(
        "POST {PATH} HTTP/1.1\r\nhost: gw\r\nauthorization: {auth}\r\ncontent-type: application/json\r\n\
         mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/list\r\nconnection: close\r\n\
         transfer-encoding: chunked\r\n\r\n"
    );
    let mut request = head.into_bytes();
    for chunk in big.as_bytes().chunks(10_000) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    let raw = raw_exchange(gw.addr, &request).await;
    assert_eq!(raw.status, Some(413), "{}", raw.body());
    assert_eq!(
        raw.body(),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request body too large"}}"#
    );

    // A request head over hyper's buffer (one 1 MiB header) or with more than 100 headers:
    // 431 with an empty body, and the connection is closed.
    let junk = "j".repeat(1 << 20);
    let many: String = (0..150).map(|i| format!("x-h{i}: v\r\n")).collect();
    for extra in [format!("x-junk: {junk}\r\n"), many] {
        let request = format!(
            "POST {PATH} HTTP/1.1\r\nhost: gw\r\nauthorization: {auth}\r\n{extra}content-length: 2\r\n\r\n{{}}"
        );
        let raw = raw_exchange(gw.addr, request.as_bytes()).await;
        assert_eq!(
            raw.status,
            Some(431),
            "{}",
            String::from_utf8_lossy(&raw.bytes[..raw.bytes.len().min(200)])
        );
        assert!(raw.has_header("content-length", "0"));
    }
    // Nothing of it reached the backend, and the gateway still serves.
    assert!(alpha.requests_for("tools/list").is_empty());
    let ok = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
}

/// Raw bytes in `Mcp-*` headers. Control characters, bare CR/LF and obsolete line folding are
/// refused by the HTTP parser (400, empty body, connection closed) before any layer runs;
/// non-UTF-8 bytes are refused by the router's header check (-32020); a base64-encoded value
/// that decodes to CRLF stays one opaque name that no header can be injected with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_crlf_and_non_utf8_in_mcp_headers() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    let auth = bearer("alice");
    let call = |name: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": {"text": "hi"}, "_meta": modern_meta()}})
        .to_string()
    };
    let request = |mcp_headers: &[u8], body: &str| {
        let mut r = format!(
            "POST {PATH} HTTP/1.1\r\nhost: gw\r\nauthorization: {auth}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
             mcp-method: tools/call\r\nconnection: close\r\n"
        )
        .into_bytes();
        r.extend_from_slice(mcp_headers);
        r.extend_from_slice(format!("content-length: {}\r\n\r\n{body}", body.len()).as_bytes());
        r
    };

    // Baseline: the same request with a clean name works.
    let ok = raw_exchange(
        gw.addr,
        &request(b"mcp-name: alpha-echo\r\n", &call("alpha-echo")),
    )
    .await;
    assert_eq!(ok.status, Some(200), "{}", ok.body());

    for (what, header) in [
        ("bare CR", &b"mcp-name: alpha\recho\r\n"[..]),
        ("bare LF", b"mcp-name: alpha\necho\r\n"),
        ("NUL", b"mcp-name: alpha\x00echo\r\n"),
        ("SOH", b"mcp-name: alpha\x01echo\r\n"),
        ("DEL", b"mcp-name: alpha\x7fecho\r\n"),
        ("obs-fold", b"mcp-name: alpha-echo\r\n  folded\r\n"),
        (
            "param NUL",
            b"mcp-name: alpha-echo\r\nmcp-param-text: a\x00b\r\n",
        ),
        (
            "param ESC",
            b"mcp-name: alpha-echo\r\nmcp-param-text: a\x1bb\r\n",
        ),
    ] {
        let raw = raw_exchange(gw.addr, &request(header, &call("alpha-echo"))).await;
        assert_eq!(raw.status, Some(400), "{what}: {}", raw.body());
        assert!(raw.has_header("content-length", "0"), "{what}");
    }

    // Non-UTF-8 (obs-text) bytes pass the HTTP parser; the router refuses them in Mcp-Name.
    for header in [
        &b"mcp-name: alpha-\xff\xfe\r\n"[..],
        b"mcp-name: alpha-\xe9\r\n",
    ] {
        let raw = raw_exchange(gw.addr, &request(header, &call("alpha-echo"))).await;
        assert_eq!(raw.status, Some(400), "{}", raw.body());
        assert_eq!(
            serde_json::from_str::<Value>(&raw.body()).expect("JSON"),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32020,
                "message": "mcp-name header: header value has invalid characters"}})
        );
    }
    // Base64 that is not valid, or decodes to bytes that are not UTF-8.
    let not_utf8 = format!(
        "mcp-name: =?base64?{}?=\r\n",
        STANDARD.encode(b"alpha-\xff")
    );
    for header in [&b"mcp-name: =?base64?!!!?=\r\n"[..], not_utf8.as_bytes()] {
        let raw = raw_exchange(gw.addr, &request(header, &call("alpha-echo"))).await;
        assert_eq!(raw.status, Some(400), "{}", raw.body());
        assert_eq!(
            serde_json::from_str::<Value>(&raw.body()).expect("JSON"),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32020,
                "message": "mcp-name header: header value has an invalid base64 encoding"}})
        );
    }

    // CRLF smuggled through the base64 form: the name (matching the body) reaches the backend as
    // one opaque tool name, which it does not know; no header was injected upstream.
    alpha.clear_requests();
    let injected = "alpha-echo\r\nx-injected: 1";
    let header = format!("mcp-name: =?base64?{}?=\r\n", STANDARD.encode(injected));
    let raw = raw_exchange(gw.addr, &request(header.as_bytes(), &call(injected))).await;
    assert_eq!(raw.status, Some(200), "{}", raw.body());
    assert_eq!(
        serde_json::from_str::<Value>(&raw.body()).expect("JSON"),
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602,
            "message": "unknown tool: echo\r\nx-injected: 1"}})
    );
    let calls = alpha.requests_for("tools/call");
    assert_eq!(calls.len(), 1);
    assert!(
        !calls[0].has_header("x-injected"),
        "a header was injected upstream"
    );
    assert_eq!(
        calls[0].called_name().as_deref(),
        Some("echo\r\nx-injected: 1")
    );
}

/// The virtual host id is a map key, never a file path: dot-segments and encoded slashes are
/// refused as ids (400) and nothing resolves outside `/servers/{id}/mcp`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_traversal_and_encoded_slashes_in_the_virtual_host_id() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    let auth = bearer("alice");
    let raw_post = |target: String| {
        format!(
            "POST {target} HTTP/1.1\r\nhost: gw\r\nauthorization: {auth}\r\nconnection: close\r\n\
             content-length: 2\r\n\r\n{{}}"
        )
    };
    let detail = |raw: &support::RawReply| {
        serde_json::from_str::<Value>(&raw.body()).expect("JSON detail")["detail"].clone()
    };
    for id in [
        "..",
        "%2e%2e",
        "%2E%2E",
        ".",
        "%2e",
        "vh1%2F..%2Fvh1",
        "vh1%2fmcp",
        "%2F",
        "vh1%5C..",
        "vh1%00",
    ] {
        let raw = raw_exchange(gw.addr, raw_post(format!("/servers/{id}/mcp")).as_bytes()).await;
        assert_eq!(raw.status, Some(400), "{id}: {}", raw.body());
        assert_eq!(detail(&raw), "Invalid virtual host id", "{id}");
    }
    for target in [
        "/servers/vh1/../vh1/mcp",
        "/servers/../../etc/passwd/mcp",
        "/servers/vh1/mcp/..",
        "/servers/vh1/mcp/",
        "//servers/vh1/mcp",
        "/servers/vh1/./mcp",
        "/servers/vh1/mcp%2F",
    ] {
        let raw = raw_exchange(gw.addr, raw_post(target.to_owned()).as_bytes()).await;
        assert_eq!(raw.status, Some(400), "{target}: {}", raw.body());
        assert_eq!(detail(&raw), "Not an MCP endpoint path", "{target}");
    }
    // An absolute-form target is routed by its path alone (the authority is not a virtual host).
    let raw = raw_exchange(
        gw.addr,
        raw_post("http://evil.example/servers/..%2F/mcp".to_owned()).as_bytes(),
    )
    .await;
    assert_eq!(raw.status, Some(400), "{}", raw.body());
    assert_eq!(detail(&raw), "Invalid virtual host id");
    assert!(alpha.requests().is_empty(), "nothing reached the backend");
}

fn claims_for(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": unix_now() + 600})
}

/// A token whose header is exactly `header` (JSON) and whose signature is `signature`.
fn handmade_token(header: &Value, claims: &Value, signature: &str) -> String {
    format!(
        "{}.{}.{signature}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

/// POSTs `{}` (as JSON) to the endpoint with `token` as the bearer.
async fn post_with(gw: &GatewayProcess, token: &str) -> Reply {
    send_body(
        gw.addr,
        "POST",
        PATH,
        &[
            ("authorization", &format!("Bearer {token}")),
            ("content-type", "application/json"),
        ],
        "{}",
    )
    .await
}

async fn assert_401(gw: &GatewayProcess, token: &str, detail: &str) {
    let reply = post_with(gw, token).await;
    reply.assert_detail(401, detail);
    assert!(
        reply
            .header("www-authenticate")
            .is_some_and(|c| c.starts_with("Bearer error=\"invalid_token\"")),
        "{:?}",
        reply.headers
    );
}

/// A gateway configured with an RSA public key only (HS256 off): the classic algorithm confusion
/// (HS256 "signed" with the public key as the HMAC secret) and `alg: none` in its spellings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_algorithm_confusion_and_alg_none_against_an_rsa_key() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("gw-hostile-rsa");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh1", &[("alpha", alpha.url())])]),
    );
    let config = base_config("").replace(
        HS256_LINE,
        &format!(
            "hs256_secret_env = \"\"\npublic_key_pem = \"{FIXTURES}/rsa_public.pem\"\nalgorithms = [\"RS256\"]\n"
        ),
    );
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;

    // Baseline: a genuine RS256 token is served.
    let genuine = rs256_token(&claims_for("alice"), None);
    let ok = post_with(&gw, &genuine).await;
    assert_eq!(ok.status, 400, "past authentication: {}", ok.text());

    let public_pem = std::fs::read(format!("{FIXTURES}/rsa_public.pem")).expect("public key");
    for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
        let confused = encode(
            &Header::new(alg),
            &claims_for("alice"),
            &EncodingKey::from_secret(&public_pem).expect("hmac key"),
        )
        .expect("encode");
        assert_401(&gw, &confused, "Unsupported token algorithm").await;
    }
    // `alg: none` and its case variants, with and without a signature part; and RS256 with the
    // signature stripped.
    let claims = claims_for("alice");
    for alg in ["none", "None", "NONE", "nOnE"] {
        for signature in ["", "c2ln"] {
            let token = handmade_token(&json!({"alg": alg, "typ": "JWT"}), &claims, signature);
            assert_401(&gw, &token, "Unsupported token algorithm").await;
        }
    }
    let stripped = genuine.rsplit_once('.').expect("three parts").0.to_owned() + ".";
    assert_401(&gw, &stripped, "Malformed token").await;
    // A genuine token for another audience (also as an array) is refused.
    for aud in [json!("another-api"), json!(["another-api", "yet-another"])] {
        let token = rs256_token(
            &json!({"iss": ISSUER, "aud": aud, "sub": "alice", "exp": unix_now() + 600}),
            None,
        );
        assert_401(&gw, &token, "Invalid token audience").await;
    }
    assert!(
        alpha.requests().is_empty(),
        "no refused token reached a backend"
    );
}

/// A tiny JWKS endpoint (hyper) that counts its fetches.
async fn jwks_server(body: String) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let fetches = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&fetches);
    let body = Bytes::from(body);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counter = Arc::clone(&counter);
            let body = body.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let body = body.clone();
                    async move {
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(body))
                                .expect("response"),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, fetches)
}

/// A gateway on a JWKS: `kid` values crafted as paths, SQL, URLs or huge strings select no key
/// (and do not make the gateway refetch the key set for each of them); keys or key URLs embedded
/// in the token header (`jwk`, `jku`, `x5u`) are ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_kid_injection_and_embedded_keys_against_a_jwks() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let jwk = std::fs::read_to_string(format!("{CLAIMS_FIXTURES}/rsa.jwk.json")).expect("rsa jwk");
    let jwk: Value = serde_json::from_str(&jwk).expect("jwk json");
    let (jwks, fetches) = jwks_server(json!({"keys": [jwk]}).to_string()).await;
    let dir = workdir("gw-hostile-jwks");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh1", &[("alpha", alpha.url())])]),
    );
    let config = base_config("").replace(
        HS256_LINE,
        &format!("hs256_secret_env = \"\"\njwks_url = \"http://{jwks}/jwks.json\"\n"),
    );
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let kid = jwk["kid"].as_str().expect("kid").to_owned();

    let genuine = rs256_token(&claims_for("alice"), Some(&kid));
    let ok = post_with(&gw, &genuine).await;
    assert_eq!(ok.status, 400, "past authentication: {}", ok.text());
    let after_first = fetches.load(Ordering::SeqCst);
    assert!(after_first >= 1, "the key set was fetched");

    let long_kid = "k".repeat(4096);
    for bad_kid in [
        "../../../../../../dev/null",
        "/etc/passwd",
        "rsa-1' OR '1'='1",
        "http://evil.example/jwks.json",
        "rsa-1\u{0}",
        long_kid.as_str(),
    ] {
        let token = rs256_token(&claims_for("alice"), Some(bad_kid));
        assert_401(&gw, &token, "No matching signing key").await;
    }
    // Unknown kids refetch the key set at most once per 10 s (the claims layer's minimum refetch
    // interval), not once per token.
    let refetched = fetches.load(Ordering::SeqCst) - after_first;
    assert!(refetched <= 2, "{refetched} refetches for 6 bogus kids");

    // The attacker signs with their own key and points at it from the header, with the right kid.
    let attacker_pem =
        std::fs::read(format!("{CLAIMS_FIXTURES}/rsa2_private.pem")).expect("attacker key");
    let attacker_jwk: Jwk = serde_json::from_str(
        &std::fs::read_to_string(format!("{CLAIMS_FIXTURES}/rsa2.jwk.json")).expect("jwk"),
    )
    .expect("jwk");
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.clone());
    header.jwk = Some(attacker_jwk);
    header.jku = Some("http://evil.example/jwks.json".into());
    header.x5u = Some("http://evil.example/cert.pem".into());
    let forged = encode(
        &header,
        &claims_for("alice"),
        &EncodingKey::from_rsa_pem(&attacker_pem).expect("rsa key"),
    )
    .expect("encode");
    assert_401(&gw, &forged, "Invalid token signature").await;
    // The same with an HS256 header whose "secret" is the JWK's modulus.
    let modulus = jwk["n"].as_str().expect("n").as_bytes().to_vec();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid);
    let confused = encode(
        &header,
        &claims_for("alice"),
        &EncodingKey::from_secret(&modulus).expect("hmac"),
    )
    .expect("encode");
    assert_401(&gw, &confused, "Unsupported token algorithm").await;
    assert!(
        alpha.requests().is_empty(),
        "no refused token reached a backend"
    );
}

/// A 2025 session id is bound to the principal that opened it: another principal with the same
/// configuration gets 404 (as for an unknown session) for POST, GET and DELETE, and the owner's
/// session is untouched afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_ids_of_other_principals_are_unknown_sessions() {
    let alpha = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    let session = legacy_initialize(gw.addr, "alice", "vh1").await;
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});

    let stolen = legacy_post(gw.addr, "bob", "vh1", Some(&session), &list).await;
    assert_rpc(&stolen, 404, &json!(5), -32600, "Session not found");
    let bob = bearer("bob");
    for method in ["GET", "DELETE"] {
        let reply = send_body(
            gw.addr,
            method,
            PATH,
            &[
                ("authorization", bob.as_str()),
                ("accept", "application/json, text/event-stream"),
                ("mcp-session-id", session.as_str()),
                ("mcp-protocol-version", "2025-11-25"),
            ],
            "",
        )
        .await;
        assert_eq!(reply.status, 404, "{method}: {}", reply.text());
    }
    // Forged ids: unknown, whatever their shape.
    let tampered = {
        let mut b = session.clone().into_bytes();
        b[0] = if b[0] == b'A' { b'B' } else { b'A' };
        String::from_utf8(b).expect("ascii")
    };
    for forged in [tampered.as_str(), "../../session", "0", &"s".repeat(4000)] {
        let reply = legacy_post(gw.addr, "alice", "vh1", Some(forged), &list).await;
        assert_rpc(&reply, 404, &json!(5), -32600, "Session not found");
    }
    // Answers to requests the gateway never sent (forged relayed-request ids) are refused.
    for forged in [
        json!({"jsonrpc": "2.0", "id": "forged", "result": {}}),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": "x"}}),
    ] {
        let reply = legacy_post(gw.addr, "alice", "vh1", Some(&session), &forged).await;
        assert_rpc(
            &reply,
            400,
            &Value::Null,
            -32600,
            "Response to an unknown or expired request",
        );
    }
    // Alice's session survived bob's DELETE.
    let mine = legacy_post(gw.addr, "alice", "vh1", Some(&session), &list).await;
    assert_eq!(mine.status, 200, "{}", mine.text());
    let tools = &mine.messages().pop().expect("answer")["result"]["tools"];
    assert!(tools.as_array().is_some_and(|t| !t.is_empty()), "{tools}");
}

/// Cursors and request states are sealed and bound to the caller: a modified, foreign, garbage or
/// mistyped one is `-32602` and reaches no backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_cursors_and_request_states_are_invalid_params() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").page_size(2)).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    let first = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    let cursor = first.json()["result"]["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let mut tampered = cursor.clone().into_bytes();
    tampered[3] = if tampered[3] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    alpha.clear_requests();

    let invalid_cursor = (-32602, "Invalid cursor".to_owned());
    for (sub, bad) in [
        ("alice", json!(tampered)),
        ("bob", json!(cursor)),
        ("alice", json!("A".repeat(30_000))),
        ("alice", json!("not base64 at all: \u{0}\u{1f}")),
        ("alice", json!(format!("{cursor}{cursor}"))),
    ] {
        let reply = modern(
            gw.addr,
            sub,
            "vh1",
            "tools/list",
            json!({"cursor": bad}),
            &[],
        )
        .await;
        assert_eq!(rpc_error(&reply), invalid_cursor, "{sub}: {bad}");
    }

    // MRTR: the `ask` tool answers input_required with a sealed requestState.
    let ask = |sub: &'static str, params: Value| {
        let addr = gw.addr;
        async move {
            let mut params = params;
            params["name"] = json!("alpha-ask");
            params["arguments"] = json!({});
            let mut meta = modern_meta();
            meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
            params["_meta"] = meta;
            modern(addr, sub, "vh1", "tools/call", params, &[]).await
        }
    };
    let asked = ask("alice", json!({})).await;
    let state = asked.json()["result"]["requestState"]
        .as_str()
        .expect("input_required with a requestState")
        .to_owned();
    let mut modified = state.clone().into_bytes();
    modified[2] = if modified[2] == b'A' { b'B' } else { b'A' };
    let modified = String::from_utf8(modified).expect("ascii");
    let calls_before = alpha.requests_for("tools/call").len();
    let responses = json!({"name": {"result": {"action": "accept", "content": {"name": "Eve"}}}});
    for (sub, bad) in [
        ("alice", modified),
        ("bob", state.clone()),
        ("alice", format!("{state}x")),
        ("alice", "x".repeat(20_000)),
        ("alice", String::new()),
    ] {
        let reply = ask(
            sub,
            json!({"inputResponses": responses, "requestState": bad}),
        )
        .await;
        assert_eq!(
            rpc_error(&reply),
            (
                -32602,
                "Invalid requestState (invalid or foreign handle)".to_owned()
            ),
            "{sub}"
        );
    }
    assert_eq!(
        alpha.requests_for("tools/call").len(),
        calls_before,
        "no refused state reached the backend"
    );
    assert!(
        alpha.requests_for("tools/list").is_empty(),
        "no refused cursor reached the backend"
    );
}

/// How a [`misbehaving`] backend answers `tools/call` (discovery and lists are answered properly).
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    /// `200 application/json` with a truncated JSON document.
    Malformed,
    /// `200 application/json` with JSON that is not a JSON-RPC response.
    NotJsonRpc,
    /// `200 application/json` with a well-formed 17 MiB response (over the 16 MiB message limit).
    Gigantic,
    /// `200 text/event-stream` whose one `data:` line never ends.
    EndlessEvent,
    /// Reads the request and never sends a response head.
    SilentHead,
    /// `200 text/event-stream` with one progress notification, then the end of the stream.
    NoResponse,
    /// `200 text/event-stream` with one progress notification, then silence on an open stream.
    Stall,
    /// Answers `tools/list` (not `tools/call`) with a JSON-RPC error.
    ListError,
    /// Answers `tools/list` (not `tools/call`) with a result that is not an object.
    ListNotObject,
}

/// A body that yields `chunk` forever.
struct Endless {
    first: Option<Bytes>,
    chunk: Bytes,
}

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let next = self.first.take().unwrap_or_else(|| self.chunk.clone());
        Poll::Ready(Some(Ok(Frame::data(next))))
    }
}

async fn misbehave(req: Request<Incoming>, how: Misbehaviour) -> Response<AnyBody> {
    let message = support::request_json(req).await;
    let id = message["id"].clone();
    let json_response = |body: String| {
        Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)).boxed())
            .expect("response")
    };
    let result = match message["method"].as_str() {
        Some("server/discover") => json!({"resultType": "complete",
            "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "misbehaving", "version": "0"}}}),
        Some("tools/list") => match how {
            Misbehaviour::ListError => {
                return json_response(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32000,"message":"list broke"}}}}"#
                ));
            }
            Misbehaviour::ListNotObject => {
                return json_response(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":[1]}}"#));
            }
            _ => json!({"resultType": "complete", "tools": [{"name": "t",
                "inputSchema": {"type": "object"}}]}),
        },
        Some("tools/call") => {
            return match how {
                Misbehaviour::Malformed => json_response(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":["#
                )),
                Misbehaviour::NotJsonRpc => json_response("[1,2,3]".into()),
                Misbehaviour::Gigantic => {
                    // Written directly: serialising a 17 MiB string through serde_json in a debug
                    // build took seconds of the test's time on a loaded machine.
                    let mut body = format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","content":[{{"type":"text","text":""#
                    );
                    body.extend(std::iter::repeat_n('g', 17 << 20));
                    body.push_str(r#""}]}}"#);
                    json_response(body)
                }
                Misbehaviour::EndlessEvent => Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(
                        Endless {
                            first: Some(Bytes::from_static(b"event: message\ndata: ")),
                            chunk: Bytes::from(vec![b'e'; 64 * 1024]),
                        }
                        .boxed(),
                    )
                    .expect("response"),
                Misbehaviour::SilentHead => std::future::pending().await,
                Misbehaviour::ListError | Misbehaviour::ListNotObject => json_response(
                    json!({"jsonrpc": "2.0", "id": id,
                        "result": {"resultType": "complete", "content": []}})
                    .to_string(),
                ),
                Misbehaviour::Stall => Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(
                        http_body_util::StreamBody::new(
                            futures_util::StreamExt::chain(
                                futures_util::stream::once(async {
                                    Ok::<_, Infallible>(Frame::data(Bytes::from_static(
                                        b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"x\",\"progress\":1}}\n\n",
                                    )))
                                }),
                                futures_util::stream::pending(),
                            ),
                        )
                        .boxed(),
                    )
                    .expect("response"),
                Misbehaviour::NoResponse => Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(
                        Full::new(Bytes::from_static(
                            b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"x\",\"progress\":1}}\n\n",
                        ))
                        .boxed(),
                    )
                    .expect("response"),
            };
        }
        _ => {
            return Response::builder()
                .status(StatusCode::NOT_FOUND)
                .body(Full::new(Bytes::new()).boxed())
                .expect("response");
        }
    };
    json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
}

/// A plain hyper MCP "backend" that misbehaves on `tools/call`.
async fn misbehaving(how: Misbehaviour) -> HandMadeServer {
    HandMadeServer::start(move |req| misbehave(req, how)).await
}

/// Backends that answer garbage, a gigantic body, an endless event, no response head at all, or a
/// stream that ends before the response: each routed call ends with `-32603 Backend <name> failed: …` (bounded by the 16 MiB message
/// limit or the backend's `timeout_ms`), the gateway stays up, and other backends keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_backends_end_in_jsonrpc_errors() {
    let good = TestBackend::start(BackendSpec::modern("good")).await;
    let cases = [
        (
            "malformed",
            Misbehaviour::Malformed,
            "Backend malformed failed: malformed backend response: invalid JSON-RPC message",
        ),
        (
            "notrpc",
            Misbehaviour::NotJsonRpc,
            "Backend notrpc failed: malformed backend response: invalid JSON-RPC message",
        ),
        (
            "gigantic",
            Misbehaviour::Gigantic,
            "Backend gigantic failed: backend connection lost",
        ),
        (
            "endless",
            Misbehaviour::EndlessEvent,
            "Backend endless failed: malformed backend response: SSE event too large",
        ),
        (
            "silent",
            Misbehaviour::SilentHead,
            "Backend silent failed: backend timed out after 1.5s",
        ),
        (
            "quitter",
            Misbehaviour::NoResponse,
            "Backend quitter failed: backend ended its answer without a response",
        ),
    ];
    let mut backends = Vec::new();
    let mut config = json!({"good": {"url": good.url()}});
    for (name, how, _) in &cases {
        let backend = misbehaving(*how).await;
        // Only the silent backend's timeout is the subject; the others get a margin a loaded
        // 2-core machine meets while 16 MiB cross the loopback (1.5 s did not, beside a build).
        let timeout_ms = if matches!(how, Misbehaviour::SilentHead) {
            1500
        } else {
            30_000
        };
        config[*name] = json!({"url": backend.url(), "timeout_ms": timeout_ms});
        backends.push(backend);
    }
    let dir = workdir("gw-hostile-backends");
    support::write(
        dir.path(),
        "users.json",
        &json!({"users": {"alice": {"virtual_hosts": {"vh1": {"backends": config}}}}}).to_string(),
    );
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;

    let list = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(list.status, 200, "{}", list.text());
    for (name, _, message) in cases {
        let reply = modern(
            gw.addr,
            "alice",
            "vh1",
            "tools/call",
            json!({"name": format!("{name}-t"), "arguments": {}}),
            &[],
        )
        .await;
        assert_eq!(reply.status, 200, "{name}: {}", reply.text());
        assert_eq!(rpc_error(&reply), (-32603, message.to_owned()), "{name}");
        // The good backend is unaffected after each.
        let ok = modern(
            gw.addr,
            "alice",
            "vh1",
            "tools/call",
            json!({"name": "good-echo", "arguments": {"text": name}}),
            &[],
        )
        .await;
        assert_eq!(
            ok.messages().pop().expect("answer")["result"]["content"][0]["text"],
            format!("good: {name}")
        );
    }
}

/// A failure in the middle of an answer counts for the backend's breaker (failure contract): a
/// backend whose stream goes silent after a notification fails each call by the gap between
/// events, and after `consecutive_failures` of them the breaker is open, so the next call fails
/// at once with `circuit open`. Control: the first calls fail by the timeout, not the breaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_in_the_middle_of_an_answer_counts_for_the_breaker() {
    let backend = misbehaving(Misbehaviour::Stall).await;
    let dir = workdir("gw-hostile-stall");
    let config = json!({"stall": {"url": backend.url(), "timeout_ms": 3000}});
    support::write(
        dir.path(),
        "users.json",
        &json!({"users": {"alice": {"virtual_hosts": {"vh1": {"backends": config}}}}}).to_string(),
    );
    let breaker = "[breaker]\nconsecutive_failures = 2\nopen_ms = 600000\n";
    let gw = GatewayProcess::start(dir.path(), &base_config(breaker), &[]).await;
    let call = || {
        modern(
            gw.addr,
            "alice",
            "vh1",
            "tools/call",
            json!({"name": "stall-t", "arguments": {}}),
            &[],
        )
    };
    for n in 0..2 {
        let reply = call().await;
        assert_eq!(
            rpc_error(&reply),
            (
                -32603,
                "Backend stall failed: backend timed out after 3s".to_owned()
            ),
            "call {n}: {}",
            reply.text()
        );
    }
    let open = call().await;
    let (code, message) = rpc_error(&open);
    assert_eq!(code, -32603, "{}", open.text());
    assert!(message.contains("circuit open"), "{}", open.text());
}

/// A backend whose `tools/list` answer is a JSON-RPC error, or a result that is not an object,
/// is left out of the merged list with its reason in the degraded marker; the other backend's
/// tools are listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_answers_that_are_errors_or_not_objects_leave_out_only_their_backend() {
    let good = TestBackend::start(BackendSpec::modern("good")).await;
    let broken = misbehaving(Misbehaviour::ListError).await;
    let scalar = misbehaving(Misbehaviour::ListNotObject).await;
    let dir = workdir("gw-hostile-lists");
    let backends = json!({
        "good": {"url": good.url()},
        "broken": {"url": broken.url()},
        "scalar": {"url": scalar.url()},
    });
    support::write(
        dir.path(),
        "users.json",
        &json!({"users": {"alice": {"virtual_hosts": {"vh1": {"backends": backends}}}}})
            .to_string(),
    );
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;

    let list = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let result = &list.json()["result"];
    let names = list.tool_names();
    assert!(!names.is_empty(), "{result}");
    assert!(names.iter().all(|n| n.starts_with("good-")), "{result}");
    assert_eq!(
        result["_meta"]["mcp-gateway/degraded"]["backends"],
        json!([
            {"name": "broken", "reason": "error -32000: list broke"},
            {"name": "scalar", "reason": "malformed backend response: result is not an object"},
        ]),
        "{result}"
    );
}

/// A cursor that is not a string is invalid params like any other bad cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_string_cursor_is_invalid_params() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha").page_size(2)).await;
    let (gw, _dir) = gateway_with_alpha(&alpha).await;
    for bad in [json!(42), json!({"page": 2}), json!(["x"]), json!(true)] {
        let reply = modern(
            gw.addr,
            "alice",
            "vh1",
            "tools/list",
            json!({"cursor": bad}),
            &[],
        )
        .await;
        assert_eq!(
            rpc_error(&reply),
            (-32602, "Invalid cursor".to_owned()),
            "{bad}"
        );
    }
}

/// A JSON-RPC batch of `n` copies of `message`, each with its own id from `first`.
fn sse_batch(first: i64, n: i64, message: &Value) -> String {
    let batch: Vec<Value> = (first..first + n)
        .map(|id| {
            let mut m = message.clone();
            m["id"] = json!(id);
            m
        })
        .collect();
    Value::Array(batch).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_batches_are_capped_and_count_against_messages_in_flight() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-hostile-sse-batch");
    let users = json!({"users": {"alice": {"virtual_hosts": {"vh": {"sse_downstream": true,
        "backends": {"beta": {"url": beta.url(), "timeout_ms": 60000}}}}}}});
    support::write(dir.path(), "users.json", &users.to_string());
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;
    let auth = bearer("alice");
    let mut stream = mcp_test_support::EventStream::open(
        gw.addr,
        "GET",
        "/servers/vh/sse",
        &[("authorization", &auth), ("accept", "text/event-stream")],
        "",
    )
    .await;
    let wait = std::time::Duration::from_secs(20);
    let endpoint = stream.next_event(wait).await.expect("endpoint event").data;
    let addr = gw.addr;
    let post = |body: String| {
        let (auth, endpoint) = (auth.clone(), endpoint.clone());
        async move {
            let headers = [
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
            ];
            send_body(addr, "POST", &endpoint, &headers, &body).await
        }
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "gateway-tests", "version": "0"}}});
    assert_eq!(post(init.to_string()).await.status, 202);
    stream.next_message_where(wait, |m| m["id"] == 0).await;
    // One over the default limit of 32: refused whole, with the JSON-RPC error.
    let ping = json!({"jsonrpc": "2.0", "method": "ping"});
    let refused = post(sse_batch(1, 33, &ping)).await;
    assert_rpc(
        &refused,
        400,
        &Value::Null,
        -32600,
        "Batch too large: 33 messages, at most 32 in one POST",
    );
    // The control: 32 is served, every answer on the stream.
    assert_eq!(post(sse_batch(100, 32, &ping)).await.status, 202);
    for id in 100..132 {
        stream.next_message_where(wait, |m| m["id"] == id).await;
    }
    // Two batches of 32 calls that stay in flight take all 64 places: a batch counts each of its
    // messages, so batching cannot get past the bound.
    let slow = json!({"jsonrpc": "2.0", "method": "tools/call",
        "params": {"name": "beta-slow", "arguments": {"steps": 2, "delay_ms": 30000}}});
    assert_eq!(post(sse_batch(200, 32, &slow)).await.status, 202);
    assert_eq!(post(sse_batch(300, 32, &slow)).await.status, 202);
    let over = post(json!({"jsonrpc": "2.0", "id": 400, "method": "ping"}).to_string()).await;
    over.assert_detail(429, mcp_router::sse_bridge::DETAIL_TOO_MANY_POSTS);
    assert_eq!(over.header("retry-after"), Some("1"));
}
