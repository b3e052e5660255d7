//! The gateway's own SSE event ids and replay buffers for 2025 sessions' streams (the GET stream
//! and every POST response stream), so a client that reconnects with `Last-Event-ID` gets what
//! that stream missed (bounded).
//!
//! Event ids are `<stream>:<n>`: `g` is the session's GET stream, `p<k>` its k-th POST stream.
//! A `Last-Event-ID` replays only the events of the stream it names, as the 2025-11-25 transport
//! requires (a message is never delivered on another stream than its own).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;

/// Events kept per stream for replay.
const PER_STREAM: usize = 128;
/// Streams kept per session (the oldest is forgotten first).
const STREAMS_PER_SESSION: usize = 16;
/// The GET stream's key.
pub(crate) const GET_STREAM: &str = "g";

#[derive(Default)]
struct StreamEvents {
    next: u64,
    events: VecDeque<(u64, Bytes)>,
}

#[derive(Default)]
struct SessionStreams {
    next_post: u64,
    /// Oldest first.
    streams: VecDeque<(String, StreamEvents)>,
}

impl SessionStreams {
    fn stream(&mut self, key: &str) -> &mut StreamEvents {
        if let Some(pos) = self.streams.iter().position(|(k, _)| k == key) {
            return &mut self.streams[pos].1;
        }
        if self.streams.len() >= STREAMS_PER_SESSION {
            // Forget the oldest POST stream first; the GET stream goes last.
            let victim = self
                .streams
                .iter()
                .position(|(k, _)| k != GET_STREAM)
                .unwrap_or(0);
            self.streams.remove(victim);
        }
        self.streams
            .push_back((key.to_owned(), StreamEvents::default()));
        let last = self.streams.len() - 1;
        &mut self.streams[last].1
    }
}

/// Replay buffers of every session with streams.
#[derive(Default)]
pub(crate) struct ReplayBuffers {
    sessions: Mutex<HashMap<String, SessionStreams>>,
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

    fn with_session<T>(&self, session: &str, f: impl FnOnce(&mut SessionStreams) -> T) -> T {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if !sessions.contains_key(session)
            && sessions.len() >= self.max_sessions
            && let Some(victim) = sessions.keys().next().cloned()
        {
            // Full: forget an arbitrary session's history (its streams still work; only a
            // resumption replays less).
            sessions.remove(&victim);
        }
        f(sessions.entry(session.to_owned()).or_default())
    }

    /// A key for a new POST response stream of `session`.
    pub(crate) fn open_post_stream(&self, session: &str) -> String {
        self.with_session(session, |s| {
            s.next_post += 1;
            format!("p{}", s.next_post)
        })
    }

    /// Gives `message` the stream's next event id and keeps it for replay.
    pub(crate) fn record(&self, session: &str, stream: &str, message: Bytes) -> String {
        self.with_session(session, |s| {
            let events = s.stream(stream);
            events.next += 1;
            let n = events.next;
            if events.events.len() >= PER_STREAM {
                events.events.pop_front();
            }
            events.events.push_back((n, message));
            format!("{stream}:{n}")
        })
    }

    /// A fresh event id of `stream` without a message (a priming event).
    pub(crate) fn next_id(&self, session: &str, stream: &str) -> String {
        self.with_session(session, |s| {
            let events = s.stream(stream);
            events.next += 1;
            format!("{stream}:{}", events.next)
        })
    }

    /// The kept events of the stream `last_event_id` names, after it, in order.
    pub(crate) fn since(&self, session: &str, last_event_id: &str) -> Vec<(String, Bytes)> {
        let Some((stream, n)) = last_event_id
            .split_once(':')
            .and_then(|(stream, n)| Some((stream, n.parse::<u64>().ok()?)))
        else {
            return Vec::new();
        };
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions
            .get(session)
            .and_then(|s| s.streams.iter().find(|(k, _)| k == stream))
            .map(|(_, events)| {
                events
                    .events
                    .iter()
                    .filter(|(id, _)| *id > n)
                    .map(|(id, message)| (format!("{stream}:{id}"), message.clone()))
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
    fn replays_only_the_named_stream_after_the_id() {
        let buffers = ReplayBuffers::new(4);
        let post = buffers.open_post_stream("s");
        let g1 = buffers.record("s", GET_STREAM, Bytes::from_static(b"g1"));
        let p1 = buffers.record("s", &post, Bytes::from_static(b"p1"));
        let primed = buffers.next_id("s", GET_STREAM);
        let g2 = buffers.record("s", GET_STREAM, Bytes::from_static(b"g2"));
        buffers.record("s", &post, Bytes::from_static(b"p2"));
        assert_eq!(
            (g1.as_str(), primed.as_str(), g2.as_str()),
            ("g:1", "g:2", "g:3")
        );
        assert_eq!(
            buffers.since("s", &g1),
            vec![("g:3".to_owned(), Bytes::from_static(b"g2"))]
        );
        assert_eq!(
            buffers.since("s", &p1),
            vec![(format!("{post}:2"), Bytes::from_static(b"p2"))]
        );
        assert!(buffers.since("s", "nonsense").is_empty());
        assert!(buffers.since("other", &g1).is_empty());
    }

    #[test]
    fn bounded_per_stream_per_session_and_in_sessions() {
        let buffers = ReplayBuffers::new(2);
        for _ in 0..300 {
            buffers.record("s", GET_STREAM, Bytes::from_static(b"x"));
        }
        assert_eq!(buffers.since("s", "g:0").len(), PER_STREAM);
        let first = buffers.open_post_stream("s");
        buffers.record("s", &first, Bytes::from_static(b"x"));
        for _ in 0..STREAMS_PER_SESSION {
            let post = buffers.open_post_stream("s");
            buffers.record("s", &post, Bytes::from_static(b"x"));
        }
        assert!(
            buffers.since("s", &format!("{first}:0")).is_empty(),
            "the oldest POST stream is forgotten"
        );
        assert_eq!(
            buffers.since("s", "g:0").len(),
            PER_STREAM,
            "the GET stream is kept"
        );
        buffers.record("t", GET_STREAM, Bytes::new());
        buffers.record("u", GET_STREAM, Bytes::new());
        let kept = ["s", "t", "u"]
            .iter()
            .filter(|s| !buffers.since(s, "g:0").is_empty())
            .count();
        assert_eq!(kept, 2, "at most two sessions");
        buffers.forget("u");
        assert!(buffers.since("u", "g:0").is_empty());
    }
}
