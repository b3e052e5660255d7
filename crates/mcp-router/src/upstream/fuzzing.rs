//! Entry points for the cargo-fuzz targets of `fuzz/` (feature `fuzzing`, not a stable API):
//! what a backend sends that the gateway parses and keeps, checked against the bounds the
//! budgets promise (book: docs/src/security.md, "Budgets").

use http::HeaderValue;
use mcp_core::{Era, ProtocolVersion};

use super::identity::{MAX_INITIALIZE_RESULT_BYTES, MAX_SESSION_ID_BYTES, checked_identity};

/// A linked backend's frames (`data` split on newlines) dispatched to a link with calls in
/// flight: never panics, and once the calls are dropped nothing of them is left on the link.
pub fn link_frames(data: &[u8]) {
    super::link::fuzz_frames(data);
}

/// A backend's `initialize` answer (`data` up to its first NUL byte; the rest is the
/// `Mcp-Session-Id`): what is kept is within its bounds and names a 2025 revision.
///
/// # Panics
///
/// When a result outside those bounds is accepted.
pub fn initialize_result(data: &[u8]) {
    let (result, session) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    let session = session.and_then(|s| HeaderValue::from_bytes(s).ok());
    if let Ok(version) = checked_identity(result, session.as_ref()) {
        assert!(result.len() <= MAX_INITIALIZE_RESULT_BYTES);
        assert!(session.is_none_or(|s| s.len() <= MAX_SESSION_ID_BYTES));
        assert!(
            version
                .parse::<ProtocolVersion>()
                .is_ok_and(|v| v.era() == Era::Legacy),
            "kept version {version:?}"
        );
    }
}
