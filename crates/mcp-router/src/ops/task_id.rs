//! Gateway task ids (tasks extension): the backend's raw task id sealed together with the
//! backend's name and the call that created the task, bound to the caller and the virtual host.
//!
//! A task id names no backend, and follow-ups (`tasks/get|update|cancel`) carry only the id, so
//! the gateway hands out its own: unguessable, opaque (encrypted: the client learns neither the
//! backend nor its raw id), routable back to the owning backend, and refused for any other caller
//! (the spec requires every task request to be authorised; a task id is never authentication).
//! It also remembers the creating call ([`Origin`]): a task's result is that call's result, so
//! the call's post hooks apply to it when a follow-up delivers it.

use mcp_core::Method;
use serde::{Deserialize, Serialize};

use crate::seal::{SealError, Sealer};

/// The tasks extension's capability key.
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

const PURPOSE: &str = "mcp-router/task/v1";

#[derive(Serialize, Deserialize)]
struct Payload {
    /// The backend's name.
    b: String,
    /// The backend's own task id.
    t: String,
    /// The method of the call that created the task.
    m: String,
    /// The upstream name (tool or prompt name, resource URI) of that call.
    n: String,
}

/// The call that created a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Origin {
    /// Its method (`tools/call` today: the only task-capable one).
    pub(crate) method: Method,
    /// Its upstream name.
    pub(crate) name: String,
}

/// A gateway task id, opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Task {
    /// The owning backend.
    pub(crate) backend: String,
    /// The backend's own task id.
    pub(crate) raw: String,
    /// The call that created it.
    pub(crate) origin: Origin,
}

/// The gateway id of backend task `raw`, created by `origin`.
pub(crate) fn seal(
    sealer: &Sealer,
    binding: &[&str],
    backend: &str,
    raw: &str,
    origin: &Origin,
) -> String {
    let payload = Payload {
        b: backend.to_owned(),
        t: raw.to_owned(),
        m: origin.method.as_str().to_owned(),
        n: origin.name.clone(),
    };
    sealer.seal(
        PURPOSE,
        binding,
        &serde_json::to_vec(&payload).unwrap_or_default(),
    )
}

/// The task behind a gateway task id minted for this binding.
pub(crate) fn open(sealer: &Sealer, binding: &[&str], id: &str) -> Result<Task, SealError> {
    let payload = sealer.open(PURPOSE, binding, id)?;
    let payload: Payload = serde_json::from_slice(&payload).map_err(|_| SealError::Invalid)?;
    let method = Method::from_name(&payload.m).ok_or(SealError::Invalid)?;
    Ok(Task {
        backend: payload.b,
        raw: payload.t,
        origin: Origin {
            method,
            name: payload.n,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_bound_to_the_caller() {
        let sealer = Sealer::random();
        let alice = ["iss", "alice", "vh"];
        let origin = Origin {
            method: Method::ToolsCall,
            name: "slow".into(),
        };
        let id = seal(&sealer, &alice, "alpha", "task-123", &origin);
        assert!(!id.contains("task-123"), "the raw id is not visible as is");
        assert_eq!(
            open(&sealer, &alice, &id),
            Ok(Task {
                backend: "alpha".into(),
                raw: "task-123".into(),
                origin,
            })
        );
        assert_eq!(
            open(&sealer, &["iss", "bob", "vh"], &id),
            Err(SealError::Invalid)
        );
        assert_eq!(open(&sealer, &alice, "task-123"), Err(SealError::Invalid));
    }
}
