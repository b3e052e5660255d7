//! Prometheus metrics through the `metrics` facade; every family, with its help text and
//! labels, is in [`catalog`] (the book's table is generated from it).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use mcp_config_store::CacheStats;
use metrics::{Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

mod catalog;

pub use catalog::metric_table;
pub(crate) use catalog::*;

/// Latency buckets in seconds: sub-millisecond gateway overhead up to long streamed calls.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Session buckets in seconds: from a session ended at once to a day.
const SESSION_BUCKETS: &[f64] = &[
    1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process's Prometheus handle, installing the recorder on first use; `None` when another
/// recorder was installed before.
pub(crate) fn handle() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let histograms = [
                DURATION,
                mcp_router::telemetry::SERVER_OPERATION_DURATION,
                mcp_router::telemetry::CLIENT_OPERATION_DURATION,
            ];
            let builder = histograms.iter().try_fold(PrometheusBuilder::new(), |builder, name| {
                builder.set_buckets_for_metric(Matcher::Full((*name).to_owned()), BUCKETS)
            });
            let builder = [
                mcp_router::telemetry::CLIENT_SESSION_DURATION,
                mcp_router::telemetry::SERVER_SESSION_DURATION,
            ]
            .iter()
            .fold(builder, |builder, name| {
                builder.and_then(|builder| {
                    builder.set_buckets_for_metric(
                        Matcher::Full((*name).to_owned()),
                        SESSION_BUCKETS,
                    )
                })
            });
            let builder = match builder {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "invalid histogram buckets; using summaries");
                    PrometheusBuilder::new()
                }
            };
            match builder.install_recorder() {
                Ok(handle) => {
                    describe();
                    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a global metrics recorder is already installed; the gateway's metrics go to it and its /metrics stays empty");
                    None
                }
            }
        })
        .clone()
}

/// Gives every family of the catalog its `# HELP` text.
fn describe() {
    for metric in METRICS {
        let help = metric.help;
        match (metric.kind, metric.seconds) {
            (Kind::Counter, _) => metrics::describe_counter!(metric.name, help),
            (Kind::Gauge, _) => metrics::describe_gauge!(metric.name, help),
            (Kind::Histogram, true) => {
                metrics::describe_histogram!(metric.name, metrics::Unit::Seconds, help);
            }
            (Kind::Histogram, false) => metrics::describe_histogram!(metric.name, help),
        }
    }
}

/// `ok` (1xx-3xx), `client_error` (4xx), `server_error` (5xx).
pub(crate) fn outcome(status: u16) -> &'static str {
    match status {
        500.. => "server_error",
        400..=499 => "client_error",
        _ => "ok",
    }
}

/// The per-request metrics, their handles registered once per label set: building the metric
/// keys and looking them up in the recorder on every request cost about 3% of the gateway's
/// instructions per proxied `tools/call`. Label sets are only ever added, as in the recorder
/// itself, and are bounded: MCP methods the router knows, statuses, and at most
/// `max_vhosts` virtual hosts (user configurations name them, so past the cap a new one is
/// counted as [`OTHER_VHOST`]).
pub(crate) struct RequestMetrics {
    in_flight: Gauge,
    /// Virtual host -> (method, status) -> handles.
    series: RwLock<HashMap<String, VhostSeries>>,
    max_vhosts: usize,
}

/// The `vhost` label of virtual hosts past `telemetry.max_vhost_labels` (and the `backend`
/// label of backends past `telemetry.max_backend_labels`).
pub(crate) const OTHER_VHOST: &str = "other";

/// One virtual host's handles by (MCP method, status).
type VhostSeries = HashMap<(&'static str, u16), Series>;

/// The handles of one label set.
struct Series {
    requests: Counter,
    duration: Histogram,
}

impl Series {
    fn register(method: &'static str, vhost: &str, status: u16) -> Self {
        let outcome = outcome(status);
        Self {
            requests: metrics::counter!(
                REQUESTS,
                "method" => method,
                "vhost" => vhost.to_owned(),
                "status" => status.to_string(),
                "outcome" => outcome
            ),
            duration: metrics::histogram!(
                DURATION,
                "method" => method,
                "vhost" => vhost.to_owned(),
                "outcome" => outcome
            ),
        }
    }

    fn record(&self, latency: Duration) {
        self.requests.increment(1);
        self.duration.record(latency.as_secs_f64());
    }
}

impl RequestMetrics {
    /// Handles in the process's recorder, which is installed first (see [`handle`]) so that they
    /// are never the no-op handles of a process without one.
    pub(crate) fn new(max_vhosts: usize) -> Self {
        let _ = handle();
        Self {
            in_flight: metrics::gauge!(IN_FLIGHT),
            series: RwLock::default(),
            max_vhosts: max_vhosts.max(1),
        }
    }

    /// Counts a request in flight until the guard is dropped.
    pub(crate) fn start(&self) -> InFlight {
        self.in_flight.increment(1.0);
        InFlight(self.in_flight.clone())
    }

    /// Records one answered request.
    pub(crate) fn record(&self, method: &'static str, vhost: &str, status: u16, latency: Duration) {
        {
            let series = self.series.read().unwrap_or_else(PoisonError::into_inner);
            let of_vhost = match series.get(vhost) {
                Some(of_vhost) => Some(of_vhost),
                None if series.len() >= self.max_vhosts => series.get(OTHER_VHOST),
                None => None,
            };
            if let Some(known) = of_vhost.and_then(|s| s.get(&(method, status))) {
                known.record(latency);
                return;
            }
        }
        let mut series = self.series.write().unwrap_or_else(PoisonError::into_inner);
        // `other` itself is counted past the cap, so the labels are at most the cap plus one.
        let vhost = if series.contains_key(vhost) || series.len() < self.max_vhosts {
            vhost
        } else {
            OTHER_VHOST
        };
        series
            .entry(vhost.to_owned())
            .or_default()
            .entry((method, status))
            .or_insert_with(|| Series::register(method, vhost, status))
            .record(latency);
    }
}

impl fmt::Debug for RequestMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestMetrics").finish_non_exhaustive()
    }
}

/// Copies the cache counters into their metrics.
pub(crate) fn record_cache(stats: CacheStats) {
    metrics::counter!(CACHE_HITS).absolute(stats.hits);
    metrics::counter!(CACHE_MISSES).absolute(stats.misses);
    metrics::counter!(CACHE_ERRORS).absolute(stats.load_errors);
}

/// Records how many 2024-11-05 SSE streams are open.
pub(crate) fn record_sse_sessions(open: usize) {
    metrics::gauge!(SSE_SESSIONS).set(open as f64);
}

/// Records how many upstream calls wait for a client's `input_required` retry.
pub(crate) fn record_parked_calls(parked: usize) {
    metrics::gauge!(PARKED_CALLS).set(parked as f64);
}

/// What 2025 sessions and notification streams hold on this node, and the state of its node
/// bus, read at scrape time.
pub(crate) struct Held {
    pub(crate) replay_bytes: usize,
    pub(crate) notification_streams: usize,
    pub(crate) background_relays: usize,
    pub(crate) relayed_requests: usize,
    pub(crate) stale_answer_bytes: usize,
    pub(crate) upstream_session_bytes: usize,
    pub(crate) link_buffer_bytes: usize,
    /// Every budget of the node (book: docs/src/security.md, "Budgets").
    pub(crate) budgets: Vec<mcp_core::Budget>,
    /// Whether the node bus subscriber is subscribed; `None` without a bus or before the
    /// subscriber started (`McpRouter::node_bus_subscribed`).
    pub(crate) node_bus_subscribed: Option<bool>,
    /// Messages Redis did not take from the node bus; `None` without a bus.
    pub(crate) node_bus_publish_failures: Option<u64>,
}

/// Records [`Held`].
pub(crate) fn record_held(held: &Held) {
    metrics::gauge!(REPLAY_BYTES).set(held.replay_bytes as f64);
    metrics::gauge!(NOTIFICATION_STREAMS).set(held.notification_streams as f64);
    metrics::gauge!(BACKGROUND_RELAYS).set(held.background_relays as f64);
    metrics::gauge!(RELAYED_REQUESTS).set(held.relayed_requests as f64);
    metrics::gauge!(STALE_ANSWER_BYTES).set(held.stale_answer_bytes as f64);
    metrics::gauge!(UPSTREAM_SESSION_BYTES).set(held.upstream_session_bytes as f64);
    metrics::gauge!(LINK_BUFFER_BYTES).set(held.link_buffer_bytes as f64);
    for budget in &held.budgets {
        record_budget(budget);
    }
    // Not exported until the subscriber started: a node that has served no request has not
    // subscribed, and a 0 would read as an outage (an alert fires on 0). Once started, the
    // subscriber runs as long as the router, so the series never goes away again.
    if let Some(subscribed) = held.node_bus_subscribed {
        metrics::gauge!(NODE_BUS_SUBSCRIBED).set(if subscribed { 1.0 } else { 0.0 });
    }
    if let Some(failures) = held.node_bus_publish_failures {
        metrics::counter!(NODE_BUS_PUBLISH_FAILURES).absolute(failures);
    }
}

/// A budget's use, limits and refusals. A unit shows when the budget limits it (a budget of
/// slots only has no bytes to show); labels are the budget's fixed name, never a caller's.
fn record_budget(budget: &mcp_core::Budget) {
    let name = budget.name();
    let units = [
        (
            "bytes",
            budget.held_bytes(),
            budget.bytes_share(),
            budget.bytes_ceiling(),
        ),
        (
            "slots",
            budget.held_slots(),
            budget.slots_share(),
            budget.slots_ceiling(),
        ),
    ];
    for (unit, held, share, ceiling) in units {
        if share == usize::MAX && ceiling == usize::MAX {
            continue;
        }
        metrics::gauge!(BUDGET_HELD, "budget" => name, "unit" => unit).set(held as f64);
        for (limit, value) in [("share", share), ("ceiling", ceiling)] {
            if value != usize::MAX {
                metrics::gauge!(BUDGET_LIMIT, "budget" => name, "unit" => unit, "limit" => limit)
                    .set(value as f64);
            }
        }
    }
    if budget.bytes_share() != usize::MAX || budget.bytes_ceiling() != usize::MAX {
        metrics::gauge!(BUDGET_KEPT, "budget" => name).set(budget.kept_bytes() as f64);
    }
    let refusals = budget.refusals();
    for (limit, count) in [("share", refusals.share), ("ceiling", refusals.ceiling)] {
        metrics::counter!(BUDGET_REFUSALS, "budget" => name, "limit" => limit).absolute(count);
    }
}

/// The backend name of a key of the router's breaker registry: keys start with
/// `<backend name>\0` (see mcp-router's upstream module).
pub(crate) fn backend_of(key: &str) -> &str {
    key.split('\u{0}').next().unwrap_or_default()
}

/// `mcp_gateway_breakers{backend, state}`: how many of the router's breakers are in each state,
/// by backend name. A breaker is per tenant and credentials, so one gauge per breaker name
/// would show whichever tenant's breaker changed last; counts show them all, with no series per
/// tenant. Backend names come from user configurations: at most `max_backends` get their own
/// label, the rest count as [`OTHER_VHOST`]'s `other`.
pub(crate) struct BreakerCounts {
    max_backends: usize,
    shown: Mutex<Shown>,
}

/// The backend names with a label of their own, and every (backend, state) pair shown so far
/// (set back to 0 once no breaker is in that state).
#[derive(Default)]
struct Shown {
    backends: HashSet<String>,
    pairs: HashSet<(String, &'static str)>,
}

impl BreakerCounts {
    pub(crate) fn new(max_backends: usize) -> Self {
        Self {
            max_backends: max_backends.max(1),
            shown: Mutex::default(),
        }
    }

    /// Sets the gauges from the breakers' states now.
    pub(crate) fn record(&self, breakers: &mcp_breaker::BreakerRegistry) {
        let snapshots = breakers.snapshots();
        let mut shown = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        let mut counts: HashMap<(&str, &'static str), usize> = HashMap::new();
        for (key, snapshot) in &snapshots {
            let name = backend_of(key);
            let own = shown.backends.contains(name)
                || (shown.backends.len() < self.max_backends
                    && shown.backends.insert(name.to_owned()));
            let label = if own { name } else { OTHER_VHOST };
            *counts.entry((label, snapshot.state.as_str())).or_default() += 1;
        }
        for (backend, state) in &shown.pairs {
            if !counts.contains_key(&(backend.as_str(), *state)) {
                metrics::gauge!(BREAKERS, "backend" => backend.clone(), "state" => *state).set(0.0);
            }
        }
        for ((backend, state), count) in counts {
            metrics::gauge!(BREAKERS, "backend" => backend.to_owned(), "state" => state)
                .set(count as f64);
            shown.pairs.insert((backend.to_owned(), state));
        }
    }
}

impl fmt::Debug for BreakerCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerCounts").finish_non_exhaustive()
    }
}

/// Records the configuration generation running.
pub(crate) fn record_config_generation(generation: u64) {
    let _ = handle();
    metrics::gauge!(CONFIG_GENERATION).set(generation as f64);
}

/// Counts one reload by its result (`applied`, `refused`, `invalid`).
pub(crate) fn record_reload(result: &'static str) {
    let _ = handle();
    metrics::counter!(CONFIG_RELOADS, "result" => result).increment(1);
}

/// Records the store's readiness.
pub(crate) fn record_store_ready(ready: bool) {
    metrics::gauge!(STORE_READY).set(if ready { 1.0 } else { 0.0 });
}

/// Counts a request in flight until dropped ([`RequestMetrics::start`]).
pub(crate) struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Counts an open connection until dropped.
pub(crate) struct OpenConnection(&'static str);

impl OpenConnection {
    pub(crate) fn start(listener: &'static str) -> Self {
        metrics::gauge!(CONNECTIONS, "listener" => listener).increment(1.0);
        Self(listener)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        metrics::gauge!(CONNECTIONS, "listener" => self.0).decrement(1.0);
    }
}

/// The Prometheus text of every metric.
pub(crate) fn render(handle: Option<&PrometheusHandle>) -> String {
    match handle {
        Some(handle) => {
            handle.run_upkeep();
            handle.render()
        }
        None => "# The embedding application installed its own metrics recorder; the gateway's metrics are exported there.\n".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes() {
        assert_eq!(outcome(200), "ok");
        assert_eq!(outcome(202), "ok");
        assert_eq!(outcome(404), "client_error");
        assert_eq!(outcome(503), "server_error");
    }
}
