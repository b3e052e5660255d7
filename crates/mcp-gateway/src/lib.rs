//! # mcp-gateway
//!
//! The reference MCP gateway: assembles the layer crates into one service from a
//! [`GatewayConfig`](config::GatewayConfig), serves it on TCP or TLS listeners (HTTP/1.1 and h2), with an admin listener
//! (`/metrics`, `/healthz`, `/readyz`), RFC 9728 protected resource metadata, request limits,
//! structured logs and graceful shutdown. The `mcp-gateway` binary is a thin CLI over this
//! library (`serve`, `check-config`, `token`, `config-keys`).
//!
//! ```text
//! request ─▶ limits (403 Origin, 431 Mcp-* headers, 413 body) ─┬─▶ /.well-known/oauth-protected-resource[/servers/{vhost}/mcp]  (RFC 9728)
//!                                                              └─▶ VhostLayer ─▶ ClaimsLayer ─▶ InFlightShare ─▶ ConfigStoreLayer ─▶ VirtualHostConfigLayer ─▶ JsonPosts ─▶ SseBridge ─▶ McpRouter
//!                                                                  (400)         (401/403)      (429)            (400/500/503)       (404)                      (415)                   (508, JSON-RPC)
//! ```
//!
//! The vhost layer accepts `…/sse` and `…/messages` next to `…/mcp`: the SSE bridge
//! (`mcp_router::sse_bridge`) serves the 2024-11-05 HTTP+SSE transport there for virtual hosts
//! with `sse_downstream = true` (at most `limits.max_sse_sessions` open streams and
//! `limits.max_sse_sessions_per_principal` of one principal, posted bodies bounded by
//! `limits.max_body_bytes` and batches by `limits.max_sse_batch`) and passes `…/mcp` through.
//!
//! ## Embedding
//!
//! Build a gateway from a configuration, then either take the tower service
//! ([`Gateway::service`]) into your own server, or let the gateway listen
//! ([`Gateway::bind`] / [`Gateway::serve`]) until a shutdown future completes:
//!
//! ```
//! use bytes::Bytes;
//! use http::{Request, StatusCode, header};
//! use http_body_util::{BodyExt, Full};
//! use mcp_config_store::{MemoryStore, UserConfig};
//! use mcp_gateway::token::{TokenRequest, mint};
//! use mcp_gateway::Gateway;
//! use mcp_gateway::config::GatewayConfig;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let config = GatewayConfig::from_toml_str(r#"
//!     [listen]
//!     addr = "127.0.0.1:0"        # port 0: any free port
//!     admin_addr = "127.0.0.1:0"
//!     [auth.jwt]
//!     issuer = "https://issuer.example"
//!     audience = "mcp-gateway"
//! "#)?;
//! let secret = b"a-long-random-development-secret";
//! let alice = UserConfig::from_json_str(
//!     r#"{"virtual_hosts":{"vh1":{"backends":{"weather":{"url":"http://127.0.0.1:9/mcp"}}}}}"#,
//! )?;
//! let gateway = Gateway::builder(config)
//!     .hs256_secret(secret.to_vec())                           // instead of MCP_GATEWAY_JWT_SECRET
//!     .user_store(MemoryStore::new().with_user("alice", alice)) // instead of [config_store]
//!     .build()
//!     .await?;
//!
//! // The whole stack as one tower service.
//! let service = gateway.service();
//! let request = |path: &str, token: Option<&str>| {
//!     let mut builder = Request::post(path).header(header::HOST, "gw.test");
//!     if let Some(token) = token {
//!         builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
//!     }
//!     builder.body(Full::<Bytes>::default())
//! };
//!
//! // No token: 401 with an RFC 9728 challenge pointing at the virtual host's metadata.
//! let res = service.clone().oneshot(request("/servers/vh1/mcp", None)?).await?;
//! assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
//! assert_eq!(
//!     res.headers()[header::WWW_AUTHENTICATE],
//!     "Bearer error=\"invalid_token\", resource_metadata=\
//!      \"http://gw.test/.well-known/oauth-protected-resource/servers/vh1/mcp\""
//! );
//!
//! // A valid token for a virtual host alice does not have: 404 with the exact body.
//! let token = mint(gateway.config(), secret, &TokenRequest::new("alice"))?;
//! let res = service.clone().oneshot(request("/servers/vh2/mcp", Some(&token))?).await?;
//! assert_eq!(res.status(), StatusCode::NOT_FOUND);
//! let body = res.into_body().collect().await?.to_bytes();
//! assert_eq!(body, r#"{"detail":"Server not found"}"#);
//!
//! // Or let the gateway listen: bind, read the real addresses, serve until shutdown.
//! let bound = gateway.bind().await?;
//! assert_ne!(bound.local_addr().port(), 0);
//! assert!(bound.endpoint_url("vh1").ends_with("/servers/vh1/mcp"));
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let server = tokio::spawn(bound.serve(async move {
//!     let _ = stopped.await;
//! }));
//! let _ = stop.send(()); // e.g. on SIGTERM: see `mcp_gateway::shutdown_signal`
//! server.await??;
//! # Ok(())
//! # }
//! ```
//!
//! ## Listeners
//!
//! - `listen.addr`: plain TCP, or TLS with `listen.tls_cert` + `listen.tls_key` (rustls with the
//!   aws-lc-rs provider, ALPN `h2` and `http/1.1`). HTTP/1.1 and HTTP/2 on the same port
//!   (hyper-util auto), `TCP_NODELAY` on every socket, `limits.header_read_timeout_ms` for the
//!   request head, the TLS handshake and a connection's first request (an h2 client that sends
//!   only the preface), `limits.idle_connection_timeout_ms` for a connection with no request in
//!   flight (also the h2 keep-alive PING interval), at most `limits.max_connections` open
//!   connections (further clients wait unread: in the backlog, and one accepted per accept loop).
//! - `runtime.mode = "thread-per-core"`: [`Gateway::bind`] binds `listen.addr` once per serving
//!   thread (`runtime.threads`) with `SO_REUSEPORT`, and [`BoundGateway::serve`] runs each
//!   socket's accept loop and connections on a single-threaded runtime of its own thread, with
//!   its own lane of every upstream keep-alive pool; the future awaiting `serve` runs only the
//!   admin listener and the shutdown. The default, `"work-stealing"`, serves on the caller's
//!   runtime.
//! - `listen.admin_addr`: plain HTTP, [`AdminService`].
//! - Shutdown ([`BoundGateway::serve`]): stop accepting, `/readyz` turns unready, in-flight
//!   requests and streams get `shutdown_drain_s` to finish (hyper-util `GracefulShutdown`: idle
//!   keep-alive connections close at once, HTTP/2 gets GOAWAY), then the rest is closed.
//!
//! ## Request limits and responses
//!
//! | check | answer |
//! |---|---|
//! | `Origin` present and not in `security.allowed_origins` | 403 `{"detail":"Origin not allowed"}` (before authentication; the router re-checks) |
//! | more than `limits.max_mcp_headers` `Mcp-*` headers, or one longer than `limits.max_mcp_header_bytes` | 431 `{"detail":"Too many Mcp-* headers"}` / `{"detail":"Mcp-* header too large"}` |
//! | `Content-Length` over `limits.max_body_bytes` | 413 `{"detail":"Request body too large"}` (a chunked body is cut by the router: 413 with a JSON-RPC error) |
//!
//! Then the book: docs/src/failure-modes.md rows of each layer (400 path, 401 token, 400/500/503 store, 404 virtual
//! host), then the router's JSON-RPC answers.
//!
//! ## Metrics
//!
//! Prometheus text on the admin listener's `/metrics`. The first gateway built in a process
//! installs its recorder as the global `metrics` recorder (so the layer crates' metrics land there
//! too); when the embedding application installed one before, the gateway records into that one.
//!
//! Every family, with its type, meaning and labels, is in [`metric_table`] (the binary prints it
//! with `mcp-gateway metric-table`; the book's telemetry chapter shows it). Label values never
//! come from a client's request; those from user configurations (virtual host and backend names)
//! are capped by `telemetry.max_vhost_labels` and `telemetry.max_backend_labels`, past which they
//! read `other`.
//!
//! ## Logs
//!
//! [`init_tracing`]: stderr, `telemetry.log_format` `pretty` or `json`, `RUST_LOG` when set, else
//! `telemetry.log_level` (default `info`). Each request runs in a `request` span (HTTP method,
//! path, MCP method header) and, with `telemetry.access_log`, ends with one `request` event
//! carrying the MCP method and tool or prompt the router served (`mcp.method`, `mcp.name`, of
//! either era), the virtual host, status and latency. Tokens, secrets and bodies are never logged.
//! Every line logged while a request is served carries its `trace_id` when it has one (the
//! router's server span's, `_meta.traceparent`'s with the audit trail on, or the `traceparent`
//! header's): the first member of a JSON line.
//!
//! ## Audit trail
//!
//! With `telemetry.audit.target = "stdout"` or `"file"` (off by default), one JSON line per MCP
//! operation (`mcp_router::audit`): caller, virtual host, backend, method, tool/prompt/URI,
//! outcome, latency, bytes; arguments and results only where `telemetry.audit.payloads =
//! "per_vhost"` and the virtual host sets `audit_payloads`. A writer thread drains a bounded queue;
//! a record that finds it full is dropped and counted (`mcp_gateway_audit_dropped_total`), never
//! waited for.
//!
//! ## Traces
//!
//! With `telemetry.otlp_endpoint` (or the standard `OTEL_EXPORTER_OTLP_*` variables),
//! [`init_tracing`] also installs an OpenTelemetry tracer provider exporting OTLP/HTTP protobuf
//! and turns on the router's spans (`mcp_router::telemetry`): a server span per MCP message, a
//! client span per upstream request, trace context from and into `params._meta` and the
//! `traceparent` header. Keep the returned [`Telemetry`] until shutdown: dropping it flushes.
//!
//! ## Modules
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`] | [`config::GatewayConfig`], [`config::ConfigError`], the key table [`config::KEYS`], layered loading ([`config::EffectiveConfig`]) |
//! | [`token`] | development tokens ([`token::mint`]) |
//! | [`users`] | user configuration checks beyond the store's validation |
//! | [`routed`] | [`routed::RoutedVhost`], the response extension naming the virtual host that answered |
//! | `gateway` | [`Gateway`], [`GatewayBuilder`], [`BoundGateway`] |
//! | `service` | [`GatewayService`] |
//! | `json_posts` | [`JsonPosts`], the 415 for a POST that does not declare `application/json` |
//! | `in_flight_share` | (inside the stack) each principal's share of requests in flight, the 429 past it (`limits.max_in_flight_per_principal`) |
//! | `guarded_body` | (inside the stack) the response body that keeps a request's in-flight count or principal slot until it is dropped |
//! | `admin` | [`AdminService`] |
//! | `metrics` | the Prometheus recorder, request and scrape-time metrics, every family's catalog ([`metric_table`]) |
//! | `auth` | [`build_validator`], [`hs256_secret`] |
//! | `store` | [`check_documents`] |
//! | `telemetry`, `shutdown` | [`init_tracing`], [`Telemetry`], [`TelemetryError`], [`shutdown_signal`] |
//! | `audit` | the audit trail's JSON lines writer (`[telemetry.audit]`) |

mod admin;
mod audit;
mod auth;
mod body;
mod check;
pub mod config;
mod error;
mod gateway;
mod guarded_body;
mod idle;
mod in_flight_share;
mod json_posts;
mod limits;
mod metadata;
mod metrics;
mod per_core;
mod plugins;
mod reload;
pub mod routed;
mod server;
mod service;
mod shutdown;
mod store;
mod telemetry;
mod tls;
pub mod token;
pub mod user_admin;
pub mod users;

pub use admin::AdminService;
pub use auth::{build_validator, hs256_secret};
pub use body::GatewayBody;
pub use check::{CheckReport, check_config};
pub use error::GatewayError;
pub use gateway::{BoundGateway, Gateway, GatewayBuilder};
pub use json_posts::{DETAIL_UNSUPPORTED_MEDIA_TYPE, JsonPosts};
pub use limits::{
    DETAIL_BODY_TOO_LARGE, DETAIL_MCP_HEADER_TOO_LARGE, DETAIL_ORIGIN, DETAIL_TOO_MANY_MCP_HEADERS,
};
pub use metrics::metric_table;
pub use reload::{ReloadError, Reloaded, Reloader, STDIO_CATALOG};
pub use service::{GatewayService, ResponseFuture};
pub use shutdown::shutdown_signal;
pub use store::{DocumentReport, check_documents};
pub use telemetry::{Telemetry, TelemetryError, init_tracing};
