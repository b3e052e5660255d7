//! Loop detection ([`Hops`]): every HTTP request the router sends to a backend says which gateway
//! sent it, and a request that arrives saying so is refused before anything is routed.
//!
//! A backend URL comes from a tenant's configuration. Pointing it at the gateway itself through a
//! forwarder (a TLS proxy, a load balancer, another node) passes the destination policy, which
//! only knows the gateway's own addresses and public host name: each list call would then fan out
//! to itself again, and one client request would hold every connection the gateway may open. So
//! every upstream request carries a standard `Via` entry (RFC 9110 §7.6.3) naming this
//! deployment, `1.1 mcp-gateway-<id>`, after the `Via` entries of the client request it serves,
//! and a request whose `Via` names this deployment is answered HTTP 508 (Loop Detected). Chains
//! through other gateways or proxies are bounded by the number of `Via` entries
//! (`max_hops`). A forwarder that drops `Via` hides a loop; `Via` is an end-to-end header that
//! proxies keep (book: docs/src/security.md, "Loops").
//!
//! The id is one per deployment, not per node: nodes that share a sealing secret derive the same
//! one from it, so a backend URL that leads to another node of the same deployment is a loop too.

use http::header::VIA;
use http::{HeaderMap, HeaderValue};

/// The default most `Via` entries a request may arrive with.
pub(crate) const DEFAULT_MAX_HOPS: usize = 8;

/// The pseudonym prefix of this gateway's `Via` entries.
const PSEUDONYM_PREFIX: &str = "mcp-gateway-";

/// This deployment's mark on its upstream requests and the check of incoming ones.
#[derive(Clone, Debug)]
pub(crate) struct Hops {
    /// `mcp-gateway-<id>`, lower case.
    pseudonym: String,
    /// `1.1 mcp-gateway-<id>`, the entry appended to upstream requests.
    entry: HeaderValue,
    max: usize,
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HopRefusal {
    /// Its `Via` names this deployment: the gateway sent it.
    Loop,
    /// It passed more intermediaries than allowed (the count it arrived with).
    TooMany(usize),
}

impl Hops {
    /// The mark of deployment `id` (letters, digits, `-`, `_` and `.` are kept, anything else
    /// becomes `-`), refusing requests with more than `max` `Via` entries.
    pub(crate) fn new(id: &str, max: usize) -> Self {
        let id: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let pseudonym = format!("{PSEUDONYM_PREFIX}{id}");
        let entry = HeaderValue::from_str(&format!("1.1 {pseudonym}"))
            .unwrap_or_else(|_| HeaderValue::from_static("1.1 mcp-gateway"));
        Self {
            pseudonym,
            entry,
            max,
        }
    }

    /// The id of a deployment whose nodes share `secret`: the same on every node, and telling
    /// nothing about the secret (a digest of it under a label of its own).
    pub(crate) fn id_from_secret(secret: &[u8]) -> String {
        let mut context = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        context.update(b"mcp-gateway hop id\0");
        context.update(secret);
        let digest = context.finish();
        digest.as_ref()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The `Via` entry this deployment appends to its upstream requests.
    pub(crate) fn entry(&self) -> &HeaderValue {
        &self.entry
    }

    /// Whether a request with `headers` may be served: not one this deployment sent, and not past
    /// the most intermediaries.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), HopRefusal> {
        let mut count = 0;
        for value in headers.get_all(VIA) {
            // A value that is not text cannot name us; it still counts as a hop.
            let Ok(text) = value.to_str() else {
                count += 1;
                continue;
            };
            for entry in entries(text) {
                count += 1;
                let received_by = entry.split_ascii_whitespace().nth(1).unwrap_or_default();
                if received_by.eq_ignore_ascii_case(&self.pseudonym) {
                    return Err(HopRefusal::Loop);
                }
            }
        }
        if count > self.max {
            return Err(HopRefusal::TooMany(count));
        }
        Ok(())
    }
}

/// The comma-separated entries of one `Via` value; a comma inside a `(comment)` separates none.
fn entries(text: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    let mut start = 0;
    let mut cuts = Vec::new();
    for (at, byte) in text.bytes().enumerate() {
        match byte {
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                cuts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    cuts.push(&text[start..]);
    cuts.into_iter()
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(VIA, HeaderValue::from_str(value).expect("value"));
        }
        headers
    }

    #[test]
    fn own_entry_is_a_loop_wherever_it_stands() {
        let hops = Hops::new("Node A", 8);
        assert_eq!(hops.entry(), "1.1 mcp-gateway-node-a");
        assert_eq!(hops.check(&HeaderMap::new()), Ok(()));
        assert_eq!(
            hops.check(&via(&["1.1 mcp-gateway-node-a"])),
            Err(HopRefusal::Loop)
        );
        assert_eq!(
            hops.check(&via(&["1.0 fred, 1.1 MCP-Gateway-Node-A (hyper)", "2 lb"])),
            Err(HopRefusal::Loop)
        );
        // Another deployment's entry, or ours in a comment, is not a loop.
        assert_eq!(
            hops.check(&via(&[
                "1.1 mcp-gateway-node-b (not mcp-gateway-node-a, ok)"
            ])),
            Ok(())
        );
    }

    #[test]
    fn hops_are_counted_across_values_and_bounded() {
        let hops = Hops::new("a", 3);
        assert_eq!(hops.check(&via(&["1.1 p, 1.1 q", "1.1 r"])), Ok(()));
        assert_eq!(
            hops.check(&via(&["1.1 p, 1.1 q (a, b, c)", "1.1 r", "1.1 s"])),
            Err(HopRefusal::TooMany(4))
        );
        // Empty list elements are not hops (RFC 9110 §5.6.1).
        assert_eq!(hops.check(&via(&[" , 1.1 p,, "])), Ok(()));
    }

    #[test]
    fn the_id_from_a_secret_is_shared_and_opaque() {
        let a = Hops::id_from_secret(b"0123456789abcdef0123456789abcdef");
        assert_eq!(a, Hops::id_from_secret(b"0123456789abcdef0123456789abcdef"));
        assert_ne!(a, Hops::id_from_secret(b"another secret another secret 12"));
        assert_eq!(a.len(), 12);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
