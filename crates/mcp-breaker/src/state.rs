//! [`BreakerState`]: the states of a breaker.

use std::fmt;

/// The state of a [`CircuitBreaker`](crate::CircuitBreaker).
///
/// `Closed`, `Open` and `HalfOpen` are driven by recorded outcomes; the other three are set by an
/// operator through a [`BreakerHandle`](crate::BreakerHandle) and stay until the next operator
/// action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls pass; outcomes are recorded and may trip the breaker.
    Closed,
    /// Calls are rejected until the open period ends; the next call after it moves the breaker to
    /// half-open.
    Open,
    /// A bounded number of probe calls pass; enough successes close the breaker, any failure
    /// reopens it.
    HalfOpen,
    /// Operator override: every call is rejected.
    ForcedOpen,
    /// Operator override: every call passes; outcomes are counted in metrics but never trip.
    ForcedClosed,
    /// Operator override: every call passes and nothing is recorded, not even metrics.
    Disabled,
}

impl BreakerState {
    /// All states, in gauge order.
    pub const ALL: [Self; 6] = [
        Self::Closed,
        Self::Open,
        Self::HalfOpen,
        Self::ForcedOpen,
        Self::ForcedClosed,
        Self::Disabled,
    ];

    /// The snake_case name used in logs and metric labels (`closed`, `open`, `half_open`,
    /// `forced_open`, `forced_closed`, `disabled`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
            Self::ForcedOpen => "forced_open",
            Self::ForcedClosed => "forced_closed",
            Self::Disabled => "disabled",
        }
    }

    /// The value of the `mcp_breaker_state` gauge: closed 0, open 1, half_open 2, forced_open 3,
    /// forced_closed 4, disabled 5.
    pub const fn gauge_value(self) -> f64 {
        self.bits() as f64
    }

    /// Whether the state rejects calls outright (`Open` before its period ends, `ForcedOpen`).
    /// `HalfOpen` admits probes, so it is not "open" here.
    pub const fn is_open(self) -> bool {
        matches!(self, Self::Open | Self::ForcedOpen)
    }

    pub(crate) const fn bits(self) -> u64 {
        match self {
            Self::Closed => 0,
            Self::Open => 1,
            Self::HalfOpen => 2,
            Self::ForcedOpen => 3,
            Self::ForcedClosed => 4,
            Self::Disabled => 5,
        }
    }

    pub(crate) const fn from_bits(bits: u64) -> Self {
        match bits {
            1 => Self::Open,
            2 => Self::HalfOpen,
            3 => Self::ForcedOpen,
            4 => Self::ForcedClosed,
            5 => Self::Disabled,
            _ => Self::Closed,
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        for s in BreakerState::ALL {
            assert_eq!(BreakerState::from_bits(s.bits()), s);
        }
        assert_eq!(BreakerState::HalfOpen.to_string(), "half_open");
        assert!(BreakerState::ForcedOpen.is_open() && !BreakerState::HalfOpen.is_open());
    }
}
