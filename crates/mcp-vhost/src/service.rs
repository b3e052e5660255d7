//! [`Vhost`]: the service that [`VhostLayer`](crate::VhostLayer) produces.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use mcp_core::{DetailFuture, ResponseBody};
use tower_service::Service;

use crate::{PathError, PathPattern};

/// Body of the 400 answer for a path that is not an MCP endpoint.
pub const NOT_AN_ENDPOINT_DETAIL: &str = "Not an MCP endpoint path";
/// Body of the 400 answer for an id with bad characters, length or encoding.
pub const INVALID_ID_DETAIL: &str = "Invalid virtual host id";

/// Middleware that inserts the path's [`VirtualHostId`](mcp_core::VirtualHostId) into the request
/// extensions, or answers `400 Bad Request` with `{"detail":"…"}` itself.
#[derive(Debug, Clone)]
pub struct Vhost<S> {
    inner: S,
    pattern: Arc<PathPattern>,
}

impl<S> Vhost<S> {
    /// Wraps `inner` with a pattern.
    pub fn new(inner: S, pattern: PathPattern) -> Self {
        Self::from_shared(inner, Arc::new(pattern))
    }

    pub(crate) fn from_shared(inner: S, pattern: Arc<PathPattern>) -> Self {
        Self { inner, pattern }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Vhost<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = DetailFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        match self.pattern.extract(req.uri().path()) {
            Ok(id) => {
                req.extensions_mut().insert(id);
                DetailFuture::inner(self.inner.call(req))
            }
            Err(e) => {
                let detail = match e {
                    PathError::NotAnEndpoint => NOT_AN_ENDPOINT_DETAIL,
                    PathError::InvalidId => INVALID_ID_DETAIL,
                };
                DetailFuture::detail(StatusCode::BAD_REQUEST, detail)
            }
        }
    }
}
