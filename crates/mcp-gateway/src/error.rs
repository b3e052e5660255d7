//! [`GatewayError`]: why a gateway could not be built or could not serve.

use std::net::SocketAddr;

use crate::config::ConfigError;

/// Why a gateway could not be built, bound or served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The process configuration or a user configuration is invalid (the binary exits with 2).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr} ({listener}): {source}")]
    Bind {
        /// Which listener (`mcp` or `admin`).
        listener: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The serving threads of `runtime.mode = "thread-per-core"` could not be started.
    #[error("cannot start the serving threads: {0}")]
    ServingThreads(#[source] std::io::Error),
    /// The user configuration store could not be reached or read.
    #[error("user configuration store: {0}")]
    Store(String),
    /// Another I/O failure.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl GatewayError {
    /// Whether the error is a configuration problem (as opposed to an environment failure).
    pub fn is_config(&self) -> bool {
        matches!(self, Self::Config(_))
    }
}
