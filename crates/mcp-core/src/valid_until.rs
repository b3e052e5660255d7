//! [`ValidUntil`]: when the credentials a request was authenticated with stop being valid.

use std::time::{Duration, SystemTime};

/// The instant a request's credentials expire (a bearer token's `exp` plus the validator's
/// leeway), a request extension set by the authentication layer. A response that outlives its
/// request (a notification stream) ends then: the client opens it again with fresh credentials.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use mcp_core::ValidUntil;
///
/// let at = ValidUntil::new(SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000));
/// assert_eq!(at.left(SystemTime::UNIX_EPOCH + Duration::from_secs(1_999_999_990)), Duration::from_secs(10));
/// assert_eq!(at.left(SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_010)), Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidUntil(SystemTime);

impl ValidUntil {
    /// Valid until `at`.
    #[must_use]
    pub fn new(at: SystemTime) -> Self {
        Self(at)
    }

    /// The instant.
    #[must_use]
    pub fn at(&self) -> SystemTime {
        self.0
    }

    /// How long the credentials stay valid after `now` (zero once they expired).
    #[must_use]
    pub fn left(&self, now: SystemTime) -> Duration {
        self.0.duration_since(now).unwrap_or(Duration::ZERO)
    }
}
