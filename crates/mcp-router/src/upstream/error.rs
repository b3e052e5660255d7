//! [`UpstreamError`]: why a call to a backend failed.

use std::time::Duration;

/// A failed exchange with a backend, classified for breakers and error messages.
///
/// Messages are short and never contain the backend's address (callers see them in JSON-RPC
/// errors); the address goes to the logs only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The backend could not be reached (connection refused, DNS, TLS).
    #[error("backend unreachable")]
    Connect,
    /// No answer (or no next event of a stream) within the backend's timeout.
    #[error("backend timed out after {0:?}")]
    Timeout(Duration),
    /// The call took its whole deadline (`deadline_ms`, or the gateway's default) and was
    /// cancelled, however steadily the backend was still sending.
    #[error("call exceeded its deadline of {}s (deadline_ms)", .0.as_secs_f64())]
    DeadlineExceeded(Duration),
    /// The backend answered with an unexpected HTTP status.
    #[error("backend answered HTTP {0}")]
    Status(u16),
    /// The answer is not a usable MCP message stream.
    #[error("malformed backend response: {0}")]
    Malformed(&'static str),
    /// The connection broke while reading the answer.
    #[error("backend connection lost")]
    Disconnected,
    /// The backend's answer ended before the call's response, with nothing unreadable in it (a
    /// backend that stops mid-stream without breaking the connection).
    #[error("backend ended its answer without a response")]
    NoResponse,
    /// The backend's legacy session is gone (HTTP 404 on a session request).
    #[error("backend session expired")]
    SessionExpired,
    /// The backend entry cannot be called over HTTP (no `url`: a stdio backend).
    #[error("backend has no HTTP url")]
    NoUrl,
    /// A stdio backend's command is not on the operator's allow-list: nothing was started.
    #[error("backend command not allowed by the gateway operator")]
    NotAllowed,
    /// A stdio backend's process could not be started, died and is waiting to be restarted, or
    /// there are too many processes.
    #[error("backend process unavailable")]
    ProcessFailed,
    /// The gateway holds as many HTTP+SSE backend connections as it may: nothing was sent.
    #[error("too many backend connections")]
    TooManyConnections,
    /// The caller cannot have another upstream 2025 session: the gateway's table is full and the
    /// caller holds none it could give back. Nothing was sent.
    #[error("too many upstream sessions")]
    TooManySessions,
    /// The operator's destination policy refused the address the backend's URL led to: nothing
    /// was sent.
    #[error("destination not allowed")]
    DestinationNotAllowed,
    /// The backend's circuit breaker is open: the call was not sent.
    #[error("circuit open, retry in {}s", .0.as_secs().max(1))]
    CircuitOpen(Duration),
    /// The backend's transport (`stdio`, `sse`) is not built into this gateway: the feature of
    /// that name of `mcp-router` is off.
    #[error("backend transport {0} not built into this gateway")]
    TransportDisabled(&'static str),
    /// A linked backend (stdio, HTTP+SSE) sent a call more than the call's share of messages its
    /// client had not read yet: the call failed and was cancelled upstream.
    #[error(
        "backend sent more than {} that its client has not read yet (the per-call buffer of a \
         linked backend, {key})",
        amount(*limit, unit)
    )]
    CallBufferFull {
        /// The share that was full, in `unit`s.
        limit: usize,
        /// `bytes` or `messages`.
        unit: &'static str,
        /// The configuration key of that share.
        key: &'static str,
    },
    /// The messages linked backends sent a principal's calls that its clients have not read yet
    /// reached the principal's share (or, of every principal, the node's ceiling): the call
    /// that was sent one more failed and was cancelled upstream.
    #[error(
        "backend messages not read yet by {whose} reached {} ({key})",
        size(*limit)
    )]
    LinkBufferSpent {
        /// `this caller's clients` or `the clients of every caller on this node`.
        whose: &'static str,
        /// The limit that is spent, in bytes.
        limit: usize,
        /// The configuration key of that limit.
        key: &'static str,
    },
    /// The messages waiting in linked backends' outbound queues for a principal's calls (its
    /// requests, its clients' answers), with what its clients have not read yet, reached the
    /// principal's share (or the node's ceiling): the call was not sent.
    #[error(
        "messages for the backend waiting to be written, with those not read yet by {whose}, \
         reached {} ({key})",
        size(*limit)
    )]
    LinkQueueSpent {
        /// `this caller's clients` or `the clients of every caller on this node`.
        whose: &'static str,
        /// The limit that is spent, in bytes.
        limit: usize,
        /// The configuration key of that limit.
        key: &'static str,
    },
    /// What a linked backend of one principal describes itself with, kept for the link's life,
    /// does not fit in the principal's share of the links' budget (or the node's ceiling) beside
    /// what its calls hold: the handshake failed.
    #[error(
        "the backend's description of itself, with the messages not read yet by {whose}, passes \
         {} ({key})",
        size(*limit)
    )]
    LinkIdentitySpent {
        /// `this caller's clients` or `the clients of every caller on this node`.
        whose: &'static str,
        /// The limit that is spent, in bytes.
        limit: usize,
        /// The configuration key of that limit.
        key: &'static str,
    },
    /// A linked backend's outbound queue holds as many messages as it may (the backend does not
    /// read them as fast as they come): the call was not sent.
    #[error(
        "backend busy: {0} messages already wait to be sent to it (the outbound queue of a \
         linked backend)"
    )]
    LinkBusy(usize),
}

impl UpstreamError {
    /// Why a backend's answer ended without the call's response: it held a message that is not
    /// JSON-RPC (`saw_invalid`), or it simply stopped.
    /// The `error.type` of the failure in spans and metrics (a bounded set).
    pub(crate) fn error_type(&self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Timeout(_) => "timeout",
            Self::DeadlineExceeded(_) => "deadline",
            Self::Status(_) => "http_status",
            Self::Malformed(_) => "malformed",
            Self::Disconnected => "disconnected",
            Self::NoResponse => "no_response",
            Self::SessionExpired => "session_expired",
            Self::NoUrl => "no_url",
            Self::NotAllowed => "not_allowed",
            Self::ProcessFailed => "process_failed",
            Self::TooManyConnections => "too_many_connections",
            Self::TooManySessions => "too_many_sessions",
            Self::DestinationNotAllowed => "destination_not_allowed",
            Self::CircuitOpen(_) => "circuit_open",
            Self::TransportDisabled(_) => "transport_disabled",
            Self::CallBufferFull { .. } => "call_buffer_full",
            Self::LinkBufferSpent { .. } => "link_buffer_spent",
            Self::LinkBusy(_) => "link_busy",
            Self::LinkQueueSpent { .. } => "link_queue_spent",
            Self::LinkIdentitySpent { .. } => "link_identity_spent",
        }
    }

    pub(crate) fn ended(saw_invalid: bool) -> Self {
        if saw_invalid {
            Self::Malformed("invalid JSON-RPC message")
        } else {
            Self::NoResponse
        }
    }

    /// The fallback classification of this failure.
    pub fn failure_kind(&self) -> mcp_fallback::FailureKind {
        if self.never_sent() {
            mcp_fallback::FailureKind::NeverSent
        } else {
            mcp_fallback::FailureKind::MaybeReceived
        }
    }

    /// Whether the backend provably never received the request (safe to retry anywhere).
    pub fn never_sent(&self) -> bool {
        matches!(
            self,
            Self::Connect
                | Self::NoUrl
                | Self::SessionExpired
                | Self::CircuitOpen(_)
                | Self::NotAllowed
                | Self::DestinationNotAllowed
                | Self::ProcessFailed
                | Self::TooManyConnections
                | Self::TooManySessions
                | Self::TransportDisabled(_)
                | Self::LinkBusy(_)
        )
    }
}

/// What the fallback layer of a backend stack reads to decide whether a replica may be tried.
impl mcp_fallback::FailureKindOf for UpstreamError {
    fn failure_kind(&self) -> mcp_fallback::FailureKind {
        UpstreamError::failure_kind(self)
    }
}

/// Why the client could not exchange a request: a destination the operator's policy refused, a
/// connection that could not be made, or one that broke.
pub(crate) fn classify_client_error(e: &hyper_util::client::legacy::Error) -> UpstreamError {
    if super::transport::is_denied(e) {
        UpstreamError::DestinationNotAllowed
    } else if e.is_connect() {
        UpstreamError::Connect
    } else {
        UpstreamError::Disconnected
    }
}

/// `limit` of `unit` as an operator writes it (bytes as [`size`] shows them).
fn amount(limit: usize, unit: &str) -> String {
    if unit == "bytes" {
        size(limit)
    } else {
        format!("{limit} {unit}")
    }
}

/// `bytes` as an operator writes it: in MiB or KiB when it is a whole number of them.
fn size(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}
