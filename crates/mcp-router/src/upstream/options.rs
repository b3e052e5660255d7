//! [`UpstreamOptions`]: the node-wide tuning of the upstream side, with its defaults.

use std::time::Duration;

use mcp_breaker::BreakerConfig;
use mcp_core::Budget;
use mcp_core::tls::ClientTls;

use super::link::{CALL_BYTES, CALL_MESSAGES, CallShare, LinkBuffers};
use super::{DestinationPolicy, StdioRules};

/// Tuning of the upstream side.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UpstreamOptions {
    /// TCP connect timeout for every backend.
    pub connect_timeout: Duration,
    /// How long a detected backend era is trusted before it is probed again.
    pub era_ttl: Duration,
    /// Most upstream legacy sessions kept at once.
    pub max_sessions: usize,
    /// Most upstream legacy sessions one principal holds; over it the principal's oldest one is
    /// given up. The same share bounds each principal's era, breaker and HTTP+SSE-discovery
    /// entries.
    pub max_sessions_per_principal: usize,
    /// Bytes one principal's upstream legacy sessions may weigh (the backends'
    /// `InitializeResult`s are most of it, up to 256 KiB each); over it the principal's oldest
    /// one is given up (default 4 MiB).
    pub session_bytes_per_principal: usize,
    /// Bytes every upstream legacy session of the node may weigh together (default 256 MiB).
    pub session_bytes: usize,
    /// Bytes of messages linked backends (stdio, HTTP+SSE) sent one principal's calls that its
    /// clients have not read yet, all its calls together; past it the call sent one more fails
    /// and is cancelled upstream (default 16 MiB; each call also has its own share,
    /// [`link_call_buffer_bytes`](Self::link_call_buffer_bytes)).
    pub link_buffer_bytes_per_principal: usize,
    /// The same for every principal of the node together (default 256 MiB).
    pub link_buffer_bytes: usize,
    /// Bytes of messages a linked backend sent one call that its client has not read yet; past
    /// it the call fails and is cancelled upstream (default 1 MiB). A link reads for every call
    /// on it, so it cannot stop for one; raise it where backends send large notifications
    /// faster than their clients take them.
    pub link_call_buffer_bytes: usize,
    /// The same in messages (default 1,024).
    pub link_call_buffer_messages: usize,
    /// Circuit breaker defaults for every backend URL; a backend's `breaker` object overrides
    /// single keys.
    pub breaker: BreakerConfig,
    /// Distinct backend names that label the breakers' `mcp_breaker_*` counters (default 256);
    /// the breakers of later names count as `breaker="other"`. Backend names come from users'
    /// configurations: without a cap they would set how many series the node exports.
    pub max_breaker_labels: usize,
    /// What stdio backends may run: the operator's catalog, the allow-list of free-form commands,
    /// whether config authors are trusted. The default starts no stdio backend.
    pub stdio: StdioRules,
    /// Where backend connections may go (default: the built-in denials only).
    pub destinations: DestinationPolicy,
    /// Most stdio backend processes running at once.
    pub max_stdio_processes: usize,
    /// TLS towards `https` backends: the platform's roots by default; add a private CA
    /// ([`ClientTls::add_roots_pem`]) or a client certificate
    /// ([`ClientTls::client_certificate_pem`]) for backends behind a private PKI or requiring
    /// mutual TLS. Settings rustls refuses make every `https` backend fail (logged at startup).
    pub tls: ClientTls,
    /// Lanes of each credential scope's keep-alive pool (default 1): with one single-threaded
    /// runtime per thread, one lane per thread keeps a call's upstream connection on its own
    /// thread (see [`set_pool_lane`](crate::set_pool_lane)).
    pub pool_lanes: usize,
    /// The longest a call may take when its backend sets no `deadline_ms` (default 10 min).
    pub call_deadline: Duration,
    /// The longest deadline a backend's `deadline_ms` may ask for (default 1 h).
    pub max_call_deadline: Duration,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            era_ttl: Duration::from_secs(300),
            max_sessions: 10_000,
            max_sessions_per_principal: 64,
            session_bytes_per_principal: 4 * 1024 * 1024,
            session_bytes: 256 * 1024 * 1024,
            link_buffer_bytes_per_principal: 16 * 1024 * 1024,
            link_buffer_bytes: 256 * 1024 * 1024,
            link_call_buffer_bytes: CALL_BYTES,
            link_call_buffer_messages: CALL_MESSAGES,
            breaker: BreakerConfig::default(),
            max_breaker_labels: 256,
            stdio: StdioRules::default(),
            destinations: DestinationPolicy::default(),
            max_stdio_processes: 64,
            tls: ClientTls::new(),
            pool_lanes: 1,
            call_deadline: Duration::from_secs(600),
            max_call_deadline: Duration::from_secs(3600),
        }
    }
}

impl UpstreamOptions {
    /// Where linked calls draw what their clients have not read yet from.
    pub(super) fn link_buffers(&self) -> LinkBuffers {
        LinkBuffers {
            budget: Budget::new("link_buffers")
                .with_bytes(self.link_buffer_bytes_per_principal, self.link_buffer_bytes),
            per_call: CallShare {
                bytes: self.link_call_buffer_bytes.max(1),
                messages: self.link_call_buffer_messages.max(1),
            },
        }
    }
}
