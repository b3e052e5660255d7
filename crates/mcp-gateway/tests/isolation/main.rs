//! Tenant isolation against the real `mcp-gateway` process: what one principal does never
//! spends, sees or trips what another principal holds. One module per topic.

#[path = "../support/mod.rs"]
mod support;

mod bounds;
