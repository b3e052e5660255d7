//! State-machine, service and metrics tests (paused tokio time unless noted).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use tokio::time::{Instant, advance};
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};

use crate::*;

const MS: Duration = Duration::from_millis(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A builder with no jitter, so open periods are exact.
fn exact(name: &str) -> BreakerBuilder {
    CircuitBreaker::builder(name).jitter(0.0)
}

fn fail(b: &CircuitBreaker) {
    b.try_acquire()
        .expect("admitted")
        .record(Outcome::Failure, MS);
}

fn succeed(b: &CircuitBreaker) {
    b.try_acquire()
        .expect("admitted")
        .record(Outcome::Success, MS);
}

fn rejected(b: &CircuitBreaker) -> CircuitOpen {
    b.try_acquire().expect_err("rejected")
}

// ===== closed -> open =====

#[tokio::test(start_paused = true)]
async fn consecutive_failures_trip_and_a_success_resets_the_count() {
    let b = exact("a").consecutive_failures(3).build().expect("valid");
    fail(&b);
    fail(&b);
    succeed(&b);
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.snapshot().consecutive_failures, 2);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open);
    let snap = b.snapshot();
    assert_eq!((snap.trips, snap.consecutive_failures), (1, 0));
    assert_eq!(snap.retry_after, Some(ms(5000)));
}

#[tokio::test(start_paused = true)]
async fn ignored_outcomes_do_not_count() {
    let b = exact("a").consecutive_failures(2).build().expect("valid");
    fail(&b);
    for _ in 0..10 {
        b.try_acquire()
            .expect("admitted")
            .record(Outcome::Ignore, MS);
    }
    assert_eq!(b.snapshot().consecutive_failures, 1);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn failure_rate_over_a_count_window_needs_minimum_calls() {
    let b = exact("a")
        .consecutive_failures(0)
        .failure_rate(0.5)
        .count_window(10)
        .minimum_calls(4)
        .build()
        .expect("valid");
    fail(&b);
    fail(&b);
    succeed(&b);
    // 2 of 3 failed (67 %), but fewer than 4 calls: no trip
    assert_eq!(b.state(), BreakerState::Closed);
    succeed(&b);
    // 2 of 4 = 50 %: trips exactly at the threshold
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn count_window_evicts_old_failures() {
    let b = exact("a")
        .consecutive_failures(0)
        .failure_rate(0.6)
        .count_window(5)
        .minimum_calls(5)
        .build()
        .expect("valid");
    // F F S S S: 40 %
    fail(&b);
    fail(&b);
    for _ in 0..3 {
        succeed(&b);
    }
    // each new failure evicts the oldest call: F S S S F (40 %), S S S F F (40 %)
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Closed);
    let snap = b.snapshot();
    assert_eq!((snap.window_calls, snap.window_failures), (5, 2));
    // S S F F F: 60 %
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn time_window_forgets_failures_older_than_its_length() {
    let b = exact("a")
        .consecutive_failures(0)
        .failure_rate(1.0)
        .time_window(Duration::from_secs(10))
        .minimum_calls(3)
        .build()
        .expect("valid");
    fail(&b);
    fail(&b);
    advance(Duration::from_secs(10)).await;
    // the two failures left the window: 1 call, below minimum
    fail(&b);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.snapshot().window_calls, 1);
    advance(Duration::from_secs(9)).await;
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn slow_call_rate_trips_even_when_calls_succeed() {
    let b = exact("a")
        .consecutive_failures(0)
        .slow_calls(ms(100), 0.5)
        .count_window(4)
        .minimum_calls(4)
        .build()
        .expect("valid");
    let call = |latency: Duration| {
        b.try_acquire()
            .expect("admitted")
            .record(Outcome::Success, latency)
    };
    call(ms(99));
    call(ms(100)); // at the threshold: slow
    call(ms(10));
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.snapshot().window_slow_calls, 1);
    call(ms(500));
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn slow_latency_is_measured_from_acquire_when_recorded_elapsed() {
    let b = exact("a")
        .consecutive_failures(0)
        .slow_calls(ms(50), 1.0)
        .count_window(1)
        .minimum_calls(1)
        .build()
        .expect("valid");
    let p = b.try_acquire().expect("admitted");
    advance(ms(50)).await;
    assert_eq!(p.elapsed(), ms(50));
    p.record_elapsed(Outcome::Success);
    assert_eq!(b.state(), BreakerState::Open);
}

// ===== open -> half-open -> closed / open =====

#[tokio::test(start_paused = true)]
async fn open_rejects_until_the_period_ends_then_admits_a_probe() {
    let b = exact("a")
        .consecutive_failures(1)
        .open_duration(ms(1000))
        .build()
        .expect("valid");
    fail(&b);
    assert_eq!(rejected(&b).retry_after(), ms(1000));
    advance(ms(400)).await;
    let open = rejected(&b);
    assert_eq!(
        (open.retry_after(), open.state()),
        (ms(600), BreakerState::Open)
    );
    advance(ms(599)).await;
    assert_eq!(rejected(&b).retry_after(), ms(1));
    // the state only moves when a call asks
    advance(ms(1)).await;
    assert_eq!(b.state(), BreakerState::Open);
    let probe = b.try_acquire().expect("probe");
    assert!(probe.is_probe());
    assert_eq!(b.state(), BreakerState::HalfOpen);
    probe.record(Outcome::Success, MS);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.snapshot().trips, 0);
}

#[tokio::test(start_paused = true)]
async fn success_threshold_needs_that_many_successful_probes() {
    let b = exact("a")
        .consecutive_failures(1)
        .half_open_probes(1)
        .half_open_success_threshold(3)
        .build()
        .expect("valid");
    fail(&b);
    advance(ms(5000)).await;
    for i in 1..=3 {
        let p = b.try_acquire().expect("probe");
        assert!(p.is_probe());
        // one slot: a second caller is refused while the probe runs
        let busy = rejected(&b);
        assert_eq!(busy.state(), BreakerState::HalfOpen);
        p.record(Outcome::Success, MS);
        let expected = if i < 3 {
            BreakerState::HalfOpen
        } else {
            BreakerState::Closed
        };
        assert_eq!(b.state(), expected);
    }
}

#[tokio::test(start_paused = true)]
async fn any_probe_failure_reopens_for_a_longer_period() {
    let b = exact("a")
        .consecutive_failures(1)
        .open_duration(ms(1000))
        .half_open_probes(2)
        .half_open_success_threshold(2)
        .build()
        .expect("valid");
    fail(&b);
    advance(ms(1000)).await;
    let p1 = b.try_acquire().expect("probe");
    let p2 = b.try_acquire().expect("probe");
    p1.record(Outcome::Success, MS);
    p2.record(Outcome::Failure, MS);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(rejected(&b).retry_after(), ms(2000));
    assert_eq!(b.snapshot().trips, 2);
}

#[tokio::test(start_paused = true)]
async fn a_slow_probe_counts_as_a_failure() {
    let b = exact("a")
        .consecutive_failures(1)
        .slow_calls(ms(100), 1.0)
        .build()
        .expect("valid");
    fail(&b);
    advance(ms(5000)).await;
    b.try_acquire()
        .expect("probe")
        .record(Outcome::Success, ms(100));
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn stuck_probes_reopen_after_max_half_open() {
    let b = exact("a")
        .consecutive_failures(1)
        .open_duration(ms(1000))
        .max_half_open(ms(3000))
        .build()
        .expect("valid");
    fail(&b);
    advance(ms(1000)).await;
    let stuck = b.try_acquire().expect("probe");
    advance(ms(2000)).await;
    let busy = rejected(&b);
    // capped by open_ms, and by the time left in half-open
    assert_eq!(
        (busy.state(), busy.retry_after()),
        (BreakerState::HalfOpen, ms(1000))
    );
    advance(ms(500)).await;
    assert_eq!(rejected(&b).retry_after(), ms(500));
    advance(ms(500)).await;
    // past max_half_open: the next call reopens the breaker (second trip: 2 s)
    let reopened = rejected(&b);
    assert_eq!(
        (reopened.state(), reopened.retry_after()),
        (BreakerState::Open, ms(2000))
    );
    assert_eq!(b.state(), BreakerState::Open);
    // the stuck probe finally succeeds: it belongs to the old half-open and changes nothing
    stuck.record(Outcome::Success, ms(4000));
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.snapshot().trips, 2);
}

#[tokio::test(start_paused = true)]
async fn a_quiet_half_open_period_restarts_instead_of_reopening() {
    let b = exact("a")
        .consecutive_failures(1)
        .open_duration(ms(1000))
        .half_open_success_threshold(2)
        .max_half_open(ms(3000))
        .build()
        .expect("valid");
    fail(&b);
    advance(ms(1000)).await;
    b.try_acquire().expect("probe").record(Outcome::Success, MS);
    drop(b.try_acquire().expect("probe")); // cancelled by its caller
    advance(ms(5000)).await;
    // nothing in flight: a fresh half-open period, successes start over
    let p = b.try_acquire().expect("probe");
    let snap = b.snapshot();
    assert_eq!(
        (snap.state, snap.trips, snap.probe_successes),
        (BreakerState::HalfOpen, 1, 0)
    );
    p.record(Outcome::Success, MS);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    b.try_acquire().expect("probe").record(Outcome::Success, MS);
    assert_eq!(b.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn dropped_and_ignored_probes_release_their_slot_and_record_nothing() {
    let b = exact("a")
        .consecutive_failures(1)
        .half_open_probes(2)
        .half_open_success_threshold(1)
        .build()
        .expect("valid");
    fail(&b);
    advance(ms(5000)).await;
    let p1 = b.try_acquire().expect("probe");
    let p2 = b.try_acquire().expect("probe");
    rejected(&b);
    assert_eq!(b.snapshot().probes_in_flight, 2);
    drop(p1);
    assert_eq!(b.snapshot().probes_in_flight, 1);
    p2.record(Outcome::Ignore, MS);
    let snap = b.snapshot();
    assert_eq!(
        (snap.state, snap.probes_in_flight, snap.probe_successes),
        (BreakerState::HalfOpen, 0, 0)
    );
    // both slots are free again
    let p3 = b.try_acquire().expect("probe");
    let _p4 = b.try_acquire().expect("probe");
    rejected(&b);
    p3.record(Outcome::Success, MS);
    assert_eq!(b.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn calls_admitted_before_a_state_change_do_not_move_the_new_state() {
    let b = exact("a").consecutive_failures(2).build().expect("valid");
    let late = [
        b.try_acquire().expect("admitted"),
        b.try_acquire().expect("admitted"),
    ];
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open);
    advance(ms(5000)).await;
    let late_probe = b.try_acquire().expect("probe");
    // a half-open that times out and reopens; its probe outlives it
    advance(ms(60_000)).await;
    rejected(&b);
    advance(ms(10_000)).await;
    let probe = b.try_acquire().expect("probe of the second half-open");
    assert_eq!(b.snapshot().trips, 2);
    // the old probe fails during the new half-open: ignored
    late_probe.record(Outcome::Failure, MS);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    probe.record(Outcome::Success, MS);
    assert_eq!(b.state(), BreakerState::Closed);
    // failures of calls admitted in the first closed period land in the new one: ignored
    for p in late {
        p.record(Outcome::Failure, MS);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.snapshot().consecutive_failures, 0);
}

// ===== open period: growth, cap, jitter =====

/// Trips `b` (consecutive_failures = 1) `n` times in a row, returning each open period.
async fn trip_repeatedly(b: &CircuitBreaker, n: usize) -> Vec<Duration> {
    let mut periods = Vec::new();
    fail(b);
    for i in 0..n {
        let period = rejected(b).retry_after();
        periods.push(period);
        if i + 1 < n {
            advance(period).await;
            b.try_acquire().expect("probe").record(Outcome::Failure, MS);
        }
    }
    periods
}

#[tokio::test(start_paused = true)]
async fn open_period_grows_with_trips_is_capped_and_resets_on_close() {
    let b = exact("a")
        .consecutive_failures(1)
        .open_duration(ms(100))
        .max_open_duration(ms(1000))
        .build()
        .expect("valid");
    let periods = trip_repeatedly(&b, 6).await;
    assert_eq!(
        periods,
        [ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
    );
    advance(ms(1000)).await;
    b.try_acquire().expect("probe").record(Outcome::Success, MS);
    assert_eq!(b.state(), BreakerState::Closed);
    fail(&b);
    assert_eq!(rejected(&b).retry_after(), ms(100));

    let linear = exact("l")
        .consecutive_failures(1)
        .open_duration(ms(100))
        .backoff(Backoff::Linear)
        .build()
        .expect("valid");
    assert_eq!(
        trip_repeatedly(&linear, 3).await,
        [ms(100), ms(200), ms(300)]
    );
}

#[tokio::test(start_paused = true)]
async fn jittered_periods_stay_within_bounds_and_vary() {
    let b = CircuitBreaker::builder("j")
        .consecutive_failures(1)
        .open_duration(ms(1000))
        .max_open_duration(ms(8000))
        .jitter(0.5)
        .build()
        .expect("valid");
    let policy = b.open_policy();
    let periods = trip_repeatedly(&b, 6).await;
    for (i, p) in periods.iter().enumerate() {
        let (lo, hi) = policy.bounds(i as u32 + 1);
        assert!(
            lo <= *p && *p <= hi,
            "trip {}: {p:?} not in [{lo:?}, {hi:?}]",
            i + 1
        );
    }
    // bounds grow and cap: [500, 1000] ms for the first trip, [4000, 8000] ms from the fourth
    assert_eq!(policy.bounds(1), (ms(500), ms(1000)));
    assert_eq!(policy.bounds(4), (ms(4000), ms(8000)));
    assert_eq!(policy.bounds(9), (ms(4000), ms(8000)));

    // many first trips: all within bounds, and not all equal
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..64 {
        let b = CircuitBreaker::builder(format!("j{i}"))
            .consecutive_failures(1)
            .open_duration(ms(1000))
            .jitter(0.5)
            .build()
            .expect("valid");
        fail(&b);
        let p = rejected(&b).retry_after();
        assert!(ms(500) <= p && p <= ms(1000), "{p:?}");
        seen.insert(p);
    }
    assert!(
        seen.len() > 32,
        "jitter should spread periods, got {} distinct",
        seen.len()
    );
}

// ===== operator handle =====

#[tokio::test(start_paused = true)]
async fn handle_forces_open_closed_disabled_and_resets() {
    let b = exact("a").consecutive_failures(1).build().expect("valid");
    let h = b.handle();
    h.force_open();
    let open = rejected(&b);
    assert_eq!(
        (open.state(), open.retry_after()),
        (BreakerState::ForcedOpen, ms(5000))
    );
    // forced open does not time out
    advance(Duration::from_secs(3600)).await;
    assert_eq!(rejected(&b).state(), BreakerState::ForcedOpen);

    h.force_closed();
    for _ in 0..10 {
        fail(&b);
    }
    assert_eq!(h.state(), BreakerState::ForcedClosed);

    h.disable();
    for _ in 0..10 {
        fail(&b);
    }
    assert_eq!(h.state(), BreakerState::Disabled);

    h.reset();
    assert_eq!(h.state(), BreakerState::Closed);
    fail(&b);
    assert_eq!(h.state(), BreakerState::Open);
    // reset also clears an automatic trip and its history
    h.reset();
    assert_eq!(b.snapshot().trips, 0);
    assert!(b.try_acquire().is_ok());
    assert_eq!(h.name(), "a");
}

// ===== concurrency (real threads, real time) =====

#[test]
fn exactly_n_probes_are_admitted_under_contention() {
    const PROBES: usize = 5;
    const THREADS: usize = 32;
    let b = exact("race")
        .consecutive_failures(1)
        .open_duration(ms(1))
        .half_open_probes(PROBES as u32)
        .half_open_success_threshold(100)
        .build()
        .expect("valid");
    fail(&b);
    std::thread::sleep(ms(5));

    for _round in 0..3 {
        let start = Barrier::new(THREADS);
        let hold = Barrier::new(THREADS);
        let admitted = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    start.wait();
                    let permit = b.try_acquire().ok();
                    if permit.is_some() {
                        admitted.fetch_add(1, Ordering::SeqCst);
                    }
                    // hold every permit until all threads have tried
                    hold.wait();
                    drop(permit);
                });
            }
        });
        assert_eq!(admitted.load(Ordering::SeqCst), PROBES);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert_eq!(
            b.snapshot().probes_in_flight,
            0,
            "dropped probes release their slots"
        );
    }

    // hammer: never more than PROBES in flight
    let in_flight = AtomicUsize::new(0);
    let max_seen = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..2_000 {
                    if let Ok(p) = b.try_acquire() {
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        max_seen.fetch_max(now, Ordering::SeqCst);
                        std::hint::spin_loop();
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        p.record(Outcome::Ignore, MS);
                    }
                }
            });
        }
    });
    assert!(max_seen.load(Ordering::SeqCst) <= PROBES);
    assert!(max_seen.load(Ordering::SeqCst) >= 1);
    assert_eq!(b.snapshot().probes_in_flight, 0);
}

// ===== tower services =====

/// A service whose readiness the test controls; its calls fail with connection refused.
#[derive(Clone)]
struct Flaky {
    ready: Arc<Mutex<bool>>,
    calls: Arc<AtomicUsize>,
}

impl Service<()> for Flaky {
    type Response = ();
    type Error = io::Error;
    type Future = std::future::Ready<Result<(), io::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        if *self.ready.lock().expect("lock") {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn call(&mut self, _req: ()) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err(io::Error::from(io::ErrorKind::ConnectionRefused)))
    }
}

#[tokio::test(start_paused = true)]
async fn poll_ready_only_forwards_inner_readiness_and_open_fails_from_the_future() {
    let breaker = exact("svc").consecutive_failures(2).build().expect("valid");
    let flaky = Flaky {
        ready: Arc::new(Mutex::new(true)),
        calls: Arc::new(AtomicUsize::new(0)),
    };
    let mut svc = breaker.layer().layer(flaky.clone());
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..2 {
        assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        assert!(matches!(svc.call(()).await, Err(BreakerError::Inner(_))));
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    for _ in 0..3 {
        // open, yet poll_ready is Ready(Ok): the rejection comes from the future
        assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        let err = svc.call(()).await.expect_err("open");
        assert_eq!(err.retry_after(), Some(ms(5000)));
        assert!(err.is_open());
    }
    assert_eq!(
        flaky.calls.load(Ordering::SeqCst),
        2,
        "inner not called while open"
    );
    // inner not ready: Pending is forwarded, never turned into an error
    *flaky.ready.lock().expect("lock") = false;
    assert!(svc.poll_ready(&mut cx).is_pending());
}

#[tokio::test(start_paused = true)]
async fn a_dropped_response_future_releases_its_probe_slot() {
    let breaker = exact("svc").consecutive_failures(1).build().expect("valid");
    let mut svc = breaker.layer().layer(service_fn(|fail: bool| async move {
        tokio::time::sleep(ms(10)).await;
        if fail {
            Err(io::Error::other("down"))
        } else {
            Ok(())
        }
    }));
    assert!(svc.ready().await.expect("ready").call(true).await.is_err());
    advance(ms(5000)).await;
    let pending = svc.call(false);
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    assert!(svc.call(false).await.expect_err("slot taken").is_open());
    drop(pending);
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.state, snap.probes_in_flight, snap.probe_successes),
        (BreakerState::HalfOpen, 0, 0)
    );
    svc.call(false).await.expect("probe succeeds");
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn the_state_is_shared_by_every_service_the_layer_makes_and_their_clones() {
    let layer = exact("shared")
        .consecutive_failures(3)
        .build()
        .expect("valid")
        .layer();
    let backend = service_fn(|()| async { Err::<(), _>(io::Error::other("down")) });
    let mut a = layer.layer(backend);
    let mut b = a.clone();
    let mut c = layer.layer(backend);
    let _ = a.call(()).await;
    let _ = b.call(()).await;
    let _ = c.call(()).await;
    assert_eq!(layer.handle().state(), BreakerState::Open);
    assert!(a.call(()).await.expect_err("open").is_open());
}

#[tokio::test(start_paused = true)]
async fn a_closure_classifier_decides_outcomes() {
    let breaker = exact("c").consecutive_failures(1).build().expect("valid");
    // the service "succeeds" with a status code; only 5xx are failures
    let classify = |r: &Result<u16, Infallible>, _: Duration| match r {
        Ok(s) if *s >= 500 => Outcome::Failure,
        _ => Outcome::Success,
    };
    let mut svc = ServiceBuilder::new()
        .layer(breaker.layer().classifier(classify))
        .service(service_fn(|s: u16| async move { Ok::<_, Infallible>(s) }));
    assert_eq!(svc.call(404).await.expect("ok"), 404);
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(svc.call(503).await.expect("ok"), 503);
    assert_eq!(breaker.state(), BreakerState::Open);
}

fn http_backend(
    status: StatusCode,
) -> impl Service<(), Response = Response<Full<Bytes>>, Error = Infallible, Future: Send> + Clone {
    service_fn(move |()| async move {
        let res = Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(b"{}")))
            .expect("response");
        Ok::<_, Infallible>(res)
    })
}

#[tokio::test(start_paused = true)]
async fn http_variant_answers_an_exact_503_and_keeps_the_error_type() {
    let breaker = exact("weather")
        .consecutive_failures(2)
        .open_duration(ms(4200))
        .build()
        .expect("valid");
    let mut svc = breaker
        .http_layer()
        .layer(http_backend(StatusCode::BAD_GATEWAY));
    for _ in 0..2 {
        let res: Result<_, Infallible> = svc.call(()).await;
        assert_eq!(res.expect("infallible").status(), StatusCode::BAD_GATEWAY);
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let res = svc.call(()).await.expect("infallible");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "5"); // 4.2 s rounded up
    assert_eq!(res.headers()["content-type"], "application/json");
    assert_eq!(res.headers().len(), 2);
    let open = res.extensions().get::<CircuitOpen>().expect("extension");
    assert_eq!((open.name(), open.retry_after()), ("weather", ms(4200)));
    let body = res.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(
        body,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Backend weather unavailable (circuit open)"}}"#
    );
    // just before the end of the period: at least 1 second
    advance(ms(4199)).await;
    let res = svc.call(()).await.expect("infallible");
    assert_eq!(res.headers()["retry-after"], "1");
}

#[tokio::test(start_paused = true)]
async fn http_variant_passes_healthy_answers_through() {
    let breaker = exact("ok").consecutive_failures(1).build().expect("valid");
    let mut svc = breaker
        .http_layer()
        .layer(http_backend(StatusCode::NOT_FOUND));
    for _ in 0..5 {
        let res = svc.call(()).await.expect("infallible");
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            res.into_body().collect().await.expect("body").to_bytes(),
            "{}"
        );
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
}

// ===== metrics =====

#[derive(Default)]
struct TestRecorder {
    values: Mutex<HashMap<String, Arc<AtomicU64>>>,
}

impl TestRecorder {
    fn render(key: &Key) -> String {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        format!("{}{{{}}}", key.name(), labels.join(","))
    }

    fn cell(&self, name: &str) -> Arc<AtomicU64> {
        let mut values = self.values.lock().expect("lock");
        Arc::clone(values.entry(name.to_owned()).or_default())
    }

    fn counter(&self, name: &str) -> u64 {
        self.cell(name).load(Ordering::SeqCst)
    }

    fn gauge(&self, name: &str) -> f64 {
        f64::from_bits(self.cell(name).load(Ordering::SeqCst))
    }

    fn registered(&self, name: &str) -> bool {
        self.values.lock().expect("lock").contains_key(name)
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.cell(&Self::render(key)))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.cell(&Self::render(key)))
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

fn paused_runtime<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn metrics_count_calls_rejections_transitions_and_state() {
    let rec = TestRecorder::default();
    metrics::with_local_recorder(&rec, || {
        paused_runtime(async {
            let b = exact("m")
                .consecutive_failures(2)
                .slow_calls(ms(100), 1.0)
                .count_window(100)
                .minimum_calls(100)
                .build()
                .expect("valid");
            assert_eq!(rec.gauge("mcp_breaker_state{breaker=m}"), 0.0);
            b.try_acquire()
                .expect("ok")
                .record(Outcome::Success, ms(150));
            b.try_acquire().expect("ok").record(Outcome::Ignore, MS);
            fail(&b);
            fail(&b);
            rejected(&b);
            rejected(&b);
            assert_eq!(rec.gauge("mcp_breaker_state{breaker=m}"), 1.0);
            advance(ms(5000)).await;
            let probe = b.try_acquire().expect("probe");
            assert_eq!(rec.gauge("mcp_breaker_state{breaker=m}"), 2.0);
            drop(probe); // records nothing
            b.try_acquire().expect("probe").record(Outcome::Success, MS);
            b.handle().force_open();
            assert_eq!(rec.gauge("mcp_breaker_state{breaker=m}"), 3.0);
            b.handle().disable();
            fail(&b); // disabled: not even metrics
            b.handle().force_closed();
            fail(&b); // forced closed: metrics only
        });
    });
    let c = |s: &str| rec.counter(s);
    assert_eq!(c("mcp_breaker_calls_total{breaker=m,outcome=success}"), 2);
    assert_eq!(c("mcp_breaker_calls_total{breaker=m,outcome=failure}"), 3);
    assert_eq!(c("mcp_breaker_calls_total{breaker=m,outcome=ignored}"), 1);
    assert_eq!(c("mcp_breaker_slow_calls_total{breaker=m}"), 1);
    assert_eq!(c("mcp_breaker_rejections_total{breaker=m}"), 2);
    let t = |from: &str, to: &str| {
        c(&format!(
            "mcp_breaker_transitions_total{{breaker=m,from={from},to={to}}}"
        ))
    };
    assert_eq!(t("closed", "open"), 1);
    assert_eq!(t("open", "half_open"), 1);
    assert_eq!(t("half_open", "closed"), 1);
    assert_eq!(t("closed", "forced_open"), 1);
    assert_eq!(t("forced_open", "disabled"), 1);
    assert_eq!(t("disabled", "forced_closed"), 1);
    assert_eq!(rec.gauge("mcp_breaker_state{breaker=m}"), 4.0);
}

#[test]
fn a_registry_caps_the_distinct_breaker_labels_and_keeps_the_names() {
    let rec = TestRecorder::default();
    metrics::with_local_recorder(&rec, || {
        paused_runtime(async {
            let registry = BreakerRegistry::new().max_metric_labels(2);
            let config = BreakerConfig::default();
            let mut breakers = Vec::new();
            for (key, name) in [
                ("alice/a", "a"),
                ("bob/a", "a"),
                ("alice/b", "b"),
                ("alice/c", "c"),
                ("alice/d", "d"),
            ] {
                let breaker = registry
                    .get_or_insert_named(key, name, &config)
                    .expect("valid");
                fail(&breaker);
                breakers.push(breaker);
            }
            // Replaced after an edit: a name that had its own label keeps it.
            let mut edited = config.clone();
            edited.open_ms += 1;
            fail(
                &registry
                    .get_or_insert_named("alice/a", "a", &edited)
                    .expect("valid"),
            );
            assert_eq!(breakers[3].name(), "c", "errors and logs keep the name");
        });
    });
    let failures = |label: &str| {
        rec.counter(&format!(
            "mcp_breaker_calls_total{{breaker={label},outcome=failure}}"
        ))
    };
    assert_eq!(failures("a"), 3);
    assert_eq!(failures("b"), 1);
    assert_eq!(failures("other"), 2, "c and d past the cap of 2");
    assert!(!rec.registered("mcp_breaker_calls_total{breaker=c,outcome=failure}"));
    assert!(!rec.registered("mcp_breaker_calls_total{breaker=d,outcome=failure}"));
}

#[test]
fn a_registry_without_state_gauges_leaves_the_state_to_the_application() {
    let rec = TestRecorder::default();
    metrics::with_local_recorder(&rec, || {
        paused_runtime(async {
            let registry = BreakerRegistry::new().without_state_gauges();
            let config = BreakerConfig::default();
            let alice = registry
                .get_or_insert_named("alice/m", "m", &config)
                .expect("valid");
            let bob = registry
                .get_or_insert_named("bob/m", "m", &config)
                .expect("valid");
            for _ in 0..5 {
                fail(&alice);
            }
            assert_eq!(alice.state(), BreakerState::Open);
            bob.try_acquire()
                .expect("closed")
                .record(Outcome::Success, MS);
        });
    });
    assert!(
        !rec.registered("mcp_breaker_state{breaker=m}"),
        "no gauge per name"
    );
    // The counters add up across the breakers of one name.
    assert_eq!(
        rec.counter("mcp_breaker_calls_total{breaker=m,outcome=failure}"),
        5
    );
    assert_eq!(
        rec.counter("mcp_breaker_calls_total{breaker=m,outcome=success}"),
        1
    );
}

// ===== registry =====

#[tokio::test(start_paused = true)]
async fn registry_hands_out_one_breaker_per_key() {
    let reg = BreakerRegistry::new();
    let cfg = BreakerConfig {
        consecutive_failures: 1,
        ..Default::default()
    };
    let a = reg
        .get_or_insert_named("https://10.0.0.1/mcp", "weather", &cfg)
        .expect("valid");
    let clone = reg.clone();
    fail(
        &clone
            .get_or_insert_named("https://10.0.0.1/mcp", "weather", &cfg)
            .expect("valid"),
    );
    assert_eq!(a.state(), BreakerState::Open);
    assert_eq!(
        rejected(&a).message(),
        "Backend weather unavailable (circuit open)"
    );
    let other = reg.get_or_insert("search", &cfg).expect("valid");
    assert_eq!(other.state(), BreakerState::Closed);
    let bad = BreakerConfig { open_ms: 0, ..cfg };
    assert!(reg.get_or_insert("bad", &bad).is_err());
    let snaps = reg.snapshots();
    let keys: Vec<&str> = snaps.iter().map(|(k, _)| &**k).collect();
    assert_eq!(keys, ["https://10.0.0.1/mcp", "search"]);
    assert_eq!(snaps[0].1.state, BreakerState::Open);
    reg.retain(|k, _| k == "search");
    assert_eq!(reg.len(), 1);
    assert!(reg.remove("search").is_some());
    assert!(reg.is_empty());
}

// ===== the response future =====

#[tokio::test(start_paused = true)]
async fn latency_covers_the_whole_inner_future() {
    let breaker = exact("lat")
        .consecutive_failures(0)
        .slow_calls(ms(200), 1.0)
        .count_window(1)
        .minimum_calls(1)
        .build()
        .expect("valid");
    let mut svc = breaker.layer().layer(service_fn(|d: u64| async move {
        tokio::time::sleep(ms(d)).await;
        Ok::<_, Infallible>(())
    }));
    let started = Instant::now();
    svc.call(199).await.expect("ok");
    assert_eq!(breaker.state(), BreakerState::Closed);
    svc.call(200).await.expect("ok");
    assert_eq!(started.elapsed(), ms(399));
    assert_eq!(breaker.state(), BreakerState::Open);
}

fn _futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let b = exact("s").build().expect("valid");
    let mut svc = b
        .layer()
        .layer(service_fn(|()| async { Ok::<_, io::Error>(()) }));
    send(&svc.call(()));
    let mut http = b.http_layer().layer(http_backend(StatusCode::OK));
    send(&http.call(()));
    send(&b.try_acquire());
    let boxed: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(svc.call(()));
    drop(boxed);
}

#[test]
fn breaker_errors_box_even_over_boxed_inner_errors() {
    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    let inner: BreakerError<BoxError> = BreakerError::Inner("refused".into());
    let boxed: BoxError = inner.into();
    assert_eq!(boxed.to_string(), "refused");
    let open: BoxError = BreakerError::<BoxError>::Open {
        retry_after: ms(1500),
    }
    .into();
    assert_eq!(open.to_string(), "circuit open; retry after 1.5s");
    let e = BreakerError::Inner(io::Error::from(io::ErrorKind::TimedOut));
    assert!(!e.is_open() && e.retry_after().is_none());
    assert_eq!(
        e.into_inner().map(|e| e.kind()),
        Some(io::ErrorKind::TimedOut)
    );
}

// ===== deferred classification (AtEnd) =====

/// A streamed answer that records its permit when read to the end.
#[derive(Debug)]
struct Streamed {
    permit: Option<Permit>,
    breaks: bool,
}

impl CarryPermit for Streamed {
    fn carry_permit(&mut self, permit: Permit) {
        self.permit = Some(permit);
    }
}

impl Streamed {
    fn end(mut self) {
        let outcome = if self.breaks {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        if let Some(permit) = self.permit.take() {
            permit.record_elapsed(outcome);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn at_end_defers_answers_and_classifies_errors_at_once() {
    let b = exact("stream")
        .consecutive_failures(2)
        .build()
        .expect("valid");
    let svc = ServiceBuilder::new()
        .layer(b.layer().classifier(AtEnd(DefaultClassifier)))
        .service(service_fn(|breaks: Option<bool>| async move {
            match breaks {
                Some(breaks) => Ok(Streamed {
                    permit: None,
                    breaks,
                }),
                None => Err(io::Error::from(io::ErrorKind::ConnectionRefused)),
            }
        }));
    // Two good heads whose streams break: nothing counts until each stream ends.
    let first = svc.clone().oneshot(Some(true)).await.expect("head");
    let second = svc.clone().oneshot(Some(true)).await.expect("head");
    assert!(first.permit.is_some() && second.permit.is_some());
    assert_eq!(b.snapshot().consecutive_failures, 0);
    first.end();
    assert_eq!(b.snapshot().consecutive_failures, 1);
    second.end();
    assert_eq!(b.state(), BreakerState::Open, "broken streams trip it");

    // An error is classified when the future completes (nothing to carry a permit).
    let b = exact("errors")
        .consecutive_failures(1)
        .build()
        .expect("valid");
    let svc = ServiceBuilder::new()
        .layer(b.layer().classifier(AtEnd(DefaultClassifier)))
        .service(service_fn(|(): ()| async {
            Err::<Streamed, _>(io::Error::from(io::ErrorKind::ConnectionRefused))
        }));
    svc.oneshot(()).await.expect_err("refused");
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn at_end_answer_dropped_unread_records_nothing_and_frees_the_probe() {
    let b = exact("probe")
        .consecutive_failures(1)
        .open_duration(ms(100))
        .build()
        .expect("valid");
    fail(&b);
    advance(ms(100)).await;
    let svc = ServiceBuilder::new()
        .layer(b.layer().classifier(AtEnd(DefaultClassifier)))
        .service(service_fn(|(): ()| async {
            Ok::<_, io::Error>(Streamed {
                permit: None,
                breaks: false,
            })
        }));
    let answer = svc.clone().oneshot(()).await.expect("probe admitted");
    assert_eq!(b.state(), BreakerState::HalfOpen);
    // The probe's answer is still streaming: its slot is taken.
    assert!(b.try_acquire().is_err());
    drop(answer);
    // Dropped unread (the client went away): says nothing, the slot is free again.
    svc.oneshot(()).await.expect("next probe admitted").end();
    assert_eq!(b.state(), BreakerState::Closed);
}
