//! The config cache hit path: what every authenticated request pays to find its caller's
//! configuration once it is cached. `cargo bench -p mcp-config-store`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use mcp_config_store::{CachedStore, MemoryStore, UserConfig, UserConfigStore};

fn config() -> UserConfig {
    UserConfig::from_json_str(
        r#"{"virtual_hosts":{"vh1":{"backends":{
            "github":{"url":"http://127.0.0.1:9001/mcp"},
            "jira":{"url":"http://127.0.0.1:9002/mcp"},
            "docs":{"url":"http://127.0.0.1:9003/mcp"}}}}}"#,
    )
    .expect("valid config")
}

fn cache_hit(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // 1,000 cached subjects, so the hit is not the only entry of the map.
    let memory = MemoryStore::new();
    for i in 0..1_000 {
        memory.insert(format!("user-{i}"), config());
    }
    let cache = rt.block_on(async {
        let cache = CachedStore::new(memory);
        for i in 0..1_000 {
            let loaded = cache.load(format!("user-{i}").into()).await.expect("load");
            assert!(loaded.is_some());
        }
        // What the benchmark repeats is a hit, not a store read.
        let hit = cache.load("user-500".into()).await.expect("load");
        assert!(hit.is_some());
        assert_eq!((cache.stats().hits, cache.stats().misses), (1, 1_000));
        cache
    });
    let subject: Arc<str> = "user-500".into();
    c.bench_function("config_cache/hit", |b| {
        b.to_async(&rt).iter(|| async {
            let config = cache
                .load(black_box(Arc::clone(&subject)))
                .await
                .expect("hit");
            black_box(config);
        });
    });
}

criterion_group!(benches, cache_hit);
criterion_main!(benches);
