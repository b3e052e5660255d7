//! The tenant-isolation suite (issue #17) against the `mcp-gateway` binary over real sockets:
//! one module per topic, each test with two or three principals and a control that shows it can
//! fail.

#[path = "../support/mod.rs"]
mod support;

mod auth;
