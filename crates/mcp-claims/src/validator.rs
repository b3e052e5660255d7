//! [`JwtValidator`]: checks a compact JWS against the configured issuers, keys, audiences and
//! scopes; usable on its own or through [`ClaimsLayer`](crate::ClaimsLayer).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::Algorithm;
use jsonwebtoken::crypto::CryptoProvider;

use crate::claims::{ClaimChecks, Claims};
#[cfg(feature = "jwks")]
use crate::clock::JwksClock;
#[cfg(feature = "jwks")]
use crate::error::JwksError;
use crate::error::{AuthError, ClaimsConfigError};
#[cfg(feature = "jwks")]
use crate::fetch::build_client;
use crate::issuer::Issuer;
#[cfg(feature = "jwks")]
use crate::jwks::{JwksSource, JwksTiming};
use crate::key::VerifyingKey;
use crate::token::UnverifiedToken;
use crate::verified::{VerifiedBy, VerifiedTokens};

/// Validates bearer JWTs: signature (with the keys of the issuer named by the token), `exp`
/// (required), `nbf`, `aud` (always checked), `sub` (required) and the required scopes.
///
/// Cheap to clone (one `Arc`); clones share the JWKS caches. Build it with
/// [`JwtValidator::builder`]. See the [crate docs](crate) for an example with the layer.
///
/// Validation order: the token must be a compact JWS whose header `alg` is a supported algorithm
/// (never `none`) and carries no `crit`; its unverified `iss` selects the issuer (unknown ->
/// [`AuthError::UnknownIssuer`]); the issuer must have a key bound to `alg`
/// ([`AuthError::UnsupportedAlgorithm`]); a token `kid` selects JWKS keys by id; the signature must
/// verify with one candidate key ([`AuthError::NoMatchingKey`], [`AuthError::BadSignature`]); only
/// then are the claims read.
#[derive(Clone)]
pub struct JwtValidator {
    inner: Arc<Inner>,
}

struct Inner {
    issuers: HashMap<String, IssuerState>,
    audiences: Vec<String>,
    leeway: u64,
    required_scopes: Vec<String>,
    provider: &'static CryptoProvider,
    verified: VerifiedTokens,
}

struct IssuerState {
    iss: Arc<str>,
    keys: Vec<VerifyingKey>,
    #[cfg(feature = "jwks")]
    jwks: Option<Arc<JwksSource>>,
}

impl IssuerState {
    /// Whether any key of this issuer could be bound to `alg`.
    fn may_accept(&self, alg: Algorithm) -> bool {
        #[cfg(feature = "jwks")]
        if self
            .jwks
            .as_ref()
            .is_some_and(|source| source.may_accept(alg))
        {
            return true;
        }
        self.keys.iter().any(|k| k.accepts(alg))
    }
}

/// What [`JwtValidator::check_inner`] found: a verified token's claims check and the keys that
/// verified it, or the need to fetch a JWKS first.
enum Checked {
    Verified(Result<Claims, AuthError>, VerifiedBy),
    #[cfg(feature = "jwks")]
    Fetch {
        source: Arc<JwksSource>,
        seen: u64,
    },
}

/// Result of a validation attempt that does no I/O.
pub(crate) enum Outcome {
    /// Finished.
    Done(Result<Claims, AuthError>),
    /// The issuer's JWKS must be fetched first (initial fetch or unknown `kid`).
    #[cfg(feature = "jwks")]
    Fetch { source: Arc<JwksSource>, seen: u64 },
}

#[cfg(feature = "jwks")]
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// May ask for a fetch.
    Cached,
    /// A fetch just ran (or was skipped): use whatever is cached.
    AfterFetch,
}

/// What an issuer's JWKS made of a token's signature.
#[cfg(feature = "jwks")]
enum JwksVerdict {
    /// Verified, by a key of the set or (the `kid` not being in the set) by a configured key.
    Verified(VerifiedBy),
    /// The set must be fetched first.
    Fetch { seen: u64 },
    /// Not verified: `tried` keys of the set refused the signature; `retry_after` when no set
    /// could be loaded yet.
    Unverified {
        tried: usize,
        retry_after: Option<Duration>,
    },
}

impl JwtValidator {
    /// The clock skew tolerated on `exp` and `nbf`, in whole seconds.
    pub(crate) fn leeway_secs(&self) -> u64 {
        self.inner.leeway
    }

    /// A builder with the defaults: leeway 30 s, JWKS refresh every 5 min, JWKS refetch at most
    /// every 10 s, JWKS fetch timeout 5 s, no required scopes.
    pub fn builder() -> JwtValidatorBuilder {
        JwtValidatorBuilder::default()
    }

    /// Validates `token` (the part after `Bearer `), fetching the issuer's JWKS first if needed.
    ///
    /// Returns the claims, or which check failed.
    pub async fn validate(&self, token: &str) -> Result<Claims, AuthError> {
        match self.check_cached(token) {
            Outcome::Done(result) => result,
            #[cfg(feature = "jwks")]
            Outcome::Fetch { source, seen } => {
                self.validate_after_fetch(token, &source, seen).await
            }
        }
    }

    /// Fetches every configured JWKS now (e.g. at startup), so the first requests do not wait.
    /// Feature `jwks`.
    ///
    /// Tries all of them and returns the first failure. A failure is not fatal: requests will retry
    /// the fetch (rate-limited by the minimum refetch interval).
    #[cfg(feature = "jwks")]
    pub async fn prefetch(&self) -> Result<(), JwksError> {
        let mut first_error = None;
        for issuer in self.inner.issuers.values() {
            if let Some(source) = &issuer.jwks
                && let Err(e) = source.fetch_now().await
            {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The configured issuers' `iss` values.
    pub fn issuers(&self) -> impl Iterator<Item = &str> {
        self.inner.issuers.keys().map(String::as_str)
    }

    /// The accepted audiences.
    pub fn audiences(&self) -> &[String] {
        &self.inner.audiences
    }

    /// The scopes every token must carry.
    pub fn required_scopes(&self) -> &[String] {
        &self.inner.required_scopes
    }

    /// Validation without I/O, for the layer's fast path.
    pub(crate) fn check_cached(&self, token: &str) -> Outcome {
        self.check(
            token,
            #[cfg(feature = "jwks")]
            Mode::Cached,
        )
    }

    /// The second half of [`validate`](Self::validate) after [`Outcome::Fetch`].
    #[cfg(feature = "jwks")]
    pub(crate) async fn validate_after_fetch(
        &self,
        token: &str,
        source: &JwksSource,
        seen: u64,
    ) -> Result<Claims, AuthError> {
        // A failure is logged by the source; the cached set (if any) is used below.
        let _ = source.fetch_single_flight(seen).await;
        match self.check(token, Mode::AfterFetch) {
            Outcome::Done(result) => result,
            // `AfterFetch` never asks for another fetch.
            Outcome::Fetch { .. } => Err(AuthError::NoMatchingKey),
        }
    }

    fn check(&self, token: &str, #[cfg(feature = "jwks")] mode: Mode) -> Outcome {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Some(claims) = self.inner.verified.get(token, now) {
            return Outcome::Done(Ok(claims));
        }
        let checked = self.check_inner(
            token,
            #[cfg(feature = "jwks")]
            mode,
            now,
        );
        match checked {
            Ok(Checked::Verified(Ok(claims), by)) => {
                let valid_until = claims.exp().saturating_add(self.inner.leeway);
                self.inner
                    .verified
                    .insert(token, &claims, valid_until, by, now);
                Outcome::Done(Ok(claims))
            }
            Ok(Checked::Verified(Err(e), _)) | Err(e) => Outcome::Done(Err(e)),
            #[cfg(feature = "jwks")]
            Ok(Checked::Fetch { source, seen }) => Outcome::Fetch { source, seen },
        }
    }

    fn check_inner(
        &self,
        raw: &str,
        #[cfg(feature = "jwks")] mode: Mode,
        now: u64,
    ) -> Result<Checked, AuthError> {
        let token = UnverifiedToken::parse(raw)?;
        let issuer = match token.claims.get("iss") {
            None => return Err(AuthError::MissingClaim("iss")),
            Some(serde_json::Value::String(iss)) => self
                .inner
                .issuers
                .get(iss.as_str())
                .ok_or(AuthError::UnknownIssuer)?,
            Some(_) => return Err(AuthError::InvalidClaim("iss")),
        };
        let alg = token.alg;
        if !issuer.may_accept(alg) {
            return Err(AuthError::UnsupportedAlgorithm);
        }
        let message = token.signing_input.as_bytes();
        let provider = self.inner.provider;
        let verify = |key: &VerifyingKey| key.verify(provider, alg, message, &token.signature);

        #[cfg(feature = "jwks")]
        let (jwks_tried, retry_after) = match &issuer.jwks {
            None => (0, None),
            Some(source) => {
                match jwks_verdict(source, issuer, token.kid.as_deref(), alg, mode, &verify)? {
                    JwksVerdict::Verified(by) => {
                        let claims = self.read_claims(issuer, token.claims, alg, token.kid, now);
                        return Ok(Checked::Verified(claims, by));
                    }
                    JwksVerdict::Fetch { seen } => {
                        return Ok(Checked::Fetch {
                            source: Arc::clone(source),
                            seen,
                        });
                    }
                    JwksVerdict::Unverified { tried, retry_after } => (tried, retry_after),
                }
            }
        };
        #[cfg(not(feature = "jwks"))]
        let (jwks_tried, retry_after) = (0, None::<Duration>);

        let mut tried = jwks_tried;
        for key in issuer.keys.iter().filter(|k| k.accepts(alg)) {
            tried += 1;
            if verify(key) {
                let claims = self.read_claims(issuer, token.claims, alg, token.kid, now);
                return Ok(Checked::Verified(claims, VerifiedBy::Configured));
            }
        }
        Err(match (tried, retry_after) {
            (0, Some(retry_after)) => AuthError::KeysUnavailable {
                retry_after: retry_after.max(Duration::from_secs(1)),
            },
            (0, None) => AuthError::NoMatchingKey,
            _ => AuthError::BadSignature,
        })
    }

    /// The claims of a token whose signature verified.
    fn read_claims(
        &self,
        issuer: &IssuerState,
        claims: serde_json::Map<String, serde_json::Value>,
        alg: Algorithm,
        kid: Option<String>,
        now: u64,
    ) -> Result<Claims, AuthError> {
        let checks = ClaimChecks {
            now,
            leeway: self.inner.leeway,
            audiences: &self.inner.audiences,
            required_scopes: &self.inner.required_scopes,
        };
        Claims::from_verified(Arc::clone(&issuer.iss), claims, alg, kid, &checks)
    }
}

/// The JWKS half of a signature check: the keys of `source`'s set that match the token's `kid`
/// (all of them when it has none) and accept `alg`.
#[cfg(feature = "jwks")]
fn jwks_verdict(
    source: &Arc<JwksSource>,
    issuer: &IssuerState,
    kid: Option<&str>,
    alg: Algorithm,
    mode: Mode,
    verify: &dyn Fn(&VerifyingKey) -> bool,
) -> Result<JwksVerdict, AuthError> {
    let snapshot = source.snapshot();
    let may_fetch = mode == Mode::Cached && snapshot.may_fetch;
    let Some(keys) = &snapshot.keys else {
        return Ok(if may_fetch {
            JwksVerdict::Fetch {
                seen: snapshot.attempts,
            }
        } else {
            JwksVerdict::Unverified {
                tried: 0,
                retry_after: Some(snapshot.retry_after),
            }
        });
    };
    let mut kid_known = kid.is_none();
    let mut tried = 0;
    for key in keys.iter() {
        if let Some(kid) = kid {
            if key.kid() != Some(kid) {
                continue;
            }
            kid_known = true;
        }
        if key.accepts(alg) {
            tried += 1;
            if verify(key) {
                return Ok(JwksVerdict::Verified(VerifiedBy::Jwks(
                    Arc::clone(source),
                    Arc::clone(keys),
                )));
            }
        }
    }
    if !kid_known {
        // A configured key might still verify it; otherwise the kid is unknown.
        if issuer.keys.iter().any(|k| k.accepts(alg) && verify(k)) {
            return Ok(JwksVerdict::Verified(VerifiedBy::Configured));
        }
        if may_fetch {
            return Ok(JwksVerdict::Fetch {
                seen: snapshot.attempts,
            });
        }
        return Err(AuthError::NoMatchingKey);
    }
    Ok(JwksVerdict::Unverified {
        tried,
        retry_after: None,
    })
}

impl fmt::Debug for JwtValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut issuers: Vec<_> = self.inner.issuers.keys().collect();
        issuers.sort();
        f.debug_struct("JwtValidator")
            .field("issuers", &issuers)
            .field("audiences", &self.inner.audiences)
            .field("leeway", &self.inner.leeway)
            .field("required_scopes", &self.inner.required_scopes)
            .finish_non_exhaustive()
    }
}

/// Builder of a [`JwtValidator`]; see [`JwtValidator::builder`].
///
/// ```
/// use std::time::Duration;
/// use jsonwebtoken::Algorithm;
/// use mcp_claims::{Issuer, JwtValidator};
///
/// # fn main() -> Result<(), mcp_claims::ClaimsConfigError> {
/// let validator = JwtValidator::builder()
///     .issuer(Issuer::new("https://a.example").hmac_secret(b"secret-a", [Algorithm::HS256]))
///     .issuer(Issuer::new("https://b.example").hmac_secret(b"secret-b", [Algorithm::HS512]))
///     .audiences(["mcp-gateway", "https://gw.example/mcp"])
///     .leeway(Duration::from_secs(30))
///     .required_scopes(["mcp"])
///     .build()?;
/// assert_eq!(validator.required_scopes(), ["mcp"]);
///
/// // The audience is always checked: building without one fails.
/// assert!(JwtValidator::builder()
///     .issuer(Issuer::new("https://a.example").hmac_secret(b"s", [Algorithm::HS256]))
///     .build()
///     .is_err());
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use]
pub struct JwtValidatorBuilder {
    issuers: Vec<Issuer>,
    audiences: Vec<String>,
    leeway: Duration,
    required_scopes: Vec<String>,
    #[cfg(feature = "jwks")]
    timing: JwksTiming,
    #[cfg(feature = "jwks")]
    tls: Option<rustls::ClientConfig>,
    #[cfg(feature = "jwks")]
    clock: JwksClock,
    verified_tokens: usize,
}

impl Default for JwtValidatorBuilder {
    fn default() -> Self {
        Self {
            issuers: Vec::new(),
            audiences: Vec::new(),
            leeway: Duration::from_secs(30),
            required_scopes: Vec::new(),
            #[cfg(feature = "jwks")]
            timing: JwksTiming {
                refresh_interval: Duration::from_secs(300),
                min_refetch_interval: Duration::from_secs(10),
                fetch_timeout: Duration::from_secs(5),
            },
            #[cfg(feature = "jwks")]
            tls: None,
            #[cfg(feature = "jwks")]
            clock: JwksClock::tokio(),
            verified_tokens: 10_000,
        }
    }
}

impl JwtValidatorBuilder {
    /// Adds a trusted issuer. Several issuers may be added, each with its own keys.
    pub fn issuer(mut self, issuer: Issuer) -> Self {
        self.issuers.push(issuer);
        self
    }

    /// Adds an accepted audience. A token is accepted when one of its `aud` values is accepted.
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audiences.push(audience.into());
        self
    }

    /// Adds several accepted audiences.
    pub fn audiences(mut self, audiences: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.audiences.extend(audiences.into_iter().map(Into::into));
        self
    }

    /// Clock skew tolerated on `exp` and `nbf` (default 30 s; whole seconds).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Scopes every token must carry; a valid token lacking one is refused with
    /// [`AuthError::InsufficientScope`] (403). Adds to earlier calls.
    pub fn required_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        for scope in scopes {
            let scope = scope.into();
            if !self.required_scopes.contains(&scope) {
                self.required_scopes.push(scope);
            }
        }
        self
    }

    /// Age after which a cached JWKS is refreshed (default 5 min). The stale set keeps being served
    /// while one background refresh runs, and after a failed one. Feature `jwks`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_claims::{Issuer, JwtValidator};
    ///
    /// # fn main() -> Result<(), mcp_claims::ClaimsConfigError> {
    /// let validator = JwtValidator::builder()
    ///     .issuer(Issuer::new("https://idp.example").jwks_url("http://127.0.0.1:1/jwks.json")?)
    ///     .audience("mcp-gateway")
    ///     .jwks_refresh_interval(Duration::from_secs(300))
    ///     .jwks_min_refetch_interval(Duration::from_secs(10))
    ///     .jwks_fetch_timeout(Duration::from_secs(5))
    ///     .build()?;
    /// assert_eq!(validator.issuers().collect::<Vec<_>>(), ["https://idp.example"]);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "jwks")]
    pub fn jwks_refresh_interval(mut self, interval: Duration) -> Self {
        self.timing.refresh_interval = interval;
        self
    }

    /// Minimum time between two JWKS fetch attempts of one issuer, whatever triggered them
    /// (unknown `kid`, stale set, failed earlier fetch). Default 10 s. Feature `jwks`.
    #[cfg(feature = "jwks")]
    pub fn jwks_min_refetch_interval(mut self, interval: Duration) -> Self {
        self.timing.min_refetch_interval = interval;
        self
    }

    /// Timeout of one JWKS fetch, connect to last body byte (default 5 s). Feature `jwks`.
    #[cfg(feature = "jwks")]
    pub fn jwks_fetch_timeout(mut self, timeout: Duration) -> Self {
        self.timing.fetch_timeout = timeout;
        self
    }

    /// TLS configuration for `https` JWKS URLs (default: rustls with the platform's native roots).
    /// ALPN is set by the client. Feature `jwks`.
    #[cfg(feature = "jwks")]
    pub fn jwks_tls_config(mut self, config: rustls::ClientConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// The clock the JWKS intervals are measured on (default: tokio's clock, which paused tokio
    /// time moves too). Feature `jwks`.
    #[cfg(feature = "jwks")]
    pub fn jwks_clock(mut self, clock: JwksClock) -> Self {
        self.clock = clock;
        self
    }

    /// How many validated tokens to remember (default 10,000; 0 turns the cache off), so that a
    /// token sent again is not verified again: its claims are reused until its `exp` (plus the
    /// leeway), while the JWKS set that verified it is still the one served. Refused tokens are
    /// never remembered.
    pub fn verified_token_cache(mut self, entries: usize) -> Self {
        self.verified_tokens = entries;
        self
    }

    /// Checks the configuration and builds the validator.
    ///
    /// Fails when no issuer or no audience is configured, an issuer has no key, an issuer appears
    /// twice, a key binding is invalid, no jsonwebtoken crypto provider is available, or an `https`
    /// JWKS URL is configured and no TLS roots can be loaded.
    pub fn build(self) -> Result<JwtValidator, ClaimsConfigError> {
        let provider =
            CryptoProvider::try_get_default().ok_or(ClaimsConfigError::NoCryptoProvider)?;
        if self.issuers.is_empty() {
            return Err(ClaimsConfigError::NoIssuer);
        }
        if self.audiences.is_empty() {
            return Err(ClaimsConfigError::NoAudience);
        }
        #[cfg(feature = "jwks")]
        let client = {
            let jwks_urls: Vec<_> = self
                .issuers
                .iter()
                .filter_map(|i| i.jwks_url.as_ref())
                .collect();
            if jwks_urls.is_empty() {
                None
            } else {
                let need_https = jwks_urls.iter().any(|u| u.scheme_str() == Some("https"));
                Some(build_client(
                    self.tls,
                    need_https,
                    self.timing.fetch_timeout,
                )?)
            }
        };

        let mut issuers = HashMap::with_capacity(self.issuers.len());
        for issuer in self.issuers {
            if let Some(e) = issuer.deferred_error {
                return Err(e);
            }
            if !issuer.has_keys() {
                return Err(ClaimsConfigError::NoKeys(issuer.iss));
            }
            if issuers.contains_key(&issuer.iss) {
                return Err(ClaimsConfigError::DuplicateIssuer(issuer.iss));
            }
            let state = IssuerState {
                iss: Arc::from(issuer.iss.as_str()),
                #[cfg(feature = "jwks")]
                jwks: match (issuer.jwks_url, &client) {
                    (Some(uri), Some(client)) => Some(Arc::new(JwksSource::new(
                        uri,
                        issuer.jwks_algorithms,
                        client.clone(),
                        self.timing,
                        self.clock.clone(),
                    ))),
                    _ => None,
                },
                keys: issuer.keys,
            };
            issuers.insert(issuer.iss, state);
        }

        Ok(JwtValidator {
            inner: Arc::new(Inner {
                issuers,
                audiences: self.audiences,
                leeway: self.leeway.as_secs(),
                required_scopes: self.required_scopes,
                provider,
                verified: VerifiedTokens::new(self.verified_tokens),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode, get_current_timestamp};
    use serde_json::{Value, json};

    const SECRET: &[u8] = b"unit-test-secret";

    fn validator() -> JwtValidator {
        JwtValidator::builder()
            .issuer(
                Issuer::new("https://a.example")
                    .hmac_secret(SECRET, [Algorithm::HS256, Algorithm::HS512]),
            )
            .issuer(Issuer::new("https://b.example").hmac_secret(b"other", [Algorithm::HS384]))
            .audience("api")
            .build()
            .expect("valid config")
    }

    fn hs(alg: Algorithm, secret: &[u8], claims: Value) -> String {
        encode(
            &Header::new(alg),
            &claims,
            &EncodingKey::from_secret(secret).expect("key"),
        )
        .expect("encode")
    }

    fn good_claims(iss: &str) -> Value {
        json!({"iss": iss, "sub": "alice", "aud": "api", "exp": get_current_timestamp() + 300})
    }

    #[tokio::test]
    async fn picks_issuer_keys() {
        let v = validator();
        let t = hs(Algorithm::HS256, SECRET, good_claims("https://a.example"));
        assert_eq!(v.validate(&t).await.expect("valid").sub(), "alice");
        let t = hs(Algorithm::HS384, b"other", good_claims("https://b.example"));
        assert_eq!(
            v.validate(&t).await.expect("valid").iss(),
            "https://b.example"
        );
        // Issuer b's secret does not verify tokens claiming issuer a.
        let t = hs(Algorithm::HS256, b"other", good_claims("https://a.example"));
        assert_eq!(
            v.validate(&t).await.expect_err("x"),
            AuthError::BadSignature
        );
        // HS384 is bound to issuer b only.
        let t = hs(Algorithm::HS384, SECRET, good_claims("https://a.example"));
        assert_eq!(
            v.validate(&t).await.expect_err("x"),
            AuthError::UnsupportedAlgorithm
        );
        let t = hs(Algorithm::HS256, SECRET, good_claims("https://c.example"));
        assert_eq!(
            v.validate(&t).await.expect_err("x"),
            AuthError::UnknownIssuer
        );
        let mut no_iss = good_claims("x");
        no_iss.as_object_mut().expect("object").remove("iss");
        let t = hs(Algorithm::HS256, SECRET, no_iss);
        assert_eq!(
            v.validate(&t).await.expect_err("x"),
            AuthError::MissingClaim("iss")
        );
    }

    #[test]
    fn sync_path_without_jwks() {
        let v = validator();
        let t = hs(Algorithm::HS512, SECRET, good_claims("https://a.example"));
        assert!(matches!(v.check_cached(&t), Outcome::Done(Ok(_))));
    }

    #[test]
    fn config_errors() {
        let base = || Issuer::new("i").hmac_secret(b"s", [Algorithm::HS256]);
        assert!(matches!(
            JwtValidator::builder().audience("a").build(),
            Err(ClaimsConfigError::NoIssuer)
        ));
        assert!(matches!(
            JwtValidator::builder().issuer(base()).build(),
            Err(ClaimsConfigError::NoAudience)
        ));
        assert!(matches!(
            JwtValidator::builder()
                .issuer(Issuer::new("i"))
                .audience("a")
                .build(),
            Err(ClaimsConfigError::NoKeys(_))
        ));
        assert!(matches!(
            JwtValidator::builder()
                .issuer(base())
                .issuer(base())
                .audience("a")
                .build(),
            Err(ClaimsConfigError::DuplicateIssuer(_))
        ));
        assert!(matches!(
            JwtValidator::builder()
                .issuer(Issuer::new("i").hmac_secret(b"s", [Algorithm::ES256]))
                .audience("a")
                .build(),
            Err(ClaimsConfigError::AlgorithmMismatch { .. })
        ));
        let v = JwtValidator::builder()
            .issuer(base())
            .audiences(["a", "b"])
            .required_scopes(["x", "x", "y"])
            .build()
            .expect("valid");
        assert_eq!(v.audiences(), ["a", "b"]);
        assert_eq!(v.required_scopes(), ["x", "y"]);
        assert_eq!(v.issuers().collect::<Vec<_>>(), ["i"]);
        assert!(format!("{v:?}").contains("JwtValidator"));
    }

    #[tokio::test]
    async fn validated_tokens_are_remembered_until_exp_plus_leeway() {
        let v = JwtValidator::builder()
            .issuer(Issuer::new("https://a.example").hmac_secret(SECRET, [Algorithm::HS256]))
            .audience("api")
            .leeway(Duration::from_secs(30))
            .build()
            .expect("valid config");
        let exp = get_current_timestamp() + 300;
        let claims = json!({"iss": "https://a.example", "sub": "alice", "aud": "api", "exp": exp});
        let t = hs(Algorithm::HS256, SECRET, claims);
        assert_eq!(v.validate(&t).await.expect("valid").sub(), "alice");
        assert_eq!(v.inner.verified.len(), 1);
        let cached = v.inner.verified.get(&t, exp + 30).expect("remembered");
        assert_eq!((cached.sub(), cached.exp()), ("alice", exp));
        assert!(
            v.inner.verified.get(&t, exp + 31).is_none(),
            "never past exp + leeway"
        );
        // Another token (here: the same one with its signature changed) is not answered by the
        // entry, and a refused token is not remembered.
        let mut forged = t.clone();
        forged.push('A');
        assert!(v.inner.verified.get(&forged, exp).is_none());
        assert_eq!(
            v.validate(&forged).await.expect_err("refused"),
            AuthError::BadSignature
        );
        let expired = hs(
            Algorithm::HS256,
            SECRET,
            json!({"iss": "https://a.example", "sub": "bob", "aud": "api", "exp": 1000}),
        );
        assert_eq!(
            v.validate(&expired).await.expect_err("refused"),
            AuthError::Expired
        );
        assert_eq!(v.inner.verified.len(), 1);
        // The cached answer is the validated one.
        assert_eq!(v.validate(&t).await.expect("valid").sub(), "alice");
    }

    #[tokio::test]
    async fn verified_token_cache_is_bounded() {
        let build = |entries| {
            JwtValidator::builder()
                .issuer(Issuer::new("https://a.example").hmac_secret(SECRET, [Algorithm::HS256]))
                .audience("api")
                .verified_token_cache(entries)
                .build()
                .expect("valid config")
        };
        let tokens: Vec<String> = (0..200)
            .map(|i| {
                let mut claims = good_claims("https://a.example");
                claims["n"] = json!(i);
                hs(Algorithm::HS256, SECRET, claims)
            })
            .collect();
        let (off, small) = (build(0), build(16));
        for t in &tokens {
            assert_eq!(off.validate(t).await.expect("valid").sub(), "alice");
            assert_eq!(small.validate(t).await.expect("valid").sub(), "alice");
        }
        assert_eq!(off.inner.verified.len(), 0);
        let held = small.inner.verified.len();
        assert!((1..=16).contains(&held), "{held} entries");
    }

    #[cfg(feature = "jwks")]
    #[tokio::test]
    async fn jwks_down_without_cache_is_unavailable() {
        let v = JwtValidator::builder()
            .issuer(
                Issuer::new("https://a.example")
                    .jwks_url("http://127.0.0.1:9/jwks.json")
                    .expect("url"),
            )
            .audience("api")
            .jwks_min_refetch_interval(Duration::from_secs(60))
            .build()
            .expect("valid");
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("k".into());
        // Signature bytes do not matter: no key can be found.
        let token = format!(
            "{}.{}.c2ln",
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                serde_json::to_vec(&header).expect("json")
            ),
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                good_claims("https://a.example").to_string()
            ),
        );
        assert!(matches!(v.check_cached(&token), Outcome::Fetch { .. }));
        let err = v.validate(&token).await.expect_err("refused");
        assert!(
            matches!(err, AuthError::KeysUnavailable { retry_after } if retry_after > Duration::from_secs(50)),
            "{err:?}"
        );
        // Rate-limited now: answered without I/O.
        assert!(matches!(
            v.check_cached(&token),
            Outcome::Done(Err(AuthError::KeysUnavailable { .. }))
        ));
        // HMAC algorithms are never accepted from a JWKS.
        let t = hs(Algorithm::HS256, SECRET, good_claims("https://a.example"));
        assert_eq!(
            v.validate(&t).await.expect_err("x"),
            AuthError::UnsupportedAlgorithm
        );
        assert!(v.prefetch().await.is_err());
    }
}
