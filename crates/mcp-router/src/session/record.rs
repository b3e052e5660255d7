//! [`SessionRecord`]: everything a node needs to continue a downstream legacy session.

use mcp_core::{Principal, VirtualHostId};
use serde::{Deserialize, Serialize};

/// The era a backend was found to speak when the session was initialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BackendEra {
    /// 2026-07-28: stateless, no upstream session.
    Modern,
    /// 2025 revisions: an upstream session.
    Legacy,
}

/// One backend of a downstream session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendSession {
    /// The backend's configured name.
    pub name: String,
    /// `None` when the backend failed at initialize (recorded unavailable; retried lazily).
    pub era: Option<BackendEra>,
    /// The backend's `Mcp-Session-Id` (legacy backends that minted one).
    pub upstream_session_id: Option<String>,
    /// The protocol version negotiated with the backend (legacy backends).
    pub version: Option<String>,
    /// The URL the upstream session lives at (the primary or a replica; legacy backends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl BackendSession {
    /// Whether the backend initialised successfully.
    pub fn is_available(&self) -> bool {
        self.era.is_some()
    }
}

/// A downstream legacy session: bound to its principal and virtual host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Token issuer of the principal that created the session.
    pub issuer: String,
    /// Subject of the principal that created the session.
    pub subject: String,
    /// The virtual host the session belongs to.
    pub vhost: String,
    /// The protocol version negotiated with the client.
    pub protocol_version: String,
    /// The client's capabilities, raw JSON.
    pub client_capabilities: String,
    /// The log level the client asked for with `logging/setLevel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// The backends, sorted by name.
    pub backends: Vec<BackendSession>,
    /// The (public) resource URIs the client subscribed to: only their
    /// `notifications/resources/updated` reach this session's GET stream (the upstream sessions
    /// are shared with the caller's other sessions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<String>,
    /// When the session was initialised (Unix time, milliseconds): the node that ends it records
    /// `mcp.server.session.duration` from it. `None` in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at_ms: Option<u64>,
}

impl SessionRecord {
    /// Whether `principal` on `vhost` may use this session (anyone else gets 404).
    pub fn belongs_to(&self, principal: &Principal, vhost: &VirtualHostId) -> bool {
        self.issuer == principal.issuer()
            && self.subject == principal.subject()
            && self.vhost == vhost.as_str()
    }

    /// The entry of one backend.
    pub fn backend(&self, name: &str) -> Option<&BackendSession> {
        self.backends.iter().find(|b| b.name == name)
    }

    /// About what the record weighs in memory, in bytes: its strings and a fixed part for
    /// each value (what a store charges to the principal's budget).
    #[must_use]
    pub fn weight(&self) -> usize {
        const FIXED: usize = 64;
        let text = |s: &str| s.len() + FIXED;
        let maybe = |s: &Option<String>| s.as_deref().map_or(0, text);
        let backends: usize = self
            .backends
            .iter()
            .map(|b| {
                text(&b.name) + maybe(&b.upstream_session_id) + maybe(&b.version) + maybe(&b.url)
            })
            .sum();
        let subscriptions: usize = self.subscriptions.iter().map(|s| text(s)).sum();
        text(&self.issuer)
            + text(&self.subject)
            + text(&self.vhost)
            + text(&self.protocol_version)
            + text(&self.client_capabilities)
            + maybe(&self.log_level)
            + backends
            + subscriptions
    }
}
