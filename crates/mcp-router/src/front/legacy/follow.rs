//! A 2025 session's GET stream following its 2026-07-28 backends: 2026-07-28 removed
//! `resources/subscribe` and the GET stream, so the gateway opens one `subscriptions/listen` per
//! modern backend (list changes, and the resources this session subscribed to there) and relays
//! what comes as 2025 notifications. When the session subscribes or unsubscribes (on this node)
//! the listens are opened again with the new URIs; a listen that ends is reopened after a pause.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use mcp_core::{Envelope, MessageKind, RawObject, encode_notification};

use crate::front::Front;
use crate::naming::{Namer, Resolution};
use crate::ops::scope::OwnedCaller;
use crate::session::BackendEra;
use mcp_core::ItemKind;

/// How long a follower waits before reopening listens that ended.
const REOPEN_AFTER: Duration = Duration::from_secs(2);

/// What the follower needs after the GET handler returned.
pub(super) struct Follower {
    pub(super) front: Arc<Front>,
    pub(super) caller: OwnedCaller,
    pub(super) session: String,
}

/// Messages of the session's modern backends as `(backend, message)`, already in 2025 form; an
/// empty stream when the session has no modern backend.
pub(super) fn follow(
    follower: Follower,
    modern: Vec<String>,
) -> BoxStream<'static, (String, Bytes)> {
    if modern.is_empty() {
        return futures_util::stream::empty().boxed();
    }
    let watch = follower.front.subscription_watch(&follower.session);
    let state = (
        follower,
        modern,
        watch,
        None::<BoxStream<'static, (String, Bytes)>>,
    );
    futures_util::stream::unfold(state, |(follower, modern, watch, mut current)| async move {
        loop {
            let changed = watch.notified();
            let feed = match current.as_mut() {
                Some(feed) => feed,
                None => current.insert(open(&follower, &modern).await),
            };
            tokio::select! {
                item = feed.next() => match item {
                    Some(item) => return Some((item, (follower, modern, watch, current))),
                    None => {
                        current = None;
                        tokio::select! {
                            () = tokio::time::sleep(REOPEN_AFTER) => {}
                            () = watch.notified() => {}
                        }
                    }
                },
                () = changed => current = None,
            }
        }
    })
    .boxed()
}

/// One `subscriptions/listen` per modern backend, merged.
async fn open(follower: &Follower, modern: &[String]) -> BoxStream<'static, (String, Bytes)> {
    let subscribed = match follower.front.sessions.get(&follower.session).await {
        Ok(Some(record)) => record.subscriptions.clone(),
        _ => Vec::new(),
    };
    let namer = Namer::new(&follower.caller.vhost);
    let mut feeds = Vec::new();
    for backend in modern {
        // stdio and HTTP+SSE backends are recorded as modern (no upstream session) but have no
        // listen.
        let Some(target) = follower
            .caller
            .target(backend)
            .filter(|t| !follower.front.ops.upstream.is_linked(t))
        else {
            continue;
        };
        let uris: Vec<String> = subscribed
            .iter()
            .filter_map(|public| match namer.resolve(public, ItemKind::Resource) {
                Resolution::One(t) if t.backend == backend => Some(t.upstream.into_owned()),
                _ => None,
            })
            .collect();
        let call = crate::ops::listen::listen_call(
            &[
                "toolsListChanged",
                "promptsListChanged",
                "resourcesListChanged",
            ],
            &uris,
            // 2025 clients are never offered tasks.
            &[],
        );
        match follower.front.ops.upstream.send(&target, &call).await {
            Ok(reply) => {
                let name = backend.clone();
                feeds.push(
                    reply
                        .messages
                        .filter_map(move |m| {
                            let name = name.clone();
                            async move { as_2025(&m.ok()?).map(|m| (name, m)) }
                        })
                        .boxed(),
                );
            }
            Err(e) => {
                tracing::debug!(backend = %backend, error = %e, "cannot follow a modern backend for a 2025 session")
            }
        }
    }
    futures_util::stream::select_all(feeds).boxed()
}

/// A listen notification as a 2025 client knows it (without the subscription id); `None` for the
/// acknowledgement and anything else.
fn as_2025(message: &Bytes) -> Option<Bytes> {
    let env = Envelope::parse(message).ok()?;
    if env.kind() != MessageKind::Notification {
        return None;
    }
    let method = env.method()?;
    if !matches!(
        method,
        "notifications/resources/updated"
            | "notifications/resources/list_changed"
            | "notifications/tools/list_changed"
            | "notifications/prompts/list_changed"
    ) {
        return None;
    }
    let mut params = env
        .params()
        .and_then(|p| RawObject::from_raw(p).ok())
        .unwrap_or_default();
    params.remove("_meta");
    let params = (params.keys().next().is_some()).then(|| params.to_raw());
    Some(Bytes::from(encode_notification(method, params.as_deref())))
}

/// The names of the record's backends that speak 2026-07-28.
pub(super) fn modern_backends(record: &crate::session::SessionRecord) -> Vec<String> {
    record
        .backends
        .iter()
        .filter(|b| b.era == Some(BackendEra::Modern))
        .map(|b| b.name.clone())
        .collect()
}
