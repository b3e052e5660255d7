//! Tenant isolation (issue #17) against the `mcp-gateway` binary over real sockets: one module per
//! topic, each with two or three principals and a control that shows the test can fail.

#[path = "../support/mod.rs"]
mod support;

mod ids;
