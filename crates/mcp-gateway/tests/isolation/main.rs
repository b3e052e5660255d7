//! The tenant-isolation suite (issue #17, SECURITY.md guarantees 3 and 4) against the real
//! `mcp-gateway` binary over real sockets: one module per topic, each test with two or three
//! principals (or two settings) and a control that shows the test can fail.

#[path = "../support/mod.rs"]
mod support;

mod auth;
mod bounds;
mod destinations;
mod ids;
mod scope;
mod stdio;
