//! The replay guard: may a request that failed on one backend be sent to another?
//! [`FailureKind`], [`ToolHints`], [`may_replay`], the [`ReplayPolicy`] trait and its policies.

use mcp_core::RawObject;
use mcp_core::headers::MCP_METHOD;
use serde_json::value::RawValue;

use mcp_core::outcome::FailureKind;

use crate::FailureInfo;

/// The replay-relevant annotations of a tool definition (`annotations.readOnlyHint`,
/// `annotations.idempotentHint`). Both default to `false`, as in the MCP schema.
///
/// Annotations are hints from the backend; the gateway trusts them for replays to *replicas of
/// the same backend* (same tool code, operator-configured), never across backends.
///
/// Also usable as an `http::Request` extension: [`McpReplay`] reads it from there.
///
/// ```
/// use mcp_fallback::ToolHints;
/// use serde_json::value::RawValue;
///
/// let tool = RawValue::from_string(
///     r#"{"name":"get_weather","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}"#.to_owned(),
/// ).unwrap();
/// let hints = ToolHints::from_tool_json(&tool);
/// assert!(hints.read_only && !hints.idempotent);
/// assert!(hints.is_replayable());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ToolHints {
    /// `readOnlyHint`: the tool does not modify its environment.
    pub read_only: bool,
    /// `idempotentHint`: calling it again with the same arguments has no additional effect.
    pub idempotent: bool,
}

impl ToolHints {
    /// No hints: neither read-only nor idempotent (a tool with no annotations).
    pub const NONE: Self = Self {
        read_only: false,
        idempotent: false,
    };

    /// Reads the hints of a tool definition (an element of a `tools/list` result's `tools`).
    /// Anything missing, not a boolean, or not an object counts as `false`.
    pub fn from_tool_json(tool: &RawValue) -> Self {
        RawObject::from_raw(tool)
            .ok()
            .and_then(|obj| obj.get("annotations").map(Self::from_annotations))
            .unwrap_or_default()
    }

    /// Reads the hints of a tool's `annotations` object.
    pub fn from_annotations(annotations: &RawValue) -> Self {
        let Ok(obj) = RawObject::from_raw(annotations) else {
            return Self::NONE;
        };
        let flag = |key: &str| obj.get_as::<bool>(key).unwrap_or(false);
        Self {
            read_only: flag("readOnlyHint"),
            idempotent: flag("idempotentHint"),
        }
    }

    /// Whether a `tools/call` of this tool may be replayed after a [`FailureKind::MaybeReceived`]
    /// failure: read-only or idempotent.
    pub const fn is_replayable(self) -> bool {
        self.read_only || self.idempotent
    }
}

/// The methods that only read, so replaying them after any failure is safe.
///
/// Task follow-ups (`tasks/get`, …) and subscriptions are absent on purpose: they are bound to
/// the backend that created the task or subscription, so another replica cannot answer them.
pub const READ_METHODS: &[&str] = &[
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "server/discover",
    "resources/read",
    "prompts/get",
    "completion/complete",
    "ping",
];

/// Whether `method` is one of the [`READ_METHODS`].
pub fn is_read_method(method: &str) -> bool {
    READ_METHODS.contains(&method)
}

/// The replay rule (book: docs/src/architecture.md): may a request that failed with `failure` be sent to another
/// backend (a replica, an alternate)?
///
/// | method | `NeverSent` | `MaybeReceived` |
/// |---|---|---|
/// | a [read method](READ_METHODS) | yes | yes |
/// | `tools/call`, tool `readOnlyHint` or `idempotentHint` | yes | yes |
/// | `tools/call`, neither hint | yes | **no** |
/// | anything else (unknown, notifications, task follow-ups) | yes | **no** |
///
/// `hints` only matter for `tools/call`.
///
/// ```
/// use mcp_fallback::{FailureKind, ToolHints, may_replay};
///
/// let side_effect = ToolHints::NONE;
/// assert!(may_replay("tools/call", side_effect, FailureKind::NeverSent));
/// assert!(!may_replay("tools/call", side_effect, FailureKind::MaybeReceived));
/// let mut idempotent = ToolHints::NONE;
/// idempotent.idempotent = true;
/// assert!(may_replay("tools/call", idempotent, FailureKind::MaybeReceived));
/// assert!(may_replay("tools/list", side_effect, FailureKind::MaybeReceived));
/// assert!(!may_replay("x-vendor/do", side_effect, FailureKind::MaybeReceived));
/// ```
pub fn may_replay(method: &str, hints: ToolHints, failure: FailureKind) -> bool {
    match failure {
        FailureKind::NeverSent => true,
        FailureKind::MaybeReceived if method == "tools/call" => hints.is_replayable(),
        FailureKind::MaybeReceived => is_read_method(method),
    }
}

/// Decides whether the fallback may send a failed request to the next alternate.
///
/// Asked after every failure (the primary's, then each alternate's) with that failure; the chain
/// of alternates stops at the first "no". So a request that is not safe to replay moves on only
/// while every attempt so far provably never reached its backend.
///
/// Implemented for closures `Fn(&Req, &FailureInfo) -> bool`.
pub trait ReplayPolicy<Req> {
    /// Whether `req`, which just failed with `failure`, may be sent to the next alternate.
    fn may_replay(&self, req: &Req, failure: &FailureInfo) -> bool;
}

impl<F, Req> ReplayPolicy<Req> for F
where
    F: Fn(&Req, &FailureInfo) -> bool,
{
    fn may_replay(&self, req: &Req, failure: &FailureInfo) -> bool {
        self(req, failure)
    }
}

/// The default [`ReplayPolicy`]: replay only after [`FailureKind::NeverSent`] failures. Safe for
/// any request, whatever it does.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverSentOnly;

impl<Req> ReplayPolicy<Req> for NeverSentOnly {
    fn may_replay(&self, _req: &Req, failure: &FailureInfo) -> bool {
        failure.kind == FailureKind::NeverSent
    }
}

/// A request that knows its MCP method and, for `tools/call`, the called tool's hints.
/// Lets [`McpReplay`] apply [`may_replay`] to it.
pub trait McpCall {
    /// The JSON-RPC method, when known (unknown counts as "not a read").
    fn mcp_method(&self) -> Option<&str>;
    /// The hints of the called tool ([`ToolHints::NONE`] when unknown or not a `tools/call`).
    fn tool_hints(&self) -> ToolHints;
}

/// For HTTP requests: the method is the [`mcp_core::Method`] request extension, else the
/// `Mcp-Method` header (2026-07-28); the hints are the [`ToolHints`] request extension (the
/// router inserts it from the tool's definition), else none.
impl<B> McpCall for http::Request<B> {
    fn mcp_method(&self) -> Option<&str> {
        match self.extensions().get::<mcp_core::Method>() {
            Some(method) => Some(method.as_str()),
            None => self.headers().get(MCP_METHOD).and_then(|v| v.to_str().ok()),
        }
    }

    fn tool_hints(&self) -> ToolHints {
        self.extensions()
            .get::<ToolHints>()
            .copied()
            .unwrap_or_default()
    }
}

/// The MCP [`ReplayPolicy`]: [`may_replay`] on the request's [`McpCall`] method and hints.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpReplay;

impl<Req: McpCall> ReplayPolicy<Req> for McpReplay {
    fn may_replay(&self, req: &Req, failure: &FailureInfo) -> bool {
        may_replay(
            req.mcp_method().unwrap_or_default(),
            req.tool_hints(),
            failure.kind,
        )
    }
}
