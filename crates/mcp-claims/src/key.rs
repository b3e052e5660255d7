//! [`VerifyingKey`]: one verification key bound to the algorithms it may verify.

use std::fmt;

use jsonwebtoken::crypto::CryptoProvider;
use jsonwebtoken::{Algorithm, DecodingKey};

use crate::error::ClaimsConfigError;

/// What a key is; decides which algorithms it may ever be bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyType {
    Hmac,
    Rsa,
    EcP256,
    EcP384,
    Ed25519,
}

impl KeyType {
    /// Whether a key of this type can verify `alg` at all.
    pub(crate) fn allows(self, alg: Algorithm) -> bool {
        use Algorithm::*;
        match self {
            Self::Hmac => matches!(alg, HS256 | HS384 | HS512),
            Self::Rsa => matches!(alg, RS256 | RS384 | RS512 | PS256 | PS384 | PS512),
            Self::EcP256 => alg == ES256,
            Self::EcP384 => alg == ES384,
            Self::Ed25519 => alg == EdDSA,
        }
    }

    /// Every algorithm a key of this type can verify (used for JWKs without `alg`).
    #[cfg(feature = "jwks")]
    pub(crate) fn all_algorithms(self) -> &'static [Algorithm] {
        use Algorithm::*;
        match self {
            Self::Hmac => &[HS256, HS384, HS512],
            Self::Rsa => &[RS256, RS384, RS512, PS256, PS384, PS512],
            Self::EcP256 => &[ES256],
            Self::EcP384 => &[ES384],
            Self::Ed25519 => &[EdDSA],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Hmac => "HMAC secret",
            Self::Rsa => "RSA",
            Self::EcP256 => "EC P-256",
            Self::EcP384 => "EC P-384",
            Self::Ed25519 => "Ed25519",
        }
    }
}

/// A verification key, its optional key id and the algorithms it is bound to.
///
/// A token is only ever verified with a key whose binding contains the token's `alg`, so an RSA
/// public key can never be used as an HMAC secret (the classic algorithm-confusion attack).
#[derive(Clone)]
pub(crate) struct VerifyingKey {
    kid: Option<String>,
    key_type: KeyType,
    algorithms: Vec<Algorithm>,
    key: DecodingKey,
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material (HMAC secrets).
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("key_type", &self.key_type)
            .field("algorithms", &self.algorithms)
            .finish_non_exhaustive()
    }
}

impl VerifyingKey {
    /// Binds `key` of type `key_type` to `algorithms`; fails if one of them does not fit the type or
    /// if the list is empty.
    pub(crate) fn new(
        kid: Option<String>,
        key_type: KeyType,
        key: DecodingKey,
        algorithms: impl IntoIterator<Item = Algorithm>,
    ) -> Result<Self, ClaimsConfigError> {
        let mut algs: Vec<Algorithm> = Vec::new();
        for alg in algorithms {
            if !key_type.allows(alg) {
                return Err(ClaimsConfigError::AlgorithmMismatch {
                    key_type: key_type.name(),
                    algorithm: alg,
                });
            }
            if !algs.contains(&alg) {
                algs.push(alg);
            }
        }
        if algs.is_empty() {
            return Err(ClaimsConfigError::NoAlgorithms(String::new()));
        }
        Ok(Self {
            kid,
            key_type,
            algorithms: algs,
            key,
        })
    }

    /// An HMAC secret bound to HS256/384/512 algorithms.
    pub(crate) fn hmac(
        secret: &[u8],
        algorithms: impl IntoIterator<Item = Algorithm>,
    ) -> Result<Self, ClaimsConfigError> {
        let key = DecodingKey::from_secret(secret).map_err(|_| ClaimsConfigError::EmptySecret)?;
        Self::new(None, KeyType::Hmac, key, algorithms)
    }

    /// A PEM public key (SPKI `PUBLIC KEY`, or PKCS#1 `RSA PUBLIC KEY`); the key type is detected.
    pub(crate) fn from_pem(
        pem: &[u8],
        algorithms: impl IntoIterator<Item = Algorithm>,
        provider: &CryptoProvider,
    ) -> Result<Self, ClaimsConfigError> {
        let (key_type, key) = detect_pem(pem, provider)?;
        Self::new(None, key_type, key, algorithms)
    }

    /// The key id (`kid`), for JWKS keys.
    #[cfg(feature = "jwks")]
    pub(crate) fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// Whether this key may verify tokens signed with `alg`.
    pub(crate) fn accepts(&self, alg: Algorithm) -> bool {
        self.algorithms.contains(&alg)
    }

    /// The algorithms this key is bound to.
    #[cfg(test)]
    pub(crate) fn algorithms(&self) -> &[Algorithm] {
        &self.algorithms
    }

    /// Verifies `signature` over `message` with `alg`. `false` if the key is not bound to `alg`.
    pub(crate) fn verify(
        &self,
        provider: &CryptoProvider,
        alg: Algorithm,
        message: &[u8],
        signature: &Vec<u8>,
    ) -> bool {
        if !self.accepts(alg) {
            return false;
        }
        match (provider.verifier_factory)(&alg, &self.key) {
            Ok(verifier) => verifier.verify(message, signature).is_ok(),
            Err(_) => false,
        }
    }
}

/// Reads a PEM public key and finds out what it is.
fn detect_pem(
    pem: &[u8],
    provider: &CryptoProvider,
) -> Result<(KeyType, DecodingKey), ClaimsConfigError> {
    // Only public keys: jsonwebtoken would also accept a private key PEM here and then fail every
    // verification at request time.
    let text = std::str::from_utf8(pem).map_err(|_| ClaimsConfigError::InvalidPem)?;
    let label = text
        .split("-----BEGIN ")
        .nth(1)
        .and_then(|rest| rest.split("-----").next())
        .ok_or(ClaimsConfigError::InvalidPem)?;
    if label != "PUBLIC KEY" && label != "RSA PUBLIC KEY" {
        return Err(ClaimsConfigError::InvalidPem);
    }

    if let Ok(key) = DecodingKey::from_rsa_pem(pem) {
        let der = key
            .try_get_as_bytes()
            .map_err(|_| ClaimsConfigError::InvalidPem)?;
        (provider.key_utils.rsa_pub_components_from_public_key)(der)
            .map_err(|_| ClaimsConfigError::InvalidPem)?;
        return Ok((KeyType::Rsa, key));
    }
    if let Ok(key) = DecodingKey::from_ec_pem(pem) {
        let point = key
            .try_get_as_bytes()
            .map_err(|_| ClaimsConfigError::InvalidPem)?;
        let key_type = match (point.first(), point.len()) {
            (Some(4), 65) => KeyType::EcP256,
            (Some(4), 97) => KeyType::EcP384,
            _ => return Err(ClaimsConfigError::InvalidPem),
        };
        return Ok((key_type, key));
    }
    if let Ok(key) = DecodingKey::from_ed_pem(pem) {
        let raw = key
            .try_get_as_bytes()
            .map_err(|_| ClaimsConfigError::InvalidPem)?;
        if raw.len() != 32 {
            return Err(ClaimsConfigError::InvalidPem);
        }
        return Ok((KeyType::Ed25519, key));
    }
    Err(ClaimsConfigError::InvalidPem)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSA: &[u8] = include_bytes!("../tests/fixtures/rsa_public.pem");
    const RSA_PRIVATE: &[u8] = include_bytes!("../tests/fixtures/rsa_private.pem");
    const EC256: &[u8] = include_bytes!("../tests/fixtures/ec256_public.pem");
    const EC384: &[u8] = include_bytes!("../tests/fixtures/ec384_public.pem");
    const ED: &[u8] = include_bytes!("../tests/fixtures/ed25519_public.pem");

    fn provider() -> &'static CryptoProvider {
        CryptoProvider::try_get_default().expect("aws_lc_rs provider")
    }

    #[test]
    fn detects_pem_key_types() {
        let p = provider();
        assert_eq!(detect_pem(RSA, p).expect("rsa").0, KeyType::Rsa, "RSA SPKI");
        assert_eq!(detect_pem(EC256, p).expect("p256").0, KeyType::EcP256);
        assert_eq!(detect_pem(EC384, p).expect("p384").0, KeyType::EcP384);
        assert_eq!(detect_pem(ED, p).expect("ed").0, KeyType::Ed25519);
        assert!(matches!(
            detect_pem(RSA_PRIVATE, p),
            Err(ClaimsConfigError::InvalidPem)
        ));
        assert!(matches!(
            detect_pem(b"not a pem", p),
            Err(ClaimsConfigError::InvalidPem)
        ));
    }

    #[test]
    fn binding_is_checked() {
        let p = provider();
        assert!(VerifyingKey::from_pem(RSA, [Algorithm::RS256, Algorithm::PS512], p).is_ok());
        assert!(matches!(
            VerifyingKey::from_pem(RSA, [Algorithm::HS256], p),
            Err(ClaimsConfigError::AlgorithmMismatch { .. })
        ));
        assert!(matches!(
            VerifyingKey::from_pem(EC256, [Algorithm::ES384], p),
            Err(ClaimsConfigError::AlgorithmMismatch { .. })
        ));
        assert!(matches!(
            VerifyingKey::from_pem(ED, [], p),
            Err(ClaimsConfigError::NoAlgorithms(_))
        ));
        assert!(matches!(
            VerifyingKey::hmac(b"", [Algorithm::HS256]),
            Err(ClaimsConfigError::EmptySecret)
        ));
        assert!(matches!(
            VerifyingKey::hmac(b"s", [Algorithm::RS256]),
            Err(ClaimsConfigError::AlgorithmMismatch { .. })
        ));
        let key = VerifyingKey::hmac(b"s", [Algorithm::HS256, Algorithm::HS256]).expect("hmac");
        assert_eq!(key.algorithms(), &[Algorithm::HS256]);
        assert!(
            !format!("{key:?}").contains("115"),
            "no secret bytes in Debug"
        );
    }

    #[test]
    fn verify_refuses_unbound_algorithm() {
        let p = provider();
        let key = VerifyingKey::hmac(b"secret", [Algorithm::HS256]).expect("hmac");
        let sig = jsonwebtoken::crypto::sign(
            b"msg",
            &jsonwebtoken::EncodingKey::from_secret(b"secret").expect("key"),
            Algorithm::HS384,
        )
        .expect("sign");
        let sig = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, sig)
            .expect("b64");
        assert!(!key.verify(p, Algorithm::HS384, b"msg", &sig));
        let key = VerifyingKey::hmac(b"secret", [Algorithm::HS384]).expect("hmac");
        assert!(key.verify(p, Algorithm::HS384, b"msg", &sig));
        assert!(!key.verify(p, Algorithm::HS384, b"msh", &sig));
    }
}
