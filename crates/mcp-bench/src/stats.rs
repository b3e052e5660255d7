//! [`Summary`]: throughput and latency percentiles of a load run.

use serde::{Deserialize, Serialize};

use crate::load::LoadResult;

/// Throughput and latency of one load run (latencies in microseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Successful iterations per second of the measured window.
    pub rps: f64,
    /// Successful iterations measured.
    pub ops: u64,
    /// Failed iterations.
    pub errors: u64,
    /// Median latency.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest latency.
    pub max_us: f64,
    /// Mean latency.
    pub mean_us: f64,
}

impl Summary {
    /// The summary of `result`.
    #[must_use]
    pub fn of(result: &LoadResult) -> Self {
        let h = &result.histogram;
        let us = |nanos: u64| nanos as f64 / 1_000.0;
        let seconds = result.window.as_secs_f64();
        Self {
            rps: if seconds > 0.0 {
                result.ops as f64 / seconds
            } else {
                0.0
            },
            ops: result.ops,
            errors: result.errors,
            p50_us: us(h.value_at_quantile(0.50)),
            p90_us: us(h.value_at_quantile(0.90)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1_000.0,
        }
    }
}
