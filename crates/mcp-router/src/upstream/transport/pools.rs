//! [`ScopedPools`]: one keep-alive connection pool per credential scope.
//!
//! A pooled connection is state that outlives a call, so it follows the isolation rule (book:
//! docs/src/architecture.md): a connection opened for one scope only ever carries that scope's
//! requests. One tenant's idle connections are never another tenant's next call, and a tenant
//! that opens many connections fills only its own pools: each pool (each lane of it, below)
//! keeps at most [`MAX_IDLE_PER_SCOPE`] idle connections for [`IDLE_TIMEOUT`], and the pools
//! themselves sit in a [`ScopedTable`] with the same per-principal share as the other upstream
//! tables.
//!
//! A backend stack keeps the pool it was built with (its calls do no lookup). Should the table
//! drop that pool's entry meanwhile, the scope's rarer exchanges get a new pool: two pools of one
//! scope for a while, each still that scope's alone.
//!
//! A scope's pool may have several lanes (`UpstreamOptions::pool_lanes`): a server that runs one
//! single-threaded runtime per thread gives each thread a lane ([`set_pool_lane`]), so that a
//! call's upstream connection is one its own thread opened and drives, not another thread's
//! (which would wake that thread twice per call). Lanes split one scope's pool; they never join
//! two scopes.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::VIA;
use http::{HeaderValue, Request};
use http_body_util::Full;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mcp_core::tls::HttpsConnector;

use super::destinations::Guarded;
use crate::upstream::scope::CredentialScope;
use crate::upstream::scoped_table::ScopedTable;

/// Most idle keep-alive connections one scope keeps to its backend address (per lane); more are closed
/// when their exchange ends. A scope never holds more idle connections than it had calls in
/// flight at once, so this only trims what a burst leaves behind (the timer closes the rest
/// after [`IDLE_TIMEOUT`]). It is not lower because a busy scope's in-flight count swings
/// under load: at 32, 64 closed-loop clients closed and reopened connections all the time
/// (5.5 instead of 4.1-4.5 system calls per call; book: docs/src/performance.md).
pub(crate) const MAX_IDLE_PER_SCOPE: usize = 256;
/// How long an idle keep-alive connection is kept (closed by the pool's timer).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

thread_local! {
    /// This thread's lane ([`set_pool_lane`]); 0 when never set.
    static LANE: Cell<usize> = const { Cell::new(0) };
}

/// Makes the calling thread's upstream requests use keep-alive lane `lane` (modulo the router's
/// `UpstreamOptions::pool_lanes`) of every scope's pool. For servers that run one
/// single-threaded runtime per thread (the gateway's `runtime.mode = "thread-per-core"`): call it
/// once at the start of each serving thread with the thread's index. Threads that never call it
/// use lane 0; with one lane (the default) it has no effect.
pub fn set_pool_lane(lane: usize) {
    LANE.with(|current| current.set(lane));
}

/// One credential scope's keep-alive pool: hyper-util's pooled client, one per lane, each built
/// when its lane first sends (a scope only one thread calls holds one).
#[derive(Clone)]
pub(crate) struct HttpClient {
    inner: Arc<Lanes>,
}

struct Lanes {
    connector: HttpsConnector<Guarded>,
    /// This deployment's `Via` entry, appended to every request (book: docs/src/security.md,
    /// "Loops").
    via: Option<HeaderValue>,
    /// Boxed: a lane never used costs 16 bytes, not a whole client (many scopes times one lane
    /// per thread adds up: 1 KiB per scope at 64 threads).
    lanes: Box<[OnceLock<Box<Pooled>>]>,
}

type Pooled = Client<HttpsConnector<Guarded>, Full<Bytes>>;

impl HttpClient {
    fn new(connector: HttpsConnector<Guarded>, via: Option<HeaderValue>, lanes: usize) -> Self {
        Self {
            inner: Arc::new(Lanes {
                connector,
                via,
                lanes: (0..lanes.max(1)).map(|_| OnceLock::new()).collect(),
            }),
        }
    }

    /// Sends `request`, marked with this deployment's `Via` entry, on a keep-alive connection of
    /// the calling thread's lane.
    pub(crate) fn request(&self, mut request: Request<Full<Bytes>>) -> ResponseFuture {
        let Lanes {
            connector,
            via,
            lanes,
        } = &*self.inner;
        if let Some(via) = via {
            request.headers_mut().append(VIA, via.clone());
        }
        let lane = match lanes.len() {
            1 => 0,
            count => LANE.with(Cell::get) % count,
        };
        lanes[lane]
            .get_or_init(|| {
                Box::new(
                    Client::builder(TokioExecutor::new())
                        .pool_timer(TokioTimer::new())
                        .pool_idle_timeout(IDLE_TIMEOUT)
                        .pool_max_idle_per_host(MAX_IDLE_PER_SCOPE)
                        .build(connector.clone()),
                )
            })
            .request(request)
    }
}

/// The keep-alive pools of one router, one per credential scope.
pub(crate) struct ScopedPools {
    connector: HttpsConnector<Guarded>,
    via: Option<HeaderValue>,
    /// Lanes of each scope's pool (at least 1).
    lanes: usize,
    pools: ScopedTable<CredentialScope, HttpClient>,
}

impl ScopedPools {
    /// Pools of `lanes` lanes connecting through `connector` (TLS, destination guard and
    /// connect timeout are its), at most `per_principal` scopes of one principal and `total` in
    /// all; a pool nobody used within `idle` may be dropped for another.
    pub(crate) fn new(
        connector: HttpsConnector<Guarded>,
        lanes: usize,
        per_principal: usize,
        total: usize,
        idle: Duration,
    ) -> Self {
        Self {
            connector,
            via: None,
            lanes: lanes.max(1),
            pools: ScopedTable::new("connection_pools", per_principal, total, idle),
        }
    }

    /// The budget the pools draw from (a slot per credential scope).
    pub(crate) fn budget(&self) -> &mcp_core::Budget {
        self.pools.budget()
    }

    /// Every request through these pools carries `via` (this deployment's `Via` entry).
    pub(crate) fn marking(mut self, via: HeaderValue) -> Self {
        self.via = Some(via);
        self
    }

    /// The client whose pool belongs to `scope`. When the table has no room for the scope (its
    /// principal holds nothing it could give back), the client is this call's alone: its
    /// connection closes when the call ends, and nothing is shared.
    pub(crate) fn client(&self, scope: &CredentialScope) -> HttpClient {
        if let Some(client) = self.pools.get(scope) {
            return client;
        }
        let built = self.build();
        self.pools
            .get_or_insert_with(scope, &scope.principal, || built.clone())
            .value
            .unwrap_or(built)
    }

    fn build(&self) -> HttpClient {
        HttpClient::new(self.connector.clone(), self.via.clone(), self.lanes)
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use http::HeaderMap;
    use http_body_util::BodyExt;
    use mcp_config_store::BackendConfig;
    use mcp_core::{Era, Principal};
    use mcp_test_backends::{BackendSpec, TestBackend};
    use serde_json::value::RawValue;

    use super::*;
    use crate::upstream::transport::build_connector;
    use crate::upstream::{DestinationPolicy, Target};

    /// One `ping` through `client` on this thread's lane; the peer the backend saw.
    async fn ping(client: &HttpClient, backend: &TestBackend) -> SocketAddr {
        let request = Request::post(backend.url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(Full::new(Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            )))
            .expect("request");
        let response = client.request(request).await.expect("backend answers");
        // Read to the end: only then is the connection idle again.
        let _ = response.into_body().collect().await.expect("body");
        backend.requests().last().expect("recorded").peer
    }

    /// The peers each lane's calls came over, calling lanes 0 and 1 in turn from one thread.
    async fn peers_by_lane(lanes: usize, backend: &TestBackend) -> [Vec<SocketAddr>; 2] {
        let caps = RawValue::from_string("{}".into()).expect("raw");
        let headers = HeaderMap::new();
        let principal = Principal::new("iss", "alice");
        let config: BackendConfig =
            serde_json::from_str(&format!(r#"{{"url":"{}"}}"#, backend.url())).expect("config");
        let target = Target::new("b", &config, &headers, &principal, &caps, None, Era::Legacy);
        let scope = crate::upstream::Client::scope(&target, &backend.url());
        let pools = ScopedPools::new(
            build_connector(
                Duration::from_secs(5),
                DestinationPolicy::default(),
                &mcp_core::tls::ClientTls::default(),
            ),
            lanes,
            4,
            16,
            Duration::from_secs(60),
        );
        let client = pools.client(&scope);
        let mut peers = [Vec::new(), Vec::new()];
        for _ in 0..4 {
            for (lane, seen) in peers.iter_mut().enumerate() {
                set_pool_lane(lane);
                seen.push(ping(&client, backend).await);
            }
        }
        set_pool_lane(0);
        peers
    }

    /// With two lanes, a thread on lane 0 and a thread on lane 1 never share a keep-alive
    /// connection, and each reuses its own. Control: with one lane, the same calls do share.
    #[tokio::test]
    async fn each_lane_keeps_its_own_connections() {
        let backend = TestBackend::start(BackendSpec::legacy("alpha")).await;
        let [zero, one] = peers_by_lane(2, &backend).await;
        let shared: Vec<_> = zero.iter().filter(|peer| one.contains(peer)).collect();
        assert!(
            shared.is_empty(),
            "lanes shared {shared:?}: {zero:?} / {one:?}"
        );
        let reused = |peers: &[SocketAddr]| peers.iter().skip(1).any(|p| peers[0] == *p);
        assert!(
            reused(&zero) && reused(&one),
            "each lane reuses its connection: {zero:?} / {one:?}"
        );

        let [zero, one] = peers_by_lane(1, &backend).await;
        assert!(
            zero.iter().any(|peer| one.contains(peer)),
            "control: one lane is one pool: {zero:?} / {one:?}"
        );
    }
}
