//! [`AdoptedRecords`]: which session records this node has already adopted the upstream sessions
//! of, so that a 2025 session's requests do not redo the adoption (URL parsing, session-table
//! lookups) on every call.
//!
//! A record is remembered by a fingerprint of its session id, its backends' upstream sessions
//! (name, id, version, URL) and the generation of this node's upstream session table: when
//! another node replaces an upstream session, the record changes, and when an entry leaves this
//! node's table (evicted when full, ended, expired) every record is adopted again once. A record
//! whose adoption was incomplete (a backend missing from the virtual host) is not remembered.
//! Adoption is idempotent, so forgetting (the set is cleared when it grows past its bound) only
//! costs one more adoption.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::Mutex;

use crate::session::SessionRecord;

/// Fingerprints kept before the set starts over.
const MAX_FINGERPRINTS: usize = 100_000;

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct AdoptedRecords {
    fingerprints: Mutex<HashSet<u64>>,
    hasher: RandomState,
}

impl AdoptedRecords {
    /// `Some(fingerprint)` when `record` (of session `session_id`, at table `generation`) is new
    /// to this node; it is remembered as seen until [`forget`](Self::forget).
    pub(crate) fn first_sight(
        &self,
        session_id: &str,
        record: &SessionRecord,
        generation: u64,
    ) -> Option<u64> {
        let fingerprint = self.fingerprint(session_id, record, generation);
        let mut seen = self.lock();
        if seen.len() >= MAX_FINGERPRINTS && !seen.contains(&fingerprint) {
            seen.clear();
        }
        seen.insert(fingerprint).then_some(fingerprint)
    }

    /// Forgets a fingerprint whose adoption was incomplete, so the next request tries again.
    pub(crate) fn forget(&self, fingerprint: u64) {
        self.lock().remove(&fingerprint);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.fingerprints.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fingerprint(&self, session_id: &str, record: &SessionRecord, generation: u64) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        session_id.hash(&mut hasher);
        generation.hash(&mut hasher);
        for entry in &record.backends {
            entry.name.hash(&mut hasher);
            entry.upstream_session_id.hash(&mut hasher);
            entry.version.hash(&mut hasher);
            entry.url.hash(&mut hasher);
        }
        hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::BackendSession;

    fn record(upstream: &str) -> SessionRecord {
        SessionRecord {
            issuer: "iss".into(),
            subject: "alice".into(),
            vhost: "vh".into(),
            protocol_version: "2025-11-25".into(),
            client_capabilities: "{}".into(),
            log_level: None,
            backends: vec![BackendSession {
                name: "beta".into(),
                era: Some(crate::session::BackendEra::Legacy),
                upstream_session_id: Some(upstream.into()),
                version: Some("2025-11-25".into()),
                url: Some("http://127.0.0.1:1/mcp".into()),
            }],
            subscriptions: Vec::new(),
            created_at_ms: None,
        }
    }

    #[test]
    fn a_record_is_adopted_again_only_when_its_upstream_sessions_change() {
        let adopted = AdoptedRecords::default();
        let first = adopted.first_sight("s1", &record("u1"), 0);
        assert!(first.is_some());
        assert!(adopted.first_sight("s1", &record("u1"), 0).is_none());
        assert!(
            adopted.first_sight("s1", &record("u2"), 0).is_some(),
            "replaced upstream session"
        );
        assert!(
            adopted.first_sight("s2", &record("u2"), 0).is_some(),
            "another session"
        );
        assert!(
            adopted.first_sight("s1", &record("u1"), 1).is_some(),
            "an entry left the table"
        );
        if let Some(fingerprint) = first {
            adopted.forget(fingerprint);
        }
        assert!(
            adopted.first_sight("s1", &record("u1"), 0).is_some(),
            "forgotten"
        );
    }
}
