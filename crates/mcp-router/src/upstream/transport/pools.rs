//! [`ScopedPools`]: one keep-alive connection pool per credential scope.
//!
//! A pooled connection is state that outlives a call, so it follows the isolation rule (book:
//! docs/src/architecture.md): a connection opened for one scope only ever carries that scope's
//! requests. One tenant's idle connections are never another tenant's next call, and a tenant
//! that opens many connections fills only its own pools: each pool keeps at most
//! [`MAX_IDLE_PER_SCOPE`] idle connections for [`IDLE_TIMEOUT`], and the pools themselves sit in
//! a [`ScopedTable`] with the same per-principal share as the other upstream tables.
//!
//! A backend stack keeps the pool it was built with (its calls do no lookup). Should the table
//! drop that pool's entry meanwhile, the scope's rarer exchanges get a new pool: two pools of one
//! scope for a while, each still that scope's alone.

use std::time::Duration;

use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mcp_core::tls::HttpsConnector;

use super::HttpClient;
use super::destinations::Guarded;
use crate::upstream::scope::CredentialScope;
use crate::upstream::scoped_table::ScopedTable;

/// Most idle keep-alive connections one scope keeps to its backend address; more are closed
/// when their exchange ends. A scope never holds more idle connections than it had calls in
/// flight at once, so this only trims what a burst leaves behind (the timer closes the rest
/// after [`IDLE_TIMEOUT`]). It is not lower because a busy scope's in-flight count swings
/// under load: at 32, 64 closed-loop clients closed and reopened connections all the time
/// (5.5 instead of 4.1-4.5 system calls per call; book: docs/src/performance.md).
pub(crate) const MAX_IDLE_PER_SCOPE: usize = 256;
/// How long an idle keep-alive connection is kept (closed by the pool's timer).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The keep-alive pools of one router, one per credential scope.
pub(crate) struct ScopedPools {
    connector: HttpsConnector<Guarded>,
    pools: ScopedTable<CredentialScope, HttpClient>,
}

impl ScopedPools {
    /// Pools connecting through `connector` (TLS, destination guard and connect timeout are
    /// its), at most `per_principal` scopes of one principal and `total` in all; a pool nobody
    /// used within `idle` may be dropped for another.
    pub(crate) fn new(
        connector: HttpsConnector<Guarded>,
        per_principal: usize,
        total: usize,
        idle: Duration,
    ) -> Self {
        Self {
            connector,
            pools: ScopedTable::new(per_principal, total, idle),
        }
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
        Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(MAX_IDLE_PER_SCOPE)
            .build::<_, Full<bytes::Bytes>>(self.connector.clone())
    }
}
