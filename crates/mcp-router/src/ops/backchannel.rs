//! Where a backend's own request is answered, and which client capability it needs: shared by
//! the relay of a call ([`call`](super::call)) for backends in a legacy session and backends behind
//! a link (stdio, HTTP+SSE).

use bytes::Bytes;
use mcp_core::{ErrorObject, RawObject, RequestId, encode_error, encode_result};

use crate::upstream::{LegacySession, LinkWriter};

/// The client capability a backend's request needs, for the requests the gateway can relay or
/// turn into an `input_required` input.
pub(super) fn input_capability(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Where a backend's request is answered: its legacy session, or its link.
#[derive(Clone, Copy)]
pub(super) struct Back<'a> {
    pub(super) session: Option<&'a LegacySession>,
    pub(super) link: Option<&'a LinkWriter>,
}

/// Writes a 2025 client's answer to a link backend's request to the link under the backend's own
/// id, in the background; an error when the client does not answer within `ttl` (or the answer
/// was lost). Ends with the link.
pub(super) fn forward_answer(
    link: LinkWriter,
    upstream_id: RequestId,
    answer: tokio::sync::oneshot::Receiver<Bytes>,
    ttl: std::time::Duration,
) {
    tokio::spawn(async move {
        let answered = tokio::select! {
            answered = tokio::time::timeout(ttl, answer) => answered,
            () = link.closed() => return,
        };
        let why = match &answered {
            Ok(Err(_)) => "the call this request belongs to ended before its client answered",
            _ => "the client did not answer this request in time",
        };
        let message = answered
            .ok()
            .and_then(Result::ok)
            .and_then(|answer| response_to(&upstream_id, &answer))
            .unwrap_or_else(|| encode_error(Some(&upstream_id), &ErrorObject::internal(why)));
        link.send(message);
    });
}

/// A JSON-RPC response with `id` from a client's answer (`{"result"}` or `{"error"}`).
fn response_to(id: &RequestId, answer: &[u8]) -> Option<Vec<u8>> {
    let answer = RawObject::parse(std::str::from_utf8(answer).ok()?).ok()?;
    if let Some(result) = answer.get("result") {
        return Some(encode_result(id, result));
    }
    let mut message = RawObject::new();
    message.set_str("jsonrpc", "2.0");
    message.set_json("id", id);
    message.set_raw("error", answer.get("error")?.to_owned());
    Some(message.to_json().into_bytes())
}
