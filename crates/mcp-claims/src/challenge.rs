//! The `WWW-Authenticate: Bearer ...` challenge (RFC 6750 §3) with the RFC 9728
//! `resource_metadata` parameter, and [`MakeResourceMetadata`], which computes that URL per request.

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;
use http::request::Parts;

use crate::error::AuthError;

/// Computes the RFC 9728 protected-resource-metadata URL advertised in the challenge of a refused
/// request (`resource_metadata="<url>"`), or `None` to leave it out.
///
/// Implemented for every `Fn(&http::request::Parts) -> Option<String> + Send + Sync + 'static`,
/// in the style of tower-http's `MakeRequestId`. A gateway serving several virtual hosts can
/// derive the URL from the `mcp_core::VirtualHostId` extension that an earlier layer inserted:
///
/// ```
/// use http::request::Parts;
/// use mcp_claims::MakeResourceMetadata;
/// use mcp_core::VirtualHostId;
///
/// let per_vhost = |parts: &Parts| {
///     let vhost = parts.extensions.get::<VirtualHostId>()?;
///     Some(format!("https://gw.example/.well-known/oauth-protected-resource/servers/{vhost}/mcp"))
/// };
///
/// let (mut parts, ()) = http::Request::new(()).into_parts();
/// assert_eq!(per_vhost.make_resource_metadata(&parts), None);
/// parts.extensions.insert(VirtualHostId::new("team-a"));
/// assert_eq!(
///     per_vhost.make_resource_metadata(&parts).as_deref(),
///     Some("https://gw.example/.well-known/oauth-protected-resource/servers/team-a/mcp")
/// );
/// ```
pub trait MakeResourceMetadata: Send + Sync + 'static {
    /// The URL for this request, or `None` for none.
    fn make_resource_metadata(&self, parts: &Parts) -> Option<String>;
}

impl<F> MakeResourceMetadata for F
where
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
{
    fn make_resource_metadata(&self, parts: &Parts) -> Option<String> {
        self(parts)
    }
}

/// Where the `resource_metadata` URL comes from.
#[derive(Clone, Default)]
pub(crate) enum ResourceMetadata {
    /// Not advertised.
    #[default]
    None,
    /// The same URL for every request.
    Fixed(Arc<str>),
    /// Computed per request.
    Dynamic(Arc<dyn MakeResourceMetadata>),
}

impl fmt::Debug for ResourceMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Fixed(url) => f.debug_tuple("Fixed").field(url).finish(),
            Self::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

/// Precomputed challenges for the fixed (or absent) `resource_metadata` case.
#[derive(Clone, Debug)]
pub(crate) struct Challenges {
    metadata: ResourceMetadata,
    required_scopes: Arc<str>,
    invalid_token: HeaderValue,
    insufficient_scope: HeaderValue,
}

impl Challenges {
    pub(crate) fn new(metadata: ResourceMetadata, required_scopes: &[String]) -> Self {
        let scopes: Arc<str> = Arc::from(required_scopes.join(" "));
        let fixed = match &metadata {
            ResourceMetadata::Fixed(url) => Some(&**url),
            _ => None,
        };
        let invalid_token = challenge("invalid_token", None, fixed);
        let insufficient_scope = challenge("insufficient_scope", Some(&scopes), fixed);
        Self {
            metadata,
            required_scopes: scopes,
            invalid_token,
            insufficient_scope,
        }
    }

    /// The `WWW-Authenticate` value for `error` on this request; `None` for errors that are not
    /// authentication challenges (503 keys unavailable).
    pub(crate) fn for_error(&self, error: &AuthError, parts: &Parts) -> Option<HeaderValue> {
        if matches!(error, AuthError::KeysUnavailable { .. }) {
            return None;
        }
        let insufficient = matches!(error, AuthError::InsufficientScope { .. });
        match &self.metadata {
            ResourceMetadata::None | ResourceMetadata::Fixed(_) => Some(if insufficient {
                self.insufficient_scope.clone()
            } else {
                self.invalid_token.clone()
            }),
            ResourceMetadata::Dynamic(make) => {
                let url = make.make_resource_metadata(parts);
                Some(if insufficient {
                    challenge(
                        "insufficient_scope",
                        Some(&self.required_scopes),
                        url.as_deref(),
                    )
                } else {
                    challenge("invalid_token", None, url.as_deref())
                })
            }
        }
    }
}

/// `Bearer error="<error>"[, scope="<scope>"][, resource_metadata="<url>"]`.
///
/// A URL that cannot be a header value (control characters) is left out rather than failing.
pub(crate) fn challenge(
    error: &'static str,
    scope: Option<&str>,
    resource_metadata: Option<&str>,
) -> HeaderValue {
    let mut value = format!("Bearer error=\"{error}\"");
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        value.push_str(", scope=");
        push_quoted(&mut value, scope);
    }
    let base_len = value.len();
    if let Some(url) = resource_metadata {
        value.push_str(", resource_metadata=");
        push_quoted(&mut value, url);
    }
    HeaderValue::try_from(value.as_str())
        .or_else(|_| HeaderValue::try_from(&value[..base_len]))
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer error=\"invalid_token\""))
}

/// Appends `text` as an RFC 9110 quoted-string.
fn push_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> Parts {
        http::Request::new(()).into_parts().0
    }

    #[test]
    fn formats_challenges() {
        assert_eq!(
            challenge("invalid_token", None, None),
            "Bearer error=\"invalid_token\""
        );
        assert_eq!(
            challenge("invalid_token", None, Some("https://gw/.well-known/x")),
            "Bearer error=\"invalid_token\", resource_metadata=\"https://gw/.well-known/x\""
        );
        assert_eq!(
            challenge(
                "insufficient_scope",
                Some("mcp tools"),
                Some("https://gw/m")
            ),
            "Bearer error=\"insufficient_scope\", scope=\"mcp tools\", resource_metadata=\"https://gw/m\""
        );
        assert_eq!(
            challenge("invalid_token", None, Some("a\"b\\c")),
            r#"Bearer error="invalid_token", resource_metadata="a\"b\\c""#
        );
        assert_eq!(
            challenge("invalid_token", None, Some("bad\nurl")),
            "Bearer error=\"invalid_token\""
        );
    }

    #[test]
    fn fixed_and_dynamic() {
        let fixed = Challenges::new(ResourceMetadata::Fixed("https://gw/m".into()), &[]);
        assert_eq!(
            fixed
                .for_error(&AuthError::Expired, &parts())
                .expect("challenge"),
            "Bearer error=\"invalid_token\", resource_metadata=\"https://gw/m\""
        );
        let dynamic = Challenges::new(
            ResourceMetadata::Dynamic(Arc::new(|p: &Parts| Some(format!("https://gw{}", p.uri)))),
            &["a".into(), "b".into()],
        );
        assert_eq!(
            dynamic
                .for_error(
                    &AuthError::InsufficientScope {
                        required: vec!["a".into(), "b".into()]
                    },
                    &parts()
                )
                .expect("challenge"),
            "Bearer error=\"insufficient_scope\", scope=\"a b\", resource_metadata=\"https://gw/\""
        );
        assert!(
            dynamic
                .for_error(
                    &AuthError::KeysUnavailable {
                        retry_after: std::time::Duration::from_secs(1)
                    },
                    &parts()
                )
                .is_none()
        );
        let none = Challenges::new(ResourceMetadata::None, &[]);
        assert_eq!(
            none.for_error(&AuthError::MissingCredentials, &parts())
                .expect("challenge"),
            "Bearer error=\"invalid_token\""
        );
    }
}
