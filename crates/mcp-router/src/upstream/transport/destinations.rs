//! Where the gateway may connect for a backend ([`DestinationPolicy`]), checked by a connector
//! wrapper ([`Guarded`]) on the address each TCP connection actually reached.
//!
//! Backend URLs come from untrusted user configurations, so without a policy a tenant could make
//! the gateway call a cloud metadata service or the gateway's own admin listener. Checking the
//! connected peer (not the URL's host) also catches a name that resolves, or is re-bound, to a
//! denied address. The TCP handshake to a denied address happens; nothing is ever sent on it.
//!
//! Precedence, first match wins:
//! 1. the gateway's own listeners (their bound addresses; a listener on `0.0.0.0`/`::` also
//!    matches its port on loopback and on the connection's own local address) and its own
//!    public host name and port ([`own_host`](DestinationPolicy::own_host), e.g.
//!    `auth.public_url`'s): denied;
//! 2. `deny` (CIDR, or host name as written in the URL): denied;
//! 3. `allow`, when not empty: an address or host it lists is allowed, anything else denied;
//! 4. the built-in denials ([`DEFAULT_DENIED`]: link-local and cloud metadata addresses);
//! 5. allowed (loopback and private ranges included).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

/// Addresses denied unless `allow` lists them: IPv4 and IPv6 link-local (which hold the AWS, GCP
/// and Azure metadata services), the AWS IPv6 metadata address, Alibaba's and Oracle's metadata
/// addresses, and Azure's wire server.
pub const DEFAULT_DENIED: &[&str] = &[
    "169.254.0.0/16",
    "fe80::/10",
    "fd00:ec2::254/128",
    "100.100.100.200/32",
    "192.0.0.192/32",
    "168.63.129.16/32",
];

/// Why an allow or deny list entry was refused ([`DestinationPolicy::new`],
/// [`DestinationPolicy::check_entry`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DestinationError {
    /// An address with a prefix length longer than the address.
    #[error("{entry:?}: the prefix length must be 0-{max}")]
    Prefix {
        /// The entry as written (trimmed).
        entry: String,
        /// The longest prefix of the address family (32 or 128).
        max: u8,
    },
    /// Neither an address range nor a host name.
    #[error("{0:?} is neither an address range (CIDR) nor a host name")]
    Unrecognised(String),
}

/// One entry of an allow or deny list.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    /// An address range.
    Net { addr: IpAddr, prefix: u8 },
    /// A host name as written in backend URLs (lower case); `*.example.com` matches subdomains.
    Host(String),
}

impl Rule {
    fn parse(text: &str) -> Result<Self, DestinationError> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        if let Ok(addr) = addr.parse::<IpAddr>() {
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let prefix = match prefix {
                None => max,
                Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| {
                    DestinationError::Prefix {
                        entry: text.to_owned(),
                        max,
                    }
                })?,
            };
            return Ok(Self::Net {
                addr: addr.to_canonical(),
                prefix,
            });
        }
        let name = text.strip_prefix("*.").unwrap_or(text);
        let valid = prefix.is_none()
            && !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'));
        if valid {
            Ok(Self::Host(text.to_ascii_lowercase()))
        } else {
            Err(DestinationError::Unrecognised(text.to_owned()))
        }
    }

    fn matches(&self, host: &str, ip: IpAddr) -> bool {
        match self {
            Self::Net { addr, prefix } => in_net(ip, *addr, *prefix),
            Self::Host(name) => match name.strip_prefix("*.") {
                Some(suffix) => host
                    .strip_suffix(suffix)
                    .is_some_and(|rest| rest.ends_with('.')),
                None => host == name,
            },
        }
    }
}

fn in_net(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(ip), IpAddr::V4(net)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

/// The operator's policy for backend destinations (see the module docs for the precedence).
///
/// Clones share the set of the gateway's own listeners, which is filled once they are bound
/// ([`set_own_listeners`](Self::set_own_listeners)), and the allow and deny lists, which a
/// reload replaces ([`replace_lists`](Self::replace_lists)).
#[derive(Clone, Debug)]
pub struct DestinationPolicy {
    lists: Arc<ArcSwap<Lists>>,
    defaults: Vec<Rule>,
    own: Arc<RwLock<Vec<SocketAddr>>>,
    /// The gateway's own public host names (lower case) and ports.
    own_hosts: Vec<(String, u16)>,
}

/// The operator's allow and deny lists.
#[derive(Debug, Default)]
struct Lists {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
}

impl Default for DestinationPolicy {
    /// Only the built-in denials.
    fn default() -> Self {
        Self {
            lists: Arc::default(),
            defaults: DEFAULT_DENIED
                .iter()
                .filter_map(|r| Rule::parse(r).ok())
                .collect(),
            own: Arc::default(),
            own_hosts: Vec::new(),
        }
    }
}

impl DestinationPolicy {
    /// The policy with `allow` and `deny` lists (CIDRs, addresses or host names).
    ///
    /// # Errors
    ///
    /// The first entry that is neither, with the reason.
    pub fn new(allow: &[String], deny: &[String]) -> Result<Self, DestinationError> {
        let parse = |list: &[String]| -> Result<Vec<Rule>, DestinationError> {
            list.iter().map(|r| Rule::parse(r)).collect()
        };
        Ok(Self {
            lists: Arc::new(ArcSwap::from_pointee(Lists {
                allow: parse(allow)?,
                deny: parse(deny)?,
            })),
            ..Self::default()
        })
    }

    /// Takes `other`'s allow and deny lists, for this policy and every clone of it (the
    /// connectors that check each new connection): a reload of the operator's lists. Connections
    /// already open stay; the built-in denials and the gateway's own listeners and names stay
    /// this policy's.
    pub fn replace_lists(&self, other: &DestinationPolicy) {
        self.lists.store(other.lists.load_full());
    }

    /// Checks one list entry (for configuration validation).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn check_entry(entry: &str) -> Result<(), DestinationError> {
        Rule::parse(entry).map(|_| ())
    }

    /// Records the addresses the gateway's listeners are bound to: connections there are refused.
    pub fn set_own_listeners(&self, addrs: impl IntoIterator<Item = SocketAddr>) {
        let mut own = self
            .own
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        own.clear();
        own.extend(addrs);
    }

    /// Denies backend connections to `host` on `port`, the name and port clients reach this
    /// gateway by (its public URL's): whatever `allow` says, as its own listeners are. Behind a
    /// load balancer or TLS proxy the listeners' addresses are not what that name resolves to,
    /// so the name is checked as written in the URL. An address (`[::1]`, `10.0.0.5`) is
    /// compared as written too. Other services behind the same name on the same port (a
    /// path-routed ingress) are denied with it: give them another name or port.
    pub fn own_host(mut self, host: &str, port: u16) -> Self {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        if !host.is_empty() && !self.own_hosts.contains(&(host.clone(), port)) {
            self.own_hosts.push((host, port));
        }
        self
    }

    /// Whether a connection for URL host `host` that reached `peer` from `local` is allowed.
    pub fn allows(&self, host: &str, peer: SocketAddr, local: SocketAddr) -> bool {
        let ip = peer.ip().to_canonical();
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if self.is_own(ip, peer.port(), local.ip().to_canonical())
            || self
                .own_hosts
                .iter()
                .any(|(own, port)| *port == peer.port() && own == host.trim_end_matches('.'))
        {
            return false;
        }
        let lists = self.lists.load();
        if lists.deny.iter().any(|r| r.matches(&host, ip)) {
            return false;
        }
        if !lists.allow.is_empty() && !lists.allow.iter().any(|r| r.matches(&host, ip)) {
            return false;
        }
        // A built-in denial (link-local, metadata) is lifted only by an address rule that covers
        // the connected address: a host-name rule does not, since whoever controls that name's
        // DNS could point it at the metadata service.
        let lifted = lists
            .allow
            .iter()
            .any(|r| matches!(r, Rule::Net { .. }) && r.matches(&host, ip));
        lifted || !self.defaults.iter().any(|r| r.matches(&host, ip))
    }

    fn is_own(&self, ip: IpAddr, port: u16, local: IpAddr) -> bool {
        let own = self
            .own
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        own.iter().any(|listener| {
            let bound = listener.ip().to_canonical();
            listener.port() == port
                && (bound == ip || (bound.is_unspecified() && (ip.is_loopback() || ip == local)))
        })
    }
}

/// A connection refused by the [`DestinationPolicy`]; the router reports it as
/// "destination not allowed".
#[derive(Debug, thiserror::Error)]
#[error("destination not allowed")]
pub(crate) struct DestinationDenied;

/// An [`HttpConnector`] whose connections are checked against a [`DestinationPolicy`].
#[derive(Clone, Debug)]
pub(crate) struct Guarded {
    inner: HttpConnector,
    policy: DestinationPolicy,
}

impl Guarded {
    pub(crate) fn new(inner: HttpConnector, policy: DestinationPolicy) -> Self {
        Self { inner, policy }
    }
}

impl Service<Uri> for Guarded {
    type Response = TokioIo<TcpStream>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let host = uri.host().unwrap_or_default().to_owned();
        let connecting = self.inner.call(uri);
        let policy = self.policy.clone();
        Box::pin(async move {
            let io = connecting.await?;
            let stream = io.inner();
            let (peer, local) = (stream.peer_addr()?, stream.local_addr()?);
            if policy.allows(&host, peer, local) {
                Ok(io)
            } else {
                tracing::warn!(%host, %peer, "backend destination refused by the operator's policy");
                Err(Box::new(DestinationDenied) as Self::Error)
            }
        })
    }
}

/// Whether `error` (or one of its sources) is a [`DestinationDenied`].
pub(crate) fn is_denied(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.is::<DestinationDenied>() {
            return true;
        }
        current = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("socket address")
    }

    #[test]
    fn defaults_deny_link_local_and_metadata_only() {
        let policy = DestinationPolicy::default();
        let local = addr("10.0.0.5:40000");
        for denied in [
            "169.254.169.254:80",
            "[fe80::1]:80",
            "[fd00:ec2::254]:80",
            "100.100.100.200:80",
            "[::ffff:169.254.169.254]:80",
        ] {
            assert!(!policy.allows("h", addr(denied), local), "{denied}");
        }
        for allowed in ["127.0.0.1:80", "10.1.2.3:443", "[::1]:80", "192.168.1.1:80"] {
            assert!(policy.allows("h", addr(allowed), local), "{allowed}");
        }
    }

    #[test]
    fn deny_wins_then_allow_is_a_list() {
        let policy = DestinationPolicy::new(
            &[
                "10.0.0.0/8".into(),
                "169.254.169.254".into(),
                "*.corp.example".into(),
            ],
            &["10.9.0.0/16".into(), "localhost".into()],
        )
        .expect("valid");
        let local = addr("10.0.0.5:40000");
        assert!(policy.allows("x", addr("10.1.1.1:80"), local));
        assert!(!policy.allows("x", addr("10.9.1.1:80"), local));
        assert!(policy.allows("x", addr("169.254.169.254:80"), local));
        assert!(!policy.allows("x", addr("192.168.1.1:80"), local));
        assert!(policy.allows("api.corp.example", addr("192.168.1.1:80"), local));
        assert!(!policy.allows("corp.example", addr("192.168.1.1:80"), local));
        assert!(!policy.allows("LOCALHOST", addr("10.1.1.1:80"), local));
        assert!(
            !policy.allows("evil.corp.example", addr("169.254.1.1:80"), local),
            "a host-name rule never lifts the metadata denial (its DNS may be rebound)"
        );
        assert!(DestinationPolicy::new(&["10.0.0.0/33".into()], &[]).is_err());
        assert!(DestinationPolicy::new(&[], &["not a host".into()]).is_err());
    }

    #[test]
    fn replaced_lists_reach_every_clone_and_keep_the_own_listeners() {
        let policy = DestinationPolicy::default().own_host("gw.example", 443);
        let connector_copy = policy.clone();
        let local = addr("10.0.0.5:40000");
        policy.set_own_listeners([addr("10.0.0.5:8080")]);
        assert!(connector_copy.allows("x", addr("10.9.1.1:80"), local));
        let reloaded = DestinationPolicy::new(&[], &["10.9.0.0/16".into()]).expect("valid");
        policy.replace_lists(&reloaded);
        assert!(!connector_copy.allows("x", addr("10.9.1.1:80"), local));
        assert!(connector_copy.allows("x", addr("10.1.1.1:80"), local));
        assert!(
            !connector_copy.allows("x", addr("10.0.0.5:8080"), local),
            "the gateway's own listener stays denied"
        );
        assert!(!connector_copy.allows("gw.example", addr("10.1.1.1:443"), local));
    }

    #[test]
    fn own_public_host_is_denied_whatever_allow_says() {
        let policy = DestinationPolicy::new(&["gw.example.com".into(), "10.0.0.0/8".into()], &[])
            .expect("policy")
            .own_host("GW.example.com", 443);
        let (peer, local) = (addr("10.0.0.5:443"), addr("10.0.0.9:5000"));
        assert!(!policy.allows("gw.example.com", peer, local));
        assert!(
            policy.allows("gw.example.com", addr("10.0.0.5:8443"), local),
            "another port of the same name"
        );
        assert!(
            !policy.allows("gw.example.com.", peer, local),
            "the root label too"
        );
        assert!(policy.allows("api.example.com", peer, local), "the control");
        assert!(
            policy.allows("10.0.0.5", peer, local),
            "an address is not the name"
        );
        let clone = policy.clone();
        assert!(
            !clone.allows("gw.example.com", peer, local),
            "clones keep it"
        );
    }

    #[test]
    fn own_listeners_are_denied_by_bound_address() {
        let policy = DestinationPolicy::default();
        policy.set_own_listeners([addr("127.0.0.1:7001"), addr("0.0.0.0:7002")]);
        let local = addr("10.0.0.5:40000");
        assert!(!policy.allows("h", addr("127.0.0.1:7001"), local));
        assert!(policy.allows("h", addr("127.0.0.2:7001"), local));
        assert!(policy.allows("h", addr("127.0.0.1:7003"), local));
        assert!(!policy.allows("h", addr("127.0.0.3:7002"), local));
        assert!(!policy.allows("h", addr("10.0.0.5:7002"), local));
        assert!(policy.allows("h", addr("10.0.0.6:7002"), local));
    }
}
