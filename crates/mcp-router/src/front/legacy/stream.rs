//! GET on a 2025 session: one SSE stream that merges the GET streams of the caller's upstream
//! sessions with legacy backends.
//!
//! Backend notifications come through (`notifications/*/list_changed`, `notifications/message`,
//! `notifications/progress`), `notifications/resources/updated` with its URI made public (only for
//! URIs this session subscribed to), and backend requests (`roots/list`, `sampling/createMessage`,
//! `elicitation/create`, `ping`) under gateway ids that lead the client's answers back. Every event
//! carries a gateway event id (see [`crate::replay`]); a 2025-11-25 client first gets a priming
//! event, and a GET with `Last-Event-ID` first gets what the named stream missed — this GET stream
//! or a broken POST response stream (the last 128 events per stream). Modern (2026-07-28)
//! backends are followed through `subscriptions/listen` (see [`super::follow`]): their list
//! changes and the updates of resources this session subscribed to arrive here too. Linked
//! backends (stdio processes, HTTP+SSE connections) send their resource updates and list changes
//! on the link, which this stream listens to as well.
//!
//! One principal holds at most `max_streams_per_principal` such streams (with its
//! `subscriptions/listen` streams; more get `429`), and the stream ends when its session does
//! (DELETE, or expiry noticed by the sweep: see [`crate::session_ends`]).

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http::Response;
use http::request::Parts;
use mcp_config_store::VirtualHostConfig;
use mcp_core::sse::SseEvent;
use mcp_core::{Envelope, MessageKind, RawObject, encode_notification};
use serde_json::value::RawValue;

use crate::body::{self, McpBody};
use crate::context::RequestContext;
use crate::front::Front;
use crate::front::respond;
use crate::naming::Namer;
use crate::session::{BackendEra, SessionRecord};
use crate::upstream::{LegacySession, Target};
use mcp_core::ItemKind;

/// One upstream source: the backend's name, its session (none for a link: a stdio process or an
/// HTTP+SSE connection), and the broadcast it listens to.
struct Source {
    backend: String,
    session: Option<Arc<LegacySession>>,
    receiver: tokio::sync::broadcast::Receiver<Bytes>,
    /// Resource updates are not passed on: the source is a process shared by principals and the
    /// session store keeps no subscription lists (`SessionStore::keeps_updates`), so nothing
    /// tells whether this session (or even this tenant) subscribed.
    no_updates: bool,
}

pub(crate) async fn get_stream(
    front: &Arc<Front>,
    parts: &Parts,
    ctx: &RequestContext,
    record: &SessionRecord,
    session_id: &str,
) -> Response<McpBody> {
    let Ok(slot) = front.streams.take(&ctx.principal) else {
        return respond::too_many_streams(front.streams.slots_share());
    };
    front.ensure_sweeping();
    let session_ended = crate::session_ends::ended(front.ends.watch(session_id));
    let stream_ends = ctx.stream_ends();
    // The stream ends with its session, with the credentials it was opened with, or when the
    // caller's configuration drops the virtual host, whichever comes first; the client resumes
    // with `Last-Event-ID` and a fresh token.
    let ended = async move {
        futures_util::future::select(Box::pin(session_ended), Box::pin(stream_ends)).await;
    };
    let caps = RawValue::from_string(record.client_capabilities.clone())
        .unwrap_or_else(|_| RawValue::NULL.to_owned());
    let mut hubs = Vec::new();
    let mut sources = Vec::new();
    for entry in record
        .backends
        .iter()
        .filter(|b| b.era == Some(BackendEra::Legacy))
    {
        let Some(config) = ctx.vhost.backends.get(&entry.name) else {
            continue;
        };
        let Some(url) = super::recorded_url(config, entry.url.as_deref()) else {
            continue;
        };
        let target = Target::of_session(&entry.name, config, &parts.headers, &ctx.principal, &caps);
        // The session may have been created on another node: listen to its upstream session.
        if let (Some(id), Some(version)) = (&entry.upstream_session_id, &entry.version) {
            front.ops.upstream.adopt(&target, &url, id, version);
        }
        if let Some((hub, receiver, session)) = front.ops.upstream.listen(&target, &url).await {
            hubs.push(hub);
            sources.push(Source {
                backend: entry.name.clone(),
                session: Some(session),
                receiver,
                no_updates: false,
            });
        }
    }
    // Linked backends (described like modern ones, never followed through a listen): their
    // link's resource updates and list changes. A per-principal process or a connection is this
    // caller's alone; a shared process's updates reach only sessions that subscribed to the URI
    // (`subscribed`).
    for entry in record
        .backends
        .iter()
        .filter(|b| b.era == Some(BackendEra::Modern))
    {
        let Some(config) = ctx.vhost.backends.get(&entry.name) else {
            continue;
        };
        let target = Target::of_session(&entry.name, config, &parts.headers, &ctx.principal, &caps);
        if !front.ops.upstream.is_linked(&target) {
            continue;
        }
        if let Some(link) = front.ops.upstream.link_events(&target).await {
            sources.push(Source {
                backend: entry.name.clone(),
                session: None,
                receiver: link.events,
                no_updates: link.shared && !front.sessions.keeps_updates(),
            });
        }
    }
    let merged = futures_util::stream::select_all(sources.into_iter().map(|source| {
        Box::pin(futures_util::stream::unfold(source, |mut source| async move {
            loop {
                match source.receiver.recv().await {
                    Ok(message) if source.no_updates && is_update(&message) => {}
                    Ok(message) => {
                        let backend = source.backend.clone();
                        let session = source.session.clone();
                        return Some(((backend, session, message), source));
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(backend = %source.backend, missed, "slow GET stream listener missed messages");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        }))
    }));
    let follower = super::follow::Follower {
        front: Arc::clone(front),
        caller: crate::ops::scope::OwnedCaller {
            vhost: Arc::clone(&ctx.vhost),
            headers: parts.headers.clone(),
            principal: ctx.principal.clone(),
            client_caps: caps.clone(),
            // It follows the backends recorded as 2026-07-28 ones, with `subscriptions/listen`.
            era: mcp_core::Era::Modern,
        },
        session: session_id.to_owned(),
    };
    let modern = super::follow::follow(follower, super::follow::modern_backends(record))
        .map(|(backend, message)| (backend, None, message));
    let merged = futures_util::stream::select(merged, modern);
    let inner_for_stream = Arc::clone(front);
    let vhost = Arc::clone(&ctx.vhost);
    let session = session_id.to_owned();
    let principal = ctx.principal.clone();
    let live = merged.filter_map(move |(backend, upstream_session, message)| {
        let front = Arc::clone(&inner_for_stream);
        let vhost = Arc::clone(&vhost);
        let session = session.clone();
        let principal = principal.clone();
        async move {
            let message = translate(
                &front,
                &vhost,
                &session,
                &backend,
                upstream_session,
                &message,
            )?;
            if !subscribed(&front, &session, &message).await {
                return None;
            }
            let id = front.replay.record(
                &principal,
                &session,
                crate::replay::GET_STREAM,
                Bytes::from(message.clone()),
            );
            // The hubs stay alive as long as this stream does.
            Some(
                SseEvent::message(String::from_utf8_lossy(&message))
                    .with_id(id)
                    .encode(),
            )
        }
    });
    let mut opening: Vec<Bytes> = Vec::new();
    let last_event_id = parts
        .headers
        .get(mcp_core::headers::LAST_EVENT_ID)
        .and_then(|v| v.to_str().ok());
    if let Some(last) = last_event_id {
        // Resumption: first what the named stream (this GET stream or a broken POST stream)
        // missed, then live GET events.
        for (id, message) in front.replay.since(session_id, last) {
            opening.push(
                SseEvent::message(String::from_utf8_lossy(&message))
                    .with_id(id)
                    .encode(),
            );
        }
    } else if super::primes_streams(&record.protocol_version) {
        // 2025-11-25: a priming event (an id, no data) so the client can resume from the start.
        let id = front
            .replay
            .next_id(&ctx.principal, session_id, crate::replay::GET_STREAM);
        opening.push(Bytes::from(format!("id: {id}\ndata: \n\n")));
    }
    let keep = futures_util::stream::iter(opening)
        .chain(live)
        .take_until(Box::pin(ended))
        .map(move |chunk| {
            // The hubs and the principal's stream slot are held as long as the stream is.
            let _alive = (&hubs, &slot);
            chunk
        });
    respond::sse(body::streaming(keep))
}

/// Whether a message may go to this session: a `notifications/resources/updated` only for a URI
/// the session itself subscribed to (the upstream session, and so its GET stream, is shared by
/// the caller's sessions); anything else always.
async fn subscribed(front: &Front, session: &str, message: &[u8]) -> bool {
    let Ok(env) = Envelope::parse(message) else {
        return true;
    };
    if env.method() != Some("notifications/resources/updated") || !front.sessions.keeps_updates() {
        return true;
    }
    let uri = env
        .params()
        .and_then(|p| RawObject::from_raw(p).ok())
        .and_then(|p| p.get_str("uri"));
    match (uri, front.sessions.get(session).await) {
        (Some(uri), Ok(Some(record))) => record.subscriptions.contains(&uri),
        _ => false,
    }
}

fn is_update(message: &[u8]) -> bool {
    Envelope::parse(message)
        .is_ok_and(|env| env.method() == Some("notifications/resources/updated"))
}

/// A backend's GET-stream message as the client sees it; `None` to drop it.
fn translate(
    front: &Front,
    vhost: &VirtualHostConfig,
    session: &str,
    backend: &str,
    upstream_session: Option<Arc<LegacySession>>,
    message: &[u8],
) -> Option<Vec<u8>> {
    let env = Envelope::parse(message).ok()?;
    match env.kind() {
        MessageKind::Request => {
            // Only a legacy backend's own GET stream carries requests.
            let upstream_session = upstream_session?;
            let upstream_id = env.id()?.clone();
            let mut request = RawObject::parse(std::str::from_utf8(message).ok()?).ok()?;
            front.ops.pending.relay(
                session,
                backend,
                upstream_id,
                upstream_session,
                &mut request,
            );
            Some(request.to_json().into_bytes())
        }
        MessageKind::Notification if env.method() == Some("notifications/resources/updated") => {
            let mut params = RawObject::from_raw(env.params()?).ok()?;
            let uri = params.get_str("uri")?;
            let public = Namer::new(vhost)
                .public(backend, &uri, ItemKind::Resource)
                .into_owned();
            params.set_str("uri", &public);
            Some(encode_notification(
                "notifications/resources/updated",
                Some(&params.to_raw()),
            ))
        }
        MessageKind::Notification => Some(message.to_vec()),
        // Responses only appear on resumed POST streams, never here.
        MessageKind::Response | MessageKind::Error => None,
    }
}
