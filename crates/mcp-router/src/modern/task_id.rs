//! Gateway task ids (tasks extension): the backend's raw task id sealed together with the
//! backend's name, bound to the caller and the virtual host.
//!
//! A task id names no backend, and follow-ups (`tasks/get|update|cancel`) carry only the id, so
//! the gateway hands out its own: unguessable, routable back to the owning backend, and refused
//! for any other caller (the spec requires every task request to be authorised; a task id is
//! never authentication).

use serde::{Deserialize, Serialize};

use crate::seal::{SealError, Sealer};

const PURPOSE: &str = "mcp-router/task/v1";

#[derive(Serialize, Deserialize)]
struct Payload {
    /// The backend's name.
    b: String,
    /// The backend's own task id.
    t: String,
}

/// The gateway id of a backend task.
pub(crate) fn seal(sealer: &Sealer, binding: &[&str], backend: &str, raw: &str) -> String {
    let payload = Payload {
        b: backend.to_owned(),
        t: raw.to_owned(),
    };
    sealer.seal(
        PURPOSE,
        binding,
        &serde_json::to_vec(&payload).unwrap_or_default(),
    )
}

/// (backend, raw task id) of a gateway task id minted for this binding.
pub(crate) fn open(
    sealer: &Sealer,
    binding: &[&str],
    id: &str,
) -> Result<(String, String), SealError> {
    let payload = sealer.open(PURPOSE, binding, id)?;
    let payload: Payload = serde_json::from_slice(&payload).map_err(|_| SealError::Invalid)?;
    Ok((payload.b, payload.t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_bound_to_the_caller() {
        let sealer = Sealer::random();
        let alice = ["iss", "alice", "vh"];
        let id = seal(&sealer, &alice, "alpha", "task-123");
        assert!(!id.contains("task-123"), "the raw id is not visible as is");
        assert_eq!(
            open(&sealer, &alice, &id),
            Ok(("alpha".to_owned(), "task-123".to_owned()))
        );
        assert_eq!(
            open(&sealer, &["iss", "bob", "vh"], &id),
            Err(SealError::Invalid)
        );
        assert_eq!(open(&sealer, &alice, "task-123"), Err(SealError::Invalid));
    }
}
