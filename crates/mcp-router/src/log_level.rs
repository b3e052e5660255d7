//! MCP log levels (RFC 5424 severities, as MCP names them) and the 2026-07-28 `_meta` key that
//! carries a request's level.

/// `_meta` key of a 2026-07-28 request's log level.
pub(crate) const META_KEY: &str = "io.modelcontextprotocol/logLevel";

/// The levels, least severe first.
pub(crate) const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A level's severity index (0 = debug), `None` for an unknown level.
pub(crate) fn severity(level: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_are_ordered() {
        assert_eq!(severity("debug"), Some(0));
        assert!(severity("warning") < severity("error"));
        assert_eq!(severity("loud"), None);
    }
}
