//! Prometheus metrics through the `metrics` facade; the table of metrics is in the
//! [crate docs](crate#metrics).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use mcp_config_store::CacheStats;
use metrics::{Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub(crate) const REQUESTS: &str = "mcp_gateway_requests_total";
pub(crate) const DURATION: &str = "mcp_gateway_request_duration_seconds";
pub(crate) const IN_FLIGHT: &str = "mcp_gateway_requests_in_flight";
pub(crate) const CONNECTIONS: &str = "mcp_gateway_connections_open";
pub(crate) const CACHE_HITS: &str = "mcp_gateway_config_cache_hits_total";
pub(crate) const CACHE_MISSES: &str = "mcp_gateway_config_cache_misses_total";
pub(crate) const CACHE_ERRORS: &str = "mcp_gateway_config_cache_load_errors_total";
pub(crate) const STORE_READY: &str = "mcp_gateway_config_store_ready";
pub(crate) const BUILD_INFO: &str = "mcp_gateway_build_info";
pub(crate) const SSE_SESSIONS: &str = "mcp_gateway_sse_sessions_open";
pub(crate) const PARKED_CALLS: &str = "mcp_gateway_parked_calls";
pub(crate) const REPLAY_BYTES: &str = "mcp_gateway_replay_bytes";
pub(crate) const NOTIFICATION_STREAMS: &str = "mcp_gateway_notification_streams_open";
pub(crate) const BACKGROUND_RELAYS: &str = "mcp_gateway_background_relays";
pub(crate) const RELAYED_REQUESTS: &str = "mcp_gateway_relayed_requests_waiting";
pub(crate) const STALE_ANSWER_BYTES: &str = "mcp_gateway_stale_answer_bytes";
pub(crate) const UPSTREAM_SESSION_BYTES: &str = "mcp_gateway_upstream_session_bytes";
pub(crate) const LINK_BUFFER_BYTES: &str = "mcp_gateway_link_buffer_bytes";
pub(crate) const BUDGET_HELD: &str = "mcp_gateway_budget_held";
pub(crate) const BUDGET_LIMIT: &str = "mcp_gateway_budget_limit";
pub(crate) const BUDGET_REFUSALS: &str = "mcp_gateway_budget_refusals_total";
pub(crate) const BUDGET_KEPT: &str = "mcp_gateway_budget_kept_bytes";
pub(crate) const BREAKERS: &str = "mcp_gateway_breakers";

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

fn describe() {
    metrics::describe_counter!(
        REQUESTS,
        "HTTP requests answered, by MCP method, virtual host, status and outcome"
    );
    metrics::describe_histogram!(
        DURATION,
        metrics::Unit::Seconds,
        "Time from request to response head"
    );
    metrics::describe_histogram!(
        mcp_router::telemetry::SERVER_OPERATION_DURATION,
        metrics::Unit::Seconds,
        "mcp.server.operation.duration: MCP messages served, to the answer's head, by mcp_method_name, mcp_protocol_version and error_type"
    );
    metrics::describe_histogram!(
        mcp_router::telemetry::CLIENT_OPERATION_DURATION,
        metrics::Unit::Seconds,
        "mcp.client.operation.duration: upstream MCP requests, to the backend's answer, by mcp_method_name and error_type"
    );
    metrics::describe_histogram!(
        mcp_router::telemetry::CLIENT_SESSION_DURATION,
        metrics::Unit::Seconds,
        "mcp.client.session.duration: upstream 2025 sessions this node opened, until it let go of them, by mcp_protocol_version"
    );
    metrics::describe_histogram!(
        mcp_router::telemetry::SERVER_SESSION_DURATION,
        metrics::Unit::Seconds,
        "mcp.server.session.duration: downstream 2025 sessions, from initialize to the DELETE that ended them (on whichever node), by mcp_protocol_version"
    );
    metrics::describe_gauge!(IN_FLIGHT, "Requests whose response head is not sent yet");
    metrics::describe_gauge!(CONNECTIONS, "Open client connections by listener");
    metrics::describe_counter!(
        CACHE_HITS,
        "User config cache hits (including single-flight waiters)"
    );
    metrics::describe_counter!(CACHE_MISSES, "User config cache misses (store reads)");
    metrics::describe_counter!(
        CACHE_ERRORS,
        "User config loads that ended in a store error"
    );
    metrics::describe_gauge!(STORE_READY, "1 when the user config store is reachable");
    metrics::describe_gauge!(BUILD_INFO, "Always 1; the version label tells the build");
    metrics::describe_gauge!(
        SSE_SESSIONS,
        "Open 2024-11-05 SSE streams (virtual hosts with sse_downstream)"
    );
    metrics::describe_gauge!(
        PARKED_CALLS,
        "2025 backends' calls waiting for a 2026-07-28 client's input_required retry"
    );
    metrics::describe_gauge!(
        REPLAY_BYTES,
        "Bytes of events kept for 2025 sessions' Last-Event-ID replay"
    );
    metrics::describe_gauge!(
        NOTIFICATION_STREAMS,
        "Open 2025 GET streams and 2026-07-28 subscriptions/listen streams"
    );
    metrics::describe_gauge!(
        BUDGET_HELD,
        "What every principal holds of a budget on this node, by budget and unit (bytes, slots)"
    );
    metrics::describe_gauge!(
        BUDGET_LIMIT,
        "A budget's per-principal share and node ceiling, by budget, unit and limit (share, ceiling); an unlimited one is not shown"
    );
    metrics::describe_gauge!(
        BREAKERS,
        "The router's circuit breakers (one per tenant and credentials of a backend) by backend name and state, read at each scrape"
    );
    metrics::describe_gauge!(
        BUDGET_KEPT,
        "Bytes every principal holds of a budget past it because they must be kept (a call's response, the one event a stalled bridged session sends), on their principals' shares and not towards the ceiling"
    );
    metrics::describe_counter!(
        BUDGET_REFUSALS,
        "Work a budget refused since the process started, by budget and the limit that was spent (share, ceiling)"
    );
    metrics::describe_gauge!(
        BACKGROUND_RELAYS,
        "2025 POST response streams being relayed (they outlive a disconnect)"
    );
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

/// What 2025 sessions and notification streams hold on this node, read at scrape time.
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
