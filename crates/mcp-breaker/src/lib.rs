//! # mcp-breaker
//!
//! A circuit breaker for tower services: per MCP backend in the gateway (book: docs/src/architecture.md), or around
//! any client. It stops calling a backend that keeps failing, fails those calls fast instead, and
//! lets a few probe calls through after a while to find out whether the backend is back.
//!
//! | item | what it is |
//! |---|---|
//! | [`CircuitBreaker`] / [`BreakerBuilder`] | the shared state machine and its validated builder |
//! | [`CircuitBreaker::try_acquire`] → [`Permit`] → [`Permit::record`] | the non-service API (routers, fan-out); the layers below use it too |
//! | [`BreakerLayer`] / [`BreakerService`] | client stacks: an open breaker fails with [`BreakerError::Open`] `{ retry_after }` |
//! | [`HttpBreakerLayer`] / [`HttpBreakerService`] | HTTP stacks: an open breaker answers [`open_response`] (503, `Retry-After`, JSON-RPC error), `S::Error` unchanged |
//! | [`Classify`], [`Outcome`], [`DefaultClassifier`], [`McpClassifier`] | failure classification: `Success` \| `Failure` \| `Ignore` from the result and latency |
//! | [`Settle`], [`AtEnd`], [`CarryPermit`], [`Now`] | when the outcome is recorded: at once (this crate's classifiers, closures, any [`Classify`] in [`Now`]), or by the response at the end of a streamed answer ([`AtEnd`]) |
//! | [`AtEnd`], [`CarryPermit`] | deferred classification: the response keeps the permit until its streamed answer ends |
//! | [`BreakerConfig`] | serde config (`[breaker]` table, backend overrides), validated at build |
//! | [`BreakerHandle`] | operator control: state, force open / force closed / disable / reset |
//! | [`BreakerRegistry`] | one shared breaker per key (backend) |
//! | [`metric`] | metric names (`mcp_breaker_*`, through the `metrics` facade) |
//!
//! ## States
//!
//! ```text
//!                trip: consecutive_failures in a row, or failure_rate / slow_call_rate
//!                      reached with at least minimum_calls in the sliding window
//!          ┌──────────┐ ─────────────────────────────────────────────► ┌──────────┐
//! start ─► │  Closed  │                                                 │   Open   │ rejects, retry_after =
//!          └──────────┘                                                 └──────────┘ rest of the open period
//!               ▲                                                         │      ▲
//!               │ half_open_success_threshold          first call after   │      │ a probe fails or is slow,
//!               │ probes succeeded                     the open period    │      │ or probes are stuck past
//!               │                                                         ▼      │ max_half_open_ms: trip again
//!               │                                             ┌──────────────┐   │ (longer open period)
//!               └──────────────────────────────────────────── │   HalfOpen   │ ──┘
//!                                                             └──────────────┘
//!                                       admits at most half_open_probes probes in flight, rejects the rest
//!
//! Operator (BreakerHandle), until the next operator action:
//!   ForcedOpen   rejects every call          ForcedClosed  admits every call, counts metrics, never trips
//!   Disabled     admits, records nothing     reset()       back to Closed, counters and trip history cleared
//! ```
//!
//! The open period of the n-th trip since the breaker last closed is `open_ms` grown by
//! `open_backoff` (constant, × n, or × 2^(n−1)), capped at `max_open_ms`, then shortened by a
//! random fraction below `open_jitter` ([`OpenPolicy`]), so backends tripped together do not
//! come back in lockstep and the cap is never exceeded.
//!
//! ## Behaviour worth knowing
//!
//! - **Readiness**: `poll_ready` only forwards the inner service's readiness. "Open" is never a
//!   `poll_ready` error (axum and hyper treat those as fatal); it comes from the response
//!   future, which resolves at once without calling the inner service.
//! - **Probes**: a half-open permit is taken in `call` and moved into the response future. A
//!   future dropped before completion (client went away, outer timeout) releases its slot and
//!   records nothing; so does a permit dropped without [`Permit::record`].
//! - **Stale calls**: a call admitted before a state change (still running when the breaker
//!   tripped) is counted in metrics but does not move the new state.
//! - **Lazy transitions**: open → half-open happens on the first call after the period, and the
//!   half-open time limit is checked on calls; no timers or background tasks. [`CircuitBreaker::state`]
//!   is one atomic load. A half-open period past `max_half_open_ms` reopens the breaker only when
//!   probes are still in flight (stuck); a quiet one (its probes dropped or ignored) starts over.
//! - **Sharing**: state lives in an `Arc` created when the breaker is built; every layer, service
//!   clone (hyper clones per request), permit and handle shares it.
//! - **Time**: all timing uses `tokio::time::Instant`, so `tokio::time::pause()` drives it in tests.
//! - **Logging and metrics**: transitions are logged with `tracing` (warn on open, info
//!   otherwise) and counted with the `metrics` facade (see [`metric`]).
//!
//! ## Example
//!
//! A client wrapped in a breaker that trips after three failures, fails fast while open and
//! recovers after the open period (time is paused, so this runs instantly):
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
//! use std::time::Duration;
//!
//! use mcp_breaker::{BreakerError, BreakerState, CircuitBreaker};
//! use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let breaker = CircuitBreaker::builder("weather")
//!     .consecutive_failures(3)
//!     .open_duration(Duration::from_secs(5))
//!     .jitter(0.0)
//!     .build()?;
//! let handle = breaker.handle();
//!
//! let healthy = Arc::new(AtomicBool::new(false));
//! let calls = Arc::new(AtomicUsize::new(0));
//! let backend = {
//!     let (healthy, calls) = (healthy.clone(), calls.clone());
//!     service_fn(move |_req: &'static str| {
//!         calls.fetch_add(1, Ordering::SeqCst);
//!         let up = healthy.load(Ordering::SeqCst);
//!         async move {
//!             if up { Ok("pong") } else { Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)) }
//!         }
//!     })
//! };
//! let mut svc = ServiceBuilder::new().layer(breaker.layer()).service(backend);
//!
//! for _ in 0..3 {
//!     let err = svc.ready().await?.call("ping").await.unwrap_err();
//!     assert!(matches!(err, BreakerError::Inner(_)));
//! }
//! assert_eq!(handle.state(), BreakerState::Open);
//!
//! // open: fails fast, the backend is not called
//! let started = tokio::time::Instant::now();
//! let err = svc.ready().await?.call("ping").await.unwrap_err();
//! assert!(matches!(err, BreakerError::Open { retry_after } if retry_after == Duration::from_secs(5)));
//! assert_eq!(started.elapsed(), Duration::ZERO);
//! assert_eq!(calls.load(Ordering::SeqCst), 3);
//!
//! // the backend recovers; after the open period one probe goes through and closes the breaker
//! healthy.store(true, Ordering::SeqCst);
//! tokio::time::advance(Duration::from_secs(5)).await;
//! assert_eq!(svc.ready().await?.call("ping").await?, "pong");
//! assert_eq!(handle.state(), BreakerState::Closed);
//! # Ok(())
//! # }
//! ```
//!
//! ## Classification
//!
//! A [`Classify`] turns a call's `Result` and latency into [`Outcome::Success`],
//! [`Outcome::Failure`] or [`Outcome::Ignore`] (not recorded). Closures implement it.
//! [`McpClassifier`] is the MCP rule set (book: docs/src/architecture.md) for `http::Response<B>` results: errors
//! (connect, timeout), 5xx, 408/429, redirects and 2xx answers that are neither JSON nor SSE are
//! failures; everything else is a success, so JSON-RPC errors and `isError` tool results (which
//! live in the body) count as the backend working. Callers that parse the JSON-RPC answer use
//! [`McpClassifier::classify_message`] / [`McpClassifier::classify_body`]. Slow calls are decided by
//! the breaker from the latency (`slow_call_ms`), not by the classifier.
//!
//! ## In an HTTP stack
//!
//! [`HttpBreakerLayer`] keeps the inner error type and answers an open breaker with a 503, so it
//! goes straight into hyper or axum; see [`open_response`] for the exact answer.
//!
//! ## Configuration
//!
//! [`BreakerConfig`] is the gateway's `[breaker]` table (defaults `consecutive_failures = 5`,
//! `open_ms = 5000`, `half_open_probes = 1`); a backend's `breaker` object overrides single keys
//! through [`BreakerConfig::with_overrides`].

mod breaker;
mod classify;
mod config;
mod error;
mod future;
mod layer;
pub mod metric;
mod registry;
mod service;
mod state;
mod window;

#[cfg(test)]
mod tests;

pub use breaker::{
    BreakerBuilder, BreakerHandle, BreakerSnapshot, CircuitBreaker, CircuitOpen, Permit,
};
pub use classify::{AtEnd, CarryPermit, DefaultClassifier, McpClassifier, Now, Settle};
pub use config::{
    Backoff, BreakerConfig, BreakerConfigError, DEFAULT_CONSECUTIVE_FAILURES,
    DEFAULT_HALF_OPEN_PROBES, DEFAULT_MAX_HALF_OPEN_MS, DEFAULT_MAX_OPEN_MS, DEFAULT_MINIMUM_CALLS,
    DEFAULT_OPEN_JITTER, DEFAULT_OPEN_MS, DEFAULT_WINDOW_SIZE, OpenPolicy, WindowConfig,
    WindowKind,
};
pub use error::BreakerError;
pub use future::{HttpResponseFuture, ResponseFuture};
pub use layer::{BreakerLayer, HttpBreakerLayer};
/// `mcp-core`'s outcome classification, shared with `mcp-fallback`: re-exported so that a
/// breaker user needs no other import.
pub use mcp_core::outcome::{Classify, Outcome};
pub use registry::{BreakerRegistry, OTHER_METRIC_LABEL};
pub use service::{BreakerService, HttpBreakerService, open_response};
pub use state::BreakerState;
