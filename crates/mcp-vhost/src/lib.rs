//! # mcp-vhost
//!
//! A tower layer that reads the virtual host id from an MCP endpoint path
//! (`/servers/{virtual_host_id}/mcp` by default) and inserts it into the request extensions as a
//! typed [`VirtualHostId`]. Anything else gets `400 Bad Request` with a short JSON body
//! (`{"detail":"Not an MCP endpoint path"}` or `{"detail":"Invalid virtual host id"}`), produced as
//! a response, never as a service error.
//!
//! | item | what it is |
//! |---|---|
//! | [`VhostLayer`] / [`Vhost`] | the layer and its service |
//! | [`PathPattern`] | mount prefix, suffix, id charset and length; [`PathPattern::well_known`] gives the RFC 9728 `/.well-known/oauth-protected-resource/…` variant |
//! | [`ResponseFuture`] | the service's named future ([`mcp_core::DetailFuture`]) |
//!
//! Ids are percent-decoded, then checked: 1–128 bytes of `A-Z a-z 0-9 . _ ~ -` by default (the URI
//! unreserved set, so an id never needs escaping), extendable with [`PathPattern::allow_chars`];
//! `/` is never part of an id, nor are the dot-segments `.` and `..`. The path is read as the inner service sees it, so when nested under a
//! router prefix (axum `nest`) the pattern is relative to that prefix.
//!
//! ```
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::{BodyExt, Full};
//! use mcp_core::VirtualHostId;
//! use mcp_vhost::VhostLayer;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let svc = ServiceBuilder::new().layer(VhostLayer::new()).service(service_fn(
//!     |req: Request<Full<Bytes>>| async move {
//!         let id = req.extensions().get::<VirtualHostId>().unwrap().to_string();
//!         Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(id))))
//!     },
//! ));
//!
//! let ok = svc.clone().oneshot(Request::post("/servers/team-a/mcp").body(Full::default()).unwrap()).await.unwrap();
//! assert_eq!(ok.status(), StatusCode::OK);
//! assert_eq!(ok.into_body().collect().await.unwrap().to_bytes(), "team-a");
//!
//! let bad = svc.oneshot(Request::post("/elsewhere").body(Full::default()).unwrap()).await.unwrap();
//! assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
//! assert_eq!(bad.headers()["content-type"], "application/json");
//! assert_eq!(bad.into_body().collect().await.unwrap().to_bytes(), r#"{"detail":"Not an MCP endpoint path"}"#);
//! # }
//! ```

mod layer;
mod path_pattern;
mod service;

/// The response future of [`Vhost`]: the inner future, or the ready 400 answer.
pub type ResponseFuture<F> = mcp_core::DetailFuture<F>;
pub use layer::VhostLayer;
pub use mcp_core::VirtualHostId;
pub use path_pattern::{PathError, PathPattern, WELL_KNOWN_PREFIX};
pub use service::{INVALID_ID_DETAIL, NOT_AN_ENDPOINT_DETAIL, Vhost};
