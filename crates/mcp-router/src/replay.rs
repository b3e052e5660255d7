//! The gateway's own SSE event ids and replay buffers for 2025 sessions' GET streams, so a client
//! that reconnects with `Last-Event-ID` gets what it missed (bounded).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;

/// Events kept per session for replay.
const PER_SESSION: usize = 256;

#[derive(Default)]
struct SessionEvents {
    next_id: u64,
    events: VecDeque<(u64, Bytes)>,
}

/// Replay buffers of every session with a GET stream.
#[derive(Default)]
pub(crate) struct ReplayBuffers {
    sessions: Mutex<HashMap<String, SessionEvents>>,
    max_sessions: usize,
}

impl std::fmt::Debug for ReplayBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayBuffers").finish_non_exhaustive()
    }
}

impl ReplayBuffers {
    pub(crate) fn new(max_sessions: usize) -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            max_sessions,
        }
    }

    /// Gives `message` the session's next event id and keeps it for replay.
    pub(crate) fn record(&self, session: &str, message: Bytes) -> u64 {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if !sessions.contains_key(session) && sessions.len() >= self.max_sessions {
            // Full: forget an arbitrary session's history (its stream still works; only a
            // resumption after this point replays less).
            if let Some(victim) = sessions.keys().next().cloned() {
                sessions.remove(&victim);
            }
        }
        let entry = sessions.entry(session.to_owned()).or_default();
        entry.next_id += 1;
        let id = entry.next_id;
        if entry.events.len() >= PER_SESSION {
            entry.events.pop_front();
        }
        entry.events.push_back((id, message));
        id
    }

    /// A fresh event id without a message (the priming event).
    pub(crate) fn next_id(&self, session: &str) -> u64 {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = sessions.entry(session.to_owned()).or_default();
        entry.next_id += 1;
        entry.next_id
    }

    /// The kept events after `last_event_id`, in order.
    pub(crate) fn since(&self, session: &str, last_event_id: u64) -> Vec<(u64, Bytes)> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions
            .get(session)
            .map(|s| {
                s.events
                    .iter()
                    .filter(|(id, _)| *id > last_event_id)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forgets an ended session.
    pub(crate) fn forget(&self, session: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.remove(session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_what_came_after_and_stays_bounded() {
        let buffers = ReplayBuffers::new(2);
        let a = buffers.record("s", Bytes::from_static(b"a"));
        let primed = buffers.next_id("s");
        let b = buffers.record("s", Bytes::from_static(b"b"));
        assert!(a < primed && primed < b);
        assert_eq!(buffers.since("s", a), vec![(b, Bytes::from_static(b"b"))]);
        assert_eq!(buffers.since("s", 0).len(), 2);
        for _ in 0..300 {
            buffers.record("s", Bytes::from_static(b"x"));
        }
        assert_eq!(buffers.since("s", 0).len(), PER_SESSION);
        buffers.record("t", Bytes::new());
        buffers.record("u", Bytes::new());
        assert!(
            buffers.since("s", 0).is_empty() || buffers.since("t", 0).is_empty(),
            "at most two sessions"
        );
        buffers.forget("u");
        assert!(buffers.since("u", 0).is_empty());
    }
}
