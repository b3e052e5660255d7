//! This node's identity in the ids it mints for others to see ([`new_node_id`], [`IdMint`]).
//!
//! Several gateway nodes, and each restart of one, may act on the *same* upstream 2025 session
//! (the downstream session record names it, and any node adopts it) and serve the same
//! downstream session. A backend routes answers and progress by request id and progress token
//! within its session, and a client resumes a stream by its event id: an id numbered per process
//! would be minted twice on one session (node A's `1` and node B's `1`), and the second request
//! would take the first one's answer. So every id a node mints for a peer that another node may
//! also talk to carries this node's random id (book: docs/src/several-nodes.md, "Which ids are
//! unique where"):
//!
//! - upstream request ids (`<node>-<n>`) and progress tokens (`gw-<node>-<n>`), by [`IdMint`];
//! - SSE event ids of 2025 sessions' streams (`<node>.<stream>:<n>`, `crate::replay`);
//! - the gateway's own relayed requests (sealed with the node, `ops::pending`), and the node
//!   bus's channel.
//!
//! A node id is 48 random bits drawn when the router is built, so a restarted process never
//! reuses its predecessor's ids (two of a deployment's node starts share one with a chance of
//! about n² / 2^49: one in 10^8 after 2,000 starts). Ids a node only uses on a connection it
//! alone holds (a stdio process's or an HTTP+SSE link's) are numbered per link instead.

use std::sync::atomic::{AtomicU64, Ordering};

use mcp_core::RequestId;

/// A random node id: 12 lowercase hex digits (no `-` or `.`, which separate it in ids).
pub(crate) fn new_node_id() -> String {
    use aws_lc_rs::rand::SecureRandom;
    let mut bytes = [0u8; 6];
    if aws_lc_rs::rand::SystemRandom::new()
        .fill(&mut bytes)
        .is_err()
    {
        // No system randomness is not worth failing a router over: ids only need to differ
        // between the nodes (and restarts) of one deployment.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        bytes[..4].copy_from_slice(&nanos.to_be_bytes());
        bytes[4..].copy_from_slice(&(std::process::id() as u16).to_be_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Upstream request ids and progress tokens unique across the nodes and restarts of one
/// deployment: this node's id and a counter (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct IdMint {
    node: Box<str>,
    next: AtomicU64,
}

impl IdMint {
    /// A mint for the node `node` (a [`new_node_id`]).
    pub(crate) fn new(node: &str) -> Self {
        Self {
            node: node.into(),
            next: AtomicU64::new(1),
        }
    }

    /// A fresh upstream request id, `"<node>-<n>"`: a string, as JSON-RPC allows and every MCP
    /// SDK accepts (an integer below 2^53 would leave too few random bits to tell nodes apart).
    pub(crate) fn request_id(&self) -> RequestId {
        RequestId::from(self.mint("").as_str())
    }

    /// A fresh progress token for one upstream call, `"gw-<node>-<n>"`.
    pub(crate) fn progress_token(&self) -> String {
        self.mint("gw-")
    }

    fn mint(&self, prefix: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}{}-{n}", self.node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_random_hex() {
        let (a, b) = (new_node_id(), new_node_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 12);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    }

    #[test]
    fn two_nodes_never_mint_the_same_id_or_token() {
        // Two nodes (or a node and its restarted successor) on one upstream session: each
        // counts from 1, and the node id keeps their ids apart.
        let (a, b) = (IdMint::new(&new_node_id()), IdMint::new(&new_node_id()));
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(a.request_id().to_json().into_owned()));
            assert!(seen.insert(b.request_id().to_json().into_owned()));
            assert!(seen.insert(a.progress_token()));
            assert!(seen.insert(b.progress_token()));
        }
    }

    #[test]
    fn ids_name_the_node_and_are_json_strings() {
        let mint = IdMint::new("0123456789ab");
        assert_eq!(mint.request_id().to_json(), r#""0123456789ab-1""#);
        assert_eq!(mint.progress_token(), "gw-0123456789ab-2");
    }
}
