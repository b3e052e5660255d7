//! The gateway's envelope around a backend's MRTR `requestState`.
//!
//! A backend's `requestState` only protects what the backend binds it to, and the backend sees the
//! gateway, not the caller. So the gateway wraps it in its own sealed envelope bound to the caller
//! (issuer, subject), the virtual host, the backend, the method and the upstream name, with an
//! expiry, and unwraps it on the retry: a state replayed by another caller, against another tool,
//! modified, or too old is refused (`-32602`) before anything reaches a backend.
//!
//! The same envelope carries the token of a parked call instead (a 2025 backend's call waiting for
//! a 2026-07-28 client's input, see [`parked`](super::parked)): the retry then resumes that call.

use serde::{Deserialize, Serialize};

use crate::seal::{SealError, Sealer};

const PURPOSE: &str = "mcp-router/request-state/v1";

#[derive(Serialize, Deserialize)]
struct Envelope {
    /// The backend's own requestState, byte for byte.
    #[serde(default)]
    s: String,
    /// The token of a parked call, when the state resumes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<String>,
    /// The node holding that parked call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<String>,
    /// Expiry, Unix seconds.
    e: u64,
}

/// What a gateway `requestState` stands for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// A backend's own `requestState`, to forward on the retry.
    Backend(String),
    /// A call parked on a gateway node, to resume: its token and the node holding it.
    Parked { token: String, node: Option<String> },
}

/// Wraps a backend's `requestState`.
pub(crate) fn wrap(sealer: &Sealer, binding: &[&str], inner: &str, ttl_secs: u64) -> String {
    seal(sealer, binding, inner.to_owned(), None, ttl_secs)
}

/// A `requestState` that resumes the call parked under `token` on `node`.
pub(crate) fn wrap_parked(
    sealer: &Sealer,
    binding: &[&str],
    token: &str,
    node: &str,
    ttl_secs: u64,
) -> String {
    let parked = Some((token.to_owned(), node.to_owned()));
    seal(sealer, binding, String::new(), parked, ttl_secs)
}

fn seal(
    sealer: &Sealer,
    binding: &[&str],
    s: String,
    parked: Option<(String, String)>,
    ttl_secs: u64,
) -> String {
    let (p, n) = parked.map_or((None, None), |(p, n)| (Some(p), Some(n)));
    let envelope = Envelope {
        s,
        p,
        n,
        e: sealer.unix_now().saturating_add(ttl_secs),
    };
    let payload = serde_json::to_vec(&envelope).unwrap_or_default();
    sealer.seal(PURPOSE, binding, &payload)
}

/// Unwraps a `requestState` the gateway minted for this binding.
pub(crate) fn unwrap(sealer: &Sealer, binding: &[&str], handle: &str) -> Result<State, SealError> {
    let payload = sealer.open(PURPOSE, binding, handle)?;
    let envelope: Envelope = serde_json::from_slice(&payload).map_err(|_| SealError::Invalid)?;
    if envelope.e < sealer.unix_now() {
        return Err(SealError::Expired);
    }
    Ok(match envelope.p {
        Some(token) => State::Parked {
            token,
            node: envelope.n,
        },
        None => State::Backend(envelope.s),
    })
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
            unwrap(&sealer, &bind, &handle),
            Ok(State::Backend("backend-state".into()))
        );
        let parked = wrap_parked(&sealer, &bind, "p7", "n1", 60);
        assert_eq!(
            unwrap(&sealer, &bind, &parked),
            Ok(State::Parked {
                token: "p7".into(),
                node: Some("n1".into())
            })
        );
        let other_tool = ["iss", "alice", "vh", "a", "tools/call", "echo"];
        assert_eq!(
            unwrap(&sealer, &other_tool, &handle),
            Err(SealError::Invalid)
        );
        let expired = {
            let payload = serde_json::to_vec(&Envelope {
                s: "x".into(),
                p: None,
                n: None,
                e: sealer.unix_now() - 1,
            })
            .expect("json");
            sealer.seal(PURPOSE, &bind, &payload)
        };
        assert_eq!(unwrap(&sealer, &bind, &expired), Err(SealError::Expired));
        // Past the 60 s lifetime on the sealer's clock, the live handle is expired too.
        let later = sealer
            .clone()
            .with_clock(crate::clock::WallClock::from_fn(|| {
                std::time::SystemTime::now() + std::time::Duration::from_secs(61)
            }));
        assert_eq!(unwrap(&later, &bind, &handle), Err(SealError::Expired));
    }
}
