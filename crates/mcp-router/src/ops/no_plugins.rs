//! The router's plugin hook points without the `plugins` feature: nothing governs a call, no list
//! is filtered. The same items as `plugins` (the module with the feature), so the call sites do
//! not change; the hook types are uninhabited, since no plugin can ever produce one.

use bytes::Bytes;
use http::HeaderMap;
use mcp_core::{ErrorObject, ItemKind, Method, RawObject, RequestId};
use serde_json::value::RawValue;

use crate::ops::scope::Scope;
use crate::ops::task_id::Origin;

/// What the pre hooks left for the rest of the call: never anything without plugins.
#[derive(Default)]
pub(crate) struct Governed {
    /// Headers for the upstream request.
    pub(crate) headers: Option<HeaderMap>,
    /// The request `_meta` with the plugins' entries merged in.
    pub(crate) meta: Option<Box<RawValue>>,
    /// The post hook to run on the result.
    pub(crate) post: Option<PostHook>,
}

/// A post hook: none exists without the `plugins` feature.
pub(crate) enum PostHook {}

impl PostHook {
    pub(crate) async fn apply(
        &self,
        _upstream_id: &RequestId,
        _message: Bytes,
    ) -> Result<Bytes, ErrorObject> {
        match *self {}
    }
}

/// A list-filtering plugin chain: none exists without the `plugins` feature.
pub(crate) enum ListFilter {}

/// No plugin governs a call.
pub(crate) async fn pre(
    _scope: &Scope<'_>,
    _method: Method,
    _backend: &str,
    _upstream: &str,
    _public: &str,
    _params: &mut RawObject<'_>,
) -> Result<Option<Governed>, ErrorObject> {
    Ok(None)
}

/// No plugin governs a task follow-up.
pub(crate) fn task_post(
    _scope: &Scope<'_>,
    _origin: &Origin,
    _backend: &str,
) -> Result<Option<Governed>, ErrorObject> {
    Ok(None)
}

/// No list is filtered.
pub(crate) fn list_filter(
    _scope: &Scope<'_>,
    _kind: ItemKind,
) -> Option<std::sync::Arc<ListFilter>> {
    None
}

pub(crate) fn listed(
    chain: &ListFilter,
    _scope: &Scope<'_>,
    _kind: ItemKind,
    _backend: &str,
    _upstream: &str,
    _public: &str,
) -> bool {
    match *chain {}
}
