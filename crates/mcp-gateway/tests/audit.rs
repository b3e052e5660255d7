//! The audit trail of the real `mcp-gateway` process (`[telemetry.audit]`), read from the JSON
//! lines file it appends to: one record per MCP operation of either era with the right backend,
//! outcome level (`ok`, `tool_error`, `jsonrpc_error` with its code, `transport_error`), issuer
//! and subject (two principals never crossed), trace id; a fan-out's backends; a backend's
//! request relayed to a 2025 client, recorded when the client answers; arguments and results only
//! where the operator and the virtual host both allow them, cut to the cap; nothing at all by
//! default; a full queue drops and counts records without delaying a call. And every JSON log
//! line of a request that carries a `traceparent` names its trace.
//!
//! Records are written by a thread of the gateway's own: the file is polled with generous
//! limits, never read once after a fixed sleep.
//!
//! Why this file is long: the first test drives every operation kind of both eras through one
//! gateway and checks each record field by field, which is most of the file; splitting it would
//! start a gateway per operation kind.

mod support;

use std::path::Path;
use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::EventStream;
use serde_json::{Value, json};
use support::{
    GatewayProcess, ISSUER, base_config, bearer, legacy_initialize, legacy_initialize_with,
    legacy_post, metric, modern, poll_until, workdir,
};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const LOG_TRACE: &str = "5bf92f3577b34da6a3ce929d0e0e4737";
const AUDIT_FILE: &str = "audit.jsonl";

fn traceparent(trace: &str) -> String {
    format!("00-{trace}-00f067aa0ba902b7-01")
}

/// A URL nothing listens on (a port bound, then let go).
fn down_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    format!("http://127.0.0.1:{port}/mcp")
}

/// One virtual host of a user: `(subject, vhost, audit_payloads, (backend name, url) pairs)`.
type Entry<'a> = (&'a str, &'a str, bool, &'a [(&'a str, &'a str)]);

/// The users document of `entries`.
fn users(entries: &[Entry<'_>]) -> String {
    let mut users = serde_json::Map::new();
    for (sub, vhost, payloads, backends) in entries {
        let backends: serde_json::Map<String, Value> = backends
            .iter()
            .map(|(name, url)| ((*name).to_owned(), json!({"url": url, "timeout_ms": 10000})))
            .collect();
        let user = users
            .entry((*sub).to_owned())
            .or_insert_with(|| json!({"virtual_hosts": {}}));
        let mut vh = json!({"backends": backends});
        if *payloads {
            vh["audit_payloads"] = json!(true);
        }
        user["virtual_hosts"][*vhost] = vh;
    }
    json!({ "users": users }).to_string()
}

/// A gateway with `users` and `[telemetry.audit]` set to `audit` (appended as is).
async fn gateway(dir: &Path, users: &str, audit: &str) -> GatewayProcess {
    support::write(dir, "users.json", users);
    let config = base_config(&format!("\n[telemetry.audit]\n{audit}"));
    GatewayProcess::start(dir, &config, &[]).await
}

/// The records written so far (a line still being written is skipped).
fn records(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join(AUDIT_FILE)).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Waits (up to a minute) until `wanted` records are written, and returns them all.
async fn records_at_least(dir: &Path, wanted: usize) -> Vec<Value> {
    let written = poll_until(Duration::from_secs(60), || async {
        records(dir).len() >= wanted
    })
    .await;
    let all = records(dir);
    assert!(
        written,
        "{} records written, {wanted} expected:\n{}",
        all.len(),
        lines(&all)
    );
    all
}

fn lines(records: &[Value]) -> String {
    records
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The one record matching every `(field, value)` of `wanted`.
fn the<'a>(records: &'a [Value], wanted: &[(&str, Value)]) -> &'a Value {
    let found: Vec<&Value> = records
        .iter()
        .filter(|r| wanted.iter().all(|(k, v)| &r[*k] == v))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one record with {wanted:?} expected, found {}:\n{}",
        found.len(),
        lines(records)
    );
    found[0]
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

fn legacy_request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Every operation kind of both eras, two principals: the records name who, where, what, which
/// backend and how it ended; no payload anywhere (the operator's default forbids them, even for
/// a virtual host that asks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_both_eras_name_the_operation_its_backend_and_its_outcome() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let down = down_url();
    let dir = workdir("gw-audit-records");
    let backends: &[(&str, &str)] = &[
        ("alpha", &alpha.url()),
        ("beta", &beta.url()),
        ("down", &down),
    ];
    let alpha_only: &[(&str, &str)] = &[("alpha", &alpha.url())];
    let users = users(&[
        ("alice", "vh1", false, backends),
        ("alice", "pay", true, alpha_only),
        ("bob", "vh1", false, backends),
    ]);
    let gw = gateway(
        dir.path(),
        &users,
        &format!("target = \"file\"\npath = \"{AUDIT_FILE}\"\n"),
    )
    .await;
    let addr = gw.addr;
    let tp = traceparent(TRACE);

    // 2026-07-28, alice.
    let echo = modern(
        addr,
        "alice",
        "vh1",
        "tools/call",
        call("alpha-echo", json!({"text": "hello-args"})),
        &[("traceparent", &tp)],
    )
    .await;
    assert_eq!(echo.result_text(), "alpha: hello-args");
    let fail = modern(
        addr,
        "alice",
        "vh1",
        "tools/call",
        call("alpha-fail", json!({})),
        &[],
    )
    .await;
    assert_eq!(fail.status, 200, "{}", fail.text());
    let unknown = modern(
        addr,
        "alice",
        "vh1",
        "tools/call",
        call("nowhere-echo", json!({})),
        &[],
    )
    .await;
    assert_eq!(
        unknown.json()["error"]["code"],
        -32602,
        "{}",
        unknown.text()
    );
    let broken = modern(
        addr,
        "alice",
        "vh1",
        "tools/call",
        call("down-echo", json!({})),
        &[],
    )
    .await;
    assert_eq!(broken.json()["error"]["code"], -32603, "{}", broken.text());
    let prompt = modern(
        addr,
        "alice",
        "vh1",
        "prompts/get",
        json!({"name": "alpha-greet", "arguments": {"who": "ann"}}),
        &[],
    )
    .await;
    assert_eq!(prompt.status, 200, "{}", prompt.text());
    let listed = modern(addr, "alice", "vh1", "resources/list", json!({}), &[]).await;
    let uri = listed.messages().last().expect("an answer")["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .find(|u| u.contains("alpha") && u.ends_with("/static"))
        .expect("alpha's static resource")
        .to_owned();
    let read = modern(
        addr,
        "alice",
        "vh1",
        "resources/read",
        json!({"uri": uri}),
        &[],
    )
    .await;
    assert_eq!(read.status, 200, "{}", read.text());
    let tools = modern(addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert!(tools.tool_names().contains(&"beta-echo".to_owned()));

    // 2025, alice, in a session.
    let session = legacy_initialize(addr, "alice", "vh1").await;
    let post = |id: u64, method: &str, params: Value| {
        let session = session.clone();
        let body = legacy_request(id, method, params);
        async move { legacy_post(addr, "alice", "vh1", Some(&session), &body).await }
    };
    let mut traced = call("beta-echo", json!({"text": "old"}));
    traced["_meta"] = json!({"traceparent": traceparent(META_TRACE)});
    assert_eq!(
        post(2, "tools/call", traced).await.result_text(),
        "beta: old"
    );
    assert_eq!(
        post(3, "tools/call", call("beta-fail", json!({})))
            .await
            .status,
        200
    );
    let broken = post(4, "tools/call", call("down-echo", json!({}))).await;
    assert_eq!(
        broken.messages()[0]["error"]["code"],
        -32603,
        "{}",
        broken.text()
    );
    let unknown = post(5, "tools/call", call("nowhere-echo", json!({}))).await;
    assert!(
        unknown.messages()[0]["error"].is_object(),
        "{}",
        unknown.text()
    );
    let prompt = post(
        6,
        "prompts/get",
        json!({"name": "beta-greet", "arguments": {"who": "bo"}}),
    );
    assert_eq!(prompt.await.status, 200);
    assert_eq!(post(7, "tools/list", json!({})).await.status, 200);

    // bob, and alice on a virtual host that asks for payloads the operator does not allow.
    let bobs = modern(
        addr,
        "bob",
        "vh1",
        "tools/call",
        call("alpha-echo", json!({"text": "b"})),
        &[],
    )
    .await;
    assert_eq!(bobs.result_text(), "alpha: b");
    let pay = modern(
        addr,
        "alice",
        "pay",
        "tools/call",
        call("alpha-echo", json!({"text": "p"})),
        &[],
    )
    .await;
    assert_eq!(pay.result_text(), "alpha: p");

    // 8 modern + initialize and 6 in the session + bob's + pay's.
    let all = records_at_least(dir.path(), 17).await;
    let modern_era = json!("2026-07-28");
    let alice = |method: &str, name: Option<&str>, era: &Value| {
        let mut wanted = vec![
            ("subject", json!("alice")),
            ("vhost", json!("vh1")),
            ("method", json!(method)),
            ("era", era.clone()),
        ];
        if let Some(name) = name {
            wanted.push(("name", json!(name)));
        }
        the(&all, &wanted).clone()
    };

    let r = alice("tools/call", Some("alpha-echo"), &modern_era);
    assert_eq!(r["issuer"], ISSUER);
    assert_eq!(r["kind"], "request");
    assert_eq!(r["backend"], "alpha");
    assert_eq!((r["outcome"].as_str(), r.get("code")), (Some("ok"), None));
    assert_eq!(r["status"], 200);
    assert_eq!(r["trace_id"], TRACE);
    assert_eq!(r["protocol_version"], "2026-07-28");
    assert!(r["bytes_in"].as_u64().expect("bytes_in") > 50, "{r}");
    assert!(r["bytes_out"].as_u64().expect("bytes_out") > 20, "{r}");
    assert!(r["latency_ms"].as_f64().expect("latency") >= 0.0, "{r}");
    let time = r["time"].as_str().expect("time");
    assert!(
        time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
        "{time}"
    );

    let r = alice("tools/call", Some("alpha-fail"), &modern_era);
    assert_eq!(
        (r["outcome"].as_str(), r["backend"].as_str()),
        (Some("tool_error"), Some("alpha"))
    );
    let r = alice("tools/call", Some("nowhere-echo"), &modern_era);
    assert_eq!(
        (r["outcome"].as_str(), r["code"].as_i64()),
        (Some("jsonrpc_error"), Some(-32602))
    );
    assert!(r.get("backend").is_none(), "no backend owns the name: {r}");
    let r = alice("tools/call", Some("down-echo"), &modern_era);
    assert_eq!(
        (
            r["outcome"].as_str(),
            r["code"].as_i64(),
            r["backend"].as_str()
        ),
        (Some("transport_error"), Some(-32603), Some("down"))
    );
    let r = alice("prompts/get", Some("alpha-greet"), &modern_era);
    assert_eq!(
        (r["outcome"].as_str(), r["backend"].as_str()),
        (Some("ok"), Some("alpha"))
    );
    let r = alice("resources/read", Some(&uri), &modern_era);
    assert_eq!(
        (r["outcome"].as_str(), r["backend"].as_str()),
        (Some("ok"), Some("alpha"))
    );
    let r = alice("tools/list", None, &modern_era);
    assert_eq!(r["outcome"], "ok");
    assert_eq!(r["backends"], json!(["alpha", "beta"]));
    assert_eq!(r["degraded_backends"], json!(["down"]));
    assert!(r.get("backend").is_none(), "{r}");

    let legacy_era = json!("2025");
    let r = alice("initialize", None, &legacy_era);
    assert_eq!(r["outcome"], "ok");
    let r = alice("tools/call", Some("beta-echo"), &legacy_era);
    assert_eq!(
        (r["outcome"].as_str(), r["backend"].as_str()),
        (Some("ok"), Some("beta"))
    );
    assert_eq!(r["trace_id"], META_TRACE, "the _meta trace context: {r}");
    assert_eq!(r["protocol_version"], "2025-11-25");
    let r = alice("tools/call", Some("beta-fail"), &legacy_era);
    assert_eq!(r["outcome"], "tool_error");
    let r = alice("tools/call", Some("down-echo"), &legacy_era);
    assert_eq!(
        (r["outcome"].as_str(), r["code"].as_i64()),
        (Some("transport_error"), Some(-32603))
    );
    let r = alice("tools/call", Some("nowhere-echo"), &legacy_era);
    assert_eq!(r["outcome"], "jsonrpc_error");
    assert!(r["code"].is_i64(), "{r}");
    let r = alice("prompts/get", Some("beta-greet"), &legacy_era);
    assert_eq!(
        (r["outcome"].as_str(), r["backend"].as_str()),
        (Some("ok"), Some("beta"))
    );
    let r = alice("tools/list", None, &legacy_era);
    assert_eq!(r["degraded_backends"], json!(["down"]));

    // Each principal's records carry its own subject; none has another's.
    let r = the(
        &all,
        &[("subject", json!("bob")), ("method", json!("tools/call"))],
    );
    assert_eq!(
        (r["name"].as_str(), r["vhost"].as_str()),
        (Some("alpha-echo"), Some("vh1"))
    );
    assert_eq!(
        all.iter().filter(|r| r["subject"] == "bob").count(),
        1,
        "{}",
        lines(&all)
    );
    // No payload anywhere: the operator's rule (`never`) wins over the virtual host's wish.
    let r = the(&all, &[("vhost", json!("pay"))]);
    assert_eq!(r["outcome"], "ok");
    for record in &all {
        assert!(
            record.get("arguments").is_none() && record.get("result").is_none(),
            "{record}"
        );
        assert!(!record.to_string().contains("hello-args"), "{record}");
    }
    // Notifications (`notifications/initialized`) get no record.
    assert!(
        all.iter()
            .all(|r| r["method"] != "notifications/initialized" && r["method"] != "other")
    );
}

/// `payloads = "per_vhost"`: the virtual host that asks gets arguments and results (cut to
/// `max_payload_bytes`, marked), the one that does not gets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_are_recorded_only_where_the_operator_and_the_virtual_host_allow() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-audit-payloads");
    let backends: &[(&str, &str)] = &[("alpha", &alpha.url()), ("beta", &beta.url())];
    let users = users(&[
        ("alice", "plain", false, backends),
        ("alice", "pay", true, backends),
    ]);
    let gw = gateway(
        dir.path(),
        &users,
        &format!(
            "target = \"file\"\npath = \"{AUDIT_FILE}\"\npayloads = \"per_vhost\"\nmax_payload_bytes = 200\n"
        ),
    )
    .await;
    let addr = gw.addr;
    let echo = |vhost: &'static str, text: String| async move {
        modern(
            addr,
            "alice",
            vhost,
            "tools/call",
            call("alpha-echo", json!({"text": text})),
            &[],
        )
        .await
    };
    assert_eq!(echo("plain", "quiet".into()).await.status, 200);
    assert_eq!(echo("pay", "loud".into()).await.status, 200);
    let long = "x".repeat(500);
    assert_eq!(echo("pay", long.clone()).await.status, 200);
    let session = legacy_initialize(addr, "alice", "pay").await;
    let old = legacy_post(
        addr,
        "alice",
        "pay",
        Some(&session),
        &legacy_request(2, "tools/call", call("beta-echo", json!({"text": "old"}))),
    )
    .await;
    assert_eq!(old.result_text(), "beta: old");

    let all = records_at_least(dir.path(), 5).await;
    let call_on = |vhost: &str, name: &str, era: &str| {
        all.iter()
            .filter(|r| r["vhost"] == vhost && r["name"] == name && r["era"] == era)
            .cloned()
            .collect::<Vec<_>>()
    };
    let plain = &call_on("plain", "alpha-echo", "2026-07-28")[0];
    assert!(
        plain.get("arguments").is_none() && plain.get("result").is_none(),
        "{plain}"
    );
    let pay = call_on("pay", "alpha-echo", "2026-07-28");
    assert_eq!(pay.len(), 2, "{}", lines(&all));
    let loud = pay
        .iter()
        .find(|r| r["arguments"] == json!({"text": "loud"}))
        .expect("loud");
    assert_eq!(
        loud["result"]["content"][0]["text"], "alpha: loud",
        "{loud}"
    );
    assert!(loud.get("arguments_truncated").is_none(), "{loud}");
    let cut = pay
        .iter()
        .find(|r| r["arguments"].is_string())
        .expect("the long call");
    assert_eq!(cut["arguments_truncated"], true, "{cut}");
    assert_eq!(cut["result_truncated"], true, "{cut}");
    let prefix = cut["arguments"].as_str().expect("a string prefix");
    assert!(
        prefix.len() <= 200 && prefix.starts_with("{\"text\":\"xxx"),
        "{prefix}"
    );
    assert!(
        cut["result"].as_str().expect("a string prefix").len() <= 200,
        "{cut}"
    );
    let old = &call_on("pay", "beta-echo", "2025")[0];
    assert_eq!(old["arguments"], json!({"text": "old"}), "{old}");
    assert_eq!(old["result"]["content"][0]["text"], "beta: old", "{old}");
}

/// Without `telemetry.audit.target` there is no audit trail: no file (even with a path set), no
/// counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_by_default_nothing_is_written() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("gw-audit-off");
    let users = users(&[("alice", "vh1", true, &[("alpha", &alpha.url())])]);
    let gw = gateway(dir.path(), &users, &format!("path = \"{AUDIT_FILE}\"\n")).await;
    let echo = modern(
        gw.addr,
        "alice",
        "vh1",
        "tools/call",
        call("alpha-echo", json!({"text": "x"})),
        &[],
    )
    .await;
    assert_eq!(echo.result_text(), "alpha: x");
    // The access line of the call is logged once it is answered: by then a trail would have it.
    assert!(
        poll_until(Duration::from_secs(30), || async {
            gw.logs().contains("\"mcp.name\":\"alpha-echo\"")
        })
        .await,
        "{}",
        gw.logs()
    );
    assert!(
        !dir.path().join(AUDIT_FILE).exists(),
        "no audit file by default"
    );
    assert_eq!(
        metric(
            &gw,
            r#"mcp_gateway_audit_dropped_total{reason="queue_full"}"#
        )
        .await,
        None
    );
}

/// `target = "stdout"`: the records are the process's standard output, one JSON object per line
/// (the logs stay on stderr).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_gets_one_json_record_per_line() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("gw-audit-stdout");
    support::write(
        dir.path(),
        "users.json",
        &users(&[("alice", "vh1", false, &[("alpha", &alpha.url())])]),
    );
    let config = support::write(
        dir.path(),
        "gateway.toml",
        &base_config("\n[telemetry.audit]\ntarget = \"stdout\"\n"),
    );
    let mut child = tokio::process::Command::new(support::bin())
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .env("MCP_GATEWAY_JWT_SECRET", support::SECRET)
        .env_remove("MCP_GATEWAY_CONFIG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn mcp-gateway");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = stderr.next_line().await.expect("stderr") {
            if let Ok(event) = serde_json::from_str::<Value>(&line)
                && event["message"] == "listening"
            {
                return event["addr"].as_str().and_then(|a| a.parse().ok());
            }
        }
        None
    })
    .await
    .expect("listening within 60 s")
    .expect("a listening line with addr");
    // Keep reading stderr so that the process never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    let echo = modern(
        addr,
        "alice",
        "vh1",
        "tools/call",
        call("alpha-echo", json!({"text": "o"})),
        &[],
    )
    .await;
    assert_eq!(echo.result_text(), "alpha: o");
    let line = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
        .await
        .expect("a record within 60 s")
        .expect("stdout")
        .expect("a line");
    let record: Value = serde_json::from_str(&line).expect("one JSON object per line");
    assert_eq!(
        (
            record["method"].as_str(),
            record["name"].as_str(),
            record["outcome"].as_str()
        ),
        (Some("tools/call"), Some("alpha-echo"), Some("ok")),
        "{line}"
    );
    assert_eq!(record["subject"], "alice");
}

/// A backend's `elicitation/create` relayed to a 2025 client: one record per request, kind
/// `server_request`, naming the asking backend, written when the client's answer arrives; the
/// call itself has its own record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayed_server_requests_are_recorded_when_the_client_answers() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-audit-relayed");
    let users = users(&[("alice", "vh1", false, &[("beta", &beta.url())])]);
    let gw = gateway(
        dir.path(),
        &users,
        &format!("target = \"file\"\npath = \"{AUDIT_FILE}\"\n"),
    )
    .await;
    let session = legacy_initialize_with(gw.addr, "alice", "vh1", json!({"elicitation": {}})).await;
    let auth = bearer("alice");
    let headers = mcp_test_support::legacy_headers(Some(&auth), Some(&session));
    let body = legacy_request(2, "tools/call", call("beta-ask", json!({}))).to_string();
    let mut stream = EventStream::open(gw.addr, "POST", "/servers/vh1/mcp", &headers, &body).await;
    assert_eq!(stream.status, 200);
    for (key, value) in [("name", "Ada"), ("color", "green")] {
        let asked = stream
            .next_message_where(Duration::from_secs(30), |m| {
                m["method"] == "elicitation/create"
            })
            .await;
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
            "result": {"action": "accept", "content": {key: value}}});
        let answered = legacy_post(gw.addr, "alice", "vh1", Some(&session), &answer).await;
        assert_eq!(answered.status, 202, "{}", answered.text());
    }
    let last = stream
        .next_message_where(Duration::from_secs(30), |m| m["id"] == 2)
        .await;
    assert_eq!(
        last["result"]["content"][0]["text"], "beta: Ada likes green",
        "{last}"
    );

    // initialize, the two answers, the call.
    let all = records_at_least(dir.path(), 4).await;
    let asked: Vec<&Value> = all
        .iter()
        .filter(|r| r["kind"] == "server_request")
        .collect();
    assert_eq!(asked.len(), 2, "{}", lines(&all));
    for r in asked {
        assert_eq!(r["method"], "elicitation/create", "{r}");
        assert_eq!(r["backend"], "beta", "{r}");
        assert_eq!(
            (r["outcome"].as_str(), r["status"].as_u64()),
            (Some("ok"), Some(202)),
            "{r}"
        );
        assert_eq!(
            (r["subject"].as_str(), r["era"].as_str()),
            (Some("alice"), Some("2025"))
        );
    }
    let r = the(
        &all,
        &[("method", json!("tools/call")), ("name", json!("beta-ask"))],
    );
    assert_eq!(
        (r["outcome"].as_str(), r["backend"].as_str()),
        (Some("ok"), Some("beta"))
    );
    assert!(
        r["bytes_out"].as_u64().expect("bytes_out") > 100,
        "the whole stream: {r}"
    );

    // A 2026-07-28 client answers the same backend's requests in `input_required` rounds: each
    // round is a `tools/call` record of its own, written when its answer is (the parked upstream
    // call does not hold it back), and no server request is recorded.
    let ask = |answer: Option<(&str, &str)>, state: Option<&Value>| {
        let answers = answer.map(|(key, value)| mcp_test_support::accept_elicitation(key, value));
        let mut params = mcp_test_support::ask_params("beta-ask", answers, state);
        params["_meta"] = mcp_test_support::modern_meta_with(json!({"elicitation": {}}));
        params
    };
    let modern_asks = |n: usize| {
        let dir = dir.path().to_owned();
        async move {
            poll_until(Duration::from_secs(60), || async {
                records(&dir)
                    .iter()
                    .filter(|r| r["era"] == "2026-07-28" && r["name"] == "beta-ask")
                    .count()
                    >= n
            })
            .await
        }
    };
    let first = modern(gw.addr, "alice", "vh1", "tools/call", ask(None, None), &[]).await;
    let first = first.messages().pop().expect("an answer");
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert!(
        modern_asks(1).await,
        "the first round's record is written at once"
    );
    let state = first["result"]["requestState"].clone();
    let second = modern(
        gw.addr,
        "alice",
        "vh1",
        "tools/call",
        ask(Some(("name", "Ada")), Some(&state)),
        &[],
    )
    .await;
    let second = second.messages().pop().expect("an answer");
    let state = second["result"]["requestState"].clone();
    let done = modern(
        gw.addr,
        "alice",
        "vh1",
        "tools/call",
        ask(Some(("color", "teal")), Some(&state)),
        &[],
    )
    .await;
    assert_eq!(done.result_text(), "beta: Ada likes teal");
    assert!(modern_asks(3).await, "{}", lines(&records(dir.path())));
    let rounds: Vec<Value> = records(dir.path())
        .into_iter()
        .filter(|r| r["era"] == "2026-07-28")
        .collect();
    assert_eq!(rounds.len(), 3, "{}", lines(&rounds));
    for r in &rounds {
        assert_eq!(
            (
                r["outcome"].as_str(),
                r["backend"].as_str(),
                r["kind"].as_str()
            ),
            (Some("ok"), Some("beta"), Some("request")),
            "{r}"
        );
    }
}

/// A queue of one record under concurrent calls: no call waits for the trail, and every
/// operation is either written or counted as dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_drops_and_counts_records_without_delaying_calls() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("gw-audit-flood");
    let users = users(&[("alice", "vh1", false, &[("alpha", &alpha.url())])]);
    let gw = gateway(
        dir.path(),
        &users,
        &format!("target = \"file\"\npath = \"{AUDIT_FILE}\"\nqueue = 1\n"),
    )
    .await;
    let calls = 60;
    let answers = futures_util::future::join_all((0..calls).map(|i| {
        modern(
            gw.addr,
            "alice",
            "vh1",
            "tools/call",
            call("alpha-echo", json!({"text": i.to_string()})),
            &[],
        )
    }))
    .await;
    assert!(
        answers.iter().all(|a| a.status == 200),
        "every call is answered"
    );
    let dropped = || async {
        metric(
            &gw,
            r#"mcp_gateway_audit_dropped_total{reason="queue_full"}"#,
        )
        .await
        .unwrap_or(-1.0)
    };
    let accounted = poll_until(Duration::from_secs(60), || async {
        records(dir.path()).len() as f64 + dropped().await == f64::from(calls)
    })
    .await;
    assert!(
        accounted,
        "{} written + {} dropped != {calls}",
        records(dir.path()).len(),
        dropped().await
    );
    assert_eq!(
        metric(
            &gw,
            r#"mcp_gateway_audit_dropped_total{reason="write_error"}"#
        )
        .await,
        Some(0.0)
    );
}

/// Every JSON log line of a request whose client sent a `traceparent` carries its trace id (the
/// access line, the router's lines about the failed call), with or without an audit trail; lines
/// outside requests, and of requests without one, carry none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_log_line_of_a_request_with_a_traceparent_carries_its_trace_id() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let down = down_url();
    let dir = workdir("gw-audit-logs");
    support::write(
        dir.path(),
        "users.json",
        &users(&[(
            "alice",
            "vh1",
            false,
            &[("alpha", &alpha.url()), ("down", &down)],
        )]),
    );
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[("RUST_LOG", "info")]).await;
    let tp = traceparent(LOG_TRACE);
    let broken = modern(
        gw.addr,
        "alice",
        "vh1",
        "tools/call",
        call("down-echo", json!({})),
        &[("traceparent", &tp)],
    )
    .await;
    assert_eq!(broken.json()["error"]["code"], -32603);
    let plain = modern(
        gw.addr,
        "alice",
        "vh1",
        "tools/call",
        call("alpha-echo", json!({"text": "t"})),
        &[],
    )
    .await;
    assert_eq!(plain.status, 200);
    let access = |name: &str| {
        let needle = format!("\"mcp.name\":\"{name}\"");
        gw.logs()
            .lines()
            .find(|l| l.contains("\"message\":\"request\"") && l.contains(&needle))
            .map(str::to_owned)
    };
    assert!(
        poll_until(Duration::from_secs(30), || async {
            access("down-echo").is_some() && access("alpha-echo").is_some()
        })
        .await,
        "{}",
        gw.logs()
    );
    let logs = gw.logs();
    let traced = format!("\"trace_id\":\"{LOG_TRACE}\"");
    let of_request: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("\"backend\":\"down\"") || l.contains("\"mcp.name\":\"down-echo\""))
        .collect();
    assert!(
        of_request.len() >= 2,
        "the failure and the access line:\n{logs}"
    );
    for line in &of_request {
        let parsed: Value = serde_json::from_str(line).expect("a JSON line");
        assert_eq!(parsed["trace_id"], LOG_TRACE, "{line}");
    }
    assert!(!access("alpha-echo").expect("access").contains("trace_id"));
    for line in logs
        .lines()
        .filter(|l| l.contains("\"message\":\"listening\""))
    {
        assert!(!line.contains("trace_id"), "{line}");
    }
    // Whatever else is logged with a trace id is JSON naming this trace, first.
    for line in logs.lines().filter(|l| l.contains("trace_id")) {
        assert!(line.starts_with(&format!("{{{traced},")), "{line}");
        serde_json::from_str::<Value>(line).expect("a JSON line");
    }
}

/// Rotation: after the file is renamed away, a reload (SIGHUP) opens a new one at the path; the
/// renamed file keeps what was written before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_opens_the_audit_file_again_after_it_was_rotated() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("gw-audit-rotate");
    let users = users(&[("alice", "vh1", false, &[("alpha", &alpha.url())])]);
    let audit = format!("target = \"file\"\npath = \"{AUDIT_FILE}\"\n");
    let gw = gateway(dir.path(), &users, &audit).await;
    let echo = |text: &'static str| {
        let addr = gw.addr;
        async move {
            let params = call("alpha-echo", json!({ "text": text }));
            let reply = modern(addr, "alice", "vh1", "tools/call", params, &[]).await;
            assert_eq!(reply.result_text(), format!("alpha: {text}"));
        }
    };
    echo("before").await;
    records_at_least(dir.path(), 1).await;
    let rotated = dir.path().join("audit.jsonl.1");
    std::fs::rename(dir.path().join(AUDIT_FILE), &rotated).expect("rotate");

    let status = std::process::Command::new("kill")
        .arg("-HUP")
        .arg(gw.pid().to_string())
        .status()
        .expect("run kill");
    assert!(status.success());
    assert!(
        poll_until(Duration::from_secs(30), || async {
            gw.logs().contains("configuration reloaded")
        })
        .await,
        "{}",
        gw.logs()
    );
    echo("after").await;
    let fresh = records_at_least(dir.path(), 1).await;
    assert_eq!(fresh.len(), 1, "{}", lines(&fresh));
    assert_eq!(fresh[0]["name"], "alpha-echo");
    let old = std::fs::read_to_string(&rotated).expect("rotated file");
    assert_eq!(old.lines().count(), 1, "{old}");
    assert!(old.contains("alpha-echo"), "{old}");
}
