//! The examples of the MCP gateway layer crates (`examples/`); this library is empty but for the
//! README's Rust snippet, compiled and type-checked as a doc test.

/// The README's snippet (`cargo test --doc -p mcp-gateway-workspace`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
