//! [`StaleAnswers`]: the last good list and discover answers, served (marked stale) while a
//! backend fails (stale-if-error, book: docs/src/architecture.md).
//!
//! Keyed by the backend's credential scope (which names the caller), the virtual host, the
//! backend, the method and the cursor: a stale answer is only ever served to the caller it was
//! fetched for, with the credentials it was fetched with. Bounded per principal like every other
//! upstream table, in count and in bytes: a caller that stores more than its share replaces its
//! own oldest answers, never another tenant's, and its answers past `max_staleness` leave as it
//! stores new ones (a page may weigh up to 16 MiB: counting entries alone let 96 pages pin
//! 415 MiB).

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
    /// At most `entries` answers weighing `bytes` in all, each kept while it can still be
    /// served (`max_staleness`); one principal holds at most a sixteenth of the entries (at
    /// least 64) and `bytes_per_principal`.
    pub(crate) fn new(
        entries: usize,
        max_staleness: Duration,
        bytes_per_principal: usize,
        bytes: usize,
    ) -> Self {
        let share = (entries / 16).max(MIN_SHARE).min(entries.max(1));
        Self {
            table: ScopedTable::weighed(
                "stale_answers",
                share,
                entries,
                max_staleness,
                bytes_per_principal,
                bytes,
            ),
        }
    }

    /// Stores `principal`'s good answer under `key` (not kept when it alone weighs more than the
    /// principal's byte share).
    pub(crate) fn insert(&self, principal: &Principal, key: StaleKey, value: &RawValue) {
        let entry = (Instant::now(), std::sync::Arc::from(value.to_owned()));
        let bytes = value.get().len();
        let _ = self.table.upsert_weighing(&key, principal, entry, bytes);
    }

    /// What the kept answers weigh.
    pub(crate) fn bytes(&self) -> usize {
        self.table.bytes()
    }

    /// The budget the kept answers draw from.
    pub(crate) fn budget(&self) -> &mcp_core::Budget {
        self.table.budget()
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
        let answers = StaleAnswers::new(64, Duration::from_secs(60), usize::MAX, usize::MAX);
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

    #[tokio::test(start_paused = true)]
    async fn answers_are_counted_in_bytes_and_a_principal_pays_with_its_own() {
        let page = |kib: usize| {
            RawValue::from_string(format!("\"{}\"", "x".repeat(kib * 1024 - 2))).expect("raw")
        };
        // 4 KiB per principal, 6 KiB in all.
        let answers = StaleAnswers::new(1_000, Duration::from_secs(60), 4096, 6144);
        let alice = Principal::new("i", "alice");
        let bob = Principal::new("i", "bob");
        let fresh = Duration::from_secs(60);
        answers.insert(&bob, key("bob", 0), &page(2));
        for n in 0..10 {
            answers.insert(&alice, key("alice", n), &page(1));
        }
        assert!(answers.bytes() <= 6144, "{}", answers.bytes());
        assert!(
            answers.get(&key("bob", 0), fresh).is_some(),
            "bob keeps his"
        );
        assert!(answers.get(&key("alice", 9), fresh).is_some());
        assert!(
            answers.get(&key("alice", 5), fresh).is_none(),
            "alice paid with her oldest"
        );
        // A page heavier than a principal's share is not kept at all.
        answers.insert(&alice, key("alice", 99), &page(5));
        assert!(answers.get(&key("alice", 99), fresh).is_none());
        // Expired answers leave when their principal stores again, not only when full.
        tokio::time::advance(Duration::from_secs(61)).await;
        answers.insert(&alice, key("alice", 100), &page(1));
        assert_eq!(answers.bytes(), 2048 + 1024, "alice's expired pages went");
    }
}
