//! # mcp-core
//!
//! The wire level shared by the MCP gateway layer crates. Nothing here does I/O; every other crate
//! of the workspace builds on these types.
//!
//! | module | what it holds |
//! |---|---|
//! | [`principal`] | [`Principal`], the authenticated caller (issuer + subject), a request extension |
//! | [`virtual_host_id`] | [`VirtualHostId`], the virtual host a request addresses, a request extension |
//! | [`body`] | [`ResponseBody`], inner body or locally generated body, `Default` when the inner is |
//! | [`http_error`] | [`detail_response`], the `{"detail":"..."}` JSON error responses of the HTTP layers |
//!
//! Data flows between layers through request extensions keyed by these newtypes, never bare
//! strings, so a layer reads what another produced without depending on the producer's crate.

pub mod body;
pub mod http_error;
pub mod principal;
pub mod virtual_host_id;

pub use body::ResponseBody;
pub use http_error::{APPLICATION_JSON, detail_body, detail_response};
pub use principal::Principal;
pub use virtual_host_id::VirtualHostId;
