//! How one exchange counts: its breaker outcome (an unreachable, slow or broken backend is a
//! failure, a backend that answered is alive) and its client span and duration, recorded when
//! the answer is known.

// The parent's items, glob-imported: helpers of this module's `Client` and stacks.
use super::*;

/// How a failed exchange counts for a breaker: an unreachable, slow or broken backend is a
/// failure; a backend that answered (a 4xx, a forgotten session) is alive.
pub(super) fn outcome_of(error: &UpstreamError) -> Outcome {
    match error {
        UpstreamError::Connect
        | UpstreamError::Timeout(_)
        | UpstreamError::Malformed(_)
        | UpstreamError::Disconnected
        | UpstreamError::NoResponse
        | UpstreamError::ProcessFailed => Outcome::Failure,
        UpstreamError::Status(code) if *code >= 500 || *code == 408 || *code == 429 => {
            Outcome::Failure
        }
        UpstreamError::Status(_) | UpstreamError::SessionExpired => Outcome::Success,
        UpstreamError::NoUrl
        | UpstreamError::CircuitOpen(_)
        | UpstreamError::NotAllowed
        | UpstreamError::DestinationNotAllowed
        | UpstreamError::TooManyConnections
        | UpstreamError::TooManySessions
        | UpstreamError::TransportDisabled(_) => Outcome::Ignore,
    }
}

/// Records the breaker outcome, the client span and the duration of a call when its answer is
/// known (one parse of each message serves both): the first stream error is a failure, the
/// response (or error response) with the call's id a success for the breaker. A stream dropped
/// before either (the client cancelled) records nothing for the breaker and ends the span as
/// `cancelled`.
pub(super) fn recording(
    messages: MessageStream,
    id: RequestId,
    permit: Option<Permit>,
    op: ClientOp,
    cx: Option<opentelemetry::Context>,
) -> MessageStream {
    struct Pending(Option<(ClientOp, Option<opentelemetry::Context>)>);
    impl Pending {
        fn finish(&mut self, error: Option<&'static str>) {
            if let Some((op, cx)) = self.0.take() {
                op.finish(cx.as_ref(), error);
            }
        }
    }
    impl Drop for Pending {
        fn drop(&mut self) {
            self.finish(Some("cancelled"));
        }
    }
    let mut pending = Pending(Some((op, cx)));
    let mut permit = permit;
    Box::pin(messages.map(move |item| {
        if pending.0.is_some() {
            match &item {
                Err(e) => {
                    if let Some(permit) = permit.take() {
                        permit.record_elapsed(outcome_of(e));
                    }
                    pending.finish(Some(e.error_type()));
                }
                Ok(bytes) => {
                    if let Ok(env) = Envelope::parse(bytes)
                        && env.id() == Some(&id)
                        && matches!(env.kind(), MessageKind::Response | MessageKind::Error)
                    {
                        if let Some(permit) = permit.take() {
                            permit.record_elapsed(Outcome::Success);
                        }
                        let error = (env.kind() == MessageKind::Error).then(|| {
                            env.error()
                                .map_or("jsonrpc_error", |e| telemetry::error_type(e.code))
                        });
                        pending.finish(error);
                    }
                }
            }
        }
        item
    }))
}
