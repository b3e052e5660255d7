//! [`BreakerConfig`]: the serde form of a breaker's settings, its validation and overrides.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default `consecutive_failures` (book: docs/src/gateway.md).
pub const DEFAULT_CONSECUTIVE_FAILURES: u32 = 5;
/// Default `open_ms`: the first open period (book: docs/src/gateway.md).
pub const DEFAULT_OPEN_MS: u64 = 5_000;
/// Default cap of the open period when `max_open_ms` is not set (or `open_ms` if larger).
pub const DEFAULT_MAX_OPEN_MS: u64 = 60_000;
/// Default `half_open_probes` (book: docs/src/gateway.md).
pub const DEFAULT_HALF_OPEN_PROBES: u32 = 1;
/// Default `max_half_open_ms`.
pub const DEFAULT_MAX_HALF_OPEN_MS: u64 = 60_000;
/// Default `minimum_calls`.
pub const DEFAULT_MINIMUM_CALLS: u32 = 10;
/// Default window size (`{ kind = "count", size = 20 }`).
pub const DEFAULT_WINDOW_SIZE: u32 = 20;
/// Default `open_jitter`.
pub const DEFAULT_OPEN_JITTER: f64 = 0.1;

const MAX_COUNT_WINDOW: u32 = 1_000_000;
const MAX_TIME_WINDOW_S: u32 = 86_400;

/// Settings of one breaker, as read from the gateway's TOML `[breaker]` table or a backend's
/// `breaker` object.
///
/// Every key is optional (`#[serde(default)]`), unknown keys are rejected. Defaults:
///
/// | key | default | meaning |
/// |---|---|---|
/// | `consecutive_failures` | `5` | trip after this many failures in a row; `0` turns this trigger off |
/// | `failure_rate` | unset | trip when failures / calls in the window reach this rate, in (0, 1] |
/// | `window` | `{ kind = "count", size = 20 }` | the sliding window of the rate triggers: the last `size` calls (`count`), or the last `size` seconds in one-second buckets (`time`) |
/// | `minimum_calls` | `10` | rate triggers need at least this many calls in the window |
/// | `slow_call_ms` | unset | a call taking at least this long is slow |
/// | `slow_call_rate` | unset | trip when slow calls / calls in the window reach this rate (needs `slow_call_ms`) |
/// | `open_ms` | `5000` | the first open period |
/// | `max_open_ms` | `max(60000, open_ms)` | cap of the growing open period |
/// | `open_backoff` | `"exponential"` | growth per consecutive trip: `constant`, `linear` (× trips), `exponential` (× 2^(trips−1)) |
/// | `open_jitter` | `0.1` | the open period is shortened by a random fraction in `[0, open_jitter)`, in [0, 1) |
/// | `half_open_probes` | `1` | probe calls allowed in flight at once in half-open |
/// | `half_open_success_threshold` | `1` | successful probes needed to close |
/// | `max_half_open_ms` | `60000` | longest half-open period; past it, the next call reopens the breaker if probes are still in flight (stuck), or starts a fresh half-open period (successes reset) if none are |
///
/// At least one trigger must be on (`consecutive_failures > 0`, `failure_rate` or
/// `slow_call_rate`). Durations have millisecond resolution.
///
/// ```
/// use mcp_breaker::{BreakerConfig, WindowKind};
///
/// let cfg: BreakerConfig = toml::from_str(r#"
///     consecutive_failures = 3
///     failure_rate = 0.5
///     window = { kind = "time", size = 10 }
///     open_ms = 1000
/// "#).unwrap();
/// assert_eq!(cfg.window.kind, WindowKind::Time);
/// assert_eq!(cfg.half_open_probes, 1);
/// cfg.validate().unwrap();
///
/// // a backend's `breaker` object overrides single keys
/// let overrides = serde_json::json!({ "open_ms": 250, "window": { "size": 30 } });
/// let merged = cfg.with_overrides(overrides.as_object().unwrap()).unwrap();
/// assert_eq!((merged.open_ms, merged.window.size, merged.window.kind), (250, 30, WindowKind::Time));
/// assert!(cfg.with_overrides(serde_json::json!({ "open": 1 }).as_object().unwrap()).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BreakerConfig {
    /// Failures in a row that trip the breaker; `0` turns this trigger off.
    pub consecutive_failures: u32,
    /// Failure rate over the window that trips the breaker, in (0, 1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    /// The sliding window of the rate triggers.
    pub window: WindowConfig,
    /// Calls the window must hold before a rate trigger may trip.
    pub minimum_calls: u32,
    /// Duration (ms) from which a call counts as slow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_call_ms: Option<u64>,
    /// Slow-call rate over the window that trips the breaker, in (0, 1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_call_rate: Option<f64>,
    /// The first open period (ms).
    pub open_ms: u64,
    /// Cap of the open period (ms); unset means `max(60000, open_ms)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_open_ms: Option<u64>,
    /// How the open period grows with consecutive trips.
    pub open_backoff: Backoff,
    /// Random shortening of each open period, a fraction in [0, 1).
    pub open_jitter: f64,
    /// Probe calls in flight at once in half-open.
    pub half_open_probes: u32,
    /// Successful probes that close the breaker.
    pub half_open_success_threshold: u32,
    /// Longest stay in half-open (ms).
    pub max_half_open_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            consecutive_failures: DEFAULT_CONSECUTIVE_FAILURES,
            failure_rate: None,
            window: WindowConfig::default(),
            minimum_calls: DEFAULT_MINIMUM_CALLS,
            slow_call_ms: None,
            slow_call_rate: None,
            open_ms: DEFAULT_OPEN_MS,
            max_open_ms: None,
            open_backoff: Backoff::default(),
            open_jitter: DEFAULT_OPEN_JITTER,
            half_open_probes: DEFAULT_HALF_OPEN_PROBES,
            half_open_success_threshold: 1,
            max_half_open_ms: DEFAULT_MAX_HALF_OPEN_MS,
        }
    }
}

/// The sliding window of the rate triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct WindowConfig {
    /// Count-based ring or time-based buckets.
    pub kind: WindowKind,
    /// Calls (`count`) or seconds (`time`).
    pub size: u32,
}

impl Default for WindowConfig {
    fn default() -> Self {
        Self {
            kind: WindowKind::Count,
            size: DEFAULT_WINDOW_SIZE,
        }
    }
}

/// Kind of sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WindowKind {
    /// The last `size` recorded calls (a ring; each call evicts the oldest when full).
    #[default]
    Count,
    /// The calls of the last `size` seconds, in one-second buckets: a call leaves the window
    /// between `size − 1` and `size` seconds after it was recorded.
    Time,
}

/// How the open period grows with consecutive trips (trips since the breaker last closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Backoff {
    /// Always `open_ms`.
    Constant,
    /// `open_ms × trips` (Envoy's outlier ejection).
    Linear,
    /// `open_ms × 2^(trips − 1)`.
    #[default]
    Exponential,
}

/// A configuration value that cannot work; names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BreakerConfigError {
    /// A key has an unusable value.
    #[error("breaker.{field}: {reason}")]
    Invalid {
        /// The key, e.g. `failure_rate` or `window.size`.
        field: &'static str,
        /// Why it is unusable.
        reason: &'static str,
    },
    /// Overrides that do not deserialise (unknown key, wrong type).
    #[error("breaker overrides: {0}")]
    Overrides(String),
}

fn invalid(field: &'static str, reason: &'static str) -> BreakerConfigError {
    BreakerConfigError::Invalid { field, reason }
}

fn check_rate(field: &'static str, rate: Option<f64>) -> Result<(), BreakerConfigError> {
    match rate {
        Some(r) if !(r.is_finite() && r > 0.0 && r <= 1.0) => {
            Err(invalid(field, "must be in (0, 1]"))
        }
        _ => Ok(()),
    }
}

impl BreakerConfig {
    /// Checks every key; [`BreakerBuilder::build`](crate::BreakerBuilder::build) calls this.
    pub fn validate(&self) -> Result<(), BreakerConfigError> {
        self.settings().map(|_| ())
    }

    /// This config with the keys of `overrides` (a backend's `breaker` object) replacing its own;
    /// `window` is merged key by key, `null` unsets an optional key. The result is validated.
    pub fn with_overrides(
        &self,
        overrides: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, BreakerConfigError> {
        let mut base = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => return Err(BreakerConfigError::Overrides("unserialisable base".into())),
        };
        for (key, value) in overrides {
            match (base.get_mut(key), value) {
                (Some(serde_json::Value::Object(window)), serde_json::Value::Object(patch))
                    if key == "window" =>
                {
                    for (k, v) in patch {
                        window.insert(k.clone(), v.clone());
                    }
                }
                _ => {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
        let merged: Self = serde_json::from_value(serde_json::Value::Object(base))
            .map_err(|e| BreakerConfigError::Overrides(e.to_string()))?;
        merged.validate()?;
        Ok(merged)
    }

    /// The effective cap of the open period.
    pub fn effective_max_open_ms(&self) -> u64 {
        self.max_open_ms
            .unwrap_or_else(|| DEFAULT_MAX_OPEN_MS.max(self.open_ms))
    }

    pub(crate) fn settings(&self) -> Result<Settings, BreakerConfigError> {
        check_rate("failure_rate", self.failure_rate)?;
        check_rate("slow_call_rate", self.slow_call_rate)?;
        let slow = match (self.slow_call_ms, self.slow_call_rate) {
            (Some(0), _) => return Err(invalid("slow_call_ms", "must be positive")),
            (Some(ms), Some(rate)) => Some((Duration::from_millis(ms), rate)),
            (None, None) => None,
            (None, Some(_)) => {
                return Err(invalid("slow_call_ms", "slow_call_rate needs slow_call_ms"));
            }
            (Some(_), None) => {
                return Err(invalid(
                    "slow_call_rate",
                    "slow_call_ms needs slow_call_rate",
                ));
            }
        };
        let rate_trigger = self.failure_rate.is_some() || slow.is_some();
        if self.consecutive_failures == 0 && !rate_trigger {
            return Err(invalid(
                "consecutive_failures",
                "no trip condition: set consecutive_failures > 0, failure_rate or slow_call_rate",
            ));
        }
        if self.window.size == 0 {
            return Err(invalid("window.size", "must be positive"));
        }
        let too_large = match self.window.kind {
            WindowKind::Count => self.window.size > MAX_COUNT_WINDOW,
            WindowKind::Time => self.window.size > MAX_TIME_WINDOW_S,
        };
        if too_large {
            return Err(invalid(
                "window.size",
                "too large (count ≤ 1000000, time ≤ 86400 s)",
            ));
        }
        if self.minimum_calls == 0 {
            return Err(invalid("minimum_calls", "must be positive"));
        }
        if rate_trigger
            && self.window.kind == WindowKind::Count
            && self.minimum_calls > self.window.size
        {
            return Err(invalid(
                "minimum_calls",
                "cannot exceed window.size of a count window (the rate would never be evaluated)",
            ));
        }
        if self.open_ms == 0 {
            return Err(invalid("open_ms", "must be positive"));
        }
        let max_open_ms = self.effective_max_open_ms();
        if max_open_ms < self.open_ms {
            return Err(invalid("max_open_ms", "must be at least open_ms"));
        }
        if !(self.open_jitter.is_finite() && (0.0..1.0).contains(&self.open_jitter)) {
            return Err(invalid("open_jitter", "must be in [0, 1)"));
        }
        if self.half_open_probes == 0 {
            return Err(invalid("half_open_probes", "must be positive"));
        }
        if self.half_open_success_threshold == 0 {
            return Err(invalid("half_open_success_threshold", "must be positive"));
        }
        if self.max_half_open_ms == 0 {
            return Err(invalid("max_half_open_ms", "must be positive"));
        }
        Ok(Settings {
            consecutive_failures: (self.consecutive_failures > 0)
                .then_some(self.consecutive_failures),
            failure_rate: self.failure_rate,
            window: rate_trigger.then_some(self.window),
            minimum_calls: self.minimum_calls,
            slow,
            open: OpenPolicy {
                base_ms: self.open_ms,
                max_ms: max_open_ms,
                backoff: self.open_backoff,
                jitter: self.open_jitter,
            },
            half_open_probes: self.half_open_probes,
            success_threshold: self.half_open_success_threshold,
            max_half_open: Duration::from_millis(self.max_half_open_ms),
        })
    }
}

/// Validated settings, in the types the state machine uses.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) consecutive_failures: Option<u32>,
    pub(crate) failure_rate: Option<f64>,
    pub(crate) window: Option<WindowConfig>,
    pub(crate) minimum_calls: u32,
    pub(crate) slow: Option<(Duration, f64)>,
    pub(crate) open: OpenPolicy,
    pub(crate) half_open_probes: u32,
    pub(crate) success_threshold: u32,
    pub(crate) max_half_open: Duration,
}

/// The open period for a given trip: `open_ms` grown by the backoff, capped, then shortened by
/// jitter.
///
/// ```
/// use std::time::Duration;
/// use mcp_breaker::{Backoff, BreakerConfig, OpenPolicy};
///
/// let mut cfg = BreakerConfig::default();
/// cfg.open_ms = 1000;
/// cfg.max_open_ms = Some(5000);
/// cfg.open_jitter = 0.2;
/// let p = OpenPolicy::from_config(&cfg);
/// assert_eq!(p.nominal(1), Duration::from_secs(1));
/// assert_eq!(p.nominal(3), Duration::from_secs(4));
/// assert_eq!(p.nominal(4), Duration::from_secs(5)); // capped
/// assert_eq!(p.jittered(3, 0.0), Duration::from_secs(4));
/// assert_eq!(p.jittered(3, 0.5), Duration::from_millis(3600));
/// let (lo, hi) = p.bounds(3);
/// assert_eq!((lo, hi), (Duration::from_millis(3200), Duration::from_secs(4)));
/// cfg.open_backoff = Backoff::Linear;
/// assert_eq!(OpenPolicy::from_config(&cfg).nominal(3), Duration::from_secs(3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpenPolicy {
    base_ms: u64,
    max_ms: u64,
    backoff: Backoff,
    jitter: f64,
}

impl OpenPolicy {
    /// The policy of a config (`open_ms`, `max_open_ms`, `open_backoff`, `open_jitter`); the config
    /// is not validated here.
    pub fn from_config(config: &BreakerConfig) -> Self {
        Self {
            base_ms: config.open_ms,
            max_ms: config.effective_max_open_ms(),
            backoff: config.open_backoff,
            jitter: config.open_jitter,
        }
    }

    /// The first open period (`open_ms`).
    pub fn base(&self) -> Duration {
        Duration::from_millis(self.base_ms)
    }

    /// The open period before jitter for the `trip`-th consecutive trip (1-based; 0 counts as 1).
    pub fn nominal(&self, trip: u32) -> Duration {
        let trip = u64::from(trip.max(1));
        let factor = match self.backoff {
            Backoff::Constant => 1,
            Backoff::Linear => trip,
            Backoff::Exponential => 1u64.checked_shl((trip - 1) as u32).unwrap_or(u64::MAX),
        };
        Duration::from_millis(self.base_ms.saturating_mul(factor).min(self.max_ms))
    }

    /// The open period for `trip` with the random draw `unit` in [0, 1): `nominal × (1 − jitter ×
    /// unit)`. Jitter only shortens, so the cap is never exceeded.
    pub fn jittered(&self, trip: u32, unit: f64) -> Duration {
        let unit = unit.clamp(0.0, 1.0);
        self.nominal(trip).mul_f64(1.0 - self.jitter * unit)
    }

    /// The shortest and longest open period for `trip` (`(nominal × (1 − jitter), nominal)`).
    pub fn bounds(&self, trip: u32) -> (Duration, Duration) {
        (self.jittered(trip, 1.0), self.nominal(trip))
    }
}

/// Whole milliseconds of a duration, rounded up so that a positive duration stays positive.
pub(crate) fn ceil_ms(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(cfg: BreakerConfig) -> &'static str {
        match cfg.validate() {
            Err(BreakerConfigError::Invalid { field, .. }) => field,
            other => panic!("expected an invalid field, got {other:?}"),
        }
    }

    #[test]
    fn defaults_match_design_8_2() {
        let cfg: BreakerConfig = toml::from_str("").expect("empty table");
        assert_eq!(cfg, BreakerConfig::default());
        assert_eq!(cfg.consecutive_failures, 5);
        assert_eq!(cfg.open_ms, 5000);
        assert_eq!(cfg.half_open_probes, 1);
        cfg.validate().expect("defaults are valid");
    }

    #[test]
    fn every_documented_key_parses_and_unknown_keys_are_rejected() {
        let cfg: BreakerConfig = toml::from_str(
            r#"
            consecutive_failures = 0
            failure_rate = 0.5
            window = { kind = "count", size = 50 }
            minimum_calls = 20
            slow_call_ms = 2000
            slow_call_rate = 0.8
            open_ms = 1000
            max_open_ms = 30000
            open_backoff = "linear"
            open_jitter = 0.0
            half_open_probes = 3
            half_open_success_threshold = 2
            max_half_open_ms = 10000
            "#,
        )
        .expect("all keys");
        cfg.validate().expect("valid");
        assert_eq!(cfg.open_backoff, Backoff::Linear);
        assert!(toml::from_str::<BreakerConfig>("consecutive = 1").is_err());
        assert!(toml::from_str::<BreakerConfig>("window = { kind = \"ring\", size = 1 }").is_err());
        assert!(toml::from_str::<BreakerConfig>("window = { size = 1, extra = 2 }").is_err());
    }

    #[test]
    fn validation_names_the_bad_key() {
        let d = BreakerConfig::default;
        assert_eq!(
            field(BreakerConfig {
                failure_rate: Some(0.0),
                ..d()
            }),
            "failure_rate"
        );
        assert_eq!(
            field(BreakerConfig {
                failure_rate: Some(1.5),
                ..d()
            }),
            "failure_rate"
        );
        assert_eq!(
            field(BreakerConfig {
                failure_rate: Some(f64::NAN),
                ..d()
            }),
            "failure_rate"
        );
        assert_eq!(
            field(BreakerConfig {
                slow_call_ms: Some(10),
                slow_call_rate: Some(-0.1),
                ..d()
            }),
            "slow_call_rate"
        );
        assert_eq!(
            field(BreakerConfig {
                slow_call_rate: Some(0.5),
                ..d()
            }),
            "slow_call_ms"
        );
        assert_eq!(
            field(BreakerConfig {
                slow_call_ms: Some(5),
                ..d()
            }),
            "slow_call_rate"
        );
        assert_eq!(
            field(BreakerConfig {
                slow_call_ms: Some(0),
                slow_call_rate: Some(0.5),
                ..d()
            }),
            "slow_call_ms"
        );
        assert_eq!(
            field(BreakerConfig {
                consecutive_failures: 0,
                ..d()
            }),
            "consecutive_failures"
        );
        let zero_window = WindowConfig {
            kind: WindowKind::Time,
            size: 0,
        };
        assert_eq!(
            field(BreakerConfig {
                window: zero_window,
                ..d()
            }),
            "window.size"
        );
        assert_eq!(
            field(BreakerConfig {
                minimum_calls: 0,
                ..d()
            }),
            "minimum_calls"
        );
        assert_eq!(
            field(BreakerConfig {
                failure_rate: Some(0.5),
                minimum_calls: 21,
                ..d()
            }),
            "minimum_calls"
        );
        assert_eq!(field(BreakerConfig { open_ms: 0, ..d() }), "open_ms");
        assert_eq!(
            field(BreakerConfig {
                max_open_ms: Some(10),
                ..d()
            }),
            "max_open_ms"
        );
        assert_eq!(
            field(BreakerConfig {
                open_jitter: 1.0,
                ..d()
            }),
            "open_jitter"
        );
        assert_eq!(
            field(BreakerConfig {
                half_open_probes: 0,
                ..d()
            }),
            "half_open_probes"
        );
        assert_eq!(
            field(BreakerConfig {
                half_open_success_threshold: 0,
                ..d()
            }),
            "half_open_success_threshold"
        );
        assert_eq!(
            field(BreakerConfig {
                max_half_open_ms: 0,
                ..d()
            }),
            "max_half_open_ms"
        );
        // a time window may need more calls than its size in seconds
        let time = WindowConfig {
            kind: WindowKind::Time,
            size: 5,
        };
        BreakerConfig {
            failure_rate: Some(0.5),
            window: time,
            minimum_calls: 100,
            ..d()
        }
        .validate()
        .expect("valid");
        // consecutive off with a rate trigger is fine
        BreakerConfig {
            consecutive_failures: 0,
            failure_rate: Some(0.5),
            ..d()
        }
        .validate()
        .expect("valid");
        let err = BreakerConfig { open_ms: 0, ..d() }
            .validate()
            .expect_err("invalid");
        assert_eq!(err.to_string(), "breaker.open_ms: must be positive");
    }

    #[test]
    fn overrides_replace_keys_unset_options_and_are_validated() {
        let base = BreakerConfig {
            failure_rate: Some(0.5),
            ..Default::default()
        };
        let o = |v: serde_json::Value| v.as_object().cloned().expect("object");
        let m = base
            .with_overrides(&o(
                serde_json::json!({ "failure_rate": null, "consecutive_failures": 2 }),
            ))
            .expect("valid");
        assert_eq!((m.failure_rate, m.consecutive_failures), (None, 2));
        assert!(matches!(
            base.with_overrides(&o(serde_json::json!({ "open_ms": "1s" }))),
            Err(BreakerConfigError::Overrides(_))
        ));
        assert!(matches!(
            base.with_overrides(&o(serde_json::json!({ "open_ms": 0 }))),
            Err(BreakerConfigError::Invalid {
                field: "open_ms",
                ..
            })
        ));
        assert_eq!(
            base.with_overrides(&serde_json::Map::new()),
            Ok(base.clone())
        );
    }

    #[test]
    fn open_policy_grows_and_caps() {
        let cfg = BreakerConfig {
            open_ms: 100,
            max_open_ms: Some(1000),
            ..Default::default()
        };
        let p = OpenPolicy::from_config(&cfg);
        let ms: Vec<u128> = (1..=6).map(|t| p.nominal(t).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.nominal(u32::MAX), Duration::from_millis(1000));
        assert_eq!(p.nominal(0), Duration::from_millis(100));
        let c = OpenPolicy::from_config(&BreakerConfig {
            open_backoff: Backoff::Constant,
            ..cfg
        });
        assert_eq!(c.nominal(9), Duration::from_millis(100));
        assert_eq!(
            BreakerConfig {
                open_ms: 90_000,
                ..Default::default()
            }
            .effective_max_open_ms(),
            90_000
        );
    }

    #[test]
    fn ceil_ms_keeps_positive_durations_positive() {
        assert_eq!(ceil_ms(Duration::from_micros(1)), 1);
        assert_eq!(ceil_ms(Duration::from_millis(7)), 7);
        assert_eq!(ceil_ms(Duration::from_micros(7001)), 8);
        assert_eq!(ceil_ms(Duration::ZERO), 0);
    }
}
