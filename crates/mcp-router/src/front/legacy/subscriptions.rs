//! A 2025 session's resource subscriptions: its own list of public URIs (bounded, filtering its
//! GET stream), and where a subscription goes: a 2025 backend behind a link takes it itself, a
//! 2026-07-28 backend is followed through a `subscriptions/listen` of the GET stream.

use mcp_core::{ErrorObject, Method, RawObject};

use crate::front::Front;
use crate::ops::listen::check_subscription_uri;
use crate::ops::scope::Scope;
use crate::session::SessionRecord;

/// Whether the resource `params.uri` names belongs to exactly one backend, a 2026-07-28 one.
pub(super) fn owned_by_modern_backend(
    scope: &Scope<'_>,
    record: &SessionRecord,
    params: &RawObject<'_>,
) -> bool {
    let Some(uri) = params.get_str("uri") else {
        return false;
    };
    match scope.namer().resolve(&uri, mcp_core::ItemKind::Resource) {
        crate::naming::Resolution::One(target) => record
            .backend(target.backend)
            .is_some_and(|b| b.era == Some(crate::session::BackendEra::Modern)),
        _ => false,
    }
}

/// The link of the backend owning the resource `params.uri` names, when that backend is linked (a
/// stdio process or an HTTP+SSE connection).
pub(super) async fn linked_backend(
    scope: &Scope<'_>,
    params: &RawObject<'_>,
) -> Option<crate::upstream::LinkEvents> {
    let uri = params.get_str("uri")?;
    let crate::naming::Resolution::One(owner) =
        scope.namer().resolve(&uri, mcp_core::ItemKind::Resource)
    else {
        return None;
    };
    let config = scope.ctx.vhost.backends.get(owner.backend)?;
    let target = scope.target(owner.backend, config);
    if !scope.ops.upstream.is_linked(&target) {
        return None;
    }
    scope.ops.upstream.link_events(&target).await
}

/// Why a `resources/subscribe` is not kept in the session's record: a URI over the length bound,
/// or a new URI for a session that has `max_subscriptions` already. (A URI no backend owns is
/// not kept either: see [`owned`].)
pub(super) fn refused_subscription(
    front: &Front,
    record: &SessionRecord,
    params: &RawObject<'_>,
) -> Option<ErrorObject> {
    let max = front.ops.max_subscriptions;
    let uri = params.get_str("uri")?;
    if let Err(error) = check_subscription_uri(&uri) {
        return Some(error);
    }
    (record.subscriptions.len() >= max && !record.subscriptions.contains(&uri)).then(|| {
        ErrorObject::invalid_request(format!(
            "Too many resource subscriptions for this session (at most {max})"
        ))
    })
}

/// Whether the resource `params.uri` names belongs to exactly one backend: only such a URI is
/// kept in the session's record (the routed call answers the others with the error naming them).
pub(super) fn owned(scope: &Scope<'_>, params: &RawObject<'_>) -> bool {
    params.get_str("uri").is_some_and(|uri| {
        matches!(
            scope.namer().resolve(&uri, mcp_core::ItemKind::Resource),
            crate::naming::Resolution::One(_)
        )
    })
}

/// Keeps the session's own subscription list (public URIs), which filters its GET stream. The
/// store's refusal of a record grown past its principal's budget is the caller's error (the
/// subscription is then neither kept nor sent upstream); other store failures are logged.
pub(super) async fn track_subscription(
    front: &Front,
    session_id: &str,
    method: Method,
    params: &RawObject<'_>,
) -> Result<(), ErrorObject> {
    let Some(uri) = params.get_str("uri") else {
        return Ok(());
    };
    let Ok(Some(record)) = front.sessions.get(session_id).await else {
        return Ok(());
    };
    let mut updated = (*record).clone();
    updated.subscriptions.retain(|u| *u != uri);
    if method == Method::ResourcesSubscribe {
        updated.subscriptions.push(uri);
    }
    match front.sessions.update(session_id, updated).await {
        Err(e @ crate::session::SessionStoreError::Limit(_)) => Err(ErrorObject::internal(
            format!("Cannot keep the subscription: {}", e.client_message()),
        )),
        Err(e) => {
            tracing::warn!(error = %e, "session store failure while tracking a subscription");
            Ok(())
        }
        Ok(_) => Ok(()),
    }
}
