//! [`Gateway`]: builds the stack from a [`GatewayConfig`], binds the listeners and serves until a
//! shutdown future completes, then drains.
//!
//! Why this file is long: building the stack maps every configuration section onto its layer
//! in one place, so what the operator's keys turn into reads top to bottom.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper_util::server::graceful::GracefulShutdown;
use mcp_claims::{ClaimsLayer, JwtValidator};
use mcp_config_store::{ConfigStoreLayer, PrincipalKey, UserConfigStore, VirtualHostConfigLayer};
use mcp_core::Budget;
use mcp_core::tls::ClientTls;
use mcp_plugins::PluginRuntime;
use mcp_router::bus::NodeBus;
use mcp_router::session::{
    KeyRing, LocalSessionLimits, LocalSessionStore, RedisSessionStore, RedisSessionStoreConfig,
    SealedSessionStore, SessionStore,
};
use mcp_router::sse_bridge::{MESSAGES_PATH_SUFFIX, SSE_PATH_SUFFIX, SseBridge, SseBridgeLayer};
use mcp_router::{
    BackendService, DestinationPolicy, McpRouter, McpRouterBuilder, UpstreamError, UpstreamOptions,
    UpstreamReply, UpstreamRequest,
};
use mcp_vhost::{PathPattern, VhostLayer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower_layer::Layer;

use crate::admin::{AdminService, AdminState};
use crate::auth;
use crate::config::{GatewayConfig, RuntimeMode, SessionsKind};
use crate::error::GatewayError;
use crate::in_flight_share::InFlightShare;
use crate::json_posts::JsonPosts;
use crate::limits::{RequestLimits, origin_policy};
use crate::metadata::ResourceMetadata;
use crate::metrics;
use crate::per_core::{self, Cores, Owed};
use crate::plugins::Plugins;
use crate::reload::{self, Reloader};
use crate::routed::Routed;
use crate::server::{AcceptLoop, Builders};
use crate::service::{GatewayService, McpStack, Shared};
use crate::store::UserStore;
use crate::tls;

/// How often the background task refreshes the store readiness gauge and the metrics upkeep.
const MONITOR_INTERVAL: Duration = Duration::from_secs(5);
/// Most stale-if-error answers kept (the router's default).
const STALE_ENTRIES: usize = 10_000;
/// How long admin connections get to finish after the drain.
const ADMIN_DRAIN: Duration = Duration::from_secs(1);
/// After the drain, the longest a shutdown waits for the messages the closed connections' calls
/// owe their backends (a 2025 backend's `notifications/cancelled`, see [`McpRouter::settle`]).
const OWED_GRACE: Duration = Duration::from_secs(3);

/// A gateway built from its configuration, not yet listening.
///
/// See the [crate docs](crate) for an example.
pub struct Gateway {
    config: Arc<GatewayConfig>,
    service: GatewayService,
    admin: Arc<AdminState>,
    tls: Option<TlsAcceptor>,
    /// The router's destination policy, told the listeners' addresses once they are bound.
    destinations: DestinationPolicy,
    /// The router, for the messages it owes backends at shutdown ([`McpRouter::settle`]).
    router: McpRouter,
    reloader: Reloader,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("addr", &self.config.listen.addr)
            .field("admin_addr", &self.config.listen.admin_addr)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Gateway`] with settings that do not come from the configuration file: secrets given
/// directly, your own user config store, or your own token validator.
#[must_use]
pub struct GatewayBuilder {
    config: GatewayConfig,
    hs256_secret: Option<Vec<u8>>,
    sealing_secret: Option<Vec<u8>>,
    store: Option<Arc<dyn UserConfigStore>>,
    validator: Option<JwtValidator>,
    /// The integrator's backend layers, applied to the router builder in the order given.
    backend_layers: Vec<RouterOption>,
}

/// One option the integrator set on the router builder.
type RouterOption = Box<dyn FnOnce(McpRouterBuilder) -> McpRouterBuilder + Send>;

impl std::fmt::Debug for GatewayBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets.
        f.debug_struct("GatewayBuilder")
            .field("config", &self.config)
            .field("hs256_secret", &self.hs256_secret.as_ref().map(|_| "<set>"))
            .field("custom_store", &self.store.is_some())
            .field("backend_layers", &self.backend_layers.len())
            .finish_non_exhaustive()
    }
}

impl GatewayBuilder {
    /// The HS256 secret, instead of the environment variable named by
    /// `auth.jwt.hs256_secret_env`.
    pub fn hs256_secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        self.hs256_secret = Some(secret.into());
        self
    }

    /// The secret sealing cursors and `requestState`, instead of `router.sealing_secret_env`.
    pub fn sealing_secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        self.sealing_secret = Some(secret.into());
        self
    }

    /// Serve user configurations from `store` instead of `[config_store]` (e.g. a
    /// `mcp_config_store::MemoryStore`); the gateway still puts its cache in front.
    pub fn user_store(mut self, store: impl UserConfigStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// Validate tokens with `validator` instead of building one from `[auth.jwt]`. User
    /// configurations are still keyed by `auth.jwt.issuers`: `<issuer>#<sub>` when it lists
    /// several issuers (`mcp_config_store::lookup_key`), else `sub`.
    pub fn validator(mut self, validator: JwtValidator) -> Self {
        self.validator = Some(validator);
        self
    }

    /// Adds a tower layer to every backend stack of the gateway (see
    /// [`McpRouterBuilder::backend_layer`]): one stack per backend and credential scope, so the
    /// layer's state is never shared between tenants.
    ///
    /// ```
    /// use mcp_gateway::Gateway;
    /// use mcp_gateway::config::GatewayConfig;
    /// use tower::limit::ConcurrencyLimitLayer;
    ///
    /// let builder = Gateway::builder(GatewayConfig::default())
    ///     .backend_layer(ConcurrencyLimitLayer::new(8));
    /// # drop(builder);
    /// ```
    pub fn backend_layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<BackendService> + Send + Sync + 'static,
        L::Service: tower_service::Service<UpstreamRequest, Response = UpstreamReply, Error = UpstreamError>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as tower_service::Service<UpstreamRequest>>::Future: Send + 'static,
    {
        self.backend_layers
            .push(Box::new(move |builder| builder.backend_layer(layer)));
        self
    }

    /// Builds the stack: token validator, user config store (a file store is read and checked
    /// now), router. Needs a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Config`] for an invalid key or user configuration file (naming the file and
    /// key), [`GatewayError::Store`] when Redis refuses the connection.
    pub async fn build(self) -> Result<Gateway, GatewayError> {
        let config = Arc::new(self.config);
        let given_validator = self.validator.is_some();
        let validator = match self.validator {
            Some(v) => v,
            None => auth::build_validator(&config, self.hs256_secret.as_deref())?,
        };
        let (tls, server_cert) = match &config.listen.tls {
            Some(files) => {
                let (acceptor, cert) = tls::acceptor(&config, files)?;
                (Some(acceptor), Some(cert))
            }
            None => (None, None),
        };
        let sealing = auth::sealing_secret(&config, self.sealing_secret.as_deref())?;
        let store = match self.store {
            Some(store) => UserStore::custom(store, &config),
            None => UserStore::open(&config).await?,
        };
        let (sessions, bus, sealed) = session_store(&config)?;
        let plugins = Plugins::load(&config).await?;
        let destinations = DestinationPolicy::new(
            &config.backends.allow_destinations,
            &config.backends.deny_destinations,
        )
        .map_err(|reason| config.problem("backends.deny_destinations", reason.to_string()))?;
        // Clients reach the gateway by its public name, which a load balancer may resolve to
        // addresses that are not its listeners': a backend URL naming it is the gateway itself.
        let public = config
            .auth
            .public_url
            .as_ref()
            .and_then(|url| url.host_str().zip(url.port_or_known_default()));
        let destinations = match public {
            Some((host, port)) => destinations.own_host(host, port),
            None => destinations,
        };
        let backend_tls = tls::backend_tls(&config)?;
        let (backend_layers, audit_file) = crate::audit::with_audit(self.backend_layers, &config)?;
        let router = build_router(
            &config,
            upstream_options(&config, destinations.clone(), backend_tls),
            sealing.as_deref(),
            sessions,
            bus,
            plugins.as_ref().map(|p| Arc::clone(&p.runtime)),
            backend_layers,
        );
        let breakers = router.breakers().clone();
        let reloading = router.clone();
        let parked = router.clone();
        let held = router.clone();
        let settling = router.clone();
        let metadata = Arc::new(ResourceMetadata::from_config(&config));
        let sse = SseBridgeLayer::new()
            .max_body_bytes(config.limits.max_body_bytes)
            .max_sessions(config.limits.max_sse_sessions)
            .max_sessions_per_principal(config.limits.max_sse_sessions_per_principal)
            .max_queued_bytes_per_principal(config.limits.sse_queued_bytes_per_principal)
            .max_queued_bytes(config.limits.sse_queued_bytes)
            .max_batch(config.limits.max_sse_batch);
        let sse_budget = sse.budget();
        let bridged = sse.layer(router);
        let in_flight = Budget::new("in_flight")
            .with_slots(config.limits.max_in_flight_per_principal, usize::MAX);
        // Several trusted issuers may each have an `alice`: their configurations are looked up
        // (and cached) under `<issuer>#<sub>` then (mcp_config_store::lookup_key).
        let key = PrincipalKey::for_issuer_count(config.auth.jwt.issuers.len());
        // The layer the stack uses is the one a reload swaps the validator of.
        let claims = {
            let metadata = Arc::clone(&metadata);
            ClaimsLayer::new(validator).resource_metadata_fn(move |parts: &http::request::Parts| {
                metadata.url_for_request(parts)
            })
        };
        let mcp = build_stack(
            claims.clone(),
            store.shared(),
            key,
            bridged,
            in_flight.clone(),
        );
        let limits = Arc::new(ArcSwap::from_pointee(RequestLimits::from_config(&config)));
        // The documents a reload replaces (the challenge URLs come from `metadata`, which a
        // reload cannot change: `auth.public_url` and the path pattern need a restart).
        let documents = Arc::new(ArcSwap::new(Arc::clone(&metadata)));
        let generation = Arc::new(AtomicU64::new(1));
        let reloader = Reloader::new(
            Arc::clone(&config),
            Arc::clone(&generation),
            reload::Parts {
                claims: (!given_validator).then_some(claims),
                hs256_secret: self.hs256_secret,
                tls: server_cert,
                destinations: destinations.clone(),
                router: reloading,
                store_rules: store.rules(),
                limits: Arc::clone(&limits),
                metadata: Arc::clone(&documents),
                sealed,
                audit_file,
            },
        );
        let shared = Arc::new(Shared {
            limits,
            metadata: documents,
            access_log: config.telemetry.access_log,
            metrics: Arc::new(metrics::RequestMetrics::new(
                config.telemetry.max_vhost_labels,
            )),
        });
        let admin = Arc::new(AdminState {
            store,
            config_generation: generation,
            metrics: metrics::handle(),
            draining: AtomicBool::new(false),
            breakers,
            breaker_counts: metrics::BreakerCounts::new(config.telemetry.max_backend_labels),
            plugins,
            sse_sessions: Box::new(move || sse.open_sessions()),
            parked_calls: Box::new(move || parked.parked_calls()),
            held: Box::new(move || metrics::Held {
                replay_bytes: held.replay_bytes(),
                notification_streams: held.notification_streams(),
                background_relays: held.background_relays(),
                relayed_requests: held.relayed_requests_waiting(),
                stale_answer_bytes: held.stale_answer_bytes(),
                upstream_session_bytes: held.upstream_session_bytes(),
                link_buffer_bytes: held.link_buffer_bytes(),
                budgets: [in_flight.clone(), sse_budget.clone()]
                    .into_iter()
                    .chain(held.budgets())
                    .collect(),
                node_bus_subscribed: held.node_bus_subscribed(),
                node_bus_publish_failures: held.node_bus_publish_failures(),
            }),
        });
        Ok(Gateway {
            service: GatewayService::new(mcp, shared),
            config,
            admin,
            tls,
            destinations,
            router: settling,
            reloader,
        })
    }
}

/// The 2025 session store `[sessions]` names, and with the Redis store the node bus on the same
/// Redis (answers and cancellations that reach the wrong node); the sealed store also as itself,
/// for a reload to replace its key ring. Its values were validated with the
/// configuration; what can still fail here (a Redis URL the client library refuses) is reported as
/// a store error.
fn session_store(config: &GatewayConfig) -> Result<SessionStores, GatewayError> {
    let s = &config.sessions;
    let store: Arc<dyn SessionStore> = match &s.kind {
        SessionsKind::Redis { url } => {
            let mut redis = RedisSessionStoreConfig::new(url.clone());
            redis.ttl = s.idle_timeout;
            redis.wait_replicas = s.wait_replicas;
            redis.wait_timeout = s.wait_timeout;
            redis.max_per_principal = s.max_per_principal;
            let refused = |e| GatewayError::Store(format!("sessions.url: {e}"));
            let bus = NodeBus::redis(&redis).map_err(refused)?;
            let store = RedisSessionStore::new(redis).map_err(refused)?;
            return Ok((Arc::new(store), Some(bus), None));
        }
        SessionsKind::Sealed { keys, bus_url } => {
            let ring = KeyRing::parse(keys)
                .map_err(|e| GatewayError::Store(format!("sessions.keys_env: {e}")))?;
            let store = SealedSessionStore::new(ring)
                .with_idle_ttl(s.idle_timeout)
                .with_revocation_limits(s.max_sessions, s.max_per_principal);
            let bus = match bus_url {
                Some(url) => Some(
                    NodeBus::redis(&RedisSessionStoreConfig::new(url.clone()))
                        .map_err(|e| GatewayError::Store(format!("sessions.url: {e}")))?,
                ),
                None => None,
            };
            let store = Arc::new(store);
            return Ok((
                Arc::clone(&store) as Arc<dyn SessionStore>,
                bus,
                Some(store),
            ));
        }
        _ => {
            let mut limits = LocalSessionLimits::default();
            limits.idle_timeout = s.idle_timeout;
            limits.max_sessions = s.max_sessions;
            limits.max_per_principal = s.max_per_principal;
            limits.max_bytes_per_principal = s.record_bytes_per_principal;
            limits.max_bytes = s.record_bytes;
            Arc::new(LocalSessionStore::new(limits))
        }
    };
    Ok((store, None, None))
}

/// The session store, the node bus, and the sealed store when it is the one.
type SessionStores = (
    Arc<dyn SessionStore>,
    Option<NodeBus>,
    Option<Arc<SealedSessionStore>>,
);

/// The router's upstream options from `[router]` and `[backends]`.
fn upstream_options(
    config: &GatewayConfig,
    destinations: DestinationPolicy,
    tls: ClientTls,
) -> UpstreamOptions {
    let r = &config.router;
    let mut options = UpstreamOptions::default();
    options.connect_timeout = r.upstream_connect_timeout;
    options.call_deadline = r.call_deadline;
    options.max_call_deadline = r.max_call_deadline;
    options.max_sessions = r.max_upstream_sessions;
    options.max_sessions_per_principal = r.max_upstream_sessions_per_principal;
    options.session_bytes_per_principal = config.limits.upstream_session_bytes_per_principal;
    options.session_bytes = config.limits.upstream_session_bytes;
    options.link_buffer_bytes_per_principal = config.limits.link_buffer_bytes_per_principal;
    options.link_call_buffer_bytes = config.limits.link_call_buffer_bytes;
    options.link_call_buffer_messages = config.limits.link_call_buffer_messages;
    options.max_breaker_labels = config.telemetry.max_backend_labels;
    options.link_buffer_bytes = config.limits.link_buffer_bytes;
    options.stdio = config.backends.stdio_rules();
    options.destinations = destinations;
    options.tls = tls;
    if config.runtime.mode == RuntimeMode::ThreadPerCore {
        // One lane per serving thread (`per_core` sets each thread's).
        options.pool_lanes = config.runtime.threads();
    }
    options
}

fn build_router(
    config: &GatewayConfig,
    upstream: UpstreamOptions,
    sealing: Option<&[u8]>,
    sessions: Arc<dyn SessionStore>,
    bus: Option<NodeBus>,
    plugins: Option<Arc<PluginRuntime>>,
    backend_layers: Vec<RouterOption>,
) -> McpRouter {
    let r = &config.router;
    let l = &config.limits;
    let mut builder = McpRouter::builder()
        .server_info("mcp-gateway", env!("CARGO_PKG_VERSION"))
        .fanout_deadline(r.fanout_deadline)
        .max_name_len(r.max_name_len)
        .max_body_bytes(config.limits.max_body_bytes)
        .origins(origin_policy(&config.security.allowed_origins))
        .request_state_ttl(r.request_state_ttl)
        .max_hops(r.max_hops)
        .upstream(upstream)
        .breaker_defaults(config.breaker.clone())
        .stale_if_error(r.stale_if_error, STALE_ENTRIES)
        .stale_budgets(l.stale_answer_bytes_per_principal, l.stale_answer_bytes)
        .replay_budgets(
            l.replay_bytes_per_session,
            l.replay_bytes_per_principal,
            l.replay_bytes,
        )
        .max_streams_per_principal(l.max_streams_per_principal)
        .max_background_relays_per_principal(l.max_background_relays_per_principal)
        .max_relayed_requests(l.max_relayed_requests, l.max_relayed_requests_per_principal)
        .max_parked_calls(l.max_parked_calls, l.max_parked_calls_per_principal)
        .forwarded_retry_budgets(
            (
                l.max_forwarded_retries_per_principal,
                l.max_forwarded_retries,
            ),
            (
                l.forwarded_retry_bytes_per_principal,
                l.forwarded_retry_bytes,
            ),
        )
        .max_subscriptions(l.max_resource_subscriptions)
        .session_check_interval(session_check_interval(config.sessions.idle_timeout))
        .session_store(sessions);
    if let Some(text) = &r.instructions {
        builder = builder.instructions(text.clone());
    }
    if let Some(bus) = bus {
        builder = builder.node_bus(bus);
    }
    if let Some(plugins) = plugins {
        builder = builder.plugins(plugins);
    }
    for add in backend_layers {
        builder = add(builder);
    }
    if let Some(id) = &r.gateway_id {
        builder = builder.gateway_id(id.clone());
    }
    match sealing {
        Some(secret) => builder = builder.sealing_secret(secret),
        None => tracing::info!(
            "router.sealing_secret_env is not set: cursors and requestState are sealed with a random per-process key (set it when several gateway nodes serve the same clients)"
        ),
    }
    builder.build()
}

/// How often the router checks the 2025 sessions it holds streams and replay buffers for: a
/// quarter of the idle timeout, between 1 and 30 seconds, so what an expired session held is
/// released within `sessions.idle_timeout_s` plus that much.
fn session_check_interval(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// vhost -> claims -> each principal's share of requests in flight -> config store (read under
/// `key`) -> virtual host config -> JSON POSTs ->
/// router (with the SSE bridge, whose `…/sse` and `…/messages` paths the vhost layer lets through
/// next to `…/mcp`).
fn build_stack(
    claims: ClaimsLayer,
    store: Arc<dyn UserConfigStore>,
    key: PrincipalKey,
    router: SseBridge<McpRouter>,
    in_flight: Budget,
) -> McpStack {
    let routed = JsonPosts::new(Routed::new(router));
    let vhost_config = VirtualHostConfigLayer::new().layer(routed);
    let config_store = ConfigStoreLayer::from_shared(store)
        .subject_extractor(key)
        .layer(vhost_config);
    let paths = PathPattern::default()
        .also_suffix(SSE_PATH_SUFFIX)
        .also_suffix(MESSAGES_PATH_SUFFIX);
    let shared = InFlightShare::new(config_store, in_flight);
    VhostLayer::with_pattern(paths).layer(claims.layer(shared))
}

impl Gateway {
    /// Builds a gateway from `config` (secrets from the environment variables it names).
    ///
    /// # Errors
    ///
    /// See [`GatewayBuilder::build`].
    pub async fn from_config(config: GatewayConfig) -> Result<Self, GatewayError> {
        Self::builder(config).build().await
    }

    /// A builder, for secrets and stores that do not come from the configuration.
    pub fn builder(config: GatewayConfig) -> GatewayBuilder {
        GatewayBuilder {
            config,
            hs256_secret: None,
            sealing_secret: None,
            store: None,
            validator: None,
            backend_layers: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// The MCP endpoint as a tower service (limits, RFC 9728 metadata, layers, router), to mount
    /// in your own server.
    pub fn service(&self) -> GatewayService {
        self.service.clone()
    }

    /// Waits, at most `within`, for the messages the router owes backends for calls and
    /// sessions that ended (see [`McpRouter::settle`]); `true` when none is left. [`serve`]
    /// does this at shutdown; a server of your own mounting [`service`](Self::service) does it
    /// after closing its connections and before its runtime stops.
    ///
    /// [`serve`]: BoundGateway::serve
    pub async fn settle(&self, within: Duration) -> bool {
        self.router.settle(within).await
    }

    /// Applies new process configurations without a restart (the binary calls it on SIGHUP and
    /// on a change of its configuration file).
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// The admin endpoints (`/metrics`, `/healthz`, `/readyz`) as a tower service.
    pub fn admin_service(&self) -> AdminService {
        AdminService::new(Arc::clone(&self.admin))
    }

    /// Binds `listen.addr` and `listen.admin_addr`. With `runtime.mode = "thread-per-core"`,
    /// `listen.addr` is bound once per serving thread (`runtime.threads`), each socket with
    /// `SO_REUSEPORT`, and [`BoundGateway::serve`] starts those threads.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Bind`] naming the listener and address.
    pub async fn bind(self) -> Result<BoundGateway, GatewayError> {
        let addr = self.config.listen.addr;
        let bind_error = |source| GatewayError::Bind {
            listener: "mcp",
            addr,
            source,
        };
        let mcp = match self.config.runtime.mode {
            RuntimeMode::WorkStealing => {
                McpListeners::Shared(TcpListener::bind(addr).await.map_err(bind_error)?)
            }
            RuntimeMode::ThreadPerCore => McpListeners::PerCore(
                per_core::bind(addr, self.config.runtime.threads()).map_err(bind_error)?,
            ),
        };
        let admin = match self.config.listen.admin_addr {
            Some(addr) => {
                Some(
                    TcpListener::bind(addr)
                        .await
                        .map_err(|source| GatewayError::Bind {
                            listener: "admin",
                            addr,
                            source,
                        })?,
                )
            }
            None => None,
        };
        let local = mcp.local_addr()?;
        let admin_local = admin.as_ref().map(TcpListener::local_addr).transpose()?;
        // Backends may not point back at the gateway: compare the bound addresses (a port 0 in
        // the configuration is only known now).
        self.destinations
            .set_own_listeners(std::iter::once(local).chain(admin_local));
        let admin_text = admin_local.map_or_else(|| "disabled".to_owned(), |a| a.to_string());
        tracing::info!(
            addr = %local,
            admin_addr = %admin_text,
            tls = self.tls.is_some(),
            serving_threads = mcp.serving_threads(),
            "listening"
        );
        Ok(BoundGateway {
            gateway: self,
            mcp,
            admin,
            local,
            admin_local,
        })
    }

    /// Binds and serves until `shutdown` completes, then drains (see [`BoundGateway::serve`]).
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind).
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), GatewayError> {
        self.bind().await?.serve(shutdown).await
    }
}

/// The MCP listener: one socket the runtime's workers share, or one per serving thread.
enum McpListeners {
    Shared(TcpListener),
    PerCore(Vec<std::net::TcpListener>),
}

impl McpListeners {
    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            Self::Shared(listener) => listener.local_addr(),
            Self::PerCore(listeners) => listeners
                .first()
                .ok_or_else(|| std::io::Error::other("no listener bound"))?
                .local_addr(),
        }
    }

    /// Threads of their own serving the listener (0: the runtime's workers).
    fn serving_threads(&self) -> usize {
        match self {
            Self::Shared(_) => 0,
            Self::PerCore(listeners) => listeners.len(),
        }
    }
}

/// Who serves the MCP listener's connections.
enum Serving {
    /// One accept loop task on the caller's runtime; it returns the connections still open.
    Shared(tokio::task::JoinHandle<JoinSet<()>>),
    PerCore(Cores),
}

impl Serving {
    /// Waits for accepting to stop (once the stop signal is sent); the connections still open.
    async fn stopped(self) -> OpenConnections {
        match self {
            Self::Shared(task) => OpenConnections::Shared(task.await.unwrap_or_default()),
            Self::PerCore(mut cores) => {
                let open = cores.accepting_stopped().await;
                OpenConnections::PerCore(cores, open)
            }
        }
    }
}

/// The connections open when accepting stopped, to close after the drain.
enum OpenConnections {
    Shared(JoinSet<()>),
    PerCore(Cores, usize),
}

impl OpenConnections {
    fn len(&self) -> usize {
        match self {
            Self::Shared(connections) => connections.len(),
            Self::PerCore(_, open) => *open,
        }
    }

    /// Closes them and waits until they are gone: their calls' owed messages are then in the
    /// router's hands (see [`McpRouter::settle`]). With serving threads, each waited for its
    /// own before it ended: whether they all went out.
    async fn close(self) -> bool {
        match self {
            Self::Shared(mut connections) => {
                connections.abort_all();
                while connections.join_next().await.is_some() {}
                true
            }
            Self::PerCore(cores, _) => cores.close().await,
        }
    }
}

/// A gateway whose listeners are bound (the ports are known) but not yet accepting.
pub struct BoundGateway {
    gateway: Gateway,
    mcp: McpListeners,
    admin: Option<TcpListener>,
    local: SocketAddr,
    admin_local: Option<SocketAddr>,
}

impl std::fmt::Debug for BoundGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundGateway")
            .field("local_addr", &self.local)
            .field("admin_addr", &self.admin_local)
            .finish_non_exhaustive()
    }
}

impl BoundGateway {
    /// The MCP listener's address (with the real port when configured as 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The admin listener's address, when enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_local
    }

    /// `http(s)://<local addr>/servers/<vhost>/mcp`.
    pub fn endpoint_url(&self, vhost: &str) -> String {
        let scheme = if self.gateway.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}/servers/{vhost}/mcp", self.local)
    }

    /// The gateway.
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// Serves until `shutdown` completes. Then: stop accepting, mark `/readyz` unready, let
    /// in-flight requests and streams finish for at most `shutdown_drain_s`, close what is left,
    /// give the messages the closed calls owe their backends (a 2025 backend's
    /// `notifications/cancelled`) up to 3 s more to go out, stop the admin listener, return
    /// `Ok`.
    ///
    /// With `runtime.mode = "thread-per-core"` the listener's serving threads start here, each
    /// with a single-threaded runtime of its own, and end before `serve` returns.
    ///
    /// # Errors
    ///
    /// [`GatewayError::ServingThreads`] when a serving thread or its runtime cannot be started
    /// (the threads already started are stopped).
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), GatewayError> {
        let Self {
            gateway,
            mcp,
            admin,
            ..
        } = self;
        let config = Arc::clone(&gateway.config);
        let builders = Arc::new(Builders::new(
            config.limits.header_read_timeout,
            config.limits.idle_connection_timeout,
        ));

        let owed = Owed {
            router: gateway.router.clone(),
            within: OWED_GRACE,
        };
        let graceful = Arc::new(GracefulShutdown::new());
        let (stop_mcp, stop_mcp_rx) = watch::channel(false);
        let accept_loop = {
            let tls = gateway.tls.clone();
            let service = gateway.service.clone();
            let builders = Arc::clone(&builders);
            let graceful = Arc::clone(&graceful);
            let limit = Arc::new(Semaphore::new(config.limits.max_connections.max(1)));
            move |listener| AcceptLoop {
                name: "mcp",
                listener,
                tls: tls.clone(),
                service: service.clone(),
                builders: Arc::clone(&builders),
                graceful: Arc::clone(&graceful),
                limit: Arc::clone(&limit),
            }
        };
        let mcp_serving = match mcp {
            McpListeners::Shared(listener) => {
                let accepting = accept_loop(listener);
                // Its `graceful` clone must go: the drain below needs the only one.
                drop(accept_loop);
                Serving::Shared(tokio::spawn(accepting.run(stop_mcp_rx)))
            }
            McpListeners::PerCore(listeners) => Serving::PerCore(
                Cores::start("mcp", listeners, accept_loop, &stop_mcp_rx, owed.clone())
                    .await
                    .map_err(GatewayError::ServingThreads)?,
            ),
        };

        let admin_graceful = Arc::new(GracefulShutdown::new());
        let (stop_admin, stop_admin_rx) = watch::channel(false);
        let admin_task = admin.map(|listener| {
            let admin_loop = AcceptLoop {
                name: "admin",
                listener,
                tls: None,
                service: gateway.admin_service(),
                builders: Arc::clone(&builders),
                graceful: Arc::clone(&admin_graceful),
                limit: Arc::new(Semaphore::new(256)),
            };
            tokio::spawn(admin_loop.run(stop_admin_rx))
        });

        let monitor = {
            let state = Arc::clone(&gateway.admin);
            tokio::spawn(async move {
                loop {
                    // Refreshes the store readiness gauge.
                    let _ = state.readiness().await;
                    metrics::record_cache(state.store.stats());
                    if let Some(handle) = &state.metrics {
                        handle.run_upkeep();
                    }
                    tokio::time::sleep(MONITOR_INTERVAL).await;
                }
            })
        };

        shutdown.await;
        let drain = config.shutdown_drain;
        tracing::info!(
            drain_s = drain.as_secs(),
            "shutdown requested: no new connections, draining in-flight requests"
        );
        gateway.admin.draining.store(true, Ordering::Release);
        let _ = stop_mcp.send(true);
        let connections = mcp_serving.stopped().await;
        match Arc::into_inner(graceful) {
            Some(graceful) => {
                if tokio::time::timeout(drain, graceful.shutdown())
                    .await
                    .is_ok()
                {
                    tracing::info!("drained: every in-flight request finished");
                } else {
                    tracing::warn!(
                        open = connections.len(),
                        "drain deadline reached; closing the remaining connections"
                    );
                }
            }
            None => tracing::warn!("connection watchers still shared; skipping the drain"),
        }
        let threads_settled = connections.close().await;
        if !(owed.settle().await && threads_settled) {
            tracing::warn!(
                within_s = OWED_GRACE.as_secs(),
                "shutdown: messages owed to backends (a 2025 backend's notifications/cancelled, \
                 an upstream session's DELETE) were not all sent"
            );
        }

        let _ = stop_admin.send(true);
        if let Some(task) = admin_task {
            let mut admin_connections = task.await.unwrap_or_else(|_| JoinSet::new());
            if let Some(graceful) = Arc::into_inner(admin_graceful) {
                let _ = tokio::time::timeout(ADMIN_DRAIN, graceful.shutdown()).await;
            }
            admin_connections.abort_all();
        }
        monitor.abort();
        tracing::info!("stopped");
        Ok(())
    }
}
