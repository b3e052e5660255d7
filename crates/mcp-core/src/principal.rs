//! [`Principal`]: who is calling, as established by an authentication layer.

use std::fmt;
use std::sync::Arc;

/// The authenticated caller: token issuer plus subject.
///
/// Inserted into request extensions by an authentication layer (`mcp-claims` inserts it next to its
/// richer `Claims`). Config stores, the router and plugins read it from here, so none of them has to
/// depend on the crate that authenticated the request. Cloning is cheap (two `Arc`s).
///
/// ```
/// use mcp_core::Principal;
///
/// let p = Principal::new("https://issuer.example", "alice");
/// assert_eq!(p.subject(), "alice");
/// assert_eq!(p.issuer(), "https://issuer.example");
/// assert_eq!(p.to_string(), "alice@https://issuer.example");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    issuer: Arc<str>,
    subject: Arc<str>,
}

impl Principal {
    /// A principal from an issuer (`iss`) and a subject (`sub`).
    pub fn new(issuer: impl Into<Arc<str>>, subject: impl Into<Arc<str>>) -> Self {
        Self {
            issuer: issuer.into(),
            subject: subject.into(),
        }
    }

    /// The token issuer (`iss`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The subject (`sub`): the key of the caller's user configuration.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The subject as a shared string, for use as a cache key without copying.
    pub fn subject_arc(&self) -> &Arc<str> {
        &self.subject
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.subject, self.issuer)
    }
}
