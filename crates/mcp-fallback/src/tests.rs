//! Replay rules, stale cache, degraded marker and layer tests (paused tokio time where time
//! matters).

use std::convert::Infallible;
use std::future::{Future, pending};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use mcp_breaker::{BreakerError, CircuitBreaker, HttpBreakerLayer, McpClassifier};
use mcp_core::{Method, RequestId};
use serde_json::value::RawValue;
use tokio::time::{Instant, advance};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use crate::degraded::{DegradedError, mark_degraded, mark_stale, mark_stale_message};
use crate::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).expect("valid JSON")
}

// ===== replay rules =====

const NO: ToolHints = ToolHints::NONE;
const RO: ToolHints = ToolHints {
    read_only: true,
    idempotent: false,
};
const IDEM: ToolHints = ToolHints {
    read_only: false,
    idempotent: true,
};
const BOTH: ToolHints = ToolHints {
    read_only: true,
    idempotent: true,
};
const ALL_HINTS: [ToolHints; 4] = [NO, RO, IDEM, BOTH];
const NEVER: FailureKind = FailureKind::NeverSent;
const MAYBE: FailureKind = FailureKind::MaybeReceived;

#[test]
fn reads_are_always_replayable() {
    let reads = [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "server/discover",
        "resources/read",
        "prompts/get",
        "completion/complete",
        "ping",
    ];
    assert_eq!(READ_METHODS, reads);
    for method in reads {
        for hints in ALL_HINTS {
            for failure in [NEVER, MAYBE] {
                assert!(
                    may_replay(method, hints, failure),
                    "{method} {hints:?} {failure:?}"
                );
            }
        }
    }
}

#[test]
fn tools_call_is_replayed_after_maybe_received_only_when_read_only_or_idempotent() {
    let cases = [
        (NO, NEVER, true),
        (NO, MAYBE, false),
        (RO, NEVER, true),
        (RO, MAYBE, true),
        (IDEM, NEVER, true),
        (IDEM, MAYBE, true),
        (BOTH, NEVER, true),
        (BOTH, MAYBE, true),
    ];
    for (hints, failure, expected) in cases {
        assert_eq!(
            may_replay("tools/call", hints, failure),
            expected,
            "{hints:?} {failure:?}"
        );
    }
}

#[test]
fn other_methods_are_replayed_only_when_never_sent() {
    let others = [
        "tasks/get",
        "tasks/cancel",
        "resources/subscribe",
        "subscriptions/listen",
        "logging/setLevel",
        "initialize",
        "notifications/cancelled",
        "x-vendor/do",
        "TOOLS/LIST",
        "",
    ];
    for method in others {
        for hints in ALL_HINTS {
            assert!(may_replay(method, hints, NEVER), "{method}");
            assert!(!may_replay(method, hints, MAYBE), "{method} {hints:?}");
        }
    }
}

#[test]
fn tool_hints_are_read_from_annotations() {
    let cases = [
        (
            r#"{"name":"a","annotations":{"readOnlyHint":true,"idempotentHint":true}}"#,
            BOTH,
        ),
        (r#"{"name":"a","annotations":{"readOnlyHint":true}}"#, RO),
        (
            r#"{"name":"a","annotations":{"idempotentHint":true,"destructiveHint":true}}"#,
            IDEM,
        ),
        (
            r#"{"name":"a","annotations":{"readOnlyHint":false,"idempotentHint":false}}"#,
            NO,
        ),
        (r#"{"name":"a"}"#, NO),
        (r#"{"name":"a","annotations":null}"#, NO),
        (r#"{"name":"a","annotations":[true]}"#, NO),
        (
            r#"{"name":"a","annotations":{"readOnlyHint":"true","idempotentHint":1}}"#,
            NO,
        ),
        (r#"{"name":"a","readOnlyHint":true}"#, NO),
        (r#"[{"annotations":{"readOnlyHint":true}}]"#, NO),
        (r#""tool""#, NO),
    ];
    for (tool, expected) in cases {
        assert_eq!(ToolHints::from_tool_json(&raw(tool)), expected, "{tool}");
    }
    assert!(!NO.is_replayable() && RO.is_replayable() && IDEM.is_replayable());
}

#[test]
fn mcp_replay_reads_http_requests() {
    let failure = |kind| FailureInfo::primary(kind);
    // method from the Method extension
    let mut req = Request::new(());
    req.extensions_mut().insert(Method::ToolsList);
    assert_eq!(req.mcp_method(), Some("tools/list"));
    assert!(McpReplay.may_replay(&req, &failure(MAYBE)));

    // method from the Mcp-Method header, hints from the extension
    let mut req = Request::builder()
        .header("mcp-method", "tools/call")
        .body(())
        .expect("request");
    assert!(!McpReplay.may_replay(&req, &failure(MAYBE)));
    assert!(McpReplay.may_replay(&req, &failure(NEVER)));
    req.extensions_mut().insert(IDEM);
    assert!(McpReplay.may_replay(&req, &failure(MAYBE)));

    // unknown method: only never-sent failures
    let req = Request::new(());
    assert_eq!(req.mcp_method(), None);
    assert!(!McpReplay.may_replay(&req, &failure(MAYBE)));
    assert!(McpReplay.may_replay(&req, &failure(NEVER)));
    assert!(!NeverSentOnly.may_replay(&req, &failure(MAYBE)));
}

// ===== failure kinds =====

#[test]
fn io_errors_are_never_sent_only_before_the_connection() {
    use io::ErrorKind::*;
    for kind in [
        ConnectionRefused,
        AddrNotAvailable,
        HostUnreachable,
        NetworkUnreachable,
        NetworkDown,
    ] {
        assert_eq!(io::Error::from(kind).failure_kind(), NEVER, "{kind:?}");
    }
    for kind in [
        ConnectionReset,
        ConnectionAborted,
        BrokenPipe,
        TimedOut,
        UnexpectedEof,
        Other,
    ] {
        assert_eq!(io::Error::from(kind).failure_kind(), MAYBE, "{kind:?}");
    }
}

#[test]
fn breaker_open_is_never_sent() {
    let breaker = CircuitBreaker::builder("b").build().expect("valid");
    breaker.handle().force_open();
    let open = breaker.try_acquire().expect_err("open");
    assert_eq!(open.failure_kind(), NEVER);
    let e: BreakerError<io::Error> = BreakerError::Open { retry_after: ms(5) };
    assert_eq!(e.failure_kind(), NEVER);
    let e = BreakerError::Inner(io::Error::from(io::ErrorKind::ConnectionReset));
    assert_eq!(e.failure_kind(), MAYBE);
    let e = BreakerError::Inner(io::Error::from(io::ErrorKind::ConnectionRefused));
    assert_eq!(e.failure_kind(), NEVER);
}

#[derive(Debug, thiserror::Error)]
#[error("request failed")]
struct Wrapper(#[source] Box<dyn std::error::Error + Send + Sync>);

#[test]
fn boxed_errors_are_searched_through_their_sources() {
    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    let refused = || io::Error::from(io::ErrorKind::ConnectionRefused);
    let b: BoxError = Box::new(Wrapper(Box::new(refused())));
    assert_eq!(b.failure_kind(), NEVER);
    let b: BoxError = Box::new(io::Error::other(Wrapper(Box::new(refused()))));
    assert_eq!(b.failure_kind(), NEVER);
    let b: BoxError = Box::new(BreakerError::<BoxError>::Open { retry_after: ms(1) });
    assert_eq!(b.failure_kind(), NEVER);
    let b: BoxError = Box::new(BreakerError::<BoxError>::Inner(Box::new(refused())));
    assert_eq!(b.failure_kind(), NEVER);
    let b: BoxError = Box::new(BreakerError::<BoxError>::Inner("timeout".into()));
    assert_eq!(b.failure_kind(), MAYBE);
    let b: BoxError = Box::new(Wrapper(Box::new(io::Error::from(
        io::ErrorKind::ConnectionReset,
    ))));
    assert_eq!(b.failure_kind(), MAYBE);
    let b: BoxError = "elapsed".into();
    assert_eq!(b.failure_kind(), MAYBE);
}

fn json_response(status: StatusCode) -> Response<()> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(())
        .expect("response")
}

#[test]
fn http_detector_reads_status_breaker_answer_and_errors() {
    let d = HttpDetector;
    let ok: Result<_, io::Error> = Ok(json_response(StatusCode::OK));
    assert_eq!(d.detect(&ok), None);
    let not_found: Result<_, io::Error> = Ok(json_response(StatusCode::NOT_FOUND));
    assert_eq!(d.detect(&not_found), None);
    let bad: Result<_, io::Error> = Ok(json_response(StatusCode::BAD_GATEWAY));
    assert_eq!(d.detect(&bad), Some(MAYBE));
    let html: Result<_, io::Error> = Ok(Response::new(()));
    assert_eq!(d.detect(&html), Some(MAYBE));

    let breaker = CircuitBreaker::builder("b").build().expect("valid");
    breaker.handle().force_open();
    let open = breaker.try_acquire().expect_err("open");
    let res = mcp_breaker::open_response::<Full<Bytes>>(&open);
    let res: Result<_, io::Error> = Ok(res);
    assert_eq!(d.detect(&res), Some(NEVER));

    let err: Result<Response<()>, _> = Err(io::Error::from(io::ErrorKind::ConnectionRefused));
    assert_eq!(d.detect(&err), Some(NEVER));

    let from = FromClassify(McpClassifier);
    assert_eq!(from.detect(&ok), None);
    assert_eq!(from.detect(&bad), Some(MAYBE));
    assert_eq!(from.detect(&err), Some(NEVER));
}

// ===== stale cache =====

#[tokio::test(start_paused = true)]
async fn stale_cache_is_bounded_and_evicts_the_oldest_store() {
    let cache = StaleCache::new(2);
    cache.insert("a", 1);
    advance(ms(1)).await;
    cache.insert("b", 2);
    advance(ms(1)).await;
    cache.insert("a", 10); // refreshed: now "b" is the oldest
    cache.insert("c", 3);
    assert_eq!(cache.len(), 2);
    let day = Duration::from_secs(86_400);
    assert!(cache.get(&"b", day).is_none());
    assert_eq!(cache.get(&"a", day).map(|s| s.value), Some(10));
    assert_eq!(cache.get(&"c", day).map(|s| s.value), Some(3));
    cache.insert("d", 4);
    assert!(cache.get(&"a", day).is_none());
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.max_entries(), 2);

    let none = StaleCache::new(0);
    none.insert("a", 1);
    assert!(none.is_empty());
    assert!(none.get(&"a", day).is_none());
}

#[tokio::test(start_paused = true)]
async fn stale_cache_reports_ages_and_expires_at_exactly_max_staleness() {
    let cache = StaleCache::new(10);
    cache.insert("k", "v");
    let max = ms(5_000);
    let hit = cache.get(&"k", max).expect("fresh");
    assert_eq!((hit.value, hit.age), ("v", Duration::ZERO));

    advance(ms(4_999)).await;
    let hit = cache.get(&"k", max).expect("just under the limit");
    assert_eq!(hit.age, ms(4_999));
    assert_eq!(hit.age_ms(), 4_999);

    advance(ms(1)).await;
    assert!(cache.get(&"k", max).is_none(), "expired at exactly max");
    assert!(
        cache.get(&"k", ms(5_001)).is_some(),
        "a larger limit still serves it"
    );
    assert!(cache.get(&"k", Duration::ZERO).is_none());

    // storing again resets the age
    cache.insert("k", "v2");
    assert_eq!(cache.get(&"k", max).map(|s| s.age), Some(Duration::ZERO));
}

#[tokio::test(start_paused = true)]
async fn stale_cache_purges_removes_and_shares_between_clones() {
    let cache = StaleCache::new(10);
    let clone = cache.clone();
    cache.insert("old", 1);
    advance(ms(100)).await;
    clone.insert("new", 2);
    assert_eq!(cache.len(), 2);
    cache.purge_older_than(ms(100));
    assert_eq!(clone.len(), 1);
    assert!(cache.get(&"new", ms(1)).is_some());
    assert_eq!(clone.remove(&"new"), Some(2));
    assert_eq!(clone.remove(&"new"), None);
    cache.insert("x", 3);
    cache.clear();
    assert!(clone.is_empty());
    // eviction order survives purges and removals
    let small = StaleCache::new(2);
    small.insert("a", 1);
    small.insert("b", 2);
    small.remove(&"a");
    small.insert("c", 3);
    small.insert("d", 4);
    assert_eq!(small.len(), 2);
    assert!(small.get(&"b", ms(1)).is_none());
}

// ===== degraded marker =====

#[test]
fn stale_marker_is_added_when_there_is_no_meta() {
    let marked = mark_stale(&raw(r#"{"tools":[]}"#), ms(1_234)).expect("marked");
    assert_eq!(
        marked.get(),
        r#"{"tools":[],"_meta":{"mcp-gateway/degraded":{"stale":{"age_ms":1234}}}}"#
    );
    let marked = mark_stale(&raw(r#"{"tools":[],"_meta":null}"#), ms(1)).expect("marked");
    assert_eq!(
        marked.get(),
        r#"{"tools":[],"_meta":{"mcp-gateway/degraded":{"stale":{"age_ms":1}}}}"#
    );
}

#[test]
fn stale_marker_merges_into_existing_meta_and_keeps_other_bytes() {
    let result = concat!(
        r#"{"tools": [ {"name":"a-x", "inputSchema":{"type" : "object"}} ], "#,
        r#""nextCursor":"c\u00e9", "#,
        r#""_meta": {"io.modelcontextprotocol/serverInfo": {"name":"gw" , "version":"1"}, "#,
        r#""mcp-gateway/degraded": {"backends": [ {"name":"b","reason":"backend unreachable"} ]}, "#,
        r#""z": [1, 2 ,3]}, "#,
        r#""ttlMs": 0}"#
    );
    let marked = mark_stale(&raw(result), ms(42)).expect("marked");
    assert_eq!(
        marked.get(),
        concat!(
            r#"{"tools":[ {"name":"a-x", "inputSchema":{"type" : "object"}} ],"#,
            r#""nextCursor":"c\u00e9","#,
            r#""_meta":{"io.modelcontextprotocol/serverInfo":{"name":"gw" , "version":"1"},"#,
            r#""mcp-gateway/degraded":{"backends":[ {"name":"b","reason":"backend unreachable"} ],"stale":{"age_ms":42}},"#,
            r#""z":[1, 2 ,3]},"#,
            r#""ttlMs":0}"#
        )
    );

    // marking again replaces the stale entry in place
    let again = mark_stale(&marked, ms(43)).expect("marked");
    assert!(again.get().contains(r#""stale":{"age_ms":43}},"#));
    assert!(!again.get().contains("42"));

    // a marker that is not an object is replaced
    let marked = mark_stale(
        &raw(r#"{"_meta":{"mcp-gateway/degraded":true,"k":1}}"#),
        ms(0),
    )
    .expect("marked");
    assert_eq!(
        marked.get(),
        r#"{"_meta":{"mcp-gateway/degraded":{"stale":{"age_ms":0}},"k":1}}"#
    );

    // other entries through the generic helper
    let marked = mark_degraded(&raw(r#"{"a":1}"#), "note", &raw("[1]")).expect("marked");
    assert_eq!(
        marked.get(),
        r#"{"a":1,"_meta":{"mcp-gateway/degraded":{"note":[1]}}}"#
    );
}

#[test]
fn stale_marker_errors_on_non_objects() {
    assert_eq!(
        mark_stale(&raw("[1]"), ms(1)).expect_err("array"),
        DegradedError::NotAnObject("result")
    );
    assert_eq!(
        mark_stale(&raw(r#"{"_meta":[1]}"#), ms(1)).expect_err("meta"),
        DegradedError::NotAnObject("_meta")
    );
    assert_eq!(
        mark_stale_message(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#,
            ms(1)
        )
        .expect_err("no result"),
        DegradedError::NoResult
    );
    assert_eq!(
        mark_stale_message(b"{nope", ms(1)).expect_err("json"),
        DegradedError::NotJson
    );
    assert_eq!(
        mark_stale_message(b"[1]", ms(1)).expect_err("array"),
        DegradedError::NotAnObject("message")
    );
    let marked = mark_stale_message(
        br#"{"jsonrpc":"2.0","id":"x","result":{"a":{ "b" :1}}}"#,
        ms(5),
    )
    .expect("marked");
    assert_eq!(
        marked,
        br#"{"jsonrpc":"2.0","id":"x","result":{"a":{ "b" :1},"_meta":{"mcp-gateway/degraded":{"stale":{"age_ms":5}}}}}"#
    );
}

// ===== test backends =====

/// A JSON-RPC-ish request: method and tool hints.
#[derive(Debug, Clone)]
struct Rpc {
    method: &'static str,
    hints: ToolHints,
}

impl McpCall for Rpc {
    fn mcp_method(&self) -> Option<&str> {
        Some(self.method)
    }

    fn tool_hints(&self) -> ToolHints {
        self.hints
    }
}

fn call(hints: ToolHints) -> Rpc {
    Rpc {
        method: "tools/call",
        hints,
    }
}

fn list() -> Rpc {
    Rpc {
        method: "tools/list",
        hints: NO,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    Ok,
    Refused,
    Reset,
    Hang,
    After(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Readiness {
    Ready,
    Fails,
    Never,
}

/// A backend that counts its calls and answers as told (switchable at run time).
#[derive(Debug, Clone)]
struct Backend {
    name: &'static str,
    calls: Arc<AtomicUsize>,
    answer: Arc<Mutex<Answer>>,
    readiness: Readiness,
}

impl Backend {
    fn new(name: &'static str, answer: Answer) -> Self {
        Self {
            name,
            calls: Arc::new(AtomicUsize::new(0)),
            answer: Arc::new(Mutex::new(answer)),
            readiness: Readiness::Ready,
        }
    }

    fn readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = readiness;
        self
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn set(&self, answer: Answer) {
        *self.answer.lock().expect("lock") = answer;
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Service<Rpc> for Backend {
    type Response = String;
    type Error = io::Error;
    type Future = BoxFuture<Result<String, io::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        match self.readiness {
            Readiness::Ready => Poll::Ready(Ok(())),
            Readiness::Fails => {
                Poll::Ready(Err(io::Error::other(format!("{} is closed", self.name))))
            }
            Readiness::Never => Poll::Pending,
        }
    }

    fn call(&mut self, req: Rpc) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = *self.answer.lock().expect("lock");
        let text = format!(r#"{{"from":"{}","method":"{}"}}"#, self.name, req.method);
        let name = self.name;
        Box::pin(async move {
            match answer {
                Answer::Ok => Ok(text),
                Answer::Refused => Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("{name} refused"),
                )),
                Answer::Reset => Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    format!("{name} reset"),
                )),
                Answer::Hang => pending().await,
                Answer::After(d) => {
                    tokio::time::sleep(d).await;
                    Ok(text)
                }
            }
        })
    }
}

fn mcp_layer(alternates: &[&Backend]) -> FallbackLayer<Backend, ErrorDetector, McpReplay> {
    FallbackLayer::new(alternates.iter().map(|b| (*b).clone())).replay(McpReplay)
}

fn err_text(e: &io::Error) -> String {
    e.to_string()
}

// ===== the layer =====

#[tokio::test(start_paused = true)]
async fn primary_ok_leaves_the_alternates_untouched() {
    let primary = Backend::new("p", Answer::Ok);
    let (a0, a1) = (
        Backend::new("a0", Answer::Ok),
        Backend::new("a1", Answer::Ok),
    );
    let svc = mcp_layer(&[&a0, &a1]).layer(primary.clone());
    for req in [list(), call(NO), call(BOTH)] {
        let served = svc.clone().oneshot(req).await.expect("served");
        assert_eq!(served.by(), ServedBy::Primary);
        assert!(served.report().is_none() && !served.is_fallback() && !served.is_stale());
        assert!(served.response().contains(r#""from":"p""#));
    }
    assert_eq!(primary.calls(), 3);
    assert_eq!((a0.calls(), a1.calls()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn never_sent_failure_is_served_by_an_alternate_even_for_a_side_effecting_tool() {
    let primary = Backend::new("p", Answer::Refused);
    let a0 = Backend::new("a0", Answer::Ok);
    let svc = mcp_layer(&[&a0]).layer(primary.clone());
    let served = svc.oneshot(call(NO)).await.expect("served");
    assert_eq!(served.by(), ServedBy::Alternate(0));
    let report = *served.report().expect("report");
    assert_eq!(report.failure, FailureInfo::primary(NEVER));
    assert_eq!((report.alternates_tried, report.timed_out), (1, false));
    assert!(!report.is_degraded());
    assert!(served.into_inner().contains(r#""from":"a0""#));
    assert_eq!((primary.calls(), a0.calls()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn maybe_received_side_effecting_tool_is_not_replayed_and_the_original_error_returned() {
    let primary = Backend::new("p", Answer::Reset);
    let a0 = Backend::new("a0", Answer::Ok);
    let svc = mcp_layer(&[&a0]).layer(primary.clone());
    let err = svc.oneshot(call(NO)).await.expect_err("not replayed");
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(err_text(&err), "p reset");
    assert_eq!(a0.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn read_only_or_idempotent_tools_and_reads_are_replayed_after_maybe_received() {
    for req in [call(IDEM), call(RO), call(BOTH), list()] {
        let primary = Backend::new("p", Answer::Reset);
        let a0 = Backend::new("a0", Answer::Ok);
        let svc = mcp_layer(&[&a0]).layer(primary);
        let served = svc.oneshot(req.clone()).await.expect("replayed");
        assert_eq!(served.by(), ServedBy::Alternate(0), "{req:?}");
        assert_eq!(
            served.report().map(|r| r.failure.kind),
            Some(MAYBE),
            "{req:?}"
        );
        assert_eq!(a0.calls(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn default_policy_replays_only_never_sent_failures() {
    let primary = Backend::new("p", Answer::Reset);
    let a0 = Backend::new("a0", Answer::Ok);
    let svc = FallbackLayer::new([a0.clone()]).layer(primary.clone());
    svc.clone()
        .oneshot(list())
        .await
        .expect_err("reset: not replayed");
    assert_eq!(a0.calls(), 0);
    primary.set(Answer::Refused);
    let served = svc.oneshot(list()).await.expect("refused: replayed");
    assert_eq!(served.by(), ServedBy::Alternate(0));
}

#[tokio::test(start_paused = true)]
async fn alternates_are_tried_in_order_while_the_guard_allows_the_latest_failure() {
    // refused, refused, ok: the third answers
    let primary = Backend::new("p", Answer::Refused);
    let a0 = Backend::new("a0", Answer::Refused);
    let a1 = Backend::new("a1", Answer::Ok);
    let a2 = Backend::new("a2", Answer::Ok);
    let svc = mcp_layer(&[&a0, &a1, &a2]).layer(primary.clone());
    let served = svc.clone().oneshot(call(NO)).await.expect("served");
    assert_eq!(served.by(), ServedBy::Alternate(1));
    assert_eq!(served.report().map(|r| r.alternates_tried), Some(2));
    assert_eq!((a0.calls(), a1.calls(), a2.calls()), (1, 1, 0));

    // a0 may have executed the call (reset): a1 must not get it; the primary's error comes back
    a0.set(Answer::Reset);
    let err = svc.clone().oneshot(call(NO)).await.expect_err("stopped");
    assert_eq!(err_text(&err), "p refused");
    assert_eq!((a0.calls(), a1.calls()), (2, 1));

    // an idempotent tool goes on past the reset
    let served = svc.oneshot(call(IDEM)).await.expect("served");
    assert_eq!(served.by(), ServedBy::Alternate(1));
    assert_eq!((a0.calls(), a1.calls()), (3, 2));
}

#[tokio::test(start_paused = true)]
async fn all_alternates_failing_returns_the_original_error_not_the_last_one() {
    let primary = Backend::new("p", Answer::Refused);
    let a0 = Backend::new("a0", Answer::Refused);
    let a1 = Backend::new("a1", Answer::Reset);
    let svc = mcp_layer(&[&a0, &a1]).layer(primary);
    let err = svc.oneshot(list()).await.expect_err("exhausted");
    assert_eq!(err_text(&err), "p refused");
    assert_eq!((a0.calls(), a1.calls()), (1, 1));
}

/// A stale source over `tools/list` answers, marking them with the degraded helper.
fn stale_source(
    cache: &StaleCache<&'static str, String>,
    max: Duration,
) -> impl StaleSource<Rpc, String> + Clone + use<> {
    cache
        .source(max, |req: &Rpc| {
            req.method.ends_with("/list").then_some(req.method)
        })
        .mark(|answer: String, age| {
            let result = RawValue::from_string(answer).expect("stored answers are JSON");
            mark_stale(&result, age).expect("object").get().to_owned()
        })
}

#[tokio::test(start_paused = true)]
async fn stale_answer_is_served_and_marked_when_everything_fails() {
    let primary = Backend::new("p", Answer::Ok);
    let a0 = Backend::new("a0", Answer::Refused);
    let cache = StaleCache::new(100);
    let svc = mcp_layer(&[&a0])
        .stale(stale_source(&cache, Duration::from_secs(60)))
        .layer(primary.clone());

    // a good answer is remembered (a tools/call is not)
    svc.clone().oneshot(list()).await.expect("primary");
    svc.clone().oneshot(call(NO)).await.expect("primary");
    assert_eq!(cache.len(), 1);

    advance(ms(1_500)).await;
    primary.set(Answer::Refused);
    let served = svc.clone().oneshot(list()).await.expect("stale");
    assert_eq!(served.by(), ServedBy::Stale { age: ms(1_500) });
    assert!(served.is_stale() && served.report().expect("report").is_degraded());
    assert_eq!(served.report().map(|r| r.alternates_tried), Some(1));
    assert_eq!(
        served.into_inner(),
        r#"{"from":"p","method":"tools/list","_meta":{"mcp-gateway/degraded":{"stale":{"age_ms":1500}}}}"#
    );
    assert_eq!(a0.calls(), 1);

    // nothing cached for tools/call: the original error
    let err = svc.oneshot(call(NO)).await.expect_err("no stale");
    assert_eq!(err_text(&err), "p refused");
}

#[tokio::test(start_paused = true)]
async fn answers_from_alternates_are_remembered_too() {
    let primary = Backend::new("p", Answer::Refused);
    let a0 = Backend::new("a0", Answer::Ok);
    let cache = StaleCache::new(100);
    let svc = mcp_layer(&[&a0])
        .stale(stale_source(&cache, Duration::from_secs(60)))
        .layer(primary);
    svc.clone().oneshot(list()).await.expect("alternate");
    a0.set(Answer::Refused);
    advance(ms(10)).await;
    let served = svc.oneshot(list()).await.expect("stale");
    assert_eq!(served.by(), ServedBy::Stale { age: ms(10) });
    assert!(served.into_inner().starts_with(r#"{"from":"a0""#));
}

#[tokio::test(start_paused = true)]
async fn stale_answer_past_max_staleness_gives_the_original_error() {
    let primary = Backend::new("p", Answer::Ok);
    let cache = StaleCache::new(100);
    let svc = mcp_layer(&[])
        .stale(stale_source(&cache, ms(5_000)))
        .layer(primary.clone());
    svc.clone().oneshot(list()).await.expect("primary");
    primary.set(Answer::Reset);

    advance(ms(4_999)).await;
    let served = svc
        .clone()
        .oneshot(list())
        .await
        .expect("still fresh enough");
    assert_eq!(served.by(), ServedBy::Stale { age: ms(4_999) });

    advance(ms(1)).await;
    let err = svc.oneshot(list()).await.expect_err("too old");
    assert_eq!(err_text(&err), "p reset");
}

#[tokio::test(start_paused = true)]
async fn fallback_timeout_bounds_the_whole_path() {
    let primary = Backend::new("p", Answer::Refused);
    let a0_fail = Backend::new("a0", Answer::Refused);
    let hang = Backend::new("hang", Answer::Hang);
    let late = Backend::new("late", Answer::Ok);

    // a0 fails at once, the hanging one is cut at 1 s, `late` is never reached
    let svc = mcp_layer(&[&a0_fail, &hang, &late])
        .timeout(ms(1_000))
        .layer(primary.clone());
    let started = Instant::now();
    let err = svc.oneshot(list()).await.expect_err("timed out");
    assert_eq!(started.elapsed(), ms(1_000));
    assert_eq!(err_text(&err), "p refused");
    assert_eq!((a0_fail.calls(), hang.calls(), late.calls()), (1, 1, 0));

    // two slow alternates: the second does not get a fresh budget
    let a1 = Backend::new("a1", Answer::After(ms(600)));
    let slow_fail = Backend::new("slow", Answer::After(ms(600)));
    let svc = FallbackLayer::new([slow_fail.clone(), a1.clone()])
        .replay(McpReplay)
        .detector(|r: &Result<String, io::Error>| match r {
            Ok(s) if s.contains(r#""from":"slow""#) => Some(MAYBE),
            Ok(_) => None,
            Err(e) => Some(e.failure_kind()),
        })
        .timeout(ms(1_000))
        .layer(primary.clone());
    let started = Instant::now();
    let err = svc.oneshot(list()).await.expect_err("budget spent");
    assert_eq!(
        started.elapsed(),
        ms(1_000),
        "600 ms + 400 ms of the second"
    );
    assert_eq!(err_text(&err), "p refused");
    assert_eq!((slow_fail.calls(), a1.calls()), (1, 1));

    // with a stale answer, the stale answer is served at the deadline
    let cache = StaleCache::new(10);
    let ok_primary = Backend::new("p", Answer::Ok);
    let warm = mcp_layer(&[])
        .stale(stale_source(&cache, Duration::from_secs(60)))
        .layer(ok_primary);
    warm.oneshot(list()).await.expect("primed");
    let svc = mcp_layer(&[&hang])
        .stale(stale_source(&cache, Duration::from_secs(60)))
        .timeout(ms(250))
        .layer(primary);
    let started = Instant::now();
    let served = svc.oneshot(list()).await.expect("stale at the deadline");
    assert_eq!(started.elapsed(), ms(250));
    assert_eq!(served.by(), ServedBy::Stale { age: ms(250) });
    assert!(served.report().expect("report").timed_out);
}

#[tokio::test(start_paused = true)]
async fn an_alternate_that_never_gets_ready_is_bounded_too() {
    let primary = Backend::new("p", Answer::Refused);
    let stuck = Backend::new("stuck", Answer::Ok).readiness(Readiness::Never);
    let svc = mcp_layer(&[&stuck]).timeout(ms(300)).layer(primary);
    let started = Instant::now();
    let err = svc.oneshot(list()).await.expect_err("timed out");
    assert_eq!(started.elapsed(), ms(300));
    assert_eq!(err_text(&err), "p refused");
    assert_eq!(stuck.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_alternate_failing_readiness_never_saw_the_request() {
    let primary = Backend::new("p", Answer::Refused);
    let closed = Backend::new("closed", Answer::Ok).readiness(Readiness::Fails);
    let a1 = Backend::new("a1", Answer::Ok);
    let svc = mcp_layer(&[&closed, &a1]).layer(primary);
    let served = svc.oneshot(call(NO)).await.expect("served");
    assert_eq!(served.by(), ServedBy::Alternate(1));
    assert_eq!((closed.calls(), a1.calls()), (0, 1));
    assert_eq!(served.report().map(|r| r.alternates_tried), Some(1));
}

fn noop_cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

#[tokio::test(start_paused = true)]
async fn poll_ready_never_errors() {
    // a primary whose readiness fails: still ready, and the call goes to the fallback path as a
    // never-sent failure (so even a side-effecting tool is replayed)
    let primary = Backend::new("p", Answer::Ok).readiness(Readiness::Fails);
    let a0 = Backend::new("a0", Answer::Ok);
    let mut svc = mcp_layer(&[&a0]).layer(primary.clone());
    assert!(matches!(
        svc.poll_ready(&mut noop_cx()),
        Poll::Ready(Ok(()))
    ));
    assert!(format!("{svc:?}").contains("Some(primary readiness error)"));
    // clones do not carry the kept error
    assert!(format!("{:?}", svc.clone()).contains("ready_error: None"));
    let served = svc.call(call(NO)).await.expect("served");
    assert_eq!(served.by(), ServedBy::Alternate(0));
    assert_eq!(
        served.report().map(|r| r.failure),
        Some(FailureInfo::primary(NEVER))
    );
    assert_eq!(primary.calls(), 0);

    // without alternates: the readiness error itself comes back from the call
    let mut svc = mcp_layer(&[]).layer(primary.clone());
    assert!(matches!(
        svc.poll_ready(&mut noop_cx()),
        Poll::Ready(Ok(()))
    ));
    let err = svc.call(list()).await.expect_err("exhausted");
    assert_eq!(err_text(&err), "p is closed");

    // alternates that fail or never get ready do not touch readiness
    let ok = Backend::new("p", Answer::Ok);
    let bad = Backend::new("bad", Answer::Ok).readiness(Readiness::Fails);
    let stuck = Backend::new("stuck", Answer::Ok).readiness(Readiness::Never);
    let mut svc = mcp_layer(&[&bad, &stuck]).layer(ok);
    for _ in 0..3 {
        assert!(matches!(
            svc.poll_ready(&mut noop_cx()),
            Poll::Ready(Ok(()))
        ));
        svc.call(list()).await.expect("primary");
    }

    // a primary that is not ready keeps the fallback not ready (backpressure)
    let busy = Backend::new("busy", Answer::Ok).readiness(Readiness::Never);
    let mut svc = mcp_layer(&[&bad]).layer(busy);
    assert!(svc.poll_ready(&mut noop_cx()).is_pending());
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_is_a_never_sent_failure() {
    let breaker = CircuitBreaker::builder("p").build().expect("valid");
    breaker.handle().force_open();
    let primary = Backend::new("p", Answer::Ok);
    let replica = Backend::new("replica", Answer::Ok);
    let svc = ServiceBuilder::new()
        .layer(FallbackLayer::new([breaker.layer().layer(replica.clone())]).replay(McpReplay))
        .layer(breaker.layer())
        .service(primary.clone());
    // the replica shares the open breaker here: it fails fast too, and the original error is
    // the breaker's
    let err = svc.clone().oneshot(call(NO)).await.expect_err("all open");
    assert!(err.is_open());
    assert_eq!(replica.calls(), 0);

    // a replica with its own (closed) breaker serves the side-effecting call
    let replica_breaker = CircuitBreaker::builder("replica").build().expect("valid");
    let svc = ServiceBuilder::new()
        .layer(
            FallbackLayer::new([replica_breaker.layer().layer(replica.clone())]).replay(McpReplay),
        )
        .layer(breaker.layer())
        .service(primary.clone());
    let served = svc.oneshot(call(NO)).await.expect("replica");
    assert_eq!(served.by(), ServedBy::Alternate(0));
    assert_eq!((primary.calls(), replica.calls()), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_failed_answer_is_returned_as_exhausted() {
    // the detector judges Ok answers: "busy" is a failure the primary may have received
    let detector = |r: &Result<&'static str, Infallible>| match r {
        Ok("busy") => Some(MAYBE),
        _ => None,
    };
    let primary = tower::service_fn(|_: u8| async { Ok::<_, Infallible>("busy") });
    let alternate = tower::service_fn(|_: u8| async { Ok::<_, Infallible>("busy") });
    let svc = FallbackLayer::new([alternate])
        .detector(detector)
        .replay(|_: &u8, _: &FailureInfo| true)
        .layer(primary);
    let served = svc.oneshot(7).await.expect("infallible");
    assert_eq!(served.by(), ServedBy::Exhausted);
    let report = *served.report().expect("report");
    assert!(report.is_degraded());
    assert_eq!(report.alternates_tried, 1);
    assert_eq!(served.into_inner(), "busy");
}

/// Counts its clones.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>);

impl Clone for Counted {
    fn clone(&self) -> Self {
        self.0.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(&self.0))
    }
}

#[tokio::test(start_paused = true)]
async fn the_fast_path_clones_the_request_once() {
    let clones = Arc::new(AtomicUsize::new(0));
    let primary = tower::service_fn(|_: Counted| async { Ok::<_, io::Error>("ok") });
    let alternate = tower::service_fn(|_: Counted| async { Ok::<_, io::Error>("alt") });
    let svc = FallbackLayer::new([alternate]).layer(primary);
    let served = svc.oneshot(Counted(clones.clone())).await.expect("ok");
    assert_eq!(served.by(), ServedBy::Primary);
    assert_eq!(clones.load(Ordering::SeqCst), 1);
}

#[test]
fn futures_and_services_are_send_and_sync_when_their_parts_are() {
    fn send<T: Send>(_: &T) {}
    fn sync<T: Sync>(_: &T) {}
    let primary = Backend::new("p", Answer::Ok);
    let mut svc = mcp_layer(&[&primary]).layer(primary.clone());
    send(&svc);
    sync(&svc);
    let fut = svc.call(list());
    send(&fut);
}

// ===== the HTTP layer =====

type Body = Full<Bytes>;

fn http_backend(
    name: &'static str,
    status: StatusCode,
    calls: Arc<AtomicUsize>,
) -> impl Service<
    Request<Body>,
    Response = Response<Body>,
    Error = io::Error,
    Future = impl Future<Output = Result<Response<Body>, io::Error>> + Send,
> + Clone
+ Send
+ Sync {
    tower::service_fn(move |_req: Request<Body>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            Ok(Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(name)))
                .expect("response"))
        }
    })
}

fn mcp_request(method: Method, id: i64) -> Request<Body> {
    let mut req = Request::post("/mcp")
        .body(Body::default())
        .expect("request");
    req.extensions_mut().insert(method);
    req.extensions_mut().insert(RequestId::from(id));
    req
}

async fn body_text<B>(res: Response<B>) -> String
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8(bytes.to_vec()).expect("utf8")
}

#[tokio::test(start_paused = true)]
async fn http_primary_answers_untouched() {
    let (p, a) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let svc = HttpFallbackLayer::new("weather", [http_backend("a0", StatusCode::OK, a.clone())])
        .layer(http_backend("p", StatusCode::OK, p.clone()));
    let res = svc
        .oneshot(mcp_request(Method::ToolsCall, 1))
        .await
        .expect("ok");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.extensions().get::<FallbackReport>().is_none());
    assert_eq!(body_text(res).await, "p");
    assert_eq!((p.load(Ordering::SeqCst), a.load(Ordering::SeqCst)), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn http_alternate_answer_carries_a_report() {
    let (p, a) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let svc = HttpFallbackLayer::new("weather", [http_backend("a0", StatusCode::OK, a.clone())])
        .layer(http_backend("p", StatusCode::BAD_GATEWAY, p.clone()));
    let res = svc
        .clone()
        .oneshot(mcp_request(Method::ToolsList, 1))
        .await
        .expect("ok");
    let report = *res.extensions().get::<FallbackReport>().expect("report");
    assert_eq!(report.by, ServedBy::Alternate(0));
    assert_eq!(report.failure.kind, MAYBE);
    assert_eq!(body_text(res).await, "a0");

    // a 502 may have executed a side-effecting tool: not replayed, JSON-RPC error instead
    let res = svc
        .oneshot(mcp_request(Method::ToolsCall, 2))
        .await
        .expect("ok");
    assert_eq!(res.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(res.headers()["content-type"], "application/json");
    assert_eq!(
        res.extensions().get::<FallbackReport>().map(|r| r.by),
        Some(ServedBy::Exhausted)
    );
    assert_eq!(
        body_text(res).await,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Backend weather unavailable (no alternate or cached answer)","data":{"failure":"maybe_received","alternates_tried":0,"timed_out":false}}}"#
    );
    assert_eq!(a.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn http_exhausted_answers_a_json_rpc_error_never_the_error() {
    let a = Arc::new(AtomicUsize::new(0));
    let refused = tower::service_fn(|_req: Request<Body>| async {
        Err::<Response<Body>, _>(io::Error::from(io::ErrorKind::ConnectionRefused))
    });
    let svc = HttpFallbackLayer::new(
        "weather",
        [http_backend(
            "a0",
            StatusCode::SERVICE_UNAVAILABLE,
            a.clone(),
        )],
    )
    .error_status(StatusCode::OK)
    .layer(refused);
    let mut req = Request::post("/mcp")
        .body(Body::default())
        .expect("request");
    req.headers_mut()
        .insert("mcp-method", http::HeaderValue::from_static("tools/call"));
    let res = svc.oneshot(req).await.expect("an answer, not an error");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        body_text(res).await,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Backend weather unavailable (no alternate or cached answer)","data":{"failure":"never_sent","alternates_tried":1,"timed_out":false}}}"#
    );
    assert_eq!(a.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn http_open_breaker_without_alternates_answers_503_with_retry_after() {
    let breaker = CircuitBreaker::builder("weather")
        .open_duration(Duration::from_secs(7))
        .jitter(0.0)
        .build()
        .expect("valid");
    breaker.handle().force_open();
    let p = Arc::new(AtomicUsize::new(0));
    let svc = ServiceBuilder::new()
        .layer(HttpFallbackLayer::new(
            "weather",
            Vec::<HttpBreakerBackend>::new(),
        ))
        .layer(HttpBreakerLayer::new(breaker))
        .service(http_backend("p", StatusCode::OK, p.clone()));
    let res = svc
        .oneshot(mcp_request(Method::ToolsList, 9))
        .await
        .expect("answer");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "7");
    assert!(res.extensions().get::<mcp_breaker::CircuitOpen>().is_some());
    let body = body_text(res).await;
    assert!(
        body.starts_with(r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32603"#),
        "{body}"
    );
    assert!(body.contains(r#""failure":"never_sent""#), "{body}");
    assert_eq!(p.load(Ordering::SeqCst), 0);
}

/// The type of an alternate behind an `HttpBreakerLayer` (only named for the empty list above).
type HttpBreakerBackend = mcp_breaker::HttpBreakerService<
    tower::util::BoxCloneSyncService<Request<Body>, Response<Body>, io::Error>,
>;
