//! The gateway's envelope around a backend's MRTR `requestState`.
//!
//! A backend's `requestState` only protects what the backend binds it to, and the backend sees the
//! gateway, not the caller. So the gateway wraps it in its own sealed envelope bound to the caller
//! (issuer, subject), the virtual host, the backend, the method and the upstream name, with an
//! expiry, and unwraps it on the retry: a state replayed by another caller, against another tool,
//! modified, or too old is refused (`-32602`) before anything reaches a backend.

use serde::{Deserialize, Serialize};

use crate::seal::{SealError, Sealer, unix_now};

const PURPOSE: &str = "mcp-router/request-state/v1";

#[derive(Serialize, Deserialize)]
struct Envelope {
    /// The backend's own requestState, byte for byte.
    s: String,
    /// Expiry, Unix seconds.
    e: u64,
}

/// Wraps a backend's `requestState`.
pub(crate) fn wrap(sealer: &Sealer, binding: &[&str], inner: &str, ttl_secs: u64) -> String {
    let envelope = Envelope {
        s: inner.to_owned(),
        e: unix_now().saturating_add(ttl_secs),
    };
    let payload = serde_json::to_vec(&envelope).unwrap_or_default();
    sealer.seal(PURPOSE, binding, &payload)
}

/// Unwraps a `requestState` the gateway minted for this binding.
pub(crate) fn unwrap(sealer: &Sealer, binding: &[&str], handle: &str) -> Result<String, SealError> {
    let payload = sealer.open(PURPOSE, binding, handle)?;
    let envelope: Envelope = serde_json::from_slice(&payload).map_err(|_| SealError::Invalid)?;
    if envelope.e < unix_now() {
        return Err(SealError::Expired);
    }
    Ok(envelope.s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_binds() {
        let sealer = Sealer::random();
        let bind = ["iss", "alice", "vh", "a", "tools/call", "ask"];
        let handle = wrap(&sealer, &bind, "backend-state", 60);
        assert_eq!(
            unwrap(&sealer, &bind, &handle).as_deref(),
            Ok("backend-state")
        );
        let other_tool = ["iss", "alice", "vh", "a", "tools/call", "echo"];
        assert_eq!(
            unwrap(&sealer, &other_tool, &handle),
            Err(SealError::Invalid)
        );
        let expired = {
            let payload = serde_json::to_vec(&Envelope {
                s: "x".into(),
                e: unix_now() - 1,
            })
            .expect("json");
            sealer.seal(PURPOSE, &bind, &payload)
        };
        assert_eq!(unwrap(&sealer, &bind, &expired), Err(SealError::Expired));
    }
}
