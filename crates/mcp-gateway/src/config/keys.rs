//! The table of every process configuration key: the single source used by the file and
//! environment loaders, validation, `--print-config` and the book's configuration reference.
//!
//! The environment rule is the same for every key: `MCP_GATEWAY_` followed by the key with `.`
//! replaced by `_`, upper-cased (`listen.addr` -> `MCP_GATEWAY_LISTEN_ADDR`,
//! `auth.jwt.issuer` -> `MCP_GATEWAY_AUTH_JWT_ISSUER`). See [`env_name`].
//!
//! Why this file is long: it is one declarative table, a few lines per key.

/// The prefix of every environment variable that overrides a key.
pub const ENV_PREFIX: &str = "MCP_GATEWAY_";

/// The type of a key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueKind {
    /// A string (in the environment: taken as is).
    String,
    /// A non-negative integer.
    Integer,
    /// `true` or `false` (in the environment also `1`/`0`, `yes`/`no`, `on`/`off`).
    Bool,
    /// A list of strings (in the environment: comma-separated, empty for an empty list).
    StringList,
}

impl ValueKind {
    /// How the type is written in documentation.
    pub const fn describe(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Bool => "bool",
            Self::StringList => "list of strings",
        }
    }
}

/// A key's default value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefaultValue {
    /// No default: the key is unset unless configured.
    Unset,
    /// A string.
    Str(&'static str),
    /// An integer.
    Int(i64),
    /// A bool.
    Bool(bool),
    /// A list of strings.
    List(&'static [&'static str]),
}

/// Whether this build of the gateway honours a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Support {
    /// Honoured.
    Supported,
    /// Named by the operator contract but not in this build: any value is rejected with this
    /// feature name in the message.
    NotInThisBuild(&'static str),
}

/// One configuration key.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct KeySpec {
    /// The dotted key, e.g. `listen.addr`.
    pub key: &'static str,
    /// Its value type.
    pub kind: ValueKind,
    /// Its default.
    pub default: DefaultValue,
    /// Whether the value can hold a secret (a URL with a password): `--print-config` redacts the
    /// password part.
    pub secret: bool,
    /// Whether this build honours it.
    pub support: Support,
    /// One line of documentation.
    pub doc: &'static str,
}

impl KeySpec {
    /// The section part of the key (`auth.jwt` for `auth.jwt.issuer`, `""` for a top-level key).
    pub fn section(&self) -> &'static str {
        self.key.rsplit_once('.').map_or("", |(section, _)| section)
    }

    /// The last part of the key (`issuer` for `auth.jwt.issuer`).
    pub fn leaf(&self) -> &'static str {
        self.key.rsplit_once('.').map_or(self.key, |(_, leaf)| leaf)
    }

    /// The environment variable that overrides the key.
    pub fn env_name(&self) -> String {
        env_name(self.key)
    }
}

/// The environment variable that overrides `key`: `MCP_GATEWAY_` + key with `.` -> `_`,
/// upper-cased.
///
/// ```
/// assert_eq!(mcp_gateway::config::env_name("listen.addr"), "MCP_GATEWAY_LISTEN_ADDR");
/// assert_eq!(mcp_gateway::config::env_name("auth.jwt.issuer"), "MCP_GATEWAY_AUTH_JWT_ISSUER");
/// ```
pub fn env_name(key: &str) -> String {
    let mut name = String::with_capacity(ENV_PREFIX.len() + key.len());
    name.push_str(ENV_PREFIX);
    name.extend(key.chars().map(|c| {
        if c == '.' {
            '_'
        } else {
            c.to_ascii_uppercase()
        }
    }));
    name
}

/// Looks a key up.
pub(crate) fn find(key: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|spec| spec.key == key)
}

/// Every section name (`listen`, `auth`, `auth.jwt`, ...), in table order, without duplicates.
pub(crate) fn sections() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for spec in KEYS {
        let section = spec.section();
        if section.is_empty() {
            continue;
        }
        // Parents first (`auth` before `auth.jwt`).
        for (i, c) in section.char_indices() {
            if c == '.' {
                let parent = &section[..i];
                if !out.contains(&parent) {
                    out.push(parent);
                }
            }
        }
        if !out.contains(&section) {
            out.push(section);
        }
    }
    out
}

/// Whether a running gateway applies a change of `key` on a reload (SIGHUP, or a change of the
/// watched file; [`Reloader`](crate::Reloader)), some only in some cases (see
/// [`Reloader::reload`](crate::Reloader::reload)); a change of any other key refuses the reload.
/// `telemetry.log_level` is applied by whoever installed the log subscriber
/// ([`Telemetry::set_log_level`](crate::Telemetry::set_log_level); the binary does).
///
/// ```
/// use mcp_gateway::config::reloadable;
///
/// assert!(reloadable("auth.jwt.jwks_url"));
/// assert!(reloadable("listen.tls_cert"));
/// assert!(!reloadable("listen.addr"));
/// ```
#[must_use]
pub fn reloadable(key: &str) -> bool {
    key.starts_with("auth.jwt.")
        || matches!(
            key,
            "listen.tls_cert"
                | "listen.tls_key"
                | "limits.max_mcp_headers"
                | "limits.max_mcp_header_bytes"
                | "backends.stdio_allowed_commands"
                | "backends.trust_user_commands"
                | "backends.allow_destinations"
                | "backends.deny_destinations"
                | "sessions.keys_env"
                | "telemetry.log_level"
                | "config_watch_ms"
        )
}

/// The configuration reference as a Markdown table (key, type, default, environment variable,
/// description); the book's configuration reference is this text (`cargo xtask config-reference`).
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "| key | type | default | environment variable | description |\n|---|---|---|---|---|\n",
    );
    for spec in KEYS {
        let default = match spec.default {
            DefaultValue::Unset => "(unset)".to_owned(),
            DefaultValue::Str(s) => format!("`{s:?}`"),
            DefaultValue::Int(i) => format!("`{i}`"),
            DefaultValue::Bool(b) => format!("`{b}`"),
            DefaultValue::List(items) => format!("`{items:?}`"),
        };
        let doc = match spec.support {
            Support::Supported if reloadable(spec.key) => {
                format!("{}; applied by a reload", spec.doc)
            }
            Support::Supported => spec.doc.to_owned(),
            Support::NotInThisBuild(feature) => {
                format!("{}; **not in this build** ({feature}): rejected", spec.doc)
            }
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | `{}` | {} |\n",
            spec.key,
            spec.kind.describe(),
            default.replace('|', "\\|"),
            spec.env_name(),
            // Escaped for Markdown: a `|` would end the cell, `[...]` reads as a link.
            doc.replace('|', "\\|")
                .replace('[', "\\[")
                .replace(']', "\\]"),
        ));
    }
    out
}

use DefaultValue::{Bool, Int, List, Str, Unset};
use Support::Supported;
use ValueKind::{Bool as B, Integer as I, String as S, StringList as L};

const fn key(
    key: &'static str,
    kind: ValueKind,
    default: DefaultValue,
    doc: &'static str,
) -> KeySpec {
    KeySpec {
        key,
        kind,
        default,
        secret: false,
        support: Supported,
        doc,
    }
}

const fn secret(mut spec: KeySpec) -> KeySpec {
    spec.secret = true;
    spec
}

/// Every key, grouped by section, in the order the book's reference and `--print-config` show them.
pub static KEYS: &[KeySpec] = &[
    key(
        "shutdown_drain_s",
        I,
        Int(30),
        "on SIGTERM/SIGINT: stop accepting, then wait at most this long for in-flight requests and streams",
    ),
    key(
        "config_watch_ms",
        I,
        Int(2000),
        "mcp-gateway serve: how often the configuration file is checked for a change, which reloads it like SIGHUP once the new content stayed the same for one more check (book: deploying.md, reload); 0 turns the watch off (SIGHUP still reloads), else at least 100",
    ),
    // [listen]
    key(
        "listen.addr",
        S,
        Str("127.0.0.1:8080"),
        "MCP endpoint listener: http(s)://addr/servers/{vhost}/mcp (port 0 picks a free port)",
    ),
    key(
        "listen.admin_addr",
        S,
        Str("127.0.0.1:9090"),
        "admin listener (/metrics /healthz /readyz), plain HTTP; \"\" disables it",
    ),
    key(
        "listen.tls_cert",
        S,
        Unset,
        "PEM certificate chain: serve TLS (HTTP/1.1 and h2 via ALPN) on listen.addr; needs listen.tls_key",
    ),
    key(
        "listen.tls_key",
        S,
        Unset,
        "PEM private key (PKCS#8, PKCS#1 or SEC1) for listen.tls_cert",
    ),
    // [limits]
    key(
        "limits.max_body_bytes",
        I,
        Int(4 * 1024 * 1024),
        "largest request body; larger ones get 413",
    ),
    key(
        "limits.max_mcp_headers",
        I,
        Int(64),
        "most Mcp-* request headers; more get 431",
    ),
    key(
        "limits.max_mcp_header_bytes",
        I,
        Int(8192),
        "largest value of one Mcp-* request header; larger get 431",
    ),
    key(
        "limits.header_read_timeout_ms",
        I,
        Int(10_000),
        "time allowed for a client to send the request head (and finish the TLS handshake); an h2 connection that opens no stream within it after accept (e.g. only the preface) is closed",
    ),
    key(
        "limits.idle_connection_timeout_ms",
        I,
        Int(60_000),
        "a connection (HTTP/1.1 or h2) with no request in flight for this long is closed; also the h2 keep-alive PING interval (a peer that does not answer within header_read_timeout_ms is dropped)",
    ),
    key(
        "limits.max_connections",
        I,
        Int(10_000),
        "most open client connections on listen.addr; further clients wait unread (in the accept backlog, and one accepted per serving thread)",
    ),
    key(
        "limits.max_in_flight_per_principal",
        I,
        Unset,
        "most requests of one principal in flight at once (an open stream counts until it ends), so one principal cannot hold every connection; more get 429 with Retry-After (and Connection: close on HTTP/1.1); unset: a quarter of max_connections; never more than max_connections",
    ),
    key(
        "limits.max_sse_sessions",
        I,
        Int(1024),
        "most open 2024-11-05 SSE streams (virtual hosts with sse_downstream); more get 503",
    ),
    key(
        "limits.max_sse_sessions_per_principal",
        I,
        Int(16),
        "most open 2024-11-05 SSE streams of one principal; more get 429 while other principals still connect",
    ),
    key(
        "limits.sse_queued_bytes_per_principal",
        I,
        Int(16 * 1024 * 1024),
        "bytes of events one principal's 2024-11-05 SSE clients have not read yet, all its sessions together (each also holds at most 64 events); past it a session with events queued takes nothing more from its backends until its client reads (backpressure: nothing is dropped), and a session with nothing queued sends one event at a time; at least 65536",
    ),
    key(
        "limits.sse_queued_bytes",
        I,
        Int(256 * 1024 * 1024),
        "the same for every principal on this node together (at least 65536)",
    ),
    key(
        "limits.max_sse_batch",
        I,
        Int(32),
        "most JSON-RPC messages in one batch posted to an SSE session's …/messages; more get 400 (-32600); each message counts against the session's 64 in flight",
    ),
    key(
        "limits.max_streams_per_principal",
        I,
        Int(256),
        "most open notification streams of one principal on a node (2025 GET streams and 2026-07-28 subscriptions/listen); more get 429 (-32600). A stream whose client went away silently counts until the gateway next writes to it",
    ),
    key(
        "limits.max_background_relays_per_principal",
        I,
        Int(64),
        "most 2025 POST response streams of one principal relayed at once (they outlive a disconnect for Last-Event-ID); a call over it gets -32600 and is cancelled upstream",
    ),
    key(
        "limits.max_backends_per_vhost",
        I,
        Int(64),
        "most backends one virtual host of a user configuration may have (each is one more upstream request per list call); a configuration with more is refused at load (500, the finding logged) and by check-config and users put, naming this key",
    ),
    key(
        "limits.max_relayed_requests",
        I,
        Int(100_000),
        "most requests of the gateway's own waiting for a 2025 client's answer on a node (a stdio or HTTP+SSE backend's sampling, elicitation or roots request, a modern backend's input request bridged for a 2025 client); a call whose backend asks past it fails with -32603 naming the limit",
    ),
    key(
        "limits.max_relayed_requests_per_principal",
        I,
        Int(1000),
        "the same for one principal: its backends asking past it fail its own call (-32603 naming the limit), never another principal's",
    ),
    key(
        "limits.max_parked_calls",
        I,
        Int(10_000),
        "most 2025 calls parked on a node while they wait for a 2026-07-28 client's input_required retry; a backend request that finds no room is declined (its call goes on without the input)",
    ),
    key(
        "limits.max_parked_calls_per_principal",
        I,
        Int(100),
        "the same for one principal (never more than limits.max_parked_calls): past it that principal's backend requests are declined, never another principal's",
    ),
    key(
        "limits.max_forwarded_retries",
        I,
        Int(10_000),
        "most 2026-07-28 retries a node has passed on to the node holding their parked call (Redis node bus) and waits for; past it a retry is answered like one whose call is gone (-32602)",
    ),
    key(
        "limits.max_forwarded_retries_per_principal",
        I,
        Int(100),
        "the same for one principal",
    ),
    key(
        "limits.forwarded_retry_bytes_per_principal",
        I,
        Int(16 * 1024 * 1024),
        "bytes of forwarded retries' answers that arrived and one principal's clients have not read yet; past it the answer ends early, as when a part is lost between the nodes (pub/sub cannot be told to wait)",
    ),
    key(
        "limits.forwarded_retry_bytes",
        I,
        Int(256 * 1024 * 1024),
        "the same for every principal on the node together",
    ),
    key(
        "limits.max_resource_subscriptions",
        I,
        Int(256),
        "most resource URIs one 2025 session subscribes to (resources/subscribe) and one subscriptions/listen names; more get -32600",
    ),
    key(
        "limits.stale_answer_bytes_per_principal",
        I,
        Int(16 * 1024 * 1024),
        "bytes of last good list/discover answers kept for one principal's stale-if-error (router.stale_if_error_s); past it its own oldest answers leave, and an answer heavier than this is not kept",
    ),
    key(
        "limits.stale_answer_bytes",
        I,
        Int(256 * 1024 * 1024),
        "bytes of last good answers kept for stale-if-error on this node, all principals together",
    ),
    key(
        "limits.upstream_session_bytes_per_principal",
        I,
        Int(4 * 1024 * 1024),
        "bytes one principal's upstream 2025 sessions may weigh (mostly the backends' initialize results, each at most 256 KiB); past it its own oldest session is given up (it idles out at the backend; a later call initialises anew); at least 524288",
    ),
    key(
        "limits.upstream_session_bytes",
        I,
        Int(256 * 1024 * 1024),
        "bytes every upstream 2025 session on this node may weigh together (at least 524288)",
    ),
    key(
        "limits.link_call_buffer_bytes",
        I,
        Int(1024 * 1024),
        "bytes a linked backend (stdio, HTTP+SSE) sent one call that its client has not read yet: the link reads for every call on it, so it cannot stop for one; a message past it fails the call (-32603 naming this key) and cancels it upstream; raise it where backends send large notifications; at least 65536",
    ),
    key(
        "limits.link_call_buffer_messages",
        I,
        Int(1024),
        "the same in messages (many small ones cost more than their bytes)",
    ),
    key(
        "limits.link_buffer_bytes_per_principal",
        I,
        Int(16 * 1024 * 1024),
        "bytes linked backends (stdio, HTTP+SSE) sent one principal's calls that its clients have not read yet, all its calls together (each call also holds at most limits.link_call_buffer_bytes), and what its links keep of their backends' descriptions; a message past it fails the call it was for (-32603 naming this key) and cancels it upstream; a call's response is always kept and counts here, not towards limits.link_buffer_bytes; at least 65536",
    ),
    key(
        "limits.link_buffer_bytes",
        I,
        Int(256 * 1024 * 1024),
        "the same for every principal on this node together (at least 65536)",
    ),
    key(
        "limits.replay_bytes_per_session",
        I,
        Int(1024 * 1024),
        "bytes of events kept for one 2025 session's Last-Event-ID replay; over it the session's oldest events are dropped",
    ),
    key(
        "limits.replay_bytes_per_principal",
        I,
        Int(16 * 1024 * 1024),
        "bytes of replay events kept for all 2025 sessions of one principal; over it new events are sent but not kept (never another principal's dropped)",
    ),
    key(
        "limits.replay_bytes",
        I,
        Int(256 * 1024 * 1024),
        "bytes of replay events kept on a node in all; when full, new events are sent but not kept",
    ),
    // [auth]
    key(
        "auth.public_url",
        S,
        Unset,
        "external base URL (e.g. https://gw.example) for RFC 9728 `resource` and `resource_metadata`; unset: from the request's Host header",
    ),
    key(
        "auth.authorization_servers",
        L,
        Unset,
        "RFC 9728 authorization_servers; unset: the configured issuers",
    ),
    key(
        "auth.scopes_supported",
        L,
        List(&[]),
        "RFC 9728 scopes_supported",
    ),
    // [auth.jwt]
    key(
        "auth.jwt.issuer",
        S,
        Str("https://issuer.example"),
        "accepted token issuer (iss); combined with auth.jwt.issuers",
    ),
    key(
        "auth.jwt.issuers",
        L,
        List(&[]),
        "more accepted issuers, each verified with the same keys",
    ),
    key(
        "auth.jwt.audience",
        S,
        Str("mcp-gateway"),
        "accepted audience (aud, always checked); combined with auth.jwt.audiences",
    ),
    key(
        "auth.jwt.audiences",
        L,
        List(&[]),
        "more accepted audiences",
    ),
    key(
        "auth.jwt.hs256_secret_env",
        S,
        Str("MCP_GATEWAY_JWT_SECRET"),
        "name of the environment variable holding the HS256 secret (also used by `mcp-gateway token`); \"\" disables HS256; left unset, HS256 is off when `public_key_pem` or `jwks_url` is set, and deprecated otherwise (set it explicitly)",
    ),
    key(
        "auth.jwt.public_key_pem",
        S,
        Unset,
        "path of a PEM public key (RSA, EC P-256/P-384, Ed25519) bound to auth.jwt.algorithms",
    ),
    key(
        "auth.jwt.algorithms",
        L,
        List(&["RS256"]),
        "algorithms accepted with auth.jwt.public_key_pem (and, when set explicitly, with auth.jwt.jwks_url keys)",
    ),
    secret(key(
        "auth.jwt.jwks_url",
        S,
        Unset,
        "JWKS URL (http or https), fetched on first use, cached, refreshed, kid-selected",
    )),
    key(
        "auth.jwt.jwks_refresh_s",
        I,
        Int(300),
        "age after which the JWKS is refreshed in the background",
    ),
    key(
        "auth.jwt.leeway_s",
        I,
        Int(30),
        "clock skew tolerated on exp and nbf",
    ),
    key(
        "auth.jwt.verified_token_cache",
        I,
        Int(10000),
        "validated tokens whose claims are reused until exp (no second signature check); 0 turns it off",
    ),
    key(
        "auth.jwt.required_scopes",
        L,
        List(&[]),
        "scopes every token must carry (403 insufficient_scope otherwise)",
    ),
    // [config_store]
    key(
        "config_store.kind",
        S,
        Str("file"),
        "where user configs live: \"file\" or \"redis\"",
    ),
    key(
        "config_store.path",
        S,
        Str("users.json"),
        "file store: JSON or TOML { \"users\": { \"<sub>\": <UserConfig> } }, reloaded on change",
    ),
    secret(key(
        "config_store.url",
        S,
        Str("redis://127.0.0.1:6379"),
        "redis store: server URL; redis+sentinel://host:26379,host2:26379/<master>[/db] for Sentinel, redis+cluster://host:7000,host2:7001 for a Cluster (a password in it is redacted by --print-config)",
    )),
    key(
        "config_store.key_prefix",
        S,
        Str("mcpgw"),
        "redis store: keys are <key_prefix>:user:<sub>",
    ),
    key(
        "config_store.poll_interval_ms",
        I,
        Int(1000),
        "file store: how often the file is checked for changes; 0 disables reloading",
    ),
    key(
        "config_store.pool_size",
        I,
        Int(16),
        "redis store: pooled connections",
    ),
    key(
        "config_store.cache_max_entries",
        I,
        Int(10_000),
        "user config cache: most cached subjects",
    ),
    key(
        "config_store.cache_ttl_s",
        I,
        Int(60),
        "user config cache: lifetime of an entry (a safety net: stores invalidate on change)",
    ),
    key(
        "config_store.cache_negative_ttl_s",
        I,
        Int(5),
        "user config cache: lifetime of a \"no configuration\" answer",
    ),
    // [sessions]
    key(
        "sessions.kind",
        S,
        Str("local"),
        "where 2025 clients' sessions live: \"local\" (this process; needs sticky routing across nodes), \"redis\" (shared by every node; sessions.url), \"sealed\" (stateless: the session id is the encrypted record; sessions.keys_env, optional sessions.url for the node bus)",
    ),
    key(
        "sessions.idle_timeout_s",
        I,
        Int(1800),
        "local and redis stores: a session unused this long is forgotten (the client re-initializes); sealed store: a session's whole lifetime (the id expires this long after initialize, however busy)",
    ),
    key(
        "sessions.max_sessions",
        I,
        Int(100_000),
        "local store: most sessions at once; sealed store: most ended (DELETEd) sessions this node refuses until they expire (a DELETE over it gets 429)",
    ),
    key(
        "sessions.max_per_principal",
        I,
        Int(1000),
        "local and Redis stores: most sessions of one principal at once (sessions past idle_timeout_s stop counting); sealed store: most ended sessions of one principal remembered at once (its share of max_sessions)",
    ),
    key(
        "sessions.record_bytes_per_principal",
        I,
        Int(16 * 1024 * 1024),
        "local store: bytes one principal's session records may weigh together (the client's capabilities, subscriptions, the backends' session ids); a session or an update past it is refused with 503 -32603 naming this key (sessions past idle_timeout_s stop counting)",
    ),
    key(
        "sessions.record_bytes",
        I,
        Int(512 * 1024 * 1024),
        "local store: bytes every session record on this node may weigh together",
    ),
    secret(key(
        "sessions.url",
        S,
        Unset,
        "redis store: Redis URL, Sentinel or Cluster URLs as config_store.url (sessions under `mcpgw:session:<id>`, refreshed on use, idle_timeout_s TTL); sealed store (optional): Redis of the node bus, so a DELETE revokes the id on every node",
    )),
    key(
        "sessions.wait_replicas",
        I,
        Int(0),
        "redis store: replicas that must confirm every session write (`WAIT`) before it is answered; fewer within wait_timeout_ms is a 503 the client retries; 0: do not wait (a failover can lose the last writes)",
    ),
    key(
        "sessions.wait_timeout_ms",
        I,
        Int(100),
        "redis store: how long a session write waits for sessions.wait_replicas confirmations",
    ),
    key(
        "sessions.keys_env",
        S,
        Unset,
        "sealed store: the environment variable holding the key ring `id:base64key[,id:base64key...]` (32-byte keys, newest first)",
    ),
    // [breaker]
    key(
        "breaker.consecutive_failures",
        I,
        Int(5),
        "per credential scope (backend address, credentials, principal): failures in a row that open its breaker (a backend's \"breaker\" object overrides any breaker key)",
    ),
    key(
        "breaker.open_ms",
        I,
        Int(5000),
        "first open period; it grows on repeated trips, jittered",
    ),
    key(
        "breaker.max_open_ms",
        I,
        Unset,
        "cap of the open period; unset: max(60000, open_ms)",
    ),
    key(
        "breaker.half_open_probes",
        I,
        Int(1),
        "probe calls admitted at once when the open period ends",
    ),
    // [backends]
    key(
        "backends.stdio_allowed_commands",
        L,
        List(&[]),
        "programs a user config may name as a free-form stdio `command` (compared verbatim, found on the gateway's PATH); without trust_user_commands such a backend may not set `args`, `cwd` or `env` keys that change how programs load or run (PATH, LD_*, DYLD_*, NODE_*, PYTHON*, ...): use a [stdio_servers.NAME] entry instead. A command not listed is refused when the user configuration is loaded, and never started",
    ),
    key(
        "backends.trust_user_commands",
        B,
        Bool(false),
        "the operator trusts user config authors: free-form stdio backends (`command` with any `args`, `env`, `cwd`) are run, and their `stdio_policy = \"shared\"` is honoured; false: stdio backends come from [stdio_servers.NAME] (or stdio_allowed_commands)",
    ),
    key(
        "backends.allow_destinations",
        L,
        List(&[]),
        "when not empty, the only destinations backend connections may reach: CIDRs (10.0.0.0/8), addresses, host names as written in URLs (api.example.com, *.example.com); an address or CIDR entry also lifts the built-in denial of the link-local and metadata addresses it covers (a host-name entry never does)",
    ),
    key(
        "backends.deny_destinations",
        L,
        List(&[]),
        "destinations backend connections may never reach (CIDRs, addresses, host names), checked on the connected address (DNS answers included); wins over allow_destinations. Always denied: the gateway's own listeners and auth.public_url's host and port; denied unless an address entry of allow_destinations covers them: 169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, 192.0.0.192, 168.63.129.16",
    ),
    key(
        "backends.tls_ca_file",
        S,
        Unset,
        "PEM file of CA certificates trusted for https backends in addition to the platform's roots (a private PKI)",
    ),
    key(
        "backends.tls_client_cert_file",
        S,
        Unset,
        "PEM certificate chain presented to https backends that ask for a client certificate (mutual TLS); needs backends.tls_client_key_file",
    ),
    key(
        "backends.tls_client_key_file",
        S,
        Unset,
        "PEM private key of backends.tls_client_cert_file",
    ),
    key(
        "backends.allow_authorization_passthrough",
        B,
        Bool(false),
        "user configs may list `Authorization` in `headers.passthrough` (forwarding the caller's gateway token to a backend); false: such a configuration is refused when loaded",
    ),
    // [security]
    key(
        "security.allowed_origins",
        L,
        List(&["http://localhost"]),
        "accepted browser Origin values (an entry without port matches every port); requests without Origin are accepted; [\"*\"] accepts any",
    ),
    // [plugins]
    key(
        "plugins.config",
        S,
        Unset,
        "plugin document path (TOML, or JSON by extension: version = 1 and a plugins list, see mcp-plugins); unset: no plugins (or the document in Redis, plugins.redis_url); invalid at startup: the gateway refuses to start",
    ),
    secret(key(
        "plugins.redis_url",
        S,
        Unset,
        "instead of plugins.config: the Redis holding the plugin document (TOML or JSON string) under plugins.redis_key, polled every reload_interval_ms (a password in it is redacted by --print-config)",
    )),
    key(
        "plugins.redis_key",
        S,
        Unset,
        "the Redis key of the plugin document (with plugins.redis_url)",
    ),
    key(
        "plugins.reload_interval_ms",
        I,
        Int(1000),
        "how often the plugin document is checked for changes: a valid change swaps the chain atomically, an invalid one fails plugin-governed calls closed and /readyz unready",
    ),
    key(
        "plugins.keep_last_good",
        B,
        Bool(false),
        "on an invalid reload keep serving with the last good plugin chain instead of failing closed",
    ),
    // [router]
    key(
        "router.sealing_secret_env",
        S,
        Unset,
        "name of the environment variable holding the secret that encrypts the ids handed to clients (cursors, requestState, task ids, relayed request ids); unset: random per process (set it when several nodes share clients)",
    ),
    key(
        "router.gateway_id",
        S,
        Unset,
        "this deployment's id in the Via header of every request to a backend (1.1 mcp-gateway-<id>); a request arriving with it is refused with HTTP 508 Loop Detected; unset: derived from the sealing secret when set (shared by the nodes that share it), else random per process",
    ),
    key(
        "router.max_hops",
        I,
        Int(8),
        "most Via entries (gateways and proxies passed) a request may arrive with; more get HTTP 508 Loop Detected",
    ),
    key(
        "router.call_deadline_ms",
        I,
        Int(600_000),
        "longest a call to a backend may take in all, however steadily the backend keeps sending (a backend's timeout_ms bounds each wait); a backend's deadline_ms replaces it; past it the call is cancelled upstream and fails with -32603",
    ),
    key(
        "router.max_call_deadline_ms",
        I,
        Int(3_600_000),
        "ceiling on a backend's deadline_ms (user configurations may ask for less, never more)",
    ),
    key(
        "router.fanout_deadline_ms",
        I,
        Int(10_000),
        "longest wait for one backend during a fan-out (discover, lists)",
    ),
    key(
        "router.max_name_len",
        I,
        Int(128),
        "longest public tool/prompt name listed (many LLM hosts need 64)",
    ),
    key(
        "router.instructions",
        S,
        Unset,
        "the gateway's own instructions in server/discover",
    ),
    key(
        "router.request_state_ttl_s",
        I,
        Int(600),
        "how long a wrapped MRTR requestState stays valid",
    ),
    key(
        "router.stale_if_error_s",
        I,
        Int(60),
        "when a backend fails during a list or server/discover, serve its last good answer to the same caller if younger than this (marked degraded); 0 turns it off",
    ),
    key(
        "router.upstream_connect_timeout_ms",
        I,
        Int(5000),
        "TCP connect timeout towards backends",
    ),
    key(
        "router.max_upstream_sessions",
        I,
        Int(10_000),
        "most upstream 2025 sessions held at once; when full, a principal holding none is refused (-32603 too many upstream sessions)",
    ),
    key(
        "router.max_upstream_sessions_per_principal",
        I,
        Int(64),
        "most upstream 2025 sessions one principal holds (also its share of the era, breaker and HTTP+SSE-discovery tables); beyond it its own oldest is given up",
    ),
    // [telemetry]
    key(
        "telemetry.log_format",
        S,
        Str("pretty"),
        "\"pretty\" (human) or \"json\" (one object per line), on stderr",
    ),
    key(
        "telemetry.log_level",
        S,
        Str("info"),
        "tracing filter, e.g. \"info\" or \"info,mcp_router=debug\"",
    ),
    key(
        "telemetry.access_log",
        B,
        Bool(true),
        "log one info line per request (method, tool or prompt, virtual host, status, latency)",
    ),
    key(
        "telemetry.max_vhost_labels",
        I,
        Int(256),
        "distinct virtual host values the request metrics are labelled with; past it a new virtual host is counted under vhost=\"other\", so the series stay bounded whatever user configurations name",
    ),
    key(
        "telemetry.max_backend_labels",
        I,
        Int(256),
        "distinct backend names mcp_gateway_breakers (backend label) and the mcp_breaker_* counters (breaker label) are labelled with; past it a new backend is counted under \"other\"",
    ),
    key(
        "telemetry.otlp_endpoint",
        S,
        Unset,
        "base URL of an OpenTelemetry collector's OTLP/HTTP receiver (e.g. \"http://collector:4318\"; spans go to /v1/traces); set (or OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT) to export traces",
    ),
    key(
        "telemetry.service_name",
        S,
        Str("mcp-gateway"),
        "service.name of the exported spans (OTEL_SERVICE_NAME overrides)",
    ),
    key(
        "telemetry.traces_sampler",
        S,
        Str("parentbased_always_on"),
        "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio (OTEL_TRACES_SAMPLER overrides)",
    ),
    key(
        "telemetry.traces_sampler_arg",
        S,
        Unset,
        "the ratio of the traceidratio samplers, 0.0 to 1.0 (OTEL_TRACES_SAMPLER_ARG overrides)",
    ),
    key(
        "telemetry.audit.target",
        S,
        Str("off"),
        "the audit trail (one JSON object per MCP operation and line; book: telemetry.md, Audit trail): \"off\", \"stdout\" or \"file\" (telemetry.audit.path); \"otlp\" is refused: this build has no OTLP logs exporter",
    ),
    key(
        "telemetry.audit.path",
        S,
        Unset,
        "the file audit records are appended to with target = \"file\" (created when missing; opened at start and again after every applied reload, so rename it and send SIGHUP to rotate it)",
    ),
    key(
        "telemetry.audit.payloads",
        S,
        Str("never"),
        "\"never\": records never carry arguments or results; \"per_vhost\": they do for the virtual hosts whose user configuration sets audit_payloads = true",
    ),
    key(
        "telemetry.audit.max_payload_bytes",
        I,
        Int(4096),
        "longest JSON text of a record's arguments and of its result; a longer one is recorded as a string of its first bytes, marked arguments_truncated / result_truncated",
    ),
    key(
        "telemetry.audit.queue",
        I,
        Int(1024),
        "most audit records waiting for the writer thread (1 to 1048576); past it a record is dropped, never waited for, and counted in mcp_gateway_audit_dropped_total{reason=\"queue_full\"}",
    ),
    // [runtime]
    key(
        "runtime.mode",
        S,
        Str("work-stealing"),
        "\"work-stealing\": one tokio runtime whose worker threads share every connection; \"thread-per-core\": one single-threaded runtime per thread, each accepting on its own SO_REUSEPORT socket of listen.addr and keeping its connections and their upstream keep-alive connections on that thread (Linux only)",
    ),
    key(
        "runtime.threads",
        I,
        Int(0),
        "worker threads (work-stealing) or serving threads (thread-per-core), at most 1024; 0: one per core the process may use (work-stealing: TOKIO_WORKER_THREADS when set)",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_are_unique_and_follow_the_rule() {
        let mut seen = std::collections::HashSet::new();
        for spec in KEYS {
            let name = spec.env_name();
            assert!(name.starts_with(ENV_PREFIX));
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{name}"
            );
            assert!(seen.insert(name.clone()), "duplicate env name {name}");
        }
        assert_eq!(
            find("listen.admin_addr").map(KeySpec::env_name).as_deref(),
            Some("MCP_GATEWAY_LISTEN_ADMIN_ADDR")
        );
    }

    #[test]
    fn keys_are_unique_and_defaults_match_kinds() {
        let mut seen = std::collections::HashSet::new();
        for spec in KEYS {
            assert!(seen.insert(spec.key), "duplicate key {}", spec.key);
            let ok = matches!(
                (spec.kind, spec.default),
                (_, Unset)
                    | (ValueKind::String, Str(_))
                    | (ValueKind::Integer, Int(_))
                    | (ValueKind::Bool, Bool(_))
                    | (ValueKind::StringList, List(_))
            );
            assert!(ok, "{} default does not match its kind", spec.key);
        }
    }

    #[test]
    fn sections_list_parents_first() {
        let sections = sections();
        let auth = sections.iter().position(|s| *s == "auth");
        let jwt = sections.iter().position(|s| *s == "auth.jwt");
        assert!(auth < jwt && auth.is_some());
        assert!(sections.contains(&"breaker"));
        assert!(sections.contains(&"plugins"));
        assert!(!sections.contains(&""));
    }
}
