//! # mcp-test-backends
//!
//! Real MCP servers, built with rmcp, that tests start in-process on `127.0.0.1` to stand behind
//! the gateway as backends. Each [`TestBackend`] serves rmcp's `StreamableHttpService` on
//! `http://127.0.0.1:<port>/mcp` through a small hyper server this crate controls, so a test can
//! stop it (connections refused), restart it on the same port (fresh rmcp state: old sessions
//! get `404`), and read every HTTP request it received.
//!
//! ```no_run
//! use mcp_test_backends::{BackendSpec, TestBackend};
//!
//! # async fn demo() {
//! let backend = TestBackend::start(BackendSpec::modern("alpha").page_size(2).extra_tools(5)).await;
//! let url = backend.url(); // http://127.0.0.1:<port>/mcp
//! # let _ = url;
//! // … drive the gateway at it …
//! assert!(backend.requests().iter().all(|r| !r.has_header("authorization")));
//! backend.stop().await;
//! # }
//! ```
//!
//! ## Eras ([`Era`])
//!
//! | era | on the wire |
//! |---|---|
//! | [`Era::Modern`] | 2026-07-28 only, stateless. `server/discover` answers a `DiscoverResult` with `supportedVersions: ["2026-07-28"]`. `initialize` is answered with JSON-RPC error `-32022` (data `{"supported":["2026-07-28"],"requested":"<asked>"}`) and no session; a request without `MCP-Protocol-Version` gets `400` `-32020`, one without the `_meta` protocol version `400` `-32602`; GET/DELETE `405`. |
//! | [`Era::Legacy`] | 2024-11-05 … 2025-11-25 only: `initialize` + `Mcp-Session-Id` sessions, GET stream, DELETE. Any modern-shaped POST (`server/discover`, `subscriptions/listen`, `MCP-Protocol-Version` or `_meta` protocol version ≥ 2026-07-28) gets `400` with [`LEGACY_REJECTION_BODY`] (`-32600`, `id: null`), as a legacy-only server finding no session would answer. |
//! | [`Era::Both`] | rmcp's dual-era default: modern requests statelessly, `initialize` opens a legacy session. |
//!
//! ## What every backend offers
//!
//! Every text result starts with `<name>: ` so tests see who answered.
//!
//! | tools | result |
//! |---|---|
//! | `echo {text}` | text `<name>: <text>` |
//! | `add {a, b}`, `get-sum {a, b}` | `structuredContent` `{"sum": a+b}` (an integer when both are), text `<name>: <sum>` |
//! | `fail` | `isError: true`, text `<name>: failed on purpose` |
//! | `slow {steps=3, delay_ms=100, pad=0}` | per step `1..=steps`: `notifications/progress` (`progress: step, total: steps`, message `<name>: step i/n`, filled with `x` to `pad` bytes, at most 1 MiB) when the request has a progress token, and an info `notifications/message` (`logger: <name>`, data `{"message": …}`) when logging is on; `delay_ms` between steps; then text `<name>: done`. Stops when the request is cancelled. |
//! | `ask` | modern: MRTR — `input_required` with `inputRequests.name` (`elicitation/create`, form with a string property `name`) and a sealed `requestState`; the retry with `inputResponses.name` gets `input_required` for `color` with a new state carrying the name; the next retry gets text `<name>: <who> likes <color>`. A tampered or foreign `requestState`, or `inputResponses` without one, is `-32602`; a client that did not declare elicitation gets `-32021`; a declined answer gives an `isError` result. Legacy sessions: two real `elicitation/create` requests on the call's stream, same final text. |
//! | `headers` | the call's HTTP headers as `{lowercased name: value}`: in `structuredContent.headers` and as text `<name>: <json>` |
//! | `touch {uri?}` (only with [`BackendSpec::touch_tool`]) | sends change notifications, see below; text `<name>: touched [<uri>]`, `structuredContent` `{"subscriptions": n, "sessions": m}` (listeners reached) |
//! | `long_task {delay_ms=200}` (only with [`BackendSpec::tasks`]) | a 2026-07-28 request whose `clientCapabilities` declare `extensions["io.modelcontextprotocol/tasks"]` (on a modern or dual-era backend) gets a `CreateTaskResult` at once (`resultType: "task"`, `status: "working"`, `pollIntervalMs: 50`, `ttlMs: 300000`) and the task completes after `delay_ms` with text `<name>: task done`; `tasks/cancel` ends it as `cancelled` (the call counts as cancelled). Any other request waits `delay_ms` and gets the same text synchronously. |
//! | `tool_00` … (see [`BackendSpec::extra_tools`]) | text `<name>: tool_NN <text>` |
//!
//! Logging: modern requests get log messages only with `_meta["io.modelcontextprotocol/logLevel"]`
//! at `info` or lower; legacy sessions get them unless `logging/setLevel` set a higher level.
//!
//! Resources: `test://<name>/static` (text `static from <name>`) and the template
//! `test://<name>/item/{id}` (text `item <id> from <name>`); any other URI is resource-not-found:
//! `-32002` for legacy requests, `-32602` for modern ones (rmcp's version handling).
//!
//! Prompt `greet` (required argument `who`): one user message `Hello <who> from <name>`.
//! `completion/complete` for `ref/prompt` `greet`, argument `who`: `["alice", "bob"]` filtered by
//! the typed prefix.
//!
//! Change notifications: `touch` (or [`TestBackend::touch`]) sends, in this order,
//! `notifications/resources/updated` for `uri` (when given), `notifications/resources/list_changed`
//! and `notifications/tools/list_changed`:
//!
//! - to every open 2026-07-28 `subscriptions/listen` stream, as far as its acknowledged filter
//!   allows (the backend accepts `toolsListChanged`, `resourcesListChanged` and the
//!   `resourceSubscriptions` URIs it can read; `promptsListChanged` is not offered), tagged with
//!   the listen's `_meta["io.modelcontextprotocol/subscriptionId"]` by rmcp;
//! - to every live legacy session on its GET stream: both list changes always, the update only
//!   when the session sent `resources/subscribe` for that URI (unknown URIs are `-32002`). A
//!   message sent while the session has no GET stream open is lost.
//!
//! `tools/list_changed` comes last, so a reader that sees it has seen the rest.
//! [`TestBackend::subscriptions`] and [`TestBackend::sessions_subscribed_to`] tell a test when a
//! listener is in place.
//!
//! Tasks (only with [`BackendSpec::tasks`], modern and dual-era backends): the capabilities'
//! `extensions` carry `io.modelcontextprotocol/tasks`, and `tasks/get` (the `DetailedTask`, with
//! `result` once completed), `tasks/update` and `tasks/cancel` are served by rmcp's
//! `TaskManager` (unknown ids: `-32602`; a request that does not declare the extension: `-32021`).
//! [`TestBackend::task_ids`] lists the raw ids minted; [`TestBackend::stop`] aborts and forgets
//! every task. A `subscriptions/listen` naming `taskIds` is served by the backend itself (rmcp
//! does not route task notifications yet): it acknowledges the ids it knows (and nothing else of
//! the filter), then sends `notifications/tasks` (the full `DetailedTask`) whenever a named task's
//! status or status message changes.
//!
//! Capabilities: tools (`listChanged`), resources (`subscribe`, `listChanged`), prompts,
//! completions, logging. Lists follow
//! [`BackendSpec::page_size`] (opaque cursors; a bad cursor is `-32602`); modern list, read and
//! discover results carry [`BackendSpec::ttl_ms`] / [`BackendSpec::cache_scope`] when set (rmcp
//! fills `0`/`private` otherwise).
//!
//! ## Observing
//!
//! - [`TestBackend::requests`]: method, target, every header and the body of each HTTP request,
//!   recorded before MCP processing (so also the ones rmcp or the legacy filter rejected);
//!   [`BackendSpec::record_requests`]`(false)` turns it off for load tests.
//! - [`TestBackend::calls`] / [`calls_started`](TestBackend::calls_started) /
//!   [`calls_finished`](TestBackend::calls_finished) /
//!   [`calls_cancelled`](TestBackend::calls_cancelled): a drop guard inside each tool call
//!   counts it; a call is cancelled when its handler is dropped or sees its cancellation token
//!   fire (client disconnect on a modern stream, `notifications/cancelled`, backend stop).
//!
//! Other details: `Host` is not validated (gateways may forward any), `TCP_NODELAY` is set on
//! accepted sockets, rmcp keeps completed legacy streams 5 s instead of 60 s, and a backend
//! serves HTTP/1.1 and HTTP/2 (prior knowledge).

mod backend;
mod counters;
mod http_server;
mod legacy_filter;
mod recorder;
mod server;
mod spec;
mod task_listen;

pub use backend::TestBackend;
pub use counters::ToolCalls;
pub use legacy_filter::LEGACY_REJECTION_BODY;
pub use recorder::RecordedRequest;
/// rmcp's cache scope, re-exported for [`BackendSpec::cache_scope`].
pub use rmcp::model::CacheScope;
pub use server::Touched;
pub use spec::{BackendSpec, Era};
