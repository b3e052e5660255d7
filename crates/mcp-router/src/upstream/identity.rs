//! What the gateway keeps of a backend's description of itself, checked before it is kept: the
//! `InitializeResult` of an upstream 2025 session or of a link's handshake, its
//! `Mcp-Session-Id`, and a link's `DiscoverResult`. A backend cannot make the gateway hold more
//! for a caller than these bounds, whatever it answers (book: docs/src/security.md, "Budgets").

use http::HeaderValue;
use mcp_core::{ProtocolVersion, RawObject};

use super::UpstreamError;

/// The most bytes of a backend's `InitializeResult` kept for an upstream session (its
/// capabilities, server info and instructions; real servers send a few KiB).
pub(crate) const MAX_INITIALIZE_RESULT_BYTES: usize = 256 * 1024;
/// The longest upstream `Mcp-Session-Id` kept (real servers mint UUIDs or 32 hex digits).
pub(crate) const MAX_SESSION_ID_BYTES: usize = 1024;

/// The negotiated version of a backend's `InitializeResult`, once what the gateway keeps of it
/// (the result, the session id, the version copied into every downstream session record) is
/// checked: a known revision of the 2025 era (2024-11-05 to 2025-11-25), and bounded sizes.
pub(crate) fn checked_identity(
    result: &[u8],
    session_id: Option<&HeaderValue>,
) -> Result<String, UpstreamError> {
    if result.len() > MAX_INITIALIZE_RESULT_BYTES {
        return Err(UpstreamError::Malformed(
            "initialize result larger than 256 KiB",
        ));
    }
    if session_id.is_some_and(|id| id.len() > MAX_SESSION_ID_BYTES) {
        return Err(UpstreamError::Malformed(
            "Mcp-Session-Id longer than 1024 bytes",
        ));
    }
    let version = RawObject::parse(std::str::from_utf8(result).unwrap_or("{}"))
        .ok()
        .and_then(|o| o.get_str("protocolVersion"))
        .ok_or(UpstreamError::Malformed(
            "initialize result without protocolVersion",
        ))?;
    match version.parse::<ProtocolVersion>() {
        Ok(known) if known.era() == mcp_core::Era::Legacy => Ok(version),
        _ => Err(UpstreamError::Malformed(
            "initialize result names no known protocol version of the 2025 era",
        )),
    }
}

/// A linked backend's `DiscoverResult`, kept for the link's life: at most
/// [`MAX_INITIALIZE_RESULT_BYTES`] like an `InitializeResult`.
pub(crate) fn checked_discover(result: &[u8]) -> Result<(), UpstreamError> {
    if result.len() > MAX_INITIALIZE_RESULT_BYTES {
        return Err(UpstreamError::Malformed(
            "server/discover result larger than 256 KiB",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_kept_of_an_initialize_result_is_checked() {
        let ok = br#"{"protocolVersion":"2025-06-18","capabilities":{}}"#;
        assert_eq!(
            checked_identity(ok, None).ok().as_deref(),
            Some("2025-06-18")
        );
        for bad in [
            br#"{"protocolVersion":"2099-01-01"}"#.to_vec(),
            br#"{"protocolVersion":"2026-07-28"}"#.to_vec(),
            br#"{"capabilities":{}}"#.to_vec(),
            format!(r#"{{"protocolVersion":"{}"}}"#, "x".repeat(300 * 1024)).into_bytes(),
        ] {
            assert!(
                checked_identity(&bad, None).is_err(),
                "{}",
                String::from_utf8_lossy(&bad[..40.min(bad.len())])
            );
        }
        let long_id = HeaderValue::from_str(&"a".repeat(MAX_SESSION_ID_BYTES + 1)).ok();
        assert!(checked_identity(ok, long_id.as_ref()).is_err());
        let id = HeaderValue::from_static("0123456789abcdef");
        assert!(checked_identity(ok, Some(&id)).is_ok());
    }

    #[test]
    fn a_discover_result_is_kept_up_to_its_bound() {
        assert!(checked_discover(&vec![b' '; MAX_INITIALIZE_RESULT_BYTES]).is_ok());
        assert!(checked_discover(&vec![b' '; MAX_INITIALIZE_RESULT_BYTES + 1]).is_err());
    }
}
