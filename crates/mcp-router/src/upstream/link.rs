#![cfg_attr(
    not(any(feature = "stdio", feature = "sse")),
    // With neither linked transport built in no link is ever made; `LinkWriter` still types the
    // replies of the operations.
    allow(dead_code)
)]
//! Links: one connection to a backend that carries many callers' requests, whatever the carrier
//! (a stdio child process, an HTTP+SSE connection). The carrier moves bytes; the link does the
//! multiplexing:
//!
//! - **Ids**: every request gets a link-unique id (`g<n>`); progress tokens are already unique per
//!   call. Responses and `notifications/progress` go back to the call that asked, so callers of
//!   different principals sharing a link never see each other's messages.
//! - **Incoming**: a server's own request (sampling, elicitation, roots, ping) and its log
//!   messages go to the call they belong to when that is unambiguous ([`Link::owner`]): the call
//!   whose progress token the request carries in `_meta.progressToken`, or, on a link of one
//!   principal, the only call in flight. The call's relay asks its client (or declines). A request
//!   nobody can be found for is declined with `-32601` naming why (a `ping` is answered: the link
//!   is alive). Resource updates and list changes go to the link's listeners ([`Link::events`]:
//!   the GET streams of 2025 sessions, which pass on only what each session subscribed to);
//!   other notifications are logged and dropped.
//! - **Cancellation**: a caller that drops its message stream before the response sends
//!   `notifications/cancelled` and its call leaves the link's table at once (a backend that
//!   honours the cancellation never answers it, and a left-over entry would keep the link from
//!   being idle and hide which call is the only one in flight).
//! - **Backpressure**: the link reads its carrier for every call at once, so it cannot stop
//!   reading for one call whose client takes its messages slowly or not at all (that would stall
//!   the other calls). Instead a call holds at most its share of messages its caller has not
//!   taken ([`call_buffer`]: 1 MiB and 1,024 messages by default, its response always taken); a
//!   message past the share fails the call with [`UpstreamError::CallBufferFull`] (`-32603`
//!   naming the share, for the client) and sends `notifications/cancelled` for it. The outbound
//!   queue holds at most [`OUTBOUND`] (1,024) messages: a new call that finds it full fails at once
//!   with [`UpstreamError::LinkBusy`] rather than wait (a backend that has not read 1,024 messages
//!   is stalled, and the call may go to another replica); what the link writes itself (answers,
//!   cancellations) is dropped. A call's request, and a client's answer to a backend's request,
//!   wait in the queue charged to the caller's account of the links' budget (the same bytes as the
//!   messages its clients have not read): past it a call fails with
//!   [`UpstreamError::LinkQueueSpent`], an answer is dropped like one that finds the queue full.
//!   The link's own cancellations and error answers are small and not charged.
//! - **Death**: when the carrier ends, every call in flight fails with
//!   [`UpstreamError::Disconnected`] and the link refuses new calls.
//! - **Handshake**: `server/discover` (2026-07-28) when the carrier may reach a modern server,
//!   else `initialize` + `notifications/initialized`. Callers never see an upstream session.
//!   What the link keeps of the answer is checked first ([`identity`]: at most 256 KiB, and an
//!   `InitializeResult` naming a 2025 revision); a backend answering otherwise fails the
//!   handshake, and so the calls waiting for it, naming why.
//!
//! Why this file is long: the multiplexing rules and the pool share [`Link`]'s private state,
//! and nearly a third is their unit tests (a call's share of messages not taken yet is in
//! [`call_buffer`]).
//!
//! [`Pool`] keeps the links of one kind: one per key, started on demand, restarted after a
//! backoff (100 ms doubling to 5 s) once it died, at most `max` at once, idle ones ended.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderMap;
use mcp_core::{
    Account, Budget, Charge, Envelope, Era, MessageKind, RawObject, RequestId, Spent, encode_error,
    encode_request_object,
};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::{Call, Target, UpstreamError, UpstreamReply, empty_object, final_result};
use super::{identity, meta};
pub(super) use call_buffer::{CALL_BYTES, CALL_MESSAGES, CallShare, CallTerms, LinkBuffers};
use call_buffer::{CallSender, cancelled, messages};

mod call_buffer;

/// Restart delays after a link died or failed to start, doubling up to the last.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Notifications of no call kept for a slow listener before it misses some.
const EVENTS: usize = 64;
/// How often idle links are looked for.
const REAP_EVERY: Duration = Duration::from_millis(500);
/// Messages waiting for the carrier to deliver them (requests, answers, cancellations).
const OUTBOUND: usize = 1024;

/// One message for the carrier to deliver.
pub(super) struct Outbound {
    /// The JSON-RPC message (no line terminator).
    pub(super) body: Vec<u8>,
    /// The waiting-table key of the call this message starts, so a carrier that learns the
    /// delivery failed can fail that call ([`Link::fail`]).
    #[cfg_attr(not(feature = "sse"), allow(dead_code))] // read by the HTTP+SSE carrier only
    pub(super) call: Option<String>,
    /// Request headers for carriers that send each message as an HTTP request (the caller's
    /// header policy); `None`: the carrier's own. stdio ignores them.
    #[cfg_attr(not(feature = "sse"), allow(dead_code))] // read by the HTTP+SSE carrier only
    pub(super) headers: Option<HeaderMap>,
    /// What the message holds of its caller's account while it waits (given back once
    /// written or dropped).
    pub(super) _charge: Option<Charge>,
}

/// One call waiting for its response.
struct Waiting {
    tx: CallSender,
    /// The call can take a server request in its course (`tools/call`, `prompts/get`,
    /// `resources/read`, `completion/complete`: their relay asks the client); other calls (lists,
    /// the handshake) are consumed by code that has nobody to ask.
    takes_input: bool,
}

/// Methods whose calls are relayed to their client message by message, so a server request in
/// their course can be put to that client.
const TAKES_INPUT: [&str; 4] = [
    "tools/call",
    "prompts/get",
    "resources/read",
    "completion/complete",
];

/// Where answers to a backend's own requests go: the link's outbound queue, charged to the
/// account of the caller whose call the requests are part of.
#[derive(Clone)]
pub(crate) struct LinkWriter {
    out: mpsc::Sender<Outbound>,
    account: Account,
}

impl LinkWriter {
    /// Sends `message` (a JSON-RPC response) to the backend; dropped when the link's queue is
    /// full (the backend is not reading: it would not read the answer either), or when the
    /// caller's account has no room for it.
    pub(crate) fn send(&self, message: Vec<u8>) {
        let Ok(charge) = self.account.hold(message.len()) else {
            tracing::debug!(
                "a caller's link budget is spent: an answer to a backend's request is dropped"
            );
            return;
        };
        let outbound = Outbound {
            body: message,
            call: None,
            headers: None,
            _charge: Some(charge),
        };
        match self.out.try_send(outbound) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                // Debug: a backend that asks without reading would flood the logs otherwise; the
                // calls it refuses meanwhile are logged.
                tracing::debug!(
                    queued = OUTBOUND,
                    "a backend link's queue is full: an answer to its request is dropped"
                );
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::debug!(
                    "a backend link ended before an answer to its request could be sent"
                );
            }
        }
    }

    /// Resolves when the link's connection is gone.
    pub(crate) async fn closed(&self) {
        self.out.closed().await;
    }
}

/// The calls in flight on a link.
#[derive(Default)]
struct Calls {
    /// Calls waiting for their response, by request id (as JSON).
    waiting: Mutex<HashMap<String, Waiting>>,
    /// The call each progress token belongs to (token -> request id as JSON).
    progress: Mutex<HashMap<String, String>>,
}

impl Calls {
    /// Takes the call `key` off the link (nothing more reaches it).
    fn remove(&self, key: &str) -> Option<Waiting> {
        let call = lock(&self.waiting).remove(key);
        lock(&self.progress).retain(|_, c| c != key);
        call
    }
}

/// The multiplexing state of one connection to a backend.
pub(super) struct Link {
    backend: String,
    /// The era and the `DiscoverResult`/`InitializeResult`, once the handshake is done.
    identity: OnceLock<(Era, Bytes)>,
    /// The identity's bytes on the principal's account, for a link of one principal (a shared
    /// process's is the operator's, bounded by the number of processes).
    identity_charge: OnceLock<Charge>,
    out: mpsc::Sender<Outbound>,
    /// The calls in flight (shared with each call's message stream, which takes its call off
    /// when its caller drops it).
    calls: Arc<Calls>,
    /// Every caller of the link is one principal (a per-principal process, an HTTP+SSE
    /// connection of one credential scope): its only call in flight owns what the server sends
    /// without naming a call. A shared process never guesses.
    exclusive: bool,
    /// Notifications of no call (resource updates, list changes), for the link's listeners.
    events: tokio::sync::broadcast::Sender<Bytes>,
    alive: AtomicBool,
    /// When the connection was seen to end (the restart backoff counts from then).
    died_at: Mutex<Option<Instant>>,
    next: AtomicU64,
    last_used: Mutex<Instant>,
    idle_timeout: Duration,
    /// What the calls hold that their clients have not read yet: each call's share, drawn from
    /// their principals' accounts (see [`call_buffer`]).
    buffers: LinkBuffers,
}

impl Link {
    /// A live link; the carrier delivers what arrives on the receiver.
    pub(super) fn new(
        backend: &str,
        idle_timeout: Duration,
        exclusive: bool,
        buffers: LinkBuffers,
    ) -> (Arc<Self>, mpsc::Receiver<Outbound>) {
        let (out, outbound) = mpsc::channel(OUTBOUND);
        let link = Arc::new(Self {
            backend: backend.to_owned(),
            identity: OnceLock::new(),
            identity_charge: OnceLock::new(),
            out,
            calls: Arc::default(),
            exclusive,
            events: tokio::sync::broadcast::channel(EVENTS).0,
            alive: AtomicBool::new(true),
            died_at: Mutex::new(None),
            next: AtomicU64::new(1),
            last_used: Mutex::new(Instant::now()),
            idle_timeout,
            buffers,
        });
        (link, outbound)
    }

    pub(super) fn backend(&self) -> &str {
        &self.backend
    }

    /// Probes the era: `server/discover` first when `discover`, then `initialize` +
    /// `notifications/initialized` (the latest legacy version; the server's answer is accepted).
    pub(super) async fn handshake(
        &self,
        target: &Target<'_>,
        client_info: &RawValue,
        discover: bool,
    ) -> Result<(), UpstreamError> {
        if discover {
            let meta = meta::modern(None, target.client_caps, client_info, None);
            let request = self.request(
                "server/discover",
                RawObject::new(),
                Some(meta),
                None,
                self.terms(target),
                None,
            )?;
            if let Ok(result) = final_result(request).await
                && RawObject::parse(std::str::from_utf8(&result).unwrap_or("{}"))
                    .is_ok_and(|r| r.contains("supportedVersions"))
            {
                identity::checked_discover(&result)?;
                self.keep_identity(target, Era::Modern, result)?;
                return Ok(());
            }
        }
        let mut params = RawObject::new();
        params.set_str("protocolVersion", super::LEGACY_PROTOCOL.as_str());
        // What the gateway can relay to the client of a call (see `owner`); the link is shared
        // by callers whose clients differ, so each request is checked against its own client's
        // capabilities when it arrives, and declined when that client lacks it.
        params.set_raw("capabilities", relayed_capabilities());
        params.set_borrowed("clientInfo", client_info);
        let initialize =
            self.request("initialize", params, None, None, self.terms(target), None)?;
        let result = final_result(initialize).await.map_err(|e| match e {
            UpstreamError::Malformed("backend answered with an error") => {
                UpstreamError::Malformed("backend refused the handshake")
            }
            other => other,
        })?;
        // Kept for the link's life: bounded like an upstream session's (the version the link
        // speaks is the gateway's own request; the server's answer is checked, not adopted).
        identity::checked_identity(&result, None)?;
        self.keep_identity(target, Era::Legacy, result)?;
        self.write(mcp_core::encode_notification(
            "notifications/initialized",
            None,
        ));
        Ok(())
    }

    /// Keeps the handshake's answer for the link's life, charged to the principal the link is
    /// for (see `identity_charge`).
    fn keep_identity(
        &self,
        target: &Target<'_>,
        era: Era,
        result: Bytes,
    ) -> Result<(), UpstreamError> {
        if self.exclusive {
            let account = self.buffers.budget.account(target.principal);
            // Whole within the share: a link keeps it for as long as it lives.
            let charge = account.reserve(result.len()).map_err(|spent| {
                let (whose, limit, key) = call_buffer::spent_limit(spent);
                UpstreamError::LinkIdentitySpent { whose, limit, key }
            })?;
            let _ = self.identity_charge.set(charge);
        }
        let _ = self.identity.set((era, result));
        Ok(())
    }

    /// Sends one caller's request with the `_meta` of the link's era; `headers` go to carriers
    /// that send HTTP requests.
    pub(super) fn send(
        &self,
        target: &Target<'_>,
        call: &Call<'_>,
        client_info: &RawValue,
        headers: Option<HeaderMap>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let meta = match self.era() {
            Era::Modern => Some(meta::modern(
                target.meta,
                target.client_caps,
                client_info,
                call.progress_token,
            )),
            Era::Legacy => meta::legacy(target.meta, call.progress_token),
        };
        self.request(
            call.method,
            call.params.clone(),
            meta,
            call.progress_token,
            self.terms(target),
            headers,
        )
    }

    /// How `target`'s call waits: its backend's gap bound, and its principal's account.
    fn terms(&self, target: &Target<'_>) -> CallTerms {
        CallTerms {
            timeout: call_timeout(target),
            account: self.buffers.budget.account(target.principal),
            share: self.buffers.per_call,
        }
    }

    pub(super) fn era(&self) -> Era {
        self.identity.get().map_or(Era::Legacy, |(era, _)| *era)
    }

    /// The backend's `DiscoverResult` or `InitializeResult`.
    pub(super) fn description(&self) -> Bytes {
        self.identity
            .get()
            .map(|(_, d)| d.clone())
            .unwrap_or_default()
    }

    /// Every caller is one principal's.
    #[cfg(feature = "stdio")]
    pub(super) fn exclusive(&self) -> bool {
        self.exclusive
    }

    /// The backend's notifications of no call from now on (resource updates, list changes); the
    /// receiver closes with the link.
    pub(super) fn events(&self) -> tokio::sync::broadcast::Receiver<Bytes> {
        self.events.subscribe()
    }

    pub(super) fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    /// No call for longer than the idle timeout, and none still running (a long call keeps its
    /// link).
    fn idle(&self) -> bool {
        lock(&self.last_used).elapsed() > self.idle_timeout && lock(&self.calls.waiting).is_empty()
    }

    /// When the link died, if it was seen to.
    fn died_at(&self) -> Option<Instant> {
        *lock(&self.died_at)
    }

    /// Queues a message of the link's own (an answer, a cancellation); dropped when the queue
    /// is full.
    fn write(&self, body: Vec<u8>) {
        let outbound = Outbound {
            body,
            call: None,
            headers: None,
            _charge: None,
        };
        match self.out.try_send(outbound) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                // Debug, as in `LinkWriter::send`.
                tracing::debug!(backend = %self.backend, queued = OUTBOUND, "a backend link's queue is full: a message of the gateway's own is dropped");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.alive.store(false, Ordering::Release);
            }
        }
    }

    /// Sends one request; its messages (progress, then the response) arrive on the reply.
    fn request(
        &self,
        method: &str,
        mut params: RawObject<'_>,
        meta: Option<Box<RawValue>>,
        progress_token: Option<&str>,
        terms: CallTerms,
        headers: Option<HeaderMap>,
    ) -> Result<UpstreamReply, UpstreamError> {
        if !self.alive() {
            return Err(UpstreamError::Disconnected);
        }
        // A place in the queue first, so that a refused call leaves nothing behind.
        let slot = match self.out.try_reserve() {
            Ok(slot) => slot,
            Err(mpsc::error::TrySendError::Full(())) => {
                tracing::warn!(backend = %self.backend, queued = OUTBOUND, "a backend link's queue is full: refusing a call");
                return Err(UpstreamError::LinkBusy(OUTBOUND));
            }
            Err(mpsc::error::TrySendError::Closed(())) => {
                self.alive.store(false, Ordering::Release);
                return Err(UpstreamError::Disconnected);
            }
        };
        let id =
            RequestId::from(format!("g{}", self.next.fetch_add(1, Ordering::Relaxed)).as_str());
        let key = id.to_json().into_owned();
        if let Some(meta) = meta {
            params.set_raw("_meta", meta);
        }
        let body = encode_request_object(&id, method, &params);
        let charge = terms.account.hold(body.len()).map_err(|spent| {
            let (whose, limit, key) = call_buffer::spent_limit(spent);
            UpstreamError::LinkQueueSpent { whose, limit, key }
        })?;
        let writer = LinkWriter {
            out: self.out.clone(),
            account: terms.account.clone(),
        };
        let (tx, rx) = call_buffer::channel(terms.account, terms.share);
        let waiting = Waiting {
            tx,
            takes_input: TAKES_INPUT.contains(&method),
        };
        lock(&self.calls.waiting).insert(key.clone(), waiting);
        if let Some(token) = progress_token {
            lock(&self.calls.progress).insert(token.to_owned(), key.clone());
        }
        slot.send(Outbound {
            body,
            call: Some(key.clone()),
            headers,
            _charge: Some(charge),
        });
        Ok(UpstreamReply {
            id,
            messages: messages(
                rx,
                terms.timeout,
                self.out.clone(),
                key,
                Arc::clone(&self.calls),
            ),
            session: None,
            link: Some(writer),
            permit: None,
        })
    }

    /// One message from the backend: a response, a progress notification, or something else.
    pub(super) fn dispatch(&self, message: &[u8]) {
        let Ok(env) = Envelope::parse(message) else {
            tracing::debug!(backend = %self.backend, "ignoring a message that is not JSON-RPC");
            return;
        };
        match env.kind() {
            MessageKind::Response | MessageKind::Error => {
                let Some(id) = env.id() else { return };
                let key = id.to_json().into_owned();
                if let Some(waiting) = self.remove(&key) {
                    waiting.tx.respond(message);
                }
            }
            MessageKind::Request => self.server_request(&env, message),
            MessageKind::Notification => self.notification(&env, message),
        }
    }

    /// A server's own request: to the call it belongs to, whose relay asks that call's client;
    /// declined when no call can be told.
    fn server_request(&self, env: &Envelope<'_>, message: &[u8]) {
        let Some(id) = env.id() else { return };
        let token = env
            .params()
            .and_then(|p| RawObject::from_raw(p).ok())
            .and_then(|p| p.get_borrowed("_meta").map(ToOwned::to_owned))
            .and_then(|m| token_of(&m));
        match self.owner(token.as_deref(), true) {
            Some(call) => {
                if let Err(cut) = self.deliver(&call, message) {
                    // The call is gone; its request is answered so that a backend that ignores
                    // the cancellation does not wait for it.
                    let error = mcp_core::ErrorObject::internal(cut.to_string());
                    self.write(encode_error(Some(id), &error));
                }
            }
            None if env.method() == Some("ping") => {
                // Nobody to ask, but the question is only whether the link is alive: it is.
                self.write(mcp_core::encode_result(id, &empty_object()));
            }
            None => {
                let method = env.method().unwrap_or("");
                tracing::info!(backend = %self.backend, method, "declining a backend request that belongs to no single call");
                let error = mcp_core::ErrorObject::method_not_found(&format!(
                    "{method}: the gateway cannot tell which call this request belongs to (it \
                     relays a request carrying the call's progress token, or one sent during the \
                     only call in flight of a process or connection of one principal)"
                ));
                self.write(encode_error(Some(id), &error));
            }
        }
    }

    /// The call a server message belongs to (its key): the one whose progress token it names,
    /// else, on an exclusive link, the only call in flight. `input`: the message is a request,
    /// which only a call that takes input may get.
    fn owner(&self, token: Option<&str>, input: bool) -> Option<String> {
        let waiting = lock(&self.calls.waiting);
        let by_token = token
            .and_then(|t| lock(&self.calls.progress).get(t).cloned())
            .and_then(|key| waiting.get_key_value(&key));
        let only = || {
            let mut calls = waiting.iter();
            match (calls.next(), calls.next()) {
                (Some(call), None) if self.exclusive => Some(call),
                _ => None,
            }
        };
        by_token
            .or_else(only)
            .filter(|(_, call)| call.takes_input || !input)
            .map(|(key, _)| key.clone())
    }

    /// Hands a message of its course to the call `key`. A call already holding its share of
    /// messages its caller has not taken fails instead, and is cancelled upstream: the error it
    /// failed with is returned.
    fn deliver(&self, key: &str, message: &[u8]) -> Result<(), UpstreamError> {
        let full = {
            let waiting = lock(&self.calls.waiting);
            let Some(call) = waiting.get(key) else {
                return Ok(());
            };
            match call.tx.send(message) {
                Ok(()) => return Ok(()),
                Err(full) => full,
            }
        };
        if let Some(call) = self.remove(key) {
            tracing::warn!(backend = %self.backend, error = %full, "failing a call whose client does not take what its backend sends");
            call.tx.fail(full.clone());
            self.write(cancelled(
                key,
                Some("the gateway's buffer for this call is full: its client does not read"),
            ));
        }
        Err(full)
    }

    /// Takes the call `key` off the link (nothing more reaches it).
    fn remove(&self, key: &str) -> Option<Waiting> {
        self.calls.remove(key)
    }

    fn notification(&self, env: &Envelope<'_>, message: &[u8]) {
        let method = env.method().unwrap_or("");
        let owner = match method {
            "notifications/progress" => {
                let token = env.params().and_then(token_of);
                token.and_then(|t| lock(&self.calls.progress).get(&t).cloned())
            }
            // A log message names no call: the only call in flight of a one-principal link.
            "notifications/message" => self.owner(None, false),
            "notifications/resources/updated"
            | "notifications/resources/list_changed"
            | "notifications/tools/list_changed"
            | "notifications/prompts/list_changed" => {
                // Nobody listening is no failure: no session follows this link right now.
                let _ = self.events.send(Bytes::copy_from_slice(message));
                return;
            }
            _ => None,
        };
        match owner {
            Some(call) => {
                // A call failed for holding too much is told so by its stream.
                let _ = self.deliver(&call, message);
            }
            None => {
                tracing::debug!(backend = %self.backend, method, "dropping a backend notification");
            }
        }
    }

    /// The message starting the call `key` could not be delivered: that call fails.
    #[cfg(feature = "sse")]
    pub(super) fn fail(&self, key: &str, error: UpstreamError) {
        if let Some(waiting) = self.remove(key) {
            waiting.tx.fail(error);
        }
    }

    /// The carrier went away: every waiting call fails, new ones are refused.
    pub(super) fn died(&self) {
        self.alive.store(false, Ordering::Release);
        lock(&self.died_at).get_or_insert_with(Instant::now);
        for (_, waiting) in lock(&self.calls.waiting).drain() {
            waiting.tx.fail(UpstreamError::Disconnected);
        }
        lock(&self.calls.progress).clear();
    }
}

/// The client capabilities a link declares: what a call's relay can put to its client.
fn relayed_capabilities() -> Box<RawValue> {
    RawValue::from_string(r#"{"sampling":{},"elicitation":{},"roots":{}}"#.to_owned())
        .unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// The progress token of a `_meta` or progress params object, as the gateway minted it (a string).
fn token_of(object: &RawValue) -> Option<String> {
    RawObject::from_raw(object)
        .ok()?
        .get(meta::PROGRESS_TOKEN)
        .map(|t| t.get().trim_matches('"').to_owned())
}

fn call_timeout(target: &Target<'_>) -> Duration {
    Duration::from_millis(target.config.timeout_ms.max(1))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A connection that carries a [`Link`] (dropping it ends the connection).
pub(super) trait Carrier: Send + Sync + 'static {
    fn link(&self) -> &Link;
}

/// What identifies one link of a [`Pool`].
pub(super) trait LinkKey: Clone + Eq + Hash + Send + Sync + 'static {
    /// Whether the link may be ended after its idle timeout.
    fn reapable(&self) -> bool;

    /// The principal the link is for, when links are per principal: such a principal holds at
    /// most the pool's per-principal share, so it cannot take every link of the pool.
    fn principal(&self) -> Option<&mcp_core::Principal> {
        None
    }
}

/// The live or restarting link of one key.
struct Slot<C> {
    carrier: Option<Arc<C>>,
    /// When the last start failed or the link died, and how many times in a row.
    failures: Option<(Instant, u32)>,
}

impl<C> Default for Slot<C> {
    fn default() -> Self {
        Self {
            carrier: None,
            failures: None,
        }
    }
}

type SharedSlot<C> = Arc<tokio::sync::Mutex<Slot<C>>>;

/// A key's slot, and the place it holds in its principal's share (keys that name one).
type Held<C> = (SharedSlot<C>, Option<mcp_core::Slot>);

/// The links of one kind, by key.
pub(super) struct Pool<K, C> {
    inner: Arc<PoolInner<K, C>>,
}

struct PoolInner<K, C> {
    slots: Mutex<HashMap<K, Held<C>>>,
    max: usize,
    /// A slot per link of a principal (its share is the most links one principal holds).
    budget: Budget,
    /// What a call gets while its link waits for its restart backoff.
    backing_off: UpstreamError,
    /// What a call gets when `max` links exist already.
    full: UpstreamError,
    reaper: Mutex<Option<tokio::task::AbortHandle>>,
}

impl<K, C> Drop for PoolInner<K, C> {
    fn drop(&mut self) {
        let reaper = self.reaper.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(handle) = reaper.take() {
            handle.abort();
        }
    }
}

impl<K: LinkKey, C: Carrier> Pool<K, C> {
    /// At most `max` links, `per_principal` of them one principal's (keys that name one), the
    /// latter drawn from a budget named `name`.
    pub(super) fn new(
        name: &'static str,
        max: usize,
        per_principal: usize,
        backing_off: UpstreamError,
        full: UpstreamError,
    ) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                slots: Mutex::new(HashMap::new()),
                max: max.max(1),
                // The node's bound is the table's (shared links take no principal's slot).
                budget: Budget::new(name).with_slots(per_principal.max(1), usize::MAX),
                backing_off,
                full,
                reaper: Mutex::new(None),
            }),
        }
    }

    /// The budget the links of principals draw from, for metrics.
    pub(super) fn budget(&self) -> &Budget {
        &self.inner.budget
    }

    /// The live carrier of `key`, started with `start` when there is none (and its restart
    /// backoff is over).
    pub(super) async fn get<F, Fut>(&self, key: &K, start: F) -> Result<Arc<C>, UpstreamError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Arc<C>, UpstreamError>>,
    {
        let slot = self.slot(key)?;
        let mut slot = slot.lock().await;
        if let Some(carrier) = slot.carrier.as_ref().filter(|c| c.link().alive()) {
            carrier.link().touch();
            return Ok(Arc::clone(carrier));
        }
        if let Some(dead) = slot.carrier.take() {
            // It died since the last call: the backoff counts from its death, so a link lost long
            // ago (an idle stream a proxy closed) is restarted at once.
            let at = dead.link().died_at().unwrap_or_else(Instant::now);
            slot.failures = Some((at, slot.failures.map_or(1, |(_, n)| n + 1)));
        }
        if let Some((at, n)) = slot.failures
            && at.elapsed() < backoff(n)
        {
            return Err(self.inner.backing_off.clone());
        }
        match start().await {
            Ok(carrier) => {
                slot.failures = None;
                slot.carrier = Some(Arc::clone(&carrier));
                if key.reapable() {
                    self.start_reaper();
                }
                Ok(carrier)
            }
            Err(e) => {
                slot.failures = Some((Instant::now(), slot.failures.map_or(1, |(_, n)| n + 1)));
                Err(e)
            }
        }
    }

    /// The slot of `key`, created when there is room for one more link.
    fn slot(&self, key: &K) -> Result<SharedSlot<C>, UpstreamError> {
        let mut slots = lock(&self.inner.slots);
        if let Some((slot, _)) = slots.get(key) {
            return Ok(Arc::clone(slot));
        }
        let inner = &self.inner;
        let account = key.principal().map(|p| inner.budget.account(p));
        let fits = |slots: &HashMap<K, _>| {
            slots.len() < inner.max && account.as_ref().is_none_or(|a| a.room(0, 1).is_ok())
        };
        if !fits(&slots) {
            // Forget slots without a link (and give their places back) before refusing.
            slots.retain(|_, (s, _)| s.try_lock().map_or(true, |s| s.carrier.is_some()));
        }
        let held = if slots.len() >= inner.max {
            Err(inner.budget.refuse(Spent::Ceiling(inner.max)))
        } else {
            account.as_ref().map(Account::take_slot).transpose()
        };
        let Ok(held) = held else {
            tracing::warn!(max = inner.max, per_principal = inner.budget.slots_share(), error = %inner.full, "backend link limit reached");
            return Err(inner.full.clone());
        };
        let slot = SharedSlot::default();
        slots.insert(key.clone(), (Arc::clone(&slot), held));
        Ok(slot)
    }

    /// Starts the task ending idle links (once).
    fn start_reaper(&self) {
        let mut reaper = lock(&self.inner.reaper);
        if reaper.is_none() {
            let pool = Arc::downgrade(&self.inner);
            *reaper = Some(tokio::spawn(reap(pool)).abort_handle());
        }
    }
}

/// Ends reapable links idle for longer than their idle timeout.
async fn reap<K: LinkKey, C: Carrier>(pool: Weak<PoolInner<K, C>>) {
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        lock(&pool.slots).retain(|key, (slot, _)| {
            let Ok(mut slot) = slot.try_lock() else {
                return true; // in use right now
            };
            let idle = key.reapable() && slot.carrier.as_ref().is_some_and(|c| c.link().idle());
            if idle && let Some(carrier) = slot.carrier.take() {
                tracing::info!(
                    backend = carrier.link().backend(),
                    "ending an idle backend link"
                );
                return false; // dropping the carrier ends its connection
            }
            true
        });
    }
}

fn backoff(failures: u32) -> Duration {
    let doubled = BACKOFF_START.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)));
    doubled.min(BACKOFF_MAX)
}

/// A budget that never refuses, for links made outside a router.
#[cfg(any(test, feature = "fuzzing"))]
fn unbounded() -> Budget {
    Budget::new("link_buffers")
}

/// A link with the default share per call, drawing from no real budget.
#[cfg(any(test, feature = "fuzzing"))]
fn unbounded_link(exclusive: bool) -> (Arc<Link>, mpsc::Receiver<Outbound>) {
    Link::new(
        "b",
        Duration::from_secs(60),
        exclusive,
        LinkBuffers::new(unbounded()),
    )
}

/// The terms of a call drawing from no real budget.
#[cfg(any(test, feature = "fuzzing"))]
fn unbounded_terms() -> CallTerms {
    CallTerms {
        timeout: Duration::from_secs(60),
        account: unbounded().account(&mcp_core::Principal::new("i", "caller")),
        share: CallShare::default(),
    }
}

/// A link of one principal with two calls in flight, fed `data`'s lines as frames from the
/// backend, then the calls dropped: nothing may panic, and nothing of the calls may stay on the
/// link (`crate::upstream::fuzzing::link_frames`).
#[cfg(feature = "fuzzing")]
pub(super) fn fuzz_frames(data: &[u8]) {
    let (link, mut outbound) = unbounded_link(true);
    let calls: Vec<UpstreamReply> = [("tools/call", "t0"), ("tools/list", "t1")]
        .into_iter()
        .filter_map(|(method, token)| {
            link.request(
                method,
                RawObject::new(),
                None,
                Some(token),
                unbounded_terms(),
                None,
            )
            .ok()
        })
        .collect();
    for frame in data.split(|b| *b == b'\n') {
        link.dispatch(frame);
    }
    drop(calls);
    assert!(
        lock(&link.calls.waiting).is_empty(),
        "a dropped call stayed"
    );
    assert!(
        lock(&link.calls.progress).is_empty(),
        "a dropped call's token stayed"
    );
    while outbound.try_recv().is_ok() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_backoff_doubles_up_to_five_seconds() {
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert_eq!(backoff(4), Duration::from_millis(800));
        assert_eq!(backoff(10), BACKOFF_MAX);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    /// A link whose outbound messages nobody reads (the receiver only keeps the channel open).
    struct TestCarrier(Arc<Link>, #[allow(dead_code)] mpsc::Receiver<Outbound>);

    impl Carrier for TestCarrier {
        fn link(&self) -> &Link {
            &self.0
        }
    }

    /// A call on `link` (the handshake is skipped: the link speaks 2025).
    /// A call on `link` with the link's own share per call.
    fn call(link: &Link, method: &str, token: Option<&str>) -> UpstreamReply {
        let terms = CallTerms {
            share: link.buffers.per_call,
            ..unbounded_terms()
        };
        link.request(method, RawObject::new(), None, token, terms, None)
            .expect("a live link")
    }

    async fn next_text(reply: &mut UpstreamReply) -> String {
        use futures_util::StreamExt;
        let message = reply.messages.next().await.expect("a message").expect("ok");
        String::from_utf8(message.to_vec()).expect("utf-8")
    }

    /// What the link wrote to the backend last.
    fn written(outbound: &mut mpsc::Receiver<Outbound>) -> String {
        let mut last = None;
        while let Ok(message) = outbound.try_recv() {
            last = Some(message.body);
        }
        String::from_utf8(last.expect("something written")).expect("utf-8")
    }

    const SAMPLING: &str =
        r#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"messages":[]}}"#;

    #[tokio::test]
    async fn a_request_goes_to_the_only_call_of_a_one_principal_link() {
        let (link, mut outbound) = unbounded_link(true);
        let mut tool = call(&link, "tools/call", None);
        link.dispatch(SAMPLING.as_bytes());
        assert_eq!(next_text(&mut tool).await, SAMPLING);
        link.dispatch(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#);
        assert!(next_text(&mut tool).await.contains("notifications/message"));

        // A second call in flight: nobody can tell, the request is declined.
        let _other = call(&link, "tools/call", None);
        link.dispatch(SAMPLING.as_bytes());
        let declined = written(&mut outbound);
        assert!(
            declined.contains(r#""id":7"#) && declined.contains("-32601"),
            "{declined}"
        );
        assert!(declined.contains("cannot tell which call"), "{declined}");
    }

    #[tokio::test]
    async fn a_shared_link_relays_only_what_names_its_call() {
        let (link, mut outbound) = unbounded_link(false);
        let mut alice = call(&link, "tools/call", Some("t-alice"));
        // Alone in flight, but on a link shared by principals: never guessed.
        link.dispatch(SAMPLING.as_bytes());
        assert!(written(&mut outbound).contains("cannot tell which call"));
        link.dispatch(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#);
        // A ping nobody can be found for is answered by the link itself.
        link.dispatch(br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
        assert_eq!(
            written(&mut outbound),
            r#"{"jsonrpc":"2.0","id":"p","result":{}}"#
        );
        // The request naming alice's progress token is hers.
        let tagged = r#"{"jsonrpc":"2.0","id":8,"method":"roots/list","params":{"_meta":{"progressToken":"t-alice"}}}"#;
        link.dispatch(tagged.as_bytes());
        assert_eq!(
            next_text(&mut alice).await,
            tagged,
            "the log message was dropped"
        );
    }

    #[tokio::test]
    async fn a_dropped_call_leaves_the_link_and_the_next_is_the_only_one_in_flight() {
        let (link, mut outbound) = unbounded_link(true);
        let first = call(&link, "tools/call", None);
        let _ = written(&mut outbound);
        drop(first);
        assert!(written(&mut outbound).contains("notifications/cancelled"));
        assert!(
            lock(&link.calls.waiting).is_empty(),
            "the cancelled call left"
        );
        // The backend's request now belongs to the only call in flight, the next one.
        let mut second = call(&link, "tools/call", None);
        let _ = written(&mut outbound);
        link.dispatch(SAMPLING.as_bytes());
        assert!(
            next_text(&mut second)
                .await
                .contains("sampling/createMessage")
        );
    }

    #[tokio::test]
    async fn a_call_that_cannot_ask_its_client_gets_no_request() {
        let (link, mut outbound) = unbounded_link(true);
        let _list = call(&link, "tools/list", None);
        link.dispatch(SAMPLING.as_bytes());
        assert!(written(&mut outbound).contains("cannot tell which call"));
    }

    /// Everything the link wrote to the backend since last asked.
    fn all_written(outbound: &mut mpsc::Receiver<Outbound>) -> Vec<String> {
        std::iter::from_fn(|| outbound.try_recv().ok())
            .map(|m| String::from_utf8(m.body).expect("utf-8"))
            .collect()
    }

    /// A progress notification for `token` whose message is `size` bytes of text.
    fn progress(token: &str, size: usize) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"{token}","progress":1,"message":"{}"}}}}"#,
            "x".repeat(size)
        )
        .into_bytes()
    }

    const LOG: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#;

    #[tokio::test]
    async fn a_call_whose_caller_does_not_take_its_messages_fails_past_its_share() {
        fails_past_its_share(LinkBuffers::new(unbounded()), CALL_BYTES, "1 MiB").await;
    }

    #[tokio::test]
    async fn a_configured_call_share_is_the_one_enforced() {
        let mut buffers = LinkBuffers::new(unbounded());
        buffers.per_call.bytes = 256 * 1024;
        fails_past_its_share(buffers, 256 * 1024, "256 KiB").await;
    }

    /// A call of a link with `buffers` whose caller does not take its messages fails once it
    /// holds `share_bytes` (`shown` in the error), and the link's other call goes on.
    async fn fails_past_its_share(buffers: LinkBuffers, share_bytes: usize, shown: &str) {
        use futures_util::StreamExt;
        let (link, mut outbound) = Link::new("b", Duration::from_secs(60), false, buffers);
        let mut stalled = call(&link, "tools/call", Some("t-stalled"));
        let mut read = call(&link, "tools/call", Some("t-read"));
        let _ = all_written(&mut outbound);

        // Within the share (the last message taken while less than the share is held): all kept.
        let message = progress("t-stalled", 64 * 1024);
        let share = share_bytes.div_ceil(message.len());
        for _ in 0..share {
            link.dispatch(&message);
            // The control: a call whose caller takes its messages gets each of them.
            link.dispatch(&progress("t-read", 64 * 1024));
            assert!(next_text(&mut read).await.contains("t-read"));
        }
        assert!(
            all_written(&mut outbound).is_empty(),
            "nothing cancelled yet"
        );

        // One more: the call fails and the backend is told to stop.
        link.dispatch(&message);
        let cancels = all_written(&mut outbound);
        assert_eq!(cancels.len(), 1, "{cancels:?}");
        assert!(
            cancels[0].contains("notifications/cancelled") && cancels[0].contains(r#""g1""#),
            "{cancels:?}"
        );
        // What the backend sends the failed call afterwards reaches nobody.
        link.dispatch(&message);
        link.dispatch(br#"{"jsonrpc":"2.0","id":"g1","result":{}}"#);
        assert!(all_written(&mut outbound).is_empty());

        // The caller gets what was kept, then the error naming the share, then nothing.
        for _ in 0..share {
            assert!(next_text(&mut stalled).await.contains("t-stalled"));
        }
        let error = stalled.messages.next().await.expect("the failure");
        let expected = UpstreamError::CallBufferFull {
            limit: share_bytes,
            unit: "bytes",
            key: "limits.link_call_buffer_bytes",
        };
        assert_eq!(error.as_ref().err(), Some(&expected));
        assert_eq!(
            expected.to_string(),
            format!(
                "backend sent more than {shown} that its client has not read yet (the per-call \
                 buffer of a linked backend, limits.link_call_buffer_bytes)"
            )
        );
        assert!(stalled.messages.next().await.is_none());

        // The other call goes on to its response.
        link.dispatch(br#"{"jsonrpc":"2.0","id":"g2","result":{}}"#);
        assert!(next_text(&mut read).await.contains(r#""id":"g2""#));
    }

    #[tokio::test]
    async fn a_principals_calls_draw_from_one_account_and_give_it_back() {
        use futures_util::StreamExt;
        const SHARE: usize = 256 * 1024;
        let budget = Budget::new("link_buffers").with_bytes(SHARE, usize::MAX);
        let (link, mut outbound) = Link::new(
            "b",
            Duration::from_secs(60),
            false,
            LinkBuffers::new(budget.clone()),
        );
        let on = |token: &str, who: &str| {
            let terms = CallTerms {
                timeout: Duration::from_secs(60),
                account: budget.account(&mcp_core::Principal::new("i", who)),
                share: CallShare::default(),
            };
            link.request(
                "tools/call",
                RawObject::new(),
                None,
                Some(token),
                terms,
                None,
            )
            .expect("a live link")
        };
        let (mut first, mut second, mut bobs) =
            (on("a1", "alice"), on("a2", "alice"), on("b1", "bob"));
        let _ = all_written(&mut outbound);
        let message = progress("a1", 64 * 1024);
        for _ in 0..3 {
            link.dispatch(&message);
            link.dispatch(&progress("b1", 64 * 1024));
        }
        // Alice's second call takes one while her account holds less than the share (each call
        // is far below its own 1 MiB) ...
        link.dispatch(&progress("a2", 64 * 1024));
        assert!(
            all_written(&mut outbound).is_empty(),
            "within alice's share"
        );
        // ... and fails at the next one: her two calls hold her share together.
        link.dispatch(&progress("a2", 64 * 1024));
        let cancels = all_written(&mut outbound);
        assert!(
            cancels.len() == 1 && cancels[0].contains(r#""g2""#),
            "{cancels:?}"
        );
        assert!(next_text(&mut second).await.contains("a2"));
        let error = second.messages.next().await.expect("the failure");
        let spent = UpstreamError::LinkBufferSpent {
            whose: "this caller's clients",
            limit: SHARE,
            key: "limits.link_buffer_bytes_per_principal",
        };
        assert_eq!(error.err(), Some(spent.clone()));
        assert_eq!(
            spent.to_string(),
            "backend messages not read yet by this caller's clients reached 256 KiB \
             (limits.link_buffer_bytes_per_principal)"
        );
        // Bob's account is his own: his three are all kept.
        for _ in 0..3 {
            assert!(next_text(&mut bobs).await.contains("b1"));
        }
        // What alice's calls held goes back as it is read, or with the call.
        drop(second);
        for _ in 0..3 {
            assert!(next_text(&mut first).await.contains("a1"));
        }
        assert_eq!(budget.held_bytes(), 0, "everything was read or dropped");
        link.dispatch(&progress("a1", 64 * 1024));
        assert_eq!(
            budget.held_bytes(),
            message.len(),
            "alice's account works again"
        );
        drop(first);
        assert_eq!(budget.held_bytes(), 0);
    }

    #[tokio::test]
    async fn many_small_messages_fill_a_calls_share_and_taking_them_frees_it() {
        let (link, mut outbound) = unbounded_link(true);
        let mut tool = call(&link, "tools/call", None);
        let _ = all_written(&mut outbound);
        for _ in 0..CALL_MESSAGES {
            link.dispatch(LOG);
        }
        // One taken: one more fits.
        assert!(next_text(&mut tool).await.contains("notifications/message"));
        link.dispatch(LOG);
        assert!(all_written(&mut outbound).is_empty(), "within the share");

        // Past it, even a request fails the call; the request is answered, naming the share.
        link.dispatch(SAMPLING.as_bytes());
        let written = all_written(&mut outbound);
        assert_eq!(written.len(), 2, "{written:?}");
        assert!(
            written[0].contains("notifications/cancelled"),
            "{written:?}"
        );
        assert!(
            written[1].contains(r#""id":7"#)
                && written[1].contains("-32603")
                && written[1].contains("more than 1024 messages"),
            "{written:?}"
        );
        for _ in 0..CALL_MESSAGES {
            assert!(next_text(&mut tool).await.contains("notifications/message"));
        }
        use futures_util::StreamExt;
        let error = tool.messages.next().await.expect("the failure");
        assert_eq!(
            error.err(),
            Some(UpstreamError::CallBufferFull {
                limit: CALL_MESSAGES,
                unit: "messages",
                key: "limits.link_call_buffer_messages",
            })
        );
    }

    #[tokio::test]
    async fn a_calls_response_is_taken_when_its_share_is_full() {
        let (link, _outbound) = unbounded_link(true);
        let mut tool = call(&link, "tools/call", Some("t"));
        // One message larger than the whole share is taken, and fills it.
        link.dispatch(&progress("t", 2 * CALL_BYTES));
        link.dispatch(br#"{"jsonrpc":"2.0","id":"g1","result":{}}"#);
        assert!(
            next_text(&mut tool)
                .await
                .contains("notifications/progress")
        );
        assert!(next_text(&mut tool).await.contains(r#""result""#));
    }

    #[tokio::test]
    async fn a_full_outbound_queue_refuses_new_calls_at_once() {
        let (link, mut outbound) = unbounded_link(true);
        let request = |link: &Link| {
            link.request(
                "tools/list",
                RawObject::new(),
                None,
                None,
                unbounded_terms(),
                None,
            )
        };
        // Nobody delivers: the calls fill the queue.
        let calls: Vec<_> = (0..OUTBOUND)
            .map(|_| request(&link).expect("room in the queue"))
            .collect();
        assert_eq!(
            request(&link).err(),
            Some(UpstreamError::LinkBusy(OUTBOUND))
        );
        assert!(link.alive(), "a busy link is not dead");
        // Their callers go away: each cancellation finds the queue full and is dropped, not
        // waited for.
        drop(calls);
        // The carrier delivers one: a call fits again.
        assert!(outbound.try_recv().is_ok());
        assert!(request(&link).is_ok());
    }

    #[tokio::test]
    async fn requests_waiting_in_the_queue_are_charged_to_their_principal() {
        const SHARE: usize = 64 * 1024;
        let budget = Budget::new("link_buffers").with_bytes(SHARE, usize::MAX);
        let (link, mut outbound) = Link::new(
            "b",
            Duration::from_secs(60),
            true,
            LinkBuffers::new(budget.clone()),
        );
        let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(40 * 1024));
        let request = |who: &str| {
            let terms = CallTerms {
                timeout: Duration::from_secs(60),
                account: budget.account(&mcp_core::Principal::new("i", who)),
                share: CallShare::default(),
            };
            let params = RawObject::parse(&big).expect("an object");
            link.request("tools/call", params, None, None, terms, None)
        };
        // Nobody delivers: alice's second request is taken while she holds less than her
        // share, her third is refused, and it leaves nothing behind.
        let (first, second) = (request("alice"), request("alice"));
        assert!(first.is_ok() && second.is_ok());
        let held = budget.held_bytes();
        assert!(held > SHARE, "{held}");
        let spent = UpstreamError::LinkQueueSpent {
            whose: "this caller's clients",
            limit: SHARE,
            key: "limits.link_buffer_bytes_per_principal",
        };
        assert_eq!(request("alice").err(), Some(spent.clone()));
        assert!(
            spent
                .to_string()
                .starts_with("messages for the backend waiting to be written"),
            "{spent}"
        );
        assert_eq!(
            budget.held_bytes(),
            held,
            "the refused request holds nothing"
        );
        assert!(request("bob").is_ok(), "bob's account is his own");
        // The carrier writes what waits: the bytes are given back.
        while outbound.try_recv().is_ok() {}
        assert_eq!(budget.held_bytes(), 0);
        assert!(request("alice").is_ok(), "alice's account works again");
    }

    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Key(mcp_core::Principal, u32);

    impl LinkKey for Key {
        fn reapable(&self) -> bool {
            false
        }

        fn principal(&self) -> Option<&mcp_core::Principal> {
            Some(&self.0)
        }
    }

    #[tokio::test]
    async fn a_principal_holds_at_most_its_share_of_links() {
        let pool: Pool<Key, TestCarrier> = Pool::new(
            "test",
            10,
            2,
            UpstreamError::Connect,
            UpstreamError::TooManyConnections,
        );
        let start = || async {
            let (link, rx) = unbounded_link(true);
            Ok(Arc::new(TestCarrier(link, rx)))
        };
        let alice = mcp_core::Principal::new("i", "alice");
        let bob = mcp_core::Principal::new("i", "bob");
        for n in 0..2 {
            assert!(pool.get(&Key(alice.clone(), n), start).await.is_ok());
        }
        assert_eq!(
            pool.get(&Key(alice.clone(), 2), start).await.err(),
            Some(UpstreamError::TooManyConnections),
            "alice is over her share"
        );
        assert!(
            pool.get(&Key(alice.clone(), 0), start).await.is_ok(),
            "her own links still serve"
        );
        assert!(
            pool.get(&Key(bob, 0), start).await.is_ok(),
            "bob still gets one"
        );
        assert_eq!(pool.budget().held_slots(), 3);
        assert_eq!(pool.budget().refusals().share, 1);
    }
}
