//! MCP protocol revisions and the two eras they belong to.

use std::fmt;
use std::str::FromStr;

/// The two eras of MCP (see book: docs/src/eras.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2024-11-05 … 2025-11-25: `initialize`, `Mcp-Session-Id`, GET stream, DELETE.
    Legacy,
    /// 2026-07-28 and later: stateless, per-request `_meta` and standard headers.
    Modern,
}

/// A protocol revision the gateway knows.
///
/// ```
/// use mcp_core::{Era, ProtocolVersion};
///
/// let v: ProtocolVersion = "2026-07-28".parse().unwrap();
/// assert_eq!(v.era(), Era::Modern);
/// assert_eq!(ProtocolVersion::V2025_06_18.era(), Era::Legacy);
/// assert!("2030-01-01".parse::<ProtocolVersion>().is_err());
/// assert_eq!(ProtocolVersion::LATEST.as_str(), "2026-07-28");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 2024-11-05: the HTTP+SSE transport (deprecated).
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP, sessions; assumed when `MCP-Protocol-Version` is absent.
    V2025_03_26,
    /// 2025-06-18: `MCP-Protocol-Version` header, elicitation, structured output.
    V2025_06_18,
    /// 2025-11-25: priming SSE events, experimental tasks, URL elicitation.
    V2025_11_25,
    /// 2026-07-28: stateless, `server/discover`, MRTR, cache hints, standard headers.
    V2026_07_28,
}

impl ProtocolVersion {
    /// Every known revision, oldest first.
    pub const ALL: [Self; 5] = [
        Self::V2024_11_05,
        Self::V2025_03_26,
        Self::V2025_06_18,
        Self::V2025_11_25,
        Self::V2026_07_28,
    ];
    /// The newest revision.
    pub const LATEST: Self = Self::V2026_07_28;
    /// The newest legacy (session) revision.
    pub const LATEST_LEGACY: Self = Self::V2025_11_25;
    /// What a legacy request without `MCP-Protocol-Version` is assumed to speak.
    pub const ASSUMED_WHEN_ABSENT: Self = Self::V2025_03_26;

    /// The revision's date string, as on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V2024_11_05 => "2024-11-05",
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    /// The era this revision belongs to.
    pub const fn era(self) -> Era {
        match self {
            Self::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// The wire strings of every known revision of one era, oldest first (for `-32022` data).
    pub fn supported_strings(era: Era) -> Vec<&'static str> {
        Self::ALL
            .iter()
            .filter(|v| v.era() == era)
            .map(|v| v.as_str())
            .collect()
    }
}

/// A protocol version string that is not a known revision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown MCP protocol version")]
#[non_exhaustive]
pub struct UnknownProtocolVersion;

impl FromStr for ProtocolVersion {
    type Err = UnknownProtocolVersion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or(UnknownProtocolVersion)
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_and_order_is_chronological() {
        for v in ProtocolVersion::ALL {
            assert_eq!(v.as_str().parse::<ProtocolVersion>(), Ok(v));
        }
        assert!(ProtocolVersion::ALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            ProtocolVersion::supported_strings(Era::Modern),
            vec!["2026-07-28"]
        );
        assert_eq!(ProtocolVersion::supported_strings(Era::Legacy).len(), 4);
    }
}
