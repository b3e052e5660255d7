//! The plugin chain's cost per call with 0, 1 and 5 plugins: the `applies` check the router makes
//! before anything else, and a full `tool_pre_invoke` run over realistic arguments (built-ins
//! decide synchronously, so the future is polled once). `cargo bench -p mcp-plugins`.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mcp_core::Principal;
use mcp_plugins::{Format, Hook, PluginContext, PluginRuntime};
use serde_json::value::RawValue;

const ARGS: &str = r#"{"query":"is:open label:bug","limit":20,"repository":"example/project","note":"nothing secret in here, just a few words of text"}"#;

fn document(plugins: usize) -> String {
    let all = [
        r#"{"name":"sizes","kind":"size_limit","config":{"max_argument_bytes":65536}}"#,
        r#"{"name":"tools","kind":"tool_filter","config":{"deny":["delete_*","*admin*"]}}"#,
        r#"{"name":"secrets","kind":"secret_filter","hooks":["tool_pre_invoke"]}"#,
        r#"{"name":"rate","kind":"rate_limit","config":{"limit":1000000000,"window_s":1}}"#,
        r#"{"name":"identity","kind":"upstream_headers","config":{"headers":{"x-caller":"{subject}"}}}"#,
    ];
    format!(
        r#"{{"version":1,"plugins":[{}]}}"#,
        all[..plugins].join(",")
    )
}

/// Polls a future that completes without waiting (every built-in decides at once).
fn now<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("built-in plugins never wait"),
    }
}

fn chain(c: &mut Criterion) {
    let args = RawValue::from_string(ARGS.to_owned()).expect("json");
    let alice = Principal::new("https://issuer.example", "alice");
    let mut group = c.benchmark_group("chain");
    for plugins in [0, 1, 5] {
        let runtime = PluginRuntime::builder()
            .load_str(&document(plugins), Format::Json, "bench")
            .expect("valid document");
        group.bench_with_input(
            BenchmarkId::new("load_and_applies", plugins),
            &runtime,
            |b, runtime| {
                b.iter(|| {
                    let chain = runtime.load().expect("ready");
                    black_box(chain.applies(
                        Hook::ToolPreInvoke,
                        black_box("team-a"),
                        "github",
                        "search_issues",
                    ))
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("tool_pre_invoke", plugins),
            &runtime,
            |b, runtime| {
                b.iter(|| {
                    let chain = runtime.load().expect("ready");
                    if !chain.applies(Hook::ToolPreInvoke, "team-a", "github", "search_issues") {
                        return None;
                    }
                    let ctx = PluginContext::new(
                        Hook::ToolPreInvoke,
                        "team-a",
                        "github",
                        "search_issues",
                    )
                    .with_principal(Some(&alice));
                    Some(now(chain.pre(&ctx, Some(black_box(&args)))).expect("allowed"))
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, chain);
criterion_main!(benches);
