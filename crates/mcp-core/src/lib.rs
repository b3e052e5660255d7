//! # mcp-core
//!
//! The wire level shared by the MCP gateway layer crates. Nothing here does I/O; every other crate
//! of the workspace builds on these types.
//!
//! | module | what it holds |
//! |---|---|
//! | `principal` | [`Principal`], the authenticated caller (issuer + subject), a request extension |
//! | `budget` | [`Budget`], what each principal holds of one kind in bytes and slots, with a share per principal and a ceiling per node for each: charged on an [`Account`] without locks, a [`Slot`] or [`Charge`] given back on drop, [`Spent`] saying which limit refused, [`Refusals`] counting them |
//! | `valid_until` | [`ValidUntil`], when the request's credentials expire (token `exp` + leeway), a request extension |
//! | `virtual_host_id` | [`VirtualHostId`], the virtual host a request addresses, a request extension |
//! | `body` | [`ResponseBody`], inner body or locally generated body, `Default` when the inner is |
//! | `detail_future` | [`DetailFuture`], inner future or a ready `{"detail":"..."}` answer |
//! | `http_error` | [`detail_response`], the `{"detail":"..."}` JSON error responses of the HTTP layers |
//! | `jsonrpc` | [`Envelope`] (parse without re-serialising the payload), [`RequestId`], `encode_*` |
//! | [`error_code`] | JSON-RPC and MCP error codes |
//! | `error_object` | [`ErrorObject`], with a constructor per code |
//! | `method` | [`Method`]: every MCP method, its [`MethodKind`], [`RouteKey`], direction and eras |
//! | `protocol_version` | [`ProtocolVersion`] and [`Era`] (legacy 2025 sessions, modern 2026-07-28) |
//! | `raw_object` | [`RawObject`]: edit a JSON object's top level, nested values stay raw bytes |
//! | [`headers`] | MCP header names and the `=?base64?…?=` header value codec |
//! | [`media`] | media types of `Content-Type` values ([`media::essence`], [`media::is_media_type`], [`media::media_kind`]) |
//! | `item_kind` | [`ItemKind`]: tools, prompts or resources |
//! | [`outcome`] | what a finished backend call means: [`outcome::Outcome`] (health, for breakers), [`outcome::FailureKind`] (may it be replayed, for fallbacks) |
//! | `tls` | feature `https`: `tls::ClientTls` (platform roots, private CAs, client certificate) and `tls::https_connector`, the one HTTPS connector of outgoing clients |
//! | [`BoxError`] | the boxed error of generic bodies and services |
//! | [`sse`] | [`sse::SseEvent`] encoder and the streaming [`sse::SseDecoder`] |
//!
//! Modules in backticks are private: their items are re-exported here, one path per item.
//!
//! ## Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `https` | no | the `tls` module: one HTTPS connector builder (hyper-rustls, rustls over aws-lc-rs) with a TLS override |
//!
//! Data flows between layers through request extensions keyed by these newtypes, never bare
//! strings, so a layer reads what another produced without depending on the producer's crate.

mod body;
mod budget;
mod detail_future;
pub mod error_code;
mod error_object;
pub mod headers;
mod http_error;
mod item_kind;
mod jsonrpc;
pub mod media;
mod method;
pub mod outcome;
mod principal;
mod protocol_version;
mod raw_object;
pub mod sse;
#[cfg(feature = "https")]
pub mod tls;
mod valid_until;
mod virtual_host_id;

pub use body::ResponseBody;
pub use budget::{Account, Budget, Charge, Refusals, Slot, Spent};
pub use detail_future::DetailFuture;
pub use error_object::ErrorObject;
pub use http_error::{APPLICATION_JSON, detail_body, detail_response};
pub use item_kind::ItemKind;
pub use jsonrpc::{
    Envelope, EnvelopeError, MessageKind, RequestId, encode_error, encode_notification,
    encode_request, encode_request_object, encode_result,
};
pub use method::{Direction, Eras, Method, MethodKind, RouteKey};
pub use principal::Principal;
pub use protocol_version::{Era, ProtocolVersion, UnknownProtocolVersion};
pub use raw_object::RawObject;
pub use valid_until::ValidUntil;
pub use virtual_host_id::VirtualHostId;

/// The boxed error of generic bodies and services (`http_body::Body::Error: Into<BoxError>`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
