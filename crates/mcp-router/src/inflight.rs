//! Calls of 2025 clients in flight, so `notifications/cancelled` can reach the one it names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// (downstream session id, request id as JSON) of one call.
pub(crate) type InFlightKey = (String, String);

/// The cancellation signals of calls in flight.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    calls: Mutex<HashMap<InFlightKey, Arc<Notify>>>,
}

impl InFlight {
    /// Registers a call; the returned signal fires when the client cancels it.
    pub(crate) fn register(&self, key: InFlightKey) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.insert(key, Arc::clone(&notify));
        notify
    }

    /// Forgets a call that ended.
    pub(crate) fn remove(&self, key: &InFlightKey) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.remove(key);
    }

    /// Cancels the call; `false` when no such call is in flight (it ended, or never existed).
    pub(crate) fn cancel(&self, key: &InFlightKey) -> bool {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        match calls.get(key) {
            Some(notify) => {
                // notify_one keeps a permit when the relay is not waiting right now.
                notify.notify_one();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_before_the_wait_is_not_lost() {
        let table = InFlight::default();
        let key = ("s".to_owned(), "7".to_owned());
        let signal = table.register(key.clone());
        assert!(table.cancel(&key));
        tokio::time::timeout(std::time::Duration::from_secs(1), signal.notified())
            .await
            .expect("the stored permit completes the wait");
        table.remove(&key);
        assert!(!table.cancel(&key));
    }
}
