//! [`ConfigStoreLayer`]: loads the caller's [`UserConfig`] into the request extensions (the layer's
//! docs list its answers).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode, header};
use mcp_core::{Principal, ResponseBody, detail_response};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::error::{StoreError, StoreErrorKind};
use crate::model::UserConfig;
use crate::source::ConfigSource;
use crate::store::{LoadFuture, UserConfigStore};

/// Detail of the 400 answered when the request carries no subject.
pub const DETAIL_NO_PRINCIPAL: &str = "No authenticated principal";
/// Detail of the 400 answered when the subject has no configuration.
pub const DETAIL_NO_CONFIG: &str = "No user configuration";
/// Detail of the 500 answered for corrupt documents and other store failures.
pub const DETAIL_LOAD_FAILED: &str = "User configuration could not be loaded";
/// Detail of the 503 answered while the store is unavailable.
pub const DETAIL_UNAVAILABLE: &str = "Configuration store unavailable";

/// Finds the subject whose configuration a request needs.
///
/// Implemented for closures `Fn(&http::request::Parts) -> Option<Arc<str>>`, so a gateway can read
/// any extension without this crate depending on the crate that inserted it. The default,
/// [`PrincipalSubject`], reads [`mcp_core::Principal`].
///
/// ```
/// use std::sync::Arc;
/// use mcp_config_store::{ConfigStoreLayer, MemoryStore};
///
/// // E.g. a trusted upstream proxy put the user in a header.
/// let layer = ConfigStoreLayer::new(MemoryStore::new()).subject_extractor(
///     |parts: &http::request::Parts| {
///         parts.headers.get("x-user").and_then(|v| v.to_str().ok()).map(Arc::from)
///     },
/// );
/// # let _ = layer;
/// ```
pub trait SubjectExtractor: Clone + Send + Sync + 'static {
    /// The subject of this request, or `None` (answered with 400).
    fn extract_subject(&self, parts: &Parts) -> Option<Arc<str>>;
}

impl<F> SubjectExtractor for F
where
    F: Fn(&Parts) -> Option<Arc<str>> + Clone + Send + Sync + 'static,
{
    fn extract_subject(&self, parts: &Parts) -> Option<Arc<str>> {
        self(parts)
    }
}

/// The default [`SubjectExtractor`]: the subject of the [`mcp_core::Principal`] extension (an
/// empty subject counts as none).
#[derive(Clone, Copy, Debug, Default)]
pub struct PrincipalSubject;

impl SubjectExtractor for PrincipalSubject {
    fn extract_subject(&self, parts: &Parts) -> Option<Arc<str>> {
        parts
            .extensions
            .get::<Principal>()
            .map(|p| p.subject_arc().clone())
            .filter(|s| !s.is_empty())
    }
}

#[derive(Clone)]
struct Shared {
    store: Arc<dyn UserConfigStore>,
    retry_after: HeaderValue,
}

/// Layer that loads the caller's [`UserConfig`] into the request extensions.
///
/// | situation | response |
/// |---|---|
/// | configuration found | inner service called; `Arc<UserConfig>` and where it came from ([`ConfigSource`]) in the request extensions |
/// | no subject in the request (no [`Principal`]) | 400 `{"detail":"No authenticated principal"}` |
/// | no configuration for the subject | 400 `{"detail":"No user configuration"}` |
/// | store error: corrupt document or other (key encoding, ...) | 500 `{"detail":"User configuration could not be loaded"}` |
/// | store unavailable | 503 `{"detail":"Configuration store unavailable"}` + `Retry-After: 1` (configurable) |
///
/// Every locally generated response is `application/json` ([`mcp_core::detail_response`]); the
/// body never contains the subject, the store's address or the store's error message (those go
/// to the log).
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use bytes::Bytes;
/// use http::{Request, Response, StatusCode};
/// use http_body_util::Empty;
/// use mcp_config_store::{ConfigStoreLayer, MemoryStore, UserConfig};
/// use mcp_core::Principal;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store = MemoryStore::new().with_user("alice", UserConfig::default());
/// let svc = ServiceBuilder::new()
///     .layer(ConfigStoreLayer::new(store).retry_after_secs(2))
///     .service(service_fn(|req: Request<Empty<Bytes>>| async move {
///         assert!(req.extensions().get::<Arc<UserConfig>>().is_some());
///         Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
///     }));
///
/// let mut req = Request::new(Empty::<Bytes>::new());
/// req.extensions_mut().insert(Principal::new("https://issuer", "alice"));
/// assert_eq!(svc.clone().oneshot(req).await.unwrap().status(), StatusCode::OK);
///
/// let mut req = Request::new(Empty::<Bytes>::new());
/// req.extensions_mut().insert(Principal::new("https://issuer", "bob"));
/// assert_eq!(svc.oneshot(req).await.unwrap().status(), StatusCode::BAD_REQUEST);
/// # }
/// ```
#[derive(Clone)]
#[must_use]
pub struct ConfigStoreLayer<X = PrincipalSubject> {
    shared: Arc<Shared>,
    extractor: X,
}

impl<X> fmt::Debug for ConfigStoreLayer<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigStoreLayer")
            .field("retry_after", &self.shared.retry_after)
            .field("extractor", &std::any::type_name::<X>())
            .finish_non_exhaustive()
    }
}

impl ConfigStoreLayer {
    /// A layer over `store`, reading the subject from [`mcp_core::Principal`], answering 503 with
    /// `Retry-After: 1`.
    pub fn new(store: impl UserConfigStore) -> Self {
        Self::from_shared(Arc::new(store))
    }

    /// A layer over an already shared store.
    pub fn from_shared(store: Arc<dyn UserConfigStore>) -> Self {
        Self {
            shared: Arc::new(Shared {
                store,
                retry_after: HeaderValue::from_static("1"),
            }),
            extractor: PrincipalSubject,
        }
    }
}

impl<X> ConfigStoreLayer<X> {
    /// Uses another way to find the request's subject.
    pub fn subject_extractor<Y: SubjectExtractor>(self, extractor: Y) -> ConfigStoreLayer<Y> {
        ConfigStoreLayer {
            shared: self.shared,
            extractor,
        }
    }

    /// The `Retry-After` seconds of the 503 answer (default 1).
    pub fn retry_after_secs(mut self, secs: u32) -> Self {
        Arc::make_mut(&mut self.shared).retry_after = HeaderValue::from(secs);
        self
    }
}

impl<S, X: Clone> Layer<S> for ConfigStoreLayer<X> {
    type Service = ConfigStoreService<S, X>;

    fn layer(&self, inner: S) -> Self::Service {
        ConfigStoreService {
            inner,
            shared: self.shared.clone(),
            extractor: self.extractor.clone(),
        }
    }
}

/// Service of [`ConfigStoreLayer`].
#[derive(Clone)]
pub struct ConfigStoreService<S, X = PrincipalSubject> {
    inner: S,
    shared: Arc<Shared>,
    extractor: X,
}

impl<S: fmt::Debug, X> fmt::Debug for ConfigStoreService<S, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigStoreService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, X> ConfigStoreService<S, X> {
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

impl<S, X, ReqBody, ResBody> Service<Request<ReqBody>> for ConfigStoreService<S, X>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    X: SubjectExtractor,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ConfigStoreFuture<S, ReqBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let (parts, body) = req.into_parts();
        let Some(subject) = self.extractor.extract_subject(&parts) else {
            tracing::debug!("no subject in the request; answering 400");
            return ConfigStoreFuture::local(Local::NoPrincipal);
        };
        let load = self.shared.store.load(subject.clone());
        // The instance that was polled ready goes into the future; this service keeps a fresh
        // clone (https://docs.rs/tower-service: "be careful when cloning inner services").
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ConfigStoreFuture {
            state: State::Loading {
                load,
                inner: Some(inner),
                request: Some(Request::from_parts(parts, body)),
                source: Some(ConfigSource::new(
                    Arc::clone(&self.shared.store),
                    Arc::clone(&subject),
                )),
                subject,
                retry_after: self.shared.retry_after.clone(),
            },
        }
    }
}

/// An answer produced by the layer itself.
enum Local {
    NoPrincipal,
    NoConfig,
    LoadFailed,
    Unavailable(HeaderValue),
}

impl Local {
    fn into_response<B>(self) -> Response<ResponseBody<B>> {
        match self {
            Self::NoPrincipal => detail_response(StatusCode::BAD_REQUEST, DETAIL_NO_PRINCIPAL),
            Self::NoConfig => detail_response(StatusCode::BAD_REQUEST, DETAIL_NO_CONFIG),
            Self::LoadFailed => {
                detail_response(StatusCode::INTERNAL_SERVER_ERROR, DETAIL_LOAD_FAILED)
            }
            Self::Unavailable(retry_after) => {
                let mut res = detail_response(StatusCode::SERVICE_UNAVAILABLE, DETAIL_UNAVAILABLE);
                res.headers_mut().insert(header::RETRY_AFTER, retry_after);
                res
            }
        }
    }

    fn from_error(err: &StoreError, subject: &str, retry_after: HeaderValue) -> Self {
        match err.kind() {
            StoreErrorKind::Unavailable => {
                tracing::warn!(subject, error = %err, "configuration store unavailable; answering 503");
                Self::Unavailable(retry_after)
            }
            StoreErrorKind::Corrupt | StoreErrorKind::Other => {
                tracing::error!(subject, error = %err, "user configuration could not be loaded; answering 500");
                Self::LoadFailed
            }
        }
    }
}

pin_project! {
    /// Response future of [`ConfigStoreService`].
    pub struct ConfigStoreFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, ReqBody>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Loading {
            load: LoadFuture,
            inner: Option<S>,
            request: Option<Request<ReqBody>>,
            subject: Arc<str>,
            retry_after: HeaderValue,
            // Where the configuration comes from, for what outlives the request.
            source: Option<ConfigSource>,
        },
        Calling {
            #[pin]
            future: S::Future,
        },
        Local {
            local: Option<Local>,
        },
    }
}

impl<S, ReqBody> ConfigStoreFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn local(local: Local) -> Self {
        Self {
            state: State::Local { local: Some(local) },
        }
    }
}

impl<S, ReqBody, ResBody> Future for ConfigStoreFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let mut this = self.as_mut().project();
            let next = match this.state.as_mut().project() {
                StateProj::Loading {
                    load,
                    inner,
                    request,
                    subject,
                    retry_after,
                    source,
                } => match ready!(load.as_mut().poll(cx)) {
                    Ok(Some(config)) => {
                        let (Some(mut inner), Some(mut request)) = (inner.take(), request.take())
                        else {
                            panic!("ConfigStoreLayer future polled after completion");
                        };
                        request.extensions_mut().insert::<Arc<UserConfig>>(config);
                        if let Some(source) = source.take() {
                            request.extensions_mut().insert(source);
                        }
                        State::Calling {
                            future: inner.call(request),
                        }
                    }
                    Ok(None) => {
                        tracing::debug!(
                            subject = &**subject,
                            "no user configuration; answering 400"
                        );
                        State::Local {
                            local: Some(Local::NoConfig),
                        }
                    }
                    Err(err) => State::Local {
                        local: Some(Local::from_error(&err, subject, retry_after.clone())),
                    },
                },
                StateProj::Calling { future } => {
                    return future
                        .poll(cx)
                        .map(|res| res.map(|r| r.map(ResponseBody::inner)));
                }
                StateProj::Local { local } => {
                    let Some(local) = local.take() else {
                        panic!("ConfigStoreLayer future polled after completion");
                    };
                    return Poll::Ready(Ok(local.into_response()));
                }
            };
            this.state.set(next);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use tokio::sync::broadcast;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::{Invalidation, MemoryStore};

    /// Always fails with the given error.
    struct Failing(StoreError, broadcast::Sender<Invalidation>);

    impl UserConfigStore for Failing {
        fn load(&self, _subject: Arc<str>) -> LoadFuture {
            let err = self.0.clone();
            Box::pin(async move { Err(err) })
        }
        fn invalidations(&self) -> broadcast::Receiver<Invalidation> {
            self.1.subscribe()
        }
    }

    fn failing(err: StoreError) -> Failing {
        Failing(err, broadcast::channel(1).0)
    }

    struct Answer {
        status: StatusCode,
        retry_after: Option<String>,
        content_type: Option<String>,
        body: String,
    }

    async fn call<X: SubjectExtractor>(
        layer: ConfigStoreLayer<X>,
        subject: Option<&str>,
    ) -> Answer {
        let svc = layer.layer(service_fn(|req: Request<Empty<Bytes>>| async move {
            let cfg = req.extensions().get::<Arc<UserConfig>>().unwrap();
            assert!(cfg.virtual_hosts.is_empty());
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        }));
        let mut req = Request::new(Empty::<Bytes>::new());
        if let Some(subject) = subject {
            req.extensions_mut()
                .insert(Principal::new("https://issuer.example", subject));
        }
        let res = svc.oneshot(req).await.unwrap();
        let header = |name| {
            res.headers()
                .get(name)
                .map(|v: &HeaderValue| v.to_str().unwrap().to_owned())
        };
        let (status, retry_after, content_type) = (
            res.status(),
            header(header::RETRY_AFTER),
            header(header::CONTENT_TYPE),
        );
        let body = res.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            retry_after,
            content_type,
            body: String::from_utf8(body.to_vec()).unwrap(),
        }
    }

    #[tokio::test]
    async fn found_config_reaches_the_inner_service() {
        let store = MemoryStore::new().with_user("alice", UserConfig::default());
        let a = call(ConfigStoreLayer::new(store), Some("alice")).await;
        assert_eq!(a.status, StatusCode::OK);
        assert_eq!(a.body, "");
    }

    #[tokio::test]
    async fn missing_principal_and_missing_config_are_400() {
        let store = MemoryStore::new();
        let a = call(ConfigStoreLayer::new(store.clone()), None).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST);
        assert_eq!(a.body, r#"{"detail":"No authenticated principal"}"#);
        assert_eq!(a.content_type.as_deref(), Some("application/json"));

        let a = call(ConfigStoreLayer::new(store.clone()), Some("")).await;
        assert_eq!(a.body, r#"{"detail":"No authenticated principal"}"#);

        let a = call(ConfigStoreLayer::new(store), Some("bob-the-secret")).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST);
        assert_eq!(a.body, r#"{"detail":"No user configuration"}"#);
        assert!(!a.body.contains("bob"), "subject must not leak");
    }

    #[tokio::test]
    async fn corrupt_and_other_errors_are_500_without_details() {
        for err in [
            StoreError::corrupt("mcpgw:user:alice: virtual_hosts: invalid type"),
            StoreError::other("cannot encode a subject with control characters"),
        ] {
            let a = call(ConfigStoreLayer::new(failing(err)), Some("alice")).await;
            assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(
                a.body,
                r#"{"detail":"User configuration could not be loaded"}"#
            );
            assert_eq!(a.retry_after, None);
        }
    }

    #[tokio::test]
    async fn unavailable_is_503_with_retry_after() {
        let err = StoreError::unavailable("connection refused to 10.0.0.7:6379");
        let a = call(ConfigStoreLayer::new(failing(err.clone())), Some("alice")).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(a.retry_after.as_deref(), Some("1"));
        assert_eq!(a.body, r#"{"detail":"Configuration store unavailable"}"#);
        assert!(!a.body.contains("10.0.0.7"), "store address must not leak");

        let layer = ConfigStoreLayer::new(failing(err)).retry_after_secs(7);
        let a = call(layer, Some("alice")).await;
        assert_eq!(a.retry_after.as_deref(), Some("7"));
    }

    #[tokio::test]
    async fn custom_subject_extractor() {
        let store = MemoryStore::new().with_user("carol", UserConfig::default());
        let layer = ConfigStoreLayer::from_shared(Arc::new(store))
            .subject_extractor(|_parts: &Parts| Some(Arc::from("carol")));
        // No Principal at all: the closure decides.
        let a = call(layer, None).await;
        assert_eq!(a.status, StatusCode::OK);
    }

    #[test]
    fn layers_services_and_futures_are_send() {
        // hyper-util and axum need Send + 'static futures and Send + Sync layers.
        fn send_sync<T: Send + Sync + 'static>(_: &T) {}
        fn send_future<F: Future + Send + 'static>(_: F) {}
        let layer = ConfigStoreLayer::new(MemoryStore::new());
        send_sync(&layer);
        let svc = crate::VirtualHostConfigLayer::new().layer(layer.layer(service_fn(
            |_req: Request<Empty<Bytes>>| async {
                Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
            },
        )));
        send_sync(&svc);
        send_future(svc.oneshot(Request::new(Empty::<Bytes>::new())));
    }

    #[tokio::test]
    async fn the_ready_inner_service_is_the_one_called() {
        // Readiness belongs to an instance (tower's LoadShed / ConcurrencyLimit reset it on
        // clone). Calling the fresh clone instead of the polled one would trip the assert below.
        #[derive(Default)]
        struct NeedsReady {
            ready: bool,
        }
        impl Clone for NeedsReady {
            fn clone(&self) -> Self {
                Self { ready: false }
            }
        }
        impl Service<Request<Empty<Bytes>>> for NeedsReady {
            type Response = Response<Empty<Bytes>>;
            type Error = Infallible;
            type Future = std::future::Ready<Result<Self::Response, Infallible>>;
            fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
                self.ready = true;
                Poll::Ready(Ok(()))
            }
            fn call(&mut self, _req: Request<Empty<Bytes>>) -> Self::Future {
                assert!(self.ready, "called an instance that was not polled ready");
                std::future::ready(Ok(Response::new(Empty::new())))
            }
        }
        let store = MemoryStore::new().with_user("alice", UserConfig::default());
        let svc = ConfigStoreLayer::new(store).layer(NeedsReady::default());
        let mut req = Request::new(Empty::<Bytes>::new());
        req.extensions_mut().insert(Principal::new("i", "alice"));
        let res = svc.oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
}
