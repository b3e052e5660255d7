//! Every metric the gateway exports, in one table: its `# HELP` text comes from here, and so does
//! the book's metric table ([`metric_table`], printed by `mcp-gateway metric-table`, written into the telemetry chapter by
//! `cargo xtask metrics-reference`; a test fails when the chapter has drifted), so the two cannot
//! disagree. A test of `/metrics` also fails on a family this table does not name.

use std::fmt::Write as _;

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
pub(crate) const CONFIG_GENERATION: &str = "mcp_gateway_config_generation";
pub(crate) const CONFIG_RELOADS: &str = "mcp_gateway_config_reloads_total";
pub(crate) const NODE_BUS_SUBSCRIBED: &str = "mcp_gateway_node_bus_subscribed";
pub(crate) const NODE_BUS_PUBLISH_FAILURES: &str = "mcp_gateway_node_bus_publish_failures_total";
pub(crate) const AUDIT_DROPPED: &str = "mcp_gateway_audit_dropped_total";

/// What kind of Prometheus family a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// The word of the exposition format's `# TYPE` line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        }
    }
}

/// One metric family.
#[derive(Debug)]
pub(crate) struct Metric {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    /// Whether its histogram observes seconds.
    pub(crate) seconds: bool,
    /// What it tells: its `# HELP` text and the table's description.
    pub(crate) help: &'static str,
    /// Its labels and their values, for the table (Markdown).
    pub(crate) labels: &'static str,
}

const fn metric(
    name: &'static str,
    kind: Kind,
    help: &'static str,
    labels: &'static str,
) -> Metric {
    Metric {
        name,
        kind,
        seconds: false,
        help,
        labels,
    }
}

const fn seconds(name: &'static str, help: &'static str, labels: &'static str) -> Metric {
    Metric {
        name,
        kind: Kind::Histogram,
        seconds: true,
        help,
        labels,
    }
}

use Kind::{Counter, Gauge};

/// Every metric of the gateway's `/metrics`, in the order of the book's table.
pub(crate) const METRICS: &[Metric] = &[
    metric(
        REQUESTS,
        Counter,
        "HTTP requests answered, by MCP method, virtual host, status and outcome",
        "`method` (the MCP method the router read from the message, of either era; before the router answered, that of `Mcp-Method`; `-` without; a method the gateway does not know is `other`), `vhost` (only once the router answered, else `-`: a path segment of an unauthenticated client never becomes a label; past `telemetry.max_vhost_labels` distinct values, `other`), `status`, `outcome` (`ok`, `client_error`, `server_error`)",
    ),
    seconds(
        DURATION,
        "Time from request to response head",
        "`method`, `vhost`, `outcome`",
    ),
    metric(
        IN_FLIGHT,
        Gauge,
        "Requests whose response head is not sent yet",
        "",
    ),
    metric(
        CONNECTIONS,
        Gauge,
        "Open client connections by listener",
        "`listener` (`mcp`, `admin`)",
    ),
    metric(
        CACHE_HITS,
        Counter,
        "User config cache hits (including single-flight waiters)",
        "",
    ),
    metric(
        CACHE_MISSES,
        Counter,
        "User config cache misses (store reads)",
        "",
    ),
    metric(
        CACHE_ERRORS,
        Counter,
        "User config loads that ended in a store error",
        "",
    ),
    metric(
        STORE_READY,
        Gauge,
        "1 when the user config store is reachable, refreshed every 5 s and by /readyz",
        "",
    ),
    metric(
        NODE_BUS_SUBSCRIBED,
        Gauge,
        "1 while this node is subscribed to the node bus (Redis pub/sub between the nodes), 0 while its subscriber connects or reconnects, read at each scrape; absent without a node bus and until the first request starts the subscriber (a node that served nothing has not subscribed and is not unhealthy)",
        "",
    ),
    metric(
        NODE_BUS_PUBLISH_FAILURES,
        Counter,
        "Node bus messages (answers, cancellations, revocations, forwarded retries) Redis did not take from this node; absent without a node bus",
        "",
    ),
    metric(
        CONFIG_GENERATION,
        Gauge,
        "The process configuration generation running: 1 at start, one more per applied reload (also on /readyz)",
        "",
    ),
    metric(
        CONFIG_RELOADS,
        Counter,
        "Reloads of the process configuration (SIGHUP or a change of the watched file), by result",
        "`result` (`applied`; `refused`: a changed key needs a restart; `invalid`: the new configuration does not build)",
    ),
    metric(
        BUILD_INFO,
        Gauge,
        "Always 1; the version label tells the build",
        "`version`",
    ),
    metric(
        SSE_SESSIONS,
        Gauge,
        "Open 2024-11-05 SSE streams (virtual hosts with sse_downstream), read at each scrape",
        "",
    ),
    metric(
        PARKED_CALLS,
        Gauge,
        "2025 backends' calls waiting for a 2026-07-28 client's input_required retry, read at each scrape",
        "",
    ),
    metric(
        REPLAY_BYTES,
        Gauge,
        "Bytes of events kept for 2025 sessions' Last-Event-ID replay, read at each scrape",
        "",
    ),
    metric(
        NOTIFICATION_STREAMS,
        Gauge,
        "Open 2025 GET streams and 2026-07-28 subscriptions/listen streams, read at each scrape",
        "",
    ),
    metric(
        BACKGROUND_RELAYS,
        Gauge,
        "2025 POST response streams being relayed (they outlive a disconnect), read at each scrape",
        "",
    ),
    metric(
        RELAYED_REQUESTS,
        Gauge,
        "Requests of the gateway's own (a linked backend's, or a bridged input request) waiting for a 2025 client's answer, read at each scrape",
        "",
    ),
    metric(
        STALE_ANSWER_BYTES,
        Gauge,
        "Bytes of last good list and discover answers kept for stale-if-error, read at each scrape",
        "",
    ),
    metric(
        LINK_BUFFER_BYTES,
        Gauge,
        "Bytes linked backends (stdio, HTTP+SSE) sent calls that their clients have not read yet, read at each scrape",
        "",
    ),
    metric(
        UPSTREAM_SESSION_BYTES,
        Gauge,
        "Bytes the upstream 2025 sessions kept on this node weigh (mostly backends' initialize results), read at each scrape",
        "",
    ),
    metric(
        BUDGET_HELD,
        Gauge,
        "What every principal holds of a budget on this node together, read at each scrape (book: security chapter, Budgets)",
        "`budget` (its fixed name), `unit` (`bytes`, `slots`; shown when the budget limits it)",
    ),
    metric(
        BUDGET_LIMIT,
        Gauge,
        "A budget's per-principal share and node ceiling; an unlimited one is not shown",
        "`budget`, `unit`, `limit` (`share`, `ceiling`)",
    ),
    metric(
        BUDGET_REFUSALS,
        Counter,
        "Work a budget refused since the process started, by budget and the limit that was spent",
        "`budget`, `limit` (the one that was spent: `share`, `ceiling`)",
    ),
    metric(
        BUDGET_KEPT,
        Gauge,
        "Bytes every principal holds of a budget past it because they must be kept (a call's response, the one event a stalled bridged session sends), on their principals' shares and not towards the ceiling; read at each scrape",
        "`budget`",
    ),
    metric(
        AUDIT_DROPPED,
        Counter,
        "Audit records lost, by reason: the writer's queue was full (a record is dropped rather than make a call wait) or the target refused the write; present from start when the audit trail is on",
        "`reason` (`queue_full`, `write_error`)",
    ),
    seconds(
        mcp_router::telemetry::SERVER_OPERATION_DURATION,
        "mcp.server.operation.duration of the MCP semantic conventions: MCP messages the router served, to the answer's head",
        "`mcp_method_name`, `mcp_protocol_version`, `error_type`",
    ),
    seconds(
        mcp_router::telemetry::CLIENT_OPERATION_DURATION,
        "mcp.client.operation.duration: upstream MCP requests, to the backend's answer",
        "`mcp_method_name`, `error_type`",
    ),
    seconds(
        mcp_router::telemetry::CLIENT_SESSION_DURATION,
        "mcp.client.session.duration: upstream 2025 sessions this node opened, until it let go of them (ended with the last downstream session using it, forgotten after a 404, evicted)",
        "`mcp_protocol_version`",
    ),
    seconds(
        mcp_router::telemetry::SERVER_SESSION_DURATION,
        "mcp.server.session.duration: downstream 2025 sessions, from initialize to the DELETE that ended them (recorded by the node that served the DELETE; a session that expires without a DELETE is not recorded)",
        "`mcp_protocol_version`",
    ),
    metric(
        BREAKERS,
        Gauge,
        "The router's circuit breakers (one per tenant and credentials of a backend) by backend name and state, read at each scrape",
        "`backend` (the backend's name; past `telemetry.max_backend_labels` distinct names, `other`), `state` (`closed`, `open`, `half_open`, `forced_open`, `forced_closed`, `disabled`)",
    ),
    metric(
        mcp_breaker::metric::CALLS_TOTAL,
        Counter,
        "Calls through the router's circuit breakers, by outcome, summed over the breakers of one backend name",
        "`breaker` (the backend's name; past `telemetry.max_backend_labels` distinct names, `other`), `outcome` (`success`, `failure`, `ignored`)",
    ),
    metric(
        mcp_breaker::metric::SLOW_CALLS_TOTAL,
        Counter,
        "Calls through the router's circuit breakers at or above the slow-call threshold",
        "`breaker`",
    ),
    metric(
        mcp_breaker::metric::REJECTIONS_TOTAL,
        Counter,
        "Calls the router's circuit breakers refused because they were open",
        "`breaker`",
    ),
    metric(
        mcp_breaker::metric::TRANSITIONS_TOTAL,
        Counter,
        "State changes of the router's circuit breakers (their per-breaker mcp_breaker_state gauge is left out: one per backend name would show whichever tenant's breaker changed last)",
        "`breaker`, `from`, `to` (a state name)",
    ),
];

/// Every metric family the gateway exports, as the Markdown table of the book's telemetry
/// chapter: name, type, what it tells (also its `# HELP` text) and labels. The binary prints it
/// with `mcp-gateway metric-table`.
///
/// ```
/// let table = mcp_gateway::metric_table();
/// assert!(table.contains("| `mcp_gateway_requests_total` | counter |"));
/// assert!(table.contains("| `mcp_gateway_breakers` | gauge |"));
/// ```
#[must_use]
pub fn metric_table() -> String {
    let mut out = String::from("| metric | type | what it tells | labels |\n|---|---|---|---|\n");
    for metric in METRICS {
        let labels = if metric.labels.is_empty() {
            "none"
        } else {
            metric.labels
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            metric.name,
            metric.kind.as_str(),
            metric.help,
            labels
        );
    }
    out
}
