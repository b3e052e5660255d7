//! MRTR bridging for a 2025 client calling a 2026-07-28 backend: the backend's
//! `input_required` becomes real server-to-client requests on the call's stream, and the client's
//! answers go back as `inputResponses` on a retry of the same call (book: docs/src/eras.md).

use bytes::Bytes;
use mcp_core::{Envelope, Era, ErrorObject, RawObject};
use mcp_fallback::ToolHints;
use serde_json::value::RawValue;

use super::relay::Relay;
use crate::ops::pending::Refused;
use crate::upstream::Call;

/// Most MRTR rounds the gateway drives for a 2025 client before giving up.
const MAX_BRIDGED_ROUNDS: usize = 8;
/// How long the gateway waits for a 2025 client to answer its input requests.
const BRIDGE_ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Turns a modern backend's MRTR `input_required` into real requests to a 2025 client (which
/// does not speak MRTR) on the call's SSE stream, then retries the backend with the answers as
/// `inputResponses` and the backend's `requestState` (book: docs/src/eras.md bridging).
pub(super) struct Bridge {
    /// The upstream params of the call, to retry with.
    pub(super) params: RawObject<'static>,
    /// The upstream tool/prompt name or resource URI (for `Mcp-Name`).
    pub(super) name: String,
    pub(super) rounds: usize,
    /// Requests to send the client before waiting.
    pub(super) queue: std::collections::VecDeque<Vec<u8>>,
    /// (input key, where the client's answer arrives).
    pub(super) awaiting: Vec<(String, tokio::sync::oneshot::Receiver<Bytes>)>,
    /// The backend's `requestState` of the current round.
    pub(super) request_state: Option<String>,
}

impl Relay {
    /// When bridging and the backend answered `input_required`: queues the input requests for the
    /// client and returns `true` (the call goes on); otherwise `false`. Refused when a request
    /// would take the caller past its share of relayed requests (the call then fails naming the
    /// limit; the requests already queued are released with the relay).
    pub(super) fn bridge_input_required(
        &mut self,
        env: Option<&Envelope<'_>>,
    ) -> Result<bool, Refused> {
        let Some(session) = self.downstream_session.clone() else {
            return Ok(false);
        };
        let Some(bridge) = self.bridge.as_mut() else {
            return Ok(false);
        };
        let Some(result) = env
            .and_then(Envelope::result)
            .and_then(|r| RawObject::from_raw(r).ok())
        else {
            return Ok(false);
        };
        if result.get_str("resultType").as_deref() != Some("input_required")
            || bridge.rounds >= MAX_BRIDGED_ROUNDS
        {
            return Ok(false);
        }
        let requests: Vec<(String, Box<RawValue>)> = result
            .get("inputRequests")
            .and_then(|r| RawObject::from_raw(r).ok())
            .map(|r| {
                r.keys()
                    .filter_map(|k| Some((k.to_owned(), r.get(k)?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        bridge.rounds += 1;
        bridge.request_state = result.get_str("requestState");
        for (key, request) in requests {
            let Ok(request) = RawObject::from_raw(&request) else {
                continue;
            };
            let Some(method) = request.get_str("method") else {
                continue;
            };
            let asked = crate::ops::pending::Asked {
                method: Some(method.clone()),
                backend: Some(self.finish.backend.clone()),
            };
            let (id, entry, answer) = self.ops.pending.register_local_asked(
                &session,
                &self.target.caller.principal,
                asked,
            )?;
            self.asked.push(entry);
            let params = request.get("params").map(|p| p.to_owned());
            let mut out = RawObject::new();
            out.set_str("jsonrpc", "2.0");
            out.set_str("id", &id);
            out.set_str("method", &method);
            if let Some(params) = params {
                out.set_raw("params", params);
            }
            bridge.queue.push_back(out.to_json().into_bytes());
            bridge.awaiting.push((key, answer));
        }
        Ok(true)
    }

    /// Waits for the client's answers to this round's input requests and retries the backend
    /// with them.
    pub(super) async fn retry_with_answers(&mut self) -> Result<(), ErrorObject> {
        let Some(bridge) = self.bridge.as_mut() else {
            return Ok(());
        };
        let awaiting = std::mem::take(&mut bridge.awaiting);
        let mut responses = RawObject::new();
        for (key, answer) in awaiting {
            let answer = tokio::time::timeout(BRIDGE_ANSWER_TIMEOUT, answer)
                .await
                .map_err(|_| {
                    ErrorObject::internal("The client did not answer the input request in time")
                })?
                .map_err(|_| ErrorObject::internal("The input request was dropped"))?;
            let answer = RawObject::parse(std::str::from_utf8(&answer).unwrap_or("{}"))
                .map_err(|_| ErrorObject::internal("Invalid answer to an input request"))?;
            match answer.get("result") {
                Some(result) => responses.set_raw(&key, result.to_owned()),
                None => {
                    return Err(ErrorObject::internal(format!(
                        "The client refused the input request `{key}`"
                    )));
                }
            }
        }
        let mut params = bridge.params.clone();
        params.set_raw("inputResponses", responses.to_raw());
        match &bridge.request_state {
            Some(state) => params.set_str("requestState", state),
            None => {
                params.remove("requestState");
            }
        }
        let name = bridge.name.clone();
        let reply = {
            let mut target = self.target.target();
            // The bridge exists for a call sent in 2026-07-28: its retries are sent so too.
            target.era = Era::Modern;
            let call = Call {
                method: self.finish.method.as_str(),
                params,
                name: Some(&name),
                progress_token: self.progress.as_ref().map(|(t, _)| t.as_str()),
                hints: ToolHints::NONE,
                headers: None,
            };
            self.ops.upstream.send_observed(&target, &call).await
        };
        let (reply, recorder) = reply.map_err(|e| {
            ErrorObject::internal(format!("Backend {} failed: {e}", self.finish.backend))
        })?;
        self.upstream_id = reply.id;
        self.messages = reply.messages;
        self.recorder = Some(recorder);
        self.session = reply.session;
        self.link = reply.link;
        Ok(())
    }
}
