//! [`Claims`]: the validated contents of a bearer token, a request extension.

use std::fmt;
use std::sync::Arc;

use jsonwebtoken::Algorithm;
use mcp_core::Principal;
use serde_json::{Map, Value};

use crate::error::AuthError;

/// The claims of a validated bearer token.
///
/// [`ClaimsLayer`](crate::ClaimsLayer) inserts it into the request extensions (next to a
/// [`mcp_core::Principal`]) after the signature, issuer, audience and time checks passed. Cloning is
/// cheap (one `Arc`). The registered claims have typed accessors; everything else is in
/// [`raw`](Self::raw).
///
/// Scopes are read from `scope` (space-separated string, RFC 8693 / OAuth), `scp` (array or
/// space-separated string, Azure AD / Okta) and `scopes` (array); their union is kept, in order,
/// without duplicates.
///
/// ```
/// # use mcp_claims::{Claims, Issuer, JwtValidator};
/// # use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let validator = JwtValidator::builder()
/// #     .issuer(Issuer::new("https://issuer.example").hmac_secret(b"secret", [Algorithm::HS256]))
/// #     .audience("mcp-gateway")
/// #     .build()
/// #     .unwrap();
/// # let exp = jsonwebtoken::get_current_timestamp() + 600;
/// # let token = encode(
/// #     &Header::new(Algorithm::HS256),
/// #     &serde_json::json!({"iss": "https://issuer.example", "sub": "alice", "aud": "mcp-gateway",
/// #         "exp": exp, "scope": "mcp tools:read", "tenant": "acme"}),
/// #     &EncodingKey::from_secret(b"secret").unwrap(),
/// # ).unwrap();
/// let claims: Claims = validator.validate(&token).await.unwrap();
/// assert_eq!(claims.sub(), "alice");
/// assert_eq!(claims.iss(), "https://issuer.example");
/// assert_eq!(claims.aud(), ["mcp-gateway"]);
/// assert_eq!(claims.scopes(), ["mcp", "tools:read"]);
/// assert!(claims.has_scope("tools:read"));
/// assert_eq!(claims.get("tenant"), Some(&serde_json::json!("acme")));
/// assert_eq!(claims.principal().subject(), "alice");
/// # }
/// ```
#[derive(Clone)]
pub struct Claims(Arc<Inner>);

struct Inner {
    issuer: Arc<str>,
    subject: Arc<str>,
    audience: Vec<String>,
    expires_at: u64,
    not_before: Option<u64>,
    issued_at: Option<u64>,
    scopes: Vec<String>,
    algorithm: Algorithm,
    key_id: Option<String>,
    raw: Map<String, Value>,
}

impl Claims {
    /// The subject (`sub`).
    pub fn sub(&self) -> &str {
        &self.0.subject
    }

    /// The issuer (`iss`), one of the configured issuers.
    pub fn iss(&self) -> &str {
        &self.0.issuer
    }

    /// The audiences (`aud`, a string or an array in the token; always a list here). At least one of
    /// them is an accepted audience.
    pub fn aud(&self) -> &[String] {
        &self.0.audience
    }

    /// Expiry (`exp`), seconds since the Unix epoch (fractions dropped).
    pub fn exp(&self) -> u64 {
        self.0.expires_at
    }

    /// Not-before (`nbf`), seconds since the Unix epoch, if the token has one.
    pub fn nbf(&self) -> Option<u64> {
        self.0.not_before
    }

    /// Issued-at (`iat`), seconds since the Unix epoch, if the token has one.
    pub fn iat(&self) -> Option<u64> {
        self.0.issued_at
    }

    /// The granted scopes (from `scope`, `scp` and `scopes`).
    pub fn scopes(&self) -> &[String] {
        &self.0.scopes
    }

    /// Whether `scope` was granted.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.0.scopes.iter().any(|s| s == scope)
    }

    /// The algorithm the token was signed with.
    pub fn algorithm(&self) -> Algorithm {
        self.0.algorithm
    }

    /// The key id (`kid`) of the token header, if any.
    pub fn kid(&self) -> Option<&str> {
        self.0.key_id.as_deref()
    }

    /// Every claim of the payload, registered or not.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.0.raw
    }

    /// One claim of the payload by name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.raw.get(name)
    }

    /// The caller as a [`Principal`] (issuer + subject), the shared type other layers read.
    pub fn principal(&self) -> Principal {
        Principal::new(self.0.issuer.clone(), self.0.subject.clone())
    }

    /// Reads the claims set of a token whose signature is verified. Checks `exp` (required), `nbf`,
    /// `aud` (required), `sub` (required) and the claim types; `now` and `leeway` in seconds.
    pub(crate) fn from_verified(
        issuer: Arc<str>,
        raw: Map<String, Value>,
        algorithm: Algorithm,
        key_id: Option<String>,
        check: &ClaimChecks<'_>,
    ) -> Result<Self, AuthError> {
        let now = check.now as f64;
        let leeway = check.leeway as f64;

        let exp = numeric_date(&raw, "exp")?.ok_or(AuthError::MissingClaim("exp"))?;
        if exp + leeway < now {
            return Err(AuthError::Expired);
        }
        let nbf = numeric_date(&raw, "nbf")?;
        if nbf.is_some_and(|nbf| nbf > now + leeway) {
            return Err(AuthError::NotYetValid);
        }
        let iat = numeric_date(&raw, "iat")?;

        let audience: Vec<String> = match raw.get("aud") {
            None => return Err(AuthError::MissingClaim("aud")),
            Some(Value::String(aud)) => vec![aud.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or(AuthError::InvalidClaim("aud"))?,
            Some(_) => return Err(AuthError::InvalidClaim("aud")),
        };
        if !audience
            .iter()
            .any(|aud| check.audiences.iter().any(|accepted| accepted == aud))
        {
            return Err(AuthError::WrongAudience);
        }

        let subject: Arc<str> = match raw.get("sub") {
            None => return Err(AuthError::MissingClaim("sub")),
            Some(Value::String(sub)) if !sub.is_empty() => Arc::from(sub.as_str()),
            Some(_) => return Err(AuthError::InvalidClaim("sub")),
        };

        let scopes = scopes(&raw)?;
        if !check.required_scopes.iter().all(|r| scopes.contains(r)) {
            return Err(AuthError::InsufficientScope {
                required: check.required_scopes.to_vec(),
            });
        }

        Ok(Self(Arc::new(Inner {
            issuer,
            subject,
            audience,
            expires_at: to_secs(exp),
            not_before: nbf.map(to_secs),
            issued_at: iat.map(to_secs),
            scopes,
            algorithm,
            key_id,
            raw,
        })))
    }
}

/// The non-cryptographic checks of [`Claims::from_verified`].
#[derive(Debug)]
pub(crate) struct ClaimChecks<'a> {
    pub(crate) now: u64,
    pub(crate) leeway: u64,
    pub(crate) audiences: &'a [String],
    pub(crate) required_scopes: &'a [String],
}

impl fmt::Debug for Claims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claims")
            .field("iss", &self.0.issuer)
            .field("sub", &self.0.subject)
            .field("aud", &self.0.audience)
            .field("exp", &self.0.expires_at)
            .field("nbf", &self.0.not_before)
            .field("iat", &self.0.issued_at)
            .field("scopes", &self.0.scopes)
            .field("alg", &self.0.algorithm)
            .field("kid", &self.0.key_id)
            .finish_non_exhaustive()
    }
}

fn to_secs(date: f64) -> u64 {
    // `as` saturates: negative dates become 0, absurd ones u64::MAX.
    date.floor() as u64
}

/// A NumericDate claim (RFC 7519 2: seconds, may have a fraction).
fn numeric_date(raw: &Map<String, Value>, name: &'static str) -> Result<Option<f64>, AuthError> {
    match raw.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|v| v.is_finite())
            .map(Some)
            .ok_or(AuthError::InvalidClaim(name)),
        Some(_) => Err(AuthError::InvalidClaim(name)),
    }
}

/// The union of `scope`, `scp` and `scopes`, each a space-separated string or an array of strings.
fn scopes(raw: &Map<String, Value>) -> Result<Vec<String>, AuthError> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |scope: &str| {
        if !scope.is_empty() && !out.iter().any(|s| s == scope) {
            out.push(scope.to_owned());
        }
    };
    for name in ["scope", "scp", "scopes"] {
        match raw.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::String(list)) => list.split_whitespace().for_each(&mut push),
            Some(Value::Array(items)) => {
                for item in items {
                    let scope = item.as_str().ok_or(AuthError::InvalidClaim(name))?;
                    scope.split_whitespace().for_each(&mut push);
                }
            }
            Some(_) => return Err(AuthError::InvalidClaim(name)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_700_000_000;

    fn checks<'a>(aud: &'a [String], scopes: &'a [String]) -> ClaimChecks<'a> {
        ClaimChecks {
            now: NOW,
            leeway: 30,
            audiences: aud,
            required_scopes: scopes,
        }
    }

    fn claims(raw: Value, required: &[&str]) -> Result<Claims, AuthError> {
        let aud = vec!["api".to_string(), "other".to_string()];
        let required: Vec<String> = required.iter().map(|s| s.to_string()).collect();
        let Value::Object(map) = raw else {
            panic!("object expected")
        };
        Claims::from_verified(
            Arc::from("iss"),
            map,
            Algorithm::HS256,
            None,
            &checks(&aud, &required),
        )
    }

    #[test]
    fn accepts_and_exposes() {
        let c = claims(
            json!({"sub": "alice", "aud": ["x", "other"], "exp": NOW + 10, "nbf": NOW - 5,
                   "iat": 1.7e9, "scope": "a b", "scp": ["b", "c"], "scopes": "d"}),
            &["a", "d"],
        )
        .expect("valid");
        assert_eq!(c.sub(), "alice");
        assert_eq!(c.iss(), "iss");
        assert_eq!(c.aud(), ["x", "other"]);
        assert_eq!(c.exp(), NOW + 10);
        assert_eq!(c.nbf(), Some(NOW - 5));
        assert_eq!(c.iat(), Some(1_700_000_000));
        assert_eq!(c.scopes(), ["a", "b", "c", "d"]);
        assert!(c.has_scope("c") && !c.has_scope("e"));
        assert_eq!(c.algorithm(), Algorithm::HS256);
        assert_eq!(c.principal(), Principal::new("iss", "alice"));
        assert!(format!("{c:?}").contains("alice"));
    }

    #[test]
    fn time_checks_honour_leeway() {
        let base = json!({"sub": "a", "aud": "api"});
        let with = |extra: Value| {
            let mut v = base.clone();
            for (k, val) in extra.as_object().expect("object") {
                v[k] = val.clone();
            }
            claims(v, &[])
        };
        assert!(with(json!({"exp": NOW - 29})).is_ok(), "within leeway");
        assert_eq!(
            with(json!({"exp": NOW - 31})).expect_err("x"),
            AuthError::Expired
        );
        assert_eq!(
            with(json!({"exp": NOW + 100, "nbf": NOW + 31})).expect_err("x"),
            AuthError::NotYetValid
        );
        assert!(with(json!({"exp": NOW + 100, "nbf": NOW + 29})).is_ok());
        assert_eq!(
            with(json!({})).expect_err("x"),
            AuthError::MissingClaim("exp")
        );
        assert_eq!(
            with(json!({"exp": "soon"})).expect_err("x"),
            AuthError::InvalidClaim("exp")
        );
        assert_eq!(
            with(json!({"exp": NOW + 100, "nbf": true})).expect_err("x"),
            AuthError::InvalidClaim("nbf")
        );
    }

    #[test]
    fn audience_subject_and_scope_checks() {
        let exp = NOW + 100;
        assert_eq!(
            claims(json!({"sub": "a", "aud": "nope", "exp": exp}), &[]).expect_err("x"),
            AuthError::WrongAudience
        );
        assert_eq!(
            claims(json!({"sub": "a", "aud": [], "exp": exp}), &[]).expect_err("x"),
            AuthError::WrongAudience
        );
        assert_eq!(
            claims(json!({"sub": "a", "exp": exp}), &[]).expect_err("x"),
            AuthError::MissingClaim("aud")
        );
        assert_eq!(
            claims(json!({"sub": "a", "aud": [1], "exp": exp}), &[]).expect_err("x"),
            AuthError::InvalidClaim("aud")
        );
        assert_eq!(
            claims(json!({"aud": "api", "exp": exp}), &[]).expect_err("x"),
            AuthError::MissingClaim("sub")
        );
        assert_eq!(
            claims(json!({"sub": "", "aud": "api", "exp": exp}), &[]).expect_err("x"),
            AuthError::InvalidClaim("sub")
        );
        assert_eq!(
            claims(
                json!({"sub": "a", "aud": "api", "exp": exp, "scope": "x"}),
                &["x", "y"]
            )
            .expect_err("x"),
            AuthError::InsufficientScope {
                required: vec!["x".into(), "y".into()]
            }
        );
        assert_eq!(
            claims(json!({"sub": "a", "aud": "api", "exp": exp, "scp": 3}), &[]).expect_err("x"),
            AuthError::InvalidClaim("scp")
        );
    }
}
