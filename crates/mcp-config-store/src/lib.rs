//! # mcp-config-store
//!
//! Per-subject user configuration for the MCP gateway: the data model, stores, a cache, and the
//! two tower layers that put the configuration into the request.
//!
//! | module | what it holds |
//! |---|---|
//! | `model` | [`UserConfig`] → [`VirtualHostConfig`] → [`BackendConfig`] (book: docs/src/user-config.md), [`UsersDocument`] |
//! | `validate` | semantic checks with field paths, [`ConfigWarning`] (overlapping backend names) |
//! | `parse` | JSON/TOML parsing with the path of the bad field ([`DocumentFormat`]) |
//! | `error` | [`StoreError`] (`Unavailable` / `Corrupt` / `Other`), [`ConfigError`], [`FieldError`] |
//! | `store` | the [`UserConfigStore`] trait, [`Invalidation`] events |
//! | `memory` | [`MemoryStore`] (tests, builders, embedded defaults) |
//! | `file` | [`FileStore`], a JSON/TOML file reloaded on change (feature `file`) |
//! | `redis` | [`RedisStore`] with pub/sub + keyspace invalidation and fast 503s during outages (feature `redis`) |
//! | `cache` | [`CachedStore`]: bounded, TTL, single-flight, negative caching, invalidation |
//! | `config_layer` | [`ConfigStoreLayer`]: subject → `Arc<UserConfig>` extension (400 / 500 / 503) |
//! | `source` | [`ConfigSource`], the store and key a request's configuration came from (a request extension): streams end when their virtual host is removed |
//! | `lookup_key` | the key a configuration is stored under: the subject, or `<issuer>#<subject>` with several issuers ([`PrincipalKey`]) |
//! | `vhost_layer` | [`VirtualHostConfigLayer`]: [`VirtualHostId`](mcp_core::VirtualHostId) → [`VirtualHost`] extension (404) |
//!
//! The modules are private: every public item is re-exported here, one path per item.
//!
//! ## Request flow and responses
//!
//! An authentication layer inserts a [`mcp_core::Principal`]; a path layer inserts a
//! [`mcp_core::VirtualHostId`]. Then:
//!
//! 1. [`ConfigStoreLayer`] loads the principal's subject from a store and inserts
//!    `Arc<UserConfig>`. No principal → 400 `{"detail":"No authenticated principal"}`; no
//!    configuration → 400 `{"detail":"No user configuration"}`; corrupt document or other store
//!    failure → 500 `{"detail":"User configuration could not be loaded"}`; store unavailable →
//!    503 `{"detail":"Configuration store unavailable"}` with `Retry-After: 1`.
//! 2. [`VirtualHostConfigLayer`] inserts the [`VirtualHost`] (id + `Arc<VirtualHostConfig>`).
//!    Unknown virtual host → 404 `{"detail":"Server not found"}`; a missing extension → 400 naming
//!    the missing layer.
//!
//! Every local answer is `application/json` and never contains the subject, the store address or
//! internal error text (those are logged with `tracing`). Both layers keep the inner service's
//! error type and wrap bodies in [`mcp_core::ResponseBody`], so they stack under axum and hyper.
//!
//! ## Stores
//!
//! Stack a [`CachedStore`] in front of a remote store: `ConfigStoreLayer::new(CachedStore::new(
//! RedisStore::connect(..).await?))`. Stores emit [`Invalidation`]s when data changes (memory
//! store edits, file reloads, Redis pub/sub and keyspace notifications), and the cache drops the
//! affected entries, so an edit is visible within about a second; the cache TTL is only a safety
//! net. While Redis is down, requests are answered 503 at once; a background prober reconnects.
//!
//! ## Example
//!
//! ```
//! use std::convert::Infallible;
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::{BodyExt, Empty};
//! use mcp_config_store::{ConfigStoreLayer, MemoryStore, UserConfig, VirtualHost, VirtualHostConfigLayer};
//! use mcp_core::{Principal, VirtualHostId};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let alice = UserConfig::from_json_str(r#"{ "virtual_hosts": { "vh1": { "backends": {
//!     "weather": { "url": "http://127.0.0.1:9001/mcp" } } } } }"#).unwrap();
//! let store = MemoryStore::new().with_user("alice", alice);
//!
//! let svc = ServiceBuilder::new()
//!     .layer(ConfigStoreLayer::new(store))
//!     .layer(VirtualHostConfigLayer::new())
//!     .service(service_fn(|req: Request<Empty<Bytes>>| async move {
//!         let vh = req.extensions().get::<VirtualHost>().expect("inserted by the layer");
//!         assert!(vh.config.backends.contains_key("weather"));
//!         Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
//!     }));
//!
//! let request = |sub: &str, vhost: &str| {
//!     let mut req = Request::new(Empty::<Bytes>::new());
//!     req.extensions_mut().insert(Principal::new("https://issuer.example", sub));
//!     req.extensions_mut().insert(VirtualHostId::new(vhost));
//!     req
//! };
//!
//! // Known subject and virtual host: the inner service runs.
//! let res = svc.clone().oneshot(request("alice", "vh1")).await.unwrap();
//! assert_eq!(res.status(), StatusCode::OK);
//!
//! // No configuration for the subject: 400.
//! let res = svc.clone().oneshot(request("bob", "vh1")).await.unwrap();
//! assert_eq!(res.status(), StatusCode::BAD_REQUEST);
//! let body = res.into_body().collect().await.unwrap().to_bytes();
//! assert_eq!(body, r#"{"detail":"No user configuration"}"#);
//!
//! // Virtual host not in the caller's configuration: 404 with the exact body.
//! let res = svc.oneshot(request("alice", "vh2")).await.unwrap();
//! assert_eq!(res.status(), StatusCode::NOT_FOUND);
//! assert_eq!(res.headers()["content-type"], "application/json");
//! let body = res.into_body().collect().await.unwrap().to_bytes();
//! assert_eq!(body, r#"{"detail":"Server not found"}"#);
//! # }
//! ```
//!
//! ## Features
//!
//! No store beyond [`MemoryStore`] is on by default (tower-http style: turn on what you use).
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `file` | no | `FileStore` and TOML parsing |
//! | `redis` | no | `RedisStore` (deadpool-redis 0.23, redis 1.x), and `RedisTopology`: one server, Sentinel or Cluster, chosen by the URL scheme, for every Redis user of the gateway |

mod cache;
mod config_layer;
mod error;
#[cfg(feature = "file")]
mod file;
mod lookup_key;
mod memory;
mod model;
mod parse;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod redis_topology;
mod source;
mod store;
mod validate;
mod vhost_layer;

pub use cache::{
    CacheStats, CachedStore, CachedStoreBuilder, DEFAULT_MAX_CAPACITY, DEFAULT_NEGATIVE_TTL,
    DEFAULT_TTL,
};
pub use config_layer::{
    ConfigStoreFuture, ConfigStoreLayer, ConfigStoreService, DETAIL_LOAD_FAILED, DETAIL_NO_CONFIG,
    DETAIL_NO_PRINCIPAL, DETAIL_UNAVAILABLE, PrincipalSubject, SubjectExtractor,
};
pub use error::{ConfigError, FieldError, StoreError, StoreErrorKind};
#[cfg(feature = "file")]
pub use file::{
    COARSE_MTIME_WINDOW, DEFAULT_POLL_INTERVAL, FileStore, FileStoreBuilder, FileStoreError,
};
pub use lookup_key::{ISSUER_SEPARATOR, PrincipalKey, issuer_scoped, split_issuer_scoped};
pub use memory::MemoryStore;
pub use model::{
    BackendConfig, DEFAULT_TIMEOUT_MS, HeaderPolicy, Naming, StdioPolicy, Transport, UserConfig,
    UsersDocument, VirtualHostConfig,
};
pub use parse::DocumentFormat;
#[cfg(feature = "redis")]
pub use redis::{
    DEFAULT_KEY_PREFIX, RedisStore, RedisStoreConfig, RedisStoreError, is_transient,
    is_transient_pool_error,
};
#[cfg(feature = "redis")]
pub use redis_topology::{PoolSettings, RedisConnection, RedisPool, RedisTopology, TopologyError};
pub use source::ConfigSource;
pub use store::{
    INVALIDATION_CHANNEL_CAPACITY, Invalidation, LoadFuture, LoadResult, UserConfigStore,
};
pub use validate::{
    ConfigWarning, MAX_BACKEND_NAME_LEN, MAX_VIRTUAL_HOST_ID_LEN, is_valid_backend_name,
    is_valid_virtual_host_id,
};
pub use vhost_layer::{
    DETAIL_NO_USER_CONFIG, DETAIL_NO_VIRTUAL_HOST_ID, DETAIL_SERVER_NOT_FOUND, VirtualHost,
    VirtualHostConfigFuture, VirtualHostConfigLayer, VirtualHostConfigService,
};
