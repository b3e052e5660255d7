//! The upstream side: one pooled HTTP client for every backend, backend era detection (probe once,
//! cache per credential scope, re-probe after failures), upstream sessions for legacy backends,
//! and sending one JSON-RPC request to a backend in the caller's era when the backend speaks it
//! (a dual-era backend gets 2025 sessions for 2025 callers), else in the backend's.
//!
//! Besides streamable HTTP, a backend may be a stdio child process ([`stdio`]) or speak the
//! deprecated 2024-11-05 HTTP+SSE transport ([`sse`]): `transport = "sse"` selects it, and with
//! the default transport the spec's backwards-compatibility rule applies — a legacy `initialize`
//! POST answered 400, 404 or 405 makes the gateway GET the URL, and an `endpoint` event marks the
//! URL as SSE until `era_ttl` passes. Both carry many callers over one connection ([`link`]).

mod error;
mod exchange;
mod get_stream;
mod link;
mod meta;
mod request;
mod scope;
mod scoped_table;
mod session;
mod sse;
mod stack;
mod stdio;
mod transport;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use mcp_breaker::{BreakerConfig, BreakerRegistry, CircuitBreaker, Outcome, Permit};
use mcp_config_store::{BackendConfig, Transport};
use mcp_core::headers::{
    MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, MCP_SESSION_ID, encode_header_value,
};
use mcp_core::tls::ClientTls;
use mcp_core::{Envelope, Era, MessageKind, Principal, ProtocolVersion, RawObject, RequestId};
use mcp_fallback::ToolHints;
use opentelemetry::KeyValue;
use opentelemetry::context::FutureExt as _;
use serde_json::value::RawValue;
use tokio::sync::OnceCell;
use tower_service::Service;
use url::Url;

use crate::telemetry::{self, ClientOp};

pub use error::UpstreamError;
pub use exchange::{UpstreamReply, UpstreamRequest};
pub(crate) use link::LinkWriter;
pub(crate) use meta::{CLIENT_CAPABILITIES, PROGRESS_TOKEN, PROTOCOL_VERSION};
pub(crate) use scope::CredentialScope;
pub(crate) use scoped_table::ScopedTable;
pub(crate) use session::LegacySession;
pub(crate) use stack::BackendLayer;
pub use stack::BackendService;
pub use stdio::catalog::{Refusal, StdioRules, StdioServer, is_loader_variable};
pub(crate) use transport::MessageStream;
pub use transport::{DEFAULT_DENIED, DestinationError, DestinationPolicy};

use request::Outgoing;
use scope::digest_of as capability_digest;
use session::{SessionKey, SessionTable};
use transport::{Answer, HttpClient};

/// Tuning of the upstream side.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UpstreamOptions {
    /// TCP connect timeout for every backend.
    pub connect_timeout: Duration,
    /// How long a detected backend era is trusted before it is probed again.
    pub era_ttl: Duration,
    /// Most upstream legacy sessions kept at once.
    pub max_sessions: usize,
    /// Most upstream legacy sessions one principal holds; over it the principal's oldest one is
    /// given up. The same share bounds each principal's era, breaker and HTTP+SSE-discovery
    /// entries.
    pub max_sessions_per_principal: usize,
    /// Circuit breaker defaults for every backend URL; a backend's `breaker` object overrides
    /// single keys.
    pub breaker: BreakerConfig,
    /// What stdio backends may run: the operator's catalog, the allow-list of free-form commands,
    /// whether config authors are trusted. The default starts no stdio backend.
    pub stdio: StdioRules,
    /// Where backend connections may go (default: the built-in denials only).
    pub destinations: DestinationPolicy,
    /// Most stdio backend processes running at once.
    pub max_stdio_processes: usize,
    /// TLS towards `https` backends: the platform's roots by default; add a private CA
    /// ([`ClientTls::add_roots_pem`]) or a client certificate
    /// ([`ClientTls::client_certificate_pem`]) for backends behind a private PKI or requiring
    /// mutual TLS. Settings rustls refuses make every `https` backend fail (logged at startup).
    pub tls: ClientTls,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            era_ttl: Duration::from_secs(300),
            max_sessions: 10_000,
            max_sessions_per_principal: 64,
            breaker: BreakerConfig::default(),
            stdio: StdioRules::default(),
            destinations: DestinationPolicy::default(),
            max_stdio_processes: 64,
            tls: ClientTls::new(),
        }
    }
}

/// One backend as seen by one downstream request.
pub(crate) struct Target<'a> {
    /// The backend's configured name (for logs).
    pub(crate) name: &'a str,
    /// Its configuration.
    pub(crate) config: &'a BackendConfig,
    /// The client's request headers (for the header policy and trace context).
    pub(crate) downstream: &'a HeaderMap,
    /// The authenticated caller.
    pub(crate) principal: &'a Principal,
    /// The client's capabilities (raw JSON object).
    pub(crate) client_caps: &'a RawValue,
    /// The client's `_meta` (modern requests).
    pub(crate) meta: Option<&'a RawValue>,
    /// The era the client speaks: a backend that speaks both is talked to in this one.
    pub(crate) era: Era,
}

impl<'a> Target<'a> {
    /// A backend of a downstream 2025 session, for work outside a call of the session's own
    /// (following, releasing or posting into its upstream session): no `_meta`, the 2025 era.
    pub(crate) fn of_session(
        name: &'a str,
        config: &'a BackendConfig,
        downstream: &'a HeaderMap,
        principal: &'a Principal,
        client_caps: &'a RawValue,
    ) -> Self {
        Self {
            name,
            config,
            downstream,
            principal,
            client_caps,
            meta: None,
            era: Era::Legacy,
        }
    }
}

/// One JSON-RPC request to send.
pub(crate) struct Call<'a> {
    pub(crate) method: &'a str,
    /// Params without `_meta` (the upstream side writes `_meta` for the backend's era).
    pub(crate) params: RawObject<'a>,
    /// The upstream item name or URI, for `Mcp-Name`.
    pub(crate) name: Option<&'a str>,
    /// The gateway's progress token for this call, when the client asked for progress.
    pub(crate) progress_token: Option<&'a str>,
    /// The tool's `readOnlyHint`/`idempotentHint` (for `tools/call`): whether it may be sent to a
    /// replica after the primary might have received it (`mcp_fallback::may_replay`).
    pub(crate) hints: ToolHints,
    /// Headers plugins add to this request (`mcp_plugins::UpstreamExtras`).
    pub(crate) headers: Option<&'a HeaderMap>,
}

/// What a backend speaks towards one credential scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Speaks {
    /// 2026-07-28 and 2025: each caller is served in its own era.
    Both,
    /// 2026-07-28 only, or 2025 without sessions (an `initialize` answered without an
    /// `Mcp-Session-Id`, like the TypeScript SDK 2.x's per-request 2025 serving): such a 2025
    /// side can carry neither requests inside a call nor subscriptions, which the bridge from
    /// 2026-07-28 does carry. 2025 callers are bridged.
    ModernOnly,
    /// 2025 only: 2026-07-28 callers are bridged.
    LegacyOnly,
}

/// One era-cache entry. `server/discover` tells a modern backend from a 2025-only one at once;
/// whether a modern backend speaks 2025 too is found out by the first 2025 caller's
/// `initialize` (its `supportedVersions` name modern revisions only, and probing eagerly would
/// open an upstream session for every scope, wanted or not).
#[derive(Debug)]
struct EraEntry {
    modern: bool,
    /// Whether 2025 callers get 2025 sessions: set at once for a 2025-only backend.
    legacy: OnceCell<bool>,
    probed_at: Instant,
}

impl EraEntry {
    /// What the backend speaks, `None` while a modern backend's 2025 side is untried.
    fn speaks(&self) -> Option<Speaks> {
        match (self.modern, self.legacy.get()) {
            (false, _) => Some(Speaks::LegacyOnly),
            (true, Some(true)) => Some(Speaks::Both),
            (true, Some(false)) => Some(Speaks::ModernOnly),
            (true, None) => None,
        }
    }
}

/// The era one call is sent in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Modern,
    /// 2025, `only` when the backend speaks nothing else (then an `initialize` refused may mean
    /// the HTTP+SSE transport).
    Legacy {
        only: bool,
    },
}

type EraSlot = Arc<OnceCell<EraEntry>>;

/// The breaker config of one breaker key: the defaults merged with the backend's overrides.
type MergedBreakerConfig = BreakerConfig;

/// Most entries of the era, breaker and HTTP+SSE-discovery tables (each principal holds at most
/// `max_sessions_per_principal` of them).
const MAX_SCOPED_ENTRIES: usize = 100_000;
/// How long an upstream session, breaker or HTTP+SSE discovery nobody uses is kept: a full
/// table drops such entries (of anyone) before it refuses a newcomer.
const SCOPED_IDLE: Duration = Duration::from_secs(30 * 60);

/// The upstream side of a router: the transport client and a stack per backend scope.
///
/// Dereferences to the [`Client`] for everything that is not one call (sessions, links, describing).
pub(crate) struct Upstream {
    client: Arc<Client>,
    /// One backend stack per breaker key of the primary address (see [`breaker_key`]).
    stacks: ScopedTable<String, Arc<stack::BackendStack>>,
    /// The integrator's layer around every backend stack.
    layer: Option<BackendLayer>,
}

impl std::ops::Deref for Upstream {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// The transport client shared by every backend stack of a router: pooled HTTP connections, eras,
/// upstream sessions, stdio processes and HTTP+SSE connections, all per credential scope.
pub(crate) struct Client {
    http: HttpClient,
    options: UpstreamOptions,
    /// Backend eras per credential scope: a tenant's probe (made with its credentials) and its
    /// failures (which forget the era) only ever touch its own entries.
    eras: ScopedTable<CredentialScope, EraSlot>,
    sessions: SessionTable,
    ids: AtomicU64,
    client_info: Box<RawValue>,
    breakers: BreakerRegistry,
    hubs: get_stream::Hubs,
    /// Merged breaker config per breaker key, so overrides are not re-merged on every call;
    /// also what bounds the breakers per principal (an evicted key's breaker leaves the registry).
    breaker_configs: ScopedTable<String, MergedBreakerConfig>,
    /// Child processes of stdio backends.
    stdio: stdio::StdioPool,
    /// Connections to HTTP+SSE (2024-11-05) backends.
    sse: sse::SsePool,
    /// Scopes whose URL was found to speak HTTP+SSE by the fallback rule, and when.
    sse_urls: ScopedTable<CredentialScope, Instant>,
    /// Whether `sse_urls` ever held an entry: until then no call takes its lock (every call to an
    /// HTTP backend asks).
    any_sse_url: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

const LEGACY_PROTOCOL: ProtocolVersion = ProtocolVersion::LATEST_LEGACY;

impl Upstream {
    pub(crate) fn new(
        options: UpstreamOptions,
        client_info: Box<RawValue>,
        layer: Option<BackendLayer>,
    ) -> Self {
        let stacks = ScopedTable::new(
            options.max_sessions_per_principal,
            MAX_SCOPED_ENTRIES,
            SCOPED_IDLE,
        );
        Self {
            client: Arc::new(Client::new(options, client_info)),
            stacks,
            layer,
        }
    }

    /// Sends `call` to the backend through its stack in the caller's scope: the primary address
    /// first, then the replicas in order when the primary fails and the call may go elsewhere (it
    /// never reached the primary, or it is replay-safe). Each address has its own circuit
    /// breaker: an open one fails at once without touching the network. The first failure is
    /// reported when every address fails.
    pub(crate) async fn send(
        &self,
        target: &Target<'_>,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let mut op = ClientOp::start(call.method, call.name, target.name);
        let cx = op.context();
        let sent = self.exchange(target, call);
        let result = match &cx {
            Some(cx) => sent.with_context(cx.clone()).await,
            None => sent.await,
        };
        match result {
            Ok(mut reply) => {
                ClientOp::annotate(
                    cx.as_ref(),
                    vec![KeyValue::new("jsonrpc.request.id", reply.id.to_string())],
                );
                reply.messages = recording(
                    reply.messages,
                    reply.id.clone(),
                    reply.permit.take(),
                    op,
                    cx,
                );
                Ok(reply)
            }
            Err(e) => {
                op.finish(cx.as_ref(), Some(e.error_type()));
                Err(e)
            }
        }
    }

    /// The scope of `target`'s primary address (see [`Client::primary_scope`]).
    pub(crate) fn primary_scope(target: &Target<'_>) -> CredentialScope {
        Client::primary_scope(target)
    }

    /// [`Self::send`] without its span and metric: one call of the scope's stack.
    async fn exchange(
        &self,
        target: &Target<'_>,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let stack = self.stack(target)?;
        let request = UpstreamRequest::new(target, call, Arc::clone(&stack.config));
        let mut service = stack.service.clone();
        std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
        service.call(request).await
    }

    /// The backend stack of `target`'s scope, built on first use or when its config changed. A
    /// full table (the caller has no share left) builds one for this call only.
    fn stack(&self, target: &Target<'_>) -> Result<Arc<stack::BackendStack>, UpstreamError> {
        let scope = Client::primary_scope(target);
        let key = breaker_key(target, &scope);
        if let Some(stack) = self.stacks.get(&key)
            && *stack.config == *target.config
        {
            return Ok(stack);
        }
        let built = Arc::new(self.client.build_stack(target, self.layer.as_ref())?);
        if self.stacks.replace(&key, Arc::clone(&built)) {
            return Ok(built);
        }
        Ok(self
            .stacks
            .get_or_insert_with(&key, &scope.principal, || Arc::clone(&built))
            .value
            .unwrap_or(built))
    }
}

impl Client {
    fn new(options: UpstreamOptions, client_info: Box<RawValue>) -> Self {
        let stdio = stdio::StdioPool::new(
            options.stdio.clone(),
            options.max_stdio_processes,
            client_info.clone(),
        );
        let http = transport::build_client(
            options.connect_timeout,
            options.destinations.clone(),
            &options.tls,
        );
        Self {
            sse: sse::SsePool::new(http.clone(), client_info.clone()),
            sse_urls: ScopedTable::new(
                options.max_sessions_per_principal,
                MAX_SCOPED_ENTRIES,
                options.era_ttl,
            ),
            any_sse_url: std::sync::atomic::AtomicBool::new(false),
            http,
            sessions: SessionTable::new(options.max_sessions, options.max_sessions_per_principal),
            eras: ScopedTable::new(
                options.max_sessions_per_principal,
                MAX_SCOPED_ENTRIES,
                options.era_ttl,
            ),
            breaker_configs: ScopedTable::new(
                options.max_sessions_per_principal,
                MAX_SCOPED_ENTRIES,
                SCOPED_IDLE,
            ),
            options,
            ids: AtomicU64::new(1),
            client_info,
            breakers: BreakerRegistry::new(),
            hubs: get_stream::Hubs::default(),
            stdio,
        }
    }

    /// A fresh upstream request id, unique in this process so concurrent calls never collide.
    pub(crate) fn next_id(&self) -> RequestId {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        RequestId::from(i64::try_from(n).unwrap_or(i64::MAX))
    }

    /// A fresh progress token for one upstream call.
    pub(crate) fn next_progress_token(&self) -> String {
        format!("gw-{}", self.ids.fetch_add(1, Ordering::Relaxed))
    }

    fn url<'a>(target: &Target<'a>) -> Result<&'a Url, UpstreamError> {
        target.config.url.as_ref().ok_or(UpstreamError::NoUrl)
    }

    fn timeout(target: &Target<'_>) -> Duration {
        Duration::from_millis(target.config.timeout_ms.max(1))
    }

    /// The credential scope of `target` at `address` (a URL, or `stdio:` + its catalog entry or
    /// command).
    pub(crate) fn scope(target: &Target<'_>, address: &str) -> CredentialScope {
        CredentialScope::new(
            address,
            &target.config.headers,
            target.downstream,
            target.principal,
        )
    }

    /// The scope of `target`'s primary address (its URL, or `stdio:` + entry): what per-backend
    /// state outside this module (tool hints, stale answers) is keyed by.
    pub(crate) fn primary_scope(target: &Target<'_>) -> CredentialScope {
        let address = match (&target.config.url, stdio::label(target.config)) {
            (Some(url), _) => url.as_str().to_owned(),
            (None, Some(label)) => format!("stdio:{label}"),
            (None, None) => String::new(),
        };
        Self::scope(target, &address)
    }

    /// The scope's era-cache entry: probed with `server/discover` when unknown or stale. A full
    /// table (no share left) probes without caching.
    async fn era_entry(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<EraSlot, UpstreamError> {
        let slot = {
            let slot = self
                .eras
                .get_or_insert_with(scope, &scope.principal, EraSlot::default)
                .value
                .unwrap_or_default();
            if slot
                .get()
                .is_some_and(|e| e.probed_at.elapsed() > self.options.era_ttl)
            {
                let fresh = EraSlot::default();
                self.eras.replace(scope, Arc::clone(&fresh));
                fresh
            } else {
                slot
            }
        };
        slot.get_or_try_init(|| async {
            let era = self.probe(target, url).await?;
            tracing::debug!(backend = target.name, ?era, "backend era detected");
            let legacy = OnceCell::new();
            if era == Era::Legacy {
                let _ = legacy.set(true);
            }
            Ok::<_, UpstreamError>(EraEntry {
                modern: era == Era::Modern,
                legacy,
                probed_at: Instant::now(),
            })
        })
        .await?;
        Ok(slot)
    }

    /// The era to talk to the backend in for this caller: the caller's own when the backend
    /// speaks it, the other one otherwise. A 2025 caller is the first to find out whether a
    /// modern backend speaks 2025 too: its upstream session is opened here (and kept for its
    /// calls), and a backend that refuses `initialize` is recorded as modern only.
    async fn route(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Route, UpstreamError> {
        let slot = self.era_entry(target, url, scope).await?;
        let Some(entry) = slot.get() else {
            return Err(UpstreamError::Malformed("no era detected"));
        };
        if !entry.modern {
            return Ok(Route::Legacy { only: true });
        }
        if target.era == Era::Modern {
            return Ok(Route::Modern);
        }
        let speaks = match entry.speaks() {
            Some(speaks) => speaks,
            None => match self.session_in(target, url, scope).await {
                Ok((_, session)) if session.id.is_some() => {
                    let _ = entry.legacy.set(true);
                    Speaks::Both
                }
                Ok(_) => {
                    tracing::debug!(
                        backend = target.name,
                        "backend serves 2025 without sessions: 2025 callers are bridged"
                    );
                    let _ = entry.legacy.set(false);
                    Speaks::ModernOnly
                }
                Err(e) if refuses_legacy(&e) => {
                    tracing::debug!(backend = target.name, error = %e, "backend speaks 2026-07-28 only");
                    let _ = entry.legacy.set(false);
                    Speaks::ModernOnly
                }
                Err(e) => return Err(e),
            },
        };
        tracing::trace!(backend = target.name, ?speaks, "era for a 2025 caller");
        Ok(match speaks {
            Speaks::Both => Route::Legacy { only: false },
            Speaks::ModernOnly => Route::Modern,
            Speaks::LegacyOnly => Route::Legacy { only: true },
        })
    }

    /// Forgets the era of a scope whose backend failed, so its next call probes again.
    fn forget_era(&self, scope: &CredentialScope) {
        self.eras.remove(scope);
    }

    /// Sends a modern `server/discover`: a DiscoverResult (or a modern version error) means modern,
    /// any other answer means legacy; no answer at all is an error.
    async fn probe(&self, target: &Target<'_>, url: &Url) -> Result<Era, UpstreamError> {
        let id = self.next_id();
        let meta = meta::modern(None, target.client_caps, &self.client_info, None);
        let mut params = RawObject::new();
        params.set_raw("_meta", meta);
        let body = mcp_core::encode_request(&id, "server/discover", Some(&params.to_raw()));
        let out = Outgoing {
            url,
            body,
            mcp_headers: modern_headers("server/discover", None),
            forward_param_headers: false,
        };
        let request = request::build(out, target.downstream, &target.config.headers);
        let mut answer = transport::exchange(&self.http, request, Self::timeout(target)).await?;
        if answer.status.is_server_error() {
            return Err(UpstreamError::Status(answer.status.as_u16()));
        }
        let Some(Ok(first)) = answer.messages.next().await else {
            return Ok(Era::Legacy);
        };
        Ok(if looks_modern(&first) {
            Era::Modern
        } else {
            Era::Legacy
        })
    }

    /// The primary URL, then the replicas.
    fn urls<'a>(target: &Target<'a>) -> Result<impl Iterator<Item = &'a Url>, UpstreamError> {
        let primary = Self::url(target)?;
        Ok(std::iter::once(primary).chain(target.config.replicas.iter()))
    }

    /// The breaker of one credential scope and the caller's breaker settings: registry key
    /// `<backend name>\0<opaque id>`, so a breaker is never shared between principals, and a
    /// caller's `timeout_ms` or overrides (which decide what counts as a failure) never trip or
    /// reset a breaker that another caller uses. `None` when the backend's `breaker` overrides
    /// are invalid (logged; config validation should have caught them) or the caller has no
    /// breaker share left in a full table.
    fn breaker(&self, target: &Target<'_>, scope: &CredentialScope) -> Option<CircuitBreaker> {
        let key = breaker_key(target, scope);
        let config = match self.breaker_configs.get(&key) {
            Some(config) => config,
            None => {
                let merged = match &target.config.breaker {
                    Some(overrides) => match self.options.breaker.with_overrides(overrides) {
                        Ok(merged) => merged,
                        Err(e) => {
                            tracing::warn!(backend = target.name, error = %e, "invalid breaker overrides; no breaker");
                            return None;
                        }
                    },
                    None => self.options.breaker.clone(),
                };
                let inserted =
                    self.breaker_configs
                        .get_or_insert_with(&key, &scope.principal, || merged);
                for (evicted, _) in inserted.evicted {
                    self.breakers.remove(&evicted);
                }
                inserted.value?
            }
        };
        self.breakers
            .get_or_insert_named(&key, target.name, &config)
            .ok()
    }

    /// The breakers, for metrics and readiness detail.
    pub(crate) fn breakers(&self) -> &BreakerRegistry {
        &self.breakers
    }

    /// One URL in its era. For a legacy backend whose session expired (404), the session is
    /// re-initialised once and the call retried: the backend never executed it.
    async fn send_at(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        if self.speaks_sse(target, scope) {
            return self.sse.send(target, url, scope, call).await;
        }
        let result = match self.route(target, url, scope).await {
            Err(e) => Err(e),
            Ok(Route::Modern) => self.send_modern(target, url, call).await,
            Ok(Route::Legacy { only }) => match self.send_legacy(target, url, scope, call).await {
                Err(UpstreamError::SessionExpired) => {
                    self.send_legacy(target, url, scope, call).await
                }
                Err(e) if only => match self.fall_back_to_sse(target, url, scope, e).await {
                    Ok(()) => self.sse.send(target, url, scope, call).await,
                    Err(e) => Err(e),
                },
                other => other,
            },
        };
        if let Err(e) = &result
            && !matches!(
                e,
                UpstreamError::SessionExpired | UpstreamError::TooManySessions
            )
        {
            self.forget_era(scope);
        }
        result
    }

    /// Whether the backend carries every caller over one link of the gateway's own (a stdio
    /// process or an HTTP+SSE connection): such a backend has no `subscriptions/listen` and no
    /// upstream session to show callers.
    pub(crate) fn is_linked(&self, target: &Target<'_>) -> bool {
        stdio::label(target.config).is_some()
            || target.config.transport == Transport::Sse
            // The scope (a digest) only when some scope was found to speak HTTP+SSE.
            || (self.any_sse_url.load(Ordering::Acquire)
                && Self::url(target)
                    .is_ok_and(|url| self.speaks_sse(target, &Self::scope(target, url.as_str()))))
    }

    /// The link of a linked backend (see [`is_linked`](Self::is_linked)) as the caller's 2025
    /// GET stream follows it; `None` for other backends, or when the link cannot be had.
    pub(crate) async fn link_events(&self, target: &Target<'_>) -> Option<LinkEvents> {
        if stdio::label(target.config).is_some() {
            return self.stdio.listen(target).await.ok();
        }
        if !self.is_linked(target) {
            return None;
        }
        let url = Self::url(target).ok()?;
        self.sse
            .listen(target, url, &Self::scope(target, url.as_str()))
            .await
            .ok()
    }

    /// Whether the scope's URL is served over HTTP+SSE: configured so, or found so for this
    /// scope by the fallback rule within the last `era_ttl`.
    fn speaks_sse(&self, target: &Target<'_>, scope: &CredentialScope) -> bool {
        if target.config.transport == Transport::Sse {
            return true;
        }
        if !self.any_sse_url.load(Ordering::Acquire) {
            return false;
        }
        match self.sse_urls.get(scope) {
            Some(found) if found.elapsed() <= self.options.era_ttl => true,
            Some(_) => {
                self.sse_urls.remove(scope);
                false
            }
            None => false,
        }
    }

    /// The spec's backwards-compatibility rule for clients: a legacy `initialize` POST answered
    /// 400, 404 or 405 may come from an HTTP+SSE (2024-11-05) server, so GET the URL; when its
    /// stream starts with an `endpoint` event, the URL is SSE (remembered like an era). Otherwise
    /// the original `error` stands.
    async fn fall_back_to_sse(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
        error: UpstreamError,
    ) -> Result<(), UpstreamError> {
        if !matches!(error, UpstreamError::Status(400 | 404 | 405)) {
            return Err(error);
        }
        if let Err(e) = self.sse.connect(target, url, scope).await {
            tracing::debug!(backend = target.name, error = %e, "no HTTP+SSE endpoint either");
            return Err(error);
        }
        tracing::info!(
            backend = target.name,
            "backend speaks the 2024-11-05 HTTP+SSE transport"
        );
        self.sse_urls
            .upsert(scope, &scope.principal, Instant::now());
        self.any_sse_url.store(true, Ordering::Release);
        Ok(())
    }

    async fn send_modern(
        &self,
        target: &Target<'_>,
        url: &Url,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let id = self.next_id();
        let mut params = call.params.clone();
        params.set_raw(
            "_meta",
            meta::modern(
                target.meta,
                target.client_caps,
                &self.client_info,
                call.progress_token,
            ),
        );
        let out = Outgoing {
            url,
            body: mcp_core::encode_request_object(&id, call.method, &params),
            mcp_headers: modern_headers(call.method, call.name),
            forward_param_headers: call.method == "tools/call",
        };
        let mut request = request::build(out, target.downstream, &target.config.headers);
        request::add_headers(&mut request, call.headers);
        telemetry::annotate_current(|| {
            KeyValue::new("mcp.protocol.version", ProtocolVersion::LATEST.as_str())
        });
        // A subscription stream may idle for as long as nothing changes.
        let timeout = Self::timeout(target);
        let gap = (call.method != "subscriptions/listen").then_some(timeout);
        let answer = transport::exchange_with(&self.http, request, timeout, gap).await?;
        Ok(UpstreamReply {
            id,
            messages: checked(answer)?,
            session: None,
            link: None,
            permit: None,
        })
    }

    async fn send_legacy(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let (key, session) = self.session_in(target, url, scope).await?;
        let id = self.next_id();
        let mut params = call.params.clone();
        if let Some(meta) = meta::legacy(target.meta, call.progress_token) {
            params.set_raw("_meta", meta);
        }
        let out = Outgoing {
            url,
            body: mcp_core::encode_request_object(&id, call.method, &params),
            mcp_headers: legacy_headers(&session),
            forward_param_headers: false,
        };
        let mut request = request::build(out, target.downstream, &target.config.headers);
        request::add_headers(&mut request, call.headers);
        telemetry::annotate_current(|| {
            KeyValue::new("mcp.protocol.version", session.version.clone())
        });
        let answer = transport::exchange(&self.http, request, Self::timeout(target)).await?;
        if answer.status == StatusCode::NOT_FOUND && session.id.is_some() {
            self.sessions.forget(&key, &session, true);
            return Err(UpstreamError::SessionExpired);
        }
        Ok(UpstreamReply {
            id,
            messages: checked(answer)?,
            session: Some(session),
            link: None,
            permit: None,
        })
    }

    /// Posts a JSON-RPC response or notification into a legacy session (e.g. the answer to a
    /// server-to-client request).
    pub(crate) async fn post_to_session(
        &self,
        target: &Target<'_>,
        session: &LegacySession,
        message: Vec<u8>,
    ) -> Result<(), UpstreamError> {
        let out = Outgoing {
            url: &session.url,
            body: message,
            mcp_headers: legacy_headers(session),
            forward_param_headers: false,
        };
        let request = request::build(out, target.downstream, &target.config.headers);
        let answer = transport::exchange(&self.http, request, Self::timeout(target)).await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(UpstreamError::Status(answer.status.as_u16()))
        }
    }

    fn session_key(target: &Target<'_>, scope: &CredentialScope) -> SessionKey {
        SessionKey {
            scope: scope.clone(),
            capabilities: capability_digest(target.client_caps.get().as_bytes()),
        }
    }

    fn session_key_at(target: &Target<'_>, url: &Url) -> SessionKey {
        Self::session_key(target, &Self::scope(target, url.as_str()))
    }

    /// Changes whenever an upstream 2025 session leaves this node's table (evicted, expired,
    /// ended): adopted records are adopted again after that.
    pub(crate) fn session_generation(&self) -> u64 {
        self.sessions.generation()
    }

    /// A downstream 2025 session starts using the caller's upstream session at `url`.
    pub(crate) fn attach(&self, target: &Target<'_>, url: &Url) {
        self.sessions.attach(&Self::session_key_at(target, url));
    }

    /// A downstream 2025 session that used the upstream session at `url` ended: when it was the
    /// last one, the upstream session is forgotten (new calls open another) and ended with an
    /// HTTP DELETE (best effort) once no call still uses it: 2026-07-28 clients of the same
    /// caller share it without being counted as its users, and their calls in flight must finish.
    pub(crate) async fn release(&self, target: &Target<'_>, url: &Url) {
        let Some(session) = self.sessions.detach(&Self::session_key_at(target, url)) else {
            return;
        };
        let Some(id) = session.id.clone() else {
            return;
        };
        let out = Outgoing {
            url: &session.url,
            body: Vec::new(),
            mcp_headers: legacy_headers(&session),
            forward_param_headers: false,
        };
        let mut request = request::build(out, target.downstream, &target.config.headers);
        *request.method_mut() = http::Method::DELETE;
        let http = self.http.clone();
        let timeout = Self::timeout(target);
        let backend = target.name.to_owned();
        tokio::spawn(async move {
            // Calls in flight hold the session (their replies keep it); wait for them, as long as
            // the backend's own timeout at most.
            let waited = Instant::now();
            while Arc::strong_count(&session) > 1 && waited.elapsed() < timeout {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            match transport::exchange(&http, request, timeout).await {
                Ok(answer) => {
                    tracing::debug!(backend = %backend, status = %answer.status, session = ?id, "upstream session ended")
                }
                Err(e) => {
                    tracing::debug!(backend = %backend, error = %e, "could not end an upstream session")
                }
            }
        });
    }

    /// Continues the upstream session a downstream session record names (created by another node,
    /// or by this node before a restart) unless this node already holds a session for the caller
    /// at `url`: consecutive requests of one 2025 session then reach the same backend session
    /// whichever node serves them, so its subscriptions, log level and GET stream carry over.
    pub(crate) fn adopt(&self, target: &Target<'_>, url: &Url, id: &str, version: &str) {
        let Ok(id) = HeaderValue::from_str(id) else {
            return;
        };
        let session = LegacySession {
            url: url.clone(),
            id: Some(id),
            version: version.to_owned(),
            // Unknown here; `describe` initialises a session of its own when it needs one.
            initialize_result: Bytes::new(),
            clock: telemetry::SessionClock::unknown(),
        };
        if self
            .sessions
            .adopt(&Self::session_key_at(target, url), session)
        {
            tracing::debug!(
                backend = target.name,
                "continuing a recorded upstream session"
            );
        }
    }

    /// Listens to the GET stream of the caller's upstream session with a legacy backend (shared
    /// with every other listener of that session). `None` when the session cannot be had.
    pub(crate) async fn listen(
        &self,
        target: &Target<'_>,
        url: &Url,
    ) -> Option<(
        Arc<get_stream::Hub>,
        tokio::sync::broadcast::Receiver<Bytes>,
        Arc<LegacySession>,
    )> {
        let (key, session) = self.session(target, url).await.ok()?;
        let hub = self.hubs.hub(
            key,
            get_stream::Opening {
                client: self.http.clone(),
                session: Arc::clone(&session),
                downstream: target.downstream.clone(),
                policy: target.config.headers.clone(),
                timeout: Self::timeout(target),
                backend: target.name.to_owned(),
            },
        );
        let receiver = hub.subscribe();
        Some((hub, receiver, session))
    }

    /// The caller's session with a legacy backend, initialising it on first use.
    pub(crate) async fn session(
        &self,
        target: &Target<'_>,
        url: &Url,
    ) -> Result<(SessionKeyHandle, Arc<LegacySession>), UpstreamError> {
        self.session_in(target, url, &Self::scope(target, url.as_str()))
            .await
    }

    async fn session_in(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<(SessionKeyHandle, Arc<LegacySession>), UpstreamError> {
        let key = Self::session_key(target, scope);
        let slot = self.sessions.slot(&key)?;
        let session = match slot
            .get_or_try_init(|| async { self.initialize(target, url).await.map(Arc::new) })
            .await
        {
            Ok(session) => session,
            Err(e) => {
                self.sessions.forget_failed(&key);
                return Err(e);
            }
        };
        Ok((key, Arc::clone(session)))
    }

    async fn initialize(
        &self,
        target: &Target<'_>,
        url: &Url,
    ) -> Result<LegacySession, UpstreamError> {
        let id = self.next_id();
        let mut params = RawObject::new();
        params.set_str("protocolVersion", LEGACY_PROTOCOL.as_str());
        params.set_raw("capabilities", legacy_capabilities(target.client_caps));
        params.set_borrowed("clientInfo", &self.client_info);
        let out = Outgoing {
            url,
            body: mcp_core::encode_request(&id, "initialize", Some(&params.to_raw())),
            mcp_headers: Vec::new(),
            forward_param_headers: false,
        };
        let request = request::build(out, target.downstream, &target.config.headers);
        let answer = transport::exchange(&self.http, request, Self::timeout(target)).await?;
        let session_id = answer.headers.get(MCP_SESSION_ID).cloned();
        let mut messages = checked(answer)?;
        let result = loop {
            let message = messages
                .next()
                .await
                .ok_or(UpstreamError::Malformed("no initialize result"))??;
            let Ok(env) = Envelope::parse(&message) else {
                return Err(UpstreamError::Malformed("invalid JSON-RPC message"));
            };
            match env.kind() {
                MessageKind::Response if env.id() == Some(&id) => {
                    break env
                        .result()
                        .map(|r| Bytes::copy_from_slice(r.get().as_bytes()));
                }
                MessageKind::Error if env.id() == Some(&id) => {
                    return Err(UpstreamError::Malformed("backend refused initialize"));
                }
                _ => continue,
            }
        };
        let result = result.ok_or(UpstreamError::Malformed("no initialize result"))?;
        let version = RawObject::parse(std::str::from_utf8(&result).unwrap_or("{}"))
            .ok()
            .and_then(|o| o.get_str("protocolVersion"))
            .ok_or(UpstreamError::Malformed(
                "initialize result without protocolVersion",
            ))?;
        let mut session = LegacySession {
            url: url.clone(),
            id: session_id,
            version,
            initialize_result: result,
            clock: telemetry::SessionClock::unknown(),
        };
        let initialized = mcp_core::encode_notification("notifications/initialized", None);
        self.post_to_session(target, &session, initialized).await?;
        // Counted from here: a session whose initialisation failed never was one.
        session.clock = telemetry::SessionClock::opened(&session.version);
        Ok(session)
    }

    /// What a backend says about itself, for `server/discover` and `initialize`: a modern
    /// backend's `DiscoverResult`, or a legacy backend's `InitializeResult` from the caller's
    /// upstream session. Tries the replicas when the primary fails (describing is read-only), each
    /// behind its breaker.
    pub(crate) async fn describe(&self, target: &Target<'_>) -> Result<Description, UpstreamError> {
        if stdio::label(target.config).is_some() {
            // Callers never see a stdio backend's session: it describes itself like a modern one.
            return Ok(Description {
                era: Era::Modern,
                result: self.stdio.describe(target).await?,
                session: None,
            });
        }
        let mut first_error = None;
        for url in Self::urls(target)? {
            let scope = Self::scope(target, url.as_str());
            let permit = match self.breaker(target, &scope) {
                Some(breaker) => match breaker.try_acquire() {
                    Ok(permit) => Some(permit),
                    Err(open) => {
                        first_error.get_or_insert(UpstreamError::CircuitOpen(open.retry_after()));
                        continue;
                    }
                },
                None => None,
            };
            let outcome = self.describe_at(target, url, &scope).await;
            if let Some(permit) = permit {
                permit.record_elapsed(match &outcome {
                    Ok(_) => Outcome::Success,
                    Err(e) => outcome_of(e),
                });
            }
            match outcome {
                Ok(description) => return Ok(description),
                Err(e) => {
                    self.forget_era(&scope);
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or(UpstreamError::NoUrl))
    }

    async fn describe_at(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Description, UpstreamError> {
        if self.speaks_sse(target, scope) {
            return self.describe_sse(target, url, scope).await;
        }
        match self.route(target, url, scope).await? {
            Route::Modern => {
                let call = Call {
                    method: "server/discover",
                    params: RawObject::new(),
                    name: None,
                    progress_token: None,
                    hints: ToolHints::NONE,
                    headers: None,
                };
                let reply = self.send_modern(target, url, &call).await?;
                let result = final_result(reply).await?;
                Ok(Description {
                    era: Era::Modern,
                    result,
                    session: None,
                })
            }
            Route::Legacy { only } => {
                let (key, mut session) = match self.session_in(target, url, scope).await {
                    Ok(session) => session,
                    Err(e) if !only => return Err(e),
                    Err(e) => {
                        self.fall_back_to_sse(target, url, scope, e).await?;
                        return self.describe_sse(target, url, scope).await;
                    }
                };
                if session.initialize_result.is_empty() {
                    // An adopted session: its InitializeResult is not known on this node.
                    self.sessions.forget(&key, &session, false);
                    (_, session) = self.session_in(target, url, scope).await?;
                }
                Ok(Description {
                    era: Era::Legacy,
                    result: session.initialize_result.clone(),
                    session: Some(session),
                })
            }
        }
    }
}

impl Client {
    /// Callers never see an HTTP+SSE backend's session: it describes itself like a modern one.
    async fn describe_sse(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Description, UpstreamError> {
        Ok(Description {
            era: Era::Modern,
            result: self.sse.describe(target, url, scope).await?,
            session: None,
        })
    }
}

/// A backend link followed by a 2025 session's GET stream.
pub(crate) struct LinkEvents {
    /// The era the link speaks: a 2025 server takes `resources/subscribe` itself.
    pub(crate) era: Era,
    /// Every principal's calls share it (a shared stdio process).
    pub(crate) shared: bool,
    /// Its notifications of no call: resource updates, list changes.
    pub(crate) events: tokio::sync::broadcast::Receiver<Bytes>,
}

/// What [`Upstream::describe`] found.
pub(crate) struct Description {
    /// The backend's era.
    pub(crate) era: Era,
    /// `DiscoverResult` (modern) or `InitializeResult` (legacy), raw JSON.
    pub(crate) result: Bytes,
    /// The caller's upstream session (legacy).
    pub(crate) session: Option<Arc<LegacySession>>,
}

/// The `result` of the response to `reply`'s request (notifications skipped; an error response is
/// a malformed answer here, where only a result makes sense).
pub(super) async fn final_result(mut reply: UpstreamReply) -> Result<Bytes, UpstreamError> {
    let mut saw_invalid = false;
    while let Some(message) = reply.messages.next().await {
        let message = message?;
        let Ok(env) = Envelope::parse(&message) else {
            saw_invalid = true;
            continue;
        };
        if env.id() != Some(&reply.id) {
            continue;
        }
        return match env.result() {
            Some(result) => Ok(Bytes::copy_from_slice(result.get().as_bytes())),
            None => Err(UpstreamError::Malformed("backend answered with an error")),
        };
    }
    Err(UpstreamError::ended(saw_invalid))
}

/// How a failed exchange counts for a breaker: an unreachable, slow or broken backend is a
/// failure; a backend that answered (a 4xx, a forgotten session) is alive.
fn outcome_of(error: &UpstreamError) -> Outcome {
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
        | UpstreamError::TooManySessions => Outcome::Ignore,
    }
}

/// Records the breaker outcome, the client span and the duration of a call when its answer is
/// known (one parse of each message serves both): the first stream error is a failure, the
/// response (or error response) with the call's id a success for the breaker. A stream dropped
/// before either (the client cancelled) records nothing for the breaker and ends the span as
/// `cancelled`.
fn recording(
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

/// Identifies a session table entry (for forgetting it).
pub(crate) type SessionKeyHandle = SessionKey;

/// The registry key of the breaker `target` uses in `scope`: the backend's name (shown on
/// `/readyz`), the scope's opaque id, then the caller's breaker settings (`timeout_ms` and a
/// digest of the overrides), which decide what counts as a failure.
fn breaker_key(target: &Target<'_>, scope: &CredentialScope) -> String {
    // The timeout is written as is; overrides (rare) as half a digest, to keep keys short.
    let mut key = format!(
        "{}\u{0}{}\u{0}{}",
        target.name,
        scope.opaque_id(),
        target.config.timeout_ms
    );
    if let Some(overrides) = &target.config.breaker {
        let json = serde_json::to_string(overrides).unwrap_or_default();
        key.push('\u{0}');
        key.push_str(&scope::hex(&capability_digest(json.as_bytes())[..8]));
    }
    key
}

/// Turns an answer into its messages, mapping HTTP errors: a JSON-RPC error body is a message
/// (the backend's own error is relayed), anything else is an [`UpstreamError::Status`].
fn checked(answer: Answer) -> Result<MessageStream, UpstreamError> {
    if answer.status.is_success() {
        return Ok(answer.messages);
    }
    if answer.status.is_server_error() {
        return Err(UpstreamError::Status(answer.status.as_u16()));
    }
    let status = answer.status.as_u16();
    // 4xx: relay a JSON-RPC error body when there is one.
    Ok(Box::pin(answer.messages.map(move |m| match m {
        Ok(bytes) if Envelope::parse(&bytes).is_ok_and(|e| e.kind() == MessageKind::Error) => {
            Ok(bytes)
        }
        _ => Err(UpstreamError::Status(status)),
    })))
}

fn modern_headers(method: &str, name: Option<&str>) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = vec![
        (
            MCP_PROTOCOL_VERSION,
            HeaderValue::from_static(ProtocolVersion::LATEST.as_str()),
        ),
        (MCP_METHOD, encode_header_value(method)),
    ];
    if let Some(name) = name {
        headers.push((MCP_NAME, encode_header_value(name)));
    }
    headers
}

pub(crate) fn legacy_headers(session: &LegacySession) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = Vec::new();
    if let Some(id) = &session.id {
        headers.push((MCP_SESSION_ID, id.clone()));
    }
    // The header exists since 2025-06-18; older sessions go without it.
    if session.version.as_str() >= "2025-06-18"
        && let Ok(v) = HeaderValue::from_str(&session.version)
    {
        headers.push((MCP_PROTOCOL_VERSION, v));
    }
    headers
}

/// Client capabilities in the legacy shape: the same object without the modern `extensions`.
fn legacy_capabilities(caps: &RawValue) -> Box<RawValue> {
    match RawObject::from_raw(caps) {
        Ok(mut obj) => {
            obj.remove("extensions");
            obj.to_raw()
        }
        Err(_) => {
            RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| RawValue::NULL.to_owned())
        }
    }
}

/// Whether a failed `initialize` says the backend has no 2025 side (an HTTP 4xx, or a JSON-RPC
/// error or no result where an `InitializeResult` belongs), rather than that it is unreachable.
fn refuses_legacy(error: &UpstreamError) -> bool {
    match error {
        UpstreamError::Status(code) => (400..500).contains(code) && *code != 408 && *code != 429,
        UpstreamError::Malformed(_) => true,
        _ => false,
    }
}

/// Whether a probe answer comes from a modern server: a result with `supportedVersions`, or a
/// modern protocol error (-32022 unsupported version / -32020 header mismatch / -32021).
fn looks_modern(message: &Bytes) -> bool {
    let Ok(env) = Envelope::parse(message) else {
        return false;
    };
    match env.kind() {
        MessageKind::Response => env
            .result()
            .and_then(|r| RawObject::from_raw(r).ok())
            .is_some_and(|r| r.contains("supportedVersions")),
        MessageKind::Error => env.error().is_some_and(|e| {
            matches!(
                e.code,
                mcp_core::error_code::UNSUPPORTED_PROTOCOL_VERSION
                    | mcp_core::error_code::HEADER_MISMATCH
                    | mcp_core::error_code::MISSING_REQUIRED_CLIENT_CAPABILITY
            )
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_answers_are_classified() {
        let modern = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}"#);
        assert!(looks_modern(&modern));
        let version = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}}"#,
        );
        assert!(looks_modern(&version));
        let legacy = Bytes::from_static(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: missing session"}}"#);
        assert!(!looks_modern(&legacy));
        assert!(!looks_modern(&Bytes::from_static(b"<html>")));
    }

    #[test]
    fn legacy_capabilities_drop_extensions() {
        let caps = RawValue::from_string(
            r#"{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#.into(),
        )
        .expect("raw");
        assert_eq!(legacy_capabilities(&caps).get(), r#"{"sampling":{}}"#);
    }
}
