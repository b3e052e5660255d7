//! The key a user configuration is stored and cached under.
//!
//! With one trusted issuer the key is the subject (`alice`): file `users.alice`, Redis
//! `<prefix>:user:alice`. With several, two issuers may both have an `alice`, so the key carries
//! the issuer: `<issuer>#<subject>` (file `users."https://a.example#alice"`, Redis
//! `<prefix>:user:https://a.example#alice`). The issuer is written as in the token's `iss` with
//! `%` and `#` percent-encoded (`%25`, `%23`; issuer identifiers normally have neither), so the
//! first `#` always ends the issuer and [`split_issuer_scoped`] gives both parts back. A key
//! without `#` is a bare subject.

use std::borrow::Cow;
use std::sync::Arc;

use http::request::Parts;
use mcp_core::Principal;

use crate::config_layer::SubjectExtractor;

/// Ends the issuer part of an issuer-scoped key.
pub const ISSUER_SEPARATOR: char = '#';

/// `<issuer>#<subject>`, with `%` and `#` of the issuer percent-encoded.
///
/// ```
/// use mcp_config_store::{issuer_scoped, split_issuer_scoped};
///
/// let key = issuer_scoped("https://a.example", "alice");
/// assert_eq!(key, "https://a.example#alice");
/// assert_eq!(issuer_scoped("odd#iss%", "a#b"), "odd%23iss%25#a#b");
/// assert_eq!(split_issuer_scoped("odd%23iss%25#a#b").unwrap(), ("odd#iss%".into(), "a#b"));
/// ```
pub fn issuer_scoped(issuer: &str, subject: &str) -> String {
    let mut key = String::with_capacity(issuer.len() + subject.len() + 1);
    for c in issuer.chars() {
        match c {
            '%' => key.push_str("%25"),
            '#' => key.push_str("%23"),
            c => key.push(c),
        }
    }
    key.push(ISSUER_SEPARATOR);
    key.push_str(subject);
    key
}

/// The issuer and subject of an issuer-scoped key; `None` for a bare subject (no `#`).
pub fn split_issuer_scoped(key: &str) -> Option<(Cow<'_, str>, &str)> {
    let (issuer, subject) = key.split_once(ISSUER_SEPARATOR)?;
    let issuer = if issuer.contains('%') {
        Cow::Owned(issuer.replace("%23", "#").replace("%25", "%"))
    } else {
        Cow::Borrowed(issuer)
    };
    Some((issuer, subject))
}

/// The [`SubjectExtractor`] that picks the key of the [`Principal`] extension: the subject alone
/// when one issuer is trusted, `<issuer>#<subject>` ([`issuer_scoped`]) when several are, so a
/// token of another issuer with the same `sub` never loads (nor hits the cache entry of) this
/// one's configuration. An empty subject counts as none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrincipalKey {
    /// The subject (`sub`) alone: one trusted issuer (what [`PrincipalSubject`](crate::PrincipalSubject) reads).
    #[default]
    Subject,
    /// `<issuer>#<subject>`: several trusted issuers.
    IssuerScoped,
}

impl PrincipalKey {
    /// [`Subject`](Self::Subject) for at most one trusted issuer, else
    /// [`IssuerScoped`](Self::IssuerScoped).
    pub fn for_issuer_count(issuers: usize) -> Self {
        if issuers > 1 {
            Self::IssuerScoped
        } else {
            Self::Subject
        }
    }
}

impl SubjectExtractor for PrincipalKey {
    fn extract_subject(&self, parts: &Parts) -> Option<Arc<str>> {
        let principal = parts.extensions.get::<Principal>()?;
        if principal.subject().is_empty() {
            return None;
        }
        Some(match self {
            Self::Subject => principal.subject_arc().clone(),
            Self::IssuerScoped => Arc::from(issuer_scoped(principal.issuer(), principal.subject())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_bare_subjects() {
        for (issuer, subject) in [
            ("https://a.example", "alice"),
            ("https://b.example/tenant%2F1#x", "bob#2"),
            ("", "carol"),
        ] {
            let key = issuer_scoped(issuer, subject);
            let (i, s) = split_issuer_scoped(&key).expect("scoped");
            assert_eq!((i.as_ref(), s), (issuer, subject), "{key}");
        }
        assert!(split_issuer_scoped("alice").is_none());
        assert_ne!(
            issuer_scoped("https://a.example", "alice"),
            issuer_scoped("https://b.example", "alice")
        );
    }

    #[test]
    fn extractor_reads_the_principal() {
        let scoped = PrincipalKey::for_issuer_count(2);
        let bare = PrincipalKey::for_issuer_count(1);
        let (mut parts, ()) = http::Request::new(()).into_parts();
        assert!(scoped.extract_subject(&parts).is_none());
        parts
            .extensions
            .insert(Principal::new("https://a.example", "alice"));
        assert_eq!(
            scoped.extract_subject(&parts).as_deref(),
            Some("https://a.example#alice")
        );
        assert_eq!(bare.extract_subject(&parts).as_deref(), Some("alice"));
        parts
            .extensions
            .insert(Principal::new("https://a.example", ""));
        assert!(scoped.extract_subject(&parts).is_none());
        assert!(bare.extract_subject(&parts).is_none());
    }
}
