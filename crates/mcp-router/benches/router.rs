//! Hot paths of the router: the public-name prefix split, a `tools/list` merged from three
//! backends of 100 tools each (through the public `McpRouter` service, so the fan-out to three
//! in-process echo backends is included), cursor seal/open, session seal/open (sealed store) and
//! a Redis session lookup (against a private `redis-server`; skipped loudly when it is missing).
//! `cargo bench -p mcp-router`.

// A benchmark reports to the terminal; a skipped one must say so loudly.
#![allow(clippy::print_stderr)]

use std::hint::black_box;
use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::Request;
use http_body_util::{BodyExt, Full};
use mcp_bench::EchoBackend;
use mcp_config_store::{UserConfig, VirtualHost};
use mcp_core::ItemKind;
use mcp_core::{Principal, VirtualHostId};
use mcp_router::naming::{Namer, Resolution};
use mcp_router::session::{
    BackendEra, BackendSession, KeyRing, RedisSessionStore, RedisSessionStoreConfig,
    SealedSessionStore, SessionRecord, SessionStore,
};
use mcp_router::{McpRouter, Sealer};
use mcp_test_support::RedisServer;
use tokio::runtime::Runtime;
use tower::ServiceExt;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn user_config(urls: &[String]) -> UserConfig {
    let backends: serde_json::Map<String, serde_json::Value> = urls
        .iter()
        .enumerate()
        .map(|(i, url)| (format!("backend{i}"), serde_json::json!({ "url": url })))
        .collect();
    let doc = serde_json::json!({ "virtual_hosts": { "vh": { "backends": backends } } });
    UserConfig::from_json_str(&doc.to_string()).expect("valid config")
}

fn record() -> SessionRecord {
    SessionRecord {
        issuer: "https://issuer.example".into(),
        subject: "alice".into(),
        vhost: "vh".into(),
        protocol_version: "2025-11-25".into(),
        client_capabilities: r#"{"roots":{}}"#.into(),
        log_level: None,
        backends: vec![BackendSession {
            name: "github".into(),
            era: Some(BackendEra::Legacy),
            upstream_session_id: Some("up-1".into()),
            version: Some("2025-11-25".into()),
            url: Some("http://127.0.0.1:9/mcp".into()),
        }],
        subscriptions: vec![],
        created_at_ms: None,
    }
}

fn naming(c: &mut Criterion) {
    let urls: Vec<String> = (0..3)
        .map(|i| format!("http://127.0.0.1:{}/mcp", 9000 + i))
        .collect();
    let config = user_config(&urls);
    let vhost = config.virtual_hosts.get("vh").expect("vh");
    let namer = Namer::new(vhost);
    c.bench_function("naming/prefix_split", |b| {
        b.iter(|| {
            let resolved = namer.resolve(black_box("backend2-echo_42"), ItemKind::Tool);
            assert!(matches!(resolved, Resolution::One(_)));
            black_box(resolved);
        });
    });
}

fn list_merge(c: &mut Criterion) {
    let rt = runtime();
    let (backends, router, config) = rt.block_on(async {
        let mut backends = Vec::new();
        for _ in 0..3 {
            backends.push(
                EchoBackend::builder()
                    .tools(100)
                    .spawn()
                    .await
                    .expect("bind"),
            );
        }
        let urls: Vec<String> = backends.iter().map(EchoBackend::url).collect();
        (
            backends,
            McpRouter::builder().build(),
            Arc::new(user_config(&urls)),
        )
    });
    let vhost = VirtualHost::new(
        VirtualHostId::new("vh"),
        Arc::clone(config.virtual_hosts.get("vh").expect("vh")),
    );
    let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#);
    // What the foundation layers (vhost, claims, config store) would have inserted.
    let list = || {
        let mut req = Request::post("/servers/vh/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .body(Full::new(body.clone()))
            .expect("request");
        let ext = req.extensions_mut();
        ext.insert(VirtualHostId::new("vh"));
        ext.insert(Principal::new("https://issuer.example", "alice"));
        ext.insert(Arc::clone(&config));
        ext.insert(vhost.clone());
        let router = router.clone();
        async move {
            let res = router.oneshot(req).await.expect("infallible");
            res.into_body().collect().await.expect("body").to_bytes()
        }
    };
    // The first list also probes the backends' era; it must hold all 300 tools.
    let merged = rt.block_on(list());
    let text = String::from_utf8_lossy(&merged);
    assert!(
        text.contains("backend0-echo\"") && text.contains("backend2-echo_99"),
        "not merged: {text}"
    );
    c.bench_function("list/tools_list_3x100_via_router", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(list().await.len()) });
    });
    drop(backends);
}

fn cursor(c: &mut Criterion) {
    let sealer = Sealer::new(b"bench-sealing-secret-bench-sealing-secret");
    let payload =
        br#"{"b":{"backend0":"cursor-0","backend1":null,"backend2":"opaque-cursor-of-backend-2"}}"#;
    let binding = ["https://issuer.example", "alice", "vh", "tools/list"];
    let sealed = sealer.seal("cursor", &binding, payload);
    let mut group = c.benchmark_group("cursor");
    group.bench_function("seal", |b| {
        b.iter(|| black_box(sealer.seal("cursor", black_box(&binding), black_box(payload))));
    });
    group.bench_function("open", |b| {
        b.iter(|| {
            let opened = sealer
                .open("cursor", &binding, black_box(&sealed))
                .expect("valid");
            black_box(opened);
        });
    });
    group.finish();
}

fn sessions(c: &mut Criterion) {
    let rt = runtime();
    let ring = KeyRing::parse("k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=").expect("key ring");
    let sealed = SealedSessionStore::new(ring);
    let mut group = c.benchmark_group("session");
    group.bench_function("sealed_seal_open", |b| {
        b.to_async(&rt).iter(|| async {
            let id = sealed.create(black_box(record())).await.expect("seal");
            let opened = sealed.get(&id).await.expect("open");
            assert!(opened.is_some());
            black_box(opened);
        });
    });
    let Some(redis) = rt.block_on(RedisServer::start()) else {
        eprintln!(
            "\n*** session/redis_lookup SKIPPED: no redis-server (install it or set REDIS_URL) ***\n"
        );
        group.finish();
        return;
    };
    let store = RedisSessionStore::new(RedisSessionStoreConfig::new(redis.url())).expect("store");
    let id = rt.block_on(store.create(record())).expect("create");
    group.bench_function("redis_lookup", |b| {
        b.to_async(&rt).iter(|| async {
            let found = store.get(black_box(&id)).await.expect("get");
            assert!(found.is_some());
            black_box(found);
        });
    });
    group.finish();
    drop(redis);
}

criterion_group!(benches, naming, list_merge, cursor, sessions);
criterion_main!(benches);
