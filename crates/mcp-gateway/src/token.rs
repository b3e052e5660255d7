//! Development tokens: HS256 JWTs signed with the configured secret, for the configured issuer and
//! audience (what `mcp-gateway token` prints).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Map, Value, json};

use crate::config::GatewayConfig;

/// What to put in a development token.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenRequest {
    /// `sub`: the subject whose user configuration the gateway loads.
    pub subject: String,
    /// Lifetime (`exp` = now + ttl).
    pub ttl: Duration,
    /// `iss` (default: the first configured issuer).
    pub issuer: Option<String>,
    /// `aud` (default: the first configured audience).
    pub audience: Option<String>,
    /// `scope` (space-separated in the token; default: the required scopes).
    pub scopes: Option<Vec<String>>,
}

impl TokenRequest {
    /// A token for `subject` valid for one hour.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            ttl: Duration::from_secs(3600),
            issuer: None,
            audience: None,
            scopes: None,
        }
    }

    /// Sets the lifetime.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets `iss`.
    #[must_use]
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Sets `aud`.
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Sets the scopes.
    #[must_use]
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = Some(scopes.into_iter().map(Into::into).collect());
        self
    }
}

/// Why a token could not be minted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The subject is empty.
    #[error("the subject (--sub) must not be empty")]
    EmptySubject,
    /// No issuer or audience to put in the token.
    #[error("the configuration has no {0} to put in the token")]
    Missing(&'static str),
    /// The secret cannot be an HMAC key, or encoding failed.
    #[error("cannot sign the token: {0}")]
    Sign(String),
}

/// Signs an HS256 token for `request` with `secret`, using the configured issuer and audience
/// unless the request names others.
///
/// ```
/// use std::time::Duration;
/// use mcp_gateway::{config::GatewayConfig, token::{TokenRequest, mint}};
///
/// let config = GatewayConfig::default();
/// let token = mint(&config, b"a-long-random-development-secret", &TokenRequest::new("alice")).unwrap();
/// assert_eq!(token.split('.').count(), 3);
/// ```
///
/// # Errors
///
/// An empty subject, no issuer or audience configured, or an unusable secret.
pub fn mint(
    config: &GatewayConfig,
    secret: &[u8],
    request: &TokenRequest,
) -> Result<String, TokenError> {
    if request.subject.trim().is_empty() {
        return Err(TokenError::EmptySubject);
    }
    let issuer = request
        .issuer
        .clone()
        .or_else(|| config.auth.jwt.issuers.first().cloned())
        .ok_or(TokenError::Missing("issuer"))?;
    let audience = request
        .audience
        .clone()
        .or_else(|| config.auth.jwt.audiences.first().cloned())
        .ok_or(TokenError::Missing("audience"))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut claims = Map::new();
    claims.insert("iss".into(), json!(issuer));
    claims.insert("sub".into(), json!(request.subject));
    claims.insert("aud".into(), json!(audience));
    claims.insert("iat".into(), json!(now));
    claims.insert(
        "exp".into(),
        json!(now.saturating_add(request.ttl.as_secs().max(1))),
    );
    let scopes = request
        .scopes
        .clone()
        .unwrap_or_else(|| config.auth.jwt.required_scopes.clone());
    if !scopes.is_empty() {
        claims.insert("scope".into(), json!(scopes.join(" ")));
    }
    let key = EncodingKey::from_secret(secret).map_err(|e| TokenError::Sign(e.to_string()))?;
    encode(&Header::new(Algorithm::HS256), &Value::Object(claims), &key)
        .map_err(|e| TokenError::Sign(e.to_string()))
}

/// Why [`parse_ttl`] rejected a lifetime.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TtlError {
    /// Not a number with an optional unit `s`, `m`, `h` or `d`.
    #[error("`{0}`: expected e.g. 90s, 15m, 1h or 7d")]
    Format(String),
    /// Zero, or too long to count in seconds.
    #[error("`{0}`: must be between 1s and a few centuries")]
    Range(String),
}

/// Parses a lifetime: a number with an optional unit `s`, `m`, `h` or `d` (`90`, `90s`, `15m`,
/// `1h`, `7d`); at least one second.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(mcp_gateway::token::parse_ttl("1h"), Ok(Duration::from_secs(3600)));
/// assert_eq!(mcp_gateway::token::parse_ttl("90"), Ok(Duration::from_secs(90)));
/// assert!(mcp_gateway::token::parse_ttl("soon").is_err());
/// ```
///
/// # Errors
///
/// Anything else, and zero.
pub fn parse_ttl(text: &str) -> Result<Duration, TtlError> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let multiplier: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(TtlError::Format(text.to_owned())),
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| TtlError::Format(text.to_owned()))?;
    let secs = value
        .checked_mul(multiplier)
        .filter(|s| *s > 0)
        .ok_or_else(|| TtlError::Range(text.to_owned()))?;
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::build_validator;

    const SECRET: &[u8] = b"unit-test-secret-unit-test-secret";

    #[tokio::test]
    async fn minted_tokens_validate_with_the_same_config() {
        let config = GatewayConfig::default();
        let validator = build_validator(&config, Some(SECRET)).expect("validator");
        let token = mint(
            &config,
            SECRET,
            &TokenRequest::new("alice")
                .ttl(Duration::from_secs(60))
                .scopes(["a", "b"]),
        )
        .expect("token");
        let claims = validator.validate(&token).await.expect("valid");
        assert_eq!(claims.sub(), "alice");
        assert_eq!(claims.iss(), "https://issuer.example");
        assert_eq!(claims.scopes(), ["a", "b"]);
        let other = mint(
            &config,
            b"another-secret-another-secret-xx",
            &TokenRequest::new("alice"),
        )
        .expect("token");
        assert!(validator.validate(&other).await.is_err());
        assert!(matches!(
            mint(&config, SECRET, &TokenRequest::new(" ")),
            Err(TokenError::EmptySubject)
        ));
    }

    #[test]
    fn ttl_units() {
        assert_eq!(parse_ttl("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_ttl("7d"), Ok(Duration::from_secs(604_800)));
        for bad in ["", "0", "1w", "h", "-1h", "99999999999999999999d"] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }
}
