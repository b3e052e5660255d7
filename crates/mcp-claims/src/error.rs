//! Error types: [`AuthError`] (a request was refused), [`ClaimsConfigError`] (the validator could not
//! be built) and, with the `jwks` feature, `JwksError` (a key set could not be fetched).

use std::time::Duration;

use http::StatusCode;

/// Why a bearer token was refused.
///
/// Each variant names the check that failed, so tests and logs can tell them apart. None of them
/// carries token contents. [`ClaimsLayer`](crate::ClaimsLayer) maps them to responses:
/// [`InsufficientScope`](Self::InsufficientScope) is `403`, [`KeysUnavailable`](Self::KeysUnavailable)
/// is `503`, everything else is `401` with `WWW-Authenticate: Bearer error="invalid_token"`.
///
/// ```
/// use http::StatusCode;
/// use mcp_claims::AuthError;
///
/// assert_eq!(AuthError::Expired.status(), StatusCode::UNAUTHORIZED);
/// assert_eq!(AuthError::Expired.detail(), "Token expired");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("missing Authorization header")]
    MissingCredentials,
    /// An `Authorization` header whose scheme is not `Bearer` (or that is not visible ASCII).
    #[error("authorization scheme is not Bearer")]
    InvalidScheme,
    /// More than one `Authorization` header.
    #[error("more than one Authorization header")]
    MultipleCredentials,
    /// The token is not a compact JWS (three base64url parts, JSON header and payload objects), or
    /// its header carries an unsupported critical extension.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// The header's `alg` is `none`, unknown, or not accepted by any key of the token's issuer.
    #[error("unsupported token algorithm")]
    UnsupportedAlgorithm,
    /// The token's `iss` is not one of the configured issuers.
    #[error("unknown token issuer")]
    UnknownIssuer,
    /// No configured key of the issuer accepts the token's `alg` (and `kid`, when it has one).
    #[error("no matching signing key")]
    NoMatchingKey,
    /// Every candidate key rejected the signature.
    #[error("invalid token signature")]
    BadSignature,
    /// `exp` is in the past by more than the leeway.
    #[error("token expired")]
    Expired,
    /// `nbf` is in the future by more than the leeway.
    #[error("token not yet valid")]
    NotYetValid,
    /// None of the token's `aud` values is an accepted audience (or the token has no `aud`).
    #[error("token audience not accepted")]
    WrongAudience,
    /// A required claim (`iss`, `sub`, `exp`) is absent.
    #[error("token has no `{0}` claim")]
    MissingClaim(&'static str),
    /// A registered claim has the wrong JSON type (e.g. a string `exp`).
    #[error("token claim `{0}` has an invalid format")]
    InvalidClaim(&'static str),
    /// The issuer's JWKS has never been fetched successfully and fetching it failed just now
    /// (only with the `jwks` feature, which fetches key sets).
    #[error("signing keys unavailable")]
    KeysUnavailable {
        /// When a new fetch may be attempted (becomes the `Retry-After` header).
        retry_after: Duration,
    },
    /// The token is valid but lacks some of the required scopes.
    #[error("insufficient scope")]
    InsufficientScope {
        /// Every scope the resource requires, in configuration order.
        required: Vec<String>,
    },
}

impl AuthError {
    /// The HTTP status the layer answers with: `403` for
    /// [`InsufficientScope`](Self::InsufficientScope), `503` for
    /// [`KeysUnavailable`](Self::KeysUnavailable), `401` otherwise.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InsufficientScope { .. } => StatusCode::FORBIDDEN,
            Self::KeysUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::UNAUTHORIZED,
        }
    }

    /// The short text of the `{"detail":"..."}` response body. Never contains token contents.
    pub fn detail(&self) -> &'static str {
        match self {
            Self::MissingCredentials => "Missing bearer token",
            Self::InvalidScheme => "Authorization scheme must be Bearer",
            Self::MultipleCredentials => "Multiple Authorization headers",
            Self::Malformed(_) => "Malformed token",
            Self::UnsupportedAlgorithm => "Unsupported token algorithm",
            Self::UnknownIssuer => "Invalid token issuer",
            Self::NoMatchingKey => "No matching signing key",
            Self::BadSignature => "Invalid token signature",
            Self::Expired => "Token expired",
            Self::NotYetValid => "Token not yet valid",
            Self::WrongAudience => "Invalid token audience",
            Self::MissingClaim(_) => "Token is missing a required claim",
            Self::InvalidClaim(_) => "Token has an invalid claim",
            Self::KeysUnavailable { .. } => "Signing keys unavailable",
            Self::InsufficientScope { .. } => "Insufficient scope",
        }
    }

    /// The RFC 6750 `error` code of the challenge: `insufficient_scope` for
    /// [`InsufficientScope`](Self::InsufficientScope), `invalid_token` otherwise.
    pub fn error_code(&self) -> &'static str {
        match self {
            Self::InsufficientScope { .. } => "insufficient_scope",
            _ => "invalid_token",
        }
    }
}

/// A validator configuration error, returned by
/// [`JwtValidatorBuilder::build`](crate::JwtValidatorBuilder::build) and the fallible
/// [`Issuer`](crate::Issuer) methods.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimsConfigError {
    /// No issuer was configured.
    #[error("no issuer configured")]
    NoIssuer,
    /// Two issuers have the same `iss` value.
    #[error("issuer `{0}` configured twice")]
    DuplicateIssuer(String),
    /// An issuer has no key, secret or JWKS URL.
    #[error("issuer `{0}` has no keys")]
    NoKeys(String),
    /// No audience was configured: the audience is always checked.
    #[error("no audience configured (the audience is always checked)")]
    NoAudience,
    /// A key was bound to no algorithm.
    #[error("a key of issuer `{0}` is bound to no algorithm")]
    NoAlgorithms(String),
    /// A key was bound to an algorithm its type cannot verify (e.g. an RSA key bound to `HS256`,
    /// or a P-256 key bound to `ES384`).
    #[error("a {key_type} key cannot be bound to {algorithm:?}")]
    AlgorithmMismatch {
        /// What the key is (`HMAC secret`, `RSA`, `EC P-256`, ...).
        key_type: &'static str,
        /// The algorithm it was bound to.
        algorithm: jsonwebtoken::Algorithm,
    },
    /// An HMAC secret is empty.
    #[error("empty HMAC secret")]
    EmptySecret,
    /// A PEM public key could not be read as an RSA, EC (P-256/P-384) or Ed25519 public key.
    #[error("PEM is not an RSA, EC P-256/P-384 or Ed25519 public key")]
    InvalidPem,
    /// A JWKS URL is not an absolute `http` or `https` URL. Feature `jwks`.
    #[cfg(feature = "jwks")]
    #[error("invalid JWKS URL `{0}`: must be an absolute http:// or https:// URL")]
    InvalidJwksUrl(String),
    /// An `https` JWKS URL is configured but the TLS client could not be set up (no native roots).
    /// Feature `jwks`.
    #[cfg(feature = "jwks")]
    #[error("cannot set up TLS for JWKS fetching: {0}")]
    Tls(String),
    /// No jsonwebtoken crypto provider is available (neither or both backends enabled and none
    /// installed with `CryptoProvider::install_default`).
    #[error(
        "no jsonwebtoken CryptoProvider: enable exactly one of the `aws_lc_rs`/`rust_crypto` features or install one"
    )]
    NoCryptoProvider,
}

/// A JWKS fetch failed (returned by [`JwtValidator::prefetch`](crate::JwtValidator::prefetch); logged
/// at warn level when it happens on the request path). Feature `jwks`.
#[cfg(feature = "jwks")]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("fetching JWKS from {url} failed: {reason}")]
#[non_exhaustive]
pub struct JwksError {
    /// The JWKS URL.
    pub url: String,
    /// What went wrong (connect error, timeout, status, undecodable set, no usable key).
    pub reason: String,
}

/// Why one JWKS fetch attempt failed; becomes a [`JwksError::reason`].
#[cfg(feature = "jwks")]
#[derive(Debug, thiserror::Error)]
pub(crate) enum JwksFailure {
    #[error("cannot build request: {0}")]
    Request(http::Error),
    #[error("request failed: {}", error_chain(.0))]
    Exchange(hyper_util::client::legacy::Error),
    #[error("HTTP status {0}")]
    Status(StatusCode),
    #[error("reading body failed: {0}")]
    Body(Box<dyn std::error::Error + Send + Sync>),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("not a JWK Set document: {0}")]
    NotAJwkSet(serde_json::Error),
    #[error("no usable signature key among {0} JWKs")]
    NoUsableKey(usize),
}

/// `error: cause: cause's cause`: hyper-util's client error says only "client error (Connect)"
/// by itself; the reason (refused, DNS, TLS) is further down the chain.
#[cfg(feature = "jwks")]
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_codes() {
        assert_eq!(
            AuthError::MissingCredentials.status(),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(AuthError::MissingCredentials.error_code(), "invalid_token");
        let scope = AuthError::InsufficientScope {
            required: vec!["mcp".into()],
        };
        assert_eq!(scope.status(), StatusCode::FORBIDDEN);
        assert_eq!(scope.error_code(), "insufficient_scope");
        let unavailable = AuthError::KeysUnavailable {
            retry_after: Duration::from_secs(1),
        };
        assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn display_names_the_check() {
        assert_eq!(
            AuthError::MissingClaim("sub").to_string(),
            "token has no `sub` claim"
        );
        assert_eq!(
            AuthError::Malformed("bad base64").to_string(),
            "malformed token: bad base64"
        );
    }
}
