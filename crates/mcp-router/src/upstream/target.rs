//! [`Target`]: one backend as one downstream request reaches it, with its primary address's
//! credential scope digested at most once.

use std::sync::OnceLock;

use http::HeaderMap;
use mcp_config_store::BackendConfig;
use mcp_core::{Era, Principal};
use serde_json::value::RawValue;

use super::{Client, CredentialScope};

/// One backend as seen by one downstream request.
pub(crate) struct Target<'a> {
    /// The backend's configured name (for logs).
    pub(crate) name: &'a str,
    /// Its configuration.
    pub(crate) config: &'a BackendConfig,
    /// The client's request headers (for the header policy and trace context).
    pub(crate) downstream: &'a HeaderMap,
    /// The authenticated caller.
    pub(crate) principal: &'a Principal,
    /// The client's capabilities (raw JSON object).
    pub(crate) client_caps: &'a RawValue,
    /// The client's `_meta` (modern requests).
    pub(crate) meta: Option<&'a RawValue>,
    /// The era the client speaks: a backend that speaks both is talked to in this one.
    pub(crate) era: Era,
    /// The scope of the primary address, digested on first use (see
    /// [`primary_scope`](Self::primary_scope)): one call asks for it several times. Private, so
    /// every target starts empty from [`Target::new`] and no struct update copies a memo made
    /// for another configuration.
    primary: OnceLock<CredentialScope>,
}

impl<'a> Target<'a> {
    /// `name` with `config`, as the caller (`principal`, its request `downstream` headers,
    /// capabilities, `_meta` and era) reaches it.
    pub(crate) fn new(
        name: &'a str,
        config: &'a BackendConfig,
        downstream: &'a HeaderMap,
        principal: &'a Principal,
        client_caps: &'a RawValue,
        meta: Option<&'a RawValue>,
        era: Era,
    ) -> Self {
        Self {
            name,
            config,
            downstream,
            principal,
            client_caps,
            meta,
            era,
            primary: OnceLock::new(),
        }
    }

    /// The scope of the backend's primary address (its URL, or `stdio:` + entry): what its
    /// stack, tool hints and stale answers are keyed by. Computed once per target: it is a
    /// SHA-256 digest, and a routed call needs it for each of those.
    pub(crate) fn primary_scope(&self) -> &CredentialScope {
        self.primary.get_or_init(|| Client::primary_scope(self))
    }

    /// A backend of a downstream 2025 session, for work outside a call of the session's own
    /// (following, releasing or posting into its upstream session): no `_meta`, the 2025 era.
    pub(crate) fn of_session(
        name: &'a str,
        config: &'a BackendConfig,
        downstream: &'a HeaderMap,
        principal: &'a Principal,
        client_caps: &'a RawValue,
    ) -> Self {
        Self::new(
            name,
            config,
            downstream,
            principal,
            client_caps,
            None,
            Era::Legacy,
        )
    }
}
