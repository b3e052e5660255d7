//! The stateless engine for 2026-07-28 clients: each request validated (standard headers
//! against the body, required `_meta`), its operation run, its answer rendered.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use http::request::Parts;
use http::{Response, StatusCode};
use mcp_core::sse::SseEvent;
use mcp_core::{
    Envelope, Era, ErrorObject, Method, MethodKind, RawObject, RequestId, encode_result,
};

use super::answer::{self, modern_status};
use super::{Front, respond, validate};
use crate::body::{self, McpBody};
use crate::context;
use crate::ops::scope::Scope;
use crate::ops::{call, discover, list, listen};

/// Serves one modern request (`env` is a request, not a notification).
pub(crate) async fn serve(
    front: &Arc<Front>,
    parts: &Parts,
    env: &Envelope<'_>,
    id: &RequestId,
) -> Response<McpBody> {
    let request = match validate::validate(&parts.headers, env) {
        Ok(request) => request,
        Err((status, error)) => return respond::error(status, Some(id), &error),
    };
    let ctx = match context::extract(&parts.extensions, Era::Modern) {
        Ok(ctx) => ctx,
        Err(error) => return respond::error(StatusCode::BAD_REQUEST, Some(id), &error),
    };
    let scope = Scope {
        ops: &front.ops,
        ctx: &ctx,
        headers: &parts.headers,
        client_caps: request.client_caps,
        meta: Some(request.meta),
        client_meta: Some(&request.client),
        era: Era::Modern,
        session_id: None,
    };
    let method = request.method;
    match method.kind() {
        MethodKind::Lifecycle if method == Method::ServerDiscover => {
            let result = discover::discover(&scope).await;
            respond::json(StatusCode::OK, encode_result(id, &result.to_raw()))
        }
        MethodKind::List => match list::list(&scope, method, &request.params).await {
            Ok(result) => respond::json(StatusCode::OK, encode_result(id, &result.to_raw())),
            Err(error) => respond::error(StatusCode::OK, Some(id), &error),
        },
        MethodKind::Targeted
            if matches!(
                method,
                Method::ToolsCall
                    | Method::PromptsGet
                    | Method::ResourcesRead
                    | Method::CompletionComplete
                    | Method::TasksGet
                    | Method::TasksUpdate
                    | Method::TasksCancel
            ) =>
        {
            let answer = call::targeted(&scope, id, method, request.params).await;
            answer::render(front, id, answer, Era::Modern, false).await
        }
        MethodKind::Subscription => subscribe(front, &scope, id, &request.params).await,
        _ => respond::error(
            StatusCode::NOT_FOUND,
            Some(id),
            &ErrorObject::method_not_found(method.as_str()),
        ),
    }
}

/// `subscriptions/listen`: the merged notifications of every backend as one SSE stream, which
/// holds one of the principal's notification streams while it is open.
async fn subscribe(
    front: &Front,
    scope: &Scope<'_>,
    id: &RequestId,
    params: &RawObject<'_>,
) -> Response<McpBody> {
    let filter = match listen::filter(scope, params) {
        Ok(filter) => filter,
        Err(error) => return respond::error(modern_status(error.code), Some(id), &error),
    };
    let Ok(slot) = front.streams.take(&scope.ctx.principal) else {
        return respond::too_many_streams(front.streams.slots_share());
    };
    let messages = listen::listen(scope, id, filter).await;
    // At the credentials' expiry, or when the caller's configuration drops the virtual host,
    // the stream ends gracefully: a `complete` result, then the end (the client listens again).
    let expiry = scope.ctx.stream_ends();
    let expired = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&expired);
    let closing = listen::closing(id);
    let last =
        futures_util::stream::once(
            async move { expired.load(Ordering::Acquire).then_some(closing) },
        )
        .filter_map(std::future::ready);
    let events = messages
        .take_until(Box::pin(async move {
            expiry.await;
            flag.store(true, Ordering::Release);
        }))
        .chain(last)
        .map(move |message| {
            // The principal's stream slot is held as long as the stream is.
            let _alive = &slot;
            SseEvent::message(String::from_utf8_lossy(&message)).encode()
        });
    respond::sse(body::streaming(events))
}
