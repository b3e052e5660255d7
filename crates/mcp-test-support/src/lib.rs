//! # mcp-test-support
//!
//! Helpers shared by the workspace's tests: the one place for them (no test binary keeps its own
//! `support` copy). Not published. The default build stays light (hyper, tokio, serde_json); the
//! in-process gateway stack, which pulls in the layer crates, is behind the `stack` feature.
//!
//! | item | what it is for |
//! |---|---|
//! | [`RedisServer`] | a private `redis-server` on a free loopback port, which tests can stop and restart to simulate outages |
//! | [`RedisSentinelSet`], [`RedisClusterSet`] | a primary, a replica and three sentinels; a three-master cluster: kill, promote, restart |
//! | [`RedisLoading`], [`RedisReplica`] | a server still loading its data set (`-LOADING`); a read-only replica (`-READONLY` to writes) |
//! | [`TempDir`] | a unique temporary directory removed on drop (no extra dependency) |
//! | [`exchange`], [`EventStream`] | one plain-HTTP request: the response with its body unread, or its SSE answer read event by event while it stays open |
//! | [`Forwarder`] | a TCP forwarder standing for a proxy or load balancer in front of a server, counting the HTTP requests it passes |
//! | [`PortedChild`] | a test server child process that reports `PORT <n>` on stdout, killed on drop |
//! | [`ShiftedClock`], [`SteppedClock`], [`unix_now`] | a wall clock a test moves forward, to step past an absolute expiry instead of sleeping; a monotonic clock that stands still until the test steps it past an interval; seconds since the epoch |
//! | [`poll_until`] | polls a condition until it holds or a limit passes (for events with no signal to await) |
//! | [`serve`] | a tower service on a fresh loopback port (hyper, HTTP/1.1 and HTTP/2) |
//! | [`send`], [`send_body`], [`Reply`], [`rpc_error`], [`rpc_error_200`] | one request, its answer read to the end, with JSON / SSE / JSON-RPC error readers |
//! | [`rpc_request`], [`modern_request_with_meta`], [`modern_meta_with`], [`post_modern`], [`legacy_headers`], [`ask_params`], [`accept_elicitation`] | the JSON-RPC and MCP messages tests send, in both eras |
//! | [`message_error`], [`result_text`], [`tool_names`] | readers of a JSON-RPC error, a tool result, a tool list |
//! | [`peers`] | the real interop peers `cargo xtask test` installs at the repository root (Python SDK venvs, npm project) |
//! | [`stack`] (feature `stack`) | the in-process gateway stack (vhost, claims, config store, router) with tokens and request builders |
//!
//! ## Redis in tests
//!
//! [`RedisServer::start`] looks for the binary in `$REDIS_SERVER_BIN`, then on `PATH`. When it is
//! missing the Redis tests are skipped with a loud message on stderr, except when `CI=true`: a CI
//! run must not pass silently without Redis, so the helper panics there. When `REDIS_URL` is set,
//! that external server is used instead; it cannot be stopped or restarted, so fault-injection tests
//! ask [`RedisServer::controllable`] first and skip (loudly) when it answers `None`.
//!
//! ```
//! use mcp_test_support::RedisServer;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! // `None` means "no redis-server here": the test is skipped (a message was printed).
//! let Some(redis) = RedisServer::start().await else { return };
//! assert!(redis.url().starts_with("redis://"));
//! assert!(redis.port() > 0);
//! # }
//! ```

mod clock;
mod event_stream;
mod forwarder;
mod mcp;
pub mod peers;
mod poll;
mod ported_child;
mod redis_server;
mod redis_states;
mod redis_topologies;
mod reply;
mod serve;
#[cfg(feature = "stack")]
pub mod stack;
mod temp_dir;

pub use clock::{ShiftedClock, SteppedClock, unix_now};
pub use event_stream::{EventStream, exchange};
pub use forwarder::Forwarder;
pub use mcp::{
    accept_elicitation, ask_params, legacy_headers, message_error, modern_meta_with,
    modern_request_with_meta, post_modern, result_text, rpc_request, tool_names,
};
pub use poll::poll_until;
pub use ported_child::PortedChild;
pub use redis_server::RedisServer;
pub use redis_states::{RedisLoading, RedisReplica};
pub use redis_topologies::{RedisClusterSet, RedisSentinelSet, SENTINEL_MASTER};
pub use reply::{Reply, rpc_error, rpc_error_200, send, send_body, sse_messages};
pub use serve::serve;
pub use temp_dir::TempDir;
