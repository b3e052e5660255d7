//! The process configuration of the reference gateway (book: docs/src/gateway.md).
//!
//! One TOML file, then `MCP_GATEWAY_*` environment variables, then command-line flags, in that
//! precedence ([`EffectiveConfig`]); every key, its type, default and environment name is in
//! [`KEYS`] (printed by `mcp-gateway config-keys`, reproduced in the book's configuration reference). The environment rule:
//! `MCP_GATEWAY_` + the key with `.` replaced by `_`, upper-cased ([`env_name`]).
//!
//! Relative paths written in a file (`config_store.path`, `listen.tls_cert`, `listen.tls_key`,
//! `auth.jwt.public_key_pem`), and the default `config_store.path` when a file is used, are
//! relative to that file's directory; paths from the environment or the command line are relative
//! to the working directory.
//!
//! Values this build cannot honour are rejected, never ignored. A session store that lacks what it needs (a Redis URL, a key
//! ring) is an error too; so is an invalid plugin document (`plugins.config`), when the gateway is
//! built.
//!
//! ```
//! use std::time::Duration;
//! use mcp_gateway::config::GatewayConfig;
//!
//! let config = GatewayConfig::from_toml_str(r#"
//!     [listen]
//!     addr = "127.0.0.1:0"
//!     admin_addr = ""
//!     [auth.jwt]
//!     issuers = ["https://a.example", "https://b.example"]
//!     leeway_s = 5
//!     verified_token_cache = 0
//! "#).unwrap();
//! assert_eq!(config.listen.admin_addr, None);
//! assert_eq!(config.auth.jwt.issuers, ["https://issuer.example", "https://a.example", "https://b.example"]);
//! assert_eq!(config.auth.jwt.leeway, Duration::from_secs(5));
//! assert_eq!(config.auth.jwt.verified_token_cache, 0);
//! assert_eq!(config.limits.max_body_bytes, 4 * 1024 * 1024);
//!
//! let err = GatewayConfig::from_toml_str("[sessions]\nkind = \"redis\"\n").unwrap_err();
//! assert!(err.to_string().contains("sessions.url: must be a redis://"), "{err}");
//! let err = GatewayConfig::from_toml_str("[plugins]\nreload_interval_ms = 0\n").unwrap_err();
//! assert!(err.to_string().contains("plugins.reload_interval_ms: must be at least 1"), "{err}");
//! ```

mod build;
mod error;
mod keys;
mod layers;
mod stdio_servers;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use jsonwebtoken::Algorithm;
use url::Url;

pub use error::{ConfigError, Problem, Source};
pub use keys::{
    DefaultValue, ENV_PREFIX, KEYS, KeySpec, Support, ValueKind, env_name, reference_markdown,
    reloadable,
};
pub use layers::{EffectiveConfig, InvalidAssignment, Override, Value};

/// The typed process configuration. Build it from TOML ([`from_toml_str`](Self::from_toml_str)),
/// from layered sources ([`EffectiveConfig::build`]), or start from [`Default`] and set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// `[listen]`.
    pub listen: ListenConfig,
    /// `[runtime]`: how the `mcp-gateway` binary runs its tasks, and whether
    /// [`Gateway::bind`](crate::Gateway::bind) binds one listener or one per serving thread.
    pub runtime: RuntimeConfig,
    /// `[limits]`.
    pub limits: LimitsConfig,
    /// `[auth]` and `[auth.jwt]`.
    pub auth: AuthConfig,
    /// `[config_store]`.
    pub config_store: UserStoreConfig,
    /// `[sessions]`: where 2025 client sessions live.
    pub sessions: SessionsConfig,
    /// `[breaker]`: circuit breaker defaults of every backend URL (a backend's `breaker` object in
    /// the user configuration overrides single keys).
    pub breaker: mcp_breaker::BreakerConfig,
    /// `[security]`.
    pub security: SecurityConfig,
    /// `[router]`.
    pub router: RouterConfig,
    /// `[plugins]`.
    pub plugins: PluginsConfig,
    /// `[backends]`.
    pub backends: BackendsConfig,
    /// `[telemetry]`.
    pub telemetry: TelemetryConfig,
    /// `shutdown_drain_s`: longest wait for in-flight requests and streams on shutdown.
    pub shutdown_drain: Duration,
    /// `config_watch_ms`: how often `mcp-gateway serve` checks its configuration file for a
    /// change to reload (zero: never; SIGHUP still reloads).
    pub config_watch: Duration,
    /// Where each key came from, for error messages.
    pub(crate) sources: BTreeMap<&'static str, Source>,
    /// Each key's value as read, so that a reload can tell which keys changed.
    pub(crate) values: KeyValues,
}

/// Each key's value as read. Its `Debug` shows none: some hold credentials (a Redis URL's
/// password) that the typed sections redact.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyValues(pub(crate) BTreeMap<&'static str, Value>);

impl std::fmt::Debug for KeyValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} keys>", self.0.len())
    }
}

/// `[listen]`: where the gateway accepts connections.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListenConfig {
    /// `addr`: the MCP endpoint listener.
    pub addr: SocketAddr,
    /// `admin_addr`: the admin listener (`None`: disabled).
    pub admin_addr: Option<SocketAddr>,
    /// `tls_cert` + `tls_key`: serve TLS on `addr`.
    pub tls: Option<TlsFiles>,
}

/// `[runtime]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// `mode`.
    pub mode: RuntimeMode,
    /// `threads`: worker threads (work-stealing) or serving threads (thread-per-core); 0 is one
    /// per core the process may use (see [`threads`](Self::threads)).
    pub threads: usize,
}

impl RuntimeConfig {
    /// The number of threads `threads` stands for: itself, or when 0 the parallelism the
    /// process may use (its CPU affinity and cgroup quota; 1 when unknown).
    pub fn threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            n => n,
        }
    }
}

/// `runtime.mode`: how requests are spread over threads (book: docs/src/performance.md,
/// "Thread per core").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeMode {
    /// `"work-stealing"`: one multi-threaded tokio runtime; any worker runs any connection's
    /// task, idle workers steal queued tasks.
    #[default]
    WorkStealing,
    /// `"thread-per-core"`: one single-threaded runtime per serving thread, each accepting on its
    /// own `SO_REUSEPORT` socket bound to `listen.addr` (the kernel spreads new connections over
    /// them); a connection, and the tasks it spawns, stay on the thread that accepted it.
    ThreadPerCore,
}

/// PEM files of the TLS listener.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsFiles {
    /// Certificate chain (leaf first).
    pub cert: PathBuf,
    /// Private key.
    pub key: PathBuf,
}

/// `[limits]`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LimitsConfig {
    /// `max_body_bytes`: larger request bodies get 413.
    pub max_body_bytes: usize,
    /// `max_mcp_headers`: more `Mcp-*` headers get 431.
    pub max_mcp_headers: usize,
    /// `max_mcp_header_bytes`: a longer `Mcp-*` header value gets 431.
    pub max_mcp_header_bytes: usize,
    /// `header_read_timeout_ms`: time to receive a request head (and complete a TLS handshake).
    pub header_read_timeout: Duration,
    /// `idle_connection_timeout_ms`: a connection with no request in flight this long is closed;
    /// also the h2 keep-alive PING interval.
    pub idle_connection_timeout: Duration,
    /// `max_connections`: most open client connections.
    pub max_connections: usize,
    /// `max_in_flight_per_principal`: most requests of one principal in flight (unset: a quarter
    /// of `max_connections`; never more than it); more get 429.
    pub max_in_flight_per_principal: usize,
    /// `max_sse_sessions`: most open 2024-11-05 SSE streams; more get 503.
    pub max_sse_sessions: usize,
    /// `max_sse_sessions_per_principal`: most open 2024-11-05 SSE streams of one principal; more
    /// get 429.
    pub max_sse_sessions_per_principal: usize,
    /// `max_sse_batch`: most messages in one batch posted to `…/messages`.
    pub max_sse_batch: usize,
    /// `sse_queued_bytes_per_principal`: bytes of events one principal's 2024-11-05 SSE clients
    /// have not read yet.
    pub sse_queued_bytes_per_principal: usize,
    /// `sse_queued_bytes`: the same for every principal on the node.
    pub sse_queued_bytes: usize,
    /// `max_streams_per_principal`: most open 2025 GET and 2026-07-28 listen streams of one
    /// principal.
    pub max_streams_per_principal: usize,
    /// `max_background_relays_per_principal`: most 2025 POST streams of one principal relayed at
    /// once.
    pub max_background_relays_per_principal: usize,
    /// `max_backends_per_vhost`: most backends of one virtual host in a user configuration.
    pub max_backends_per_vhost: usize,
    /// `max_relayed_requests`: most requests of the gateway's own waiting for a 2025 client's
    /// answer on this node.
    pub max_relayed_requests: usize,
    /// `max_relayed_requests_per_principal`: the same, for one principal.
    pub max_relayed_requests_per_principal: usize,
    /// `max_resource_subscriptions`: most resource subscriptions of one 2025 session or listen.
    pub max_resource_subscriptions: usize,
    /// `max_parked_calls`: most 2025 calls parked on the node for a 2026-07-28 client's retry.
    pub max_parked_calls: usize,
    /// `max_parked_calls_per_principal`: the same for one principal.
    pub max_parked_calls_per_principal: usize,
    /// `max_forwarded_retries`: most retries the node waits for another node to answer.
    pub max_forwarded_retries: usize,
    /// `max_forwarded_retries_per_principal`: the same for one principal.
    pub max_forwarded_retries_per_principal: usize,
    /// `forwarded_retry_bytes_per_principal`: bytes of forwarded answers one principal's
    /// clients have not read yet.
    pub forwarded_retry_bytes_per_principal: usize,
    /// `forwarded_retry_bytes`: the same for every principal on the node.
    pub forwarded_retry_bytes: usize,
    /// `stale_answer_bytes_per_principal`: bytes of one principal's stale-if-error answers.
    pub stale_answer_bytes_per_principal: usize,
    /// `stale_answer_bytes`: bytes of every principal's stale-if-error answers on the node.
    pub stale_answer_bytes: usize,
    /// `upstream_session_bytes_per_principal`: bytes of one principal's upstream 2025 sessions.
    pub upstream_session_bytes_per_principal: usize,
    /// `upstream_session_bytes`: bytes of every upstream 2025 session on the node.
    pub upstream_session_bytes: usize,
    /// `link_buffer_bytes_per_principal`: bytes linked backends sent one principal's calls that
    /// its clients have not read yet.
    pub link_buffer_bytes_per_principal: usize,
    /// `link_buffer_bytes`: the same for every principal on the node.
    pub link_buffer_bytes: usize,
    /// `link_call_buffer_bytes`: bytes a linked backend sent one call that its client has not
    /// read yet.
    pub link_call_buffer_bytes: usize,
    /// `link_call_buffer_messages`: the same in messages.
    pub link_call_buffer_messages: usize,
    /// `replay_bytes_per_session`: replay budget of one 2025 session.
    pub replay_bytes_per_session: usize,
    /// `replay_bytes_per_principal`: replay budget of all sessions of one principal.
    pub replay_bytes_per_principal: usize,
    /// `replay_bytes`: replay budget of the node.
    pub replay_bytes: usize,
}

/// `[auth]`: RFC 9728 metadata and token validation.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthConfig {
    /// `public_url`: the gateway's external base URL; `None`: derived from each request's `Host`.
    pub public_url: Option<Url>,
    /// `authorization_servers` (defaults to the issuers).
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`.
    pub scopes_supported: Vec<String>,
    /// `[auth.jwt]`.
    pub jwt: JwtConfig,
}

/// `[auth.jwt]`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JwtConfig {
    /// `issuer` + `issuers`, without duplicates.
    pub issuers: Vec<String>,
    /// `audience` + `audiences`, without duplicates.
    pub audiences: Vec<String>,
    /// `hs256_secret_env`: the environment variable holding the HS256 secret (`None`: no HS256).
    pub hs256_secret_env: Option<String>,
    /// `public_key_pem`: a PEM public key file.
    pub public_key_pem: Option<PathBuf>,
    /// `algorithms`: what the PEM key verifies.
    pub algorithms: Vec<Algorithm>,
    /// `algorithms` when set explicitly: also restricts JWKS keys.
    pub jwks_algorithms: Option<Vec<Algorithm>>,
    /// `jwks_url`.
    pub jwks_url: Option<String>,
    /// `jwks_refresh_s`.
    pub jwks_refresh: Duration,
    /// `leeway_s`.
    pub leeway: Duration,
    /// `verified_token_cache`: how many validated tokens are remembered (0: none).
    pub verified_token_cache: usize,
    /// `required_scopes`.
    pub required_scopes: Vec<String>,
}

/// `config_store.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreKind {
    /// A JSON or TOML file, reloaded on change.
    File,
    /// Redis.
    Redis,
}

impl StoreKind {
    /// The value of `config_store.kind`: `file` or `redis`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Redis => "redis",
        }
    }
}

/// `[config_store]`: where user configurations come from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserStoreConfig {
    /// `kind`.
    pub kind: StoreKind,
    /// `path` (file store).
    pub path: PathBuf,
    /// `url` (redis store).
    pub redis_url: String,
    /// `key_prefix` (redis store).
    pub key_prefix: String,
    /// `poll_interval_ms` (file store; `None`: not watched).
    pub poll_interval: Option<Duration>,
    /// `pool_size` (redis store).
    pub pool_size: usize,
    /// `cache_max_entries`.
    pub cache_max_entries: u64,
    /// `cache_ttl_s`.
    pub cache_ttl: Duration,
    /// `cache_negative_ttl_s`.
    pub cache_negative_ttl: Duration,
}

/// `[sessions]`: limits of the local store of 2025 client sessions.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionsConfig {
    /// `kind` with what it needs.
    pub kind: SessionsKind,
    /// `idle_timeout_s`.
    pub idle_timeout: Duration,
    /// `max_sessions`.
    pub max_sessions: usize,
    /// `max_per_principal`.
    pub max_per_principal: usize,
    /// `record_bytes_per_principal`: bytes of one principal's local session records.
    pub record_bytes_per_principal: usize,
    /// `record_bytes`: bytes of every local session record on the node.
    pub record_bytes: usize,
    /// `wait_replicas`: replicas that must confirm each Redis session write (0: none).
    pub wait_replicas: u32,
    /// `wait_timeout_ms`: how long a Redis session write waits for them.
    pub wait_timeout: Duration,
}

/// Where 2025 clients' sessions live (`sessions.kind`).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionsKind {
    /// `"local"`: this process.
    Local,
    /// `"redis"`: shared by every node.
    Redis {
        /// `sessions.url`.
        url: String,
    },
    /// `"sealed"`: the session id is the encrypted record.
    Sealed {
        /// The key ring read from the `sessions.keys_env` variable.
        keys: String,
        /// `sessions.url`, optional here: the Redis of the node bus.
        bus_url: Option<String>,
    },
}

impl std::fmt::Debug for SessionsKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // URLs may carry passwords and the key ring is secret.
        f.write_str(match self {
            Self::Local => "Local",
            Self::Redis { .. } => "Redis",
            Self::Sealed { .. } => "Sealed",
        })
    }
}

/// `[security]`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecurityConfig {
    /// `allowed_origins` (`["*"]`: any).
    pub allowed_origins: Vec<String>,
}

/// `[plugins]`: the plugin document (book: docs/src/plugins.md) and how it is reloaded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PluginsConfig {
    /// Where the document is: `config`, or `redis_url` + `redis_key`; `None`: no plugins.
    pub source: Option<PluginSource>,
    /// `reload_interval_ms`: how often the document is checked for changes.
    pub reload_interval: Duration,
    /// `keep_last_good`: an invalid reload keeps the last good chain.
    pub keep_last_good: bool,
}

/// `[backends]` and `[stdio_servers]`: what user configurations may ask of the gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackendsConfig {
    /// `stdio_allowed_commands`: programs user configurations may name as free-form stdio
    /// `command`s (without `args`, `cwd` or loader variables unless `trust_user_commands`).
    pub stdio_allowed_commands: Vec<String>,
    /// `trust_user_commands`: free-form stdio commands run as written.
    pub trust_user_commands: bool,
    /// `[stdio_servers.NAME]`: the operator's stdio server catalog.
    pub stdio_servers: BTreeMap<String, mcp_router::StdioServer>,
    /// `allow_destinations`: when not empty, the only destinations backends may connect to.
    pub allow_destinations: Vec<String>,
    /// `deny_destinations`: destinations backends may never connect to.
    pub deny_destinations: Vec<String>,
    /// `allow_authorization_passthrough`: `headers.passthrough` may name `Authorization`.
    pub allow_authorization_passthrough: bool,
    /// `tls_ca_file`: extra CA certificates (PEM) trusted for https backends.
    pub tls_ca_file: Option<PathBuf>,
    /// `tls_client_cert_file` and `tls_client_key_file`: the client certificate (PEM chain, PEM
    /// key) presented to https backends.
    pub tls_client_identity: Option<TlsFiles>,
}

impl BackendsConfig {
    /// The router's stdio rules for these settings.
    pub fn stdio_rules(&self) -> mcp_router::StdioRules {
        let mut rules = mcp_router::StdioRules::default();
        rules.servers.clone_from(&self.stdio_servers);
        rules
            .allowed_commands
            .clone_from(&self.stdio_allowed_commands);
        rules.trust_user_commands = self.trust_user_commands;
        rules
    }
}

/// Where the plugin document is read from (and re-read on every poll).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PluginSource {
    /// `plugins.config`: a file (relative to the configuration file).
    File(PathBuf),
    /// `plugins.redis_url` + `plugins.redis_key`: a string key in Redis.
    Redis {
        /// Server URL (may carry a password: never printed).
        url: String,
        /// The key.
        key: String,
    },
}

impl std::fmt::Debug for PluginSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Redis { key, .. } => f
                .debug_struct("Redis")
                .field("url", &"<redacted>")
                .field("key", key)
                .finish(),
        }
    }
}

/// `[router]`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouterConfig {
    /// `sealing_secret_env`: the environment variable holding the sealing secret.
    pub sealing_secret_env: Option<String>,
    /// `gateway_id`: this deployment's id in upstream requests' `Via`; `None`: derived from the
    /// sealing secret, else random per process.
    pub gateway_id: Option<String>,
    /// `max_hops`: most `Via` entries an incoming request may carry.
    pub max_hops: usize,
    /// `call_deadline_ms`: the longest a call may take when its backend sets no `deadline_ms`.
    pub call_deadline: Duration,
    /// `max_call_deadline_ms`: the ceiling on a backend's `deadline_ms`.
    pub max_call_deadline: Duration,
    /// `fanout_deadline_ms`.
    pub fanout_deadline: Duration,
    /// `max_name_len`.
    pub max_name_len: usize,
    /// `instructions`.
    pub instructions: Option<String>,
    /// `request_state_ttl_s`.
    pub request_state_ttl: Duration,
    /// `stale_if_error_s` (zero: off).
    pub stale_if_error: Duration,
    /// `upstream_connect_timeout_ms`.
    pub upstream_connect_timeout: Duration,
    /// `max_upstream_sessions`: most upstream 2025 sessions held at once.
    pub max_upstream_sessions: usize,
    /// `max_upstream_sessions_per_principal`: most upstream 2025 sessions one principal holds.
    pub max_upstream_sessions_per_principal: usize,
}

/// `telemetry.log_format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// `[telemetry]`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TelemetryConfig {
    /// `log_format`.
    pub log_format: LogFormat,
    /// `log_level` (a tracing filter directive).
    pub log_level: String,
    /// `access_log`: one info line per request.
    pub access_log: bool,
    /// `max_vhost_labels`: distinct `vhost` label values of the request metrics (then `other`).
    pub max_vhost_labels: usize,
    /// `max_backend_labels`: distinct `backend` label values of `mcp_gateway_breakers` (then
    /// `other`).
    pub max_backend_labels: usize,
    /// `otlp_endpoint`: the collector's OTLP/HTTP base URL (traces are off without it and
    /// without the `OTEL_EXPORTER_OTLP_*` endpoint variables).
    pub otlp_endpoint: Option<String>,
    /// `service_name`.
    pub service_name: String,
    /// `traces_sampler` (validated).
    pub traces_sampler: String,
    /// `traces_sampler_arg` (validated: a ratio from 0.0 to 1.0).
    pub traces_sampler_arg: Option<String>,
    /// `[telemetry.audit]`: the audit trail.
    pub audit: AuditConfig,
}

/// `[telemetry.audit]`: where the audit trail goes and what it may hold (book: telemetry.md,
/// "Audit trail").
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditConfig {
    /// `target` (with `path` for a file).
    pub target: AuditTarget,
    /// `payloads = "per_vhost"`: arguments and results are recorded for the virtual hosts that
    /// ask for it (`false`: `"never"`).
    pub payloads_per_vhost: bool,
    /// `max_payload_bytes`.
    pub max_payload_bytes: usize,
    /// `queue`: most records waiting for the writer.
    pub queue: usize,
}

/// `telemetry.audit.target`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuditTarget {
    /// No audit trail (the default).
    Off,
    /// JSON lines on the process's standard output.
    Stdout,
    /// JSON lines appended to this file (`telemetry.audit.path`).
    File(PathBuf),
}

impl GatewayConfig {
    /// Parses a TOML document over the defaults (no environment, no command line).
    ///
    /// # Errors
    ///
    /// Every problem, each naming its key.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        EffectiveConfig::from_toml_str(text, "configuration")?.build()
    }

    /// Where `key`'s value came from ([`Source::Code`] when unknown or set in code).
    pub fn source_of(&self, key: &str) -> Source {
        self.sources.get(key).cloned().unwrap_or(Source::Code)
    }

    /// A configuration problem attributed to `key`'s source.
    pub(crate) fn problem(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.source_of(key), key, message)
    }
}

impl Default for GatewayConfig {
    /// The documented defaults (every key of [`KEYS`] at its default).
    fn default() -> Self {
        EffectiveConfig::defaults()
            .build()
            .expect("the built-in defaults are a valid configuration")
    }
}
