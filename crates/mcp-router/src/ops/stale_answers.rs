//! [`StaleAnswers`]: the last good list and discover answers, served (marked stale) while a
//! backend fails (stale-if-error, book: docs/src/architecture.md).
//!
//! Keyed by the backend's credential scope (which names the caller), the virtual host, the
//! backend, the method and the cursor: a stale answer is only ever served to the caller it was
//! fetched for, with the credentials it was fetched with. Bounded per principal like every other
//! upstream table: a caller that stores more than its share replaces its own oldest answers,
//! never another tenant's.

use std::time::Duration;

use tokio::time::Instant;

use mcp_core::Principal;
use serde_json::value::RawValue;

use crate::upstream::ScopedTable;

/// (credential scope id, virtual host, backend, method, cursor).
pub(crate) type StaleKey = (String, String, String, String, String);

/// The least share of the table a principal may fill.
const MIN_SHARE: usize = 64;

/// Last good answers. See the module docs.
#[derive(Debug)]
pub(crate) struct StaleAnswers {
    table: ScopedTable<StaleKey, (Instant, std::sync::Arc<RawValue>)>,
}

impl StaleAnswers {
    /// At most `entries` answers, each kept while it can still be served (`max_staleness`);
    /// one principal holds at most a sixteenth of them (at least 64).
    pub(crate) fn new(entries: usize, max_staleness: Duration) -> Self {
        let share = (entries / 16).max(MIN_SHARE).min(entries.max(1));
        Self {
            table: ScopedTable::new(share, entries, max_staleness),
        }
    }

    /// Stores `principal`'s good answer under `key`.
    pub(crate) fn insert(&self, principal: &Principal, key: StaleKey, value: &RawValue) {
        let entry = (Instant::now(), std::sync::Arc::from(value.to_owned()));
        let _ = self.table.upsert(&key, principal, entry);
    }

    /// The answer under `key` and its age, if stored less than `max_staleness` ago.
    pub(crate) fn get(
        &self,
        key: &StaleKey,
        max_staleness: Duration,
    ) -> Option<(Box<RawValue>, Duration)> {
        let (stored, value) = self.table.get(key)?;
        let age = stored.elapsed();
        (age <= max_staleness).then(|| (value.as_ref().to_owned(), age))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(scope: &str, cursor: usize) -> StaleKey {
        (
            scope.into(),
            "vh".into(),
            "b".into(),
            "tools/list".into(),
            cursor.to_string(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_principal_filling_its_share_never_costs_another_its_answers() {
        let answers = StaleAnswers::new(64, Duration::from_secs(60));
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        let page = RawValue::from_string(r#"{"tools":[]}"#.into()).expect("raw");
        answers.insert(&bob, key("bob-scope", 0), &page);
        for n in 0..200 {
            answers.insert(&alice, key("alice-scope", n), &page);
        }
        let fresh = Duration::from_secs(60);
        assert!(
            answers.get(&key("bob-scope", 0), fresh).is_some(),
            "bob keeps his"
        );
        assert!(
            answers.get(&key("alice-scope", 0), fresh).is_none(),
            "alice recycled hers"
        );
        assert!(answers.get(&key("alice-scope", 199), fresh).is_some());
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(
            answers.get(&key("bob-scope", 0), fresh).is_none(),
            "past max_staleness nothing is served"
        );
    }
}
