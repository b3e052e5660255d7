//! The merged-list cursor: an opaque (encrypted and authenticated) handle over per-backend cursors.
//!
//! The first page of a merged list asks every backend; the cursor of the next page records, for
//! each backend that has more, that backend's own cursor. Backends without an entry are exhausted
//! and are not asked again. The cursor is sealed ([`Sealer`]) and bound to the caller (issuer,
//! subject), the virtual host and the list method, so a cursor from another caller or another list,
//! or a tampered one, is refused (`-32602`).

use serde::{Deserialize, Serialize};

use crate::seal::{SealError, Sealer};

const PURPOSE: &str = "mcp-router/cursor/v1";

/// The per-backend continuation of a merged list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MergedCursor {
    /// `(backend, backend cursor)` for every backend that has more items, in merge order.
    pub(crate) pending: Vec<(String, String)>,
}

impl MergedCursor {
    /// Whether any backend has more.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The opaque handle for `nextCursor`.
    pub(crate) fn seal(&self, sealer: &Sealer, binding: &[&str]) -> String {
        let payload = serde_json::to_vec(&self.pending).unwrap_or_default();
        sealer.seal(PURPOSE, binding, &payload)
    }

    /// Opens a handle received as `params.cursor`.
    pub(crate) fn open(sealer: &Sealer, binding: &[&str], handle: &str) -> Result<Self, SealError> {
        let payload = sealer.open(PURPOSE, binding, handle)?;
        let pending = serde_json::from_slice(&payload).map_err(|_| SealError::Invalid)?;
        Ok(Self { pending })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_binding() {
        let sealer = Sealer::random();
        let c = MergedCursor {
            pending: vec![
                ("a".into(), "c1".into()),
                ("b-x".into(), "{\"o\":2}".into()),
            ],
        };
        let bind = ["iss", "alice", "vh", "tools/list"];
        let handle = c.seal(&sealer, &bind);
        assert_eq!(MergedCursor::open(&sealer, &bind, &handle), Ok(c));
        let other = ["iss", "alice", "vh", "prompts/list"];
        assert_eq!(
            MergedCursor::open(&sealer, &other, &handle),
            Err(SealError::Invalid)
        );
        assert_eq!(
            MergedCursor::open(&sealer, &bind, "opaque-from-a-backend"),
            Err(SealError::Invalid)
        );
    }
}
