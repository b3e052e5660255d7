//! [`EffectiveConfig::build`]: typed values and the checks that span several keys.
//!
//! Why this file is long: every key is read here once, with its bounds, and the checks that
//! span keys need them all in one place; its tests follow.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use jsonwebtoken::Algorithm;
use mcp_config_store::RedisTopology;
use url::Url;

use super::error::{ConfigError, Problems, Source};

/// The least `limits.upstream_session_bytes*` may be: an upstream session with the largest
/// `InitializeResult` kept (256 KiB), its session id and its record.
const MIN_SESSION_BYTES: u64 = 512 * 1024;
/// The least `limits.link_buffer_bytes*` may be.
const MIN_LINK_BUFFER_BYTES: u64 = 64 * 1024;
/// The least `limits.sse_queued_bytes*` and `limits.forwarded_retry_bytes*` may be: room for a
/// few events or parts queued for a client.
const MIN_QUEUED_BYTES: u64 = 64 * 1024;
use super::layers::{EffectiveConfig, Value};
use super::{
    AuditConfig, AuditTarget, AuthConfig, BackendsConfig, GatewayConfig, JwtConfig, LimitsConfig,
    ListenConfig, LogFormat, PluginSource, PluginsConfig, RouterConfig, RuntimeConfig, RuntimeMode,
    SecurityConfig, SessionsConfig, SessionsKind, StoreKind, TelemetryConfig, TlsFiles,
    UserStoreConfig,
};

/// Reads typed values out of an [`EffectiveConfig`], collecting problems.
struct Reader<'a> {
    config: &'a EffectiveConfig,
    problems: Problems,
}

impl<'a> Reader<'a> {
    fn source(&self, key: &str) -> Source {
        self.config
            .get(key)
            .map_or(Source::Default, |(_, s)| s.clone())
    }

    fn fail(&mut self, key: &str, message: impl Into<String>) {
        let source = self.source(key);
        self.problems.push(&source, key, message);
    }

    /// A string, `None` when unset or empty.
    fn opt_str(&self, key: &str) -> Option<&'a str> {
        match self.config.get(key) {
            Some((Value::Str(s), _)) if !s.trim().is_empty() => Some(s.as_str()),
            _ => None,
        }
    }

    fn str(&self, key: &str) -> &'a str {
        self.opt_str(key).unwrap_or("")
    }

    fn int(&self, key: &str) -> u64 {
        match self.config.get(key) {
            Some((Value::Int(i), _)) => u64::try_from(*i).unwrap_or(0),
            _ => 0,
        }
    }

    /// An integer that must be at least 1.
    fn positive(&mut self, key: &str) -> u64 {
        let value = self.int(key);
        if value == 0 {
            self.fail(key, "must be at least 1");
        }
        value
    }

    fn usize(&mut self, key: &str, min: u64) -> usize {
        let value = self.int(key);
        if value < min {
            self.fail(key, format!("must be at least {min}"));
        }
        usize::try_from(value).unwrap_or(usize::MAX)
    }

    fn bool(&self, key: &str) -> bool {
        matches!(self.config.get(key), Some((Value::Bool(true), _)))
    }

    fn list(&self, key: &str) -> Vec<String> {
        match self.config.get(key) {
            Some((Value::List(items), _)) => items.clone(),
            _ => Vec::new(),
        }
    }

    fn is_set(&self, key: &str) -> bool {
        self.config.get(key).is_some()
    }

    fn secs(&mut self, key: &str) -> Duration {
        Duration::from_secs(self.int(key))
    }

    fn millis(&mut self, key: &str) -> Duration {
        Duration::from_millis(self.int(key))
    }

    fn socket_addr(&mut self, key: &str) -> Option<SocketAddr> {
        let text = self.opt_str(key)?;
        match resolve_addr(text) {
            Ok(addr) => Some(addr),
            Err(message) => {
                self.fail(key, message);
                None
            }
        }
    }

    /// A path; a relative path written in a file is relative to that file's directory.
    fn path(&self, key: &str) -> Option<PathBuf> {
        let text = self.opt_str(key)?;
        let path = PathBuf::from(text);
        if path.is_absolute() {
            return Some(path);
        }
        // Written in a file: relative to it. A default: relative to the configuration file, when
        // there is one (users.json next to gateway.toml). Environment / command line: the cwd.
        let base = match self.source(key) {
            Source::File(file) => Some(file),
            Source::Default => self.config.file.clone(),
            _ => None,
        };
        Some(
            base.as_deref()
                .and_then(|file| file.parent())
                .filter(|dir| !dir.as_os_str().is_empty())
                .map_or_else(|| path.clone(), |dir| dir.join(&path)),
        )
    }

    fn algorithms(&mut self, key: &str) -> Vec<Algorithm> {
        let mut out = Vec::new();
        for name in self.list(key) {
            match Algorithm::from_str(name.trim()) {
                Ok(alg @ (Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)) => self.fail(
                    key,
                    format!(
                        "{alg:?} is an HMAC algorithm; HMAC secrets come from auth.jwt.hs256_secret_env"
                    ),
                ),
                Ok(alg) => {
                    if !out.contains(&alg) {
                        out.push(alg);
                    }
                }
                Err(_) => self.fail(
                    key,
                    format!(
                        "unknown algorithm `{name}` (RS256/384/512, PS256/384/512, ES256, ES384, EdDSA)"
                    ),
                ),
            }
        }
        out
    }
}

/// `host:port` with a literal IP or `localhost`.
fn resolve_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some(port) = text.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(format!(
        "`{text}` is not a socket address (expected IP:PORT, e.g. 127.0.0.1:8080 or [::1]:8080)"
    ))
}

fn union(first: Option<&str>, rest: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in first.map(str::to_owned).into_iter().chain(rest) {
        let item = item.trim().to_owned();
        if !item.is_empty() && !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn env_var_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

impl EffectiveConfig {
    /// The typed configuration.
    ///
    /// # Errors
    ///
    /// Every value that does not parse (addresses, URLs, algorithms, enums) and every
    /// inconsistency between keys (a TLS certificate without key, no issuer, no audience, a store
    /// kind without its settings, an unsupported session store), each naming its key and source.
    pub fn build(&self) -> Result<GatewayConfig, ConfigError> {
        let mut r = Reader {
            config: self,
            problems: Problems::default(),
        };

        // [listen]
        let addr = r
            .socket_addr("listen.addr")
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
        if r.opt_str("listen.addr").is_none() {
            r.fail("listen.addr", "must be set");
        }
        let admin_addr = r.socket_addr("listen.admin_addr");
        let tls = match (r.path("listen.tls_cert"), r.path("listen.tls_key")) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (None, None) => None,
            (Some(_), None) => {
                r.fail(
                    "listen.tls_cert",
                    "needs listen.tls_key (the certificate's private key)",
                );
                None
            }
            (None, Some(_)) => {
                r.fail(
                    "listen.tls_key",
                    "needs listen.tls_cert (the certificate chain)",
                );
                None
            }
        };
        let listen = ListenConfig {
            addr,
            admin_addr,
            tls,
        };

        // [runtime]
        let mode = match r.str("runtime.mode") {
            "work-stealing" => RuntimeMode::WorkStealing,
            "thread-per-core" if cfg!(any(target_os = "linux", target_os = "android")) => {
                RuntimeMode::ThreadPerCore
            }
            "thread-per-core" => {
                r.fail(
                    "runtime.mode",
                    "\"thread-per-core\" needs Linux (its SO_REUSEPORT spreads connections over the threads' sockets)",
                );
                RuntimeMode::WorkStealing
            }
            other => {
                r.fail(
                    "runtime.mode",
                    format!("unknown mode `{other}` (\"work-stealing\" or \"thread-per-core\")"),
                );
                RuntimeMode::WorkStealing
            }
        };
        let threads = r.usize("runtime.threads", 0);
        if threads > MAX_THREADS {
            r.fail(
                "runtime.threads",
                format!("must be at most {MAX_THREADS} (0: one per core)"),
            );
        }
        let runtime = RuntimeConfig {
            mode,
            threads: threads.min(MAX_THREADS),
        };

        // [limits]
        let max_connections = r.usize("limits.max_connections", 1);
        // Unset: a quarter of the connections, so at least three other principals always find
        // one; set: never more than all of them.
        let max_in_flight_per_principal = match r.config.get("limits.max_in_flight_per_principal") {
            None => (max_connections / 4).max(1),
            Some(_) => r
                .usize("limits.max_in_flight_per_principal", 1)
                .min(max_connections),
        };
        let limits = LimitsConfig {
            max_body_bytes: r.usize("limits.max_body_bytes", 1),
            max_mcp_headers: r.usize("limits.max_mcp_headers", 1),
            max_mcp_header_bytes: r.usize("limits.max_mcp_header_bytes", 1),
            header_read_timeout: Duration::from_millis(r.positive("limits.header_read_timeout_ms")),
            idle_connection_timeout: Duration::from_millis(
                r.positive("limits.idle_connection_timeout_ms"),
            ),
            max_connections,
            max_in_flight_per_principal,
            max_sse_sessions: r.usize("limits.max_sse_sessions", 1),
            max_sse_sessions_per_principal: r.usize("limits.max_sse_sessions_per_principal", 1),
            max_sse_batch: r.usize("limits.max_sse_batch", 1),
            sse_queued_bytes_per_principal: r
                .usize("limits.sse_queued_bytes_per_principal", MIN_QUEUED_BYTES),
            sse_queued_bytes: r.usize("limits.sse_queued_bytes", MIN_QUEUED_BYTES),
            max_streams_per_principal: r.usize("limits.max_streams_per_principal", 1),
            max_background_relays_per_principal: r
                .usize("limits.max_background_relays_per_principal", 1),
            max_backends_per_vhost: r.usize("limits.max_backends_per_vhost", 1),
            max_relayed_requests: r.usize("limits.max_relayed_requests", 1),
            max_relayed_requests_per_principal: r
                .usize("limits.max_relayed_requests_per_principal", 1),
            max_resource_subscriptions: r.usize("limits.max_resource_subscriptions", 1),
            max_parked_calls: r.usize("limits.max_parked_calls", 1),
            max_parked_calls_per_principal: r.usize("limits.max_parked_calls_per_principal", 1),
            max_forwarded_retries: r.usize("limits.max_forwarded_retries", 1),
            max_forwarded_retries_per_principal: r
                .usize("limits.max_forwarded_retries_per_principal", 1),
            // Room for a part of an answer, or every forwarded answer would end at once.
            forwarded_retry_bytes_per_principal: r.usize(
                "limits.forwarded_retry_bytes_per_principal",
                MIN_QUEUED_BYTES,
            ),
            forwarded_retry_bytes: r.usize("limits.forwarded_retry_bytes", MIN_QUEUED_BYTES),
            stale_answer_bytes_per_principal: r.usize("limits.stale_answer_bytes_per_principal", 0),
            stale_answer_bytes: r.usize("limits.stale_answer_bytes", 0),
            // One session of the largest kept kind must fit, or none would ever be kept.
            upstream_session_bytes_per_principal: r.usize(
                "limits.upstream_session_bytes_per_principal",
                MIN_SESSION_BYTES,
            ),
            upstream_session_bytes: r.usize("limits.upstream_session_bytes", MIN_SESSION_BYTES),
            // Room for a few messages, or every notification would fail its call.
            link_buffer_bytes_per_principal: r.usize(
                "limits.link_buffer_bytes_per_principal",
                MIN_LINK_BUFFER_BYTES,
            ),
            link_buffer_bytes: r.usize("limits.link_buffer_bytes", MIN_LINK_BUFFER_BYTES),
            link_call_buffer_bytes: r.usize("limits.link_call_buffer_bytes", MIN_LINK_BUFFER_BYTES),
            link_call_buffer_messages: r.usize("limits.link_call_buffer_messages", 1),
            replay_bytes_per_session: r.usize("limits.replay_bytes_per_session", 0),
            replay_bytes_per_principal: r.usize("limits.replay_bytes_per_principal", 0),
            replay_bytes: r.usize("limits.replay_bytes", 0),
        };

        // [auth.jwt]
        let issuers = union(r.opt_str("auth.jwt.issuer"), r.list("auth.jwt.issuers"));
        if issuers.is_empty() {
            r.fail(
                "auth.jwt.issuer",
                "no issuer configured (set auth.jwt.issuer or auth.jwt.issuers)",
            );
        }
        let audiences = union(r.opt_str("auth.jwt.audience"), r.list("auth.jwt.audiences"));
        if audiences.is_empty() {
            r.fail(
                "auth.jwt.audience",
                "no audience configured (the audience is always checked; set auth.jwt.audience or auth.jwt.audiences)",
            );
        }
        let hs256_secret_env = r.opt_str("auth.jwt.hs256_secret_env").map(str::to_owned);
        if let Some(name) = &hs256_secret_env
            && !env_var_name_ok(name)
        {
            r.fail(
                "auth.jwt.hs256_secret_env",
                format!("`{name}` is not an environment variable name (the secret itself never goes in the configuration)"),
            );
        }
        let algorithms = r.algorithms("auth.jwt.algorithms");
        let algorithms_explicit = matches!(
            self.get("auth.jwt.algorithms"),
            Some((_, source)) if *source != Source::Default
        );
        if algorithms.is_empty() && r.is_set("auth.jwt.public_key_pem") {
            r.fail(
                "auth.jwt.algorithms",
                "the public key must be bound to at least one algorithm",
            );
        }
        let jwks_url = r.opt_str("auth.jwt.jwks_url").map(str::to_owned);
        if let Some(url) = &jwks_url {
            match Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => r.fail(
                    "auth.jwt.jwks_url",
                    "must be an absolute http:// or https:// URL",
                ),
            }
        }
        let jwt = JwtConfig {
            issuers: issuers.clone(),
            audiences,
            hs256_secret_env,
            public_key_pem: r.path("auth.jwt.public_key_pem"),
            algorithms: algorithms.clone(),
            jwks_algorithms: algorithms_explicit.then_some(algorithms),
            jwks_url,
            jwks_refresh: Duration::from_secs(r.positive("auth.jwt.jwks_refresh_s")),
            leeway: r.secs("auth.jwt.leeway_s"),
            verified_token_cache: r.usize("auth.jwt.verified_token_cache", 0),
            required_scopes: union(None, r.list("auth.jwt.required_scopes")),
        };

        // [auth]
        let public_url = match r.opt_str("auth.public_url") {
            None => None,
            Some(text) => match Url::parse(text) {
                Ok(url)
                    if matches!(url.scheme(), "http" | "https")
                        && url.host().is_some()
                        && url.query().is_none()
                        && url.fragment().is_none() =>
                {
                    Some(url)
                }
                _ => {
                    r.fail(
                        "auth.public_url",
                        format!("`{text}` must be an absolute http(s) URL without query or fragment, e.g. https://gw.example"),
                    );
                    None
                }
            },
        };
        let authorization_servers = if r.is_set("auth.authorization_servers") {
            union(None, r.list("auth.authorization_servers"))
        } else {
            issuers
        };
        let auth = AuthConfig {
            public_url,
            authorization_servers,
            scopes_supported: union(None, r.list("auth.scopes_supported")),
            jwt,
        };

        // [config_store]
        let kind = match r.str("config_store.kind") {
            "file" => StoreKind::File,
            "redis" => StoreKind::Redis,
            other => {
                r.fail(
                    "config_store.kind",
                    format!("unknown kind `{other}` (\"file\" or \"redis\")"),
                );
                StoreKind::File
            }
        };
        let path = r.path("config_store.path").unwrap_or_default();
        if kind == StoreKind::File && path.as_os_str().is_empty() {
            r.fail("config_store.path", "the file store needs a path");
        }
        let redis_url = r.str("config_store.url").to_owned();
        if kind == StoreKind::Redis
            && let Err(e) = RedisTopology::parse(&redis_url)
        {
            r.fail("config_store.url", format!("{REDIS_URL_EXPECTED}: {e}"));
        }
        let key_prefix = r.str("config_store.key_prefix").to_owned();
        if kind == StoreKind::Redis
            && (key_prefix.is_empty()
                || key_prefix
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control()))
        {
            r.fail(
                "config_store.key_prefix",
                "must be non-empty, without whitespace or control characters",
            );
        }
        let poll = r.int("config_store.poll_interval_ms");
        let config_store = UserStoreConfig {
            kind,
            path,
            redis_url,
            key_prefix,
            poll_interval: (poll > 0).then(|| Duration::from_millis(poll)),
            pool_size: r.usize("config_store.pool_size", 1),
            cache_max_entries: r.positive("config_store.cache_max_entries"),
            cache_ttl: r.secs("config_store.cache_ttl_s"),
            cache_negative_ttl: r.secs("config_store.cache_negative_ttl_s"),
        };

        // [sessions]
        let kind = match r.str("sessions.kind") {
            "local" => SessionsKind::Local,
            "redis" => {
                let url = r.opt_str("sessions.url").unwrap_or("").to_owned();
                if let Err(e) = RedisTopology::parse(&url) {
                    r.fail(
                        "sessions.url",
                        format!("{REDIS_URL_EXPECTED} when sessions.kind = \"redis\": {e}"),
                    );
                }
                SessionsKind::Redis { url }
            }
            "sealed" => {
                let keys = match r.opt_str("sessions.keys_env") {
                    None => {
                        r.fail("sessions.keys_env", "must name the environment variable holding the key ring when sessions.kind = \"sealed\"");
                        String::new()
                    }
                    Some(var) => match std::env::var(var) {
                        Ok(keys) => {
                            if let Err(e) = mcp_router::session::KeyRing::parse(&keys) {
                                r.fail(
                                    "sessions.keys_env",
                                    format!("the key ring in ${var} is invalid: {e}"),
                                );
                            }
                            keys
                        }
                        Err(_) => {
                            r.fail(
                                "sessions.keys_env",
                                format!("the environment variable {var} is not set"),
                            );
                            String::new()
                        }
                    },
                };
                // Optional with sealed ids: the Redis of the node bus (revocations, answers and
                // cancellations reach every node).
                let bus_url = r.opt_str("sessions.url").map(str::to_owned);
                if let Some(Err(e)) = bus_url.as_deref().map(RedisTopology::parse) {
                    r.fail(
                        "sessions.url",
                        format!("{REDIS_URL_EXPECTED} (the node bus) when set with sessions.kind = \"sealed\": {e}"),
                    );
                }
                SessionsKind::Sealed { keys, bus_url }
            }
            other => {
                r.fail(
                    "sessions.kind",
                    format!("unknown kind `{other}` (\"local\", \"redis\" or \"sealed\")"),
                );
                SessionsKind::Local
            }
        };
        if r.int("sessions.wait_replicas") > 0
            && matches!(&kind, SessionsKind::Redis { url } if url.starts_with("redis+cluster://"))
        {
            // The client sends WAIT to every primary and answers with the least count: one shard
            // short of replicas would fail every session write, whatever shard it lands on.
            r.fail(
                "sessions.wait_replicas",
                "must be 0 with a Redis Cluster (redis+cluster://): WAIT would be asked of every \
                 shard, not the one holding the session; use Sentinel for confirmed writes"
                    .to_owned(),
            );
        }
        let sessions = SessionsConfig {
            kind,
            idle_timeout: Duration::from_secs(r.positive("sessions.idle_timeout_s")),
            max_sessions: r.usize("sessions.max_sessions", 1),
            max_per_principal: r.usize("sessions.max_per_principal", 1),
            record_bytes_per_principal: r.usize("sessions.record_bytes_per_principal", 1),
            record_bytes: r.usize("sessions.record_bytes", 1),
            wait_replicas: u32::try_from(r.int("sessions.wait_replicas")).unwrap_or(u32::MAX),
            wait_timeout: Duration::from_millis(r.positive("sessions.wait_timeout_ms")),
        };

        // [breaker]
        let mut breaker = mcp_breaker::BreakerConfig::default();
        breaker.consecutive_failures =
            u32::try_from(r.int("breaker.consecutive_failures")).unwrap_or(u32::MAX);
        breaker.open_ms = r.int("breaker.open_ms");
        breaker.max_open_ms = r
            .is_set("breaker.max_open_ms")
            .then(|| r.int("breaker.max_open_ms"));
        breaker.half_open_probes =
            u32::try_from(r.int("breaker.half_open_probes")).unwrap_or(u32::MAX);
        if let Err(e) = breaker.validate() {
            // The message names the field (`breaker.<field>: ...`).
            let text = e.to_string();
            let (key, message) = match text.split_once(": ") {
                Some((key, message)) if key.starts_with("breaker.") => {
                    (key.to_owned(), message.to_owned())
                }
                _ => ("breaker".to_owned(), text.clone()),
            };
            let key = if crate::config::keys::find(&key).is_some() {
                key
            } else {
                "breaker".to_owned()
            };
            r.fail(&key, message);
        }

        // [backends]
        let backends = BackendsConfig {
            stdio_allowed_commands: r.list("backends.stdio_allowed_commands"),
            trust_user_commands: r.bool("backends.trust_user_commands"),
            stdio_servers: self.stdio_servers.servers(),
            allow_destinations: r.list("backends.allow_destinations"),
            deny_destinations: r.list("backends.deny_destinations"),
            allow_authorization_passthrough: r.bool("backends.allow_authorization_passthrough"),
            tls_ca_file: r.path("backends.tls_ca_file"),
            tls_client_identity: match (
                r.path("backends.tls_client_cert_file"),
                r.path("backends.tls_client_key_file"),
            ) {
                (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
                (None, None) => None,
                (Some(_), None) => {
                    r.fail(
                        "backends.tls_client_cert_file",
                        "needs backends.tls_client_key_file (the certificate's private key)",
                    );
                    None
                }
                (None, Some(_)) => {
                    r.fail(
                        "backends.tls_client_key_file",
                        "needs backends.tls_client_cert_file (the certificate chain)",
                    );
                    None
                }
            },
        };
        for key in ["backends.allow_destinations", "backends.deny_destinations"] {
            for entry in r.list(key) {
                if let Err(reason) = mcp_router::DestinationPolicy::check_entry(&entry) {
                    r.fail(key, reason.to_string());
                }
            }
        }

        // [security]
        let allowed_origins = r.list("security.allowed_origins");
        for origin in &allowed_origins {
            let ok = origin == "*"
                || Url::parse(origin).is_ok_and(|u| {
                    u.host().is_some() && matches!(u.path(), "" | "/") && u.query().is_none()
                });
            if !ok {
                r.fail(
                    "security.allowed_origins",
                    format!("`{origin}` is not an origin (scheme://host[:port], or \"*\")"),
                );
            }
        }
        let security = SecurityConfig { allowed_origins };

        // [plugins]
        let file = r.path("plugins.config");
        let redis_url = r.opt_str("plugins.redis_url").map(str::to_owned);
        let redis_key = r.opt_str("plugins.redis_key").map(str::to_owned);
        let source = match (file, redis_url, redis_key) {
            (None, None, None) => None,
            (Some(path), None, None) => Some(PluginSource::File(path)),
            (None, Some(url), Some(key)) => {
                if let Err(e) = RedisTopology::parse(&url) {
                    r.fail("plugins.redis_url", format!("{REDIS_URL_EXPECTED}: {e}"));
                }
                Some(PluginSource::Redis { url, key })
            }
            (Some(_), _, _) => {
                r.fail(
                    "plugins.config",
                    "set either plugins.config or plugins.redis_url + plugins.redis_key, not both",
                );
                None
            }
            (None, _, _) => {
                r.fail(
                    "plugins.redis_url",
                    "plugins.redis_url and plugins.redis_key go together",
                );
                None
            }
        };
        let plugins = PluginsConfig {
            source,
            reload_interval: Duration::from_millis(r.positive("plugins.reload_interval_ms")),
            keep_last_good: r.bool("plugins.keep_last_good"),
        };

        // [router]
        let sealing_secret_env = r.opt_str("router.sealing_secret_env").map(str::to_owned);
        if let Some(name) = &sealing_secret_env
            && !env_var_name_ok(name)
        {
            r.fail(
                "router.sealing_secret_env",
                format!("`{name}` is not an environment variable name"),
            );
        }
        let gateway_id = r.opt_str("router.gateway_id").map(str::to_owned);
        if let Some(id) = &gateway_id
            && (id.is_empty()
                || id.len() > 64
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
        {
            r.fail(
                "router.gateway_id",
                "must be 1-64 letters, digits, `-`, `_` or `.`",
            );
        }
        let router = RouterConfig {
            sealing_secret_env,
            gateway_id,
            max_hops: r.usize("router.max_hops", 1),
            call_deadline: Duration::from_millis(r.positive("router.call_deadline_ms")),
            max_call_deadline: Duration::from_millis(r.positive("router.max_call_deadline_ms")),
            fanout_deadline: Duration::from_millis(r.positive("router.fanout_deadline_ms")),
            max_name_len: r.usize("router.max_name_len", 1),
            instructions: r.opt_str("router.instructions").map(str::to_owned),
            request_state_ttl: Duration::from_secs(r.positive("router.request_state_ttl_s")),
            stale_if_error: r.secs("router.stale_if_error_s"),
            upstream_connect_timeout: r.millis("router.upstream_connect_timeout_ms"),
            max_upstream_sessions: r.usize("router.max_upstream_sessions", 1),
            max_upstream_sessions_per_principal: r
                .usize("router.max_upstream_sessions_per_principal", 1),
        };
        if router.upstream_connect_timeout.is_zero() {
            r.fail("router.upstream_connect_timeout_ms", "must be at least 1");
        }

        // [telemetry]
        let log_format = match r.str("telemetry.log_format") {
            "pretty" => LogFormat::Pretty,
            "json" => LogFormat::Json,
            other => {
                r.fail(
                    "telemetry.log_format",
                    format!("unknown format `{other}` (\"pretty\" or \"json\")"),
                );
                LogFormat::Pretty
            }
        };
        let log_level = r.str("telemetry.log_level").to_owned();
        if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(&log_level) {
            r.fail(
                "telemetry.log_level",
                format!("`{log_level}` is not a tracing filter: {e}"),
            );
        }
        let otlp_endpoint = r.opt_str("telemetry.otlp_endpoint").map(str::to_owned);
        if let Some(endpoint) = &otlp_endpoint
            && !matches!(url::Url::parse(endpoint), Ok(u) if matches!(u.scheme(), "http" | "https"))
        {
            r.fail(
                "telemetry.otlp_endpoint",
                format!("`{endpoint}` is not an http(s) URL"),
            );
        }
        let traces_sampler = r.str("telemetry.traces_sampler").to_owned();
        if !crate::telemetry::SAMPLERS.contains(&traces_sampler.as_str()) {
            r.fail(
                "telemetry.traces_sampler",
                format!(
                    "unknown sampler `{traces_sampler}` (one of {})",
                    crate::telemetry::SAMPLERS.join(", ")
                ),
            );
        }
        let traces_sampler_arg =
            r.opt_str("telemetry.traces_sampler_arg").and_then(|arg| {
                match arg.trim().parse::<f64>() {
                    Ok(ratio) if (0.0..=1.0).contains(&ratio) => Some(arg.trim().to_owned()),
                    _ => {
                        r.fail(
                            "telemetry.traces_sampler_arg",
                            format!("`{arg}` is not a ratio from 0.0 to 1.0"),
                        );
                        None
                    }
                }
            });
        let audit = audit_config(&mut r);
        let telemetry = TelemetryConfig {
            log_format,
            log_level,
            access_log: r.bool("telemetry.access_log"),
            max_vhost_labels: r.usize("telemetry.max_vhost_labels", 1),
            max_backend_labels: r.usize("telemetry.max_backend_labels", 1),
            otlp_endpoint,
            service_name: r.str("telemetry.service_name").to_owned(),
            traces_sampler,
            traces_sampler_arg,
            audit,
        };

        let shutdown_drain = r.secs("shutdown_drain_s");
        let config_watch = r.millis("config_watch_ms");
        if !config_watch.is_zero() && config_watch < Duration::from_millis(100) {
            // Each check reads the file: a typo must not make it a busy loop.
            r.fail("config_watch_ms", "must be 0 (no watch) or at least 100");
        }
        let sources: BTreeMap<&'static str, Source> = self
            .values
            .iter()
            .map(|(key, entry)| (*key, entry.source.clone()))
            .collect();
        let values = super::KeyValues(
            self.values
                .iter()
                .map(|(key, entry)| (*key, entry.value.clone()))
                .collect(),
        );
        r.problems.into_result()?;
        Ok(GatewayConfig {
            listen,
            runtime,
            limits,
            auth,
            config_store,
            sessions,
            breaker,
            security,
            router,
            plugins,
            backends,
            telemetry,
            shutdown_drain,
            config_watch,
            sources,
            values,
        })
    }
}

/// Most records `telemetry.audit.queue` may hold: each is up to twice
/// `telemetry.audit.max_payload_bytes` plus a kilobyte or two, so a typo must not let the queue
/// hold gigabytes.
const MAX_AUDIT_QUEUE: u64 = 1 << 20;

/// `[telemetry.audit]`.
fn audit_config(r: &mut Reader<'_>) -> AuditConfig {
    let target = match r.str("telemetry.audit.target") {
        "off" => AuditTarget::Off,
        "stdout" => AuditTarget::Stdout,
        "file" => match r.path("telemetry.audit.path") {
            Some(path) => AuditTarget::File(path),
            None => {
                r.fail(
                    "telemetry.audit.target",
                    "\"file\" needs telemetry.audit.path (the file records are appended to)",
                );
                AuditTarget::Off
            }
        },
        "otlp" => {
            r.fail(
                "telemetry.audit.target",
                "\"otlp\": this build has no OTLP logs exporter (\"off\", \"stdout\" or \"file\")",
            );
            AuditTarget::Off
        }
        other => {
            r.fail(
                "telemetry.audit.target",
                format!("unknown target `{other}` (\"off\", \"stdout\" or \"file\")"),
            );
            AuditTarget::Off
        }
    };
    let payloads_per_vhost = match r.str("telemetry.audit.payloads") {
        "never" => false,
        "per_vhost" => true,
        other => {
            r.fail(
                "telemetry.audit.payloads",
                format!("unknown rule `{other}` (\"never\" or \"per_vhost\")"),
            );
            false
        }
    };
    let queue = r.usize("telemetry.audit.queue", 1);
    if queue as u64 > MAX_AUDIT_QUEUE {
        r.fail(
            "telemetry.audit.queue",
            format!("must be at most {MAX_AUDIT_QUEUE}"),
        );
    }
    AuditConfig {
        target,
        payloads_per_vhost,
        max_payload_bytes: r.usize("telemetry.audit.max_payload_bytes", 0),
        queue,
    }
}

/// Most threads `runtime.threads` may ask for: each is an OS thread, a socket (thread-per-core)
/// and a lane in every credential scope's keep-alive pool, so a typo must not make thousands.
const MAX_THREADS: usize = 1024;

/// The start of every "not a Redis URL" message (the rest says why, never repeating the URL).
const REDIS_URL_EXPECTED: &str =
    "must be a redis:// (or rediss://, redis+sentinel://, redis+cluster://) URL";

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn errors(toml: &str) -> Vec<String> {
        GatewayConfig::from_toml_str(toml)
            .expect_err("invalid")
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn defaults_build() {
        let c = GatewayConfig::default();
        assert_eq!(c.listen.addr, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!(
            c.listen.admin_addr,
            Some(SocketAddr::from(([127, 0, 0, 1], 9090)))
        );
        assert_eq!(c.auth.jwt.issuers, ["https://issuer.example"]);
        assert_eq!(c.auth.jwt.audiences, ["mcp-gateway"]);
        assert_eq!(
            c.auth.jwt.hs256_secret_env.as_deref(),
            Some("MCP_GATEWAY_JWT_SECRET")
        );
        assert_eq!(c.auth.jwt.algorithms, [Algorithm::RS256]);
        assert_eq!(c.auth.jwt.jwks_algorithms, None);
        assert_eq!(c.auth.authorization_servers, ["https://issuer.example"]);
        assert_eq!(c.config_store.kind, StoreKind::File);
        assert_eq!(c.config_store.path, PathBuf::from("users.json"));
        assert_eq!(c.security.allowed_origins, ["http://localhost"]);
        assert_eq!(c.shutdown_drain, Duration::from_secs(30));
        assert_eq!(c.telemetry.log_format, LogFormat::Pretty);
        assert_eq!(c.source_of("listen.addr"), Source::Default);
        // The documented [breaker] defaults are the breaker crate's.
        assert_eq!(c.breaker, mcp_breaker::BreakerConfig::default());
        assert_eq!(c.sessions.idle_timeout, Duration::from_secs(1800));
    }

    #[test]
    fn cross_key_problems_are_reported_together() {
        let e = errors(
            "[listen]\naddr = \"nowhere\"\ntls_cert = \"c.pem\"\n[auth.jwt]\nissuer = \"\"\nalgorithms = [\"HS256\", \"XX1\"]\n[config_store]\nkind = \"mongo\"\n[sessions]\nkind = \"sealed\"\n[plugins]\nreload_interval_ms = 0\n[security]\nallowed_origins = [\"localhost\"]\n[telemetry]\nlog_format = \"xml\"\n[breaker]\nhalf_open_probes = 0\n",
        );
        let joined = e.join("\n");
        for needle in [
            "configuration: listen.addr: `nowhere` is not a socket address",
            "listen.tls_cert: needs listen.tls_key",
            "auth.jwt.issuer: no issuer configured",
            "auth.jwt.algorithms: HS256 is an HMAC algorithm",
            "auth.jwt.algorithms: unknown algorithm `XX1`",
            "config_store.kind: unknown kind `mongo`",
            "sessions.keys_env: must name the environment variable holding the key ring",
            "plugins.reload_interval_ms: must be at least 1",
            "security.allowed_origins: `localhost` is not an origin",
            "telemetry.log_format: unknown format `xml`",
            "configuration: breaker.half_open_probes: ",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in\n{joined}");
        }
    }

    #[test]
    fn relative_paths_follow_the_file() {
        let c = EffectiveConfig::from_toml_str(
            "[config_store]\npath = \"users.json\"\n[auth.jwt]\npublic_key_pem = \"/abs/k.pem\"\n",
            "/etc/mcp/gateway.toml",
        )
        .expect("valid")
        .build()
        .expect("valid");
        assert_eq!(c.config_store.path, PathBuf::from("/etc/mcp/users.json"));
        assert_eq!(
            c.auth.jwt.public_key_pem.as_deref(),
            Some(Path::new("/abs/k.pem"))
        );
        let c = GatewayConfig::from_toml_str(
            "[auth]\npublic_url = \"https://gw.example/base\"\nauthorization_servers = [\"https://as.example\"]\n[auth.jwt]\nalgorithms = [\"ES256\"]\naudiences = [\"mcp-gateway\", \"other\"]\n",
        )
        .expect("valid");
        assert_eq!(c.auth.authorization_servers, ["https://as.example"]);
        assert_eq!(c.auth.jwt.audiences, ["mcp-gateway", "other"]);
        assert_eq!(c.auth.jwt.jwks_algorithms, Some(vec![Algorithm::ES256]));
        assert_eq!(
            c.auth.public_url.as_ref().map(Url::as_str),
            Some("https://gw.example/base")
        );
    }

    #[test]
    fn audit_keys_are_validated() {
        let c = GatewayConfig::default();
        assert_eq!(c.telemetry.audit.target, AuditTarget::Off);
        assert!(!c.telemetry.audit.payloads_per_vhost);
        assert_eq!(
            (c.telemetry.audit.max_payload_bytes, c.telemetry.audit.queue),
            (4096, 1024)
        );
        let problems =
            errors("[telemetry.audit]\ntarget = \"file\"\npayloads = \"always\"\nqueue = 0\n");
        assert_eq!(
            problems,
            [
                "configuration: telemetry.audit.target: \"file\" needs telemetry.audit.path (the file records are appended to)",
                "configuration: telemetry.audit.payloads: unknown rule `always` (\"never\" or \"per_vhost\")",
                "configuration: telemetry.audit.queue: must be at least 1",
            ]
        );
        let otlp = errors("[telemetry.audit]\ntarget = \"otlp\"\n");
        assert!(otlp[0].contains("no OTLP logs exporter"), "{otlp:?}");
        let c = GatewayConfig::from_toml_str(
            "[telemetry.audit]\ntarget = \"file\"\npath = \"/var/log/audit.jsonl\"\npayloads = \"per_vhost\"\n",
        )
        .expect("valid");
        assert_eq!(
            c.telemetry.audit.target,
            AuditTarget::File("/var/log/audit.jsonl".into())
        );
        assert!(c.telemetry.audit.payloads_per_vhost);
    }

    #[test]
    fn telemetry_trace_keys_are_validated() {
        let joined = errors(
            "[telemetry]\notlp_endpoint = \"collector:4318\"\ntraces_sampler = \"sometimes\"\ntraces_sampler_arg = \"1.5\"\n",
        )
        .join("\n");
        for needle in [
            "telemetry.otlp_endpoint: `collector:4318` is not an http(s) URL",
            "telemetry.traces_sampler: unknown sampler `sometimes` (one of always_on, always_off",
            "telemetry.traces_sampler_arg: `1.5` is not a ratio from 0.0 to 1.0",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in\n{joined}");
        }
        let c = GatewayConfig::from_toml_str(
            "[telemetry]\notlp_endpoint = \"http://collector:4318\"\ntraces_sampler = \"parentbased_traceidratio\"\ntraces_sampler_arg = \"0.25\"\n",
        )
        .expect("valid");
        assert_eq!(
            c.telemetry.otlp_endpoint.as_deref(),
            Some("http://collector:4318")
        );
        assert_eq!(c.telemetry.traces_sampler_arg.as_deref(), Some("0.25"));
        assert_eq!(c.telemetry.service_name, "mcp-gateway");
        // Off by default.
        let c = GatewayConfig::from_toml_str("").expect("valid");
        assert_eq!(c.telemetry.otlp_endpoint, None);
        assert_eq!(c.telemetry.traces_sampler, "parentbased_always_on");
    }

    #[test]
    fn confirmed_session_writes_are_refused_with_a_cluster() {
        let joined = errors(
            "[sessions]\nkind = \"redis\"\nurl = \"redis+cluster://127.0.0.1:7000,127.0.0.1:7001\"\nwait_replicas = 1\n",
        )
        .join("\n");
        assert!(
            joined.contains("sessions.wait_replicas: must be 0 with a Redis Cluster"),
            "{joined}"
        );
        // Control: the same with Sentinel, or a Cluster without waiting, is valid.
        for toml in [
            "[sessions]\nkind = \"redis\"\nurl = \"redis+sentinel://127.0.0.1:26379/mymaster\"\nwait_replicas = 1\n",
            "[sessions]\nkind = \"redis\"\nurl = \"redis+cluster://127.0.0.1:7000\"\nwait_replicas = 0\n",
        ] {
            GatewayConfig::from_toml_str(toml).expect("valid");
        }
    }

    #[test]
    fn runtime_mode_and_threads() {
        let c = GatewayConfig::default();
        assert_eq!(c.runtime.mode, RuntimeMode::WorkStealing);
        assert_eq!(c.runtime.threads, 0);
        assert_eq!(
            c.runtime.threads(),
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        );
        let c =
            GatewayConfig::from_toml_str("[runtime]\nmode = \"thread-per-core\"\nthreads = 3\n")
                .expect("valid");
        assert_eq!(c.runtime.mode, RuntimeMode::ThreadPerCore);
        assert_eq!(c.runtime.threads(), 3);
        let e = errors("[runtime]\nmode = \"per-core\"\nthreads = 5000\n").join("\n");
        assert!(
            e.contains("runtime.threads: must be at most 1024 (0: one per core)"),
            "{e}"
        );
        assert!(
            e.contains(
                "runtime.mode: unknown mode `per-core` (\"work-stealing\" or \"thread-per-core\")"
            ),
            "{e}"
        );
    }

    #[test]
    fn empty_admin_addr_disables_and_localhost_resolves() {
        let c =
            GatewayConfig::from_toml_str("[listen]\naddr = \"localhost:0\"\nadmin_addr = \"\"\n")
                .expect("valid");
        assert_eq!(c.listen.admin_addr, None);
        assert_eq!(c.listen.addr, SocketAddr::from(([127, 0, 0, 1], 0)));
    }
}
