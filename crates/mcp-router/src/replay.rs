//! The gateway's own SSE event ids and replay buffers for 2025 sessions' streams (the GET stream
//! and every POST response stream), so a client that reconnects with `Last-Event-ID` gets what
//! that stream missed (bounded).
//!
//! Event ids are `<node>.<stream>:<n>`: `g` is the session's GET stream, `p<k>` its k-th POST
//! stream on this node. A `Last-Event-ID` replays only the events of the stream it names, as the
//! 2025-11-25 transport requires (a message is never delivered on another stream than its own).
//! The node's random id is part of the id because a session is served by every node and each
//! node numbers its own streams: without it, a client resuming node A's `p3` on node B would be
//! replayed node B's `p3`, another request's answers. Another node's (or an earlier process's)
//! id replays nothing: the client gets the live GET stream, and the rest of a broken POST
//! stream's call stays on the node that ran it (book: "Which ids are unique where").
//!
//! Bounds ([`ReplayLimits`]): events per stream, streams per session, bytes per session, bytes per
//! principal, bytes in all, sessions in all and per principal. An event that does not fit first
//! drops the oldest events of *its own* session; when the principal's share or the whole budget is
//! still full (the principal's other sessions, or other principals, hold it) the event is sent
//! but not kept. Nothing one principal does removes another principal's buffered events, and a
//! full table gives a new session no buffer rather than taking another session's. A client
//! resuming from an event that was dropped (or never kept) gets the kept events after it, as for
//! any event too old to be kept.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;
use mcp_core::{Budget, Principal, Slot};

/// Events kept per stream for replay.
const PER_STREAM: usize = 128;
/// Streams kept per session (the oldest is forgotten first).
const STREAMS_PER_SESSION: usize = 16;
/// The GET stream's key.
pub(crate) const GET_STREAM: &str = "g";

/// The bounds of [`ReplayBuffers`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplayLimits {
    /// Sessions with buffers at once.
    pub(crate) sessions: usize,
    /// Sessions of one principal with buffers at once.
    pub(crate) sessions_per_principal: usize,
    /// Bytes of messages kept for one session.
    pub(crate) session_bytes: usize,
    /// Bytes of messages kept for all sessions of one principal.
    pub(crate) principal_bytes: usize,
    /// Bytes of messages kept in all.
    pub(crate) total_bytes: usize,
}

impl Default for ReplayLimits {
    fn default() -> Self {
        Self {
            sessions: 10_000,
            sessions_per_principal: 1_000,
            session_bytes: 1024 * 1024,
            principal_bytes: 16 * 1024 * 1024,
            total_bytes: 256 * 1024 * 1024,
        }
    }
}

#[derive(Default)]
struct StreamEvents {
    next: u64,
    /// (session-wide sequence, event number, message), oldest first.
    events: VecDeque<(u64, u64, Bytes)>,
}

struct SessionStreams {
    /// The session's place in the `replay` budget; its account is charged the kept bytes.
    slot: Slot,
    next_post: u64,
    /// Orders the events of all the session's streams, to find the oldest.
    next_seq: u64,
    /// Bytes of the messages kept.
    bytes: usize,
    /// Oldest first.
    streams: VecDeque<(String, StreamEvents)>,
}

impl SessionStreams {
    fn new(slot: Slot) -> Self {
        Self {
            slot,
            next_post: 0,
            next_seq: 0,
            bytes: 0,
            streams: VecDeque::new(),
        }
    }

    /// The stream's events, created if new; also the bytes freed by forgetting a stream.
    fn stream(&mut self, key: &str) -> (&mut StreamEvents, usize) {
        let mut freed = 0;
        if let Some(pos) = self.streams.iter().position(|(k, _)| k == key) {
            return (&mut self.streams[pos].1, freed);
        }
        if self.streams.len() >= STREAMS_PER_SESSION {
            // Forget the oldest POST stream first; the GET stream goes last.
            let victim = self
                .streams
                .iter()
                .position(|(k, _)| k != GET_STREAM)
                .unwrap_or(0);
            if let Some((_, gone)) = self.streams.remove(victim) {
                freed = gone.events.iter().map(|(_, _, m)| m.len()).sum();
                self.bytes -= freed;
            }
        }
        self.streams
            .push_back((key.to_owned(), StreamEvents::default()));
        let last = self.streams.len() - 1;
        (&mut self.streams[last].1, freed)
    }

    /// Drops the session's oldest kept event; its size, `None` when nothing is kept.
    fn drop_oldest(&mut self) -> Option<usize> {
        let (_, events) = self
            .streams
            .iter_mut()
            .filter(|(_, s)| !s.events.is_empty())
            .min_by_key(|(_, s)| s.events.front().map_or(u64::MAX, |(seq, _, _)| *seq))?;
        let (_, _, message) = events.events.pop_front()?;
        self.bytes -= message.len();
        Some(message.len())
    }
}

struct Table {
    sessions: HashMap<String, SessionStreams>,
    /// A slot per session with buffers, and the bytes they keep.
    budget: Budget,
    /// Event numbers for sessions the table has no room for: unique, so their ids still are.
    unbuffered_next: u64,
}

impl Table {
    fn new(limits: &ReplayLimits) -> Self {
        Self {
            sessions: HashMap::new(),
            budget: Budget::new("replay")
                .with_slots(limits.sessions_per_principal, limits.sessions)
                .with_bytes(limits.principal_bytes, limits.total_bytes),
            unbuffered_next: 0,
        }
    }

    /// The session's buffers, created when the table and its principal have room.
    fn session(&mut self, principal: &Principal, session: &str) -> Option<&mut SessionStreams> {
        if !self.sessions.contains_key(session) {
            let slot = self.budget.take(principal).ok()?;
            self.sessions
                .insert(session.to_owned(), SessionStreams::new(slot));
        }
        self.sessions.get_mut(session)
    }

    fn unbuffered_number(&mut self) -> u64 {
        self.unbuffered_next += 1;
        self.unbuffered_next
    }

    /// Keeps `message` as the next event of the session's `stream` if it fits; its event number.
    fn record(
        &mut self,
        limits: &ReplayLimits,
        principal: &Principal,
        session: &str,
        stream: &str,
        message: Bytes,
    ) -> u64 {
        let Some(s) = self.session(principal, session) else {
            return self.unbuffered_number();
        };
        let account = s.slot.account().clone();
        let (events, forgotten) = s.stream(stream);
        events.next += 1;
        let n = events.next;
        let popped = if events.events.len() >= PER_STREAM {
            events.events.pop_front().map_or(0, |(_, _, old)| old.len())
        } else {
            0
        };
        s.bytes -= popped;
        account.release(forgotten + popped);
        let len = message.len();
        if len > limits.session_bytes {
            // It could never fit: the session's kept events stay.
            return n;
        }
        loop {
            let fits = s.bytes + len <= limits.session_bytes && account.room(len, 0).is_ok();
            if fits {
                let seq = s.next_seq;
                s.next_seq += 1;
                s.bytes += len;
                let (events, _) = s.stream(stream);
                events.events.push_back((seq, n, message));
                account.add(len);
                break;
            }
            // Only this session's own events make room; when it has none left, the event is
            // sent without being kept.
            match s.drop_oldest() {
                Some(dropped) => account.release(dropped),
                None => {
                    if let Err(spent) = account.room(len, 0) {
                        self.budget.refuse(spent);
                    }
                    break;
                }
            }
        }
        n
    }

    fn forget(&mut self, session: &str) {
        if let Some(gone) = self.sessions.remove(session) {
            gone.slot.account().release(gone.bytes);
        }
    }
}

/// Replay buffers of every session with streams.
pub(crate) struct ReplayBuffers {
    table: Mutex<Table>,
    limits: ReplayLimits,
    /// This node's id, the first part of every event id (see the module docs).
    node: Box<str>,
}

impl std::fmt::Debug for ReplayBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayBuffers").finish_non_exhaustive()
    }
}

impl ReplayBuffers {
    /// Buffers of node `node` (its random id, in every event id).
    pub(crate) fn new(limits: ReplayLimits, node: &str) -> Self {
        Self {
            table: Mutex::new(Table::new(&limits)),
            limits,
            node: node.into(),
        }
    }

    fn event_id(&self, stream: &str, n: u64) -> String {
        format!("{}.{stream}:{n}", self.node)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A key for a new POST response stream of `principal`'s `session`.
    pub(crate) fn open_post_stream(&self, principal: &Principal, session: &str) -> String {
        let mut table = self.lock();
        match table.session(principal, session) {
            Some(s) => {
                s.next_post += 1;
                format!("p{}", s.next_post)
            }
            None => {
                table.unbuffered_next += 1;
                // Never "p<n>": a session that gets a buffer later counts its own streams from p1.
                format!("u{}", table.unbuffered_next)
            }
        }
    }

    /// Gives `message` the stream's next event id and keeps it for replay when it fits the
    /// budgets (see the module docs).
    pub(crate) fn record(
        &self,
        principal: &Principal,
        session: &str,
        stream: &str,
        message: Bytes,
    ) -> String {
        let n = self
            .lock()
            .record(&self.limits, principal, session, stream, message);
        self.event_id(stream, n)
    }

    /// A fresh event id of `stream` without a message (a priming event).
    pub(crate) fn next_id(&self, principal: &Principal, session: &str, stream: &str) -> String {
        let mut table = self.lock();
        let Some(s) = table.session(principal, session) else {
            let n = table.unbuffered_number();
            return self.event_id(stream, n);
        };
        let (events, freed) = s.stream(stream);
        events.next += 1;
        let n = events.next;
        s.slot.account().release(freed);
        drop(table);
        self.event_id(stream, n)
    }

    /// The kept events of the stream `last_event_id` names, after it, in order; nothing for an
    /// id another node (or an earlier process) minted.
    pub(crate) fn since(&self, session: &str, last_event_id: &str) -> Vec<(String, Bytes)> {
        let Some((stream, n)) = last_event_id
            .strip_prefix(&*self.node)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.split_once(':'))
            .and_then(|(stream, n)| Some((stream, n.parse::<u64>().ok()?)))
        else {
            return Vec::new();
        };
        let table = self.lock();
        table
            .sessions
            .get(session)
            .and_then(|s| s.streams.iter().find(|(k, _)| k == stream))
            .map(|(_, events)| {
                events
                    .events
                    .iter()
                    .filter(|(_, id, _)| *id > n)
                    .map(|(_, id, message)| (self.event_id(stream, *id), message.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forgets an ended session.
    pub(crate) fn forget(&self, session: &str) {
        self.lock().forget(session);
    }

    /// The sessions with buffers (to check which of them ended).
    pub(crate) fn sessions(&self) -> Vec<String> {
        self.lock().sessions.keys().cloned().collect()
    }

    /// Bytes of messages kept in all (for metrics).
    pub(crate) fn bytes(&self) -> usize {
        self.lock().budget.held_bytes()
    }

    /// The budget the buffers draw from (a slot per session, and the bytes kept).
    pub(crate) fn budget(&self) -> Budget {
        self.lock().budget.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "n";

    fn alice() -> Principal {
        Principal::new("iss", "alice")
    }

    fn limits(sessions: usize) -> ReplayLimits {
        ReplayLimits {
            sessions,
            ..ReplayLimits::default()
        }
    }

    #[test]
    fn replays_only_the_named_stream_after_the_id() {
        let buffers = ReplayBuffers::new(limits(4), NODE);
        let a = alice();
        let post = buffers.open_post_stream(&a, "s");
        let g1 = buffers.record(&a, "s", GET_STREAM, Bytes::from_static(b"g1"));
        let p1 = buffers.record(&a, "s", &post, Bytes::from_static(b"p1"));
        let primed = buffers.next_id(&a, "s", GET_STREAM);
        let g2 = buffers.record(&a, "s", GET_STREAM, Bytes::from_static(b"g2"));
        buffers.record(&a, "s", &post, Bytes::from_static(b"p2"));
        assert_eq!(
            (g1.as_str(), primed.as_str(), g2.as_str()),
            ("n.g:1", "n.g:2", "n.g:3")
        );
        assert_eq!(
            buffers.since("s", &g1),
            vec![("n.g:3".to_owned(), Bytes::from_static(b"g2"))]
        );
        assert_eq!(
            buffers.since("s", &p1),
            vec![(format!("n.{post}:2"), Bytes::from_static(b"p2"))]
        );
        assert!(buffers.since("s", "nonsense").is_empty());
        assert!(buffers.since("other", &g1).is_empty());
    }

    #[test]
    fn another_nodes_event_ids_replay_nothing() {
        // One session served by two nodes: each numbers its own streams from p1, so node B
        // must not answer node A's "p1" with its own p1 (another request's answers).
        let (a_node, b_node) = (
            ReplayBuffers::new(limits(4), "a"),
            ReplayBuffers::new(limits(4), "b"),
        );
        let a = alice();
        let (on_a, on_b) = (
            a_node.open_post_stream(&a, "s"),
            b_node.open_post_stream(&a, "s"),
        );
        assert_eq!(on_a, on_b, "both nodes number their streams alike");
        let first = a_node.record(&a, "s", &on_a, Bytes::from_static(b"a1"));
        b_node.record(&a, "s", &on_b, Bytes::from_static(b"b1"));
        b_node.record(&a, "s", &on_b, Bytes::from_static(b"b2"));
        assert_eq!(first, format!("a.{on_a}:1"));
        assert!(
            b_node.since("s", &first).is_empty(),
            "B replays none of its own events"
        );
        assert!(
            b_node.since("s", &format!("{on_a}:0")).is_empty(),
            "an id naming no node either"
        );
        a_node.record(&a, "s", &on_a, Bytes::from_static(b"a2"));
        assert_eq!(
            a_node.since("s", &first),
            vec![(format!("a.{on_a}:2"), Bytes::from_static(b"a2"))],
            "the node that minted the id replays"
        );
    }

    #[test]
    fn bounded_per_stream_per_session_and_in_sessions() {
        let buffers = ReplayBuffers::new(limits(2), NODE);
        let a = alice();
        for _ in 0..300 {
            buffers.record(&a, "s", GET_STREAM, Bytes::from_static(b"x"));
        }
        assert_eq!(buffers.since("s", "n.g:0").len(), PER_STREAM);
        let first = buffers.open_post_stream(&a, "s");
        buffers.record(&a, "s", &first, Bytes::from_static(b"x"));
        for _ in 0..STREAMS_PER_SESSION {
            let post = buffers.open_post_stream(&a, "s");
            buffers.record(&a, "s", &post, Bytes::from_static(b"x"));
        }
        assert!(
            buffers.since("s", &format!("n.{first}:0")).is_empty(),
            "the oldest POST stream is forgotten"
        );
        assert_eq!(
            buffers.since("s", "n.g:0").len(),
            PER_STREAM,
            "the GET stream is kept"
        );
        assert_eq!(buffers.bytes(), PER_STREAM + STREAMS_PER_SESSION - 1);
        buffers.record(&a, "t", GET_STREAM, Bytes::from_static(b"t"));
        let refused = buffers.record(&a, "u", GET_STREAM, Bytes::from_static(b"u"));
        assert!(
            buffers.since("u", "n.g:0").is_empty(),
            "a full table keeps no new session"
        );
        assert!(refused.starts_with("n.g:"), "{refused}");
        assert_eq!(
            buffers.since("s", "n.g:0").len(),
            PER_STREAM,
            "nobody was evicted"
        );
        assert_eq!(buffers.since("t", "n.g:0").len(), 1);
        buffers.forget("t");
        assert!(buffers.since("t", "n.g:0").is_empty());
        buffers.record(&a, "u", GET_STREAM, Bytes::from_static(b"u"));
        assert_eq!(
            buffers.since("u", "n.g:0").len(),
            1,
            "a forgotten session freed room"
        );
    }

    #[test]
    fn a_session_over_its_bytes_drops_its_own_oldest_events() {
        let buffers = ReplayBuffers::new(
            ReplayLimits {
                session_bytes: 10,
                ..ReplayLimits::default()
            },
            NODE,
        );
        let a = alice();
        let post = buffers.open_post_stream(&a, "s");
        buffers.record(&a, "s", GET_STREAM, Bytes::from_static(b"1234"));
        buffers.record(&a, "s", &post, Bytes::from_static(b"5678"));
        buffers.record(&a, "s", GET_STREAM, Bytes::from_static(b"9abc"));
        // The oldest event of the session (the GET stream's first) made room.
        assert_eq!(
            buffers.since("s", "n.g:0"),
            vec![("n.g:2".to_owned(), Bytes::from_static(b"9abc"))]
        );
        assert_eq!(buffers.since("s", &format!("n.{post}:0")).len(), 1);
        assert_eq!(buffers.bytes(), 8);
        let id = buffers.record(&a, "s", GET_STREAM, Bytes::from(vec![b'x'; 11]));
        assert_eq!(
            id, "n.g:3",
            "an event larger than the budget is sent with an id"
        );
        assert!(buffers.since("s", "n.g:2").is_empty(), "but not kept");
        assert_eq!(buffers.bytes(), 8, "and the kept events stay");
    }

    #[test]
    fn a_principal_over_its_share_never_evicts_another_principals_events() {
        let buffers = ReplayBuffers::new(
            ReplayLimits {
                session_bytes: 8,
                principal_bytes: 12,
                total_bytes: 20,
                ..ReplayLimits::default()
            },
            NODE,
        );
        let (a, b) = (alice(), Principal::new("iss", "bob"));
        buffers.record(&b, "b1", GET_STREAM, Bytes::from_static(b"bbbb"));
        for session in ["a1", "a2", "a3"] {
            for _ in 0..4 {
                buffers.record(&a, session, GET_STREAM, Bytes::from_static(b"aaaa"));
            }
        }
        // alice holds her share (12) in a1 and a2; a3 keeps nothing.
        assert_eq!(buffers.since("a3", "n.g:0").len(), 0);
        assert_eq!(buffers.since("b1", "n.g:0").len(), 1, "bob's event is kept");
        buffers.record(&b, "b2", GET_STREAM, Bytes::from_static(b"bbbb"));
        assert_eq!(buffers.since("b2", "n.g:0").len(), 1);
        assert_eq!(buffers.bytes(), 20);
        // The whole budget is full: a third principal's event is sent but not kept.
        let carol = Principal::new("iss", "carol");
        buffers.record(&carol, "c1", GET_STREAM, Bytes::from_static(b"cccc"));
        assert!(buffers.since("c1", "n.g:0").is_empty());
        assert_eq!(buffers.since("b1", "n.g:0").len(), 1, "still kept");
        buffers.forget("a1");
        buffers.record(&carol, "c1", GET_STREAM, Bytes::from_static(b"cccc"));
        assert_eq!(buffers.since("c1", "n.g:0").len(), 1, "room again");
    }
}
