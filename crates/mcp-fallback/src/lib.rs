//! # mcp-fallback
//!
//! Fallback for tower services (book: docs/src/architecture.md): when the primary fails (by a classifier, or its
//! breaker is open), try alternates in priority order (replica URLs of the same backend), then a
//! stale answer for list and discover calls (the last good one within a maximum staleness, marked
//! degraded), then give up with the original error, or, over HTTP, a clear JSON-RPC error.
//! A `tools/call` goes to an alternate only when the primary provably never received it or the
//! tool is annotated `readOnlyHint` / `idempotentHint`. The fallback path has its own timeout.
//!
//! The pieces are usable on their own too:
//!
//! | item | what it is |
//! |---|---|
//! | [`may_replay`], [`FailureKind`], [`ToolHints`], [`READ_METHODS`] | the replay rule: may a failed request be sent to another backend? |
//! | [`StaleCache`], [`Stale`] | the last good value per key, bounded, with its age (`tokio::time`) |
//! | [`degraded`] | marks a JSON-RPC result as stale in `_meta["mcp-gateway/degraded"]`, other bytes kept |
//! | [`FallbackLayer`] / [`Fallback`] | the tower layer for any request/response: answers [`Served`] |
//! | [`HttpFallbackLayer`] / [`HttpFallback`] | the same for HTTP: keeps `S::Error`, answers a JSON-RPC error when all fails |
//! | [`DetectFailure`], [`ErrorDetector`], [`HttpDetector`], [`FromClassify`], [`FailureKindOf`] | what is a failure, and whether the backend may have seen the request |
//! | [`ReplayPolicy`], [`NeverSentOnly`], [`McpReplay`], [`McpCall`] | the replay guard of the layers |
//! | [`StaleSource`], [`CacheSource`], [`NoStale`] | the stale step of the layers |
//! | [`ServedBy`], [`FallbackReport`] | who answered (for metrics on degraded answers) |
//!
//! ## Example
//!
//! A primary that cannot be reached (connection refused: it never saw the request) and a
//! replica that answers:
//!
//! ```
//! use std::io;
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use mcp_fallback::{FailureKind, FallbackLayer, ServedBy};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), io::Error> {
//! let primary = service_fn(|_req: &'static str| async {
//!     Err::<String, _>(io::Error::from(io::ErrorKind::ConnectionRefused))
//! });
//! let replica_calls = Arc::new(AtomicUsize::new(0));
//! let replica = {
//!     let calls = replica_calls.clone();
//!     service_fn(move |req: &'static str| {
//!         calls.fetch_add(1, Ordering::SeqCst);
//!         async move { Ok::<_, io::Error>(format!("replica: {req}")) }
//!     })
//! };
//!
//! let svc = ServiceBuilder::new()
//!     .layer(FallbackLayer::new([replica]))
//!     .service(primary);
//!
//! let served = svc.oneshot("tools/list").await?;
//! assert_eq!(served.by(), ServedBy::Alternate(0));
//! assert_eq!(served.report().unwrap().failure.kind, FailureKind::NeverSent);
//! assert_eq!(served.into_inner(), "replica: tools/list");
//! assert_eq!(replica_calls.load(Ordering::SeqCst), 1);
//! # Ok(())
//! # }
//! ```
//!
//! The default replay guard ([`NeverSentOnly`]) would not have sent the request to the replica
//! after a timeout or a reset; [`McpReplay`] (or a closure over [`may_replay`]) applies the MCP
//! rule, which also replays reads and read-only or idempotent tools.
//!
//! ## The steps
//!
//! 1. **Primary.** The request is cloned once and the primary called. If the detector finds no
//!    failure, the answer is returned as is (and handed to the stale source's `store`): nothing
//!    else happens and nothing else is allocated.
//! 2. **Alternates.** After a failure the fallback deadline starts ([`FallbackLayer::timeout`],
//!    default [`DEFAULT_TIMEOUT`]). The next alternate is tried while the [`ReplayPolicy`] allows
//!    it *after the latest failure*: a request that is not safe to replay moves on only while
//!    every attempt so far failed with [`FailureKind::NeverSent`]. Each alternate is a clone
//!    driven to readiness, then called; one that is not ready when the deadline passes, or still
//!    running, is dropped.
//! 3. **Stale.** The [`StaleSource`] is asked (synchronous, so even after the deadline); it
//!    returns a marked answer and its age.
//! 4. **Exhausted.** The primary's own result (Hystrix/Failsafe: the original error, not the
//!    last alternate's); over HTTP, a JSON-RPC error response.
//!
//! `poll_ready` is the primary's readiness and never fails: a primary that errors in
//! `poll_ready` never saw the request, so the next call goes straight to step 2 with that error.
//!
//! ## In the router
//!
//! Every upstream call of `mcp-router` goes through a backend stack whose outer layer is a
//! [`FallbackLayer`]: the primary address behind its breaker, the `replicas` as alternates (each
//! behind its own breaker), [`McpReplay`] as the replay guard (the request carries its method and
//! the called tool's [`ToolHints`], read from its definition in the backend's `tools/list`), the
//! per-call timeout times the attempts as the fallback deadline. Some pieces are still used on
//! their own:
//!
//! - **Describing** a backend (`server/discover`, `initialize`) walks the replicas (a
//!   read: always replayable), each behind its breaker.
//! - **Stale**: the router keeps each backend's last good list/discover `result` per caller and
//!   merges [`degraded::mark_stale`]`(&result, age)` in place of a failed backend's contribution
//!   to a fan-out: a step after the stack, on the parsed result of the whole answer, not a
//!   [`StaleSource`] on the stream the stack answers with (a good head says nothing yet).
//! - **Metrics**: count answers by [`ServedBy::as_str`] and failures by [`FailureKind::as_str`].

mod failure;
mod future;
mod layer;
mod replay;
mod served;
mod service;
mod stale_cache;
mod stale_source;

pub mod degraded;

#[cfg(test)]
mod tests;

pub use failure::{Attempt, DetectFailure, ErrorDetector, FailureInfo, FromClassify, HttpDetector};
pub use future::{HttpResponseFuture, ResponseFuture};
pub use layer::{DEFAULT_TIMEOUT, FallbackLayer, HttpFallbackLayer};
/// `mcp-core`'s failure kinds, shared with circuit breakers (`mcp-breaker` implements
/// [`FailureKindOf`] for its refusals): re-exported so that a fallback user needs no other import.
pub use mcp_core::outcome::{FailureKind, FailureKindOf, failure_kind_of_error};
pub use replay::{
    McpCall, McpReplay, NeverSentOnly, READ_METHODS, ReplayPolicy, ToolHints, is_read_method,
    may_replay,
};
pub use served::{FallbackReport, Served, ServedBy};
pub use service::{Fallback, HttpFallback};
pub use stale_cache::{Stale, StaleCache};
pub use stale_source::{CacheSource, NoStale, StaleSource};
