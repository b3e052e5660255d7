//! [`Relay`]: one routed call's upstream answer relayed to the client, message by message:
//! notifications filtered and rewritten (progress tokens, log levels, resource URIs), the
//! backend's requests relayed, parked or declined, the final response rewritten (id, task ids,
//! `requestState`, public URIs, fields a 2026-07-28 client needs), and the upstream call
//! cancelled when the relay goes away unanswered.
//!
//! Why this file is long: every kind of message a backend sends in a call's course is decided
//! in one loop over the call's state (its ids, session or link, the requests it holds in the
//! relayed-request table), and splitting the loop from the rewriting would pass that state
//! around field by field.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use mcp_config_store::VirtualHostConfig;
use mcp_core::{
    Envelope, Era, ErrorObject, MessageKind, Method, RawObject, RequestId, encode_error,
    encode_notification, encode_result, error_code,
};
use serde_json::value::RawValue;

use super::as_strs;
use super::bridge::Bridge;
use super::resolve::FollowedTask;
use crate::log_level;
use crate::naming::Namer;
use crate::ops::Ops;
use crate::ops::backchannel::{Back, forward_answer, input_capability};
use crate::ops::pending::Refused;
use crate::ops::plugins::PostHook;
use crate::ops::request_state;
use crate::ops::scope::{Incoming, OwnedCaller, classify};
use crate::ops::task_id::{self, Origin};
use crate::public_uris::PublicUris;
use crate::upstream::{
    LegacySession, LinkWriter, MessageStream, PROGRESS_TOKEN, Recorder, Target, UpstreamError,
    empty_object,
};

/// An owned copy of what a relay needs after the handler returned (the stream outlives it).
#[derive(Clone)]
pub(super) struct OwnedTarget {
    pub(super) name: String,
    pub(super) caller: OwnedCaller,
}

impl OwnedTarget {
    pub(super) fn target(&self) -> Target<'_> {
        // Built from this very virtual host by `relay_call`: the backend is always there.
        self.caller
            .target(&self.name)
            .expect("the routed backend belongs to its virtual host")
    }
}

/// How to finish the response for the client.
#[derive(Clone)]
pub(super) struct Finish {
    pub(super) method: Method,
    pub(super) backend: String,
    pub(super) vhost: Arc<VirtualHostConfig>,
    pub(super) era: Era,
    pub(super) state_binding: Vec<String>,
    /// What gateway task ids of this caller are bound to.
    pub(super) task_binding: Vec<String>,
    /// The call a task created by this answer belongs to, or the task followed up.
    pub(super) task: AnswerTask,
}

/// What a task id in an answer refers to.
#[derive(Clone)]
pub(super) enum AnswerTask {
    /// A task this call may create: created by this call.
    Created(Origin),
    /// The task a follow-up names.
    Followed(FollowedTask),
}

/// Relays one upstream call to the client.
pub(crate) struct Relay {
    pub(super) ops: Arc<Ops>,
    pub(super) downstream_id: RequestId,
    pub(super) upstream_id: RequestId,
    pub(super) messages: MessageStream,
    /// Records the upstream call's outcome from the messages as [`Self::next`] parses them
    /// (`None` once detached).
    pub(super) recorder: Option<Recorder>,
    pub(super) session: Option<Arc<LegacySession>>,
    /// The link the call runs on (stdio, HTTP+SSE): answers to the backend's requests go there.
    pub(super) link: Option<LinkWriter>,
    pub(super) target: OwnedTarget,
    /// (upstream token, the client's token as raw JSON).
    pub(super) progress: Option<(String, Box<RawValue>)>,
    /// Severity index (see [`crate::log_level::LEVELS`]) of the lowest log level relayed; `None`: no log
    /// messages at all.
    pub(super) log_threshold: Option<usize>,
    pub(super) finish: Finish,
    pub(super) done: bool,
    /// The backend's final response arrived. A legacy call dropped before that is cancelled
    /// upstream (see the `Drop` impl).
    pub(super) answered: bool,
    /// The downstream 2025 session: backend requests are relayed to it instead of declined.
    pub(super) downstream_session: Option<String>,
    /// Signalled when a 2025 client cancels this call (`notifications/cancelled`).
    pub(super) cancel: Option<Arc<tokio::sync::Notify>>,
    /// This call's entry in the in-flight table, removed on drop.
    pub(super) inflight_key: Option<(String, String)>,
    /// MRTR bridging, for a 2025 client calling a modern backend.
    pub(super) bridge: Option<Bridge>,
    /// Plugins' post hook on the final result.
    pub(super) post: Option<PostHook>,
    /// The error code of the final answer, when it is an error (its HTTP status for a
    /// 2026-07-28 client depends on it).
    pub(super) final_error: Option<i64>,
    /// The backend sent a message that is not JSON-RPC (named if no response follows).
    pub(super) saw_invalid: bool,
    /// The entries this call's backend holds in the table of relayed requests (a link's
    /// requests, bridged input requests): released when the call ends, answered or not, so a
    /// failed or cancelled call leaves nothing counted against its principal.
    pub(super) asked: Vec<u64>,
    /// The audit record of the client's request this relay answers (settled by the final
    /// message). Not carried into a parked call: its retry brings its own.
    pub(super) audit: Option<crate::audit::AuditHandle>,
}

pub(super) enum Relayed {
    Notification(Vec<u8>),
    Final(Vec<u8>),
}

/// What a 2026-07-28 client needs on a result a 2025 backend produced: `resultType` (absent means
/// `complete`, but strict clients require it) and, on `resources/read`, the cache hints every
/// cacheable result carries (a legacy backend gives none: `ttlMs: 0`, `cacheScope: private`).
/// Returns whether anything was added.
fn stamp_modern_fields(result: &mut RawObject<'_>, method: Method) -> bool {
    let mut changed = false;
    if !result.contains("resultType") {
        result.set_str("resultType", "complete");
        changed = true;
    }
    if method == Method::ResourcesRead
        && result.get_str("resultType").as_deref() == Some("complete")
    {
        if !result.contains("ttlMs") {
            result.set_json("ttlMs", &0);
            changed = true;
        }
        if !result.contains("cacheScope") {
            result.set_str("cacheScope", crate::degraded::CACHE_SCOPE);
            changed = true;
        }
    }
    changed
}

/// Why an HTTP legacy backend's request is declined: a 2026-07-28 client cannot be sent requests
/// mid-call (it is asked through `input_required` where it declared the capability).
const DECLINED_FOR_MODERN: &str =
    "server-to-client requests are not relayed to 2026-07-28 clients by the gateway";

/// Answers a backend's server-to-client request with an error (`-32601` with `reason`).
async fn decline(ops: &Ops, target: &OwnedTarget, back: Back<'_>, id: RequestId, reason: &str) {
    let message = encode_error(Some(&id), &ErrorObject::method_not_found(reason));
    if let Some(link) = back.link {
        link.send(message);
        return;
    }
    let Some(session) = back.session else {
        return;
    };
    if let Err(e) = ops
        .upstream
        .post_to_session(&target.target(), session, message)
        .await
    {
        tracing::debug!(backend = %target.name, error = %e, "could not decline a backend request");
    }
}

/// What became of a backend's request to its client in the course of a call.
enum Asked {
    /// Shown to the client (this message, under a gateway id).
    Shown(Vec<u8>),
    /// The caller's share of waiting requests (or the node's table) is full: the call fails.
    Refused(Refused),
    /// The client cannot be asked: the request is parked for a 2026-07-28 client, or declined.
    NotAskable,
}

/// A 2026-07-28 client cancels a call by closing its response stream; dropping the relay drops
/// `messages`, which closes the upstream stream, and that is cancellation for a modern backend. A
/// legacy (2025) backend does not take a closed stream as cancellation (its transport says a
/// disconnect is not a cancel) and keeps working until told with `notifications/cancelled` in its
/// session. So when a legacy call's relay goes away before the backend answered (the client
/// disconnected, or the gateway gave up after the backend's timeout), the backend is told, in the
/// background (`Drop` cannot wait). Only for a 2026-07-28 client: for a 2025 client a disconnect is
/// not a cancel (it may resume the stream), so that case is left to whoever serves 2025 clients.
impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(key) = self.inflight_key.take() {
            self.ops.inflight.remove(&key);
        }
        if !self.asked.is_empty() {
            // A link's request still unanswered gets the backend an error answer (see
            // `backchannel::forward_answer`); a bridged request's answer is no longer awaited.
            self.ops.pending.release(&self.asked);
        }
        if !self.answered && self.finish.era == Era::Modern {
            self.cancel_upstream(
                "cancelled by the gateway: its client went away or the call timed out",
            );
        }
    }
}

impl Relay {
    /// The next message for the client; `None` after the final one (or when a 2025 client
    /// cancelled the call).
    pub(crate) async fn next_message(&mut self) -> Option<Vec<u8>> {
        match self.next().await? {
            Relayed::Notification(message) | Relayed::Final(message) => Some(message),
        }
    }

    /// The downstream 2025 session the call belongs to (`None`: a 2026-07-28 client's).
    pub(crate) fn downstream_session(&self) -> Option<&str> {
        self.downstream_session.as_deref()
    }

    /// Who the call is for.
    pub(crate) fn principal(&self) -> &mcp_core::Principal {
        &self.target.caller.principal
    }

    /// Tells a legacy backend that the call is cancelled (`notifications/cancelled` in its
    /// session, in the background); a modern backend learns it from the closed stream.
    pub(crate) fn cancel_upstream(&mut self, reason: &str) {
        let Some(session) = self.session.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut params = RawObject::new();
        params.set_json("requestId", &self.upstream_id);
        params.set_str("reason", reason);
        let message = encode_notification("notifications/cancelled", Some(&params.to_raw()));
        let ops = Arc::clone(&self.ops);
        let target = self.target.clone();
        self.ops.upstream.owed.spawn_on(
            async move {
                if let Err(e) = ops.upstream.post_to_session(&target.target(), &session, message).await {
                    tracing::debug!(backend = %target.name, error = %e, "could not cancel a backend call");
                }
            },
            &runtime,
        );
    }

    /// The next upstream message, or `None` when the client cancelled the call.
    async fn next_upstream(&mut self) -> Option<Option<Result<Bytes, UpstreamError>>> {
        let Some(cancel) = self.cancel.clone() else {
            return Some(self.messages.next().await);
        };
        let notified = cancel.notified();
        let next = self.messages.next();
        futures_util::pin_mut!(notified);
        match futures_util::future::select(next, notified).await {
            futures_util::future::Either::Left((message, _)) => Some(message),
            futures_util::future::Either::Right(_) => None,
        }
    }

    /// The next message for the client; `None` after the final one. The final one settles the
    /// audit record (a transport failure settled it already, see [`Self::fail`]).
    pub(super) async fn next(&mut self) -> Option<Relayed> {
        let next = self.relay_next().await;
        if let (Some(Relayed::Final(message)), Some(audit)) = (&next, &self.audit) {
            audit.settle_final(message);
        }
        next
    }

    /// [`Self::next`] before the audit record hears of it.
    ///
    /// The rare steps (a bridged retry, a plugin post hook, declining a backend's request) are
    /// boxed where they are awaited: every call awaits this future, and it would otherwise be
    /// as large as the largest of them (book: docs/src/performance.md).
    async fn relay_next(&mut self) -> Option<Relayed> {
        if self.done {
            return None;
        }
        loop {
            if let Some(bridge) = self.bridge.as_mut() {
                if let Some(request) = bridge.queue.pop_front() {
                    return Some(Relayed::Notification(request));
                }
                if !bridge.awaiting.is_empty() {
                    if let Err(error) = Box::pin(self.retry_with_answers()).await {
                        self.done = true;
                        self.answered = true;
                        return Some(Relayed::Final(encode_error(
                            Some(&self.downstream_id),
                            &error,
                        )));
                    }
                    continue;
                }
            }
            let Some(next) = self.next_upstream().await else {
                // The 2025 client sent notifications/cancelled: no response is expected.
                self.done = true;
                self.answered = true;
                self.cancel_upstream("cancelled by the client");
                return None;
            };
            let message = match next {
                Some(Ok(message)) => message,
                Some(Err(e)) => {
                    if let Some(recorder) = &mut self.recorder {
                        recorder.failed(&e);
                    }
                    return Some(self.fail(&e));
                }
                None => return Some(self.fail(&UpstreamError::ended(self.saw_invalid))),
            };
            // Parsed once here; the recorder and the steps below read the envelope.
            let env = Envelope::parse(&message).ok();
            if let Some(recorder) = &mut self.recorder {
                recorder.message(env.as_ref());
            }
            self.saw_invalid |= env.is_none();
            match classify(env.as_ref(), &self.upstream_id) {
                Incoming::Final => {
                    match self.bridge_input_required(env.as_ref()) {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err(why) => return Some(self.refuse(why)),
                    }
                    self.done = true;
                    self.answered = true;
                    let Some(post) = self.post.take() else {
                        return Some(Relayed::Final(self.finish(env.as_ref())));
                    };
                    drop(env);
                    let checked = Box::pin(post.apply(&self.upstream_id, message)).await;
                    return Some(Relayed::Final(match checked {
                        Ok(message) => self.finish(Envelope::parse(&message).ok().as_ref()),
                        Err(error) => encode_error(Some(&self.downstream_id), &error),
                    }));
                }
                Incoming::ServerRequest(id) => {
                    let method = env.as_ref().and_then(Envelope::method).unwrap_or("");
                    if method == "ping" {
                        // Only whether its peer is there is asked, and the gateway is that peer:
                        // a backend's ping is answered here, never relayed (a flood of pings
                        // would otherwise fill the client's stream and, for a link, the table of
                        // relayed requests).
                        let pong = empty_object();
                        if let Err(e) = Box::pin(self.answer_upstream(&id, &pong)).await {
                            tracing::debug!(backend = %self.finish.backend, error = %e, "could not answer a backend's ping");
                        }
                        continue;
                    }
                    match self.relay_request(&message, id.clone()) {
                        Asked::Shown(request) => return Some(Relayed::Notification(request)),
                        Asked::Refused(why) => {
                            // The backend's request gets its answer (an error naming the limit)
                            // before its call fails, so a backend that ignores cancellation does
                            // not wait on it until its own timeout.
                            let back = Back {
                                session: self.session.as_deref(),
                                link: self.link.as_ref(),
                            };
                            Box::pin(decline(&self.ops, &self.target, back, id, &why.to_string()))
                                .await;
                            return Some(self.refuse(why));
                        }
                        Asked::NotAskable => {}
                    }
                    if let Some(input_required) = self.park(&message, &id) {
                        return Some(Relayed::Final(input_required));
                    }
                    let reason = self.decline_reason(method);
                    let back = Back {
                        session: self.session.as_deref(),
                        link: self.link.as_ref(),
                    };
                    Box::pin(decline(&self.ops, &self.target, back, id, &reason)).await;
                }
                Incoming::Other => {
                    if let Some(notification) =
                        env.and_then(|env| self.notification(&message, &env))
                    {
                        return Some(Relayed::Notification(notification));
                    }
                }
            }
        }
    }

    fn fail(&mut self, e: &UpstreamError) -> Relayed {
        tracing::info!(backend = %self.finish.backend, error = %e, "routed call failed mid-stream");
        if let Some(audit) = &self.audit {
            audit.transport_error();
        }
        // A call past its deadline is the gateway's decision, not the client's: its 2025 backend
        // (whose session outlives the dropped answer) is told, whatever the client's era.
        if matches!(e, UpstreamError::DeadlineExceeded(_)) {
            self.cancel_upstream("cancelled by the gateway: the call exceeded its deadline");
        }
        self.failed(e)
    }

    /// Fails the call whose backend asked its client more than the caller's share allows; the
    /// call is cancelled upstream when the relay is dropped, as for any call that ends early.
    fn refuse(&mut self, why: Refused) -> Relayed {
        tracing::warn!(backend = %self.finish.backend, reason = %why, "a backend's request to its client refused; failing its call");
        self.failed(&why)
    }

    /// The call's final answer: `-32603 Backend <name> failed: <why>`.
    fn failed(&mut self, why: &dyn std::fmt::Display) -> Relayed {
        self.done = true;
        let error = ErrorObject::internal(format!("Backend {} failed: {why}", self.finish.backend));
        Relayed::Final(encode_error(Some(&self.downstream_id), &error))
    }
}

impl Relay {
    /// Moves the live upstream call out into a new relay, leaving this one finished (its drop
    /// then neither cancels nor answers anything).
    pub(super) fn detach(&mut self) -> Relay {
        let relay = Relay {
            ops: Arc::clone(&self.ops),
            downstream_id: self.downstream_id.clone(),
            upstream_id: self.upstream_id.clone(),
            messages: std::mem::replace(
                &mut self.messages,
                Box::pin(futures_util::stream::empty()),
            ),
            recorder: self.recorder.take(),
            session: self.session.take(),
            link: self.link.take(),
            target: self.target.clone(),
            progress: self.progress.take(),
            log_threshold: self.log_threshold,
            finish: self.finish.clone(),
            done: false,
            answered: false,
            downstream_session: self.downstream_session.take(),
            cancel: self.cancel.take(),
            inflight_key: self.inflight_key.take(),
            bridge: self.bridge.take(),
            post: self.post.take(),
            final_error: None,
            saw_invalid: self.saw_invalid,
            asked: std::mem::take(&mut self.asked),
            audit: None,
        };
        self.done = true;
        self.answered = true;
        relay
    }

    /// Answers the backend's request `upstream_id` in its session.
    pub(crate) async fn answer_upstream(
        &mut self,
        upstream_id: &RequestId,
        answer: &RawValue,
    ) -> Result<(), UpstreamError> {
        let message = encode_result(upstream_id, answer);
        if let Some(link) = &self.link {
            link.send(message);
            return Ok(());
        }
        let session = self.session.as_deref().ok_or(UpstreamError::Disconnected)?;
        self.ops
            .upstream
            .post_to_session(&self.target.target(), session, message)
            .await
    }

    /// A backend request for a 2025 client, under a gateway id the client answers with (see
    /// [`crate::ops::pending`]); not askable when the client cannot be asked (a 2026-07-28
    /// client, a backend without an upstream session or link, or a link's request for a
    /// capability this client did not declare); refused when the caller's share of relayed
    /// requests (or the node's table) is full.
    fn relay_request(&mut self, message: &Bytes, upstream_id: RequestId) -> Asked {
        let Some(downstream) = self.downstream_session.as_deref() else {
            return Asked::NotAskable;
        };
        let Some(mut request) = std::str::from_utf8(message)
            .ok()
            .and_then(|text| RawObject::parse(text).ok())
        else {
            return Asked::NotAskable;
        };
        match (&self.session, &self.link) {
            (Some(session), _) => self.ops.pending.relay(
                downstream,
                &self.finish.backend,
                upstream_id,
                Arc::clone(session),
                &mut request,
            ),
            (None, Some(link)) => {
                // The link declared every relayed capability for all its callers (see
                // `upstream::link`): whether this client can be asked is decided here.
                let askable = request
                    .get_str("method")
                    .and_then(|method| input_capability(&method))
                    .is_some_and(|c| self.client_declares(c));
                if !askable {
                    return Asked::NotAskable;
                }
                // The answer comes back to this node's table (or over the node bus to it): the
                // link lives here.
                let (entry, answer) = match self.ops.pending.relay_link(
                    downstream,
                    &self.target.caller.principal,
                    link,
                    &mut request,
                    &self.finish.backend,
                ) {
                    Ok(registered) => registered,
                    Err(why) => return Asked::Refused(why),
                };
                forward_answer(link.clone(), upstream_id, answer, self.ops.pending.ttl());
                self.asked.push(entry);
            }
            (None, None) => return Asked::NotAskable,
        }
        Asked::Shown(request.to_json().into_bytes())
    }

    /// Whether this call's client declared `capability`.
    pub(super) fn client_declares(&self, capability: &str) -> bool {
        RawObject::from_raw(&self.target.caller.client_caps).is_ok_and(|c| c.contains(capability))
    }

    /// What the backend is told when its request `method` is declined.
    fn decline_reason(&self, method: &str) -> String {
        if self.link.is_none() {
            return DECLINED_FOR_MODERN.to_owned();
        }
        match (input_capability(method), self.finish.era) {
            (Some(capability), _) if !self.client_declares(capability) => format!(
                "{method}: the client of this call did not declare the {capability} capability"
            ),
            (None, Era::Legacy) => format!("{method}: not relayed to clients by the gateway"),
            (_, Era::Modern) => format!(
                "{method}: not relayed to this 2026-07-28 client by the gateway (it asks for \
                 sampling, elicitation and roots through input_required)"
            ),
            (Some(_), Era::Legacy) => format!("{method}: the client cannot be asked"),
        }
    }

    /// A notification for the client, with the client's progress token restored.
    fn notification(&self, message: &Bytes, env: &Envelope<'_>) -> Option<Vec<u8>> {
        if env.kind() != MessageKind::Notification {
            return None;
        }
        let method = env.method()?;
        if method == "notifications/message" {
            let threshold = self.log_threshold?;
            let level = env
                .params()
                .and_then(|p| RawObject::from_raw(p).ok())
                .and_then(|p| p.get_str("level"));
            if level
                .as_deref()
                .and_then(log_level::severity)
                .is_some_and(|s| s < threshold)
            {
                return None;
            }
            return Some(message.to_vec());
        }
        if method == "notifications/resources/updated"
            && let Some(uris) = self.public_uris()
        {
            // A 2025 backend may send it on the call's stream too.
            let mut params = RawObject::from_raw(env.params()?).ok()?;
            let uri = params.get_str("uri")?;
            params.set_str("uri", &uris.public(&uri));
            return Some(encode_notification(method, Some(&params.to_raw())));
        }
        if method != "notifications/progress" {
            return Some(message.to_vec());
        }
        let (upstream_token, client_token) = self.progress.as_ref()?;
        let mut params = RawObject::from_raw(env.params()?).ok()?;
        let token: Option<String> = params.get_str(PROGRESS_TOKEN);
        if token.as_deref() != Some(upstream_token.as_str()) {
            return None;
        }
        params.set_raw(PROGRESS_TOKEN, client_token.clone());
        Some(encode_notification(method, Some(&params.to_raw())))
    }

    /// The final response for the client: id restored, result or error rewritten; notes the HTTP
    /// status a 2026-07-28 client gets with it.
    fn finish(&mut self, env: Option<&Envelope<'_>>) -> Vec<u8> {
        let Some(env) = env else {
            if let Some(audit) = &self.audit {
                audit.transport_error();
            }
            let error = ErrorObject::internal(format!(
                "Backend {} sent an invalid response",
                self.finish.backend
            ));
            return encode_error(Some(&self.downstream_id), &error);
        };
        if let Some(mut error) = env.error() {
            if self.finish.era == Era::Modern && error.code == error_code::RESOURCE_NOT_FOUND_LEGACY
            {
                error.code = error_code::INVALID_PARAMS;
            }
            self.final_error = Some(error.code);
            return encode_error(Some(&self.downstream_id), &error);
        }
        let Some(result) = env.result() else {
            return encode_result(&self.downstream_id, RawValue::NULL);
        };
        match self.rewrite_result(result) {
            Some(rewritten) => encode_result(&self.downstream_id, &rewritten),
            None => encode_result(&self.downstream_id, result),
        }
    }

    /// The rewriter of the backend's URIs; `None` when they are public as they are.
    fn public_uris(&self) -> Option<PublicUris<'_>> {
        PublicUris::new(Namer::new(&self.finish.vhost), &self.finish.backend)
    }

    /// The rewritten result, or `None` to pass it through verbatim.
    fn rewrite_result(&self, result: &RawValue) -> Option<Box<RawValue>> {
        let mut obj = RawObject::from_raw(result).ok()?;
        let mut changed = false;
        if self.finish.era == Era::Modern {
            changed |= stamp_modern_fields(&mut obj, self.finish.method);
        }
        // A backend task id (a created task, or a tasks/* answer) becomes a gateway task id.
        let is_task = obj.get_str("resultType").as_deref() == Some("task")
            || matches!(
                self.finish.method,
                Method::TasksGet | Method::TasksUpdate | Method::TasksCancel
            );
        if is_task && let Some(raw) = obj.get_str("taskId") {
            let public = match &self.finish.task {
                AnswerTask::Followed(task) if task.ids.0 == raw => task.ids.1.clone(),
                AnswerTask::Followed(FollowedTask { origin, .. }) | AnswerTask::Created(origin) => {
                    task_id::seal(
                        &self.ops.sealer,
                        &as_strs(&self.finish.task_binding),
                        &self.finish.backend,
                        &raw,
                        origin,
                    )
                }
            };
            obj.set_str("taskId", &public);
            changed = true;
        }
        if obj.get_str("resultType").as_deref() == Some("input_required")
            && let Some(state) = obj.get_str("requestState")
        {
            let wrapped = request_state::wrap(
                &self.ops.sealer,
                &as_strs(&self.finish.state_binding),
                &state,
                self.ops.request_state_ttl_secs,
            );
            obj.set_str("requestState", &wrapped);
            changed = true;
        }
        if let Some(uris) = self.public_uris() {
            changed |= uris.result(self.finish.method, &mut obj);
        }
        changed.then(|| obj.to_raw())
    }
}
