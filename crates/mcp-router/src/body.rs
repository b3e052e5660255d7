//! [`McpBody`]: the router's response body, for JSON answers and streamed SSE alike.

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};

pub(crate) use mcp_core::BoxError;

/// The router's response body: a boxed body over `Bytes` that is [`Default`] (empty), so
/// tower-http layers that need `ResBody: Default` stack outside the router.
pub type McpBody = UnsyncBoxBody<Bytes, BoxError>;

/// A body holding `bytes`.
pub(crate) fn full(bytes: impl Into<Bytes>) -> McpBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub(crate) fn empty() -> McpBody {
    McpBody::default()
}

/// A body streaming the chunks of `stream`.
pub(crate) fn streaming<S>(stream: S) -> McpBody
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    StreamBody::new(stream.map(|chunk| Ok::<_, BoxError>(Frame::data(chunk)))).boxed_unsync()
}
