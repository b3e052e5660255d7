//! When a 2025 session ends, everything this node holds for it goes: its GET streams (and the
//! upstream follows they hold), its replay buffers, and through its GET stream the HTTP+SSE
//! bridge's session. [`SessionEnds`] signals the streams; the sweep (see
//! `Front::ensure_sweeping`) notices sessions the store forgot without a DELETE (local idle
//! expiry, Redis TTL, a sealed id past its lifetime) by asking
//! [`SessionStore::exists`](crate::session::SessionStore::exists) about every session the node
//! holds something for.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;

/// One signal per session with open streams on this node.
#[derive(Debug, Default)]
pub(crate) struct SessionEnds {
    signals: Mutex<HashMap<String, watch::Sender<bool>>>,
}

impl SessionEnds {
    /// A receiver that sees `true` once `session` ended.
    pub(crate) fn watch(&self, session: &str) -> watch::Receiver<bool> {
        let mut signals = self.signals.lock().unwrap_or_else(PoisonError::into_inner);
        // Sessions whose streams all closed need no signal any more.
        signals.retain(|_, s| s.receiver_count() > 0);
        signals
            .entry(session.to_owned())
            .or_insert_with(|| watch::channel(false).0)
            .subscribe()
    }

    /// Ends every stream that watches `session`.
    pub(crate) fn end(&self, session: &str) {
        let signal = self
            .signals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session);
        if let Some(signal) = signal {
            let _ = signal.send(true);
        }
    }

    /// The sessions with streams open on this node.
    pub(crate) fn sessions(&self) -> Vec<String> {
        self.signals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, s)| s.receiver_count() > 0)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// Resolves once `ended` sees `true` (or its session's signal is gone without being sent, which
/// never happens while a stream watches it: then it never resolves).
pub(crate) async fn ended(mut ended: watch::Receiver<bool>) {
    if ended.wait_for(|e| *e).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ending_a_session_wakes_only_its_streams() {
        let ends = SessionEnds::default();
        let a = ends.watch("a");
        let b = ends.watch("b");
        assert_eq!(ends.sessions().len(), 2);
        ends.end("a");
        ended(a).await;
        assert!(!*b.borrow(), "b is not ended");
        assert_eq!(ends.sessions(), vec!["b".to_owned()]);
        drop(b);
        assert!(ends.sessions().is_empty(), "no stream watches b any more");
    }
}
