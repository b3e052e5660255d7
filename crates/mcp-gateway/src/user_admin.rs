//! [`UserAdmin`]: `mcp-gateway users put|get|list|delete|check` against the configured store
//! (a JSON file, or Redis: one server, Sentinel or Cluster).
//!
//! A document is checked exactly as `mcp-gateway check-config` checks the stored ones (the same
//! messages, field paths and source names), so `put` refuses whatever `check-config` would refuse,
//! warnings included (check-config turns them into errors). Writes are atomic and announced:
//!
//! - Redis: `MULTI` / `SET <prefix>:user:<key>` / `PUBLISH <prefix>:invalidate <key>` / `EXEC`;
//!   every node's cache drops the entry on the publication.
//! - File: the whole document is written to a temporary file in the same directory, synced and
//!   renamed over the original, so a node never reads half a document; nodes pick it up at their
//!   next `config_store.poll_interval_ms` check. Only JSON files are edited (a TOML file is read
//!   by `get`, `list` and `check`, but `put` and `delete` refuse it rather than drop its comments).
//!
//! Keys are what the gateway looks up (`mcp_config_store::lookup_key`): `<sub>` with one trusted
//! issuer, `<issuer>#<sub>` with several.

use std::path::{Path, PathBuf};

use deadpool_redis::redis;
use mcp_config_store::{DocumentFormat, RedisStore, UserConfig, UsersDocument};

use crate::config::{ConfigError, GatewayConfig, Problem, Source, StoreKind};
use crate::error::GatewayError;
use crate::store::{open_redis, redis_user_keys, unreachable_entries};
use crate::users::{OperatorRules, UserConfigFinding, check_document, operator_warnings};
use crate::users::{document_notices, unsupported_features};

/// The configured user store, opened for administration.
pub struct UserAdmin {
    config: GatewayConfig,
    backend: Backend,
}

enum Backend {
    File(PathBuf),
    Redis(RedisStore),
}

impl std::fmt::Debug for UserAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserAdmin")
            .field(
                "store",
                &match self.backend {
                    Backend::File(_) => "file",
                    Backend::Redis(_) => "redis",
                },
            )
            .finish()
    }
}

/// What a successful `check` or `put` found worth saying (never a reason to refuse).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct AdminReport {
    /// Warnings that check-config also only prints (unreachable keys, stdio notices).
    pub warnings: Vec<(Source, UserConfigFinding)>,
}

impl UserAdmin {
    /// Opens the store of `config` (for Redis: connects; an unreachable Redis fails later
    /// commands with [`GatewayError::Store`]).
    ///
    /// # Errors
    ///
    /// An invalid Redis URL or key prefix.
    pub async fn open(config: &GatewayConfig) -> Result<Self, GatewayError> {
        let backend = match config.config_store.kind {
            StoreKind::File => Backend::File(config.config_store.path.clone()),
            StoreKind::Redis => Backend::Redis(open_redis(config).await?),
        };
        Ok(Self {
            config: config.clone(),
            backend,
        })
    }

    /// Checks `text` (a JSON user configuration) as the configuration of `key`, as check-config
    /// would once it is stored.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Config`] with every problem; [`GatewayError::Store`] when the file store's
    /// current document cannot be read.
    pub async fn check(&self, key: &str, text: &str) -> Result<AdminReport, GatewayError> {
        self.validated(key, text).await.map(|(_, report)| report)
    }

    /// Checks, then stores `text` as `key`'s configuration and announces the change.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check); [`GatewayError::Store`] when the write fails.
    pub async fn put(&self, key: &str, text: &str) -> Result<AdminReport, GatewayError> {
        let (validated, report) = self.validated(key, text).await?;
        match (&self.backend, validated) {
            (Backend::Redis(store), Validated::One(user)) => {
                store.put(key, &user).await.map_err(store_error)?;
            }
            (Backend::File(path), Validated::Document(doc)) => write_document(path, &doc)?,
            _ => unreachable_kind()?,
        }
        Ok(report)
    }

    /// `key`'s stored configuration as JSON; `None` when there is none.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Store`] when the store cannot be read.
    pub async fn get(&self, key: &str) -> Result<Option<String>, GatewayError> {
        match &self.backend {
            Backend::Redis(store) => {
                let redis_key = store.key(key).map_err(store_error)?;
                let mut conn = store.pool().get().await.map_err(unreachable)?;
                redis::cmd("GET")
                    .arg(&redis_key)
                    .query_async::<Option<String>>(&mut conn)
                    .await
                    .map_err(|e| GatewayError::Store(format!("Redis: {e}")))
            }
            Backend::File(path) => Ok(read_document(path)?
                .users
                .get(key)
                .map(|user| user.to_json())),
        }
    }

    /// Every key with a stored configuration, sorted.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Store`] when the store cannot be read.
    pub async fn list(&self) -> Result<Vec<String>, GatewayError> {
        match &self.backend {
            Backend::Redis(store) => {
                let prefix = format!("{}:user:", self.config.config_store.key_prefix);
                Ok(redis_user_keys(store, &prefix)
                    .await?
                    .into_iter()
                    .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned))
                    .collect())
            }
            Backend::File(path) => Ok(read_document(path)?.users.keys().cloned().collect()),
        }
    }

    /// Deletes `key`'s configuration and announces it; `false` when there was none.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Store`] when the store cannot be written.
    pub async fn delete(&self, key: &str) -> Result<bool, GatewayError> {
        match &self.backend {
            Backend::Redis(store) => {
                if self.get(key).await?.is_none() {
                    return Ok(false);
                }
                store.delete(key).await.map_err(store_error)?;
                Ok(true)
            }
            Backend::File(path) => {
                refuse_toml(path)?;
                let mut doc = read_document(path)?;
                if doc.users.remove(key).is_none() {
                    return Ok(false);
                }
                write_document(path, &doc)?;
                Ok(true)
            }
        }
    }

    async fn validated(
        &self,
        key: &str,
        text: &str,
    ) -> Result<(Validated, AdminReport), GatewayError> {
        let rules = OperatorRules::from_config(&self.config);
        let mut report = AdminReport::default();
        match &self.backend {
            Backend::Redis(store) => {
                let redis_key = store.key(key).map_err(|e| {
                    ConfigError::new(Source::Cli("users".into()), "key", e.message().to_owned())
                })?;
                // The same checks, messages and source as check-config's for a Redis key.
                let source = Source::Document(format!("redis key {redis_key}"));
                for finding in unreachable_entries(&self.config, "", [key]) {
                    report.warnings.push((source.clone(), finding));
                }
                let user = UserConfig::from_json_str(text).map_err(|e| {
                    problems_error(
                        &source,
                        e.errors()
                            .iter()
                            .map(|f| (f.path().to_owned(), f.message().to_owned())),
                    )
                })?;
                let mut problems: Vec<(String, String)> = unsupported_features("", &user, &rules)
                    .into_iter()
                    .map(|f| (f.path, f.message))
                    .collect();
                problems.extend(user.warnings().iter().map(|w| {
                    (
                        w.path().to_owned(),
                        format!(
                            "{} (a warning when serving; an error for check-config)",
                            w.message()
                        ),
                    )
                }));
                if !problems.is_empty() {
                    return Err(problems_error(&source, problems).into());
                }
                for notice in operator_warnings("", &user, &rules) {
                    report.warnings.push((source.clone(), notice));
                }
                Ok((Validated::One(user), report))
            }
            Backend::File(path) => {
                if key.is_empty() || key.chars().any(char::is_control) {
                    return Err(ConfigError::new(
                        Source::Cli("users".into()),
                        "key",
                        "must be non-empty, without control characters",
                    )
                    .into());
                }
                let source = Source::File(path.clone());
                let current = if path.exists() {
                    read_document(path)?
                } else {
                    UsersDocument::default()
                };
                // Parse the candidate in its place in the document, so paths read
                // `users.<key>.…` as check-config reports them for the file.
                let candidate: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                    ConfigError::new(source.clone(), format!("users.{key}"), e.to_string())
                })?;
                let mut whole = serde_json::to_value(&current)
                    .map_err(|e| GatewayError::Store(e.to_string()))?;
                whole["users"][key] = candidate;
                let doc = UsersDocument::from_json_str(&whole.to_string()).map_err(|e| {
                    problems_error(
                        &source,
                        e.errors()
                            .iter()
                            .map(|f| (f.path().to_owned(), f.message().to_owned())),
                    )
                })?;
                let (errors, warnings) = check_document(&doc, &rules);
                let mut problems: Vec<(String, String)> =
                    errors.into_iter().map(|f| (f.path, f.message)).collect();
                problems.extend(warnings.into_iter().map(|f| {
                    (
                        f.path,
                        format!(
                            "{} (a warning when serving; an error for check-config)",
                            f.message
                        ),
                    )
                }));
                if !problems.is_empty() {
                    return Err(problems_error(&source, problems).into());
                }
                for notice in document_notices(&doc, &rules) {
                    report.warnings.push((source.clone(), notice));
                }
                for finding in unreachable_entries(&self.config, "users.", [key]) {
                    report.warnings.push((source.clone(), finding));
                }
                Ok((Validated::Document(doc), report))
            }
        }
    }
}

enum Validated {
    /// The user configuration to store under the key (Redis).
    One(UserConfig),
    /// The whole file document with the key replaced.
    Document(UsersDocument),
}

fn unreachable_kind() -> Result<(), GatewayError> {
    Err(GatewayError::Store(
        "internal: validated for another store kind".to_owned(),
    ))
}

fn problems_error(
    source: &Source,
    problems: impl IntoIterator<Item = (String, String)>,
) -> ConfigError {
    let problems: Vec<Problem> = problems
        .into_iter()
        .map(|(key, message)| Problem {
            source: source.clone(),
            key,
            message,
        })
        .collect();
    ConfigError::from_problems(problems)
        .unwrap_or_else(|| ConfigError::new(source.clone(), "", "invalid user configuration"))
}

fn store_error(e: mcp_config_store::StoreError) -> GatewayError {
    GatewayError::Store(format!("Redis: {}", e.message()))
}

fn unreachable(e: impl std::fmt::Display) -> GatewayError {
    GatewayError::Store(format!("Redis is not reachable: {e}"))
}

fn is_toml(path: &Path) -> bool {
    DocumentFormat::from_path(path).is_some_and(|f| f != DocumentFormat::Json)
}

fn refuse_toml(path: &Path) -> Result<(), GatewayError> {
    if is_toml(path) {
        return Err(GatewayError::Store(format!(
            "{} is TOML: `users put` and `users delete` edit JSON user files only (they would drop its comments); convert it to JSON or edit it by hand",
            path.display()
        )));
    }
    Ok(())
}

fn read_document(path: &Path) -> Result<UsersDocument, GatewayError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| GatewayError::Store(format!("cannot read {}: {e}", path.display())))?;
    let format = DocumentFormat::from_path(path).unwrap_or(DocumentFormat::Json);
    UsersDocument::parse(&text, format).map_err(|e| {
        problems_error(
            &Source::File(path.to_path_buf()),
            e.errors()
                .iter()
                .map(|f| (f.path().to_owned(), f.message().to_owned())),
        )
        .into()
    })
}

/// Writes `doc` next to `path` and renames it over `path` (atomic on one file system). The new
/// file is created readable by its owner only and then given the old file's permissions: a
/// users file holds credentials (`headers.add`, `env`), and a `put` must never widen who can
/// read it. Two concurrent writers each rewrite the whole document: the last rename wins.
fn write_document(path: &Path, doc: &UsersDocument) -> Result<(), GatewayError> {
    use std::io::Write as _;
    refuse_toml(path)?;
    let text = serde_json::to_string_pretty(doc).map_err(|e| GatewayError::Store(e.to_string()))?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let failed =
        |e: std::io::Error| GatewayError::Store(format!("cannot write {}: {e}", path.display()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(&temp).map_err(failed)?;
    let permissions = std::fs::metadata(path).map(|m| m.permissions());
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| match permissions {
            Ok(permissions) => file.set_permissions(permissions),
            // A new users file: owner-only.
            Err(_) => Ok(()),
        })
        .and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| std::fs::rename(&temp, path)) {
        let _ = std::fs::remove_file(&temp);
        return Err(failed(e));
    }
    Ok(())
}
