//! The stateless engine for 2026-07-28 clients.

mod backchannel;
mod call;
mod discover;
#[cfg(feature = "redis")]
pub(crate) mod forward;
pub(crate) mod list;
pub(crate) mod parked;
mod request_state;
mod subscribe;
pub(crate) mod task_id;
mod validate;

use std::sync::Arc;

use http::request::Parts;
use http::{Response, StatusCode};
use mcp_core::{Envelope, Era, ErrorObject, Method, MethodKind, RequestId, encode_result};

use crate::body::McpBody;
use crate::context;
use crate::respond;
use crate::router::RouterInner;
use crate::scope::Scope;

pub(crate) use call::{MAX_PARKED_PER_CALLER, ParkedCalls, targeted};
pub(crate) use discover::merge_capabilities;
pub(crate) use subscribe::listen_call;

/// Serves one modern request (`env` is a request, not a notification).
pub(crate) async fn serve(
    inner: &Arc<RouterInner>,
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
        inner,
        ctx: &ctx,
        headers: &parts.headers,
        client_caps: request.client_caps,
        meta: Some(request.meta),
        era: Era::Modern,
        session_id: None,
        primes_streams: false,
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
            call::targeted(&scope, inner, id, method, request.params).await
        }
        MethodKind::Subscription => subscribe::listen(&scope, id, &request.params).await,
        _ => respond::error(
            StatusCode::NOT_FOUND,
            Some(id),
            &ErrorObject::method_not_found(method.as_str()),
        ),
    }
}
