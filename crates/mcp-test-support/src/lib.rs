//! # mcp-test-support
//!
//! Helpers shared by the workspace's tests. Not published.
//!
//! | item | what it is for |
//! |---|---|
//! | [`RedisServer`] | a private `redis-server` on a free loopback port, which tests can stop and restart to simulate outages |
//! | [`RedisSentinelSet`], [`RedisClusterSet`] | a primary, a replica and three sentinels; a three-master cluster: kill, promote, restart |
//! | [`TempDir`] | a unique temporary directory removed on drop (no extra dependency) |
//! | [`exchange`], [`EventStream`] | one plain-HTTP request: the response with its body unread, or its SSE answer read event by event while it stays open |
//! | [`PortedChild`] | a test server child process that reports `PORT <n>` on stdout, killed on drop |
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

mod event_stream;
mod ported_child;
mod redis_server;
mod redis_topologies;
mod temp_dir;

pub use event_stream::{EventStream, exchange};
pub use ported_child::PortedChild;
pub use redis_server::RedisServer;
pub use redis_topologies::{RedisClusterSet, RedisSentinelSet, SENTINEL_MASTER};
pub use temp_dir::TempDir;
