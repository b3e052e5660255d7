//! Parking: a 2025 backend's call that asks a 2026-07-28 client for input (sampling,
//! elicitation, roots) ends the client's exchange with `input_required` and waits in the
//! router's table; the client's retry, carrying `inputResponses` and the gateway's
//! `requestState`, answers the backend's requests and relays the rest of the same call.

use std::sync::Arc;

use bytes::Bytes;
use mcp_core::{Envelope, Era, ErrorObject, Method, RawObject, RequestId, encode_result};
use serde_json::value::RawValue;

use super::relay::Relay;
use super::{Answer, answer, as_strs, backend_error};
use crate::ops::Ops;
use crate::ops::backchannel::input_capability;
use crate::ops::client_meta::ClientMeta;
use crate::ops::parked::{self, Resume};
use crate::ops::request_state;

/// Most seconds a parked call waits for the client's retries, all rounds of it together.
const MAX_PARKED_SECS: u64 = 600;

/// A 2025 backend's call waiting for a 2026-07-28 client's input (see [`parked`](crate::ops::parked)).
pub(crate) struct ParkedCall {
    /// Boxed: a relay is large, and parked calls move through the table.
    relay: Box<Relay>,
    /// When the call stops waiting, whatever the rounds (re-asking does not extend it).
    deadline: std::time::Instant,
    inputs: Vec<Input>,
}

/// One backend request the client is asked to answer.
struct Input {
    /// Its key in `inputRequests` / `inputResponses`.
    key: String,
    /// The backend's request id, to answer upstream.
    upstream_id: RequestId,
    /// `{"method", "params"}` as the client gets it.
    request: Box<RawValue>,
}

/// The parked calls of a router.
pub(crate) type ParkedCalls = parked::ParkedCalls<ParkedCall>;

impl ParkedCall {
    /// Parks the call and returns the client's `input_required` answer; gives the call back when
    /// the table is full.
    fn park(self) -> Result<Vec<u8>, Self> {
        let ops = Arc::clone(&self.relay.ops);
        let downstream_id = self.relay.downstream_id.clone();
        let binding = self.relay.finish.state_binding.clone();
        let mut requests = RawObject::new();
        for input in &self.inputs {
            requests.set_raw(&input.key, input.request.clone());
        }
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(self);
        }
        // The caller owns the call: its share of the table is bounded.
        let owner = self.relay.principal().clone();
        let token = ops.parked.park(self, &owner, left)?;
        let ttl = left.as_secs().max(1);
        let binding = as_strs(&binding);
        let state =
            request_state::wrap_parked(&ops.sealer, &binding, &token, ops.pending.node(), ttl);
        let mut result = RawObject::new();
        result.set_str("resultType", "input_required");
        result.set_raw("inputRequests", requests.to_raw());
        result.set_str("requestState", &state);
        Ok(encode_result(&downstream_id, &result.to_raw()))
    }
}

impl ParkedCall {
    /// Why the call could not be parked again: its time is up, or there is no room.
    fn refusal(&self) -> ErrorObject {
        if self.deadline <= std::time::Instant::now() {
            return ErrorObject::invalid_params("Invalid requestState (expired handle)");
        }
        ErrorObject::internal(format!(
            "Backend {} needs input, and the gateway holds too many calls waiting for input",
            self.relay.finish.backend
        ))
    }
}

/// Resumes the call parked on this node under `parked.token`, if it is here and belongs to
/// `parked.binding`; `None` otherwise. `audit`: the retry's audit record, which the rest of the
/// call settles.
pub(crate) async fn resume_here(
    ops: &Arc<Ops>,
    id: &RequestId,
    parked: &Resume,
    params: &RawObject<'_>,
    client: ClientMeta,
    audit: Option<crate::audit::AuditHandle>,
) -> Option<Answer> {
    let belongs = |call: &ParkedCall| {
        call.relay
            .finish
            .state_binding
            .iter()
            .eq(parked.binding.iter())
    };
    let mut call = ops.parked.take(&parked.token, belongs)?;
    if let Some(audit) = &audit {
        audit.backend(&call.relay.finish.backend);
    }
    call.relay.downstream_id = id.clone();
    call.relay.log_threshold = client.log_threshold;
    call.relay.progress = match (call.relay.progress.take(), client.progress_token) {
        (Some((upstream, _)), Some(client)) => Some((upstream, client)),
        _ => None,
    };
    let responses = params
        .get("inputResponses")
        .and_then(|r| RawObject::from_raw(r).ok());
    let answers: Option<Vec<(RequestId, Box<RawValue>)>> = call
        .inputs
        .iter()
        .map(|input| {
            let answer = responses.as_ref()?.get(&input.key)?;
            Some((input.upstream_id.clone(), answer.to_owned()))
        })
        .collect();
    let Some(answers) = answers else {
        // Missing inputs get another input_required round, as the revision asks of servers.
        return Some(match call.park() {
            Ok(message) => Answer::Final {
                message,
                error_code: None,
            },
            Err(call) => Answer::Error(call.refusal()),
        });
    };
    if let Some(audit) = &audit {
        audit.expect_final();
    }
    call.relay.audit = audit;
    for (upstream_id, answer) in answers {
        if let Err(e) = call.relay.answer_upstream(&upstream_id, &answer).await {
            if let Some(audit) = &call.relay.audit {
                audit.transport_error();
            }
            return Some(backend_error(&call.relay.finish.backend, &e));
        }
    }
    Some(answer(call.relay).await)
}

impl Relay {
    /// Parks the call when a 2025 backend asks a 2026-07-28 client for input it declared it can
    /// give, and returns the client's `input_required` answer; `None` when the request must be
    /// declined instead.
    pub(super) fn park(&mut self, message: &Bytes, id: &RequestId) -> Option<Vec<u8>> {
        if self.finish.era != Era::Modern
            || (self.session.is_none() && self.link.is_none())
            || !matches!(
                self.finish.method,
                Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead
            )
        {
            return None;
        }
        let env = Envelope::parse(message).ok()?;
        let method = env.method()?;
        let capability = input_capability(method)?;
        if !self.client_declares(capability) {
            return None;
        }
        let mut request = RawObject::new();
        request.set_str("method", method);
        if let Some(params) = env.params() {
            request.set_borrowed("params", params);
        }
        let input = Input {
            key: capability.to_owned(),
            upstream_id: id.clone(),
            request: request.to_raw(),
        };
        let lifetime = self.ops.request_state_ttl_secs.clamp(1, MAX_PARKED_SECS);
        let call = ParkedCall {
            relay: Box::new(self.detach()),
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(lifetime),
            inputs: vec![input],
        };
        match call.park() {
            Ok(input_required) => Some(input_required),
            Err(call) => {
                tracing::warn!(backend = %self.finish.backend, "too many calls wait for input: declining a backend request");
                // The call goes on in this relay, for this request's record.
                let audit = self.audit.take();
                *self = *call.relay;
                self.audit = audit;
                None
            }
        }
    }
}
