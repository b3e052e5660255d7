//! [`Issuer`]: one trusted token issuer and the keys that verify its tokens.

#[cfg(feature = "jwks")]
use http::Uri;
use jsonwebtoken::Algorithm;
use jsonwebtoken::crypto::CryptoProvider;

use crate::error::ClaimsConfigError;
use crate::key::VerifyingKey;

/// A trusted issuer (`iss`) with its own keys: HMAC secrets, PEM public keys and/or (feature
/// `jwks`) a JWKS URL.
///
/// Every key is bound to the algorithms it may verify; a token is only checked with keys of the
/// issuer named by its (unverified) `iss`, and only with keys bound to its `alg`.
///
/// ```
/// use jsonwebtoken::Algorithm;
/// use mcp_claims::Issuer;
///
/// # fn main() -> Result<(), mcp_claims::ClaimsConfigError> {
/// # let pem_path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ec256_public.pem");
/// let pem = std::fs::read(pem_path).unwrap();
/// let issuer = Issuer::new("https://issuer.example")
///     .hmac_secret(b"a long random secret", [Algorithm::HS256, Algorithm::HS512])
///     .public_key_pem(&pem, [Algorithm::ES256])?;
/// assert_eq!(issuer.iss(), "https://issuer.example");
///
/// // An EC P-256 key can only ever verify ES256.
/// assert!(Issuer::new("i").public_key_pem(&pem, [Algorithm::HS256]).is_err());
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use]
pub struct Issuer {
    pub(crate) iss: String,
    pub(crate) keys: Vec<VerifyingKey>,
    #[cfg(feature = "jwks")]
    pub(crate) jwks_url: Option<Uri>,
    #[cfg(feature = "jwks")]
    pub(crate) jwks_algorithms: Option<Vec<Algorithm>>,
    /// First error of an infallible builder method, reported by `build()`.
    pub(crate) deferred_error: Option<ClaimsConfigError>,
}

impl Issuer {
    /// An issuer whose tokens carry `iss` = `iss` exactly (no normalisation, no trailing-slash
    /// folding).
    pub fn new(iss: impl Into<String>) -> Self {
        Self {
            iss: iss.into(),
            keys: Vec::new(),
            #[cfg(feature = "jwks")]
            jwks_url: None,
            #[cfg(feature = "jwks")]
            jwks_algorithms: None,
            deferred_error: None,
        }
    }

    /// The `iss` value this issuer matches.
    pub fn iss(&self) -> &str {
        &self.iss
    }

    /// Adds an HMAC secret bound to `algorithms` (HS256/HS384/HS512 only).
    ///
    /// An empty secret or a non-HMAC algorithm is reported by
    /// [`JwtValidatorBuilder::build`](crate::JwtValidatorBuilder::build).
    pub fn hmac_secret(
        mut self,
        secret: impl AsRef<[u8]>,
        algorithms: impl IntoIterator<Item = Algorithm>,
    ) -> Self {
        match VerifyingKey::hmac(secret.as_ref(), algorithms) {
            Ok(key) => self.keys.push(key),
            Err(e) => {
                if self.deferred_error.is_none() {
                    self.deferred_error = Some(self.name_error(e));
                }
            }
        }
        self
    }

    /// Adds a PEM public key (`-----BEGIN PUBLIC KEY-----` SPKI, or PKCS#1
    /// `-----BEGIN RSA PUBLIC KEY-----`) bound to `algorithms`. The key type is detected: RSA keys
    /// may be bound to RS256/384/512 and PS256/384/512, EC P-256 keys to ES256, EC P-384 keys to
    /// ES384, Ed25519 keys to EdDSA. Private keys are refused.
    pub fn public_key_pem(
        mut self,
        pem: impl AsRef<[u8]>,
        algorithms: impl IntoIterator<Item = Algorithm>,
    ) -> Result<Self, ClaimsConfigError> {
        let provider =
            CryptoProvider::try_get_default().ok_or(ClaimsConfigError::NoCryptoProvider)?;
        let key = VerifyingKey::from_pem(pem.as_ref(), algorithms, provider)
            .map_err(|e| self.name_error(e))?;
        self.keys.push(key);
        Ok(self)
    }

    /// Sets the issuer's JWKS URL (`http://` or `https://`); replaces an earlier one. Feature
    /// `jwks`.
    ///
    /// The set is fetched on first use and cached (see
    /// [`JwtValidatorBuilder::jwks_refresh_interval`](crate::JwtValidatorBuilder::jwks_refresh_interval)).
    /// Symmetric (`oct`) keys in the set are ignored; RSA, EC P-256/P-384 and Ed25519 keys are bound
    /// to their JWK `alg`, or to every algorithm of their type when the JWK has none.
    ///
    /// ```
    /// use jsonwebtoken::Algorithm;
    /// use mcp_claims::Issuer;
    ///
    /// # fn main() -> Result<(), mcp_claims::ClaimsConfigError> {
    /// let issuer = Issuer::new("https://issuer.example")
    ///     .jwks_url("https://issuer.example/.well-known/jwks.json")?
    ///     .jwks_algorithms([Algorithm::RS256, Algorithm::EdDSA]);
    /// assert_eq!(issuer.iss(), "https://issuer.example");
    /// assert!(Issuer::new("i").jwks_url("ftp://issuer.example/jwks.json").is_err());
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "jwks")]
    pub fn jwks_url(mut self, url: impl AsRef<str>) -> Result<Self, ClaimsConfigError> {
        let text = url.as_ref();
        let uri: Uri = text
            .parse()
            .map_err(|_| ClaimsConfigError::InvalidJwksUrl(text.to_owned()))?;
        match (uri.scheme_str(), uri.authority()) {
            (Some("http" | "https"), Some(_)) => {}
            _ => return Err(ClaimsConfigError::InvalidJwksUrl(text.to_owned())),
        }
        self.jwks_url = Some(uri);
        Ok(self)
    }

    /// Restricts the keys taken from the JWKS to these algorithms (default: any asymmetric
    /// algorithm the key type supports). Feature `jwks`.
    #[cfg(feature = "jwks")]
    pub fn jwks_algorithms(mut self, algorithms: impl IntoIterator<Item = Algorithm>) -> Self {
        self.jwks_algorithms = Some(algorithms.into_iter().collect());
        self
    }

    /// Whether the issuer has a key, a secret or a JWKS URL.
    pub(crate) fn has_keys(&self) -> bool {
        #[cfg(feature = "jwks")]
        if self.jwks_url.is_some() {
            return true;
        }
        !self.keys.is_empty()
    }

    fn name_error(&self, e: ClaimsConfigError) -> ClaimsConfigError {
        match e {
            ClaimsConfigError::NoAlgorithms(_) => ClaimsConfigError::NoAlgorithms(self.iss.clone()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "jwks")]
    #[test]
    fn jwks_url_must_be_absolute_http() {
        assert!(Issuer::new("i").jwks_url("http://127.0.0.1:1/jwks").is_ok());
        assert!(
            Issuer::new("i")
                .jwks_url("https://idp.example/jwks")
                .is_ok()
        );
        for bad in ["/jwks", "ftp://idp/jwks", "idp.example/jwks", "not a url"] {
            assert!(
                matches!(
                    Issuer::new("i").jwks_url(bad),
                    Err(ClaimsConfigError::InvalidJwksUrl(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn hmac_errors_are_deferred() {
        let issuer = Issuer::new("i").hmac_secret(b"", [Algorithm::HS256]);
        assert!(matches!(
            issuer.deferred_error,
            Some(ClaimsConfigError::EmptySecret)
        ));
        let issuer = Issuer::new("i").hmac_secret(b"s", []);
        assert!(matches!(
            issuer.deferred_error,
            Some(ClaimsConfigError::NoAlgorithms(ref iss)) if iss == "i"
        ));
    }
}
