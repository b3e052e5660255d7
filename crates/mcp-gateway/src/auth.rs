//! Token validation from `[auth.jwt]`: reads the HS256 secret from the environment variable the
//! configuration names, the PEM key file and the JWKS URL, and builds an `mcp-claims`
//! [`JwtValidator`].

use jsonwebtoken::Algorithm;
use mcp_claims::{Issuer, JwtValidator};

use crate::config::{ConfigError, GatewayConfig, Source};

/// Secrets shorter than this are accepted with a warning (RFC 7518 §3.2 asks for at least the
/// hash size, 32 bytes for HS256).
pub(crate) const MIN_HS256_SECRET_LEN: usize = 32;

/// Where the HS256 secret came from, and so what the operator must be told.
enum Hs256 {
    /// `explicit`, or the variable named by an explicitly set `auth.jwt.hs256_secret_env`.
    Configured(Vec<u8>),
    /// The default variable of a configuration with no other key: honoured so that old
    /// configurations keep loading, with a deprecation warning.
    LegacyDefault { name: String, secret: Vec<u8> },
    /// The default variable is set, but a PEM key or JWKS is configured: a key the operator did
    /// not configure, so it is ignored (with a warning).
    IgnoredDefault { name: String },
    /// No HS256.
    Off,
}

impl Hs256 {
    fn into_secret(self) -> Option<Vec<u8>> {
        match self {
            Self::Configured(secret) | Self::LegacyDefault { secret, .. } => Some(secret),
            Self::IgnoredDefault { .. } | Self::Off => None,
        }
    }
}

fn resolve_hs256(config: &GatewayConfig, explicit: Option<&[u8]>) -> Result<Hs256, ConfigError> {
    if let Some(secret) = explicit {
        return Ok(Hs256::Configured(secret.to_vec()));
    }
    let jwt = &config.auth.jwt;
    let Some(name) = jwt.hs256_secret_env.as_deref() else {
        return Ok(Hs256::Off);
    };
    let value = std::env::var(name).ok().filter(|v| !v.is_empty());
    let source = config.source_of("auth.jwt.hs256_secret_env");
    match (value, source) {
        (Some(value), Source::Default) => {
            let name = name.to_owned();
            if jwt.public_key_pem.is_some() || jwt.jwks_url.is_some() {
                Ok(Hs256::IgnoredDefault { name })
            } else {
                Ok(Hs256::LegacyDefault {
                    name,
                    secret: value.into_bytes(),
                })
            }
        }
        (Some(value), _) => Ok(Hs256::Configured(value.into_bytes())),
        (None, Source::Default) => Ok(Hs256::Off),
        (None, source) => Err(ConfigError::new(
            source,
            "auth.jwt.hs256_secret_env",
            format!("the environment variable {name} is not set (it must hold the HS256 secret)"),
        )),
    }
}

/// The HS256 secret: `explicit` when given, else the value of the environment variable named by
/// `auth.jwt.hs256_secret_env`.
///
/// A key is only what the operator configured: when `auth.jwt.hs256_secret_env` is left at its
/// default, the default variable counts only in a configuration with no `public_key_pem` and no
/// `jwks_url` (the deprecated implicit default of older configurations).
///
/// Returns `Ok(None)` when HS256 is not configured: the key is `""`, or it is left at its default
/// and either the default variable is not set or another key is configured.
///
/// # Errors
///
/// When `auth.jwt.hs256_secret_env` was set explicitly (file, environment, command line) and the
/// variable it names is missing or empty.
pub fn hs256_secret(
    config: &GatewayConfig,
    explicit: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, ConfigError> {
    resolve_hs256(config, explicit).map(Hs256::into_secret)
}

/// Builds the validator of `[auth.jwt]`; logs a warning when the default HS256 variable is
/// honoured only for compatibility, or ignored.
///
/// # Errors
///
/// No key source at all, an unreadable or invalid PEM file, an invalid JWKS URL, or a secret
/// that cannot be a key; each names the key at fault.
pub fn build_validator(
    config: &GatewayConfig,
    hs256_override: Option<&[u8]>,
) -> Result<JwtValidator, ConfigError> {
    let jwt = &config.auth.jwt;
    let hs256 = resolve_hs256(config, hs256_override)?;
    match &hs256 {
        Hs256::LegacyDefault { name, .. } => tracing::warn!(
            variable = %name,
            "deprecated: HS256 is enabled only because {name} is set; set auth.jwt.hs256_secret_env = \"{name}\" explicitly (a later release will require it)"
        ),
        Hs256::IgnoredDefault { name } => tracing::warn!(
            variable = %name,
            "{name} is set but ignored: HS256 is off because auth.jwt.hs256_secret_env is not set and another key (public_key_pem or jwks_url) is configured; set auth.jwt.hs256_secret_env = \"{name}\" to accept HS256 tokens too"
        ),
        Hs256::Configured(_) | Hs256::Off => {}
    }
    let secret = hs256.into_secret();
    if let Some(secret) = &secret
        && secret.len() < MIN_HS256_SECRET_LEN
    {
        tracing::warn!(
            length = secret.len(),
            "the HS256 secret is shorter than {MIN_HS256_SECRET_LEN} bytes; use a long random secret"
        );
    }
    let pem = match &jwt.public_key_pem {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            config.problem(
                "auth.jwt.public_key_pem",
                format!("cannot read {}: {e}", path.display()),
            )
        })?),
        None => None,
    };
    if secret.is_none() && pem.is_none() && jwt.jwks_url.is_none() {
        let name = jwt
            .hs256_secret_env
            .as_deref()
            .unwrap_or("MCP_GATEWAY_JWT_SECRET");
        return Err(config.problem(
            "auth.jwt",
            format!(
                "no token verification key: set the environment variable {name} (auth.jwt.hs256_secret_env), or auth.jwt.public_key_pem, or auth.jwt.jwks_url"
            ),
        ));
    }

    let mut builder = JwtValidator::builder()
        .audiences(jwt.audiences.iter().cloned())
        .leeway(jwt.leeway)
        .verified_token_cache(jwt.verified_token_cache)
        .required_scopes(jwt.required_scopes.iter().cloned())
        .jwks_refresh_interval(jwt.jwks_refresh);
    for iss in &jwt.issuers {
        let mut issuer = Issuer::new(iss.clone());
        if let Some(secret) = &secret {
            issuer = issuer.hmac_secret(secret, [Algorithm::HS256]);
        }
        if let Some(pem) = &pem {
            issuer = issuer
                .public_key_pem(pem, jwt.algorithms.iter().copied())
                .map_err(|e| config.problem("auth.jwt.public_key_pem", e.to_string()))?;
        }
        if let Some(url) = &jwt.jwks_url {
            issuer = issuer
                .jwks_url(url)
                .map_err(|e| config.problem("auth.jwt.jwks_url", e.to_string()))?;
            if let Some(algorithms) = &jwt.jwks_algorithms {
                issuer = issuer.jwks_algorithms(algorithms.iter().copied());
            }
        }
        builder = builder.issuer(issuer);
    }
    builder
        .build()
        .map_err(|e| config.problem("auth.jwt", e.to_string()))
}

/// The sealing secret of cursors and `requestState` envelopes: `explicit`, else the variable named
/// by `router.sealing_secret_env`; `None` means a random per-process key.
///
/// # Errors
///
/// When `router.sealing_secret_env` names a variable that is not set.
pub(crate) fn sealing_secret(
    config: &GatewayConfig,
    explicit: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, ConfigError> {
    if let Some(secret) = explicit {
        return Ok(Some(secret.to_vec()));
    }
    let Some(name) = config.router.sealing_secret_env.as_deref() else {
        return Ok(None);
    };
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Ok(Some(value.into_bytes())),
        _ => Err(config.problem(
            "router.sealing_secret_env",
            format!("the environment variable {name} is not set (it must hold the sealing secret)"),
        )),
    }
}
