//! Traces, MCP metrics and logs of the real `mcp-gateway` process: an in-process OTLP/HTTP
//! receiver decodes the exported protobuf with the published `opentelemetry-proto` types and the
//! span trees of a fan-out `tools/list` and a routed `tools/call` are checked (names, kinds,
//! attributes, parents, the client's `traceparent` as the root, the trace context the backend
//! received); `RUST_LOG` over `telemetry.log_level`, the access line of a 2025 `tools/call`, and
//! the `mcp.*.operation.duration` histograms on `/metrics`.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcp_test_backends::{BackendSpec, TestBackend};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};
use support::{
    AnyBody, GatewayProcess, HandMadeServer, admin_get, base_config, legacy_delete,
    legacy_initialize, legacy_post, modern, poll_until, users_json, workdir,
};

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const META_SPAN: &str = "b7ad6b7169203331";

/// The spans an OTLP/HTTP receiver got, with the `service.name` of their resource.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    fn spans(&self) -> Vec<(String, Span)> {
        self.0.lock().expect("spans").clone()
    }

    fn named(&self, name: &str) -> Vec<Span> {
        self.spans()
            .into_iter()
            .filter(|(_, s)| s.name == name)
            .map(|(_, s)| s)
            .collect()
    }
}

/// A collector's OTLP/HTTP traces endpoint: `POST /v1/traces` with protobuf bodies.
async fn receiver() -> (HandMadeServer, Received) {
    let received = Received::default();
    let sink = received.clone();
    let server = HandMadeServer::start(move |req: http::Request<hyper::body::Incoming>| {
        let sink = sink.clone();
        async move {
            let ok = req.uri().path() == "/v1/traces"
                && req.headers()["content-type"] == "application/x-protobuf";
            let body = req.into_body().collect().await.expect("body").to_bytes();
            let status = match ExportTraceServiceRequest::decode(body) {
                Ok(export) if ok => {
                    let mut spans = sink.0.lock().expect("spans");
                    for resource in export.resource_spans {
                        let service = resource
                            .resource
                            .iter()
                            .flat_map(|r| &r.attributes)
                            .find(|kv| kv.key == "service.name")
                            .and_then(|kv| string_value(kv.value.as_ref()?.value.as_ref()?))
                            .unwrap_or_default();
                        for scope in resource.scope_spans {
                            spans.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
                        }
                    }
                    200
                }
                _ => 400,
            };
            http::Response::builder()
                .status(status)
                .header("content-type", "application/x-protobuf")
                .body(AnyBody::new(Full::new(Bytes::new())))
                .expect("response")
        }
    })
    .await;
    (server, received)
}

fn string_value(value: &AnyValue) -> Option<String> {
    match value {
        AnyValue::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// A span attribute as JSON (strings, ints, arrays of strings), `Null` when absent.
fn attr(span: &Span, key: &str) -> Value {
    let Some(value) = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.clone())
    else {
        return Value::Null;
    };
    match value {
        AnyValue::StringValue(s) => json!(s),
        AnyValue::IntValue(i) => json!(i),
        AnyValue::BoolValue(b) => json!(b),
        AnyValue::ArrayValue(a) => a
            .values
            .iter()
            .filter_map(|v| string_value(v.value.as_ref()?))
            .collect(),
        other => json!(format!("{other:?}")),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn kind(span: &Span) -> SpanKind {
    SpanKind::try_from(span.kind).expect("span kind")
}

async fn gateway_with_otlp(
    dir: &std::path::Path,
    collector: std::net::SocketAddr,
) -> GatewayProcess {
    let config = base_config(&format!(
        "otlp_endpoint = \"http://{collector}\"\nservice_name = \"gw-under-test\"\n"
    ));
    GatewayProcess::start(
        dir,
        &config,
        // Export every 50 ms (the default is 5 s); the standard variables must not point elsewhere.
        &[("OTEL_BSP_SCHEDULE_DELAY", "50"), ("RUST_LOG", "")],
    )
    .await
}

/// A fan-out `tools/list` whose client sent `traceparent` as an HTTP header only: one server
/// span under the client's span, one client span per backend under it (the unreachable one with
/// its `error.type`), the degraded backend named on the server span, and each backend handed the
/// trace context of its own client span in its headers and `_meta`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_tools_list_is_one_server_span_with_a_client_span_per_backend() {
    let (collector, received) = receiver().await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-otel-list");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[(
            "alice",
            "vh1",
            &[
                ("alpha", alpha.url()),
                ("beta", beta.url()),
                ("gone", "http://127.0.0.1:9/mcp".to_owned()),
            ],
        )]),
    );
    let gw = gateway_with_otlp(dir.path(), collector.addr).await;

    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let reply = modern(
        gw.addr,
        "alice",
        "vh1",
        "tools/list",
        json!({}),
        &[("traceparent", &traceparent), ("tracestate", "client=1")],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());

    let complete = || {
        let server = received
            .named("tools/list")
            .into_iter()
            .filter(|s| kind(s) == SpanKind::Server)
            .count();
        let client = received
            .named("tools/list")
            .into_iter()
            .filter(|s| kind(s) == SpanKind::Client)
            .count();
        server >= 1 && client >= 3
    };
    assert!(
        poll_until(Duration::from_secs(60), || async { complete() }).await,
        "spans: {:#?}\nlogs:\n{}",
        received.spans(),
        gw.logs()
    );
    let spans = received.named("tools/list");
    let servers: Vec<&Span> = spans
        .iter()
        .filter(|s| kind(s) == SpanKind::Server)
        .collect();
    assert_eq!(servers.len(), 1, "{spans:#?}");
    let server = servers[0];
    assert_eq!(
        hex(&server.trace_id),
        CLIENT_TRACE,
        "the client's trace goes on"
    );
    assert_eq!(
        hex(&server.parent_span_id),
        CLIENT_SPAN,
        "the client's span is the parent"
    );
    assert_eq!(attr(server, "mcp.method.name"), "tools/list");
    assert_eq!(attr(server, "mcp.protocol.version"), "2026-07-28");
    assert_eq!(attr(server, "jsonrpc.request.id"), "1");
    assert_eq!(attr(server, "mcp_gateway.vhost"), "vh1");
    assert_eq!(
        attr(server, "mcp_gateway.degraded_backends"),
        json!(["gone"])
    );
    assert_eq!(attr(server, "gen_ai.tool.name"), Value::Null);

    let mut clients: Vec<&Span> = spans
        .iter()
        .filter(|s| kind(s) == SpanKind::Client)
        .collect();
    clients.sort_by_key(|s| attr(s, "mcp_gateway.backend").to_string());
    let backends: Vec<Value> = clients
        .iter()
        .map(|s| attr(s, "mcp_gateway.backend"))
        .collect();
    assert_eq!(backends, [json!("alpha"), json!("beta"), json!("gone")]);
    for client in &clients {
        assert_eq!(hex(&client.trace_id), CLIENT_TRACE);
        assert_eq!(client.parent_span_id, server.span_id, "{client:#?}");
        assert_eq!(attr(client, "mcp.method.name"), "tools/list");
    }
    assert_eq!(attr(clients[0], "mcp.protocol.version"), "2026-07-28");
    assert_eq!(attr(clients[1], "mcp.protocol.version"), "2025-11-25");
    assert_eq!(attr(clients[2], "error.type"), "connect");
    assert_eq!(attr(clients[0], "error.type"), Value::Null);
    assert!(
        received
            .spans()
            .iter()
            .all(|(service, _)| service == "gw-under-test")
    );

    // Each backend's request carries its own client span as the parent, in headers and `_meta`.
    for (backend, client) in [(&alpha, clients[0]), (&beta, clients[1])] {
        let seen = backend.requests_for("tools/list");
        let request = seen.last().expect("the backend was asked");
        let expected = format!("00-{CLIENT_TRACE}-{}-01", hex(&client.span_id));
        assert_eq!(request.header("traceparent"), Some(expected.as_str()));
        let body: Value = serde_json::from_slice(&request.body).expect("json body");
        assert_eq!(
            body["params"]["_meta"]["traceparent"],
            expected.as_str(),
            "{body}"
        );
    }
}

/// A routed `tools/call` whose `_meta` carries a trace context (and whose headers carry another):
/// `_meta` wins; the server span is named by the public tool name, the client span by the
/// backend's, with the convention's attributes and nothing of the arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_tools_call_continues_the_meta_trace_context_into_the_backend() {
    let (collector, received) = receiver().await;
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("gw-otel-call");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[("alice", "vh1", &[("alpha", alpha.url())])]),
    );
    let gw = gateway_with_otlp(dir.path(), collector.addr).await;

    let mut meta = support::modern_meta();
    meta["traceparent"] = json!(format!("00-{META_TRACE}-{META_SPAN}-01"));
    let header = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let reply = modern(
        gw.addr,
        "alice",
        "vh1",
        "tools/call",
        json!({"name": "alpha-echo", "arguments": {"text": "secret-argument"}, "_meta": meta}),
        &[("traceparent", &header)],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());

    assert!(
        poll_until(Duration::from_secs(60), || async {
            !received.named("tools/call alpha-echo").is_empty()
                && !received.named("tools/call echo").is_empty()
        })
        .await,
        "spans: {:#?}\nlogs:\n{}",
        received.spans(),
        gw.logs()
    );
    let server = &received.named("tools/call alpha-echo")[0];
    assert_eq!(kind(server), SpanKind::Server);
    assert_eq!(
        hex(&server.trace_id),
        META_TRACE,
        "_meta wins over the header"
    );
    assert_eq!(hex(&server.parent_span_id), META_SPAN);
    assert_eq!(attr(server, "mcp.method.name"), "tools/call");
    assert_eq!(attr(server, "gen_ai.tool.name"), "alpha-echo");
    assert_eq!(attr(server, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(server, "jsonrpc.request.id"), "1");
    assert_eq!(attr(server, "mcp.protocol.version"), "2026-07-28");
    assert_eq!(attr(server, "mcp_gateway.vhost"), "vh1");

    let client = &received.named("tools/call echo")[0];
    assert_eq!(kind(client), SpanKind::Client);
    assert_eq!(hex(&client.trace_id), META_TRACE);
    assert_eq!(client.parent_span_id, server.span_id);
    assert_eq!(attr(client, "gen_ai.tool.name"), "echo");
    assert_eq!(attr(client, "mcp_gateway.backend"), "alpha");
    assert!(
        attr(client, "jsonrpc.request.id").is_string(),
        "{client:#?}"
    );

    // Nothing of the arguments or the token in any attribute.
    for (_, span) in received.spans() {
        let text = format!("{:?}", span.attributes);
        assert!(!text.contains("secret-argument"), "{text}");
        assert!(!text.to_lowercase().contains("bearer"), "{text}");
    }
    let seen = alpha.requests_for("tools/call");
    let request = seen.last().expect("the backend was called");
    let expected = format!("00-{META_TRACE}-{}-01", hex(&client.span_id));
    assert_eq!(request.header("traceparent"), Some(expected.as_str()));
    let body: Value = serde_json::from_slice(&request.body).expect("json body");
    assert_eq!(body["params"]["_meta"]["traceparent"], expected.as_str());
}

/// `RUST_LOG` wins over `telemetry.log_level` (with `warn`, the `listening` and access lines,
/// both info, would be missing); a 2025 `tools/call` (no `Mcp-Method` header) is logged with its
/// method and tool; the MCP operation histograms are on `/metrics` next to the gateway's own, and
/// the upstream session's duration once the downstream session that used it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_log_wins_and_the_access_line_names_a_2025_tool_call() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-otel-logs");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[(
            "alice",
            "vh1",
            &[("alpha", alpha.url()), ("beta", beta.url())],
        )]),
    );
    let config = base_config("log_level = \"warn\"\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[("RUST_LOG", "info")]).await;

    let session = legacy_initialize(gw.addr, "alice", "vh1").await;
    let call = legacy_post(
        gw.addr,
        "alice",
        "vh1",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "alpha-echo", "arguments": {"text": "hi"}}}),
    )
    .await;
    assert_eq!(call.status, 200, "{}", call.text());

    let logged = || {
        gw.logs().lines().any(|line| {
            line.contains("\"message\":\"request\"")
                && line.contains("\"mcp.method\":\"tools/call\"")
                && line.contains("\"mcp.name\":\"alpha-echo\"")
                && line.contains("\"vhost\":\"vh1\"")
        })
    };
    assert!(
        poll_until(Duration::from_secs(30), || async { logged() }).await,
        "no access line names the 2025 tools/call:\n{}",
        gw.logs()
    );
    assert!(
        gw.logs()
            .lines()
            .any(|line| line.contains("\"message\":\"request\"")
                && line.contains("\"mcp.method\":\"initialize\"")),
        "{}",
        gw.logs()
    );

    let session_series =
        r#"mcp_client_session_duration_seconds_count{mcp_protocol_version="2025-11-25"}"#;
    let downstream_series =
        r#"mcp_server_session_duration_seconds_count{mcp_protocol_version="2025-11-25"}"#;
    let scrape = || async { admin_get(&gw, "/metrics").await.text().to_owned() };
    let before = scrape().await;
    assert!(
        !before.contains(session_series) && !before.contains(downstream_series),
        "no session has ended yet:\n{before}"
    );
    let on_beta = legacy_post(
        gw.addr,
        "alice",
        "vh1",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "beta-echo", "arguments": {"text": "hi"}}}),
    )
    .await;
    assert_eq!(on_beta.status, 200, "{}", on_beta.text());
    let ended = legacy_delete(gw.addr, "alice", "vh1", &session).await;
    assert!(ended.status.is_success(), "{}", ended.text());
    assert!(
        poll_until(Duration::from_secs(30), || async {
            scrape().await.contains(session_series)
        })
        .await,
        "the upstream session's duration was not recorded:\n{}",
        scrape().await
    );
    // The downstream session's duration is recorded by the DELETE itself.
    let after = scrape().await;
    assert!(
        after.contains(
            &downstream_series
                .replace("_count", "_bucket")
                .replace("\"}", "\",le=")
        ),
        "the downstream session's duration was not recorded:\n{after}"
    );
    assert!(after.contains(&format!("{downstream_series} 1")), "{after}");

    let metrics = admin_get(&gw, "/metrics").await;
    let text = metrics.text();
    for needle in [
        r#"mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",mcp_protocol_version="2025-11-25",le="#,
        r#"mcp_server_operation_duration_seconds_count{mcp_method_name="initialize",mcp_protocol_version="2025-11-25"}"#,
        r#"mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call"}"#,
        // The gateway's own series stay, named by the router's reading of 2025 messages too
        // (they carry no `Mcp-Method` header).
        r#"mcp_gateway_requests_total{method="tools/call",vhost="vh1",status="200",outcome="ok"}"#,
        r#"mcp_gateway_requests_total{method="initialize",vhost="vh1",status="200",outcome="ok"}"#,
    ] {
        assert!(
            text.contains(needle),
            "missing {needle} in /metrics:\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vhost_label_is_capped_whatever_user_configurations_name() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-vhost-labels");
    let backends = [("beta", beta.url())];
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[
            ("alice", "vh1", &backends),
            ("alice", "vh2", &backends),
            ("alice", "vh3", &backends),
        ]),
    );
    // Two virtual hosts get their own label; a third tenant-chosen name is counted as `other`.
    let config = base_config("max_vhost_labels = 2\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    for vhost in ["vh1", "vh2", "vh3", "vh3"] {
        let reply = modern(gw.addr, "alice", vhost, "tools/list", json!({}), &[]).await;
        assert_eq!(reply.status, 200, "{vhost}: {}", reply.text());
    }
    let metrics = admin_get(&gw, "/metrics").await;
    let text = metrics.text();
    let series = |vhost: &str| {
        format!(
            r#"mcp_gateway_requests_total{{method="tools/list",vhost="{vhost}",status="200",outcome="ok"}}"#
        )
    };
    for (vhost, count) in [("vh1", 1), ("vh2", 1), ("other", 2)] {
        assert!(
            text.contains(&format!("{} {count}", series(vhost))),
            "{vhost}: {text}"
        );
    }
    assert!(!text.contains(r#"vhost="vh3""#), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_states_are_counted_per_backend_name_not_one_gauge_per_tenant() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    // A port nobody listens on: alice's `beta` fails to connect, bob's is served.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let dead = format!("http://{}/mcp", closed.local_addr().expect("address"));
    drop(closed);
    let dir = workdir("gw-breaker-counts");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[
            ("alice", "vh1", &[("beta", dead)]),
            ("bob", "vh1", &[("beta", beta.url())]),
        ]),
    );
    let config = base_config("\n[breaker]\nconsecutive_failures = 1\nopen_ms = 600000\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;

    let served = modern(gw.addr, "bob", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(served.status, 200, "{}", served.text());
    let series =
        |state: &str| format!(r#"mcp_gateway_breakers{{backend="beta",state="{state}"}} 1"#);
    let scrape = || async { admin_get(&gw, "/metrics").await.text().to_owned() };
    let both = poll_until(Duration::from_secs(30), || async {
        // Each of alice's calls fails until her own breaker opens.
        let _ = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
        let text = scrape().await;
        text.contains(&series("open")) && text.contains(&series("closed"))
    })
    .await;
    let text = scrape().await;
    assert!(
        both,
        "one open (alice's) and one closed (bob's) breaker of beta:\n{text}"
    );
    // No gauge per breaker name, which either tenant's breaker would overwrite.
    assert!(!text.contains("mcp_breaker_state{"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_label_is_capped_and_every_family_is_in_the_metric_table() {
    let alpha = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let gamma = TestBackend::start(BackendSpec::legacy("gamma")).await;
    let dir = workdir("gw-breaker-labels");
    support::write(
        dir.path(),
        "users.json",
        &users_json(&[(
            "alice",
            "vh1",
            &[
                ("alpha", alpha.url()),
                ("beta", beta.url()),
                ("gamma", gamma.url()),
            ],
        )]),
    );
    // One backend name gets its own `breaker` label; the other two, chosen by a config author,
    // are counted under `other`.
    let config = base_config("max_backend_labels = 1\n");
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let listed = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    let metrics = admin_get(&gw, "/metrics").await;
    let text = metrics.text();
    let labels: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|line| line.starts_with("mcp_breaker_calls_total{"))
        .filter_map(|line| line.split("breaker=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert_eq!(labels.len(), 2, "one own label and `other`: {text}");
    assert!(labels.contains("other"), "{text}");
    assert!(
        labels
            .iter()
            .all(|label| ["alpha", "beta", "gamma", "other"].contains(label)),
        "{text}"
    );
    // `other` sums the two backends past the cap: each served one tools/list.
    assert!(
        text.contains(r#"mcp_breaker_calls_total{breaker="other",outcome="success"} 2"#),
        "{text}"
    );

    // Every family on /metrics is one the book's generated table names, with its type.
    let table = mcp_gateway::metric_table();
    let mut families = 0;
    for line in text.lines() {
        let Some(declared) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = declared.split_once(' ').expect("# TYPE name kind");
        families += 1;
        assert!(
            table.contains(&format!("| `{name}` | {kind} |")),
            "/metrics has {name} ({kind}), which `mcp-gateway metric-table` does not name:\n{table}"
        );
    }
    assert!(families >= 10, "{text}");
}
