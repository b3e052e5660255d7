//! [`PluginContext`]: what a plugin knows about the call, and [`UpstreamExtras`]: headers and
//! `_meta` entries plugins add to the upstream request.

use http::HeaderMap;
use mcp_core::Principal;
use serde_json::value::RawValue;

use crate::Hook;

/// The call a plugin is asked about. Borrowed from the router's own request state, so building one
/// costs nothing.
///
/// ```
/// use mcp_core::Principal;
/// use mcp_plugins::{Hook, PluginContext};
///
/// let alice = Principal::new("https://issuer.example", "alice");
/// let ctx = PluginContext::new(Hook::ToolPreInvoke, "team-a", "notes", "delete")
///     .with_principal(Some(&alice))
///     .with_public_name("notes-delete");
/// assert_eq!(ctx.principal.map(|p| p.subject()), Some("alice"));
/// assert_eq!((ctx.virtual_host, ctx.backend, ctx.name, ctx.public_name), ("team-a", "notes", "delete", "notes-delete"));
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct PluginContext<'a> {
    /// The hook being run.
    pub hook: Hook,
    /// The authenticated caller, when an authentication layer ran.
    pub principal: Option<&'a Principal>,
    /// The virtual host id.
    pub virtual_host: &'a str,
    /// The backend (as named in the user configuration).
    pub backend: &'a str,
    /// The upstream name: the backend's own tool or prompt name, or resource URI.
    pub name: &'a str,
    /// The name the caller used (prefixed); equals [`name`](Self::name) when not set.
    pub public_name: &'a str,
    /// The request's `params._meta`, verbatim.
    pub meta: Option<&'a RawValue>,
}

impl<'a> PluginContext<'a> {
    /// A context for `hook` on `name` of `backend` in `virtual_host`.
    pub fn new(hook: Hook, virtual_host: &'a str, backend: &'a str, name: &'a str) -> Self {
        Self {
            hook,
            principal: None,
            virtual_host,
            backend,
            name,
            public_name: name,
            meta: None,
        }
    }

    /// Sets the caller.
    #[must_use]
    pub fn with_principal(mut self, principal: Option<&'a Principal>) -> Self {
        self.principal = principal;
        self
    }

    /// Sets the name the caller used.
    #[must_use]
    pub fn with_public_name(mut self, public_name: &'a str) -> Self {
        self.public_name = public_name;
        self
    }

    /// Sets the request's `_meta`.
    #[must_use]
    pub fn with_meta(mut self, meta: Option<&'a RawValue>) -> Self {
        self.meta = meta;
        self
    }

    /// The same call seen from another hook (e.g. the post hook after the pre hook).
    #[must_use]
    pub fn for_hook(mut self, hook: Hook) -> Self {
        self.hook = hook;
        self
    }
}

/// Headers and `_meta` entries that plugins want on the upstream request.
///
/// Empty unless a plugin such as `upstream_headers` added something (an empty `HeaderMap` does not
/// allocate). The router adds the headers to the backend request and merges `meta` into
/// `params._meta` (an entry already sent by the client is replaced).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct UpstreamExtras {
    /// Headers to set on the upstream request (replacing same-named ones).
    pub headers: HeaderMap,
    /// `_meta` entries to set on the upstream request: key and raw JSON value.
    pub meta: Vec<(String, Box<RawValue>)>,
}

impl UpstreamExtras {
    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.meta.is_empty()
    }

    /// The request's `_meta` object (`None`: the request had none) with [`meta`](Self::meta)
    /// merged in. Returns `None` when there is nothing to merge or `meta` is not an object.
    ///
    /// ```
    /// use mcp_plugins::UpstreamExtras;
    /// use serde_json::value::RawValue;
    ///
    /// let mut extras = UpstreamExtras::default();
    /// assert!(extras.merged_meta(None).is_none());
    /// extras.meta.push(("example.com/caller".into(), RawValue::from_string("\"alice\"".into()).unwrap()));
    /// let meta = RawValue::from_string(r#"{"progressToken":1}"#.into()).unwrap();
    /// assert_eq!(
    ///     extras.merged_meta(Some(&meta)).unwrap().get(),
    ///     r#"{"progressToken":1,"example.com/caller":"alice"}"#
    /// );
    /// ```
    pub fn merged_meta(&self, meta: Option<&RawValue>) -> Option<Box<RawValue>> {
        if self.meta.is_empty() {
            return None;
        }
        let mut object = match meta {
            Some(raw) => mcp_core::RawObject::from_raw(raw).ok()?,
            None => mcp_core::RawObject::new(),
        };
        for (key, value) in &self.meta {
            object.set_raw(key, value.clone());
        }
        Some(object.to_raw())
    }

    /// Merges [`meta`](Self::meta) into a `params` object's `_meta` (created when absent).
    /// Returns `None` when there is nothing to merge or `params` is not an object.
    pub fn merge_meta(&self, params: &RawValue) -> Option<Box<RawValue>> {
        if self.meta.is_empty() {
            return None;
        }
        let mut object = mcp_core::RawObject::from_raw(params).ok()?;
        let meta = self.merged_meta(object.get("_meta"))?;
        object.set_raw("_meta", meta);
        Some(object.to_raw())
    }
}
