//! # mcp-router
//!
//! The MCP endpoint of the gateway. Behind the foundation layers (`mcp-vhost`, `mcp-claims`,
//! `mcp-config-store`), it presents a virtual host's backend MCP servers as one MCP server:
//!
//! - **Modern clients (2026-07-28)**, stateless: every request is validated (standard headers
//!   against the body, required `_meta`, version, method); `server/discover` answers with
//!   capabilities merged from every backend; the four list methods fan out concurrently and merge
//!   with `<backend>-` prefixes and a sealed cursor; `tools/call`, `prompts/get`, `resources/read`
//!   and `completion/complete` are routed to the owning backend and its answer relayed, streamed
//!   when the backend streams (progress and log notifications), with MRTR `requestState` wrapped
//!   in a gateway envelope bound to the caller and the backend's resource URIs made public (resource
//!   links and embedded resources in tool results, task results and prompt messages; read contents).
//! - **Backends of either era**: each backend's era is probed once with `server/discover` and
//!   cached per credential scope (re-probed after failures). Modern backends get stateless
//!   requests with synthesised `_meta` and the standard headers; legacy (2025) backends get
//!   upstream sessions, one per (credential scope, client capability set) shared by the caller's
//!   requests and sessions, re-initialised transparently when the backend forgets them (404).
//!   Every call goes through the backend's stack, a `tower::Service<UpstreamRequest>` per
//!   credential scope built from the published layers: `mcp-fallback`'s `FallbackLayer` (the
//!   `replicas`, under the MCP replay rule) -> `mcp-breaker`'s `BreakerLayer` (one breaker per
//!   address, judged at the end of the answer) -> a timeout -> the transport client, with an
//!   integrator's layer around it ([`McpRouterBuilder::backend_layer`]); a failing backend's last
//!   good list/discover answer is served for a while, marked stale.
//! - **Isolation (the credential scope)**: every piece of upstream state that outlives a call
//!   (upstream sessions and their GET streams, HTTP+SSE connections, the era cache, breakers, tool
//!   hints, stale answers) is keyed by who the gateway is towards the backend: the backend's
//!   address, a digest of the effective outgoing credentials (header policy and passthrough
//!   values) and the principal. Tenants never share upstream state, so a tenant's own settings
//!   (`timeout_ms`, breaker overrides) and failures only affect its own state; each table is
//!   bounded per principal ([`UpstreamOptions::max_sessions_per_principal`]): a principal over its
//!   share gives up its own oldest entry, a full table refuses it, and nobody evicts another
//!   tenant's entry.
//! - A backend may also be a **stdio program** (`command`, feature `stdio`): started only when the operator's
//!   rules allow it ([`StdioRules`]: a catalog entry, or an allow-listed command), multiplexed,
//!   restarted after a crash, `shared` or `per_principal`. An **HTTP+SSE (2024-11-05) server**
//!   (feature `sse`) is reached with `transport = "sse"`, or found by the spec's fallback rule (a legacy
//!   `initialize` POST answered 400/404/405, then a GET whose stream announces an `endpoint`):
//!   one GET stream per (backend, URL, principal), messages POSTed to a same-origin endpoint,
//!   calls multiplexed like stdio, reconnected after the stream is lost.
//! - **Plugins** (feature `plugins`: `McpRouterBuilder::plugins`, `mcp-plugins`): pre hooks before a routed
//!   `tools/call`, `prompts/get` or `resources/read` reaches its backend (deny, rewrite arguments,
//!   add headers and `_meta`), post hooks on its result, list filtering; a failed plugin runtime
//!   fails those calls closed.
//! - **A 2026-07-28 client calling a 2025 backend** that sends a request mid-call (sampling,
//!   elicitation, roots): when the client declared the capability, it gets an `input_required`
//!   result and its retry answers the backend's request in the **same** upstream call, parked on
//!   this node meanwhile (a retry reaching another node is passed on over the node bus) (one use, bound to the caller, cancelled upstream when abandoned); any
//!   other backend request is declined (`-32601`) so the call ends instead of hanging.
//! - **2025 clients** (`initialize`, `Mcp-Session-Id`) get sessions on the same endpoint: a
//!   session bound to the principal and virtual host, kept in a [`session::SessionStore`]; lists
//!   and routed calls work as for modern clients (error codes of their era), `ping` and
//!   `logging/setLevel` are answered by the gateway, `notifications/cancelled` cancels the named
//!   call, the GET stream merges the backends' streams (event ids, `Last-Event-ID` replay;
//!   a 2025-11-25 session's GET and POST streams start with a priming event), backend requests
//!   (sampling, elicitation, roots) reach the client and its answers go back (so do its progress
//!   for them and its cancellation of them, under the backend's own token and id), a modern
//!   backend's MRTR `input_required` becomes real requests, DELETE ends the session.
//!   Not yet: the gateway's own `list_changed` notifications (when a backend fails or recovers,
//!   or the configuration changes).
//! - **Several nodes**: with a shared store (`session::RedisSessionStore`, feature `redis`, or the stateless
//!   [`session::SealedSessionStore`]) and one sealing secret, any node continues any session: it
//!   adopts the backend sessions the record names, backends' requests are answered through any
//!   node (their relayed ids carry the route), and with a `bus::NodeBus` (feature `redis`) the answers to the
//!   gateway's own requests and `notifications/cancelled` reach the node running the call, and a
//!   2026-07-28 retry of a parked `input_required` call reaches the node holding it.
//! - **Subscriptions**: 2026-07-28 `subscriptions/listen` is acknowledged with the subset the
//!   gateway honours and fed by every backend (modern backends' own listens, legacy backends'
//!   GET streams and `resources/subscribe`), tagged with the client's subscription id.
//! - **Tasks** (2026-07-28 extension): a backend's task id reaches the client as a gateway task id
//!   (sealed with the backend's name, bound to the caller and virtual host; integrity-protected,
//!   not encrypted), and `tasks/get|update|cancel` route back with the raw id. Not bridged across
//!   eras: 2025 clients are never offered the extension, and 2025-11-25 experimental tasks are not
//!   translated. A `subscriptions/listen` naming gateway task ids (`taskIds`) gets the
//!   backends' `notifications/tasks` for those tasks, under the gateway ids.
//!
//! - **Audit trail** ([`McpRouterBuilder::audit`], module [`audit`]): one [`audit::AuditRecord`]
//!   per operation (who, virtual host, backend or fan-out backends, method, name, outcome level,
//!   JSON-RPC code, latency, bytes; arguments and results only where allowed) handed to an
//!   [`audit::AuditSink`] once the operation is over. The router also names each message's trace
//!   on the current `tracing` span's `trace_id` field when the span declares one.
//!
//! Failures follow book: docs/src/failure-modes.md: missing request facts are `Routing problem…` internal errors; a name
//! that no configured backend prefix matches is `wrong tool name` / `wrong prompt name` /
//! `wrong resource name` / `wrong completion reference` (-32602 for modern clients); a name that
//! several backends expose is `-32600`; a backend that fails during a list is left out and named in
//! `_meta["mcp-gateway/degraded"]`, during a routed call it gives a JSON-RPC error naming the
//! backend. Nothing the engine cannot serve gets a 5xx.
//!
//! ## Features
//!
//! None is on by default; the reference gateway (`mcp-gateway`) turns on all four.
//!
//! | feature | what it adds |
//! |---|---|
//! | `redis` | the Redis session store (`session::RedisSessionStore`) and the node bus (`bus::NodeBus`) for several nodes |
//! | `plugins` | plugin hooks around routed calls (`McpRouterBuilder::plugins`, `mcp-plugins`) |
//! | `stdio` | stdio backends run as child processes; without it a stdio backend's calls fail with [`UpstreamError::TransportDisabled`] (the operator's [`StdioRules`] are still read) |
//! | `sse` | HTTP+SSE (2024-11-05) backends (`transport = "sse"`, and the spec's fallback rule after a refused 2025 `initialize`); without it such calls fail with [`UpstreamError::TransportDisabled`] |
//!
//! ## Modules
//!
//! Three layers, each depending only on those below it: `front` (what clients of each era see)
//! -> `ops` (the era-neutral operations, returning values) -> `upstream` (the backends); the
//! shared modules below them depend on no layer, and only `router` (the service and its
//! builder) wires everything together. `tests/module_rule.rs` checks the rule on the sources, and
//! that a file over 600 lines says why at its top (book: docs/src/architecture.md).
//!
//! | module | layer | what it holds |
//! |---|---|---|
//! | `router` | top | [`McpRouter`], [`McpRouterBuilder`]: each layer's state built from the options |
//! | `front` | front | the HTTP entry, the 2025 session engine, the 2026-07-28 engine, answers as JSON or SSE, [`sse_bridge`], the node bus (`bus`, feature `redis`) |
//! | `ops` | ops | `discover`, `list`, `listen`, `call` (resolve, relay, bridge, park), the tables of calls in progress, plugin hooks |
//! | `upstream` | upstream | one backend exchange as a tower service ([`UpstreamRequest`], [`UpstreamReply`], [`BackendService`]), eras, 2025 upstream sessions, stdio and HTTP+SSE links, [`UpstreamOptions`] |
//! | [`naming`] | shared | public names, aliases, the prefix split |
//! | `public_uris` | shared | backend URIs in answers made public |
//! | `seal`, `cursor` | shared | [`Sealer`] (AES-256-GCM handles for clients), sealed list cursors |
//! | [`session`] | shared | downstream 2025 session records and [`session::SessionStore`]s (local, Redis, sealed) |
//! | `hops` | shared | this deployment's `Via` mark on upstream requests, and the 508 of a request that carries it (loops) |
//! | `node_id` | shared | this node's random id, and the upstream request ids and progress tokens minted with it (unique across nodes and restarts) |
//! | `replay`, `session_ends` | shared | a 2025 session's event buffers for `Last-Event-ID`; signals to its streams when it ends |
//! | `inflight` | shared | calls in progress by session and request id (per-principal stream slots draw from an `mcp_core::Budget`) |
//! | `degraded`, `log_level` | shared | the degraded marker of partial answers; log severities |
//! | `context` | shared | the request facts the foundation layers put in extensions |
//! | [`telemetry`] | shared | OpenTelemetry spans and metrics after the MCP semantic conventions |
//! | [`audit`] | shared | the audit trail: one [`audit::AuditRecord`] per operation, to the [`audit::AuditSink`] of [`McpRouterBuilder::audit`] |
//! | `origin`, `clock`, `body` | shared | [`OriginPolicy`], [`WallClock`], [`McpBody`] |
//!
//! The client's `Authorization` header never reaches a backend unless the backend's
//! `headers.passthrough` names it; `traceparent`/`tracestate`/`baggage` are propagated.
//!
//! ```
//! use bytes::Bytes;
//! use http::{Request, StatusCode};
//! use http_body_util::{BodyExt, Full};
//! use mcp_router::McpRouter;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let router = McpRouter::builder().build();
//! // Without the foundation layers there is no virtual host, principal or config: the router
//! // re-checks and says so instead of guessing.
//! let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
//!     "io.modelcontextprotocol/protocolVersion":"2026-07-28",
//!     "io.modelcontextprotocol/clientCapabilities":{}}}}"#;
//! let req = Request::post("/servers/vh/mcp")
//!     .header("mcp-protocol-version", "2026-07-28")
//!     .header("mcp-method", "tools/list")
//!     .body(Full::new(Bytes::from(body)))
//!     .unwrap();
//! let res = router.oneshot(req).await.unwrap();
//! assert_eq!(res.status(), StatusCode::BAD_REQUEST);
//! let json: serde_json::Value =
//!     serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap();
//! assert_eq!(json["error"]["code"], -32603);
//! assert!(json["error"]["message"].as_str().unwrap().starts_with("Routing problem"));
//! # }
//! ```

pub mod audit;
mod body;
mod clock;
mod context;
mod cursor;
mod degraded;
mod front;
mod hops;
mod inflight;
mod log_level;
pub mod naming;
mod node_id;
mod ops;
mod origin;
mod public_uris;
mod replay;
mod router;
mod seal;
pub mod session;
mod session_ends;
pub mod telemetry;
mod upstream;

#[cfg(feature = "redis")]
pub use front::bus;
pub use front::sse_bridge;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use upstream::fuzzing;

pub use body::McpBody;
pub use clock::WallClock;
pub use degraded::{DEGRADED_META_KEY, SERVER_INFO_META_KEY};
pub use origin::OriginPolicy;
pub use router::{McpRouter, McpRouterBuilder, ResponseFuture};
pub use seal::{SealError, Sealer};
pub use upstream::{
    BackendService, DEFAULT_DENIED, DestinationError, DestinationPolicy, Refusal, StdioRules,
    StdioServer, UpstreamError, UpstreamOptions, UpstreamReply, UpstreamRequest,
    is_loader_variable, set_pool_lane,
};
