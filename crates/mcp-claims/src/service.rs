//! [`ClaimsService`]: the middleware service made by [`ClaimsLayer`].

use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;

use http::request::Parts;
use http::{HeaderValue, Request, Response, header};
use mcp_core::{ResponseBody, detail_response};
use tower_service::Service;

use crate::bearer::bearer_token;
use crate::challenge::{Challenges, ResourceMetadata};
use crate::claims::Claims;
use crate::error::AuthError;
use crate::future::ResponseFuture;
use crate::layer::ClaimsLayer;
use crate::validator::{JwtValidator, Outcome};

/// What a request is validated with: the validator and the challenges its required scopes make.
#[derive(Debug)]
pub(crate) struct Current {
    pub(crate) validator: JwtValidator,
    challenges: Challenges,
}

/// State shared by a layer and all its services: the current validator, which
/// [`ClaimsLayer::replace_validator`] swaps for the next requests (a reload of keys or issuers
/// without a restart), and the metadata its challenges are built with.
#[derive(Debug)]
pub(crate) struct Shared {
    current: ArcSwap<Current>,
    metadata: ResourceMetadata,
}

impl Shared {
    pub(crate) fn new(validator: JwtValidator, metadata: ResourceMetadata) -> Self {
        Self {
            current: ArcSwap::from_pointee(Current::new(validator, metadata.clone())),
            metadata,
        }
    }

    /// What the next request is validated with.
    pub(crate) fn current(&self) -> arc_swap::Guard<Arc<Current>> {
        self.current.load()
    }

    /// Validates the next requests with `validator`; requests already past validation are not
    /// affected, nor is a request waiting for a JWKS fetch (it finishes with the validator it
    /// started with).
    pub(crate) fn replace(&self, validator: JwtValidator) {
        self.current
            .store(Arc::new(Current::new(validator, self.metadata.clone())));
    }
}

impl Current {
    fn new(validator: JwtValidator, metadata: ResourceMetadata) -> Self {
        let challenges = Challenges::new(metadata, validator.required_scopes());
        Self {
            validator,
            challenges,
        }
    }

    /// The response for a refused request: `{"detail":"..."}` plus the challenge (401/403) or
    /// `Retry-After` (503).
    pub(crate) fn reject<B>(&self, error: &AuthError, parts: &Parts) -> Response<ResponseBody<B>> {
        tracing::debug!(reason = %error, "bearer authentication failed");
        let mut response = detail_response(error.status(), error.detail());
        if let Some(challenge) = self.challenges.for_error(error, parts) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let AuthError::KeysUnavailable { retry_after } = error {
            let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        response
    }
}

impl Current {
    /// Inserts the extensions of an authenticated request: the principal, the claims, and when
    /// the token stops being valid (`exp` plus the leeway: long-lived streams end then).
    pub(crate) fn authenticate(&self, parts: &mut Parts, claims: Claims) {
        parts.extensions.insert(claims.principal());
        let secs = claims.exp().saturating_add(self.validator.leeway_secs());
        // An `exp` past what the clock can hold (a token that never expires, in effect) sets no
        // expiry rather than overflowing.
        if let Some(until) = std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs))
        {
            parts.extensions.insert(mcp_core::ValidUntil::new(until));
        }
        parts.extensions.insert(claims);
    }
}

/// Middleware that validates the request's bearer JWT.
///
/// On success the request reaches the inner service with a [`Claims`] and a
/// [`mcp_core::Principal`] extension; otherwise it is answered here (see the [crate docs](crate)).
/// Never fails from `poll_ready` for authentication reasons: readiness is the inner service's.
#[derive(Clone, Debug)]
pub struct ClaimsService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> ClaimsService<S> {
    /// Wraps `inner` (no `resource_metadata`; use [`ClaimsLayer`] for that).
    pub fn new(inner: S, validator: JwtValidator) -> Self {
        Self::from_shared(
            inner,
            Arc::new(Shared::new(validator, ResourceMetadata::None)),
        )
    }

    /// A [`ClaimsLayer`] with this validator.
    pub fn layer(validator: JwtValidator) -> ClaimsLayer {
        ClaimsLayer::new(validator)
    }

    pub(crate) fn from_shared(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
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

// `Clone`: a request that waits for a JWKS fetch takes the service that was made ready. The bound
// stays without the `jwks` feature, so that turning the feature on never breaks a build.
impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ClaimsService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody, ResBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        let current = self.shared.current();
        let result = match bearer_token(&parts.headers) {
            Ok(token) => match current.validator.check_cached(token) {
                Outcome::Done(result) => result,
                #[cfg(feature = "jwks")]
                Outcome::Fetch { source, seen } => {
                    let token = token.to_owned();
                    return self.fetch_then_call(
                        Request::from_parts(parts, body),
                        token,
                        (source, seen),
                        Arc::clone(&current),
                    );
                }
            },
            Err(e) => Err(e),
        };
        match result {
            Ok(claims) => {
                current.authenticate(&mut parts, claims);
                ResponseFuture::called(self.inner.call(Request::from_parts(parts, body)))
            }
            Err(error) => ResponseFuture::rejected(current.reject(&error, &parts)),
        }
    }
}

#[cfg(feature = "jwks")]
impl<S> ClaimsService<S> {
    /// The issuer's JWKS must be fetched before `token` can be checked: the response future
    /// validates, then calls the inner service.
    fn fetch_then_call<ReqBody, ResBody>(
        &mut self,
        request: Request<ReqBody>,
        token: String,
        (source, seen): (Arc<crate::jwks::JwksSource>, u64),
        current: Arc<Current>,
    ) -> ResponseFuture<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    {
        // Take the service that was driven to readiness and leave a fresh clone in its place
        // (tower-service docs, "Be careful when cloning inner services").
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let validator = current.validator.clone();
        let validation =
            Box::pin(async move { validator.validate_after_fetch(&token, &source, seen).await });
        ResponseFuture::validating(validation, request, inner, current)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use http::StatusCode;
    use http_body_util::{BodyExt, Full};
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::future::ResponseFuture;
    use crate::issuer::Issuer;

    type Echo = tower::util::ServiceFn<
        fn(Request<Full<Bytes>>) -> std::future::Ready<Result<Response<Full<Bytes>>, Infallible>>,
    >;

    fn assert_send_sync<T: Send + Sync + 'static>() {}
    fn assert_send<T: Send + 'static>() {}

    #[test]
    fn types_are_send_and_sync() {
        assert_send_sync::<ClaimsLayer>();
        assert_send_sync::<ClaimsService<Echo>>();
        assert_send_sync::<JwtValidator>();
        assert_send_sync::<Claims>();
        assert_send::<ResponseFuture<Echo, Full<Bytes>, Full<Bytes>>>();
    }

    fn validator() -> JwtValidator {
        JwtValidator::builder()
            .issuer(Issuer::new("iss").hmac_secret(b"k", [Algorithm::HS256]))
            .audience("aud")
            .required_scopes(["mcp"])
            .build()
            .expect("config")
    }

    /// The request's `ValidUntil` (`exp` plus the leeway), as the inner service sees it; a token
    /// whose `exp` is past what the clock can hold sets none and does not panic.
    #[tokio::test]
    async fn valid_until_is_exp_plus_leeway_and_never_overflows() {
        let inner = service_fn(|req: Request<Full<Bytes>>| async move {
            let until = req
                .extensions()
                .get::<mcp_core::ValidUntil>()
                .and_then(|v| v.at().duration_since(std::time::UNIX_EPOCH).ok())
                .map_or_else(|| "none".to_owned(), |d| d.as_secs().to_string());
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(until))))
        });
        let validator = JwtValidator::builder()
            .issuer(Issuer::new("iss").hmac_secret(b"k", [Algorithm::HS256]))
            .audience("aud")
            .leeway(std::time::Duration::from_secs(30))
            .build()
            .expect("config");
        let service = ClaimsService::new(inner, validator);
        let seen = |exp: serde_json::Value| {
            let service = service.clone();
            async move {
                let claims =
                    serde_json::json!({"iss": "iss", "sub": "bob", "aud": "aud", "exp": exp});
                let token = encode(
                    &Header::new(Algorithm::HS256),
                    &claims,
                    &EncodingKey::from_secret(b"k").expect("key"),
                )
                .expect("token");
                let request = Request::builder()
                    .header(header::AUTHORIZATION, format!("Bearer {token}"))
                    .body(Full::new(Bytes::new()))
                    .expect("request");
                let response = service.oneshot(request).await.expect("infallible");
                assert_eq!(response.status(), StatusCode::OK);
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .expect("body")
                    .to_bytes();
                String::from_utf8_lossy(&body).into_owned()
            }
        };
        let exp = get_current_timestamp() + 60;
        assert_eq!(seen(exp.into()).await, (exp + 30).to_string());
        assert_eq!(seen(serde_json::json!(1e30)).await, "none");
    }

    /// A replaced validator decides the next requests of every service the layer made; a
    /// request is never checked against a mix of the two.
    #[tokio::test]
    async fn a_replaced_validator_decides_the_next_requests() {
        let inner = service_fn(|_: Request<Full<Bytes>>| async move {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
        });
        let with_secret = |secret: &'static [u8]| {
            JwtValidator::builder()
                .issuer(Issuer::new("iss").hmac_secret(secret, [Algorithm::HS256]))
                .audience("aud")
                .build()
                .expect("config")
        };
        let layer = ClaimsLayer::new(with_secret(b"old"));
        let service = tower_layer::Layer::layer(&layer, inner);
        let status = |secret: &'static [u8]| {
            let service = service.clone();
            async move {
                let claims = serde_json::json!({"iss": "iss", "sub": "bob", "aud": "aud",
                    "exp": get_current_timestamp() + 60});
                let token = encode(
                    &Header::new(Algorithm::HS256),
                    &claims,
                    &EncodingKey::from_secret(secret).expect("key"),
                )
                .expect("token");
                let request = Request::builder()
                    .header(header::AUTHORIZATION, format!("Bearer {token}"))
                    .body(Full::new(Bytes::new()))
                    .expect("request");
                service.oneshot(request).await.expect("infallible").status()
            }
        };
        assert_eq!(status(b"old").await, StatusCode::OK);
        assert_eq!(status(b"new").await, StatusCode::UNAUTHORIZED);
        layer.replace_validator(with_secret(b"new"));
        assert_eq!(status(b"new").await, StatusCode::OK);
        assert_eq!(status(b"old").await, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn inner_is_called_only_when_authenticated() {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let inner = service_fn(|req: Request<Full<Bytes>>| async move {
            CALLS.fetch_add(1, Ordering::SeqCst);
            let sub = req
                .extensions()
                .get::<mcp_core::Principal>()
                .map(|p| p.subject().to_owned())
                .unwrap_or_default();
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(sub))))
        });
        let service = ClaimsService::new(inner, validator());

        let refused = service
            .clone()
            .oneshot(Request::new(Full::new(Bytes::new())))
            .await
            .expect("infallible");
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            refused.headers()[header::WWW_AUTHENTICATE],
            "Bearer error=\"invalid_token\""
        );
        assert_eq!(CALLS.load(Ordering::SeqCst), 0);

        let claims = serde_json::json!({"iss": "iss", "sub": "bob", "aud": "aud",
            "exp": get_current_timestamp() + 60, "scope": "mcp"});
        let token = encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(b"k").expect("key"),
        )
        .expect("token");
        let request = Request::builder()
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .expect("request");
        let ok = service.oneshot(request).await.expect("infallible");
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        let body = ok.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(body, "bob");
    }
}
