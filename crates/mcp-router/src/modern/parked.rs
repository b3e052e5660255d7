//! Parked upstream calls: a 2025 backend's call that is waiting for a 2026-07-28 client's input.
//!
//! A 2025 backend asks for input mid-call (a server-to-client `sampling/createMessage`,
//! `elicitation/create` or `roots/list` on the call's stream) and waits for the answer on the same
//! call. A 2026-07-28 client cannot be sent requests; it gets an `input_required` result and retries
//! the call with `inputResponses`. Between the two HTTP exchanges the upstream call stays open here,
//! under a token the gateway seals into the `requestState` it hands out (so only the same caller,
//! for the same backend, method and name, can resume it).
//!
//! A parked call is taken out exactly once (a second retry with the same state is refused), and
//! dropped when nobody resumes it within its lifetime: dropping it cancels the upstream call. The
//! table is node-local: a retry that reaches another gateway node cannot resume the call there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Parked calls of one router, by token.
pub(crate) struct ParkedCalls<T> {
    inner: Arc<Table<T>>,
}

struct Table<T> {
    calls: Mutex<HashMap<String, T>>,
    next: AtomicU64,
    max: usize,
}

impl<T: Send + 'static> ParkedCalls<T> {
    /// A table holding at most `max` calls at once.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            inner: Arc::new(Table {
                calls: Mutex::new(HashMap::new()),
                next: AtomicU64::new(1),
                max,
            }),
        }
    }

    /// Parks `call` for `lifetime` and returns its token, or gives `call` back when the table is
    /// full (the caller then declines the backend's request instead).
    pub(crate) fn park(&self, call: T, lifetime: Duration) -> Result<String, T> {
        let token = format!("p{}", self.inner.next.fetch_add(1, Ordering::Relaxed));
        {
            let mut calls = lock(&self.inner.calls);
            if calls.len() >= self.inner.max {
                return Err(call);
            }
            calls.insert(token.clone(), call);
        }
        // Runtime-less callers (none today) would simply keep the call until it is taken.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(expire(Arc::downgrade(&self.inner), token.clone(), lifetime));
        }
        Ok(token)
    }

    /// Takes the call parked under `token` out of the table.
    pub(crate) fn take(&self, token: &str) -> Option<T> {
        lock(&self.inner.calls).remove(token)
    }

    /// How many calls are parked.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.inner.calls).len()
    }
}

impl<T> std::fmt::Debug for ParkedCalls<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkedCalls")
            .field("max", &self.inner.max)
            .finish_non_exhaustive()
    }
}

/// Drops the call parked under `token` once its lifetime is over (outside the lock: dropping a
/// call may cancel it upstream).
async fn expire<T>(table: Weak<Table<T>>, token: String, lifetime: Duration) {
    tokio::time::sleep(lifetime).await;
    let Some(table) = table.upgrade() else {
        return;
    };
    let expired = lock(&table.calls).remove(&token);
    if expired.is_some() {
        tracing::debug!(token, "a parked call was not resumed in time");
    }
    drop(expired);
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_is_taken_once() {
        let table = ParkedCalls::new(4);
        let token = table.park("call", Duration::from_secs(60)).expect("room");
        assert_eq!(table.take(&token), Some("call"));
        assert_eq!(table.take(&token), None);
    }

    #[tokio::test]
    async fn a_full_table_gives_the_call_back() {
        let table = ParkedCalls::new(1);
        let _first = table.park(1, Duration::from_secs(60)).expect("room");
        assert_eq!(table.park(2, Duration::from_secs(60)), Err(2));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unclaimed_call_is_dropped_after_its_lifetime() {
        let table = ParkedCalls::new(4);
        let token = table.park("call", Duration::from_secs(5)).expect("room");
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(table.len(), 1);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(table.len(), 0);
        assert_eq!(table.take(&token), None);
    }
}
