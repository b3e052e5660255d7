//! Metric names and the per-breaker handles, through the [`metrics`] facade.
//!
//! Every series carries the label `breaker = <name>`.
//!
//! | name | kind | extra labels | counts |
//! |---|---|---|---|
//! | `mcp_breaker_calls_total` | counter | `outcome` = `success` \| `failure` \| `ignored` | finished calls, as classified (not in `disabled` state) |
//! | `mcp_breaker_slow_calls_total` | counter | | finished calls at or above `slow_call_ms` |
//! | `mcp_breaker_rejections_total` | counter | | calls refused because the breaker was open (or half-open with every probe slot taken) |
//! | `mcp_breaker_transitions_total` | counter | `from`, `to` = a [`BreakerState`] name | state changes |
//! | `mcp_breaker_state` | gauge | | current state: closed 0, open 1, half_open 2, forced_open 3, forced_closed 4, disabled 5 |
//!
//! Handles for calls, rejections and the gauge are registered when the breaker is built, with the
//! recorder in force then: install the recorder (e.g. the Prometheus exporter) before building
//! breakers.
//!
//! Several breakers of one name (one per tenant of a backend) add up in the counters, but would
//! overwrite each other's state gauge: build them
//! [`without_state_gauge`](crate::BreakerBuilder::without_state_gauge) (or from a registry
//! [`without_state_gauges`](crate::BreakerRegistry::without_state_gauges)) and count their
//! states from [`BreakerRegistry::snapshots`](crate::BreakerRegistry::snapshots).

use std::sync::Arc;

use metrics::{Counter, Gauge, counter, describe_counter, describe_gauge, gauge};

use crate::{BreakerState, Outcome};

/// `mcp_breaker_calls_total{breaker, outcome}`.
pub const CALLS_TOTAL: &str = "mcp_breaker_calls_total";
/// `mcp_breaker_slow_calls_total{breaker}`.
pub const SLOW_CALLS_TOTAL: &str = "mcp_breaker_slow_calls_total";
/// `mcp_breaker_rejections_total{breaker}`.
pub const REJECTIONS_TOTAL: &str = "mcp_breaker_rejections_total";
/// `mcp_breaker_transitions_total{breaker, from, to}`.
pub const TRANSITIONS_TOTAL: &str = "mcp_breaker_transitions_total";
/// `mcp_breaker_state{breaker}`.
pub const STATE: &str = "mcp_breaker_state";
/// The label holding the breaker's name.
pub const LABEL_BREAKER: &str = "breaker";

#[derive(Debug)]
pub(crate) struct Metrics {
    name: Arc<str>,
    success: Counter,
    failure: Counter,
    ignored: Counter,
    slow: Counter,
    rejections: Counter,
    /// `None` when the application exports states itself
    /// ([`BreakerBuilder::without_state_gauge`](crate::BreakerBuilder::without_state_gauge)).
    state: Option<Gauge>,
}

impl Metrics {
    pub(crate) fn new(name: &Arc<str>, state_gauge: bool) -> Self {
        describe_counter!(CALLS_TOTAL, "Calls through a circuit breaker, by outcome");
        describe_counter!(
            SLOW_CALLS_TOTAL,
            "Calls through a circuit breaker at or above the slow-call threshold"
        );
        describe_counter!(REJECTIONS_TOTAL, "Calls refused by an open circuit breaker");
        describe_counter!(TRANSITIONS_TOTAL, "Circuit breaker state changes");
        describe_gauge!(
            STATE,
            "Circuit breaker state: 0 closed, 1 open, 2 half_open, 3 forced_open, 4 forced_closed, 5 disabled"
        );
        let calls = |outcome: Outcome| counter!(CALLS_TOTAL, LABEL_BREAKER => Arc::clone(name), "outcome" => outcome.as_str());
        Self {
            name: Arc::clone(name),
            success: calls(Outcome::Success),
            failure: calls(Outcome::Failure),
            ignored: calls(Outcome::Ignore),
            slow: counter!(SLOW_CALLS_TOTAL, LABEL_BREAKER => Arc::clone(name)),
            rejections: counter!(REJECTIONS_TOTAL, LABEL_BREAKER => Arc::clone(name)),
            state: state_gauge.then(|| gauge!(STATE, LABEL_BREAKER => Arc::clone(name))),
        }
    }

    pub(crate) fn call(&self, outcome: Outcome, slow: bool) {
        match outcome {
            Outcome::Success => self.success.increment(1),
            Outcome::Failure => self.failure.increment(1),
            Outcome::Ignore => self.ignored.increment(1),
        }
        if slow {
            self.slow.increment(1);
        }
    }

    pub(crate) fn rejected(&self) {
        self.rejections.increment(1);
    }

    pub(crate) fn state(&self, state: BreakerState) {
        if let Some(gauge) = &self.state {
            gauge.set(state.gauge_value());
        }
    }

    pub(crate) fn transition(&self, from: BreakerState, to: BreakerState) {
        counter!(
            TRANSITIONS_TOTAL,
            LABEL_BREAKER => Arc::clone(&self.name),
            "from" => from.as_str(),
            "to" => to.as_str()
        )
        .increment(1);
        self.state(to);
    }
}
