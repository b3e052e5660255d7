//! The user configuration store of `[config_store]`: a watched file or Redis, behind the
//! single-flight cache; its readiness for `/readyz`, and the full document check of
//! `mcp-gateway check-config`.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use deadpool_redis::redis;
use mcp_config_store::{
    CacheStats, CachedStore, FileStore, FileStoreError, RedisStore, RedisStoreConfig,
    RedisStoreError, UserConfig, UserConfigStore,
};
use mcp_config_store::{issuer_scoped, split_issuer_scoped};
use serde_json::{Value, json};

use crate::config::{ConfigError, GatewayConfig, Problem, Source, StoreKind};
use crate::error::GatewayError;
use crate::users::{
    OperatorRules, UserConfigFinding, check_document, document_notices, operator_warnings,
    unsupported_features,
};

/// How long a readiness probe waits for the store.
const READINESS_TIMEOUT: Duration = Duration::from_secs(2);

/// What backs the cache.
enum Backing {
    File(FileStore),
    Redis,
    Custom,
}

/// The gateway's user configuration store: the cache in front of the configured store.
#[derive(Clone)]
pub(crate) struct UserStore {
    cached: CachedStore<Arc<dyn UserConfigStore>>,
    backing: Arc<Backing>,
    rules: OperatorRulesCell,
}

/// A store's state for `/readyz`.
pub(crate) struct Readiness {
    pub(crate) ready: bool,
    pub(crate) detail: Value,
}

/// The result of checking every stored user configuration.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct DocumentReport {
    /// How many subjects were checked.
    pub subjects: usize,
    /// Warnings (overlapping backend names), with the document they are in.
    pub warnings: Vec<(Source, UserConfigFinding)>,
    /// Notices that stay warnings even for `check-config` (free-form stdio commands admitted by
    /// the older allow-list, an unhonoured `stdio_policy = "shared"`).
    pub notices: Vec<(Source, UserConfigFinding)>,
    /// Entries no request can load (a bare `<sub>` key, or an issuer that is not trusted, while
    /// several issuers are trusted); reported, never an error.
    pub unreachable: Vec<(Source, UserConfigFinding)>,
}

impl UserStore {
    /// Opens the configured store. A file store is read and checked now (an invalid or unsupported
    /// document fails the start); a Redis store does not need Redis to be up.
    pub(crate) async fn open(config: &GatewayConfig) -> Result<Self, GatewayError> {
        let rules: OperatorRulesCell =
            Arc::new(ArcSwap::from_pointee(OperatorRules::from_config(config)));
        let (store, backing): (Arc<dyn UserConfigStore>, Backing) = match config.config_store.kind {
            StoreKind::File => {
                let file = open_file(config).await?;
                let doc = file.document();
                let (errors, mut warnings) = check_document(&doc, &rules.load());
                let source = Source::File(file.path().to_path_buf());
                if let Some(e) = findings_error(&source, errors) {
                    return Err(e.into());
                }
                warnings.extend(document_notices(&doc, &rules.load()));
                for warning in warnings {
                    tracing::warn!(file = %file.path().display(), warning = %warning, "user configuration warning");
                }
                for finding in
                    unreachable_entries(config, "users.", doc.users.keys().map(String::as_str))
                {
                    tracing::warn!(file = %file.path().display(), warning = %finding, "user configuration never used");
                }
                (Checked::wrap(file.clone(), &rules), Backing::File(file))
            }
            StoreKind::Redis => {
                let redis = open_redis(config).await?;
                (Checked::wrap(redis, &rules), Backing::Redis)
            }
        };
        Ok(Self::wrap(store, backing, rules, config))
    }

    /// A store provided by an integrator.
    pub(crate) fn custom(store: Arc<dyn UserConfigStore>, config: &GatewayConfig) -> Self {
        let rules = Arc::new(ArcSwap::from_pointee(OperatorRules::from_config(config)));
        Self::wrap(store, Backing::Custom, rules, config)
    }

    /// The rules loaded configurations are checked against, for a reload to replace.
    pub(crate) fn rules(&self) -> OperatorRulesCell {
        Arc::clone(&self.rules)
    }

    fn wrap(
        store: Arc<dyn UserConfigStore>,
        backing: Backing,
        rules: OperatorRulesCell,
        config: &GatewayConfig,
    ) -> Self {
        let c = &config.config_store;
        let cached = CachedStore::builder(store)
            .max_capacity(c.cache_max_entries)
            .ttl(c.cache_ttl)
            .negative_ttl(c.cache_negative_ttl)
            .build();
        Self {
            cached,
            backing: Arc::new(backing),
            rules,
        }
    }

    /// The cache, as the store the config layer reads.
    pub(crate) fn shared(&self) -> Arc<dyn UserConfigStore> {
        Arc::new(self.cached.clone())
    }

    /// Cache hit/miss/error counters.
    pub(crate) fn stats(&self) -> CacheStats {
        self.cached.stats()
    }

    /// The store's kind for reports.
    pub(crate) fn kind(&self) -> &'static str {
        match *self.backing {
            Backing::File(_) => "file",
            Backing::Redis => "redis",
            Backing::Custom => "custom",
        }
    }

    /// Whether the store can serve now (Redis reachable; a file store always can, reporting a
    /// rejected reload as a detail).
    pub(crate) async fn readiness(&self) -> Readiness {
        let kind = self.kind();
        let checked = tokio::time::timeout(READINESS_TIMEOUT, self.cached.check()).await;
        let mut detail = match checked {
            Ok(Ok(())) => json!({ "status": "ok", "kind": kind }),
            Ok(Err(e)) => {
                return Readiness {
                    ready: false,
                    detail: json!({ "status": "unavailable", "kind": kind, "error": e.message() }),
                };
            }
            Err(_) => {
                return Readiness {
                    ready: false,
                    detail: json!({ "status": "unavailable", "kind": kind, "error": "readiness check timed out" }),
                };
            }
        };
        if let Backing::File(file) = &*self.backing
            && let Some(error) = file.last_error()
        {
            // Still serving the last good document: ready, but say why edits are not applied.
            detail["last_reload_error"] = Value::String(error.to_string());
        }
        Readiness {
            ready: true,
            detail,
        }
    }
}

async fn open_file(config: &GatewayConfig) -> Result<FileStore, ConfigError> {
    let path = &config.config_store.path;
    let mut builder = FileStore::builder(path);
    builder = match config.config_store.poll_interval {
        Some(interval) => builder.poll_interval(interval),
        None => builder.no_watch(),
    };
    builder.open().await.map_err(|e| match e {
        FileStoreError::Invalid { path, error } => {
            let source = Source::File(path);
            let problems = error
                .errors()
                .iter()
                .map(|field| Problem {
                    source: source.clone(),
                    key: field.path().to_owned(),
                    message: match (field.line(), field.column()) {
                        (Some(line), Some(column)) => {
                            format!("{} (line {line}, column {column})", field.message())
                        }
                        (Some(line), None) => format!("{} (line {line})", field.message()),
                        _ => field.message().to_owned(),
                    },
                })
                .collect();
            ConfigError::from_problems(problems).unwrap_or_else(|| {
                ConfigError::new(source, "", "invalid user configuration document")
            })
        }
        FileStoreError::Io { path, source } => config.problem(
            "config_store.path",
            format!(
                "cannot read the user configuration file {}: {source}",
                path.display()
            ),
        ),
        other => config.problem("config_store.path", other.to_string()),
    })
}

pub(crate) async fn open_redis(config: &GatewayConfig) -> Result<RedisStore, GatewayError> {
    let c = &config.config_store;
    let mut redis_config = RedisStoreConfig::new(c.redis_url.clone());
    redis_config.key_prefix.clone_from(&c.key_prefix);
    redis_config.pool_size = c.pool_size;
    RedisStore::connect(redis_config)
        .await
        .map_err(|e| match e {
            RedisStoreError::InvalidUrl(reason) => config
                .problem("config_store.url", format!("invalid Redis URL: {reason}"))
                .into(),
            RedisStoreError::InvalidPrefix(_) => config
                .problem(
                    "config_store.key_prefix",
                    "must be non-empty, without whitespace or control characters",
                )
                .into(),
            other => GatewayError::Store(other.to_string()),
        })
}

/// A store whose every loaded configuration is checked against the operator's rules: a file
/// edited after the start, or a Redis value, that asks for something the operator does not allow
/// is refused when loaded (500, the findings logged with their paths), never half-served.
struct Checked<S> {
    inner: S,
    rules: OperatorRulesCell,
}

/// The operator's rules every loaded user configuration is checked against, which a reload
/// replaces (the stdio catalog and allow-list): configurations loaded from then on are checked
/// against the new ones. Cached configurations are not checked again; the router applies the new
/// stdio rules to them anyway when it starts a process.
pub(crate) type OperatorRulesCell = Arc<ArcSwap<OperatorRules>>;

impl<S: UserConfigStore> Checked<S> {
    fn wrap(inner: S, rules: &OperatorRulesCell) -> Arc<dyn UserConfigStore> {
        Arc::new(Self {
            inner,
            rules: Arc::clone(rules),
        })
    }
}

impl<S: UserConfigStore> UserConfigStore for Checked<S> {
    fn load(&self, subject: Arc<str>) -> mcp_config_store::LoadFuture {
        let loading = self.inner.load(Arc::clone(&subject));
        let rules = self.rules.load_full();
        Box::pin(async move {
            let Some(config) = loading.await? else {
                return Ok(None);
            };
            let findings = unsupported_features("", &config, &rules);
            if findings.is_empty() {
                for warning in operator_warnings("", &config, &rules) {
                    tracing::warn!(%subject, warning = %warning, "user configuration warning");
                }
                return Ok(Some(config));
            }
            for finding in &findings {
                tracing::warn!(%subject, problem = %finding, "user configuration refused");
            }
            Err(mcp_config_store::StoreError::corrupt(
                "the user configuration asks for what the operator does not allow",
            ))
        })
    }

    fn invalidations(&self) -> tokio::sync::broadcast::Receiver<mcp_config_store::Invalidation> {
        self.inner.invalidations()
    }

    fn check(
        &self,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<Output = Result<(), mcp_config_store::StoreError>>
                + Send
                + 'static,
        >,
    > {
        self.inner.check()
    }
}

fn findings_error(source: &Source, findings: Vec<UserConfigFinding>) -> Option<ConfigError> {
    ConfigError::from_problems(
        findings
            .into_iter()
            .map(|f| Problem {
                source: source.clone(),
                key: f.path,
                message: f.message,
            })
            .collect(),
    )
}

/// Reads and checks every user configuration of the configured store (what
/// `mcp-gateway check-config` does): the file store's document, or every `<prefix>:user:*` key in
/// Redis. Unsupported features are errors; warnings are returned.
///
/// # Errors
///
/// [`GatewayError::Config`] for invalid or unsupported documents (every problem, with the document
/// and field path), [`GatewayError::Store`] when Redis cannot be reached.
pub async fn check_documents(config: &GatewayConfig) -> Result<DocumentReport, GatewayError> {
    match config.config_store.kind {
        StoreKind::File => {
            let file = open_file(config).await?;
            let doc = file.document();
            let rules = OperatorRules::from_config(config);
            let (errors, warnings) = check_document(&doc, &rules);
            let source = Source::File(file.path().to_path_buf());
            if let Some(e) = findings_error(&source, errors) {
                return Err(e.into());
            }
            let located = |findings: Vec<UserConfigFinding>| {
                findings
                    .into_iter()
                    .map(|w| (source.clone(), w))
                    .collect::<Vec<_>>()
            };
            Ok(DocumentReport {
                subjects: doc.users.len(),
                warnings: located(warnings),
                notices: located(document_notices(&doc, &rules)),
                unreachable: located(unreachable_entries(
                    config,
                    "users.",
                    doc.users.keys().map(String::as_str),
                )),
            })
        }
        StoreKind::Redis => check_redis(config).await,
    }
}

async fn check_redis(config: &GatewayConfig) -> Result<DocumentReport, GatewayError> {
    let store = open_redis(config).await?;
    store
        .check()
        .await
        .map_err(|e| GatewayError::Store(format!("Redis is not reachable: {}", e.message())))?;
    let key_prefix = format!("{}:user:", config.config_store.key_prefix);
    let keys = redis_user_keys(&store, &key_prefix).await?;
    let mut conn = store
        .pool()
        .get()
        .await
        .map_err(|e| GatewayError::Store(format!("Redis is not reachable: {e}")))?;
    let redis_err = |e: redis::RedisError| GatewayError::Store(format!("Redis: {e}"));
    let rules = OperatorRules::from_config(config);
    let mut report = DocumentReport::default();
    let mut problems = Vec::new();
    for key in keys {
        let Some(subject) = key.strip_prefix(&key_prefix) else {
            continue;
        };
        let source = Source::Document(format!("redis key {key}"));
        for finding in unreachable_entries(config, "", [subject]) {
            report.unreachable.push((source.clone(), finding));
        }
        let value: Option<String> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        let Some(text) = value else { continue };
        report.subjects += 1;
        match UserConfig::from_json_str(&text) {
            Ok(user) => {
                for finding in unsupported_features("", &user, &rules) {
                    problems.push(Problem {
                        source: source.clone(),
                        key: finding.path,
                        message: finding.message,
                    });
                }
                for notice in operator_warnings("", &user, &rules) {
                    report.notices.push((source.clone(), notice));
                }
                for warning in user.warnings() {
                    report.warnings.push((
                        source.clone(),
                        UserConfigFinding {
                            path: warning.path().to_owned(),
                            message: warning.message().to_owned(),
                        },
                    ));
                }
            }
            Err(e) => {
                for field in e.errors() {
                    problems.push(Problem {
                        source: source.clone(),
                        key: field.path().to_owned(),
                        message: field.message().to_owned(),
                    });
                }
            }
        }
    }
    match ConfigError::from_problems(problems) {
        Some(e) => Err(e.into()),
        None => Ok(report),
    }
}

/// The keys among `keys` that no request can load while several issuers are trusted (configs are
/// then keyed `<issuer>#<sub>`, see `mcp_config_store::lookup_key`): a bare `<sub>` (used for no
/// issuer, so that one issuer's `alice` never gets a configuration written for another's), or an
/// issuer that is not in `auth.jwt.issuers`. Nothing with one issuer.
/// `prefix` starts each finding's path (`users.` in a document, nothing for a Redis key).
pub(crate) fn unreachable_entries<'a>(
    config: &GatewayConfig,
    prefix: &str,
    keys: impl IntoIterator<Item = &'a str>,
) -> Vec<UserConfigFinding> {
    let issuers = &config.auth.jwt.issuers;
    if issuers.len() < 2 {
        return Vec::new();
    }
    keys.into_iter()
        .filter_map(|key| {
            let message = match split_issuer_scoped(key) {
                None => format!(
                    "a bare subject is used for no issuer while several are trusted; write the key as \"<issuer>#{key}\" (e.g. \"{}\")",
                    issuer_scoped(&issuers[0], key)
                ),
                Some((issuer, _)) if !issuers.iter().any(|i| *i == issuer) => format!(
                    "issuer `{issuer}` is not in auth.jwt.issuers; no token can load this configuration"
                ),
                Some(_) => return None,
            };
            Some(UserConfigFinding {
                path: format!("{prefix}{key}"),
                message,
            })
        })
        .collect()
}

/// Every key starting with `key_prefix`, sorted: `SCAN` on one server or the Sentinel primary;
/// in a Cluster `KEYS`, which the client sends to every master and merges (a cluster-wide `SCAN`
/// needs one cursor per node; this administrative listing accepts `KEYS`' cost instead).
pub(crate) async fn redis_user_keys(
    store: &RedisStore,
    key_prefix: &str,
) -> Result<Vec<String>, GatewayError> {
    let mut conn = store
        .pool()
        .get()
        .await
        .map_err(|e| GatewayError::Store(format!("Redis is not reachable: {e}")))?;
    let pattern = format!("{}*", glob_escape(key_prefix));
    let redis_err = |e: redis::RedisError| GatewayError::Store(format!("Redis: {e}"));
    let mut keys: Vec<String> = Vec::new();
    if store.pool().is_cluster() {
        keys = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
    } else {
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(200)
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            keys.extend(batch);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
