//! [`JsonPosts`]: the 415 for a POST that does not declare `application/json` (the type's docs say
//! why and where it sits).

use http::{Method, Request, Response, StatusCode, header};
use mcp_core::{DetailFuture, ResponseBody, media};
use tower_service::Service;

/// Detail of the 415 for a POST whose `Content-Type` is missing or not `application/json`.
pub const DETAIL_UNSUPPORTED_MEDIA_TYPE: &str =
    "Unsupported Media Type: Content-Type must be application/json";

/// Wraps the router: a POST whose `Content-Type` is missing or not `application/json` (parameters
/// such as `; charset=utf-8` allowed, case-insensitive) is answered 415 before any MCP handling,
/// on the MCP endpoint and on the HTTP+SSE bridge's `…/messages` alike. A `text/plain` POST is a
/// browser "simple request" that needs no CORS preflight, so the gateway reads only JSON; GET and
/// DELETE carry no body and pass. It sits after authentication (an unauthenticated caller gets the
/// 401 challenge first, as with the official SDKs) and before the router.
#[derive(Clone, Debug)]
pub struct JsonPosts<S> {
    inner: S,
}

impl<S> JsonPosts<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

/// Whether a request may go on: anything but POST, or a POST declaring JSON.
fn declares_json_if_post<B>(req: &Request<B>) -> bool {
    req.method() != Method::POST
        || req
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| media::is_media_type(v, media::JSON))
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for JsonPosts<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = DetailFuture<S::Future>;

    #[inline]
    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        if declares_json_if_post(&req) {
            DetailFuture::inner(self.inner.call(req))
        } else {
            DetailFuture::detail(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                DETAIL_UNSUPPORTED_MEDIA_TYPE,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, content_type: Option<&'static str>) -> Request<()> {
        let mut builder = Request::builder().method(method);
        if let Some(value) = content_type {
            builder = builder.header(header::CONTENT_TYPE, value);
        }
        builder.body(()).expect("valid request")
    }

    #[test]
    fn only_json_posts_pass() {
        for ok in ["application/json", "Application/JSON; charset=utf-8"] {
            assert!(
                declares_json_if_post(&request(Method::POST, Some(ok))),
                "{ok}"
            );
        }
        for refused in [Some("text/plain"), Some("application/json-seq"), None] {
            assert!(
                !declares_json_if_post(&request(Method::POST, refused)),
                "{refused:?}"
            );
        }
        assert!(declares_json_if_post(&request(Method::GET, None)));
        assert!(declares_json_if_post(&request(
            Method::DELETE,
            Some("text/plain")
        )));
    }
}
