//! Tenant isolation (issue #17) against the real `mcp-gateway` binary over real sockets: one
//! module per topic, each test with two principals (or two settings) and a control.

#[path = "../support/mod.rs"]
mod support;

mod destinations;
mod stdio;
