//! The GET streams of upstream legacy sessions, shared: one reader per upstream session,
//! broadcasting to every downstream stream that listens (the caller's 2025 sessions share their
//! upstream sessions, and many servers allow one GET stream per session). A hub is keyed by the
//! upstream session's table key (credential scope and capability digest) plus the backend's
//! session id, never by URL alone: a backend that mints no `Mcp-Session-Id` still gives every
//! scope a stream of its own, carrying only what the backend sends for that scope's credentials.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use mcp_config_store::HeaderPolicy;
use tokio::sync::broadcast;

use super::request::{self, Outgoing};
use super::send::SessionPost;
use super::session::SessionKey;
use super::transport::{self, HttpClient};
use super::{LegacySession, empty_object, legacy_headers};

/// Messages buffered per listener before a slow one starts missing some.
const CAPACITY: usize = 256;
/// Reconnect delays after the upstream GET stream ends, doubling up to the last.
const BACKOFF: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(500),
    Duration::from_secs(2),
    Duration::from_secs(5),
];

/// One upstream session's GET stream, read while anyone listens.
#[derive(Debug)]
pub(crate) struct Hub {
    sender: broadcast::Sender<Bytes>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Hub {
    fn drop(&mut self) {
        // The last listener went away: stop reading (dropping the body closes the stream).
        self.reader.abort();
    }
}

impl Hub {
    /// A new listener.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Bytes> {
        self.sender.subscribe()
    }
}

/// The hubs of one router, by upstream session.
#[derive(Debug, Default)]
pub(crate) struct Hubs {
    hubs: Mutex<HashMap<(SessionKey, String), Weak<Hub>>>,
}

/// What the reader task needs to (re)open the upstream GET stream.
pub(crate) struct Opening {
    pub(crate) client: HttpClient,
    pub(crate) session: Arc<LegacySession>,
    pub(crate) downstream: HeaderMap,
    pub(crate) policy: HeaderPolicy,
    pub(crate) timeout: Duration,
    pub(crate) backend: String,
}

impl Hubs {
    /// The hub of `opening.session` (the session of table key `session`), started when nobody
    /// listens to it yet.
    pub(crate) fn hub(&self, session: SessionKey, opening: Opening) -> Arc<Hub> {
        let id = opening
            .session
            .id
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let key = (session, id);
        let mut hubs = self.hubs.lock().unwrap_or_else(|p| p.into_inner());
        hubs.retain(|_, hub| hub.strong_count() > 0);
        if let Some(hub) = hubs.get(&key).and_then(Weak::upgrade) {
            return hub;
        }
        let (sender, _) = broadcast::channel(CAPACITY);
        let reader = tokio::spawn(read(opening, sender.clone()));
        let hub = Arc::new(Hub { sender, reader });
        hubs.insert(key, Arc::downgrade(&hub));
        hub
    }
}

/// Reads the upstream GET stream into `sender`, reconnecting with backoff while listeners remain;
/// stops for good when the backend does not offer the stream (405) or forgot the session (404).
async fn read(opening: Opening, sender: broadcast::Sender<Bytes>) {
    let mut failures = 0usize;
    loop {
        match open(&opening).await {
            Ok(Some(mut messages)) => {
                failures = 0;
                while let Some(Ok(message)) = messages.next().await {
                    if let Some(id) = ping_id(&message) {
                        // A backend's ping is answered by the gateway, never relayed: it only
                        // asks whether the session's peer is there, and a flood of them would
                        // otherwise reach every listening client.
                        answer_ping(&opening, &id).await;
                        continue;
                    }
                    // No listener right now is fine: the hub ends when the last one drops it.
                    let _ = sender.send(message);
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(backend = %opening.backend, error = %e, "upstream GET stream failed");
                failures += 1;
            }
        }
        let delay = BACKOFF[failures.min(BACKOFF.len() - 1)];
        tokio::time::sleep(delay).await;
    }
}

/// The id of `message` when it is a `ping` request.
fn ping_id(message: &[u8]) -> Option<mcp_core::RequestId> {
    let env = mcp_core::Envelope::parse(message).ok()?;
    (env.kind() == mcp_core::MessageKind::Request && env.method() == Some("ping"))
        .then(|| env.id().cloned())
        .flatten()
}

/// Posts the empty result of `ping` `id` into the session (best effort: a backend that wants
/// an answer and gets none ends the session or pings again).
async fn answer_ping(opening: &Opening, id: &mcp_core::RequestId) {
    let to = SessionPost {
        http: &opening.client,
        session: &opening.session,
        downstream: &opening.downstream,
        policy: &opening.policy,
        timeout: opening.timeout,
    };
    if let Err(e) = to.post(mcp_core::encode_result(id, &empty_object())).await {
        tracing::debug!(backend = %opening.backend, error = %e, "could not answer a backend's ping");
    }
}

async fn open(opening: &Opening) -> Result<Option<super::MessageStream>, super::UpstreamError> {
    let out = Outgoing {
        url: &opening.session.url,
        body: Vec::new(),
        mcp_headers: legacy_headers(&opening.session),
        forward_param_headers: false,
    };
    let mut request = request::build(out, &opening.downstream, &opening.policy);
    *request.method_mut() = http::Method::GET;
    request.headers_mut().remove(header::CONTENT_TYPE);
    request.headers_mut().insert(
        header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    let answer = transport::exchange_with(&opening.client, request, opening.timeout, None).await?;
    match answer.status {
        StatusCode::OK => Ok(Some(answer.messages)),
        StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND => Ok(None),
        other => Err(super::UpstreamError::Status(other.as_u16())),
    }
}
