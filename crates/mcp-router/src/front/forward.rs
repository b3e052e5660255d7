//! A parked call resumed from any node: a 2026-07-28 client's retry (`inputResponses` and the
//! gateway's `requestState`) that reaches a node not holding the parked call is passed on to the
//! node that holds it, over the [`NodeBus`], and that node's answer comes back the same way.
//!
//! The `requestState` names the holding node (sealed, as everything in it). The receiving node
//! publishes a [`BusMessage::Resume`] on the holder's channel with a fresh ticket and waits on its
//! own channel: the holder checks the parked call's binding (caller, virtual host, backend,
//! method, name) as for a local retry, resumes it, and publishes its answer as
//! [`BusMessage::ResumePart`]s: the HTTP status and content type, the body's chunks (a JSON answer,
//! or the SSE events of the rest of the call), an end mark; or that it does not hold the call.
//! The parts of one answer are published one after another from one task, so Redis delivers them
//! in order. The receiving node answers the client with them as they come.
//!
//! Bounds and failures: the holder must answer within [`HEAD_WAIT`] (the retry is published again
//! while nobody listens on the holder's channel; without an answer by then, and when it does not
//! hold the call, the client gets the same `-32602` as without a bus). What a node keeps while
//! it waits draws from the `forwarded_retries` budget (book: docs/src/security.md, "Budgets"):
//! a slot per forwarded answer, at most [`MAX_WAITING`] on the node and
//! [`MAX_WAITING_PER_PRINCIPAL`] of one caller (more get that error too), and the bytes of parts
//! that arrived and the client has not read yet, at most [`UNREAD_BYTES_PER_PRINCIPAL`] of one
//! caller's answers together (pub/sub cannot be told to wait, so an answer past it ends early,
//! like one whose part was lost). Pub/sub delivery is at most once: a part lost between the
//! nodes ends the client's stream early (the call itself runs to its end on the holder).
//! Closing the client's stream does not cancel the call on the holder.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use mcp_core::{Account, Budget, Era, Principal, RawObject, RequestId, Slot, Spent};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::Front;
use super::answer;
use super::bus::{BusMessage, NodeBus};
use crate::body::{self, McpBody};
use crate::ops::call::{Elsewhere, resume_here};
use crate::ops::client_meta::ClientMeta;
use crate::ops::parked::{self, Resume};

/// How long a node waits for the holder's first part.
pub(crate) const HEAD_WAIT: Duration = Duration::from_secs(10);
/// How long a node waits before publishing a retry again when the holder did not listen.
const REPUBLISH_AFTER: Duration = Duration::from_millis(50);
/// Forwarded answers one node waits for at once (the default of
/// `McpRouterBuilder::forwarded_retry_budgets`).
pub(crate) const MAX_WAITING: usize = 10_000;
/// Forwarded answers one principal waits for at once on a node (default).
pub(crate) const MAX_WAITING_PER_PRINCIPAL: usize = 100;
/// Bytes of forwarded answers that arrived and one principal's clients have not read yet
/// (default).
pub(crate) const UNREAD_BYTES_PER_PRINCIPAL: usize = 16 << 20;
/// The same for every principal on a node (default).
const UNREAD_BYTES: usize = 256 << 20;

/// One part of a forwarded answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub(crate) enum Part {
    /// The holder does not hold that call (any more), or not for this caller.
    Missing,
    /// The answer's HTTP status and content type.
    Head { status: u16, content_type: String },
    /// A chunk of the body.
    Chunk { data: String },
    /// The body is complete.
    End,
}

/// The forwarded answers this node waits for, by ticket.
pub(crate) struct Waiting {
    tickets: Mutex<HashMap<String, Waiter>>,
    budget: Budget,
}

/// Where one forwarded answer's parts go, and the slot (and account) its wait holds.
struct Waiter {
    parts: mpsc::UnboundedSender<Part>,
    slot: Slot,
}

/// The `forwarded_retries` budget with the default limits.
pub(crate) fn default_budget() -> Budget {
    Budget::new("forwarded_retries")
        .with_slots(MAX_WAITING_PER_PRINCIPAL, MAX_WAITING)
        .with_bytes(UNREAD_BYTES_PER_PRINCIPAL, UNREAD_BYTES)
}

impl Waiting {
    /// Waits drawing from `budget` (see the module docs).
    pub(crate) fn new(budget: Budget) -> Self {
        Self {
            tickets: Mutex::default(),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        self.tickets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a wait of `principal` for the answer to `ticket`: its slot, and the receiving
    /// end of the answer's parts.
    fn register(&self, principal: &Principal, ticket: &str) -> Result<Unread, Spent> {
        let slot = self.budget.take(principal)?;
        let (parts, receiver) = mpsc::unbounded_channel();
        let unread = Unread {
            parts: receiver,
            account: slot.account().clone(),
        };
        self.lock()
            .insert(ticket.to_owned(), Waiter { parts, slot });
        Ok(unread)
    }

    /// The budget the waits draw from, for metrics.
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// A part arrived for `ticket` (dropped when nobody waits for it any more). A chunk is
    /// charged to the caller's account until the client reads it; one past the budget ends
    /// the answer (see the module docs). The head and the end are always taken (counted, not
    /// checked): refusing them would lose a call the holder already resumed.
    pub(crate) fn deliver(&self, ticket: &str, part: Part) {
        let mut tickets = self.lock();
        let Some(waiter) = tickets.get(ticket) else {
            return;
        };
        let account = waiter.slot.account();
        let unread = part.unread_bytes();
        let charged = match part {
            Part::Chunk { .. } => account.charge(unread),
            Part::Head { .. } | Part::End | Part::Missing => {
                account.add(unread);
                Ok(())
            }
        };
        if let Err(spent) = charged {
            tracing::warn!(
                ?spent,
                "a forwarded answer's client reads too slowly: ending the answer"
            );
            tickets.remove(ticket);
            return;
        }
        if waiter.parts.send(part).is_err() {
            account.release(unread);
            tickets.remove(ticket);
        }
    }
}

impl Part {
    /// What the part keeps until the client reads it.
    fn unread_bytes(&self) -> usize {
        match self {
            Self::Chunk { data } => data.len(),
            Self::Head { content_type, .. } => content_type.len(),
            Self::Missing | Self::End => 0,
        }
    }
}

/// What the client's retry carries to the holder.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Forwarded {
    /// The node to answer.
    pub(crate) reply: String,
    pub(crate) ticket: String,
    pub(crate) resume: Resume,
    /// The retry's JSON-RPC id, as JSON.
    pub(crate) id: String,
    /// The retry's params (upstream form), as JSON.
    pub(crate) params: String,
    /// The retry's `_meta` (progress token, log level), as JSON.
    pub(crate) meta: Option<String>,
}

/// Passes the retry on to `node` and answers with what it sends back; `None` when it does not
/// hold the call, does not answer within [`HEAD_WAIT`], or this node waits for too many answers.
pub(crate) async fn forward(
    front: &Arc<Front>,
    bus: &NodeBus,
    elsewhere: &Elsewhere,
    id: &RequestId,
) -> Option<Response<McpBody>> {
    front.ensure_listening();
    if !bus.listening(HEAD_WAIT).await {
        return None;
    }
    let node = elsewhere.node.as_str();
    let ticket = parked::random_token()?;
    let Ok(mut receiver) = front.forwards.register(&elsewhere.principal, &ticket) else {
        tracing::warn!("too many forwarded retries waiting: answering locally");
        return None;
    };
    // Leaves the table when the answer is done with (or never comes).
    let guard = OwnedTicket {
        front: Arc::clone(front),
        id: ticket.clone(),
    };
    let message = BusMessage::Resume(Box::new(Forwarded {
        reply: bus.node_id().to_owned(),
        ticket,
        resume: elsewhere.resume.clone(),
        id: id.to_json().into_owned(),
        params: elsewhere.params.to_json(),
        meta: elsewhere.meta.as_ref().map(|m| m.get().to_owned()),
    }));
    let wait = async {
        // The holder subscribes when it parks the call; until then (moments, or never: it is
        // gone) nobody hears the message, so it is sent again until it was heard or the first
        // part of the answer arrives. In a Redis Cluster the PUBLISH count only covers the
        // subscribers of the node that ran it (0 although the holder heard it): the copies are
        // sent until the answer starts, and the holder serves a ticket once (`NodeBus`).
        let mut heard = false;
        loop {
            if !heard {
                heard = bus.publish_counted(node, &message).await? > 0;
            }
            tokio::select! {
                part = receiver.recv() => return part,
                () = tokio::time::sleep(REPUBLISH_AFTER) => {}
            }
        }
    };
    let head = tokio::time::timeout(HEAD_WAIT, wait).await.ok()??;
    let Part::Head {
        status,
        content_type,
    } = head
    else {
        return None;
    };
    // The ticket before the receiver: it leaves the table first (under the table's lock, which
    // a delivery holds from its charge to its send), so nothing is sent after the receiver
    // gave back what it held.
    let chunks =
        futures_util::stream::unfold((guard, receiver), |(ticket, mut receiver)| async move {
            match receiver.recv().await? {
                Part::Chunk { data } => Some((Bytes::from(data), (ticket, receiver))),
                Part::End | Part::Missing | Part::Head { .. } => None,
            }
        });
    let mut response = Response::new(body::streaming(chunks));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    Some(response)
}

/// The receiving end of a forwarded answer: a part read is given back to the caller's
/// account, and so are the parts left unread when the answer is dropped.
struct Unread {
    parts: mpsc::UnboundedReceiver<Part>,
    account: Account,
}

impl Unread {
    async fn recv(&mut self) -> Option<Part> {
        let part = self.parts.recv().await?;
        self.account.release(part.unread_bytes());
        Some(part)
    }
}

impl Drop for Unread {
    fn drop(&mut self) {
        // Closed first: a part delivered from now on fails to send and is given back there.
        self.parts.close();
        while let Ok(part) = self.parts.try_recv() {
            self.account.release(part.unread_bytes());
        }
    }
}

/// A ticket in the table, removed when dropped.
struct OwnedTicket {
    front: Arc<Front>,
    id: String,
}

impl Drop for OwnedTicket {
    fn drop(&mut self) {
        self.front.forwards.lock().remove(&self.id);
    }
}

/// On the holder: resumes the forwarded retry and publishes the answer to the asking node.
pub(crate) async fn serve(front: Arc<Front>, forwarded: Forwarded) {
    let Some(bus) = front.bus.clone() else {
        return;
    };
    let Forwarded {
        reply,
        ticket,
        resume,
        id,
        params,
        meta,
    } = forwarded;
    let publish = |part: Part| {
        let message = BusMessage::ResumePart {
            ticket: ticket.clone(),
            part,
        };
        let bus = Arc::clone(&bus);
        let reply = reply.clone();
        async move { bus.publish(&reply, &message).await }
    };
    let (Ok(id), Ok(params)) = (
        serde_json::from_str::<RequestId>(&id),
        RawObject::parse(&params),
    ) else {
        publish(Part::Missing).await;
        return;
    };
    let meta = meta.and_then(|m| RawValue::from_string(m).ok());
    let client = ClientMeta::from_meta(Era::Modern, meta.as_deref());
    // The retry's record is the receiving node's (it serves the client's request).
    let Some(answer) = resume_here(&front.ops, &id, &resume, &params, client, None).await else {
        publish(Part::Missing).await;
        return;
    };
    let response = answer::render(&front, &id, answer, Era::Modern, false).await;
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    let head = Part::Head {
        status: response.status().as_u16(),
        content_type,
    };
    if !publish(head).await {
        return;
    }
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let chunk = Part::Chunk {
            data: String::from_utf8_lossy(&data).into_owned(),
        };
        if !publish(chunk).await {
            return;
        }
    }
    publish(Part::End).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(subject: &str) -> Principal {
        Principal::new("https://issuer", subject)
    }

    /// A wait of `subject` for `ticket` in `waiting`, and its receiving end.
    fn wait(waiting: &Waiting, subject: &str, ticket: &str) -> Result<Unread, Spent> {
        waiting.register(&principal(subject), ticket)
    }

    fn head() -> Part {
        Part::Head {
            status: 200,
            content_type: String::new(),
        }
    }

    fn chunk(len: usize) -> Part {
        Part::Chunk {
            data: "x".repeat(len),
        }
    }

    #[tokio::test]
    async fn waits_and_unread_parts_draw_from_their_own_principals_share() {
        let waiting = Waiting::new(
            Budget::new("forwarded_retries")
                .with_slots(1, 10)
                .with_bytes(100, 1_000),
        );
        let mut alice = wait(&waiting, "alice", "a").expect("alice's one wait");
        assert_eq!(
            wait(&waiting, "alice", "a2").err(),
            Some(Spent::Share(1)),
            "past her share of waits"
        );
        let mut bob = wait(&waiting, "bob", "b").expect("bob's own share");

        // Alice's client does not read: her answer ends once her unread parts pass her share.
        waiting.deliver("a", head());
        waiting.deliver("a", chunk(60));
        waiting.deliver("a", chunk(60));
        waiting.deliver("a", chunk(60));
        assert!(waiting.lock().get("a").is_none(), "her answer was ended");
        // Bob's answer is whole.
        waiting.deliver("b", head());
        waiting.deliver("b", chunk(60));
        waiting.deliver("b", chunk(60));
        waiting.deliver("b", Part::End);
        assert!(matches!(bob.recv().await, Some(Part::Head { .. })));
        assert_eq!(bob.recv().await, Some(chunk(60)));
        assert_eq!(bob.recv().await, Some(chunk(60)));
        assert_eq!(bob.recv().await, Some(Part::End));

        // What alice's client reads at last: the parts kept, then the end.
        assert!(matches!(alice.recv().await, Some(Part::Head { .. })));
        assert_eq!(alice.recv().await, Some(chunk(60)));
        assert_eq!(alice.recv().await, Some(chunk(60)));
        assert_eq!(alice.recv().await, None, "the answer ended early");
        drop((alice, bob));
        assert_eq!(waiting.budget.held_bytes(), 0, "everything given back");
        assert_eq!(waiting.budget.refusals().share, 2);
    }

    #[test]
    fn parts_left_unread_are_given_back_when_the_answer_is_dropped() {
        let waiting = Waiting::new(default_budget());
        let unread = wait(&waiting, "alice", "a").expect("a wait");
        waiting.deliver("a", chunk(1_000));
        assert_eq!(waiting.budget.held_bytes(), 1_000);
        drop(unread);
        assert_eq!(waiting.budget.held_bytes(), 0);
        waiting.deliver("a", chunk(1_000));
        assert_eq!(
            waiting.budget.held_bytes(),
            0,
            "nothing kept for a gone client"
        );
    }
}
