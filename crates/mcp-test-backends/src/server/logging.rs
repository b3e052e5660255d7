//! When a handler may send `notifications/message`.
//!
//! Modern requests opt in per request with `_meta["io.modelcontextprotocol/logLevel"]`, and get
//! no log messages without it. Legacy sessions log at every level until `logging/setLevel` raises
//! the threshold.

// Logging is deprecated by SEP-2577, but both protocol eras this crate serves still define it.
#![expect(
    deprecated,
    reason = "SEP-2577 deprecates logging; the backends still implement it"
)]

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::{RoleServer, model::LoggingLevel, service::RequestContext};

use super::is_modern;

/// The threshold a legacy session set with `logging/setLevel` (`None`: everything is sent).
pub(crate) type SessionLogLevel = Arc<Mutex<Option<LoggingLevel>>>;

pub(crate) fn set_session_level(session: &SessionLogLevel, level: LoggingLevel) {
    *session.lock().unwrap_or_else(PoisonError::into_inner) = Some(level);
}

/// True when a message at `level` may be sent for this request.
pub(crate) fn enabled(
    session: &SessionLogLevel,
    context: &RequestContext<RoleServer>,
    level: LoggingLevel,
) -> bool {
    let threshold = if is_modern(context) {
        match context.meta.log_level() {
            Some(threshold) => threshold,
            None => return false,
        }
    } else {
        match *session.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(threshold) => threshold,
            None => return true,
        }
    };
    severity(level) >= severity(threshold)
}

fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_are_ordered() {
        assert!(severity(LoggingLevel::Info) > severity(LoggingLevel::Debug));
        assert!(severity(LoggingLevel::Emergency) > severity(LoggingLevel::Alert));
    }
}
