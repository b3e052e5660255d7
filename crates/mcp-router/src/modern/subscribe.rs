//! `subscriptions/listen` (2026-07-28): one long-lived stream for the client, fed by every backend.
//!
//! The gateway acknowledges first with the subset it honours: the list-change flags the client
//! asked for, and the `resourceSubscriptions` URIs that belong to a configured backend (task ids
//! are not routed yet and never acknowledged). Modern backends get their own `subscriptions/listen`
//! (with their share of the URIs, un-prefixed); legacy backends are followed through the caller's
//! upstream session: its GET stream for list changes and updates, and `resources/subscribe` for
//! each URI. Every message the client gets carries
//! `_meta["io.modelcontextprotocol/subscriptionId"]` = the id of its listen request, and
//! `notifications/resources/updated` carries the public URI. Closing the stream ends everything.
//!
//! Bounds: more than `max_subscriptions` URIs in one listen get JSON-RPC error `-32600`; a
//! principal holding `max_streams_per_principal` notification streams (listens and 2025 GET
//! streams) gets `429` with `-32600`.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{Response, StatusCode};
use mcp_config_store::VirtualHostConfig;
use mcp_core::sse::SseEvent;
use mcp_core::{
    Envelope, Era, ErrorObject, MessageKind, RawObject, RequestId, encode_notification,
};
use mcp_fallback::ToolHints;
use serde_json::json;

use crate::body::{self, McpBody};
use crate::naming::{ItemKind, Namer, Resolution};
use crate::respond;
use crate::scope::Scope;
use crate::upstream::Call;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
const LIST_FLAGS: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
    (
        "resourcesListChanged",
        "notifications/resources/list_changed",
    ),
];

/// What the client asked for, split per backend.
struct Filter {
    /// The list-change flags asked for (by filter key).
    flags: Vec<&'static str>,
    /// Public URIs honoured.
    uris: Vec<String>,
    /// backend -> its upstream URIs.
    per_backend: BTreeMap<String, Vec<String>>,
}

fn filter(scope: &Scope<'_>, params: &RawObject<'_>) -> Result<Filter, ErrorObject> {
    let asked = params
        .get("notifications")
        .and_then(|n| RawObject::from_raw(n).ok())
        .unwrap_or_default();
    let requested = asked
        .get_as::<Vec<String>>("resourceSubscriptions")
        .unwrap_or_default();
    let max = scope.inner.max_subscriptions;
    if requested.len() > max {
        return Err(ErrorObject::invalid_request(format!(
            "Too many resource subscriptions: {} in one subscriptions/listen, at most {max}",
            requested.len()
        )));
    }
    let flags = LIST_FLAGS
        .iter()
        .filter(|(key, _)| asked.get_as::<bool>(key) == Some(true))
        .map(|(key, _)| *key)
        .collect();
    let namer = scope.namer();
    let mut uris = Vec::new();
    let mut per_backend: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for public in requested {
        let target = match namer.resolve(&public, ItemKind::Resource) {
            Resolution::One(t) => Some(t),
            Resolution::Several(mut all) => Some(all.remove(0)),
            Resolution::None => None,
        };
        if let Some(target) = target {
            per_backend
                .entry(target.backend.to_owned())
                .or_default()
                .push(target.upstream.into_owned());
            uris.push(public);
        }
    }
    Ok(Filter {
        flags,
        uris,
        per_backend,
    })
}

/// One backend's notifications, tagged with the backend's name.
type Feed = BoxStream<'static, (String, Bytes)>;

/// Answers `subscriptions/listen` with the merged stream.
pub(crate) async fn listen(
    scope: &Scope<'_>,
    id: &RequestId,
    params: &RawObject<'_>,
) -> Response<McpBody> {
    let filter = match filter(scope, params) {
        Ok(filter) => filter,
        Err(error) => return respond::error(StatusCode::OK, Some(id), &error),
    };
    let Some(slot) = scope.inner.streams.take(&scope.ctx.principal) else {
        return respond::too_many_streams(scope.inner.streams.max());
    };
    let mut feeds: Vec<Feed> = Vec::new();
    for (name, config) in &scope.ctx.vhost.backends {
        let uris = filter.per_backend.get(name).cloned().unwrap_or_default();
        if let Some(feed) = backend_feed(scope, name, config, &filter.flags, uris).await {
            feeds.push(feed);
        }
    }
    let mut honoured = serde_json::Map::new();
    for flag in &filter.flags {
        honoured.insert((*flag).to_owned(), json!(true));
    }
    if !filter.uris.is_empty() {
        honoured.insert("resourceSubscriptions".to_owned(), json!(filter.uris));
    }
    let subscription = id.to_json().into_owned();
    let ack = tagged(
        "notifications/subscriptions/acknowledged",
        Some(&json!({ "notifications": honoured }).to_string()),
        &subscription,
    );
    let wanted: Vec<&'static str> = LIST_FLAGS
        .iter()
        .filter(|(key, _)| filter.flags.contains(key))
        .map(|(_, method)| *method)
        .collect();
    let vhost = Arc::clone(&scope.ctx.vhost);
    let subscribed = filter.per_backend;
    let live = futures_util::stream::select_all(feeds).filter_map(move |(backend, message)| {
        // The principal's stream slot is held as long as the stream is.
        let _alive = &slot;
        let out = translate(
            &vhost,
            &wanted,
            &subscribed,
            &subscription,
            &backend,
            &message,
        );
        async move { out.map(|m| SseEvent::message(String::from_utf8_lossy(&m)).encode()) }
    });
    let first = futures_util::stream::once(async move {
        SseEvent::message(String::from_utf8_lossy(&ack)).encode()
    });
    let mut res = respond::sse(body::streaming(first.chain(live)));
    *res.status_mut() = StatusCode::OK;
    res
}

/// A `subscriptions/listen` to a backend for the list-change `flags` and the resource `uris`
/// (upstream URIs; none: no resource subscription).
pub(crate) fn listen_call(flags: &[&str], uris: &[String]) -> Call<'static> {
    let mut notifications = RawObject::new();
    for flag in flags {
        notifications.set_json(flag, &true);
    }
    if !uris.is_empty() {
        notifications.set_json("resourceSubscriptions", &uris);
    }
    let mut params = RawObject::new();
    params.set_raw("notifications", notifications.to_raw());
    Call {
        method: "subscriptions/listen",
        params,
        name: None,
        progress_token: None,
        hints: ToolHints::NONE,
        headers: None,
    }
}

/// The notifications of one backend for this subscription; `None` when it offers nothing.
async fn backend_feed(
    scope: &Scope<'_>,
    name: &str,
    config: &mcp_config_store::BackendConfig,
    flags: &[&'static str],
    uris: Vec<String>,
) -> Option<Feed> {
    let target = scope.target(name, config);
    let description = scope.inner.upstream.describe(&target).await.ok()?;
    let backend = name.to_owned();
    match description.era {
        Era::Modern => {
            let call = listen_call(flags, &uris);
            let reply = scope.inner.upstream.send(&target, &call).await.ok()?;
            Some(
                reply
                    .messages
                    .filter_map(move |m| {
                        let backend = backend.clone();
                        async move { m.ok().map(|m| (backend, m)) }
                    })
                    .boxed(),
            )
        }
        Era::Legacy => {
            let url = description.session.as_ref().map(|s| s.url.clone())?;
            for uri in &uris {
                let mut params = RawObject::new();
                params.set_str("uri", uri);
                let call = Call {
                    method: "resources/subscribe",
                    params,
                    name: None,
                    progress_token: None,
                    hints: ToolHints::NONE,
                    headers: None,
                };
                let deadline = scope.fanout_deadline(config);
                if let Err(e) = crate::scope::final_response(scope, &target, &call, deadline).await
                {
                    tracing::debug!(backend = name, reason = %e.reason(), "resources/subscribe failed");
                }
            }
            let (hub, receiver, _) = scope.inner.upstream.listen(&target, &url).await?;
            let feed = futures_util::stream::unfold((hub, receiver), move |(hub, mut receiver)| {
                let backend = backend.clone();
                async move {
                    loop {
                        match receiver.recv().await {
                            Ok(message) => return Some(((backend, message), (hub, receiver))),
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                        }
                    }
                }
            });
            Some(feed.boxed())
        }
    }
}

/// A backend notification as the subscriber sees it; `None` when it was not asked for.
/// `subscribed` holds the honoured upstream URIs per backend.
fn translate(
    vhost: &VirtualHostConfig,
    wanted: &[&str],
    subscribed: &BTreeMap<String, Vec<String>>,
    subscription: &str,
    backend: &str,
    message: &[u8],
) -> Option<Vec<u8>> {
    let env = Envelope::parse(message).ok()?;
    if env.kind() != MessageKind::Notification {
        return None;
    }
    let method = env.method()?;
    let mut params = env
        .params()
        .and_then(|p| RawObject::from_raw(p).ok())
        .unwrap_or_default();
    if method == "notifications/resources/updated" {
        let uri = params.get_str("uri")?;
        // Fix: only URIs this subscription was acknowledged for. A legacy backend's GET stream
        // belongs to the caller's shared upstream session, so it also carries updates for URIs
        // that another listen (or a 2025 session) of the same caller subscribed to; relaying
        // those broke "MUST NOT send types the client did not request".
        if !subscribed
            .get(backend)
            .is_some_and(|uris| uris.contains(&uri))
        {
            return None;
        }
        let public = Namer::new(vhost)
            .public(backend, &uri, ItemKind::Resource)
            .into_owned();
        params.set_str("uri", &public);
    } else if !wanted.contains(&method) {
        return None;
    }
    params.remove("_meta");
    Some(tagged(method, Some(&params.to_json()), subscription))
}

/// A notification whose `_meta` carries the subscription id.
fn tagged(method: &str, params: Option<&str>, subscription: &str) -> Vec<u8> {
    let mut obj = params
        .and_then(|p| RawObject::parse(p).ok())
        .map(RawObject::into_owned)
        .unwrap_or_default();
    let mut meta = RawObject::new();
    if let Ok(id) = serde_json::value::RawValue::from_string(subscription.to_owned()) {
        meta.set_raw(SUBSCRIPTION_ID, id);
    }
    obj.set_raw("_meta", meta.to_raw());
    encode_notification(method, Some(&obj.to_raw()))
}
