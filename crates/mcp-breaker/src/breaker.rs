//! [`CircuitBreaker`]: the shared state machine, its [`Permit`]s, [`BreakerHandle`] and builder.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mcp_core::ErrorObject;
use mcp_core::outcome::{FailureKind, FailureKindOf, NeverSent};
use tokio::time::Instant;

use crate::config::{Settings, ceil_ms};
use crate::metric::Metrics;
use crate::window::Window;
use crate::{
    Backoff, BreakerConfig, BreakerConfigError, BreakerLayer, BreakerState, HttpBreakerLayer,
    OpenPolicy, Outcome, WindowConfig, WindowKind,
};

/// A circuit breaker: one state machine shared (through an `Arc`) by every clone, every
/// [`Permit`], every [`BreakerHandle`] and every service built from its layers.
///
/// Use it through [`layer`](Self::layer) / [`http_layer`](Self::http_layer) around a tower
/// service, or directly: [`try_acquire`](Self::try_acquire) before a call, then
/// [`Permit::record`] after it.
///
/// ```
/// use std::time::Duration;
/// use mcp_breaker::{BreakerState, CircuitBreaker, Outcome};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let breaker = CircuitBreaker::builder("weather").consecutive_failures(2).jitter(0.0).build().unwrap();
/// for _ in 0..2 {
///     let permit = breaker.try_acquire().unwrap();
///     // ... call the backend; it failed
///     permit.record(Outcome::Failure, Duration::from_millis(3));
/// }
/// assert_eq!(breaker.state(), BreakerState::Open);
/// let open = breaker.try_acquire().unwrap_err();
/// assert_eq!(open.retry_after(), Duration::from_secs(5));
/// assert_eq!(open.error_object().message, "Backend weather unavailable (circuit open)");
///
/// tokio::time::advance(Duration::from_secs(5)).await;
/// let probe = breaker.try_acquire().unwrap();
/// assert!(probe.is_probe());
/// assert_eq!(breaker.state(), BreakerState::HalfOpen);
/// probe.record(Outcome::Success, Duration::from_millis(1));
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// # }
/// ```
#[derive(Clone)]
pub struct CircuitBreaker {
    shared: Arc<Shared>,
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.shared.name)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl CircuitBreaker {
    /// A builder with the default [`BreakerConfig`]. `name` labels logs and metrics and is the
    /// `<name>` of the open error message, so use the backend's public name, not its address.
    pub fn builder(name: impl Into<Arc<str>>) -> BreakerBuilder {
        BreakerBuilder {
            name: name.into(),
            metric_label: None,
            config: BreakerConfig::default(),
            state_gauge: true,
        }
    }

    /// A breaker from a (deserialised) config.
    pub fn from_config(
        name: impl Into<Arc<str>>,
        config: &BreakerConfig,
    ) -> Result<Self, BreakerConfigError> {
        Self::builder(name).config(config.clone()).build()
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The current state: one atomic load, no lock.
    ///
    /// The state machine moves lazily: an `Open` breaker whose period is over reports `Open`
    /// until the next [`try_acquire`](Self::try_acquire) moves it to half-open; a half-open breaker
    /// past `max_half_open_ms` reports `HalfOpen` until the next call reopens it. Decide whether to
    /// call a backend with `try_acquire`, not with `state`.
    pub fn state(&self) -> BreakerState {
        self.shared.load().0
    }

    /// The config the breaker was built from.
    pub fn config(&self) -> &BreakerConfig {
        &self.shared.config
    }

    /// An operator handle: read state, force open/closed, disable, reset.
    pub fn handle(&self) -> BreakerHandle {
        BreakerHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Counters and state at this instant (takes the lock).
    pub fn snapshot(&self) -> BreakerSnapshot {
        self.shared.snapshot()
    }

    /// A [`BreakerLayer`] (typed [`BreakerError`](crate::BreakerError), [`DefaultClassifier`](crate::DefaultClassifier))
    /// sharing this breaker.
    pub fn layer(&self) -> BreakerLayer {
        BreakerLayer::new(self.clone())
    }

    /// An [`HttpBreakerLayer`] (503 answer, [`McpClassifier`](crate::McpClassifier)) sharing this
    /// breaker.
    pub fn http_layer(&self) -> HttpBreakerLayer {
        HttpBreakerLayer::new(self.clone())
    }

    /// Asks to make one call.
    ///
    /// - closed (or forced closed, disabled): always a permit;
    /// - open: [`CircuitOpen`] with the rest of the open period, until it is over; then the breaker
    ///   moves to half-open;
    /// - half-open: a *probe* permit while fewer than `half_open_probes` probes are in flight,
    ///   otherwise [`CircuitOpen`]; past `max_half_open_ms` with probes still in flight (stuck)
    ///   the breaker reopens instead, with none in flight a fresh half-open period starts;
    /// - forced open: always [`CircuitOpen`] (retry after `open_ms`).
    ///
    /// Closed and open are decided without a lock. Record the call's outcome with
    /// [`Permit::record`]; dropping the permit instead records nothing and frees a probe slot.
    pub fn try_acquire(&self) -> Result<Permit, CircuitOpen> {
        let (state, generation) = self.shared.load();
        if state != BreakerState::HalfOpen
            && let Some(decision) = self.decide(state, generation, Instant::now())
        {
            return decision;
        }
        self.acquire_locked()
    }

    /// The lock-free decisions; `None` for half-open and for open with its period over.
    fn decide(
        &self,
        state: BreakerState,
        generation: u64,
        now: Instant,
    ) -> Option<Result<Permit, CircuitOpen>> {
        let shared = &self.shared;
        Some(match state {
            BreakerState::Closed => Ok(self.permit(generation, PermitKind::Counted, now)),
            BreakerState::ForcedClosed => Ok(self.permit(generation, PermitKind::MetricsOnly, now)),
            BreakerState::Disabled => Ok(self.permit(generation, PermitKind::Untracked, now)),
            BreakerState::ForcedOpen => Err(shared.reject(state, shared.settings.open.base())),
            BreakerState::Open => {
                let remaining = shared.open_remaining(now);
                if remaining.is_zero() {
                    return None;
                }
                Err(shared.reject(state, remaining))
            }
            BreakerState::HalfOpen => return None,
        })
    }

    fn acquire_locked(&self) -> Result<Permit, CircuitOpen> {
        let shared = &self.shared;
        let mut core = shared.lock();
        let now = Instant::now();
        let (state, generation) = shared.load();
        match state {
            BreakerState::HalfOpen => {}
            BreakerState::Open if shared.open_remaining(now).is_zero() => {
                shared.transition(&mut core, BreakerState::HalfOpen, now, "open period over");
            }
            _ => {
                if let Some(decision) = self.decide(state, generation, now) {
                    return decision;
                }
            }
        }
        let max = shared.settings.max_half_open;
        if now.saturating_duration_since(core.half_open_since) >= max {
            if core.probes_in_flight > 0 {
                let open_for = shared.trip(&mut core, now, "half-open too long (stuck probes)");
                return Err(shared.reject(BreakerState::Open, open_for));
            }
            // Nothing in flight: the half-open period merely went quiet; start a fresh one.
            core.probe_successes = 0;
            core.half_open_since = now;
        }
        let in_half_open = now.saturating_duration_since(core.half_open_since);
        if core.probes_in_flight < shared.settings.half_open_probes {
            core.probes_in_flight += 1;
            let (_, generation) = shared.load();
            return Ok(self.permit(generation, PermitKind::Probe, now));
        }
        let retry_after = (max - in_half_open).min(shared.settings.open.base());
        Err(shared.reject(BreakerState::HalfOpen, retry_after))
    }

    fn permit(&self, generation: u64, kind: PermitKind, now: Instant) -> Permit {
        Permit {
            shared: Some(Arc::clone(&self.shared)),
            generation,
            kind,
            started: now,
        }
    }
}

/// Builds a [`CircuitBreaker`]; every setter mirrors a [`BreakerConfig`] key.
/// Durations have millisecond resolution (rounded up).
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BreakerBuilder {
    name: Arc<str>,
    /// The `breaker` label of its metrics when it is not the name.
    metric_label: Option<Arc<str>>,
    config: BreakerConfig,
    state_gauge: bool,
}

impl BreakerBuilder {
    /// Replaces every setting with `config`.
    pub fn config(mut self, config: BreakerConfig) -> Self {
        self.config = config;
        self
    }

    /// Leaves the `mcp_breaker_state` gauge to the application: for breakers that share a name
    /// (one per tenant of one backend), whose one gauge per name would show whichever changed
    /// last. The counters stay: they add up across such breakers.
    pub fn without_state_gauge(mut self) -> Self {
        self.state_gauge = false;
        self
    }

    /// The value of the `breaker` label of its metrics, when it should not be the name: e.g.
    /// `other` for names past a cap on distinct label values, since names that come from
    /// users' configurations would otherwise let them grow the series without bound (see
    /// [`BreakerRegistry::max_metric_labels`](crate::BreakerRegistry::max_metric_labels)). Logs
    /// and error messages keep the name.
    pub fn metric_label(mut self, label: impl Into<Arc<str>>) -> Self {
        self.metric_label = Some(label.into());
        self
    }

    /// `consecutive_failures`: failures in a row that trip; `0` turns this trigger off.
    pub fn consecutive_failures(mut self, n: u32) -> Self {
        self.config.consecutive_failures = n;
        self
    }

    /// `failure_rate`: failure rate over the window that trips, in (0, 1].
    pub fn failure_rate(mut self, rate: f64) -> Self {
        self.config.failure_rate = Some(rate);
        self
    }

    /// `window = { kind = "count", size = calls }`.
    pub fn count_window(mut self, calls: u32) -> Self {
        self.config.window = WindowConfig {
            kind: WindowKind::Count,
            size: calls,
        };
        self
    }

    /// `window = { kind = "time", size = seconds }` (rounded up to whole seconds).
    pub fn time_window(mut self, length: Duration) -> Self {
        let secs = length.as_secs() + u64::from(length.subsec_nanos() > 0);
        self.config.window = WindowConfig {
            kind: WindowKind::Time,
            size: u32::try_from(secs).unwrap_or(u32::MAX),
        };
        self
    }

    /// `minimum_calls`: calls the window must hold before a rate may trip.
    pub fn minimum_calls(mut self, n: u32) -> Self {
        self.config.minimum_calls = n;
        self
    }

    /// `slow_call_ms` and `slow_call_rate`: calls at or above `threshold` are slow; trip when
    /// the slow rate over the window reaches `rate`.
    pub fn slow_calls(mut self, threshold: Duration, rate: f64) -> Self {
        self.config.slow_call_ms = Some(ceil_ms(threshold));
        self.config.slow_call_rate = Some(rate);
        self
    }

    /// `open_ms`: the first open period.
    pub fn open_duration(mut self, d: Duration) -> Self {
        self.config.open_ms = ceil_ms(d);
        self
    }

    /// `max_open_ms`: cap of the growing open period.
    pub fn max_open_duration(mut self, d: Duration) -> Self {
        self.config.max_open_ms = Some(ceil_ms(d));
        self
    }

    /// `open_backoff`: growth of the open period per consecutive trip.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.open_backoff = backoff;
        self
    }

    /// `open_jitter`: each open period is shortened by a random fraction in `[0, jitter)`.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.config.open_jitter = jitter;
        self
    }

    /// `half_open_probes`: probes in flight at once in half-open.
    pub fn half_open_probes(mut self, n: u32) -> Self {
        self.config.half_open_probes = n;
        self
    }

    /// `half_open_success_threshold`: successful probes that close the breaker.
    pub fn half_open_success_threshold(mut self, n: u32) -> Self {
        self.config.half_open_success_threshold = n;
        self
    }

    /// `max_half_open_ms`: longest stay in half-open.
    pub fn max_half_open(mut self, d: Duration) -> Self {
        self.config.max_half_open_ms = ceil_ms(d);
        self
    }

    /// Validates the settings and creates the shared state (closed).
    pub fn build(self) -> Result<CircuitBreaker, BreakerConfigError> {
        let settings = self.config.settings()?;
        let now = Instant::now();
        let label = self.metric_label.as_ref().unwrap_or(&self.name);
        let metrics = Metrics::new(label, self.state_gauge);
        metrics.state(BreakerState::Closed);
        let seed = std::collections::hash_map::RandomState::new().hash_one(&*self.name);
        Ok(CircuitBreaker {
            shared: Arc::new(Shared {
                core: Mutex::new(Core {
                    consecutive_failures: 0,
                    window: settings.window.map(|w| Window::new(w, now)),
                    trips: 0,
                    probes_in_flight: 0,
                    probe_successes: 0,
                    half_open_since: now,
                }),
                name: self.name,
                config: self.config,
                settings,
                word: AtomicU64::new(pack(0, BreakerState::Closed)),
                open_until: AtomicU64::new(0),
                epoch: now,
                rng: AtomicU64::new(seed),
                metrics,
            }),
        })
    }
}

/// Permission to make one call, from [`CircuitBreaker::try_acquire`].
///
/// Record the outcome with [`record`](Self::record). Dropping the permit unrecorded (the caller's
/// future was cancelled) records nothing; a half-open probe permit frees its slot so another probe
/// may go. A permit issued before a state change (say, a call still running when the breaker
/// tripped) is counted in metrics but no longer moves the state machine.
#[must_use = "dropping a permit records nothing; call `record` with the call's outcome"]
pub struct Permit {
    shared: Option<Arc<Shared>>,
    generation: u64,
    kind: PermitKind,
    started: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PermitKind {
    /// Closed: counts towards tripping.
    Counted,
    /// Half-open: one of the bounded probes.
    Probe,
    /// Forced closed: metrics only.
    MetricsOnly,
    /// Disabled: nothing.
    Untracked,
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("kind", &self.kind)
            .field("generation", &self.generation)
            .field("started", &self.started)
            .finish()
    }
}

impl Permit {
    /// Records the call's outcome and latency (the latency decides "slow").
    pub fn record(mut self, outcome: Outcome, latency: Duration) {
        if let Some(shared) = self.shared.take() {
            shared.record(self.generation, self.kind, outcome, latency);
        }
    }

    /// [`record`](Self::record) with the time since the permit was issued as the latency.
    pub fn record_elapsed(self, outcome: Outcome) {
        let latency = self.elapsed();
        self.record(outcome, latency);
    }

    /// Time since the permit was issued.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Whether this is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.kind == PermitKind::Probe
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take()
            && self.kind == PermitKind::Probe
        {
            shared.release_probe(self.generation);
        }
    }
}

/// The breaker refused a call: it is open (or half-open with every probe slot taken, or forced
/// open). Its [`source`](std::error::Error::source) is `mcp-core`'s [`NeverSent`] marker, so a
/// fallback sees a refused call as never sent without knowing this type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitOpen {
    name: Arc<str>,
    retry_after: Duration,
    state: BreakerState,
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "circuit breaker {} is {}; retry after {:?}",
            self.name, self.state, self.retry_after
        )
    }
}

impl std::error::Error for CircuitOpen {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&NeverSent)
    }
}

impl FailureKindOf for CircuitOpen {
    fn failure_kind(&self) -> FailureKind {
        FailureKind::NeverSent
    }
}

impl CircuitOpen {
    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long until the breaker may admit a call: the rest of the open period; for half-open,
    /// at most `open_ms`; for forced open, `open_ms`.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// [`retry_after`](Self::retry_after) in whole seconds, rounded up, at least 1 (the
    /// `Retry-After` header value).
    pub fn retry_after_secs(&self) -> u64 {
        let d = self.retry_after;
        (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
    }

    /// The state that refused the call (`Open`, `HalfOpen` or `ForcedOpen`).
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// `Backend <name> unavailable (circuit open)`.
    pub fn message(&self) -> String {
        format!("Backend {} unavailable (circuit open)", self.name)
    }

    /// The JSON-RPC error for a caller: internal error (-32603) with [`message`](Self::message).
    pub fn error_object(&self) -> ErrorObject {
        ErrorObject::internal(self.message())
    }
}

/// Operator access to a breaker: read its state, force it open or closed, disable or reset it.
/// Cheap to clone; every clone controls the same breaker.
///
/// ```
/// use mcp_breaker::{BreakerState, CircuitBreaker};
///
/// let breaker = CircuitBreaker::builder("search").build().unwrap();
/// let handle = breaker.handle();
/// handle.force_open();
/// assert!(breaker.try_acquire().is_err());
/// handle.disable();
/// assert_eq!(handle.state(), BreakerState::Disabled);
/// assert!(breaker.try_acquire().is_ok());
/// handle.reset();
/// assert_eq!(handle.state(), BreakerState::Closed);
/// ```
#[derive(Clone)]
pub struct BreakerHandle {
    shared: Arc<Shared>,
}

impl fmt::Debug for BreakerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerHandle")
            .field("name", &self.shared.name)
            .field("state", &self.state())
            .finish()
    }
}

impl BreakerHandle {
    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The current state (one atomic load; see [`CircuitBreaker::state`] on lazy transitions).
    pub fn state(&self) -> BreakerState {
        self.shared.load().0
    }

    /// Counters and state at this instant.
    pub fn snapshot(&self) -> BreakerSnapshot {
        self.shared.snapshot()
    }

    /// Rejects every call until [`reset`](Self::reset), [`force_closed`](Self::force_closed) or
    /// [`disable`](Self::disable).
    pub fn force_open(&self) {
        self.shared
            .operator(BreakerState::ForcedOpen, "forced open");
    }

    /// Admits every call; outcomes are counted in metrics but never trip.
    pub fn force_closed(&self) {
        self.shared
            .operator(BreakerState::ForcedClosed, "forced closed");
    }

    /// Admits every call and records nothing.
    pub fn disable(&self) {
        self.shared.operator(BreakerState::Disabled, "disabled");
    }

    /// Back to closed with empty counters and no trip history (the next trip uses `open_ms`).
    pub fn reset(&self) {
        self.shared.operator(BreakerState::Closed, "reset");
    }
}

/// A breaker's counters at one instant (for health pages and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerSnapshot {
    /// The state.
    pub state: BreakerState,
    /// Consecutive trips since the breaker last closed (drives the open period's growth).
    pub trips: u32,
    /// Failures in a row (closed state).
    pub consecutive_failures: u32,
    /// Calls in the sliding window (0 without a rate trigger).
    pub window_calls: u32,
    /// Failures in the sliding window.
    pub window_failures: u32,
    /// Slow calls in the sliding window.
    pub window_slow_calls: u32,
    /// Probes in flight (half-open).
    pub probes_in_flight: u32,
    /// Successful probes so far (half-open).
    pub probe_successes: u32,
    /// The rest of the open period (open state only).
    pub retry_after: Option<Duration>,
}

// ===== shared state =====

pub(crate) struct Shared {
    name: Arc<str>,
    config: BreakerConfig,
    settings: Settings,
    /// `generation << 3 | state`: every state change bumps the generation, so a permit knows
    /// whether the state it was issued in is still current.
    word: AtomicU64,
    /// End of the open period, nanoseconds since `epoch`; written before `word` on a trip.
    open_until: AtomicU64,
    epoch: Instant,
    rng: AtomicU64,
    core: Mutex<Core>,
    metrics: Metrics,
}

struct Core {
    consecutive_failures: u32,
    window: Option<Window>,
    trips: u32,
    probes_in_flight: u32,
    probe_successes: u32,
    half_open_since: Instant,
}

const STATE_BITS: u32 = 3;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;

fn pack(generation: u64, state: BreakerState) -> u64 {
    (generation << STATE_BITS) | state.bits()
}

impl Shared {
    fn load(&self) -> (BreakerState, u64) {
        let word = self.word.load(Ordering::Acquire);
        (
            BreakerState::from_bits(word & STATE_MASK),
            word >> STATE_BITS,
        )
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // The core holds plain counters that are valid after any panic.
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn open_remaining(&self, now: Instant) -> Duration {
        let until = self.open_until.load(Ordering::Relaxed);
        Duration::from_nanos(until.saturating_sub(self.nanos(now)))
    }

    fn reject(&self, state: BreakerState, retry_after: Duration) -> CircuitOpen {
        self.metrics.rejected();
        CircuitOpen {
            name: Arc::clone(&self.name),
            retry_after,
            state,
        }
    }

    /// A uniform draw in [0, 1) (splitmix64 over an atomic counter).
    fn next_unit(&self) -> f64 {
        const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut z = self
            .rng
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn record(&self, generation: u64, kind: PermitKind, outcome: Outcome, latency: Duration) {
        if kind == PermitKind::Untracked {
            return;
        }
        let slow = self.settings.slow.is_some_and(|(t, _)| latency >= t);
        self.metrics.call(outcome, slow);
        if kind == PermitKind::MetricsOnly {
            return;
        }
        if outcome == Outcome::Ignore {
            if kind == PermitKind::Probe {
                self.release_probe(generation);
            }
            return;
        }
        let failure = outcome == Outcome::Failure;
        let mut core = self.lock();
        let now = Instant::now();
        let (state, current) = self.load();
        if current != generation {
            return;
        }
        match (kind, state) {
            (PermitKind::Counted, BreakerState::Closed) => {
                if failure {
                    core.consecutive_failures = core.consecutive_failures.saturating_add(1);
                } else {
                    core.consecutive_failures = 0;
                }
                if let Some(window) = core.window.as_mut() {
                    window.record(now, failure, slow);
                }
                if let Some(reason) = self.trip_reason(&mut core, now) {
                    self.trip(&mut core, now, reason);
                }
            }
            (PermitKind::Probe, BreakerState::HalfOpen) => {
                core.probes_in_flight = core.probes_in_flight.saturating_sub(1);
                if failure {
                    self.trip(&mut core, now, "probe failed");
                } else if slow {
                    self.trip(&mut core, now, "probe slow");
                } else {
                    core.probe_successes += 1;
                    if core.probe_successes >= self.settings.success_threshold {
                        self.transition(&mut core, BreakerState::Closed, now, "probes succeeded");
                    }
                }
            }
            _ => {}
        }
    }

    fn trip_reason(&self, core: &mut Core, now: Instant) -> Option<&'static str> {
        let s = &self.settings;
        if s.consecutive_failures
            .is_some_and(|n| core.consecutive_failures >= n)
        {
            return Some("consecutive failures");
        }
        let counts = core.window.as_mut()?.counts(now);
        if counts.calls == 0 || counts.calls < s.minimum_calls {
            return None;
        }
        let calls = f64::from(counts.calls);
        if s.failure_rate
            .is_some_and(|r| f64::from(counts.failures) / calls >= r)
        {
            return Some("failure rate");
        }
        if s.slow
            .is_some_and(|(_, r)| f64::from(counts.slow) / calls >= r)
        {
            return Some("slow-call rate");
        }
        None
    }

    /// Opens the breaker for the next (grown, capped, jittered) period; returns the period.
    fn trip(&self, core: &mut Core, now: Instant, reason: &'static str) -> Duration {
        core.trips = core.trips.saturating_add(1);
        let open_for = self.settings.open.jittered(core.trips, self.next_unit());
        self.open_until
            .store(self.nanos(now + open_for), Ordering::Relaxed);
        self.transition(core, BreakerState::Open, now, reason);
        open_for
    }

    fn release_probe(&self, generation: u64) {
        let mut core = self.lock();
        let (state, current) = self.load();
        if current == generation && state == BreakerState::HalfOpen {
            core.probes_in_flight = core.probes_in_flight.saturating_sub(1);
        }
    }

    fn operator(&self, to: BreakerState, reason: &'static str) {
        let mut core = self.lock();
        self.transition(&mut core, to, Instant::now(), reason);
    }

    /// Enters `to` (under the lock): fresh counters, a new generation, metrics and a log line.
    fn transition(&self, core: &mut Core, to: BreakerState, now: Instant, reason: &'static str) {
        let (from, generation) = self.load();
        core.consecutive_failures = 0;
        if let Some(window) = core.window.as_mut() {
            window.clear(now);
        }
        match to {
            BreakerState::Open => {}
            BreakerState::HalfOpen => {
                core.probes_in_flight = 0;
                core.probe_successes = 0;
                core.half_open_since = now;
            }
            _ => core.trips = 0,
        }
        self.word.store(pack(generation + 1, to), Ordering::Release);
        if from == to {
            return;
        }
        self.metrics.transition(from, to);
        let name = &*self.name;
        match to {
            BreakerState::Open => tracing::warn!(
                breaker = name,
                from = from.as_str(),
                reason,
                trips = core.trips,
                open_ms = self.open_remaining(now).as_millis() as u64,
                "circuit breaker opened"
            ),
            BreakerState::ForcedOpen => {
                tracing::warn!(
                    breaker = name,
                    from = from.as_str(),
                    reason,
                    "circuit breaker forced open"
                )
            }
            _ => tracing::info!(
                breaker = name,
                from = from.as_str(),
                to = to.as_str(),
                reason,
                "circuit breaker state changed"
            ),
        }
    }

    fn snapshot(&self) -> BreakerSnapshot {
        let mut core = self.lock();
        let now = Instant::now();
        let (state, _) = self.load();
        let counts = core
            .window
            .as_mut()
            .map(|w| w.counts(now))
            .unwrap_or_default();
        BreakerSnapshot {
            state,
            trips: core.trips,
            consecutive_failures: core.consecutive_failures,
            window_calls: counts.calls,
            window_failures: counts.failures,
            window_slow_calls: counts.slow,
            probes_in_flight: core.probes_in_flight,
            probe_successes: core.probe_successes,
            retry_after: (state == BreakerState::Open).then(|| self.open_remaining(now)),
        }
    }

    pub(crate) fn open_policy(&self) -> OpenPolicy {
        self.settings.open
    }
}

impl CircuitBreaker {
    /// The open-period policy (base, growth, cap, jitter) of this breaker.
    pub fn open_policy(&self) -> OpenPolicy {
        self.shared.open_policy()
    }
}
