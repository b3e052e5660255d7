//! The cheap path allocates nothing: `PluginRuntime::load`, `PluginChain::applies`, `listed`, and a
//! `pre`/`post` run where no plugin applies, with an empty chain and with five plugins whose
//! conditions do not match. Measured with `allocation-counter`'s counting global allocator (per
//! thread, so the test harness's other threads do not count).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use mcp_plugins::{Format, Hook, PluginContext, PluginRuntime};
use serde_json::value::RawValue;

fn allocations_in(f: impl FnOnce()) -> u64 {
    allocation_counter::measure(f).count_total
}

/// Polls a future that must complete at once (no plugin runs, nothing awaits).
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("nothing to wait for"),
    }
}

const FIVE_ELSEWHERE: &str = r#"{"version": 1, "plugins": [
    {"name": "a", "kind": "tool_filter", "conditions": {"backends": ["other"]}, "config": {"deny": ["x"]}},
    {"name": "b", "kind": "size_limit", "conditions": {"backends": ["other"]}, "config": {"max_argument_bytes": 1, "max_result_bytes": 1}},
    {"name": "c", "kind": "secret_filter", "conditions": {"virtual_hosts": ["other"]}},
    {"name": "d", "kind": "rate_limit", "conditions": {"backends": ["other"], "tools": ["other"]}, "config": {"limit": 1, "window_s": 1}},
    {"name": "e", "kind": "upstream_headers", "conditions": {"backends": ["other"]}, "config": {"headers": {"x-a": "b"}}}
]}"#;

#[test]
fn the_no_plugin_path_does_not_allocate() {
    let args =
        RawValue::from_string(r#"{"text":"AKIAIOSFODNN7EXAMPLE"}"#.to_owned()).expect("json");
    for doc in [r#"{"version": 1, "plugins": []}"#, FIVE_ELSEWHERE] {
        let runtime = PluginRuntime::builder()
            .load_str(doc, Format::Json, "test")
            .expect("valid");
        // arc-swap registers each thread once, on its first load (one allocation per thread for
        // the life of the process, not per call).
        let _ = runtime.load();
        let n = allocations_in(|| {
            let chain = runtime.load().expect("ready");
            for hook in Hook::ALL {
                assert!(!chain.applies(hook, "vh", "notes", "add"));
            }
            let ctx = PluginContext::new(Hook::ToolPreInvoke, "vh", "notes", "add");
            assert!(chain.listed(&ctx));
            let outcome = ready(chain.pre(&ctx, Some(&args))).expect("allowed");
            assert!(outcome.arguments.is_none() && outcome.extras.is_empty());
            let post = ctx.for_hook(Hook::ToolPostInvoke);
            assert!(ready(chain.post(&post, &args)).expect("allowed").is_none());
        });
        assert_eq!(n, 0, "allocations on the no-plugin path with {doc}");
    }
    // The counter works: a plugin that applies does allocate (its denial message).
    let runtime = PluginRuntime::builder()
        .load_str(FIVE_ELSEWHERE, Format::Json, "test")
        .expect("valid");
    let n = allocations_in(|| {
        let chain = runtime.load().expect("ready");
        let ctx = PluginContext::new(Hook::ToolPreInvoke, "vh", "other", "x");
        assert!(ready(chain.pre(&ctx, Some(&args))).is_err());
    });
    assert!(n > 0);
}
