//! [`VirtualHostId`]: which virtual host a request addresses.

use std::fmt;
use std::sync::Arc;

/// The virtual host id taken from the request path (`/servers/{virtual_host_id}/mcp`).
///
/// Inserted into request extensions by `mcp-vhost`; read by the virtual host config layer and the
/// router. It is already percent-decoded and checked against the configured charset and length.
///
/// ```
/// use mcp_core::VirtualHostId;
///
/// let id = VirtualHostId::new("team-a");
/// assert_eq!(id.as_str(), "team-a");
/// assert_eq!(&*id, "team-a");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VirtualHostId(Arc<str>);

impl VirtualHostId {
    /// Wraps an id. Validation is the producer's job (`mcp-vhost` checks charset and length).
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for VirtualHostId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for VirtualHostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
