//! How one exchange counts: its breaker outcome (an unreachable, slow or broken backend is a
//! failure, a backend that answered is alive) and its client span and duration, recorded when
//! the answer is known.

// The parent's items, glob-imported: helpers of this module's `Client` and stacks.
use super::*;

/// How a failed exchange counts for a breaker: an unreachable, slow or broken backend is a
/// failure (a linked backend that does not read its queue is one, like a 429); a backend that
/// answered (a 4xx, a forgotten session) is alive; a call failed because its client did not read
/// says nothing about the backend.
pub(super) fn outcome_of(error: &UpstreamError) -> Outcome {
    match error {
        UpstreamError::Connect
        | UpstreamError::Timeout(_)
        | UpstreamError::Malformed(_)
        | UpstreamError::Disconnected
        | UpstreamError::NoResponse
        | UpstreamError::ProcessFailed
        | UpstreamError::LinkBusy(_) => Outcome::Failure,
        UpstreamError::Status(code) if *code >= 500 || *code == 408 || *code == 429 => {
            Outcome::Failure
        }
        UpstreamError::Status(_) | UpstreamError::SessionExpired => Outcome::Success,
        // A call that used its whole deadline was answered along the way: a long task, not
        // a sick backend (a silent one fails its gap bound, `timeout_ms`, first).
        UpstreamError::NoUrl
        | UpstreamError::DeadlineExceeded(_)
        | UpstreamError::CircuitOpen(_)
        | UpstreamError::NotAllowed
        | UpstreamError::DestinationNotAllowed
        | UpstreamError::TooManyConnections
        | UpstreamError::TooManySessions
        | UpstreamError::TransportDisabled(_)
        | UpstreamError::CallBufferFull { .. }
        | UpstreamError::LinkBufferSpent { .. }
        | UpstreamError::LinkQueueSpent { .. }
        | UpstreamError::LinkIdentitySpent { .. } => Outcome::Ignore,
    }
}

/// Records the breaker outcome, the client span and the duration of one call when its answer is
/// known: the first stream error is a failure, the response (or error response) with the call's
/// id a success for the breaker. Its reader hands it every message as the reader parsed it
/// ([`Self::message`]), so a message is parsed once for both; [`Self::recording`] reads the
/// messages for a reader that does not parse them. Dropped before either (the client cancelled),
/// it records nothing for the breaker and ends the span as `cancelled`.
pub(crate) struct Recorder {
    id: RequestId,
    permit: Option<Permit>,
    pending: Option<(ClientOp, Option<opentelemetry::Context>)>,
}

impl Recorder {
    pub(super) fn new(
        id: RequestId,
        permit: Option<Permit>,
        op: ClientOp,
        cx: Option<opentelemetry::Context>,
    ) -> Self {
        Self {
            id,
            permit,
            pending: Some((op, cx)),
        }
    }

    /// One message of the answer as its reader parsed it (`None`: it is not JSON-RPC).
    pub(crate) fn message(&mut self, env: Option<&Envelope<'_>>) {
        if self.pending.is_none() {
            return;
        }
        if let Some(env) = env
            && env.id() == Some(&self.id)
            && matches!(env.kind(), MessageKind::Response | MessageKind::Error)
        {
            if let Some(permit) = self.permit.take() {
                permit.record_elapsed(Outcome::Success);
            }
            let error = (env.kind() == MessageKind::Error).then(|| {
                env.error()
                    .map_or("jsonrpc_error", |e| telemetry::error_type(e.code))
            });
            self.finish(error);
        }
    }

    /// The answer's stream failed with `error`.
    pub(crate) fn failed(&mut self, error: &UpstreamError) {
        if self.pending.is_none() {
            return;
        }
        if let Some(permit) = self.permit.take() {
            permit.record_elapsed(outcome_of(error));
        }
        self.finish(Some(error.error_type()));
    }

    /// `messages`, each parsed and handed to this recorder as it is read.
    pub(super) fn recording(mut self, messages: MessageStream) -> MessageStream {
        Box::pin(messages.map(move |item| {
            match &item {
                Err(e) => self.failed(e),
                Ok(bytes) if self.pending.is_some() => {
                    self.message(Envelope::parse(bytes).ok().as_ref());
                }
                Ok(_) => {}
            }
            item
        }))
    }

    fn finish(&mut self, error: Option<&'static str>) {
        if let Some((op, cx)) = self.pending.take() {
            op.finish(cx.as_ref(), error);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.finish(Some("cancelled"));
    }
}
