//! Server-to-client requests relayed to 2025 clients, waiting for the client's answer.
//!
//! A backend's request (sampling, elicitation, roots, ping) arriving on a call's or the GET
//! stream is sent to the client under a gateway id; the client's response POST carries that id
//! back. For a backend's request the id itself is the route: it seals (AES-256-GCM, bound to the
//! downstream session, with an expiry) the backend's name, its request id and the upstream session
//! (URL, session id, version), so ANY gateway node sharing the sealing secret can deliver the
//! answer into the backend's session — no node-local state, which multi-node deployments need —
//! while the client, who holds the id, learns neither the backend's address nor its session.
//! The gateway's own requests (a modern backend's MRTR input bridged for a 2025 client) wait in
//! this node's table, because the call that waits for the answer runs here; their ids seal the
//! node and the table entry, so another node that gets the answer can pass it on over the
//! [`NodeBus`](crate::front::bus::NodeBus).
//!
//! A backend's request that carries `_meta.progressToken` (it wants the client's
//! `notifications/progress` for it) reaches the client with the gateway id as its token too, and
//! the backend's own token sealed in it: the client's progress for that token, and its
//! `notifications/cancelled` naming the gateway id, are mapped back to the backend's token and id
//! and posted into the backend's session ([`PendingRequests::relayed`]), again from any node.
//!
//! The table of the gateway's own requests is bounded on the node and per principal (the
//! budget rule, book: docs/src/security.md): a principal at its share is refused (the call
//! whose backend asked fails, naming the limit) while other principals still register, and
//! expired entries are swept as new ones arrive, oldest first, in constant time per entry, not
//! only when the table fills.
//!
//! Why this file is long: both kinds of route share one sealed id format and one answer path,
//! and a third of the file is their unit tests.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use mcp_core::{Budget, Principal, RequestId, Slot, Spent};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::seal::Sealer;
use crate::upstream::{LegacySession, LinkWriter};

const PURPOSE: &str = "mcp-router/pending/v1";

/// Where a client's answer goes.
#[derive(Debug)]
pub(crate) enum Route {
    /// Back to a legacy backend's request.
    Backend {
        /// The backend that asked.
        backend: String,
        /// The backend's id of its request.
        upstream_id: RequestId,
        /// The upstream session to answer in.
        session: Arc<LegacySession>,
    },
    /// To the gateway itself: a modern backend's MRTR input request that the gateway turned into
    /// a real request for a 2025 client (the answer becomes an `inputResponses` entry).
    Local(tokio::sync::oneshot::Sender<Bytes>),
    /// To the gateway's own request on another node (see [`crate::front::bus`]).
    Remote {
        /// The node that asked.
        node: String,
    },
}

/// A backend's request relayed to the client, found from its gateway id.
#[derive(Debug)]
pub(crate) struct Relayed {
    pub(crate) backend: String,
    pub(crate) upstream_id: RequestId,
    pub(crate) session: Arc<LegacySession>,
    /// The backend's own progress token of the request, as JSON.
    pub(crate) progress_token: Option<String>,
}

/// One relayed request, found from the client's answer.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Where the answer goes.
    pub(crate) route: Route,
    /// What was asked, for the audit trail.
    pub(crate) asked: Asked,
}

/// What a relayed request was, for the audit trail: its method and the backend that asked
/// (carried in its sealed id, so any node knows; `None` in ids sealed before they carried it,
/// and the backend of a bridged input request is always named).
#[derive(Debug, Default)]
pub(crate) struct Asked {
    pub(crate) method: Option<String>,
    pub(crate) backend: Option<String>,
}

/// What a relayed request id carries (encrypted).
#[derive(Serialize, Deserialize)]
#[serde(tag = "k")]
enum Sealed {
    /// A backend's request.
    #[serde(rename = "b")]
    Backend {
        /// Backend name.
        b: String,
        /// The backend's request id, as JSON.
        u: String,
        /// Upstream session URL.
        l: String,
        /// Upstream `Mcp-Session-Id`, when the backend minted one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        s: Option<String>,
        /// Negotiated protocol version of the upstream session.
        v: String,
        /// The backend's own progress token of its request, as JSON.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p: Option<String>,
        /// Expiry, Unix seconds.
        e: u64,
        /// The request's method (for the audit trail).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        m: Option<String>,
    },
    /// The gateway's own request: entry `i` of node `n`'s table; `m` its method and `b` the
    /// backend it is asked for (for the audit trail).
    #[serde(rename = "l")]
    Local {
        n: String,
        i: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        m: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        b: Option<String>,
    },
}

struct LocalEntry {
    downstream_session: String,
    /// Its place in its principal's share, given back when the entry leaves.
    _slot: Slot,
    answer: tokio::sync::oneshot::Sender<Bytes>,
    created: Instant,
    /// A linked backend's request that asked for progress: where the client's progress goes.
    progress: Option<LinkProgress>,
}

/// Where a client's `notifications/progress` for a request a linked backend (stdio process,
/// HTTP+SSE connection) asked goes: the link, under the backend's own token.
#[derive(Clone)]
pub(crate) struct LinkProgress {
    pub(crate) link: LinkWriter,
    /// The backend's own progress token, as JSON.
    pub(crate) token: String,
}

/// Why a request of the gateway's own could not be registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The node's table is full of fresh entries (its size).
    Node(usize),
    /// The principal holds its share (the share).
    Principal(usize),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Node(max) => write!(
                f,
                "too many backend requests wait for their clients' answers on this gateway node \
                 (at most {max}: limits.max_relayed_requests)"
            ),
            Self::Principal(max) => write!(
                f,
                "too many backend requests wait for this caller's answers (at most {max}: \
                 limits.max_relayed_requests_per_principal)"
            ),
        }
    }
}

/// The gateway's own requests on this node (see the module docs).
#[derive(Default)]
struct LocalTable {
    entries: HashMap<u64, LocalEntry>,
    /// Entry numbers in the order they were registered (so by age), to sweep expired entries
    /// from the front; a taken entry's number stays until it comes up or the queue is compacted.
    order: VecDeque<u64>,
}

impl LocalTable {
    fn remove(&mut self, entry: u64) -> Option<LocalEntry> {
        self.entries.remove(&entry)
    }

    /// Drops the entries older than `ttl`, oldest first: each entry is looked at once, so this
    /// costs constant time per registered entry.
    fn sweep(&mut self, now: Instant, ttl: Duration) {
        while let Some(&oldest) = self.order.front() {
            if let Some(entry) = self.entries.get(&oldest)
                && now.duration_since(entry.created) < ttl
            {
                break;
            }
            self.order.pop_front();
            self.remove(oldest);
        }
        // Taken entries leave numbers behind; drop them once they are most of the queue.
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order.retain(|n| entries.contains_key(n));
        }
    }
}

/// The relayed requests of one router.
pub(crate) struct PendingRequests {
    sealer: Sealer,
    /// This node's id, in the ids of the gateway's own requests.
    node: String,
    local: Mutex<LocalTable>,
    next: AtomicU64,
    ttl: Duration,
    /// A slot per entry.
    budget: Budget,
}

impl std::fmt::Debug for PendingRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRequests")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl PendingRequests {
    /// A table for node `node`: the gateway's own requests wait `ttl` for their answer, at most
    /// `max` of them at once and `max_per_principal` of one principal.
    pub(crate) fn new(
        sealer: Sealer,
        node: String,
        ttl: Duration,
        max: usize,
        max_per_principal: usize,
    ) -> Self {
        Self {
            sealer,
            node,
            local: Mutex::new(LocalTable::default()),
            next: AtomicU64::new(1),
            ttl,
            budget: Budget::new("relayed_requests").with_slots(max_per_principal, max),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LocalTable> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many of the gateway's own requests wait for an answer on this node (for metrics).
    pub(crate) fn waiting(&self) -> usize {
        self.lock().entries.len()
    }

    /// The budget the waiting requests draw from (a slot each).
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// This node's id.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// How long a relayed request waits for the client's answer.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A backend's request `request` (a parsed JSON-RPC request) as the client gets it: under a
    /// gateway id, which is also its progress token when the backend asked for progress.
    pub(crate) fn relay(
        &self,
        downstream_session: &str,
        backend: &str,
        upstream_id: RequestId,
        session: Arc<LegacySession>,
        request: &mut mcp_core::RawObject<'_>,
    ) {
        let token = progress_token(request);
        let id = self.register(
            downstream_session,
            backend,
            upstream_id,
            session,
            token.clone(),
            request.get_str("method"),
        );
        show_under(request, &id, token.is_some());
    }

    /// A linked backend's request `request` as the client gets it, like [`relay`](Self::relay):
    /// under a gateway id, also its progress token when the backend asked for progress (the
    /// client's progress then goes to `link` under the backend's token). The client's answer
    /// arrives on the returned receiver; the entry number is for [`release`](Self::release).
    /// Refused when the table or `principal`'s share is full (see
    /// [`register_local_asked`](Self::register_local_asked)).
    pub(crate) fn relay_link(
        &self,
        downstream_session: &str,
        principal: &Principal,
        link: &LinkWriter,
        request: &mut mcp_core::RawObject<'_>,
        backend: &str,
    ) -> Result<(u64, tokio::sync::oneshot::Receiver<Bytes>), Refused> {
        let token = progress_token(request);
        let progress = token.clone().map(|token| LinkProgress {
            link: link.clone(),
            token,
        });
        let asked = Asked {
            method: request.get_str("method"),
            backend: Some(backend.to_owned()),
        };
        let (id, entry, answer) =
            self.insert_local(downstream_session, principal, progress, asked)?;
        show_under(request, &id, token.is_some());
        Ok((entry, answer))
    }

    /// Where the client's progress for the linked backend's request behind `token` (a gateway
    /// id shown to `downstream_session` as a progress token) goes, while the request waits for
    /// its answer on this node.
    pub(crate) fn link_progress(
        &self,
        token: &str,
        downstream_session: &str,
    ) -> Option<LinkProgress> {
        let Some(Sealed::Local { n, i, .. }) = self.open(token, downstream_session) else {
            return None;
        };
        if n != self.node {
            return None;
        }
        let local = self.lock();
        let entry = local.entries.get(&i)?;
        (entry.downstream_session == downstream_session
            && Instant::now().duration_since(entry.created) < self.ttl)
            .then(|| entry.progress.clone())
            .flatten()
    }

    /// The backend request behind `id` (a relayed request's gateway id, or its progress token)
    /// shown to `downstream_session`, while fresh: `(backend, upstream id, upstream session, the
    /// backend's progress token as JSON)`.
    pub(crate) fn relayed(&self, id: &str, downstream_session: &str) -> Option<Relayed> {
        let Sealed::Backend { p, .. } = self.open(id, downstream_session)? else {
            return None;
        };
        let Some(Pending {
            route:
                Route::Backend {
                    backend,
                    upstream_id,
                    session,
                },
            ..
        }) = self.take(id, downstream_session)
        else {
            return None;
        };
        Some(Relayed {
            backend,
            upstream_id,
            session,
            progress_token: p,
        })
    }

    /// The id to show the client for a backend's request (`progress_token`: the request's own,
    /// as JSON).
    fn register(
        &self,
        downstream_session: &str,
        backend: &str,
        upstream_id: RequestId,
        session: Arc<LegacySession>,
        progress_token: Option<String>,
        method: Option<String>,
    ) -> String {
        let sealed = Sealed::Backend {
            b: backend.to_owned(),
            u: upstream_id.to_json().into_owned(),
            l: session.url.as_str().to_owned(),
            s: session
                .id
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            v: session.version.clone(),
            p: progress_token,
            e: self.sealer.unix_now().saturating_add(self.ttl.as_secs()),
            m: method,
        };
        self.seal(downstream_session, &sealed)
    }

    fn seal(&self, downstream_session: &str, sealed: &Sealed) -> String {
        let payload = serde_json::to_vec(sealed).unwrap_or_default();
        self.sealer.seal(PURPOSE, &[downstream_session], &payload)
    }

    fn open(&self, id: &str, downstream_session: &str) -> Option<Sealed> {
        let payload = self.sealer.open(PURPOSE, &[downstream_session], id).ok()?;
        serde_json::from_slice(&payload).ok()
    }

    /// `register_local_asked` without saying what is asked (the tests' shorthand).
    #[cfg(test)]
    pub(crate) fn register_local(
        &self,
        downstream_session: &str,
        principal: &Principal,
    ) -> Result<(String, u64, tokio::sync::oneshot::Receiver<Bytes>), Refused> {
        self.insert_local(downstream_session, principal, None, Asked::default())
    }

    /// Registers a request the gateway itself asks for `principal`: its id, its entry number
    /// (for [`release`](Self::release)), and the receiver the answer (the client's whole JSON-RPC
    /// response) arrives on. Refused when the table is full of fresh entries or `principal` holds
    /// its share: the request must then not be shown to the client, whose answer would be lost.
    /// `asked` (its method and the backend it is asked for) travels in the id, for the audit
    /// trail.
    pub(crate) fn register_local_asked(
        &self,
        downstream_session: &str,
        principal: &Principal,
        asked: Asked,
    ) -> Result<(String, u64, tokio::sync::oneshot::Receiver<Bytes>), Refused> {
        self.insert_local(downstream_session, principal, None, asked)
    }

    /// Forgets the entries of a call that ended (answered ones are gone already): their waiters
    /// see the sender dropped, and their places in the principal's share are free at once.
    pub(crate) fn release(&self, entries: &[u64]) {
        let mut local = self.lock();
        for &entry in entries {
            local.remove(entry);
        }
    }

    fn insert_local(
        &self,
        downstream_session: &str,
        principal: &Principal,
        progress: Option<LinkProgress>,
        asked: Asked,
    ) -> Result<(String, u64, tokio::sync::oneshot::Receiver<Bytes>), Refused> {
        let now = Instant::now();
        let mut local = self.lock();
        local.sweep(now, self.ttl);
        let slot = self.budget.take(principal).map_err(|spent| match spent {
            Spent::Share(max) => Refused::Principal(max),
            Spent::Ceiling(max) => Refused::Node(max),
        })?;
        let entry = self.next.fetch_add(1, Ordering::Relaxed);
        let (answer, receiver) = tokio::sync::oneshot::channel();
        local.entries.insert(
            entry,
            LocalEntry {
                downstream_session: downstream_session.to_owned(),
                _slot: slot,
                answer,
                created: now,
                progress,
            },
        );
        local.order.push_back(entry);
        drop(local);
        // Sealing (AES-GCM) runs outside the lock.
        let id = self.seal(
            downstream_session,
            &Sealed::Local {
                n: self.node.clone(),
                i: entry,
                m: asked.method,
                b: asked.backend,
            },
        );
        Ok((id, entry, receiver))
    }

    /// Where the client's answer with `id` goes, if `id` was shown to `downstream_session` and is
    /// still fresh.
    pub(crate) fn take(&self, id: &str, downstream_session: &str) -> Option<Pending> {
        let (b, u, l, s, v, e, m) = match self.open(id, downstream_session)? {
            Sealed::Local { n, m, b, .. } if n != self.node => {
                return Some(Pending {
                    route: Route::Remote { node: n },
                    asked: Asked {
                        method: m,
                        backend: b,
                    },
                });
            }
            Sealed::Local { i, m, b, .. } => {
                let mut pending = self.take_local(i, downstream_session)?;
                pending.asked = Asked {
                    method: m,
                    backend: b,
                };
                return Some(pending);
            }
            Sealed::Backend {
                b,
                u,
                l,
                s,
                v,
                e,
                m,
                ..
            } => (b, u, l, s, v, e, m),
        };
        if e < self.sealer.unix_now() {
            return None;
        }
        let session = LegacySession {
            url: url::Url::parse(&l).ok()?,
            id: s.as_deref().and_then(|s| HeaderValue::from_str(s).ok()),
            version: v,
            initialize_result: Bytes::new(),
            clock: crate::telemetry::SessionClock::unknown(),
        };
        Some(Pending {
            route: Route::Backend {
                backend: b.clone(),
                upstream_id: serde_json::from_str(&u).ok()?,
                session: Arc::new(session),
            },
            asked: Asked {
                method: m,
                backend: Some(b),
            },
        })
    }

    /// Delivers `answer` to this node's own request `id` (an answer another node received);
    /// `false` when unknown, expired, shown to another session, or nobody waits any more.
    #[cfg(feature = "redis")]
    pub(crate) fn answer_local(&self, id: &str, downstream_session: &str, answer: String) -> bool {
        let Some(Sealed::Local { n, i, .. }) = self.open(id, downstream_session) else {
            return false;
        };
        if n != self.node {
            return false;
        }
        match self.take_local(i, downstream_session) {
            Some(Pending {
                route: Route::Local(sender),
                ..
            }) => sender.send(Bytes::from(answer)).is_ok(),
            _ => false,
        }
    }

    fn take_local(&self, entry: u64, downstream_session: &str) -> Option<Pending> {
        let mut local = self.lock();
        if local.entries.get(&entry)?.downstream_session != downstream_session {
            return None;
        }
        let entry = local.remove(entry)?;
        (Instant::now().duration_since(entry.created) < self.ttl).then_some(Pending {
            route: Route::Local(entry.answer),
            asked: Asked::default(),
        })
    }
}

/// The backend's own `_meta.progressToken` of a request, as JSON.
fn progress_token(request: &mcp_core::RawObject<'_>) -> Option<String> {
    let params = mcp_core::RawObject::from_raw(request.get("params")?).ok()?;
    let meta = mcp_core::RawObject::from_raw(params.get("_meta")?).ok()?;
    meta.get(crate::upstream::PROGRESS_TOKEN)
        .map(|t| t.get().to_owned())
}

/// Shows `request` under the gateway id `id`, which is also its progress token when it has one.
fn show_under(request: &mut mcp_core::RawObject<'_>, id: &str, has_token: bool) {
    request.set_str("id", id);
    if !has_token {
        return;
    }
    let Some(mut params) = request
        .get("params")
        .and_then(|p| mcp_core::RawObject::from_raw(p).ok())
        .map(mcp_core::RawObject::into_owned)
    else {
        return;
    };
    let Some(mut meta) = params
        .get("_meta")
        .and_then(|m| mcp_core::RawObject::from_raw(m).ok())
        .map(mcp_core::RawObject::into_owned)
    else {
        return;
    };
    meta.set_str(crate::upstream::PROGRESS_TOKEN, id);
    params.set_raw("_meta", meta.to_raw());
    request.set_raw("params", params.to_raw());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Principal {
        Principal::new("iss", "alice")
    }

    fn session() -> Arc<LegacySession> {
        Arc::new(LegacySession {
            url: url::Url::parse("http://b/mcp").expect("url"),
            id: Some(HeaderValue::from_static("up-1")),
            version: "2025-11-25".into(),
            initialize_result: Bytes::new(),
            clock: crate::telemetry::SessionClock::unknown(),
        })
    }

    #[test]
    fn a_backend_request_id_carries_its_route_and_is_bound_to_the_session() {
        let sealer = Sealer::random();
        let table =
            PendingRequests::new(sealer.clone(), "n1".into(), Duration::from_secs(60), 10, 10);
        let method = Some("elicitation/create".to_owned());
        let id = table.register("s1", "beta", RequestId::from(7), session(), None, method);
        let raw = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, &id)
            .expect("base64url");
        for hidden in [&b"http://b/mcp"[..], b"up-1", b"beta", b"elicitation"] {
            assert!(
                !raw.windows(hidden.len()).any(|w| w == hidden),
                "the id reveals its route"
            );
        }
        assert!(
            table.take(&id, "s2").is_none(),
            "another session cannot answer"
        );
        // Another node with the same sealing secret resolves it too.
        let other_node = PendingRequests::new(sealer, "n2".into(), Duration::from_secs(60), 10, 10);
        let Some(Pending {
            route:
                Route::Backend {
                    backend,
                    upstream_id,
                    session,
                },
            asked,
        }) = other_node.take(&id, "s1")
        else {
            panic!("a backend route");
        };
        // What was asked travels in the id, for the audit trail of whichever node gets the answer.
        assert_eq!(
            (asked.method.as_deref(), asked.backend.as_deref()),
            (Some("elicitation/create"), Some("beta"))
        );
        assert_eq!(
            (backend.as_str(), upstream_id),
            ("beta", RequestId::from(7))
        );
        assert_eq!(session.url.as_str(), "http://b/mcp");
        assert_eq!(
            session.id.as_ref().map(|v| v.to_str().ok()),
            Some(Some("up-1"))
        );
        let foreign = PendingRequests::new(
            Sealer::random(),
            "n1".into(),
            Duration::from_secs(60),
            10,
            10,
        );
        assert!(
            foreign.take(&id, "s1").is_none(),
            "another secret cannot open it"
        );
    }

    #[cfg(feature = "redis")]
    #[tokio::test(start_paused = true)]
    async fn local_requests_deliver_the_answer_and_expire() {
        // A node id with a character base64url never has: seeing it in a sealed id would mean
        // it is not sealed (a plain "n1" turns up by chance in about 2% of ciphertexts).
        let table = PendingRequests::new(
            Sealer::random(),
            "node/1".into(),
            Duration::from_secs(60),
            10,
            10,
        );
        assert!(
            table.take("gwl-n1-1", "s1").is_none(),
            "ids of the previous plain format are unknown"
        );
        let (id, _, answer) = table.register_local("s1", &alice()).expect("room");
        assert!(table.take(&id, "s2").is_none());
        let Some(Pending {
            route: Route::Local(sender),
            ..
        }) = table.take(&id, "s1")
        else {
            panic!("a local route");
        };
        sender
            .send(Bytes::from_static(b"{\"result\":{}}"))
            .expect("receiver alive");
        assert_eq!(
            answer.await.expect("answer"),
            Bytes::from_static(b"{\"result\":{}}")
        );
        assert!(table.take(&id, "s1").is_none(), "answered once");
        // Another node sees whose request it is; the owner takes an answer passed on to it.
        let (relayed, _, answer) = table.register_local("s1", &alice()).expect("room");
        assert!(!relayed.contains("node/1"), "the node is sealed: {relayed}");
        let other_node = PendingRequests::new(
            table.sealer.clone(),
            "n2".into(),
            Duration::from_secs(60),
            10,
            10,
        );
        assert!(matches!(
            other_node.take(&relayed, "s1"),
            Some(Pending { route: Route::Remote { node }, .. }) if node == "node/1"
        ));
        assert!(
            !table.answer_local(&relayed, "s2", "{}".into()),
            "bound to its session"
        );
        assert!(table.answer_local(&relayed, "s1", "{\"result\":1}".into()));
        assert_eq!(
            answer.await.expect("answer"),
            Bytes::from_static(b"{\"result\":1}")
        );
        assert!(
            !table.answer_local(&relayed, "s1", "{}".into()),
            "answered once"
        );

        let (late, _, _answer) = table.register_local("s1", &alice()).expect("room");
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(table.take(&late, "s1").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_local_table_registers_nothing_until_entries_expire() {
        let table =
            PendingRequests::new(Sealer::random(), "n1".into(), Duration::from_secs(60), 2, 2);
        let _first = table.register_local("s1", &alice()).expect("room");
        let _second = table.register_local("s2", &alice()).expect("room");
        let bob = Principal::new("iss", "bob");
        assert_eq!(
            table.register_local("s3", &bob).err(),
            Some(Refused::Node(2)),
            "a full table shows the client nothing it could not route back"
        );
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(
            table.register_local("s3", &bob).is_ok(),
            "expired entries make room"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_principal_at_its_share_never_costs_another_principal_a_request() {
        let table = PendingRequests::new(
            Sealer::random(),
            "n1".into(),
            Duration::from_secs(60),
            10,
            3,
        );
        let bob = Principal::new("iss", "bob");
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(
                table
                    .register_local("a", &alice())
                    .expect("within alice's share"),
            );
        }
        assert_eq!(
            table.register_local("a", &alice()).err(),
            Some(Refused::Principal(3))
        );
        assert!(
            table.register_local("b", &bob).is_ok(),
            "bob registers while alice holds her share"
        );
        // An answered request frees its place in its principal's share, and so does a call
        // that ended with its requests unanswered (released).
        let (id, _, _answer) = held.pop().expect("held");
        assert!(table.take(&id, "a").is_some());
        assert!(table.register_local("a", &alice()).is_ok());
        let entries: Vec<u64> = held.iter().map(|(_, entry, _)| *entry).collect();
        table.release(&entries);
        assert!(
            held.iter().all(|(id, _, _)| table.take(id, "a").is_none()),
            "released entries are gone"
        );
        assert!(table.register_local("a", &alice()).is_ok());
        assert!(table.register_local("a", &alice()).is_ok());
        assert!(
            Refused::Principal(3)
                .to_string()
                .contains("limits.max_relayed_requests_per_principal")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn expired_requests_leave_as_new_ones_arrive_not_only_when_the_table_is_full() {
        let table = PendingRequests::new(
            Sealer::random(),
            "n1".into(),
            Duration::from_secs(60),
            1000,
            1000,
        );
        for _ in 0..5 {
            let _ = table.register_local("a", &alice()).expect("room");
        }
        assert_eq!(table.waiting(), 5);
        tokio::time::advance(Duration::from_secs(61)).await;
        let _fresh = table.register_local("a", &alice()).expect("room");
        assert_eq!(table.waiting(), 1, "the five expired ones were swept");
        // Many taken entries leave no unbounded trail of numbers behind.
        for _ in 0..10_000 {
            let (id, _, _answer) = table.register_local("a", &alice()).expect("room");
            assert!(table.take(&id, "a").is_some());
        }
        let queued = table.lock().order.len();
        let waiting = table.waiting();
        assert!(
            queued <= 2 * waiting + 65,
            "{queued} numbers queued for {waiting} entries"
        );
    }
}
