//! `notifications/tasks` on `subscriptions/listen` streams (tasks extension), which rmcp 3.11 does
//! not route yet (its `SubscriptionFilter` has no `taskIds`, and its subscription sink refuses task
//! notifications). A backend with [`BackendSpec::tasks`] serves a listen whose filter names
//! `taskIds` itself, for those tasks only: the acknowledgement echoes the ids it knows (its other
//! filter members are neither honoured nor acknowledged, as a server may honour a subset), then
//! every change of a named task's status (or status message) is sent as `notifications/tasks`
//! carrying the full `DetailedTask`, tagged with the listen's subscription id. The server watches
//! its own task store every [`POLL_INTERVAL_MS`](super::server::tasks::POLL_INTERVAL_MS); the
//! stream lasts until the client closes it or the backend stops.
//!
//! [`BackendSpec::tasks`]: crate::BackendSpec::tasks

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::server::Shared;
use crate::server::tasks::POLL_INTERVAL_MS;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The listen request's id and the task ids it names, when `body` is a `subscriptions/listen`
/// naming `taskIds`.
pub(crate) fn task_listen(body: &[u8]) -> Option<(Value, Vec<String>)> {
    let message: Value = serde_json::from_slice(body).ok()?;
    if message["method"] != "subscriptions/listen" {
        return None;
    }
    let ids: Vec<String> = message["params"]["notifications"]["taskIds"]
        .as_array()?
        .iter()
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect();
    Some((message.get("id")?.clone(), ids))
}

/// The listen's SSE response: the acknowledgement, then the named tasks' changes.
pub(crate) fn serve(
    shared: &Arc<Shared>,
    id: Value,
    ids: Vec<String>,
) -> Response<BoxBody<Bytes, Infallible>> {
    let known: Vec<String> = ids
        .into_iter()
        .filter(|task| shared.tasks.manager().get_task(task).is_ok())
        .collect();
    // The state each task is in now, before the response goes out: any change after the client
    // has the response head is sent.
    let mut seen: HashMap<String, Value> = HashMap::new();
    for task in &known {
        if let Ok(detailed) = shared.tasks.manager().get_task(task) {
            seen.insert(task.clone(), status_of(&detailed));
        }
    }
    let (sender, receiver) = mpsc::channel::<Bytes>(16);
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut filter = json!({});
        if !known.is_empty() {
            filter["taskIds"] = json!(known);
        }
        let ack = notification(
            "notifications/subscriptions/acknowledged",
            json!({ "notifications": filter }),
            &id,
        );
        if sender.send(ack).await.is_err() {
            return;
        }
        while !sender.is_closed() {
            tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
            for task in &known {
                let Ok(detailed) = shared.tasks.manager().get_task(task) else {
                    continue;
                };
                let status = status_of(&detailed);
                if seen.get(task) == Some(&status) {
                    continue;
                }
                seen.insert(task.clone(), status);
                let params = serde_json::to_value(&detailed).unwrap_or_default();
                let message = notification("notifications/tasks", params, &id);
                if sender.send(message).await.is_err() {
                    return;
                }
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "text/event-stream")
        .header(http::header::CACHE_CONTROL, "no-cache")
        .body(ChannelBody(receiver).boxed())
        .expect("static response parts are valid")
}

/// What a change notification is about: the status and its message.
fn status_of(task: &rmcp::model::DetailedTask) -> Value {
    let value = serde_json::to_value(task).unwrap_or_default();
    json!([value["status"], value["statusMessage"]])
}

/// One SSE event carrying a notification tagged with the subscription id.
fn notification(method: &str, mut params: Value, subscription: &Value) -> Bytes {
    params["_meta"] = json!({ SUBSCRIPTION_ID: subscription });
    let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// An SSE body fed by a channel; dropping it (the client went away) closes the channel.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}
