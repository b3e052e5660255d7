//! [`McpRouter`]: the MCP endpoint as a tower `Service`.
//!
//! Why this file is long: [`McpRouterBuilder`] is the router's whole public set of knobs, one
//! documented method per setting (about two thirds of the file); `build` wires them into the
//! front and operations state in one place.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use serde_json::value::RawValue;
use tower_service::Service;

use crate::body::{BoxError, McpBody};
use crate::clock::WallClock;
#[cfg(feature = "redis")]
use crate::front::bus::NodeBus;
#[cfg(feature = "redis")]
use crate::front::forward::Waiting;
use crate::front::legacy::AdoptedRecords;
use crate::front::{Front, dispatch};
use crate::inflight::InFlight;
use crate::ops::Ops;
use crate::ops::call::ParkedCalls;
use crate::ops::pending::PendingRequests;
use crate::ops::stale_answers::StaleAnswers;
use crate::ops::tool_hints::ToolHintsTable;
use crate::origin::OriginPolicy;
use crate::replay::{ReplayBuffers, ReplayLimits};
use crate::seal::Sealer;
use crate::session::{LocalSessionStore, SessionStore};
use crate::session_ends::SessionEnds;
use crate::upstream::{
    BackendLayer, BackendService, DestinationPolicy, StdioServer, Upstream, UpstreamError,
    UpstreamOptions, UpstreamReply, UpstreamRequest,
};
use mcp_core::Budget;
#[cfg(feature = "plugins")]
use mcp_plugins::PluginRuntime;

/// The MCP endpoint: a leaf tower `Service` serving `/servers/{vhost}/mcp` behind the foundation
/// layers (it reads `VirtualHostId`, `Principal` and the user configuration from request
/// extensions). Cheap to clone; all clones share one upstream client.
///
/// See the [crate docs](crate) for what it does and an example.
#[derive(Clone)]
pub struct McpRouter {
    front: Arc<Front>,
}

impl std::fmt::Debug for McpRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpRouter").finish_non_exhaustive()
    }
}

impl McpRouter {
    /// A builder with the defaults.
    pub fn builder() -> McpRouterBuilder {
        McpRouterBuilder::default()
    }

    /// The circuit breakers of every credential scope this router has called, for metrics,
    /// readiness detail and operator control. Keys are `<backend name>\0<opaque id>`: the id
    /// names the scope (address, credentials, principal) and the caller's breaker settings
    /// without revealing them, so aggregate by the name part.
    pub fn breakers(&self) -> &mcp_breaker::BreakerRegistry {
        self.front.ops.upstream.breakers()
    }

    /// Starts the next stdio backend processes under `rules`: a reload of the operator's catalog
    /// and allow-list without a restart. A backend whose launch changed gets a new process at
    /// its next call; processes already running finish the calls they have and are reaped when
    /// idle. A backend the new rules refuse fails its next calls (not allowed).
    pub fn replace_stdio_rules(&self, rules: crate::StdioRules) {
        self.front.ops.upstream.replace_stdio_rules(rules);
    }

    /// Waits, at most `within`, for the messages this router still owes backends for calls and
    /// sessions that ended: a 2025 backend's `notifications/cancelled` for a call whose client
    /// went away (or whose connection a shutdown closed), an upstream 2025 session's `DELETE`
    /// once no session uses it. They go out in the background, on the runtime that ended the
    /// call; a server shutting down awaits this after closing its connections and before its
    /// runtimes stop, or those messages are lost with the runtime. `true` when none is left.
    pub async fn settle(&self, within: Duration) -> bool {
        let owed = &self.front.ops.upstream.owed;
        // Closing only lets `wait` finish once no message is left; sending goes on as before,
        // so settling twice (or from several threads) is harmless.
        owed.close();
        tokio::time::timeout(within, owed.wait()).await.is_ok()
    }

    /// How many 2025 backends' calls wait for a 2026-07-28 client's `input_required` retry on
    /// this node (see the crate docs), for metrics.
    pub fn parked_calls(&self) -> usize {
        self.front.ops.parked.len()
    }

    /// Bytes of last good answers kept for stale-if-error on this node, for metrics.
    pub fn stale_answer_bytes(&self) -> usize {
        self.front.ops.stale.bytes()
    }

    /// Bytes the caller's upstream 2025 sessions kept on this node weigh (mostly the backends'
    /// `InitializeResult`s; see [`UpstreamOptions::session_bytes`]), for metrics.
    pub fn upstream_session_bytes(&self) -> usize {
        self.held_bytes("upstream_sessions")
    }

    /// Bytes linked backends (stdio, HTTP+SSE) sent calls on this node that their clients have
    /// not read yet (see [`UpstreamOptions::link_buffer_bytes`]), for metrics.
    pub fn link_buffer_bytes(&self) -> usize {
        self.held_bytes("link_buffers")
    }

    /// Bytes of messages kept in 2025 sessions' replay buffers on this node, for metrics.
    pub fn replay_bytes(&self) -> usize {
        self.front.replay.bytes()
    }

    /// How many requests of the gateway's own wait for a 2025 client's answer on this node
    /// (see [`McpRouterBuilder::max_relayed_requests`]).
    pub fn relayed_requests_waiting(&self) -> usize {
        self.front.ops.pending.waiting()
    }

    /// Open 2025 GET streams and 2026-07-28 `subscriptions/listen` streams on this node, for
    /// metrics.
    pub fn notification_streams(&self) -> usize {
        self.front.streams.held_slots()
    }

    /// 2025 POST response streams being relayed on this node, for metrics.
    pub fn background_relays(&self) -> usize {
        self.front.relays.held_slots()
    }

    /// This node's subscription to the node bus (`McpRouterBuilder::node_bus`), for metrics:
    /// `Some(true)` while subscribed, `Some(false)` while its subscriber runs unsubscribed
    /// (connecting, or reconnecting with backoff after Redis went away), `None` without a node
    /// bus or before the subscriber started (the first request this router serves starts it).
    pub fn node_bus_subscribed(&self) -> Option<bool> {
        #[cfg(feature = "redis")]
        {
            self.front.bus.as_ref().and_then(|bus| bus.subscribed())
        }
        #[cfg(not(feature = "redis"))]
        {
            None
        }
    }

    /// How many messages this node could not publish on the node bus since it was built (Redis
    /// unreachable, an error, or no answer within the bus's timeouts), for metrics; `None`
    /// without a node bus.
    pub fn node_bus_publish_failures(&self) -> Option<u64> {
        #[cfg(feature = "redis")]
        {
            self.front.bus.as_ref().map(|bus| bus.publish_failures())
        }
        #[cfg(not(feature = "redis"))]
        {
            None
        }
    }

    /// Bytes the upstream budget `name` holds.
    fn held_bytes(&self, name: &str) -> usize {
        let mut budgets = self.front.ops.upstream.budgets();
        budgets
            .find(|b| b.name() == name)
            .map_or(0, Budget::held_bytes)
    }

    /// Every budget the router draws from on this node (book: docs/src/security.md,
    /// "Budgets"), for metrics: what each holds and how often it refused.
    pub fn budgets(&self) -> Vec<Budget> {
        let front = &self.front;
        let ops = &front.ops;
        [
            &front.streams,
            &front.relays,
            ops.pending.budget(),
            ops.parked.budget(),
            ops.stale.budget(),
            ops.hints.budget(),
        ]
        .into_iter()
        .chain(ops.upstream.budgets())
        .cloned()
        .chain([front.replay.budget()])
        .chain(front.sessions.budget())
        .chain(Self::bus_budgets(front))
        .collect()
    }

    #[cfg(feature = "redis")]
    fn bus_budgets(front: &Front) -> Option<Budget> {
        Some(front.forwards.budget().clone())
    }

    #[cfg(not(feature = "redis"))]
    fn bus_budgets(_: &Front) -> Option<Budget> {
        None
    }
}

/// Builds an [`McpRouter`].
#[derive(Clone)]
#[must_use]
pub struct McpRouterBuilder {
    name: String,
    version: String,
    instructions: Option<String>,
    sealer: Option<Sealer>,
    /// The deployment id in upstream requests' `Via` (see [`crate::hops`]): set, or derived from
    /// the sealing secret, or random.
    gateway_id: Option<String>,
    max_hops: usize,
    wall_clock: WallClock,
    fanout_deadline: Duration,
    max_name_len: usize,
    max_body_bytes: usize,
    origins: OriginPolicy,
    request_state_ttl: Duration,
    upstream: UpstreamOptions,
    backend_layer: Option<BackendLayer>,
    sessions: Option<Arc<dyn SessionStore>>,
    #[cfg(feature = "redis")]
    bus: Option<Arc<NodeBus>>,
    #[cfg(feature = "plugins")]
    plugins: Option<Arc<PluginRuntime>>,
    max_open_share: f64,
    stale_if_error: Duration,
    stale_entries: usize,
    stale_bytes_per_principal: usize,
    stale_bytes: usize,
    replay: ReplayLimits,
    max_streams_per_principal: usize,
    max_relays_per_principal: usize,
    max_relayed_requests: usize,
    max_relayed_requests_per_principal: usize,
    max_subscriptions: usize,
    max_parked_calls: usize,
    max_parked_calls_per_principal: usize,
    #[cfg(feature = "redis")]
    forwarded_retries: Budget,
    session_check_interval: Duration,
    audit: Option<crate::audit::Audit>,
}

impl std::fmt::Debug for McpRouterBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpRouterBuilder")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("fanout_deadline", &self.fanout_deadline)
            .field("max_name_len", &self.max_name_len)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl Default for McpRouterBuilder {
    fn default() -> Self {
        Self {
            name: "mcp-gateway".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            sealer: None,
            gateway_id: None,
            max_hops: crate::hops::DEFAULT_MAX_HOPS,
            wall_clock: WallClock::system(),
            fanout_deadline: Duration::from_secs(10),
            max_name_len: 128,
            max_body_bytes: 4 * 1024 * 1024,
            origins: OriginPolicy::default(),
            request_state_ttl: Duration::from_secs(600),
            upstream: UpstreamOptions::default(),
            backend_layer: None,
            sessions: None,
            #[cfg(feature = "redis")]
            bus: None,
            #[cfg(feature = "plugins")]
            plugins: None,
            max_open_share: 0.5,
            stale_if_error: Duration::from_secs(60),
            stale_entries: 10_000,
            stale_bytes_per_principal: 16 << 20,
            stale_bytes: 256 << 20,
            replay: ReplayLimits::default(),
            max_streams_per_principal: 256,
            max_relays_per_principal: 64,
            max_relayed_requests: 100_000,
            max_relayed_requests_per_principal: 1_000,
            max_subscriptions: 256,
            max_parked_calls: 10_000,
            max_parked_calls_per_principal: 100,
            #[cfg(feature = "redis")]
            forwarded_retries: crate::front::forward::default_budget(),
            session_check_interval: Duration::from_secs(30),
            audit: None,
        }
    }
}

impl McpRouterBuilder {
    /// The gateway's `serverInfo` (default `mcp-gateway` and this crate's version).
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// The gateway's own instructions, put before the backends' in `server/discover`.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// The secret that seals cursors and `requestState` envelopes. Every node behind one load
    /// balancer needs the same secret; without one a random per-process key is used.
    pub fn sealing_secret(mut self, secret: &[u8]) -> Self {
        self.sealer = Some(Sealer::new(secret));
        self.gateway_id
            .get_or_insert_with(|| crate::hops::Hops::id_from_secret(secret));
        self
    }

    /// This deployment's id, which every HTTP request to a backend carries in `Via`
    /// (`1.1 mcp-gateway-<id>`): a request arriving with it is refused with HTTP 508 (Loop
    /// Detected) before anything is routed. Default: derived from the sealing secret when one is
    /// set (every node sharing it shares the id), else random per router. Characters other than
    /// letters, digits, `-`, `_` and `.` become `-`.
    pub fn gateway_id(mut self, id: impl Into<String>) -> Self {
        self.gateway_id = Some(id.into());
        self
    }

    /// The most `Via` entries (gateways and proxies passed) a request may arrive with (default
    /// 8); more are refused with HTTP 508 (Loop Detected).
    pub fn max_hops(mut self, max: usize) -> Self {
        self.max_hops = max;
        self
    }

    /// The clock the expiring handles (`requestState`, relayed request ids) are stamped and
    /// judged with (default: the system clock). Tests move it past an expiry instead of sleeping.
    pub fn wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }

    /// The longest wait for one backend during a fan-out (default 10 s; a backend's own
    /// `timeout_ms` applies when shorter).
    pub fn fanout_deadline(mut self, deadline: Duration) -> Self {
        self.fanout_deadline = deadline;
        self
    }

    /// The longest public tool or prompt name listed (default 128, the spec's; many LLM hosts
    /// need 64).
    pub fn max_name_len(mut self, max: usize) -> Self {
        self.max_name_len = max;
        self
    }

    /// The largest request body read (default 4 MiB); larger ones get 413.
    pub fn max_body_bytes(mut self, max: usize) -> Self {
        self.max_body_bytes = max;
        self
    }

    /// Which `Origin` headers are accepted (default: only requests without one).
    pub fn origins(mut self, policy: OriginPolicy) -> Self {
        self.origins = policy;
        self
    }

    /// How long a wrapped MRTR `requestState` stays valid (default 10 minutes).
    pub fn request_state_ttl(mut self, ttl: Duration) -> Self {
        self.request_state_ttl = ttl;
        self
    }

    /// Upstream client tuning.
    pub fn upstream(mut self, options: UpstreamOptions) -> Self {
        self.upstream = options;
        self
    }

    /// Adds a tower layer to every backend stack: a concurrency limit, a rate limit, retries,
    /// tracing, a custom policy. Each backend gets one stack per credential scope (its address,
    /// the caller's effective credentials and principal), so the layer's state (a limit's
    /// permits, say) is never shared between scopes. The layer wraps the whole stack (fallback to
    /// replicas, breakers, timeout, transport) and sees each call as an [`UpstreamRequest`];
    /// layers added later sit further out.
    ///
    /// The layered service must keep the stack's error type, [`UpstreamError`]: map a layer's own
    /// errors (tower's `Timeout` answers a `BoxError`) with `map_err`.
    ///
    /// ```
    /// use mcp_router::McpRouter;
    /// use tower::limit::ConcurrencyLimitLayer;
    ///
    /// // At most 8 calls in flight per backend and caller.
    /// let router = McpRouter::builder()
    ///     .backend_layer(ConcurrencyLimitLayer::new(8))
    ///     .build();
    /// # drop(router);
    /// ```
    pub fn backend_layer<L>(mut self, layer: L) -> Self
    where
        L: tower_layer::Layer<BackendService> + Send + Sync + 'static,
        L::Service: tower_service::Service<UpstreamRequest, Response = UpstreamReply, Error = UpstreamError>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as tower_service::Service<UpstreamRequest>>::Future: Send + 'static,
    {
        let layer = BackendLayer::new(layer);
        self.backend_layer = Some(match self.backend_layer.take() {
            Some(inner) => inner.then(layer),
            None => layer,
        });
        self
    }

    /// Where legacy (2025) client sessions are kept (default: a [`LocalSessionStore`] with its
    /// default limits).
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.sessions = Some(store);
        self
    }

    /// Lets the nodes sharing a Redis pass each other what a 2025 client sent to the wrong node:
    /// its answers to the gateway's own requests (bridged MRTR input) and cancellations (see
    /// `crate::front::bus`). Use with the Redis session store; without a bus those two only work on
    /// the node running the call. Feature `redis`.
    #[cfg(feature = "redis")]
    pub fn node_bus(mut self, bus: NodeBus) -> Self {
        self.bus = Some(Arc::new(bus));
        self
    }

    /// Programs user configurations may name as free-form stdio `command`s (an operator decision:
    /// a user configuration alone never starts a process), without `args`, `cwd` or loader
    /// variables unless [`trust_user_commands`](Self::trust_user_commands). See [`StdioRules`](crate::StdioRules).
    pub fn stdio_allowed_commands(mut self, commands: Vec<String>) -> Self {
        self.upstream.stdio.allowed_commands = commands;
        self
    }

    /// The operator's stdio server catalog: what a backend's `"stdio": "NAME"` runs.
    pub fn stdio_servers(mut self, servers: BTreeMap<String, StdioServer>) -> Self {
        self.upstream.stdio.servers = servers;
        self
    }

    /// Trust config authors: free-form stdio `command`s with any `args`, `env` and `cwd`, and
    /// `stdio_policy = "shared"`, are run (default `false`).
    pub fn trust_user_commands(mut self, trust: bool) -> Self {
        self.upstream.stdio.trust_user_commands = trust;
        self
    }

    /// Where backend connections may go (default [`DestinationPolicy::default`]: link-local and
    /// cloud metadata addresses are refused).
    pub fn destinations(mut self, policy: DestinationPolicy) -> Self {
        self.upstream.destinations = policy;
        self
    }

    /// TLS towards `https` backends (default: the platform's roots): extra CAs of a private PKI,
    /// a client certificate for backends that require mutual TLS (see
    /// [`UpstreamOptions::tls`]).
    pub fn backend_tls(mut self, tls: mcp_core::tls::ClientTls) -> Self {
        self.upstream.tls = tls;
        self
    }

    /// Plugins around routed calls: `tools/call`, `prompts/get` and `resources/read` run the
    /// runtime's current chain (pre hooks before the backend, post hooks on the result), and lists
    /// leave out what an enforcing filter plugin hides. See `mcp_plugins` and the router's
    /// `plugins` module docs.
    ///
    /// Feature `plugins`.
    #[cfg(feature = "plugins")]
    pub fn plugins(mut self, runtime: Arc<PluginRuntime>) -> Self {
        self.plugins = Some(runtime);
        self
    }

    /// Circuit breaker defaults for every backend URL (default: `mcp_breaker::BreakerConfig`'s,
    /// i.e. 5 consecutive failures, 5 s open); a backend's `breaker` object overrides single keys.
    pub fn breaker_defaults(mut self, config: mcp_breaker::BreakerConfig) -> Self {
        self.upstream.breaker = config;
        self
    }

    /// The largest share of a virtual host's backends that a list or `server/discover` may skip
    /// because their breakers are open before the call fails instead of answering a near-empty
    /// result (default 0.5: with two backends one may be skipped, with one backend none).
    pub fn max_open_share(mut self, share: f64) -> Self {
        self.max_open_share = share.clamp(0.0, 1.0);
        self
    }

    /// Stale-if-error: when a backend fails during a list or `server/discover`, its last good
    /// answer to the same caller is used if it is younger than this (default 60 s; zero turns it
    /// off), marked in `_meta["mcp-gateway/degraded"].stale`. At most `entries` answers are kept
    /// (default 10,000).
    pub fn stale_if_error(mut self, max_staleness: Duration, entries: usize) -> Self {
        self.stale_if_error = max_staleness;
        self.stale_entries = entries;
        self
    }

    /// The bytes of last good answers kept for stale-if-error: at most `per_principal` of one
    /// principal's (default 16 MiB; its own oldest leave first) and `total` in all (default
    /// 256 MiB).
    pub fn stale_budgets(mut self, per_principal: usize, total: usize) -> Self {
        self.stale_bytes_per_principal = per_principal;
        self.stale_bytes = total;
        self
    }

    /// Byte budgets of the replay buffers of 2025 sessions' streams (for `Last-Event-ID`):
    /// per session (default 1 MiB), per principal over all its sessions (16 MiB) and in all
    /// (256 MiB). An event over its session's budget drops that session's oldest events; over the
    /// principal's share or the whole budget it is sent but not kept: one principal never evicts
    /// another's events.
    pub fn replay_budgets(
        mut self,
        per_session: usize,
        per_principal: usize,
        total: usize,
    ) -> Self {
        self.replay.session_bytes = per_session;
        self.replay.principal_bytes = per_principal;
        self.replay.total_bytes = total;
        self
    }

    /// The most notification streams one principal may hold open on this node: 2025 GET
    /// streams and 2026-07-28 `subscriptions/listen` streams together (default 256). Each holds
    /// upstream streams and follows; more are refused with `429` and JSON-RPC error `-32600`. A
    /// stream whose client left without closing it counts until the next write to it fails, so
    /// the default leaves room for clients that abandon quiet streams (the official conformance
    /// suite opens and drops dozens in one run).
    pub fn max_streams_per_principal(mut self, max: usize) -> Self {
        self.max_streams_per_principal = max;
        self
    }

    /// The most 2025 POST response streams one principal may have relayed at once (default 64):
    /// such a stream outlives the client's connection (it may resume with `Last-Event-ID`).
    /// A call that would stream past this gets JSON-RPC error `-32600` and is cancelled upstream.
    pub fn max_background_relays_per_principal(mut self, max: usize) -> Self {
        self.max_relays_per_principal = max;
        self
    }

    /// The most requests of the gateway's own that wait for a 2025 client's answer on this node
    /// (default 100,000), and the most of one principal (default 1,000): a linked (stdio,
    /// HTTP+SSE) backend's sampling, elicitation or roots request shown to the client, and a
    /// modern backend's input request bridged for a 2025 client. A call whose backend asks past
    /// its principal's share fails with JSON-RPC `-32603` naming the limit (and is cancelled
    /// upstream); other principals' requests are never refused for it. A legacy HTTP backend's
    /// requests need no entry: their ids carry their route. A share over the node's table is
    /// taken as the table's size.
    pub fn max_relayed_requests(mut self, max: usize, per_principal: usize) -> Self {
        self.max_relayed_requests = max.max(1);
        self.max_relayed_requests_per_principal = per_principal.clamp(1, self.max_relayed_requests);
        self
    }

    /// The most resource subscriptions of one 2025 session (`resources/subscribe`) and of one
    /// 2026-07-28 `subscriptions/listen` (`resourceSubscriptions`) (default 256); more get
    /// JSON-RPC error `-32600`.
    pub fn max_subscriptions(mut self, max: usize) -> Self {
        self.max_subscriptions = max;
        self
    }

    /// The most 2025 calls parked on this node while they wait for a 2026-07-28 client's
    /// `input_required` retry (default 10,000), and the most of one principal (default 100).
    /// A backend request that finds no room is declined (the backend sees its client decline),
    /// so its call goes on without the input; other principals' calls still park.
    pub fn max_parked_calls(mut self, max: usize, per_principal: usize) -> Self {
        self.max_parked_calls = max.max(1);
        self.max_parked_calls_per_principal = per_principal.clamp(1, self.max_parked_calls);
        self
    }

    /// What this node holds for retries it passed on to the node holding their parked call
    /// (node bus): the most answers one principal waits for (default 100) and the node waits for
    /// (default 10,000), and the bytes of their parts the clients have not read yet, per
    /// principal (default 16 MiB) and in all (default 256 MiB). Past a count the retry is
    /// answered like one whose call is gone; past the bytes the answer ends early (pub/sub
    /// cannot be told to wait). A share over the node's limit is taken as that limit.
    ///
    /// Feature `redis`.
    #[cfg(feature = "redis")]
    pub fn forwarded_retry_budgets(
        mut self,
        (per_principal, max): (usize, usize),
        (bytes_per_principal, bytes): (usize, usize),
    ) -> Self {
        let max = max.max(1);
        let bytes = bytes.max(1);
        self.forwarded_retries = Budget::new("forwarded_retries")
            .with_slots(per_principal.clamp(1, max), max)
            .with_bytes(bytes_per_principal.clamp(1, bytes), bytes);
        self
    }

    /// How often the 2025 sessions this node holds streams and replay buffers for are checked
    /// (without refreshing them) for expiry in the session store, to release what they held
    /// (default 30 s).
    pub fn session_check_interval(mut self, every: Duration) -> Self {
        self.session_check_interval = every.max(Duration::from_millis(100));
        self
    }

    /// The audit trail (default: none): one [`AuditRecord`](crate::audit::AuditRecord) per MCP
    /// operation this router serves, of either era, handed to the sink of `audit` when the
    /// operation is over (see [`crate::audit`]). Without it the router builds no record and
    /// reads nothing extra from a message.
    pub fn audit(mut self, audit: crate::audit::Audit) -> Self {
        self.audit = Some(audit);
        self
    }

    /// This node's id: the node bus's when there is one (its channel), else a random one.
    fn node_id(&self) -> String {
        #[cfg(feature = "redis")]
        if let Some(bus) = &self.bus {
            return bus.node_id().to_owned();
        }
        crate::node_id::new_node_id()
    }

    /// Builds the router. Needs a tokio runtime when it serves, not when it is built.
    pub fn build(self) -> McpRouter {
        let info = serde_json::json!({ "name": self.name, "version": self.version });
        let info =
            serde_json::value::to_raw_value(&info).unwrap_or_else(|_| RawValue::NULL.to_owned());
        let node_id = self.node_id();
        let hops = crate::hops::Hops::new(
            self.gateway_id.as_deref().unwrap_or(&node_id),
            self.max_hops,
        );
        let sealer = self
            .sealer
            .unwrap_or_else(Sealer::random)
            .with_clock(self.wall_clock);
        let ops = Ops {
            upstream: Upstream::new(
                self.upstream,
                info.clone(),
                self.backend_layer,
                &node_id,
                hops.entry().clone(),
            ),
            pending: PendingRequests::new(
                sealer.clone(),
                node_id.clone(),
                Duration::from_secs(600),
                self.max_relayed_requests,
                self.max_relayed_requests_per_principal,
            ),
            sealer,
            server_info: info,
            instructions: self.instructions,
            fanout_deadline: self.fanout_deadline,
            max_name_len: self.max_name_len,
            request_state_ttl_secs: self.request_state_ttl.as_secs(),
            parked: ParkedCalls::new(self.max_parked_calls, self.max_parked_calls_per_principal),
            max_open_share: self.max_open_share,
            inflight: InFlight::default(),
            hints: ToolHintsTable::new(100_000),
            stale: StaleAnswers::new(
                self.stale_entries,
                self.stale_if_error,
                self.stale_bytes_per_principal,
                self.stale_bytes,
            ),
            stale_if_error: self.stale_if_error,
            max_subscriptions: self.max_subscriptions,
            #[cfg(feature = "plugins")]
            plugins: self.plugins,
        };
        McpRouter {
            front: Arc::new(Front {
                ops: Arc::new(ops),
                max_body_bytes: self.max_body_bytes,
                origins: self.origins,
                hops,
                adopted: AdoptedRecords::default(),
                sessions: self
                    .sessions
                    .unwrap_or_else(|| Arc::new(LocalSessionStore::default())),
                replay: ReplayBuffers::new(self.replay, &node_id),
                streams: Budget::new("notification_streams")
                    .with_slots(self.max_streams_per_principal, usize::MAX),
                relays: Budget::new("background_relays")
                    .with_slots(self.max_relays_per_principal, usize::MAX),
                ends: SessionEnds::default(),
                session_check_interval: self.session_check_interval,
                sweeping: std::sync::atomic::AtomicBool::new(false),
                #[cfg(feature = "redis")]
                bus: self.bus,
                #[cfg(feature = "redis")]
                forwards: Waiting::new(self.forwarded_retries),
                subscription_watchers: std::sync::Mutex::default(),
                audit: self.audit,
            }),
        }
    }
}

pin_project! {
    /// Response future of [`McpRouter`].
    pub struct ResponseFuture {
        #[pin]
        inner: Pin<Box<dyn Future<Output = Result<Response<McpBody>, Infallible>> + Send>>,
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response<McpBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx)
    }
}

impl<B> Service<Request<B>> for McpRouter
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<McpBody>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let front = Arc::clone(&self.front);
        ResponseFuture {
            inner: Box::pin(async move { Ok(dispatch::serve(front, req).await) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `settle` waits for what is owed, no longer than asked, and may be called again (each
    /// serving thread of a gateway settles on its own).
    #[tokio::test(start_paused = true)]
    async fn settle_waits_for_owed_messages_within_its_bound() {
        let router = McpRouter::builder().build();
        assert!(router.settle(Duration::ZERO).await, "nothing owed yet");
        let owed = &router.front.ops.upstream.owed;
        owed.spawn(tokio::time::sleep(Duration::from_secs(5)));
        let started = tokio::time::Instant::now();
        assert!(!router.settle(Duration::from_secs(1)).await, "still owed");
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        assert!(router.settle(Duration::from_secs(10)).await);
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(5),
            "returns when it went out"
        );
        // Owing again after a settle is tracked the same way.
        owed.spawn(tokio::time::sleep(Duration::from_secs(2)));
        assert!(!router.settle(Duration::ZERO).await);
        assert!(router.settle(Duration::from_secs(3)).await);
    }
}
