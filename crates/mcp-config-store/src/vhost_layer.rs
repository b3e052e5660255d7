//! [`VirtualHostConfigLayer`]: selects the requested virtual host from the caller's configuration
//! (the layer's docs list its answers).

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use mcp_core::{ResponseBody, VirtualHostId};
use tower_layer::Layer;
use tower_service::Service;

use crate::model::{UserConfig, VirtualHostConfig};

/// Detail of the 404 for a virtual host that is not in the caller's configuration.
pub const DETAIL_SERVER_NOT_FOUND: &str = "Server not found";
/// Detail of the 400 when the [`VirtualHostId`] extension is missing.
pub const DETAIL_NO_VIRTUAL_HOST_ID: &str = "Missing virtual host id (VhostLayer not applied)";
/// Detail of the 400 when the `Arc<UserConfig>` extension is missing.
pub const DETAIL_NO_USER_CONFIG: &str = "Missing user configuration (ConfigStoreLayer not applied)";

/// Request extension: the selected virtual host. Cloning is two reference-count increments.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct VirtualHost {
    /// The id from the path.
    pub id: VirtualHostId,
    /// Its configuration (shared with the caller's [`UserConfig`]).
    pub config: Arc<VirtualHostConfig>,
}

impl VirtualHost {
    /// The virtual host `id` with its configuration (what the layer inserts, for services
    /// called without it).
    pub fn new(id: VirtualHostId, config: Arc<VirtualHostConfig>) -> Self {
        Self { id, config }
    }
}

/// Layer that selects the requested virtual host from the caller's configuration.
///
/// Reads the [`VirtualHostId`] extension (inserted by the path layer, `mcp-vhost`) and the
/// `Arc<`[`UserConfig`]`>` extension (inserted by [`ConfigStoreLayer`](crate::ConfigStoreLayer)),
/// and inserts a [`VirtualHost`] extension for the router.
///
/// | situation | response |
/// |---|---|
/// | virtual host configured | inner service called; [`VirtualHost`] in the request extensions |
/// | virtual host not in the caller's configuration | 404 `{"detail":"Server not found"}` (`application/json`) |
/// | no [`VirtualHostId`] extension (the path layer is missing) | 400 `{"detail":"Missing virtual host id (VhostLayer not applied)"}` |
/// | no `Arc<UserConfig>` extension (the config store layer is missing) | 400 `{"detail":"Missing user configuration (ConfigStoreLayer not applied)"}` |
///
/// The two 400s indicate a mis-assembled stack rather than a client mistake; they are logged at
/// error level and name the missing layer so the integrator finds the problem at once.
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use bytes::Bytes;
/// use http::{Request, Response, StatusCode};
/// use http_body_util::{BodyExt, Empty};
/// use mcp_config_store::{UserConfig, VirtualHost, VirtualHostConfigLayer};
/// use mcp_core::VirtualHostId;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let svc = VirtualHostConfigLayer::new().layer(service_fn(|req: Request<Empty<Bytes>>| async move {
///     assert_eq!(req.extensions().get::<VirtualHost>().unwrap().id.as_str(), "vh1");
///     Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
/// }));
/// let config = Arc::new(UserConfig::from_json_str(
///     r#"{"virtual_hosts":{"vh1":{"backends":{"b":{"url":"http://127.0.0.1:9001/mcp"}}}}}"#,
/// ).unwrap());
///
/// let mut req = Request::new(Empty::<Bytes>::new());
/// req.extensions_mut().insert(VirtualHostId::new("vh2"));
/// req.extensions_mut().insert(config);
/// let res = svc.oneshot(req).await.unwrap();
/// assert_eq!(res.status(), StatusCode::NOT_FOUND);
/// let body = res.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(body, r#"{"detail":"Server not found"}"#);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
#[must_use]
pub struct VirtualHostConfigLayer {
    _private: (),
}

impl VirtualHostConfigLayer {
    /// The layer.
    pub fn new() -> Self {
        Self { _private: () }
    }
}

impl<S> Layer<S> for VirtualHostConfigLayer {
    type Service = VirtualHostConfigService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        VirtualHostConfigService { inner }
    }
}

/// Service of [`VirtualHostConfigLayer`].
#[derive(Clone, Debug)]
pub struct VirtualHostConfigService<S> {
    inner: S,
}

impl<S> VirtualHostConfigService<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes this service, returning the inner one.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for VirtualHostConfigService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = VirtualHostConfigFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let Some(id) = req.extensions().get::<VirtualHostId>().cloned() else {
            tracing::error!("no VirtualHostId extension: is the virtual host path layer applied?");
            return VirtualHostConfigFuture::detail(
                StatusCode::BAD_REQUEST,
                DETAIL_NO_VIRTUAL_HOST_ID,
            );
        };
        let Some(user) = req.extensions().get::<Arc<UserConfig>>() else {
            tracing::error!("no UserConfig extension: is ConfigStoreLayer applied?");
            return VirtualHostConfigFuture::detail(StatusCode::BAD_REQUEST, DETAIL_NO_USER_CONFIG);
        };
        let Some(config) = user.virtual_hosts.get(id.as_str()).cloned() else {
            tracing::debug!(virtual_host = %id, "virtual host not in the caller's configuration; answering 404");
            return VirtualHostConfigFuture::detail(StatusCode::NOT_FOUND, DETAIL_SERVER_NOT_FOUND);
        };
        req.extensions_mut().insert(VirtualHost { id, config });
        VirtualHostConfigFuture::inner(self.inner.call(req))
    }
}

/// Response future of [`VirtualHostConfigService`]: the inner future, or a ready
/// `{"detail":"…"}` answer.
pub type VirtualHostConfigFuture<F> = mcp_core::DetailFuture<F>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use tower::{ServiceExt, service_fn};

    use super::*;

    fn user() -> Arc<UserConfig> {
        Arc::new(
            UserConfig::from_json_str(
                r#"{"virtual_hosts":{"vh1":{"backends":{"b":{"url":"http://x/mcp"}}}}}"#,
            )
            .unwrap(),
        )
    }

    async fn call(
        id: Option<&str>,
        user: Option<Arc<UserConfig>>,
    ) -> (StatusCode, String, Option<String>) {
        let mut req = Request::new(Empty::<Bytes>::new());
        if let Some(id) = id {
            req.extensions_mut().insert(VirtualHostId::new(id));
        }
        if let Some(user) = user {
            req.extensions_mut().insert(user);
        }
        let svc = VirtualHostConfigLayer::new().layer(service_fn(
            |req: Request<Empty<Bytes>>| async move {
                let vh = req.extensions().get::<VirtualHost>().unwrap();
                assert!(vh.config.backends.contains_key("b"));
                Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
            },
        ));
        let res = svc.oneshot(req).await.unwrap();
        let status = res.status();
        let ct = res
            .headers()
            .get(http::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = res.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap(), ct)
    }

    #[tokio::test]
    async fn known_virtual_host_is_inserted() {
        let (status, body, _) = call(Some("vh1"), Some(user())).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "");
    }

    #[tokio::test]
    async fn unknown_virtual_host_is_404_with_exact_body() {
        let (status, body, ct) = call(Some("nope"), Some(user())).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body, r#"{"detail":"Server not found"}"#);
        assert_eq!(ct.as_deref(), Some("application/json"));
    }

    #[tokio::test]
    async fn missing_extensions_are_400_naming_the_layer() {
        let (status, body, _) = call(None, Some(user())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            body,
            r#"{"detail":"Missing virtual host id (VhostLayer not applied)"}"#
        );
        let (status, body, _) = call(Some("vh1"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            body,
            r#"{"detail":"Missing user configuration (ConfigStoreLayer not applied)"}"#
        );
    }
}
