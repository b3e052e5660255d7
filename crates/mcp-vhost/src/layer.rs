//! [`VhostLayer`]: applies [`Vhost`] to a service.

use std::sync::Arc;

use tower_layer::Layer;

use crate::{PathPattern, Vhost};

/// Extracts the [`VirtualHostId`](mcp_core::VirtualHostId) from the request path into the request
/// extensions; answers 400 when the path is not an MCP endpoint of the configured pattern.
///
/// See the [crate docs](crate) for an example.
#[derive(Debug, Clone, Default)]
pub struct VhostLayer {
    pattern: Arc<PathPattern>,
}

impl VhostLayer {
    /// A layer for the default pattern `/servers/{virtual_host_id}/mcp`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A layer for a custom [`PathPattern`] (mount prefix, suffix, id limits).
    pub fn with_pattern(pattern: PathPattern) -> Self {
        Self {
            pattern: Arc::new(pattern),
        }
    }

    /// The layer's pattern.
    pub fn pattern(&self) -> &PathPattern {
        &self.pattern
    }
}

impl<S> Layer<S> for VhostLayer {
    type Service = Vhost<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Vhost::from_shared(inner, Arc::clone(&self.pattern))
    }
}
