//! Parked upstream calls: a 2025 backend's call that is waiting for a 2026-07-28 client's input.
//!
//! A 2025 backend asks for input mid-call (a server-to-client `sampling/createMessage`,
//! `elicitation/create` or `roots/list` on the call's stream) and waits for the answer on the same
//! call. A 2026-07-28 client cannot be sent requests; it gets an `input_required` result and retries
//! the call with `inputResponses`. Between the two HTTP exchanges the upstream call stays open here,
//! under a random token the gateway seals into the `requestState` it hands out.
//!
//! - **Who may resume**: the sealed state binds the caller, virtual host, backend, method and name,
//!   and [`take`](ParkedCalls::take) checks the parked call's own binding too, so a state minted
//!   elsewhere (another node, a restarted one) can never reach another caller's call.
//! - **Once**: a parked call is taken out exactly once; a second retry with the same state is
//!   refused.
//! - **Bounded**: at most `max` calls in all and `max_per_owner` per caller, a slot each of the
//!   `parked_calls` budget (one caller cannot take the room of the others); a call not resumed within its lifetime is dropped, which
//!   cancels the upstream call.
//! - **Node-local**: a retry that reaches another gateway node cannot resume the call there; with a
//!   node bus (feature `redis`) that node passes it on to this one (see `super::forward`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use aws_lc_rs::rand::SecureRandom;
use mcp_core::{Budget, Principal, Slot};
use serde::{Deserialize, Serialize};

/// A retry of a parked call: which call, and what the caller's binding is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Resume {
    /// The parked call's token.
    pub(crate) token: String,
    /// The node holding it.
    pub(crate) node: Option<String>,
    /// The binding of the caller's `requestState` (caller, virtual host, backend, method, name).
    pub(crate) binding: Vec<String>,
}

/// Parked calls of one router, by token.
pub(crate) struct ParkedCalls<T> {
    inner: Arc<Table<T>>,
}

struct Table<T> {
    calls: Mutex<HashMap<String, Entry<T>>>,
    /// A slot per parked call, of its owner.
    budget: Budget,
}

struct Entry<T> {
    call: T,
    /// The owner's place in the table.
    _slot: Slot,
    /// Drops the call when its lifetime is over; aborted when the call is taken.
    timer: Option<tokio::task::AbortHandle>,
}

impl<T: Send + 'static> ParkedCalls<T> {
    /// A table holding at most `max` calls, and at most `max_per_owner` of one owner.
    pub(crate) fn new(max: usize, max_per_owner: usize) -> Self {
        Self {
            inner: Arc::new(Table {
                calls: Mutex::default(),
                budget: Budget::new("parked_calls").with_slots(max_per_owner, max),
            }),
        }
    }

    /// Parks `call` of `owner` for `lifetime` and returns its token, or gives `call` back when
    /// there is no room (the caller then declines the backend's request instead).
    pub(crate) fn park(&self, call: T, owner: &Principal, lifetime: Duration) -> Result<String, T> {
        let Some(token) = random_token() else {
            return Err(call);
        };
        let Ok(slot) = self.inner.budget.take(owner) else {
            return Err(call);
        };
        lock(&self.inner.calls).insert(
            token.clone(),
            Entry {
                call,
                _slot: slot,
                timer: None,
            },
        );
        // Runtime-less callers (none today) would simply keep the call until it is taken.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let timer = runtime
                .spawn(expire(Arc::downgrade(&self.inner), token.clone(), lifetime))
                .abort_handle();
            match lock(&self.inner.calls).get_mut(&token) {
                Some(entry) => entry.timer = Some(timer),
                None => timer.abort(), // already taken
            }
        }
        Ok(token)
    }

    /// Takes the call parked under `token` out of the table when `belongs` accepts it (the
    /// caller's binding); otherwise leaves it there.
    pub(crate) fn take(&self, token: &str, belongs: impl FnOnce(&T) -> bool) -> Option<T> {
        let entry = {
            let mut calls = lock(&self.inner.calls);
            if !calls.get(token).is_some_and(|e| belongs(&e.call)) {
                return None;
            }
            calls.remove(token)?
        };
        if let Some(timer) = entry.timer {
            timer.abort();
        }
        Some(entry.call)
    }

    /// How many calls are parked.
    pub(crate) fn len(&self) -> usize {
        lock(&self.inner.calls).len()
    }

    /// The budget the parked calls draw from (a slot each).
    pub(crate) fn budget(&self) -> &Budget {
        &self.inner.budget
    }
}

impl<T> std::fmt::Debug for ParkedCalls<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkedCalls")
            .field("budget", &self.inner.budget)
            .finish_non_exhaustive()
    }
}

/// 128 random bits, hex: tokens of different nodes or of a restarted node never collide.
pub(crate) fn random_token() -> Option<String> {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::SystemRandom::new().fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
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
        tracing::debug!("a parked call was not resumed in time");
    }
    drop(expired);
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn p(subject: &str) -> Principal {
        Principal::new("https://issuer", subject)
    }

    #[tokio::test]
    async fn a_call_is_taken_once_and_only_by_its_owner() {
        let table = ParkedCalls::new(4, 4);
        let token = table.park("alice's", &p("alice"), MINUTE).expect("room");
        assert_eq!(token.len(), 32);
        assert_eq!(table.take(&token, |call| *call == "bob's"), None);
        assert_eq!(
            table.take(&token, |call| *call == "alice's"),
            Some("alice's")
        );
        assert_eq!(table.take(&token, |_| true), None);
    }

    #[tokio::test]
    async fn the_table_and_each_owner_are_bounded() {
        let table = ParkedCalls::new(3, 2);
        let first = table.park(1, &p("alice"), MINUTE).expect("room");
        let _second = table.park(2, &p("alice"), MINUTE).expect("room");
        assert_eq!(
            table.park(3, &p("alice"), MINUTE),
            Err(3),
            "alice's share is full"
        );
        let _bob = table
            .park(4, &p("bob"), MINUTE)
            .expect("bob still has room");
        assert_eq!(
            table.park(5, &p("carol"), MINUTE),
            Err(5),
            "the table is full"
        );
        assert_eq!(table.take(&first, |_| true), Some(1));
        assert!(
            table.park(6, &p("alice"), MINUTE).is_ok(),
            "a taken call frees its room"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_unclaimed_call_is_dropped_after_its_lifetime() {
        let table = ParkedCalls::new(4, 4);
        let token = table
            .park("call", &p("alice"), Duration::from_secs(5))
            .expect("room");
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(table.len(), 1);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(table.len(), 0);
        assert_eq!(table.take(&token, |_| true), None);
        assert!(
            table.park("again", &p("alice"), MINUTE).is_ok(),
            "its room is free"
        );
    }
}
