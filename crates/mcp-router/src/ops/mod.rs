//! The operations, era-neutral: `server/discover` (and a 2025 `initialize`'s merged
//! capabilities), the four list methods, `subscriptions/listen`, and the routed calls (resolve
//! the public name, relay the backend's answer, bridge input across eras, park a call waiting
//! for a 2026-07-28 client's input).
//!
//! They take a [`Scope`](scope::Scope) (the caller's facts and the [`Ops`] state) and return
//! values: results, JSON-RPC errors, an [`Answer`](call::Answer) whose messages stream, never an
//! HTTP response. Rendering those for a client of either era (status codes, SSE events, event
//! ids and replay for 2025 sessions) is the business of `front`, which this module never
//! imports; what the operations send goes through `upstream`.

pub(crate) mod backchannel;
pub(crate) mod call;
pub(crate) mod client_meta;
pub(crate) mod discover;
pub(crate) mod list;
pub(crate) mod listen;
#[cfg(not(feature = "plugins"))]
pub(crate) mod no_plugins;
pub(crate) mod parked;
pub(crate) mod pending;
#[cfg(feature = "plugins")]
pub(crate) mod plugins;
#[cfg(not(feature = "plugins"))]
pub(crate) use no_plugins as plugins;
pub(crate) mod request_state;
pub(crate) mod scope;
pub(crate) mod stale_answers;
pub(crate) mod task_id;
pub(crate) mod tool_hints;

use std::time::Duration;

#[cfg(feature = "plugins")]
use mcp_plugins::PluginRuntime;
use serde_json::value::RawValue;

use crate::inflight::InFlight;
use crate::seal::Sealer;
use crate::upstream::{Target, Upstream};
use call::ParkedCalls;
use pending::PendingRequests;
use stale_answers::StaleAnswers;
use tool_hints::ToolHintsTable;

/// What the operations share between calls: the upstream client and the tables of calls in
/// progress. One per router, behind an `Arc` (relays and parked calls outlive their request).
pub(crate) struct Ops {
    pub(crate) upstream: Upstream,
    /// Seals the handles minted for clients (cursors, `requestState`, task ids, relayed ids).
    pub(crate) sealer: Sealer,
    /// The gateway's own `serverInfo`, as JSON.
    pub(crate) server_info: Box<RawValue>,
    /// The gateway's own instructions, before the backends'.
    pub(crate) instructions: Option<String>,
    /// The longest a fan-out waits for one backend.
    pub(crate) fanout_deadline: Duration,
    /// The longest public name a list shows.
    pub(crate) max_name_len: usize,
    pub(crate) request_state_ttl_secs: u64,
    /// 2025 backends' calls waiting for a 2026-07-28 client's input (see [`parked`]).
    pub(crate) parked: ParkedCalls,
    /// Backend requests relayed to 2025 clients, waiting for their answers.
    pub(crate) pending: PendingRequests,
    /// The share of a virtual host's backends whose open breakers a list may skip silently.
    pub(crate) max_open_share: f64,
    /// Calls of 2025 sessions in progress on this node, by (session, request id): their
    /// `notifications/cancelled` ends them.
    pub(crate) inflight: InFlight,
    pub(crate) hints: ToolHintsTable,
    /// Last good list/discover answers per caller and backend, for stale-if-error.
    pub(crate) stale: StaleAnswers,
    pub(crate) stale_if_error: Duration,
    /// Most resource subscriptions of one 2025 session, and of one `subscriptions/listen`.
    pub(crate) max_subscriptions: usize,
    /// Plugin hooks around routed calls (see [`plugins`]).
    #[cfg(feature = "plugins")]
    pub(crate) plugins: Option<std::sync::Arc<PluginRuntime>>,
}

impl Ops {
    /// The annotations a backend's `tools/list` gave a tool.
    pub(crate) fn tool_hints(&self, target: &Target<'_>, tool: &str) -> mcp_fallback::ToolHints {
        self.hints.get(target, tool)
    }
}
