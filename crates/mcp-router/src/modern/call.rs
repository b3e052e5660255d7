//! Targeted calls (`tools/call`, `prompts/get`, `resources/read`, `completion/complete`): find the
//! owning backend from the public name, rewrite the name upstream, and relay the backend's answer.
//!
//! The backend's answer decides the response form: a plain JSON response is answered as JSON; when
//! the backend streams (SSE), the gateway streams too, relaying notifications of the call
//! (`notifications/progress` with the client's own progress token restored, `notifications/message`)
//! as they arrive, then the response. A modern client gets `notifications/message` only when its
//! `_meta` carries `io.modelcontextprotocol/logLevel`, and only at or above that level (2026-07-28
//! forbids log messages for a request without it; a legacy backend logs by default).
//!
//! Closing the response stream closes the upstream one: that is cancellation in 2026-07-28. A
//! legacy backend is sent `notifications/cancelled` instead, since its era does not take a closed
//! stream as cancellation (also when the gateway gives up on it after the backend's timeout).
//!
//! Rewrites on the way back: the response id, the backend's resource URIs in results and in
//! `notifications/resources/updated` (public URIs: resource links and embedded resources of tool
//! results, task results and prompt messages, `contents[].uri` of `resources/read`; see
//! [`public_uris`](crate::public_uris)), an MRTR `requestState` (wrapped, see
//! [`request_state`](super::request_state)), and a legacy backend's `-32002` resource-not-found
//! becomes `-32602` for a modern client. Everything else is passed through byte for byte.
//!
//! Input mid-call, across eras (book: docs/src/eras.md bridging):
//! - a modern backend's `input_required` for a 2025 client becomes real server-to-client requests on
//!   the call's stream, and the answers the backend's retry ([`Bridge`]);
//! - a 2025 backend's mid-call request (`sampling/createMessage`, `elicitation/create`,
//!   `roots/list`) for a 2026-07-28 client that declared the capability ends the client's exchange
//!   with an `input_required` result; the upstream call stays open ([`parked`](super::parked)) and
//!   the client's retry, carrying `inputResponses` and the gateway's `requestState`, answers the
//!   backend's request and relays the rest of the same call. Other backend requests (or a client
//!   without the capability, or a full parking table) are declined with `-32601`.
//! - a request of a backend behind a link (stdio, HTTP+SSE), which the link put on this call
//!   (see `upstream::link`), is handled the same way; since the link declared every relayed
//!   capability for all its callers, a 2025 client is asked only for what it declared itself,
//!   and its answer is written to the link (`forward_answer`).

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Response, StatusCode};
use mcp_config_store::{BackendConfig, VirtualHostConfig};
use mcp_core::sse::SseEvent;
use mcp_core::{
    Envelope, Era, ErrorObject, MessageKind, Method, RawObject, RequestId, encode_error,
    encode_notification, encode_result, error_code,
};
use serde_json::value::RawValue;

use super::backchannel::{Back, forward_answer, input_capability};
use super::parked;
use super::request_state::{self, State};
use super::task_id::{self, Origin};
use mcp_fallback::ToolHints;

use crate::body::{self, McpBody};
use crate::log_level;
use crate::modern::list::{ListShape, lists_item};
use crate::naming::{Namer, Resolution, Target as NameTarget};
use crate::plugins::{self, Governed, PostHook};
use crate::public_uris::PublicUris;
use crate::respond;
use crate::router::RouterInner;
use crate::scope::{Incoming, OwnedCaller, Scope, classify};
use crate::upstream::{
    Call, LegacySession, LinkWriter, MessageStream, PROGRESS_TOKEN, Target, UpstreamError,
};
use mcp_core::ItemKind;

/// Where the routed name sits in the params.
#[derive(Clone, Copy)]
enum NameSlot {
    /// `params.name`.
    Name,
    /// `params.uri`.
    Uri,
    /// `params.ref.name` / `params.ref.uri`.
    Ref(&'static str),
}

struct Routed<'a> {
    backend: &'a str,
    config: &'a BackendConfig,
    upstream: String,
    /// For a task follow-up: the task.
    task: Option<FollowedTask>,
}

/// The task a follow-up (`tasks/get|update|cancel`) names.
#[derive(Clone)]
struct FollowedTask {
    /// The call that created it.
    origin: Origin,
    /// The backend's own id (`Routed::upstream`) and the gateway id the client knows it by.
    /// Answers about that task show the client's id again: sealing afresh (a new nonce) would
    /// give one task a new id on every follow-up.
    ids: (String, String),
}

/// Answers a targeted call.
pub(crate) async fn targeted(
    scope: &Scope<'_>,
    inner: &Arc<RouterInner>,
    id: &RequestId,
    method: Method,
    params: RawObject<'_>,
) -> Response<McpBody> {
    let (routed, mut params, public, parked) = match prepare(scope, method, params).await {
        Ok(prepared) => prepared,
        Err(error) => return respond::error(StatusCode::OK, Some(id), &error),
    };
    let governed = match &routed.task {
        // A task's result is its creating call's result: that call's post hook applies to it.
        Some(task) => plugins::task_post(scope, &task.origin, routed.backend),
        None => {
            plugins::pre(
                scope,
                method,
                routed.backend,
                &routed.upstream,
                &public,
                &mut params,
            )
            .await
        }
    };
    match (governed, parked) {
        (Ok(_), Some((token, node))) => {
            let binding = scope.binding(&[routed.backend, method.as_str(), &routed.upstream]);
            let parked = super::parked::Resume {
                token,
                node,
                binding: binding.into_iter().map(str::to_owned).collect(),
            };
            resume(scope, inner, id, parked, &params).await
        }
        (Ok(governed), None) => {
            relay_call(scope, inner, id, method, routed, params, governed).await
        }
        (Err(error), _) => respond::error(StatusCode::OK, Some(id), &error),
    }
}

fn wrong_name(scope: &Scope<'_>, what: &str, name: &str) -> ErrorObject {
    let code = match scope.era {
        Era::Modern => error_code::INVALID_PARAMS,
        Era::Legacy => error_code::INTERNAL_ERROR,
    };
    ErrorObject::new(code, format!("{what}: {name}"))
}

/// The routed backend, the upstream params, the name (or task id) the caller used, and the token
/// of the parked call a retry resumes, with the node holding it.
type Prepared<'a> = (Routed<'a>, RawObject<'static>, String, Option<Parked>);

/// A parked call's token and the node holding it (`None`: minted before states named it).
type Parked = (String, Option<String>);

/// Finds the backend and builds the upstream params.
async fn prepare<'a>(
    scope: &Scope<'a>,
    method: Method,
    mut params: RawObject<'_>,
) -> Result<Prepared<'a>, ErrorObject> {
    if matches!(
        method,
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel
    ) {
        return prepare_task(scope, params);
    }
    let (slot, kind, what) = match method {
        Method::ToolsCall => (NameSlot::Name, ItemKind::Tool, "wrong tool name"),
        Method::PromptsGet => (NameSlot::Name, ItemKind::Prompt, "wrong prompt name"),
        Method::ResourcesRead | Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
            (NameSlot::Uri, ItemKind::Resource, "wrong resource name")
        }
        _ => completion_slot(&params)?,
    };
    let public = read_name(&params, slot)
        .ok_or_else(|| ErrorObject::invalid_params(format!("{what}: missing name")))?;
    let routed = resolve(scope, method, kind, &public, what).await?;
    if kind == ItemKind::Tool
        && routed
            .config
            .allowed_tools
            .as_ref()
            .is_some_and(|allowed| !allowed.contains(&routed.upstream))
    {
        return Err(wrong_name(scope, what, &public));
    }
    write_name(&mut params, slot, &routed.upstream);
    let mut parked = None;
    if let Some(handle) = params.get_str("requestState") {
        let binding = scope.binding(&[routed.backend, method.as_str(), &routed.upstream]);
        let state = request_state::unwrap(&scope.inner.sealer, &binding, &handle)
            .map_err(|e| ErrorObject::invalid_params(format!("Invalid requestState ({e})")))?;
        match state {
            State::Backend(inner_state) => params.set_str("requestState", &inner_state),
            State::Parked { token, node } => parked = Some((token, node)),
        }
    }
    Ok((routed, params.into_owned(), public, parked))
}

/// A tasks-extension follow-up: the gateway task id leads to the backend and its raw id.
fn prepare_task<'a>(
    scope: &Scope<'a>,
    mut params: RawObject<'_>,
) -> Result<Prepared<'a>, ErrorObject> {
    let unknown = || ErrorObject::invalid_params("Unknown task");
    let public = params.get_str("taskId").ok_or_else(unknown)?;
    let task =
        task_id::open(&scope.inner.sealer, &scope.binding(&[]), &public).map_err(|_| unknown())?;
    let (backend, config) = scope
        .ctx
        .vhost
        .backends
        .get_key_value(&task.backend)
        .ok_or_else(unknown)?;
    params.set_str("taskId", &task.raw);
    let routed = Routed {
        backend: backend.as_str(),
        config,
        upstream: task.raw.clone(),
        task: Some(FollowedTask {
            origin: task.origin,
            ids: (task.raw, public.clone()),
        }),
    };
    Ok((routed, params.into_owned(), public, None))
}

fn completion_slot(
    params: &RawObject<'_>,
) -> Result<(NameSlot, ItemKind, &'static str), ErrorObject> {
    let reference: Option<RawObject<'_>> = params
        .get("ref")
        .and_then(|r| RawObject::parse(r.get()).ok());
    let kind = reference.as_ref().and_then(|r| r.get_str("type"));
    match kind.as_deref() {
        Some("ref/prompt") => Ok((
            NameSlot::Ref("name"),
            ItemKind::Prompt,
            "wrong completion reference",
        )),
        Some("ref/resource") => Ok((
            NameSlot::Ref("uri"),
            ItemKind::Resource,
            "wrong completion reference",
        )),
        _ => Err(ErrorObject::invalid_params(
            "wrong completion reference: unknown ref type",
        )),
    }
}

fn read_name(params: &RawObject<'_>, slot: NameSlot) -> Option<String> {
    match slot {
        NameSlot::Name => params.get_str("name"),
        NameSlot::Uri => params.get_str("uri"),
        NameSlot::Ref(key) => params
            .get("ref")
            .and_then(|r| RawObject::parse(r.get()).ok())
            .and_then(|r| r.get_str(key)),
    }
}

fn write_name(params: &mut RawObject<'_>, slot: NameSlot, upstream: &str) {
    match slot {
        NameSlot::Name => params.set_str("name", upstream),
        NameSlot::Uri => params.set_str("uri", upstream),
        NameSlot::Ref(key) => {
            let text = params
                .get("ref")
                .map(|r| r.get().to_owned())
                .unwrap_or_default();
            if let Ok(mut reference) = RawObject::parse(&text) {
                reference.set_str(key, upstream);
                let raw = reference.to_raw();
                params.set_raw("ref", raw);
            }
        }
    }
}

/// Public name to backend (book: docs/src/failure-modes.md and docs/src/architecture.md).
async fn resolve<'a>(
    scope: &Scope<'a>,
    method: Method,
    kind: ItemKind,
    public: &str,
    what: &str,
) -> Result<Routed<'a>, ErrorObject> {
    let namer: Namer<'a> = scope.namer();
    let found = |t: NameTarget<'_>| -> Option<Routed<'a>> {
        let (backend, config) = scope.ctx.vhost.backends.get_key_value(t.backend)?;
        Some(Routed {
            backend: backend.as_str(),
            config,
            upstream: t.upstream.into_owned(),
            task: None,
        })
    };
    match namer.resolve(public, kind) {
        Resolution::None => Err(wrong_name(scope, what, public)),
        Resolution::One(t) => found(t).ok_or_else(|| wrong_name(scope, what, public)),
        Resolution::Several(candidates) => {
            let exposing = exposing(scope, method, kind, &candidates).await;
            match exposing.len() {
                0 => candidates
                    .into_iter()
                    .next()
                    .and_then(found)
                    .ok_or_else(|| wrong_name(scope, what, public)),
                1 => exposing
                    .into_iter()
                    .next()
                    .and_then(found)
                    .ok_or_else(|| wrong_name(scope, what, public)),
                _ => {
                    if let Some(session) = scope.session_id {
                        crate::legacy::clean_up_backends(scope, session).await;
                    }
                    Err(ErrorObject::invalid_request(format!(
                        "ambiguous name: {public} (several backends expose it)"
                    )))
                }
            }
        }
    }
}

/// The candidates whose backend actually lists the item.
async fn exposing<'a>(
    scope: &Scope<'_>,
    method: Method,
    kind: ItemKind,
    candidates: &[NameTarget<'a>],
) -> Vec<NameTarget<'a>> {
    let list_method = match (method, kind) {
        (_, ItemKind::Tool) => Method::ToolsList,
        (_, ItemKind::Prompt) => Method::PromptsList,
        (_, ItemKind::Resource) => Method::ResourcesList,
    };
    let Some(shape) = ListShape::of(list_method) else {
        return Vec::new();
    };
    let checks = candidates.iter().map(|candidate| async move {
        lists_item(
            scope,
            list_method,
            shape,
            candidate.backend,
            &candidate.upstream,
        )
        .await
        .then(|| candidate.clone())
    });
    futures_util::future::join_all(checks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// An owned copy of what a relay needs after the handler returned (the stream outlives it).
#[derive(Clone)]
struct OwnedTarget {
    name: String,
    caller: OwnedCaller,
}

impl OwnedTarget {
    fn target(&self) -> Target<'_> {
        // Built from this very virtual host by `relay_call`: the backend is always there.
        self.caller
            .target(&self.name)
            .expect("the routed backend belongs to its virtual host")
    }
}

/// How to finish the response for the client.
#[derive(Clone)]
struct Finish {
    method: Method,
    backend: String,
    vhost: Arc<VirtualHostConfig>,
    era: Era,
    state_binding: Vec<String>,
    /// What gateway task ids of this caller are bound to.
    task_binding: Vec<String>,
    /// The call a task created by this answer belongs to, or the task followed up.
    task: AnswerTask,
}

/// What a task id in an answer refers to.
#[derive(Clone)]
enum AnswerTask {
    /// A task this call may create: created by this call.
    Created(Origin),
    /// The task a follow-up names.
    Followed(FollowedTask),
}

/// Most MRTR rounds the gateway drives for a 2025 client before giving up.
const MAX_BRIDGED_ROUNDS: usize = 8;
/// How long the gateway waits for a 2025 client to answer its input requests.
const BRIDGE_ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Turns a modern backend's MRTR `input_required` into real requests to a 2025 client (which
/// does not speak MRTR) on the call's SSE stream, then retries the backend with the answers as
/// `inputResponses` and the backend's `requestState` (book: docs/src/eras.md bridging).
struct Bridge {
    /// The upstream params of the call, to retry with.
    params: RawObject<'static>,
    /// The upstream tool/prompt name or resource URI (for `Mcp-Name`).
    name: String,
    rounds: usize,
    /// Requests to send the client before waiting.
    queue: std::collections::VecDeque<Vec<u8>>,
    /// (input key, where the client's answer arrives).
    awaiting: Vec<(String, tokio::sync::oneshot::Receiver<Bytes>)>,
    /// The backend's `requestState` of the current round.
    request_state: Option<String>,
}

/// Relays one upstream call to the client.
struct Relay {
    inner: Arc<RouterInner>,
    downstream_id: RequestId,
    upstream_id: RequestId,
    messages: MessageStream,
    session: Option<Arc<LegacySession>>,
    /// The link the call runs on (stdio, HTTP+SSE): answers to the backend's requests go there.
    link: Option<LinkWriter>,
    target: OwnedTarget,
    /// (upstream token, the client's token as raw JSON).
    progress: Option<(String, Box<RawValue>)>,
    /// Severity index (see [`crate::log_level::LEVELS`]) of the lowest log level relayed; `None`: no log
    /// messages at all.
    log_threshold: Option<usize>,
    finish: Finish,
    done: bool,
    /// The backend's final response arrived. A legacy call dropped before that is cancelled
    /// upstream (see the `Drop` impl).
    answered: bool,
    /// The downstream 2025 session: backend requests are relayed to it instead of declined.
    downstream_session: Option<String>,
    /// That session's response streams start with a priming event (2025-11-25).
    primes: bool,
    /// Signalled when a 2025 client cancels this call (`notifications/cancelled`).
    cancel: Option<Arc<tokio::sync::Notify>>,
    /// This call's entry in the in-flight table, removed on drop.
    inflight_key: Option<(String, String)>,
    /// MRTR bridging, for a 2025 client calling a modern backend.
    bridge: Option<Bridge>,
    /// Plugins' post hook on the final result.
    post: Option<PostHook>,
    /// The HTTP status of the final answer for a 2026-07-28 client (see [`modern_status`]).
    final_status: StatusCode,
    /// The backend sent a message that is not JSON-RPC (named if no response follows).
    saw_invalid: bool,
}

enum Relayed {
    Notification(Vec<u8>),
    Final(Vec<u8>),
}

async fn relay_call(
    scope: &Scope<'_>,
    inner: &Arc<RouterInner>,
    id: &RequestId,
    method: Method,
    routed: Routed<'_>,
    params: RawObject<'static>,
    governed: Option<Governed>,
) -> Response<McpBody> {
    let Governed {
        headers: plugin_headers,
        meta: plugin_meta,
        post,
    } = governed.unwrap_or_default();
    let mut target = scope.target(routed.backend, routed.config);
    if plugin_meta.is_some() {
        target.meta = plugin_meta.as_deref();
    }
    let client = ClientMeta::of(scope);
    let progress = client
        .progress_token
        .map(|t| (inner.upstream.next_progress_token(), t));
    let call = Call {
        method: method.as_str(),
        params,
        name: Some(&routed.upstream),
        progress_token: progress.as_ref().map(|(t, _)| t.as_str()),
        // A tool call may have side effects: it goes to a replica after the primary might have
        // run it only when its annotations say it is read-only or idempotent.
        hints: inner.tool_hints(&target, &routed.upstream),
        headers: plugin_headers.as_ref(),
    };
    // A 2025 client may cancel the call (notifications/cancelled) before the backend even
    // answers the request head: register first, and give up the send when it fires.
    let registration = scope.session_id.map(|session| {
        let key = (session.to_owned(), id.to_json().into_owned());
        (inner.inflight.register(key.clone()), key)
    });
    let sending = inner.upstream.send(&target, &call);
    let sent = match &registration {
        Some((cancel, _)) => {
            let notified = cancel.notified();
            futures_util::pin_mut!(sending, notified);
            match futures_util::future::select(sending, notified).await {
                futures_util::future::Either::Left((sent, _)) => Some(sent),
                futures_util::future::Either::Right(_) => None,
            }
        }
        None => Some(sending.await),
    };
    let reply = match sent {
        Some(Ok(reply)) => reply,
        Some(Err(e)) => {
            if let Some((_, key)) = &registration {
                inner.inflight.remove(key);
            }
            return backend_error(id, routed.backend, &e);
        }
        None => {
            // Dropping the send closed the upstream request: a modern backend takes that as
            // cancellation; a legacy one had no upstream id yet to cancel.
            if let Some((_, key)) = &registration {
                inner.inflight.remove(key);
            }
            return respond::accepted();
        }
    };
    let state_binding = scope
        .binding(&[routed.backend, method.as_str(), &routed.upstream])
        .into_iter()
        .map(str::to_owned)
        .collect();
    let bridge = (scope.era == Era::Legacy
        && scope.session_id.is_some()
        && reply.session.is_none())
    .then(|| Bridge {
        params: call.params.clone().into_owned(),
        name: routed.upstream.clone(),
        rounds: 0,
        queue: std::collections::VecDeque::new(),
        awaiting: Vec::new(),
        request_state: None,
    });
    let relay = Relay {
        bridge,
        inner: Arc::clone(inner),
        downstream_id: id.clone(),
        upstream_id: reply.id,
        messages: reply.messages,
        session: reply.session,
        link: reply.link,
        target: OwnedTarget {
            name: routed.backend.to_owned(),
            caller: OwnedCaller::of(scope),
        },
        progress,
        log_threshold: client.log_threshold,
        finish: Finish {
            method,
            backend: routed.backend.to_owned(),
            vhost: Arc::clone(&scope.ctx.vhost),
            era: scope.era,
            state_binding,
            task_binding: scope.binding(&[]).into_iter().map(str::to_owned).collect(),
            task: match routed.task.clone() {
                Some(task) => AnswerTask::Followed(task),
                None => AnswerTask::Created(Origin {
                    method,
                    name: routed.upstream.clone(),
                }),
            },
        },
        done: false,
        answered: false,
        downstream_session: scope.session_id.map(str::to_owned),
        primes: scope.primes_streams,
        cancel: registration.as_ref().map(|(cancel, _)| Arc::clone(cancel)),
        inflight_key: registration.map(|(_, key)| key),
        post,
        final_status: StatusCode::OK,
        saw_invalid: false,
    };
    respond_relay(relay).await
}

/// Answers the client with the relay's first message: as JSON when it is the final one, else as
/// a stream of the rest.
async fn respond_relay(mut relay: Relay) -> Response<McpBody> {
    match relay.next().await {
        Some(Relayed::Final(bytes)) => {
            let status = match relay.finish.era {
                Era::Modern => relay.final_status,
                Era::Legacy => StatusCode::OK,
            };
            respond::json(status, bytes)
        }
        Some(Relayed::Notification(first)) => {
            // A 2025 session's stream is relayed past a disconnect: it takes one of the
            // principal's background relays.
            let slot = match &relay.downstream_session {
                Some(_) => match relay.inner.relays.take(&relay.target.caller.principal) {
                    Some(slot) => Some(slot),
                    None => return refuse_relay(relay),
                },
                None => None,
            };
            respond::sse(stream_body(first, relay, slot))
        }
        // Cancelled by a 2025 client before anything arrived: no response is owed.
        None => respond::accepted(),
    }
}

/// The answer to a 2025 call that would stream while its principal has all its background relays:
/// a JSON-RPC error, and the call is cancelled upstream.
fn refuse_relay(mut relay: Relay) -> Response<McpBody> {
    let max = relay.inner.relays.max();
    relay.cancel_upstream("cancelled by the gateway: too many calls streaming for this principal");
    let error = ErrorObject::invalid_request(format!(
        "Too many streaming calls for this principal (at most {max} relayed at once)"
    ));
    respond::error(StatusCode::OK, Some(&relay.downstream_id), &error)
}

/// Most seconds a parked call waits for the client's retries, all rounds of it together.
const MAX_PARKED_SECS: u64 = 600;
/// Most calls one caller may have parked at once (the table holds 10,000 in all).
pub(crate) const MAX_PARKED_PER_CALLER: usize = 100;

/// A 2025 backend's call waiting for a 2026-07-28 client's input (see [`parked`]).
pub(crate) struct ParkedCall {
    /// Boxed: a relay is large, and parked calls move through the table.
    relay: Box<Relay>,
    /// When the call stops waiting, whatever the rounds (re-asking does not extend it).
    deadline: std::time::Instant,
    inputs: Vec<Input>,
}

/// One backend request the client is asked to answer.
struct Input {
    /// Its key in `inputRequests` / `inputResponses`.
    key: String,
    /// The backend's request id, to answer upstream.
    upstream_id: RequestId,
    /// `{"method", "params"}` as the client gets it.
    request: Box<RawValue>,
}

/// The parked calls of a router.
pub(crate) type ParkedCalls = parked::ParkedCalls<ParkedCall>;

impl ParkedCall {
    /// Parks the call and returns the client's `input_required` answer; gives the call back when
    /// the table is full.
    fn park(self) -> Result<Vec<u8>, Self> {
        let inner = Arc::clone(&self.relay.inner);
        let downstream_id = self.relay.downstream_id.clone();
        let binding = self.relay.finish.state_binding.clone();
        let mut requests = RawObject::new();
        for input in &self.inputs {
            requests.set_raw(&input.key, input.request.clone());
        }
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(self);
        }
        // The caller (issuer, subject) owns the call: its share of the table is bounded.
        let owner: Vec<&str> = binding.iter().take(2).map(String::as_str).collect();
        let owner = owner.join("\u{0}");
        let token = inner.parked.park(self, &owner, left)?;
        #[cfg(feature = "redis")]
        if let Some(bus) = &inner.bus {
            // The retry may reach another node, which passes it on over the bus.
            bus.ensure_listening(&inner);
        }
        let ttl = left.as_secs().max(1);
        let binding = as_strs(&binding);
        let state =
            request_state::wrap_parked(&inner.sealer, &binding, &token, inner.pending.node(), ttl);
        let mut result = RawObject::new();
        result.set_str("resultType", "input_required");
        result.set_raw("inputRequests", requests.to_raw());
        result.set_str("requestState", &state);
        Ok(encode_result(&downstream_id, &result.to_raw()))
    }
}

impl ParkedCall {
    /// Why the call could not be parked again: its time is up, or there is no room.
    fn refusal(&self) -> ErrorObject {
        if self.deadline <= std::time::Instant::now() {
            return ErrorObject::invalid_params("Invalid requestState (expired handle)");
        }
        ErrorObject::internal(format!(
            "Backend {} needs input, and the gateway holds too many calls waiting for input",
            self.relay.finish.backend
        ))
    }
}

/// A 2026-07-28 client's retry of a parked call: its `inputResponses` answer the backend's
/// requests, and the rest of the same upstream call is relayed (it may ask for input again). A
/// call parked on another node is resumed there when a node bus is configured (feature `redis`,
/// see `super::forward`).
async fn resume(
    scope: &Scope<'_>,
    inner: &Arc<RouterInner>,
    id: &RequestId,
    parked: super::parked::Resume,
    params: &RawObject<'_>,
) -> Response<McpBody> {
    let client = ClientMeta::of(scope);
    if let Some(response) = resume_here(inner, id, &parked, params, client).await {
        return response;
    }
    #[cfg(feature = "redis")]
    {
        let elsewhere = parked
            .node
            .as_deref()
            .filter(|node| *node != inner.pending.node());
        if let (Some(node), Some(bus)) = (elsewhere, &inner.bus)
            && let Some(response) =
                super::forward::forward(inner, bus, node, &parked, id, params, scope.meta).await
        {
            return response;
        }
    }
    let error = ErrorObject::invalid_params(
        "Invalid requestState (its input round is over: answered already, expired, or held by \
         another gateway node); call again without requestState",
    );
    respond::error(StatusCode::OK, Some(id), &error)
}

/// Resumes the call parked on this node under `parked.token`, if it is here and belongs to
/// `parked.binding`; `None` otherwise.
pub(crate) async fn resume_here(
    inner: &Arc<RouterInner>,
    id: &RequestId,
    parked: &super::parked::Resume,
    params: &RawObject<'_>,
    client: ClientMeta,
) -> Option<Response<McpBody>> {
    let belongs = |call: &ParkedCall| {
        call.relay
            .finish
            .state_binding
            .iter()
            .eq(parked.binding.iter())
    };
    let mut call = inner.parked.take(&parked.token, belongs)?;
    call.relay.downstream_id = id.clone();
    call.relay.log_threshold = client.log_threshold;
    call.relay.progress = match (call.relay.progress.take(), client.progress_token) {
        (Some((upstream, _)), Some(client)) => Some((upstream, client)),
        _ => None,
    };
    let responses = params
        .get("inputResponses")
        .and_then(|r| RawObject::from_raw(r).ok());
    let answers: Option<Vec<(RequestId, Box<RawValue>)>> = call
        .inputs
        .iter()
        .map(|input| {
            let answer = responses.as_ref()?.get(&input.key)?;
            Some((input.upstream_id.clone(), answer.to_owned()))
        })
        .collect();
    let Some(answers) = answers else {
        // Missing inputs get another input_required round, as the revision asks of servers.
        return Some(match call.park() {
            Ok(answer) => respond::json(StatusCode::OK, answer),
            Err(call) => respond::error(StatusCode::OK, Some(id), &call.refusal()),
        });
    };
    for (upstream_id, answer) in answers {
        if let Err(e) = call.relay.answer_upstream(&upstream_id, &answer).await {
            return Some(backend_error(id, &call.relay.finish.backend, &e));
        }
    }
    Some(respond_relay(*call.relay).await)
}

/// The HTTP status of a final JSON answer to a 2026-07-28 client carrying a backend's error
/// `code`: the errors that revision ties to `400 Bad Request` (a backend's header mismatch,
/// missing client capability or unsupported version) keep it through the gateway; everything
/// else is 200.
pub(crate) fn modern_status(code: i64) -> StatusCode {
    match code {
        error_code::HEADER_MISMATCH
        | error_code::MISSING_REQUIRED_CLIENT_CAPABILITY
        | error_code::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// What a relay needs from the client's `_meta` (read once per call).
pub(crate) struct ClientMeta {
    /// The client's progress token, as raw JSON.
    progress_token: Option<Box<RawValue>>,
    /// Which log messages the client gets: a modern client only those its `_meta` `logLevel`
    /// asks for (none without it; an unknown level relays everything rather than guess); a
    /// legacy client's level is its session's business, so everything passes here.
    log_threshold: Option<usize>,
}

impl ClientMeta {
    fn of(scope: &Scope<'_>) -> Self {
        Self::from_meta(scope.era, scope.meta)
    }

    /// From a request's `_meta` (a client of `era`).
    pub(crate) fn from_meta(era: Era, meta: Option<&RawValue>) -> Self {
        let meta = meta.and_then(|m| RawObject::from_raw(m).ok());
        let log_threshold = match (era, &meta) {
            (Era::Legacy, _) => Some(0),
            (Era::Modern, meta) => meta
                .as_ref()
                .and_then(|m| m.get_str(log_level::META_KEY))
                .map(|level| log_level::severity(&level).unwrap_or(0)),
        };
        Self {
            progress_token: meta.and_then(|m| m.get(PROGRESS_TOKEN).map(|t| t.to_owned())),
            log_threshold,
        }
    }
}

fn backend_error(id: &RequestId, backend: &str, e: &UpstreamError) -> Response<McpBody> {
    tracing::info!(backend, error = %e, "routed call failed");
    let error = ErrorObject::internal(format!("Backend {backend} failed: {e}"));
    respond::error(StatusCode::OK, Some(id), &error)
}

fn stream_body(
    first: Vec<u8>,
    relay: Relay,
    slot: Option<crate::principal_slots::Slot>,
) -> McpBody {
    let Some(session) = relay.downstream_session.clone() else {
        // 2026-07-28: no event ids, and closing the stream cancels the call (the relay is
        // dropped with the body).
        let first = futures_util::stream::once(async move { event(&first, None) });
        let rest = futures_util::stream::unfold(relay, |mut relay| async move {
            match relay.next().await? {
                Relayed::Notification(bytes) | Relayed::Final(bytes) => {
                    Some((event(&bytes, None), relay))
                }
            }
        });
        return body::streaming(first.chain(rest));
    };
    // A 2025 session: every event gets a gateway id and is kept for resumption, and a
    // disconnect is not a cancellation (2025 transport), so the call is relayed to its end in the
    // background, recording what the client misses until it resumes with `Last-Event-ID`.
    relay.inner.ensure_sweeping();
    let principal = relay.target.caller.principal.clone();
    let stream = relay.inner.replay.open_post_stream(&principal, &session);
    // 2025-11-25: the priming event takes the stream's first id before any message does, so a
    // client whose connection breaks before the first message still resumes from the start.
    let priming = relay.primes.then(|| {
        let id = relay.inner.replay.next_id(&principal, &session, &stream);
        Bytes::from(format!("id: {id}\ndata: \n\n"))
    });
    let ids = EventIds {
        inner: Arc::clone(&relay.inner),
        principal,
        session,
        stream,
    };
    let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        // Held until the call's relay ends.
        let _slot = slot;
        let mut relay = relay;
        let mut sender = Some(sender);
        let mut next = Some(first);
        loop {
            let bytes = match next.take() {
                Some(bytes) => bytes,
                None => match relay.next().await {
                    Some(Relayed::Notification(bytes) | Relayed::Final(bytes)) => bytes,
                    None => break,
                },
            };
            let chunk = event(&bytes, Some(&ids));
            if let Some(live) = &sender
                && live.send(chunk).await.is_err()
            {
                sender = None;
            }
        }
    });
    let live = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    body::streaming(futures_util::stream::iter(priming).chain(live))
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
async fn decline(
    inner: &RouterInner,
    target: &OwnedTarget,
    back: Back<'_>,
    id: RequestId,
    reason: &str,
) {
    let message = encode_error(Some(&id), &ErrorObject::method_not_found(reason));
    if let Some(link) = back.link {
        link.send(message);
        return;
    }
    let Some(session) = back.session else {
        return;
    };
    if let Err(e) = inner
        .upstream
        .post_to_session(&target.target(), session, message)
        .await
    {
        tracing::debug!(backend = %target.name, error = %e, "could not decline a backend request");
    }
}

/// Where a 2025 session's POST stream records its events for replay.
struct EventIds {
    inner: Arc<RouterInner>,
    principal: mcp_core::Principal,
    session: String,
    stream: String,
}

/// One SSE event; with an id (recorded for replay) on a 2025 session's stream.
fn event(message: &[u8], ids: Option<&EventIds>) -> Bytes {
    let event = SseEvent::message(String::from_utf8_lossy(message));
    match ids {
        Some(ids) => {
            let id = ids.inner.replay.record(
                &ids.principal,
                &ids.session,
                &ids.stream,
                Bytes::copy_from_slice(message),
            );
            event.with_id(id).encode()
        }
        None => event.encode(),
    }
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
            self.inner.inflight.remove(&key);
        }
        if !self.answered && self.finish.era == Era::Modern {
            self.cancel_upstream(
                "cancelled by the gateway: its client went away or the call timed out",
            );
        }
    }
}

impl Relay {
    /// Tells a legacy backend that the call is cancelled (`notifications/cancelled` in its
    /// session, in the background); a modern backend learns it from the closed stream.
    fn cancel_upstream(&mut self, reason: &str) {
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
        let inner = Arc::clone(&self.inner);
        let target = self.target.clone();
        runtime.spawn(async move {
            if let Err(e) = inner.upstream.post_to_session(&target.target(), &session, message).await {
                tracing::debug!(backend = %target.name, error = %e, "could not cancel a backend call");
            }
        });
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

    /// The next message for the client; `None` after the final one.
    async fn next(&mut self) -> Option<Relayed> {
        if self.done {
            return None;
        }
        loop {
            if let Some(bridge) = self.bridge.as_mut() {
                if let Some(request) = bridge.queue.pop_front() {
                    return Some(Relayed::Notification(request));
                }
                if !bridge.awaiting.is_empty() {
                    if let Err(error) = self.retry_with_answers().await {
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
                Some(Err(e)) => return Some(self.fail(&e)),
                None => return Some(self.fail(&UpstreamError::ended(self.saw_invalid))),
            };
            // Parsed once here; the steps below read the envelope.
            let env = Envelope::parse(&message).ok();
            self.saw_invalid |= env.is_none();
            match classify(env.as_ref(), &self.upstream_id) {
                Incoming::Final => {
                    if self.bridge_input_required(env.as_ref()) {
                        continue;
                    }
                    self.done = true;
                    self.answered = true;
                    let Some(post) = self.post.take() else {
                        return Some(Relayed::Final(self.finish(env.as_ref())));
                    };
                    drop(env);
                    let checked = post.apply(&self.upstream_id, message).await;
                    return Some(Relayed::Final(match checked {
                        Ok(message) => self.finish(Envelope::parse(&message).ok().as_ref()),
                        Err(error) => encode_error(Some(&self.downstream_id), &error),
                    }));
                }
                Incoming::ServerRequest(id) => {
                    if let Some(request) = self.relay_request(&message, id.clone()) {
                        return Some(Relayed::Notification(request));
                    }
                    if let Some(input_required) = self.park(&message, &id) {
                        return Some(Relayed::Final(input_required));
                    }
                    let method = env.as_ref().and_then(Envelope::method).unwrap_or("");
                    if let (Some(link), "ping") = (&self.link, method) {
                        // Only whether the link is alive is asked, and it is (as the link
                        // answers a ping of no call).
                        link.send(encode_result(
                            &id,
                            &RawValue::from_string("{}".into())
                                .unwrap_or_else(|_| RawValue::NULL.to_owned()),
                        ));
                        continue;
                    }
                    let reason = self.decline_reason(method);
                    let back = Back {
                        session: self.session.as_deref(),
                        link: self.link.as_ref(),
                    };
                    decline(&self.inner, &self.target, back, id, &reason).await;
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
        self.done = true;
        tracing::info!(backend = %self.finish.backend, error = %e, "routed call failed mid-stream");
        let error = ErrorObject::internal(format!("Backend {} failed: {e}", self.finish.backend));
        Relayed::Final(encode_error(Some(&self.downstream_id), &error))
    }

    /// When bridging and the backend answered `input_required`: queues the input requests for the
    /// client and returns `true` (the call goes on); otherwise `false`.
    fn bridge_input_required(&mut self, env: Option<&Envelope<'_>>) -> bool {
        let Some(session) = self.downstream_session.clone() else {
            return false;
        };
        let Some(bridge) = self.bridge.as_mut() else {
            return false;
        };
        let Some(result) = env
            .and_then(Envelope::result)
            .and_then(|r| RawObject::from_raw(r).ok())
        else {
            return false;
        };
        if result.get_str("resultType").as_deref() != Some("input_required")
            || bridge.rounds >= MAX_BRIDGED_ROUNDS
        {
            return false;
        }
        let requests: Vec<(String, Box<RawValue>)> = result
            .get("inputRequests")
            .and_then(|r| RawObject::from_raw(r).ok())
            .map(|r| {
                r.keys()
                    .filter_map(|k| Some((k.to_owned(), r.get(k)?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        bridge.rounds += 1;
        bridge.request_state = result.get_str("requestState");
        for (key, request) in requests {
            let Ok(request) = RawObject::from_raw(&request) else {
                continue;
            };
            let Some(method) = request.get_str("method") else {
                continue;
            };
            // A full table: the request is not asked now (the retry without its answer makes
            // the backend ask again).
            let Some((id, answer)) = self.inner.pending.register_local(&session) else {
                continue;
            };
            let params = request.get("params").map(|p| p.to_owned());
            let mut out = RawObject::new();
            out.set_str("jsonrpc", "2.0");
            out.set_str("id", &id);
            out.set_str("method", &method);
            if let Some(params) = params {
                out.set_raw("params", params);
            }
            bridge.queue.push_back(out.to_json().into_bytes());
            bridge.awaiting.push((key, answer));
        }
        true
    }

    /// Waits for the client's answers to this round's input requests and retries the backend
    /// with them.
    async fn retry_with_answers(&mut self) -> Result<(), ErrorObject> {
        let Some(bridge) = self.bridge.as_mut() else {
            return Ok(());
        };
        let awaiting = std::mem::take(&mut bridge.awaiting);
        let mut responses = RawObject::new();
        for (key, answer) in awaiting {
            let answer = tokio::time::timeout(BRIDGE_ANSWER_TIMEOUT, answer)
                .await
                .map_err(|_| {
                    ErrorObject::internal("The client did not answer the input request in time")
                })?
                .map_err(|_| ErrorObject::internal("The input request was dropped"))?;
            let answer = RawObject::parse(std::str::from_utf8(&answer).unwrap_or("{}"))
                .map_err(|_| ErrorObject::internal("Invalid answer to an input request"))?;
            match answer.get("result") {
                Some(result) => responses.set_raw(&key, result.to_owned()),
                None => {
                    return Err(ErrorObject::internal(format!(
                        "The client refused the input request `{key}`"
                    )));
                }
            }
        }
        let mut params = bridge.params.clone();
        params.set_raw("inputResponses", responses.to_raw());
        match &bridge.request_state {
            Some(state) => params.set_str("requestState", state),
            None => {
                params.remove("requestState");
            }
        }
        let name = bridge.name.clone();
        let reply = {
            let mut target = self.target.target();
            // The bridge exists for a call sent in 2026-07-28: its retries are sent so too.
            target.era = Era::Modern;
            let call = Call {
                method: self.finish.method.as_str(),
                params,
                name: Some(&name),
                progress_token: self.progress.as_ref().map(|(t, _)| t.as_str()),
                hints: ToolHints::NONE,
                headers: None,
            };
            self.inner.upstream.send(&target, &call).await
        };
        let reply = reply.map_err(|e| {
            ErrorObject::internal(format!("Backend {} failed: {e}", self.finish.backend))
        })?;
        self.upstream_id = reply.id;
        self.messages = reply.messages;
        self.session = reply.session;
        self.link = reply.link;
        Ok(())
    }

    /// Parks the call when a 2025 backend asks a 2026-07-28 client for input it declared it can
    /// give, and returns the client's `input_required` answer; `None` when the request must be
    /// declined instead.
    fn park(&mut self, message: &Bytes, id: &RequestId) -> Option<Vec<u8>> {
        if self.finish.era != Era::Modern
            || (self.session.is_none() && self.link.is_none())
            || !matches!(
                self.finish.method,
                Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead
            )
        {
            return None;
        }
        let env = Envelope::parse(message).ok()?;
        let method = env.method()?;
        let capability = input_capability(method)?;
        if !self.client_declares(capability) {
            return None;
        }
        let mut request = RawObject::new();
        request.set_str("method", method);
        if let Some(params) = env.params() {
            request.set_borrowed("params", params);
        }
        let input = Input {
            key: capability.to_owned(),
            upstream_id: id.clone(),
            request: request.to_raw(),
        };
        let lifetime = self.inner.request_state_ttl_secs.clamp(1, MAX_PARKED_SECS);
        let call = ParkedCall {
            relay: Box::new(self.detach()),
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(lifetime),
            inputs: vec![input],
        };
        match call.park() {
            Ok(input_required) => Some(input_required),
            Err(call) => {
                tracing::warn!(backend = %self.finish.backend, "too many calls wait for input: declining a backend request");
                *self = *call.relay;
                None
            }
        }
    }

    /// Moves the live upstream call out into a new relay, leaving this one finished (its drop
    /// then neither cancels nor answers anything).
    fn detach(&mut self) -> Relay {
        let relay = Relay {
            inner: Arc::clone(&self.inner),
            downstream_id: self.downstream_id.clone(),
            upstream_id: self.upstream_id.clone(),
            messages: std::mem::replace(
                &mut self.messages,
                Box::pin(futures_util::stream::empty()),
            ),
            session: self.session.take(),
            link: self.link.take(),
            target: self.target.clone(),
            progress: self.progress.take(),
            log_threshold: self.log_threshold,
            finish: self.finish.clone(),
            done: false,
            answered: false,
            downstream_session: self.downstream_session.take(),
            primes: self.primes,
            cancel: self.cancel.take(),
            inflight_key: self.inflight_key.take(),
            bridge: self.bridge.take(),
            post: self.post.take(),
            final_status: StatusCode::OK,
            saw_invalid: self.saw_invalid,
        };
        self.done = true;
        self.answered = true;
        relay
    }

    /// Answers the backend's request `upstream_id` in its session.
    async fn answer_upstream(
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
        self.inner
            .upstream
            .post_to_session(&self.target.target(), session, message)
            .await
    }

    /// A backend request for a 2025 client, under a gateway id the client answers with (see
    /// [`crate::pending`]); `None` when the client cannot be asked (a 2026-07-28 client, a
    /// backend without an upstream session or link, or a link's request for a capability this
    /// client did not declare).
    fn relay_request(&self, message: &Bytes, upstream_id: RequestId) -> Option<Vec<u8>> {
        let downstream = self.downstream_session.as_deref()?;
        let mut request = RawObject::parse(std::str::from_utf8(message).ok()?).ok()?;
        match (&self.session, &self.link) {
            (Some(session), _) => self.inner.pending.relay(
                downstream,
                &self.finish.backend,
                upstream_id,
                Arc::clone(session),
                &mut request,
            ),
            (None, Some(link)) => {
                // The link declared every relayed capability for all its callers (see
                // `upstream::link`): whether this client can be asked is decided here.
                let method = request.get_str("method")?;
                if method != "ping"
                    && !input_capability(&method).is_some_and(|c| self.client_declares(c))
                {
                    return None;
                }
                // The answer comes back to this node's table (or over the node bus to it): the
                // link lives here.
                let answer = self
                    .inner
                    .pending
                    .relay_link(downstream, link, &mut request)?;
                forward_answer(link.clone(), upstream_id, answer, self.inner.pending.ttl());
            }
            (None, None) => return None,
        }
        Some(request.to_json().into_bytes())
    }

    /// Whether this call's client declared `capability`.
    fn client_declares(&self, capability: &str) -> bool {
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
            self.final_status = modern_status(error.code);
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
                        &self.inner.sealer,
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
                &self.inner.sealer,
                &as_strs(&self.finish.state_binding),
                &state,
                self.inner.request_state_ttl_secs,
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

/// A binding kept as owned strings, as the sealer takes it.
fn as_strs(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}
