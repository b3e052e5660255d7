//! [`NodeBus`]: messages between the gateway nodes that share one Redis, for the two things a
//! 2025 client may send to *any* node but only one node can act on:
//!
//! - the client's answer to a request the gateway asked itself (a modern backend's MRTR input
//!   request bridged into a real `elicitation/create` / `sampling/createMessage` / `roots/list`):
//!   the call waiting for it runs on the node that holds the call's POST stream. Such request ids
//!   carry their node (sealed, like every id the gateway hands out), and a node that gets an
//!   answer for another node's id publishes it on that node's channel `<prefix>:bus:<node>`;
//! - `notifications/cancelled` for a call this node is not running: published on
//!   `<prefix>:bus:all`, and the node running it cancels it;
//! - a 2026-07-28 client's retry of a call parked on another node (a 2025 backend's call waiting
//!   for the client's `input_required` answers): passed on to the holding node, whose answer
//!   comes back on the asking node's channel;
//! - a sealed session ended by DELETE (the sealed store's ids cannot be invalidated, see
//!   [`SessionStore::revocation`](crate::session::SessionStore::revocation)): published on
//!   `<prefix>:bus:all`, and every node refuses the id from then on.
//!
//! Delivery is at most once and best effort, as Redis pub/sub is: a node that is down or
//! reconnecting misses the message (its calls are gone or time out anyway). The publisher answers
//! the client `202 Accepted` as soon as Redis took the message. Answers to a *backend's* requests
//! need no bus: their ids carry the whole route.
//!
//! Each node subscribes from the first request its router serves (of either era) on, reconnecting
//! with backoff (100 ms doubling to 5 s) after a Redis outage; `McpRouter::node_bus_subscribed`
//! tells whether it is subscribed (the gateway's `mcp_gateway_node_bus_subscribed`). Without a
//! bus (the local store, or the sealed store without a Redis URL) the first two cases only work
//! on the node that asked or runs the call, and an ended sealed session is refused only by the
//! node that ended it (elsewhere it works until it expires); a node that is not subscribed when
//! a revocation is published misses it the same way.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_redis::redis;
use futures_util::StreamExt;
use mcp_config_store::{RedisPool, RedisTopology};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::session::{RedisSessionStoreConfig, RedisSessionStoreError, Revocation};

/// Reconnect delays of the subscriber, doubling up to the last.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// One message on the bus.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum BusMessage {
    /// A client's answer (`{"result":…}` or `{"error":…}`) to the gateway's request `id`, shown
    /// to downstream session `session`.
    Answer {
        session: String,
        id: String,
        answer: String,
    },
    /// `notifications/cancelled` for request `request` (its id as JSON) of `session`.
    Cancel { session: String, request: String },
    /// A session ended on the publishing node, to refuse here too.
    Revoke(Revocation),
    /// A client's retry of a call parked on this node, passed on by the node it reached.
    Resume(Box<crate::front::forward::Forwarded>),
    /// A part of this node's answer to a forwarded retry.
    ResumePart {
        ticket: String,
        part: crate::front::forward::Part,
    },
}

/// Messages between the nodes sharing one Redis; see the [module docs](self). Give the same
/// Redis settings as the [`RedisSessionStore`](crate::session::RedisSessionStore) of every node
/// to [`McpRouterBuilder::node_bus`](crate::McpRouterBuilder::node_bus).
///
/// ```no_run
/// use std::sync::Arc;
/// use mcp_router::McpRouter;
/// use mcp_router::bus::NodeBus;
/// use mcp_router::session::{RedisSessionStore, RedisSessionStoreConfig};
///
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = RedisSessionStoreConfig::new("redis://127.0.0.1:6379/");
/// let router = McpRouter::builder()
///     .session_store(Arc::new(RedisSessionStore::new(redis.clone())?))
///     .node_bus(NodeBus::redis(&redis)?)
///     .build();
/// # let _ = router; Ok(()) }
/// ```
pub struct NodeBus {
    node: String,
    topology: RedisTopology,
    pool: RedisPool,
    prefix: String,
    timeout: Duration,
    /// The subscriber task, started by the first 2025 request (checked on every one: lock-free).
    listener: OnceLock<tokio::task::AbortHandle>,
    /// Whether the subscriber is subscribed right now (a node that asks another for an answer
    /// waits for it: an answer published before it listens would be lost).
    subscribed: tokio::sync::watch::Sender<bool>,
    /// The forwarded retries this node served lately: an asking node sends a retry again until
    /// the first part of the answer reaches it (the PUBLISH count cannot tell it was heard: in a
    /// Redis Cluster it counts only the subscribers of the node that ran the command), and a
    /// parked call must be resumed once.
    served: std::sync::Mutex<std::collections::VecDeque<String>>,
    /// Messages Redis did not take ([`publish_counted`](Self::publish_counted) gave `None`),
    /// since the bus was built, for metrics.
    publish_failures: AtomicU64,
}

/// How many served retry tickets a node remembers (re-sends stop within seconds).
const SERVED_TICKETS: usize = 1024;

impl fmt::Debug for NodeBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeBus")
            .field("node", &self.node)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Drop for NodeBus {
    fn drop(&mut self) {
        if let Some(handle) = self.listener.get() {
            handle.abort();
        }
    }
}

impl NodeBus {
    /// A bus on the Redis of `config` (its URL, key prefix and timeouts), with a random node id.
    /// Does not connect yet.
    ///
    /// # Errors
    ///
    /// An invalid URL or key prefix.
    pub fn redis(config: &RedisSessionStoreConfig) -> Result<Self, RedisSessionStoreError> {
        let (topology, pool) = crate::session::redis::pool(config, 4)?;
        let node = crate::node_id::new_node_id();
        Ok(Self {
            node,
            topology,
            pool,
            prefix: config.key_prefix.clone(),
            timeout: config.connect_timeout + config.response_timeout,
            listener: OnceLock::new(),
            subscribed: tokio::sync::watch::Sender::new(false),
            served: std::sync::Mutex::default(),
            publish_failures: AtomicU64::new(0),
        })
    }

    /// `true` the first time `ticket` (a forwarded retry's) is seen lately; `false` for a copy.
    pub(crate) fn first_sight(&self, ticket: &str) -> bool {
        let mut served = self
            .served
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if served.iter().any(|t| t == ticket) {
            return false;
        }
        if served.len() >= SERVED_TICKETS {
            served.pop_front();
        }
        served.push_back(ticket.to_owned());
        true
    }

    /// This node's id (in the ids of the requests it asks).
    pub fn node_id(&self) -> &str {
        &self.node
    }

    fn channel(&self, node: &str) -> String {
        format!("{}:bus:{node}", self.prefix)
    }

    /// Starts listening (once): the messages for this node go to the channel `inbox` opens (its
    /// receiver acts on them). The subscription ends when that receiver is gone.
    pub(crate) fn ensure_listening(&self, inbox: impl FnOnce() -> mpsc::Sender<BusMessage>) {
        self.listener.get_or_init(|| {
            let subscription = Subscription {
                topology: self.topology.clone(),
                channels: vec![self.channel(&self.node), self.channel("all")],
                timeout: self.timeout,
                inbox: inbox(),
                subscribed: self.subscribed.clone(),
            };
            tokio::spawn(subscription.run()).abort_handle()
        });
    }

    /// Whether this node's subscriber is subscribed right now, for metrics: `None` before it
    /// started ([`ensure_listening`](Self::ensure_listening)), `Some(false)` while it connects
    /// or waits to reconnect after losing its connection.
    pub(crate) fn subscribed(&self) -> Option<bool> {
        self.listener.get().map(|_| *self.subscribed.borrow())
    }

    /// How many messages Redis did not take since the bus was built, for metrics.
    pub(crate) fn publish_failures(&self) -> u64 {
        self.publish_failures.load(Ordering::Relaxed)
    }

    /// Waits (at most `limit`) until this node listens; `false` when it does not by then.
    pub(crate) async fn listening(&self, limit: Duration) -> bool {
        let mut subscribed = self.subscribed.subscribe();
        tokio::time::timeout(limit, subscribed.wait_for(|s| *s))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Publishes `message` for `node` (`"all"`: every node); `false` when Redis did not take it.
    pub(crate) async fn publish(&self, node: &str, message: &BusMessage) -> bool {
        self.publish_counted(node, message).await.is_some()
    }

    /// Publishes `message` for `node`: how many subscribers got it, `None` when Redis did not
    /// take it.
    pub(crate) async fn publish_counted(&self, node: &str, message: &BusMessage) -> Option<i64> {
        let payload = serde_json::to_string(message).ok()?;
        let channel = self.channel(node);
        let sent = async {
            let mut conn = self.pool.get().await.ok()?;
            redis::cmd("PUBLISH")
                .arg(&channel)
                .arg(&payload)
                .query_async::<i64>(&mut conn)
                .await
                .ok()
        };
        match tokio::time::timeout(self.timeout, sent).await {
            Ok(Some(receivers)) => Some(receivers),
            _ => {
                self.publish_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(channel = %channel, "could not publish on the node bus");
                None
            }
        }
    }
}

/// The subscriber task of one node.
struct Subscription {
    topology: RedisTopology,
    channels: Vec<String>,
    timeout: Duration,
    /// Where this node's messages go.
    inbox: mpsc::Sender<BusMessage>,
    subscribed: tokio::sync::watch::Sender<bool>,
}

impl Subscription {
    async fn run(self) {
        let mut delay = BACKOFF_START;
        loop {
            let outcome = self.listen().await;
            self.subscribed.send_replace(false);
            match outcome {
                Ok(()) => return, // nobody reads the messages any more
                Err(reason) => {
                    tracing::warn!(reason = %reason, "node bus subscription lost; reconnecting");
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(BACKOFF_MAX);
        }
    }

    /// Listens until the connection fails (`Err`) or the inbox is closed (`Ok`).
    async fn listen(&self) -> Result<(), Lost> {
        let pubsub = tokio::time::timeout(self.timeout, self.topology.pubsub())
            .await
            .map_err(|_| Lost::Timeout("connect"))?
            .map_err(Lost::Redis)?;
        let (mut sink, mut stream) = pubsub.split();
        for channel in &self.channels {
            tokio::time::timeout(self.timeout, sink.subscribe(channel))
                .await
                .map_err(|_| Lost::Timeout("SUBSCRIBE"))?
                .map_err(Lost::Redis)?;
        }
        tracing::debug!(channels = ?self.channels, "node bus subscribed");
        self.subscribed.send_replace(true);
        while let Some(message) = stream.next().await {
            if self.inbox.is_closed() {
                return Ok(());
            }
            let Ok(payload) = message.get_payload::<String>() else {
                continue;
            };
            match serde_json::from_str::<BusMessage>(&payload) {
                Ok(message) => {
                    if self.inbox.send(message).await.is_err() {
                        return Ok(());
                    }
                }
                Err(e) => tracing::debug!(error = %e, "ignoring a malformed node bus message"),
            }
        }
        Err(Lost::Ended)
    }
}

/// Why a node's subscription was lost (it reconnects after a backoff).
#[derive(Debug, thiserror::Error)]
enum Lost {
    #[error("{0} timeout")]
    Timeout(&'static str),
    #[error(transparent)]
    Redis(redis::RedisError),
    #[error("the subscription stream ended")]
    Ended,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_as_compact_json() {
        let answer = BusMessage::Answer {
            session: "s".into(),
            id: "gwl-n1-7".into(),
            answer: r#"{"result":{}}"#.into(),
        };
        let text = serde_json::to_string(&answer).expect("json");
        assert_eq!(
            text,
            r#"{"t":"answer","session":"s","id":"gwl-n1-7","answer":"{\"result\":{}}"}"#
        );
        assert_eq!(
            serde_json::from_str::<BusMessage>(&text).expect("parse"),
            answer
        );
        let cancel = BusMessage::Cancel {
            session: "s".into(),
            request: "3".into(),
        };
        let text = serde_json::to_string(&cancel).expect("json");
        assert_eq!(
            serde_json::from_str::<BusMessage>(&text).expect("parse"),
            cancel
        );
        let revoke = BusMessage::Revoke(Revocation {
            nonce: "AAAAAAAAAAAAAAAA".into(),
            expires: 1_700_000_000,
            issuer: "iss".into(),
            subject: "alice".into(),
        });
        let text = serde_json::to_string(&revoke).expect("json");
        assert_eq!(
            text,
            r#"{"t":"revoke","n":"AAAAAAAAAAAAAAAA","x":1700000000,"i":"iss","s":"alice"}"#
        );
        assert_eq!(
            serde_json::from_str::<BusMessage>(&text).expect("parse"),
            revoke
        );
        let resume = BusMessage::Resume(Box::new(crate::front::forward::Forwarded {
            reply: "n2".into(),
            ticket: "t1".into(),
            resume: crate::ops::parked::Resume {
                token: "p7".into(),
                node: Some("n1".into()),
                binding: vec!["iss".into(), "alice".into()],
            },
            id: "1".into(),
            params: r#"{"inputResponses":{}}"#.into(),
            meta: None,
        }));
        let text = serde_json::to_string(&resume).expect("json");
        assert_eq!(
            serde_json::from_str::<BusMessage>(&text).expect("parse"),
            resume
        );
        for part in [
            crate::front::forward::Part::Missing,
            crate::front::forward::Part::Head {
                status: 200,
                content_type: "text/event-stream".into(),
            },
            crate::front::forward::Part::Chunk {
                data: "data: {}\n\n".into(),
            },
            crate::front::forward::Part::End,
        ] {
            let message = BusMessage::ResumePart {
                ticket: "t1".into(),
                part,
            };
            let text = serde_json::to_string(&message).expect("json");
            assert_eq!(
                serde_json::from_str::<BusMessage>(&text).expect("parse"),
                message
            );
        }
        assert!(serde_json::from_str::<BusMessage>(r#"{"t":"other"}"#).is_err());
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad_prefix = RedisSessionStoreConfig {
            key_prefix: "a b".into(),
            ..RedisSessionStoreConfig::new("redis://127.0.0.1:1/")
        };
        assert!(matches!(
            NodeBus::redis(&bad_prefix),
            Err(RedisSessionStoreError::InvalidPrefix(_))
        ));
        assert!(matches!(
            NodeBus::redis(&RedisSessionStoreConfig::new("http://nope")),
            Err(RedisSessionStoreError::InvalidUrl(_))
        ));
        let a = NodeBus::redis(&RedisSessionStoreConfig::new("redis://127.0.0.1:1/")).expect("bus");
        let b = NodeBus::redis(&RedisSessionStoreConfig::new("redis://127.0.0.1:1/")).expect("bus");
        assert_ne!(a.node_id(), b.node_id(), "random node ids");
        assert!(a.node_id().chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[tokio::test]
    async fn health_without_redis_is_unsubscribed_and_counts_failed_publishes() {
        // Nothing listens on port 1: connections are refused at once.
        let bus =
            NodeBus::redis(&RedisSessionStoreConfig::new("redis://127.0.0.1:1/")).expect("bus");
        assert_eq!(
            bus.subscribed(),
            None,
            "no subscriber before the first request"
        );
        assert_eq!(bus.publish_failures(), 0);
        let cancel = BusMessage::Cancel {
            session: "s".into(),
            request: "1".into(),
        };
        assert!(!bus.publish("all", &cancel).await);
        assert!(!bus.publish("n2", &cancel).await);
        assert_eq!(bus.publish_failures(), 2);
        let (inbox, _receiver) = mpsc::channel(1);
        bus.ensure_listening(|| inbox);
        assert_eq!(bus.subscribed(), Some(false), "started, never subscribed");
    }
}
