//! # mcp-bench
//!
//! The benchmark harness of the MCP gateway, driven by `cargo xtask bench` (book: docs/src/performance.md). Not
//! published; nothing here runs in CI beyond its own fast tests.
//!
//! | module | what it holds |
//! |---|---|
//! | [`echo`] | [`EchoBackend`]: a minimal, fast MCP server of either era on plain hyper (the SDK-built one, rmcp's, comes from `mcp-test-backends`) |
//! | [`protocol`] | [`Era`], [`Endpoint`] and the MCP requests of both eras |
//! | [`client`] | [`McpClient`]: one keep-alive connection speaking one era |
//! | [`load`] | closed- and open-loop drivers ([`load::run`]) recording HDR histograms |
//! | [`stats`] | [`Summary`]: throughput and latency percentiles |
//! | [`proc_stats`] | RSS and CPU time of a process from `/proc`; programs on `PATH` |
//! | [`gateway`] | [`GatewayProcess`]: the release `mcp-gateway` binary as a child process |
//! | [`haproxy`] | [`HaproxyProcess`]: HAProxy as a plain HTTP/1.1 reverse proxy, the floor |
//! | [`syscalls`] | [`syscalls::Strace`]: system calls per run (`--profile`) |
//! | [`scenario`] | every benchmark scenario with alternating A/B rounds ([`scenario::run`]) |
//! | [`instructions`] | [`instructions::InstructionReport`]: gateway instructions per operation under callgrind (`--instructions`) |
//! | [`plot`] | [`plot::LineChart`]: a small SVG line chart |
//! | [`curves`] | the scale curves (clients, backends, idle sessions) as charts and tables |
//! | [`report`] | [`Report`]: JSON, `REPORT.md`, comparison against a baseline |
//!
//! Open-loop runs measure each request from its *intended* send time, so a server that stalls
//! cannot hide the queue it builds (no coordinated omission).
//!
//! ```
//! use std::time::Duration;
//! use mcp_bench::load::{self, Operation, Pace, Workload};
//! use mcp_bench::{EchoBackend, Endpoint, Era};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let backend = EchoBackend::builder().era(Era::Legacy).spawn().await.unwrap();
//! let result = load::run(&Workload {
//!     endpoints: vec![Endpoint::new(backend.addr(), "/mcp")],
//!     era: Era::Legacy,
//!     operation: Operation::CallTool,
//!     concurrency: 2,
//!     pace: Pace::Open { rate: 200.0 },
//!     warmup: Duration::ZERO,
//!     duration: Duration::from_millis(50),
//! })
//! .await;
//! assert_eq!(result.errors, 0, "{:?}", result.first_error);
//! assert!(result.ops > 0);
//! assert!(result.summary().p50_us > 0.0);
//! # }
//! ```

pub mod breakdown;
pub mod client;
pub mod curves;
pub mod echo;
pub mod gateway;
pub mod haproxy;
pub mod instructions;
pub mod load;
pub mod plot;
pub mod proc_stats;
pub mod protocol;
pub mod report;
pub mod scenario;
pub mod stats;
pub mod syscalls;

pub use client::{McpClient, OpError};
pub use echo::{EchoBackend, EchoBackendBuilder};
pub use gateway::{GatewayBin, GatewayProcess, RuntimeMode, SessionStoreKind};
pub use haproxy::HaproxyProcess;
pub use protocol::{Endpoint, Era};
pub use report::Report;
pub use stats::Summary;
