//! `subscriptions/listen` (2026-07-28): one long-lived stream for the client, fed by every backend.
//!
//! The gateway acknowledges first with the subset it honours: the list-change flags the client
//! asked for, the `resourceSubscriptions` URIs that belong to a configured backend, and the
//! `taskIds` (tasks extension) that are gateway task ids minted for this caller and virtual host
//! whose backend is configured and speaks 2026-07-28. Modern backends get their own
//! `subscriptions/listen` (with their share of the URIs, un-prefixed, and of the task ids, raw);
//! legacy backends are followed through the caller's upstream session: its GET stream for list
//! changes and updates, and `resources/subscribe` for each URI (they have no tasks: the extension
//! is not bridged across eras); a 2025 server behind a link (stdio process, HTTP+SSE connection)
//! the same way through the link: `resources/subscribe` sent on it, its event channel followed. Every message the client gets carries
//! `_meta["io.modelcontextprotocol/subscriptionId"]` = the id of its listen request,
//! `notifications/resources/updated` carries the public URI and `notifications/tasks` the gateway
//! task id the client named (only for the tasks it named: a backend's notification about any
//! other task is dropped). Closing the stream ends everything.
//!
//! Bounds: more than `max_subscriptions` URIs, or more than `max_subscriptions` task ids, in one
//! listen get JSON-RPC error `-32600`; `taskIds` from a client that did not declare the tasks
//! extension get `-32021`; a principal holding `max_streams_per_principal` notification streams
//! (listens and 2025 GET streams) gets `429` with `-32600`.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use mcp_config_store::VirtualHostConfig;
use mcp_core::{
    Envelope, Era, ErrorObject, MessageKind, RawObject, RequestId, encode_notification,
};
use mcp_fallback::ToolHints;
use serde_json::json;

use super::scope::Scope;
use super::task_id::{self, TASKS_EXTENSION};
use crate::naming::{Namer, Resolution};
use crate::upstream::Call;
use mcp_core::ItemKind;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The longest resource URI a subscription names (a 2025 session keeps its subscriptions in its
/// record for its whole life; real URIs are far shorter).
pub(crate) const MAX_SUBSCRIPTION_URI_BYTES: usize = 4096;

/// Refuses a subscription to a URI longer than [`MAX_SUBSCRIPTION_URI_BYTES`].
pub(crate) fn check_subscription_uri(uri: &str) -> Result<(), ErrorObject> {
    if uri.len() > MAX_SUBSCRIPTION_URI_BYTES {
        return Err(ErrorObject::invalid_params(format!(
            "Resource URI too long to subscribe to: {} bytes, at most {MAX_SUBSCRIPTION_URI_BYTES}",
            uri.len()
        )));
    }
    Ok(())
}
const LIST_FLAGS: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
    (
        "resourcesListChanged",
        "notifications/resources/list_changed",
    ),
];

/// What the client asked for, split per backend.
pub(crate) struct Filter {
    /// The list-change flags asked for (by filter key).
    flags: Vec<&'static str>,
    /// Public URIs honoured.
    uris: Vec<String>,
    /// backend -> its upstream URIs.
    per_backend: BTreeMap<String, Vec<String>>,
    /// Gateway task ids honoured, in the client's order.
    task_ids: Vec<String>,
    /// backend -> the tasks watched there.
    tasks: BTreeMap<String, Vec<Watched>>,
}

/// A task a listen watches.
struct Watched {
    /// The backend's own id.
    raw: String,
    /// The gateway task id the client named it by.
    public: String,
    /// A plugin post hook governs the call that created the task: its `result` reaches the client
    /// only through `tasks/get`, where the hook runs, never unfiltered in a notification.
    withhold_result: bool,
}

/// What the client's `subscriptions/listen` asks for, checked against the bounds and split per
/// backend.
pub(crate) fn filter(scope: &Scope<'_>, params: &RawObject<'_>) -> Result<Filter, ErrorObject> {
    let asked = params
        .get("notifications")
        .and_then(|n| RawObject::from_raw(n).ok())
        .unwrap_or_default();
    let requested = asked
        .get_as::<Vec<String>>("resourceSubscriptions")
        .unwrap_or_default();
    let max = scope.ops.max_subscriptions;
    if requested.len() > max {
        return Err(ErrorObject::invalid_request(format!(
            "Too many resource subscriptions: {} in one subscriptions/listen, at most {max}",
            requested.len()
        )));
    }
    for uri in &requested {
        check_subscription_uri(uri)?;
    }
    let task_ids = asked.get_as::<Vec<String>>("taskIds").unwrap_or_default();
    if task_ids.len() > max {
        return Err(ErrorObject::invalid_request(format!(
            "Too many task ids: {} in one subscriptions/listen, at most {max}",
            task_ids.len()
        )));
    }
    if !task_ids.is_empty() && !declares_tasks(scope) {
        return Err(ErrorObject::missing_required_client_capability(
            &json!({ "extensions": { TASKS_EXTENSION: {} } }),
        ));
    }
    let (task_ids, tasks) = tasks_of(scope, task_ids);
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
        task_ids,
        tasks,
    })
}

/// Whether the client declared the tasks extension (task notifications need it, as every task
/// request does).
fn declares_tasks(scope: &Scope<'_>) -> bool {
    RawObject::from_raw(scope.client_caps)
        .ok()
        .and_then(|caps| caps.get("extensions").map(|e| e.get().to_owned()))
        .and_then(|extensions| {
            RawObject::parse(&extensions)
                .ok()
                .map(RawObject::into_owned)
        })
        .is_some_and(|extensions| extensions.contains(TASKS_EXTENSION))
}

/// The task ids honoured and their split per backend: a gateway task id minted for this caller and
/// virtual host (anything else, a raw or foreign id included, is simply not honoured, as an
/// unknown URI is not) whose backend is still configured. Duplicates count once.
fn tasks_of(
    scope: &Scope<'_>,
    requested: Vec<String>,
) -> (Vec<String>, BTreeMap<String, Vec<Watched>>) {
    let binding = scope.binding(&[]);
    let mut honoured = Vec::new();
    let mut per_backend: BTreeMap<String, Vec<Watched>> = BTreeMap::new();
    for public in requested {
        if honoured.contains(&public) {
            continue;
        }
        let Ok(task) = task_id::open(&scope.ops.sealer, &binding, &public) else {
            continue;
        };
        if !scope.ctx.vhost.backends.contains_key(&task.backend) {
            continue;
        }
        // A failed plugin runtime counts as governed: fail closed, as `tasks/get` does.
        let withhold_result = !matches!(
            crate::ops::plugins::task_post(scope, &task.origin, &task.backend),
            Ok(None)
        );
        per_backend.entry(task.backend).or_default().push(Watched {
            raw: task.raw,
            public: public.clone(),
            withhold_result,
        });
        honoured.push(public);
    }
    (honoured, per_backend)
}

/// One backend's notifications, tagged with the backend's name.
type Feed = BoxStream<'static, (String, Bytes)>;

/// The messages for the client's `subscriptions/listen` `id`: the acknowledgement first, then
/// every backend's notifications as they come, tagged with the subscription id.
pub(crate) async fn listen(
    scope: &Scope<'_>,
    id: &RequestId,
    filter: Filter,
) -> BoxStream<'static, Vec<u8>> {
    let mut feeds: Vec<Feed> = Vec::new();
    let mut tasks = filter.tasks;
    for (name, config) in &scope.ctx.vhost.backends {
        let uris = filter.per_backend.get(name).cloned().unwrap_or_default();
        let asked = Asked {
            flags: &filter.flags,
            uris,
            tasks: tasks
                .get(name)
                .map(|t| t.iter().map(|w| w.raw.clone()).collect())
                .unwrap_or_default(),
        };
        match backend_feed(scope, name, config, asked).await {
            Some((feed, era)) => {
                if era == Era::Legacy {
                    // No tasks on a 2025 backend: nothing would ever come for these ids.
                    tasks.remove(name);
                }
                feeds.push(feed);
            }
            None => {
                tasks.remove(name);
            }
        }
    }
    let task_ids: Vec<&String> = filter
        .task_ids
        .iter()
        .filter(|public| {
            tasks
                .values()
                .any(|t| t.iter().any(|w| w.public == **public))
        })
        .collect();
    let mut honoured = serde_json::Map::new();
    for flag in &filter.flags {
        honoured.insert((*flag).to_owned(), json!(true));
    }
    if !filter.uris.is_empty() {
        honoured.insert("resourceSubscriptions".to_owned(), json!(filter.uris));
    }
    if !task_ids.is_empty() {
        honoured.insert("taskIds".to_owned(), json!(task_ids));
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
    let subscribed = Subscribed {
        uris: filter.per_backend,
        tasks,
    };
    let live = futures_util::stream::select_all(feeds).filter_map(move |(backend, message)| {
        let out = translate(
            &vhost,
            &wanted,
            &subscribed,
            &subscription,
            &backend,
            &message,
        );
        async move { out }
    });
    futures_util::stream::once(async move { ack })
        .chain(live)
        .boxed()
}

/// What one backend's listen asks for.
struct Asked<'f> {
    flags: &'f [&'static str],
    /// Upstream URIs.
    uris: Vec<String>,
    /// Raw task ids.
    tasks: Vec<String>,
}

/// What the client's listen was acknowledged for, per backend.
struct Subscribed {
    /// backend -> its upstream URIs.
    uris: BTreeMap<String, Vec<String>>,
    /// backend -> the tasks watched there.
    tasks: BTreeMap<String, Vec<Watched>>,
}

/// A `subscriptions/listen` to a backend for the list-change `flags`, the resource `uris`
/// (upstream URIs; none: no resource subscription) and the `tasks` (raw task ids; none: no task
/// notifications).
pub(crate) fn listen_call(flags: &[&str], uris: &[String], tasks: &[String]) -> Call<'static> {
    let mut notifications = RawObject::new();
    for flag in flags {
        notifications.set_json(flag, &true);
    }
    if !uris.is_empty() {
        notifications.set_json("resourceSubscriptions", &uris);
    }
    if !tasks.is_empty() {
        notifications.set_json("taskIds", &tasks);
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

/// The notifications of one backend for this subscription, and the backend's era; `None` when
/// it offers nothing.
async fn backend_feed(
    scope: &Scope<'_>,
    name: &str,
    config: &mcp_config_store::BackendConfig,
    asked: Asked<'_>,
) -> Option<(Feed, Era)> {
    let Asked { flags, uris, tasks } = asked;
    let target = scope.target(name, config);
    let backend = name.to_owned();
    if scope.ops.upstream.is_linked(&target) {
        // A stdio process or HTTP+SSE connection serving a 2025 server: it takes
        // `resources/subscribe` itself, and its updates and list changes arrive on the link's
        // event channel (the caller's own link, or a shared process whose events this listen
        // sees only for the URIs it was acknowledged for, see `translate`).
        if let Some(link) = scope.ops.upstream.link_events(&target).await
            && link.era == Era::Legacy
        {
            subscribe_each(scope, name, config, &target, &uris).await;
            return Some((broadcast_feed(backend, (), link.events), Era::Legacy));
        }
    }
    let description = scope.ops.upstream.describe(&target).await.ok()?;
    match description.era {
        Era::Modern => {
            let call = listen_call(flags, &uris, &tasks);
            let reply = scope.ops.upstream.send(&target, &call).await.ok()?;
            Some((
                reply
                    .messages
                    .filter_map(move |m| {
                        let backend = backend.clone();
                        async move { m.ok().map(|m| (backend, m)) }
                    })
                    .boxed(),
                Era::Modern,
            ))
        }
        Era::Legacy => {
            let url = description.session.as_ref().map(|s| s.url.clone())?;
            subscribe_each(scope, name, config, &target, &uris).await;
            let (hub, receiver, _) = scope.ops.upstream.listen(&target, &url).await?;
            Some((broadcast_feed(backend, hub, receiver), Era::Legacy))
        }
    }
}

/// `resources/subscribe` for each of `uris` (upstream URIs) at a 2025 backend; a failure only
/// means no updates come for that URI.
async fn subscribe_each(
    scope: &Scope<'_>,
    name: &str,
    config: &mcp_config_store::BackendConfig,
    target: &crate::upstream::Target<'_>,
    uris: &[String],
) {
    for uri in uris {
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
        if let Err(e) = crate::ops::scope::final_response(scope, target, &call, deadline).await {
            tracing::debug!(backend = name, reason = %e.reason(), "resources/subscribe failed");
        }
    }
}

/// The messages of a broadcast channel as `backend`'s feed, keeping `keep` (what holds the
/// channel's source open, such as a GET-stream hub) alive as long as the feed is.
fn broadcast_feed<K: Send + 'static>(
    backend: String,
    keep: K,
    receiver: tokio::sync::broadcast::Receiver<Bytes>,
) -> Feed {
    futures_util::stream::unfold((keep, receiver), move |(keep, mut receiver)| {
        let backend = backend.clone();
        async move {
            loop {
                match receiver.recv().await {
                    Ok(message) => return Some(((backend, message), (keep, receiver))),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    })
    .boxed()
}

/// A backend notification as the subscriber sees it; `None` when it was not asked for.
/// `subscribed` holds the honoured upstream URIs and task ids per backend.
fn translate(
    vhost: &VirtualHostConfig,
    wanted: &[&str],
    subscribed: &Subscribed,
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
            .uris
            .get(backend)
            .is_some_and(|uris| uris.contains(&uri))
        {
            return None;
        }
        let public = Namer::new(vhost)
            .public(backend, &uri, ItemKind::Resource)
            .into_owned();
        params.set_str("uri", &public);
    } else if method == "notifications/tasks" {
        // Only the tasks this listen named, under the gateway id the client knows: never a raw
        // backend id, nor news of a task the client did not ask about.
        let raw = params.get_str("taskId")?;
        let watched = subscribed
            .tasks
            .get(backend)?
            .iter()
            .find(|w| w.raw == raw)?;
        params.set_str("taskId", &watched.public);
        if watched.withhold_result {
            params.remove("result");
        } else if let Some(uris) = crate::public_uris::PublicUris::new(Namer::new(vhost), backend) {
            // A finished task's result carries the backend's URIs, as tasks/get's does.
            uris.result(mcp_core::Method::TasksGet, &mut params);
        }
    } else if !wanted.contains(&method) {
        return None;
    }
    params.remove("_meta");
    Some(tagged(method, Some(&params.to_json()), subscription))
}

/// The graceful end of listen request `id`'s stream: a `complete` result carrying the
/// subscription id (the client may listen again).
pub(crate) fn closing(id: &RequestId) -> Vec<u8> {
    let subscription = id.to_json();
    let mut meta = RawObject::new();
    if let Ok(raw) = serde_json::value::RawValue::from_string(subscription.into_owned()) {
        meta.set_raw(SUBSCRIPTION_ID, raw);
    }
    let mut result = RawObject::new();
    result.set_json("resultType", &"complete");
    result.set_raw("_meta", meta.to_raw());
    mcp_core::encode_result(id, &result.to_raw())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_task_notifications_result_carries_public_uris() {
        let vhost: VirtualHostConfig = serde_json::from_value(json!({"backends": {
            "ev": {"url": "http://127.0.0.1:1/mcp"},
            "b": {"url": "http://127.0.0.1:2/mcp"}}}))
        .expect("valid vhost config");
        let watched = |withhold_result| Subscribed {
            uris: BTreeMap::new(),
            tasks: BTreeMap::from([(
                "ev".to_owned(),
                vec![Watched {
                    raw: "t-raw".into(),
                    public: "t-public".into(),
                    withhold_result,
                }],
            )]),
        };
        let message = encode_notification(
            "notifications/tasks",
            Some(
                &RawObject::parse(
                    &json!({"taskId": "t-raw", "status": "completed", "result": {"content": [
                        {"type": "resource_link", "uri": "demo://r/1", "name": "r1"}]}})
                    .to_string(),
                )
                .expect("object")
                .to_raw(),
            ),
        );
        let out = translate(&vhost, &[], &watched(false), "7", "ev", &message)
            .expect("a named task's notification");
        let out: Value = serde_json::from_slice(&out).expect("JSON");
        assert_eq!(out["params"]["taskId"], "t-public", "{out}");
        assert_eq!(
            out["params"]["result"]["content"][0]["uri"], "ev-demo://r/1",
            "{out}"
        );
        let governed = translate(&vhost, &[], &watched(true), "7", "ev", &message)
            .expect("a named task's notification");
        let governed: Value = serde_json::from_slice(&governed).expect("JSON");
        assert!(governed["params"].get("result").is_none(), "{governed}");
    }
}
