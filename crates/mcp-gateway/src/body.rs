//! [`GatewayBody`]: the one response body type of the gateway's services.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;

pub(crate) use mcp_core::BoxError;

/// The response body of [`GatewayService`](crate::GatewayService) and
/// [`AdminService`](crate::AdminService): streamed router answers (SSE) and locally generated
/// answers alike. `Default` (empty), so tower-http layers that need it can wrap the service.
pub type GatewayBody = UnsyncBoxBody<Bytes, BoxError>;
