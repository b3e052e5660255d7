//! Server-to-client requests relayed to 2025 clients, waiting for the client's answer.
//!
//! A backend's request (sampling, elicitation, roots, ping) arriving on a call's stream is sent to
//! the client with a gateway-minted id; the client's response POST carries that id, which leads
//! back to the backend, its upstream session and the backend's own request id. An entry is bound
//! to the downstream session that received the request and forgotten after the answer or a
//! timeout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use mcp_core::RequestId;
use tokio::time::Instant;

use crate::upstream::LegacySession;

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
}

/// One relayed request.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The downstream session the request was sent to.
    pub(crate) downstream_session: String,
    /// Where the answer goes.
    pub(crate) route: Route,
    created: Instant,
}

/// The table of relayed requests of one router.
#[derive(Debug)]
pub(crate) struct PendingRequests {
    entries: Mutex<HashMap<String, Pending>>,
    next: AtomicU64,
    ttl: Duration,
    max: usize,
}

impl PendingRequests {
    pub(crate) fn new(ttl: Duration, max: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            ttl,
            max,
        }
    }

    /// Registers a backend request and returns the id to show the client.
    pub(crate) fn register(
        &self,
        downstream_session: &str,
        backend: &str,
        upstream_id: RequestId,
        session: Arc<LegacySession>,
    ) -> String {
        let route = Route::Backend {
            backend: backend.to_owned(),
            upstream_id,
            session,
        };
        self.insert(downstream_session, route)
    }

    /// Registers a request the gateway itself asks; the answer (the client's whole JSON-RPC
    /// response) arrives on the returned receiver.
    pub(crate) fn register_local(
        &self,
        downstream_session: &str,
    ) -> (String, tokio::sync::oneshot::Receiver<Bytes>) {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        (
            self.insert(downstream_session, Route::Local(sender)),
            receiver,
        )
    }

    fn insert(&self, downstream_session: &str, route: Route) -> String {
        let id = format!("gw-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if entries.len() >= self.max {
            entries.retain(|_, p| now.duration_since(p.created) < self.ttl);
        }
        if entries.len() < self.max {
            entries.insert(
                id.clone(),
                Pending {
                    downstream_session: downstream_session.to_owned(),
                    route,
                    created: now,
                },
            );
        }
        id
    }

    /// Takes the entry for a client's answer, if it belongs to `downstream_session` and is fresh.
    pub(crate) fn take(&self, id: &str, downstream_session: &str) -> Option<Pending> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let pending = entries.get(id)?;
        if pending.downstream_session != downstream_session {
            return None;
        }
        let pending = entries.remove(id)?;
        (Instant::now().duration_since(pending.created) < self.ttl).then_some(pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Arc<LegacySession> {
        Arc::new(LegacySession {
            url: url::Url::parse("http://b/mcp").expect("url"),
            id: None,
            version: "2025-11-25".into(),
            initialize_result: Bytes::new(),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn answers_are_bound_to_their_session_and_expire() {
        let table = PendingRequests::new(Duration::from_secs(60), 10);
        let id = table.register("s1", "beta", RequestId::from(7), session());
        assert!(
            table.take(&id, "s2").is_none(),
            "another session cannot answer"
        );
        let pending = table.take(&id, "s1").expect("the right session answers");
        let Route::Backend {
            backend,
            upstream_id,
            ..
        } = pending.route
        else {
            panic!("a backend route");
        };
        assert_eq!(
            (backend.as_str(), upstream_id),
            ("beta", RequestId::from(7))
        );
        assert!(table.take(&id, "s1").is_none(), "answered once");
        let late = table.register("s1", "beta", RequestId::from(8), session());
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(table.take(&late, "s1").is_none());
    }

    #[tokio::test]
    async fn local_requests_deliver_the_answer_to_the_gateway() {
        let table = PendingRequests::new(Duration::from_secs(60), 10);
        let (id, answer) = table.register_local("s1");
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
    }
}
