//! # mcp-claims
//!
//! A tower layer that authenticates requests with an `Authorization: Bearer <JWT>` header, for an
//! MCP gateway or any HTTP service acting as an OAuth resource server.
//!
//! On success the request reaches the inner service with two extensions: [`Claims`] (subject,
//! issuer, audiences, times, scopes and the raw claim map) and [`mcp_core::Principal`] (issuer +
//! subject, the type other gateway layers read). Otherwise the layer answers by itself:
//!
//! | situation | status | headers | body |
//! |---|---|---|---|
//! | no `Authorization`, scheme not `Bearer`, token undecodable, `alg` `none`/unsupported, unknown issuer, no matching key, bad signature, expired beyond leeway, `nbf` in the future, wrong audience, missing `sub`/`aud`/`exp` | `401` | `WWW-Authenticate: Bearer error="invalid_token"` (+ `, resource_metadata="<url>"`) | `{"detail":"<reason>"}` |
//! | valid token without every required scope | `403` | `WWW-Authenticate: Bearer error="insufficient_scope", scope="<required scopes>"` (+ `, resource_metadata="<url>"`) | `{"detail":"Insufficient scope"}` |
//! | the issuer's JWKS was never fetched and fetching it fails | `503` | `Retry-After: <s>` | `{"detail":"Signing keys unavailable"}` |
//!
//! Bodies are `application/json`, short ([`AuthError::detail`]) and never echo the token. Tokens are
//! never logged; the failure reason is logged at debug level. The scheme is matched
//! case-insensitively. The 503 row is a deliberate choice: while no key set could ever be loaded
//! the token may well be valid, so the client should retry rather than re-authenticate.
//!
//! ## Keys and algorithms
//!
//! HS256/384/512, RS256/384/512, PS256/384/512, ES256, ES384 and EdDSA (Ed25519). Each key is bound
//! to the algorithms it may verify ([`Issuer::hmac_secret`], [`Issuer::public_key_pem`]), so an RSA
//! public key can never be abused as an HMAC secret; `none` is never accepted. Several issuers may
//! be trusted, each with its own keys: the token's unverified `iss` picks the issuer, then only
//! that issuer's keys are tried. Keys come from HMAC secrets, PEM public keys and (feature `jwks`,
//! on by default) JWKS URLs ([`Issuer::jwks_url`]: plain http, or https through hyper-rustls with
//! the platform's root certificates, or your own [`JwtValidatorBuilder::jwks_tls_config`]).
//!
//! The `resource_metadata` URL of the challenge is either fixed
//! ([`ClaimsLayer::resource_metadata`]) or computed per request from the request head
//! ([`ClaimsLayer::resource_metadata_fn`], e.g. from a `mcp_core::VirtualHostId` extension that an
//! earlier layer inserted).
//!
//! JWKS handling is request-driven, without a background task of its own: the first token that
//! needs the set fetches it (concurrent requests share that one fetch), a set older than
//! [`jwks_refresh_interval`](JwtValidatorBuilder::jwks_refresh_interval) is refreshed in the
//! background while still being served, a token with an unknown `kid` triggers a refetch at most
//! once per [`jwks_min_refetch_interval`](JwtValidatorBuilder::jwks_min_refetch_interval), a failed
//! fetch keeps the last good set. [`JwtValidator::prefetch`] warms the cache at startup. The
//! intervals are measured on tokio's clock, or on a [`JwksClock`] of your own
//! ([`jwks_clock`](JwtValidatorBuilder::jwks_clock)).
//!
//! A validated token's claims are remembered (bounded, see
//! [`verified_token_cache`](JwtValidatorBuilder::verified_token_cache)), so a client sending the
//! same token on every request has its signature verified once; the cached result ends with the
//! token's `exp` and with the JWKS set that verified it.
//!
//! Claims: `exp` is required, `nbf` honoured, both with a leeway (default 30 s); `aud` is always
//! checked against the configured audiences; `iss` and `sub` are required. Tokens with a `crit`
//! header are refused. Scopes are read from `scope`, `scp` and `scopes`.
//!
//! ## Example
//!
//! ```
//! use std::convert::Infallible;
//!
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode, header};
//! use http_body_util::{BodyExt, Full};
//! use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
//! use mcp_claims::{ClaimsLayer, Issuer, JwtValidator};
//! use mcp_core::Principal;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let validator = JwtValidator::builder()
//!     .issuer(Issuer::new("https://issuer.example").hmac_secret(b"secret", [Algorithm::HS256]))
//!     .audience("mcp-gateway")
//!     .build()?;
//! let layer = ClaimsLayer::new(validator)
//!     .resource_metadata("https://gw.example/.well-known/oauth-protected-resource");
//!
//! // The inner service reads the principal the layer inserted.
//! let service = ServiceBuilder::new().layer(layer).service(service_fn(
//!     |req: Request<Full<Bytes>>| async move {
//!         let principal = req.extensions().get::<Principal>().expect("authenticated");
//!         Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(principal.to_string()))))
//!     },
//! ));
//!
//! let claims = serde_json::json!({
//!     "iss": "https://issuer.example",
//!     "sub": "alice",
//!     "aud": "mcp-gateway",
//!     "exp": get_current_timestamp() + 600,
//! });
//! let token = encode(
//!     &Header::new(Algorithm::HS256),
//!     &claims,
//!     &EncodingKey::from_secret(b"secret")?,
//! )?;
//!
//! // A valid token: 200, and the inner service saw alice.
//! let request = Request::builder()
//!     .header(header::AUTHORIZATION, format!("Bearer {token}"))
//!     .body(Full::new(Bytes::new()))?;
//! let response = service.clone().oneshot(request).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! let body = response.into_body().collect().await?.to_bytes();
//! assert_eq!(body, "alice@https://issuer.example");
//!
//! // No token: 401 with an RFC 6750 / RFC 9728 challenge and a short JSON body.
//! let response = service.oneshot(Request::new(Full::new(Bytes::new()))).await?;
//! assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
//! assert_eq!(
//!     response.headers()[header::WWW_AUTHENTICATE],
//!     "Bearer error=\"invalid_token\", \
//!      resource_metadata=\"https://gw.example/.well-known/oauth-protected-resource\""
//! );
//! let body = response.into_body().collect().await?.to_bytes();
//! assert_eq!(body, r#"{"detail":"Missing bearer token"}"#);
//! # Ok(())
//! # }
//! ```
//!
//! | module | what it holds |
//! |---|---|
//! | `layer` | [`ClaimsLayer`] |
//! | `service` | [`ClaimsService`] |
//! | `future` | [`ResponseFuture`] |
//! | `validator` | [`JwtValidator`], [`JwtValidatorBuilder`] |
//! | `issuer` | [`Issuer`]: one trusted issuer and its keys |
//! | `claims` | [`Claims`], the request extension |
//! | `challenge` | `WWW-Authenticate` challenges, [`MakeResourceMetadata`] |
//! | `error` | [`AuthError`], [`ClaimsConfigError`], [`JwksError`] |
//! | `jwks`, `jwk`, `fetch` | feature `jwks`: one issuer's cached key set, JWK parsing, the HTTP(S) client |
//! | `clock` | feature `jwks`: [`JwksClock`], the clock of the JWKS caches |
//!
//! The modules are private: every public item is re-exported here, one path per item.
//!
//! ## Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `jwks` | yes | JWKS URLs ([`Issuer::jwks_url`], the `jwks_*` settings of [`JwtValidatorBuilder`], [`JwtValidator::prefetch`], [`JwksError`], [`JwksClock`]): hyper-util's client over `mcp-core`'s HTTPS connector (rustls, aws-lc-rs) |
//!
//! `jwks` is the one feature of the workspace that is on by default: a JWT layer is expected to
//! read an identity provider's key set. Without it (`default-features = false`) tokens are
//! verified with HMAC secrets and PEM public keys only, and no HTTP client or TLS stack is linked;
//! the `Clone` bound on the inner service stays, so that turning the feature on never breaks a
//! build.

mod bearer;
mod challenge;
mod claims;
#[cfg(feature = "jwks")]
mod clock;
mod error;
#[cfg(feature = "jwks")]
mod fetch;
mod future;
mod issuer;
#[cfg(feature = "jwks")]
mod jwk;
#[cfg(feature = "jwks")]
mod jwks;
mod key;
mod layer;
mod service;
mod token;
mod validator;
mod verified;

pub use challenge::MakeResourceMetadata;
pub use claims::Claims;
#[cfg(feature = "jwks")]
pub use clock::JwksClock;
#[cfg(feature = "jwks")]
pub use error::JwksError;
pub use error::{AuthError, ClaimsConfigError};
pub use future::ResponseFuture;
pub use issuer::Issuer;
/// The signature algorithms (re-exported from `jsonwebtoken`).
pub use jsonwebtoken::Algorithm;
pub use layer::ClaimsLayer;
pub use service::ClaimsService;
pub use validator::{JwtValidator, JwtValidatorBuilder};
