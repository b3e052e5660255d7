//! The audit trail: one [`AuditRecord`] per MCP operation the router serves, handed to the
//! [`AuditSink`] an integrator configures ([`McpRouterBuilder::audit`](crate::McpRouterBuilder::audit)).
//! The router says what happened (who, where, which backend, how it ended, how long, how many
//! bytes); where the records go (a file, stdout, a queue) is the sink's business.
//!
//! What gets a record (book: docs/src/telemetry.md, "Audit trail"):
//!
//! - every JSON-RPC **request** a client POSTs, of either era (`tools/call`, `prompts/get`,
//!   `resources/read`, the lists, `completion/complete`, the `tasks/*` follow-ups, `initialize`,
//!   `ping`, `server/discover`, `subscriptions/listen`, ...), including the ones the router
//!   refuses itself (an unknown tool is a `jsonrpc_error` record);
//! - every **server request relayed** to a 2025 client (a backend's `elicitation/create`,
//!   `sampling/createMessage`, `roots/list` on a call's or the session's GET stream), when the
//!   client's answer reaches the gateway (`kind = "server_request"`). A 2026-07-28 client answers
//!   those inside its `tools/call` retries (`input_required`), which are requests of their own.
//!
//! Notifications, GETs and DELETEs get none, nor do requests refused before the router (no token,
//! unknown virtual host, limits: the access log and metrics count those).
//!
//! A record is emitted once the operation is over: its answer fully written (a streamed answer:
//! its final message, or the client gone), so a 2025 call relayed past its client's disconnect is
//! recorded when the backend's answer arrives. Arguments and results are recorded only when the
//! integrator allows it ([`AuditPayloads::PerVhost`]) and the virtual host asks for it
//! (`audit_payloads` in the user configuration), cut to [`Audit::max_payload_bytes`]. Tokens and
//! headers are never recorded.

mod pending;
mod record;

use std::sync::Arc;

pub(crate) use pending::{AuditHandle, Started, audited};
pub use record::{AuditKind, AuditOutcome, AuditRecord};

/// Where audit records go. Called once per record, on the task (or thread) that finished the
/// operation: an implementation must not block (queue the record and write it elsewhere, and drop
/// it when the queue is full: the router's callers must never wait for an audit trail).
pub trait AuditSink: Send + Sync + 'static {
    /// Takes one record.
    fn record(&self, record: AuditRecord);
}

impl<F> AuditSink for F
where
    F: Fn(AuditRecord) + Send + Sync + 'static,
{
    fn record(&self, record: AuditRecord) {
        self(record);
    }
}

/// Whether arguments and results may be recorded (the operator's rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuditPayloads {
    /// Never, whatever a user configuration says (the default).
    #[default]
    Never,
    /// For the virtual hosts whose user configuration sets `audit_payloads: true`.
    PerVhost,
}

/// The audit trail's settings: the sink, the payload rule and the payload cap.
#[derive(Clone)]
#[must_use]
pub struct Audit {
    pub(crate) sink: Arc<dyn AuditSink>,
    pub(crate) payloads: AuditPayloads,
    pub(crate) max_payload_bytes: usize,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("payloads", &self.payloads)
            .field("max_payload_bytes", &self.max_payload_bytes)
            .finish_non_exhaustive()
    }
}

/// The default of [`Audit::max_payload_bytes`].
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 4096;

impl Audit {
    /// Records go to `sink`; no payloads.
    pub fn new(sink: impl AuditSink) -> Self {
        Self::shared(Arc::new(sink))
    }

    /// [`Audit::new`] with a sink shared with other owners.
    pub fn shared(sink: Arc<dyn AuditSink>) -> Self {
        Self {
            sink,
            payloads: AuditPayloads::Never,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }

    /// Whether arguments and results may be recorded (default [`AuditPayloads::Never`]).
    pub fn payloads(mut self, rule: AuditPayloads) -> Self {
        self.payloads = rule;
        self
    }

    /// The longest JSON text of `arguments` and of `result` kept in a record (default 4096
    /// bytes): a longer one is recorded as a string holding its first bytes (cut on a character
    /// boundary) and marked `arguments_truncated` / `result_truncated`, so that one record, and
    /// the sink's queue of them, stays bounded whatever a tenant sends.
    pub fn max_payload_bytes(mut self, max: usize) -> Self {
        self.max_payload_bytes = max;
        self
    }
}
