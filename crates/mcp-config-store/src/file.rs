//! [`FileStore`]: a JSON or TOML file of `{ "users": { "<sub>": UserConfig } }`, reloaded on change.
//!
//! ## Why polling
//!
//! The store checks the file on an interval (default 1 s) instead of using OS file notifications:
//! no extra dependency, and it works where notifications do not (network filesystems, container
//! bind mounts, Kubernetes ConfigMaps that swap a symlink, editors that write a new file and
//! rename it over the old one). A check is one `stat`; the file is read only when its size or
//! modification time changed, or when the previous check saw a modification time less than
//! [`COARSE_MTIME_WINDOW`] old (filesystems with coarse timestamps can hide a second write of the
//! same size within one timestamp tick, so recent files are re-read and compared byte for byte).
//!
//! ## Reload semantics
//!
//! - A changed, valid document replaces the old one and emits [`Invalidation::All`].
//! - An invalid document (or an unreadable file) keeps the last good document and logs an error
//!   once per distinct bad content; [`FileStore::last_error`] reports it until a good reload.
//! - Warnings of a loaded document (overlapping backend names) are logged at every load.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use crate::error::ConfigError;
use crate::model::{UserConfig, UsersDocument};
use crate::parse::DocumentFormat;
use crate::store::{Invalidation, LoadFuture, UserConfigStore, invalidation_channel};

/// Default interval between file checks.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// A file whose modification time is younger than this at a check is re-read at the next check
/// even if its size and modification time look unchanged (coarse timestamp granularity).
pub const COARSE_MTIME_WINDOW: Duration = Duration::from_secs(2);

/// Why a [`FileStore`] could not be opened (or a forced reload failed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileStoreError {
    /// The file could not be read.
    #[error("cannot read user configuration file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The extension is neither `.json` nor `.toml` and no format was given.
    #[error("user configuration file {path}: unknown format (use a .json or .toml extension)")]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// The document is invalid.
    #[error("invalid user configuration file {path}: {error}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with field paths.
        #[source]
        error: ConfigError,
    },
}

/// A [`UserConfigStore`] backed by one JSON or TOML file, watched for changes. Clones share the
/// document and the watcher; the watcher stops when the last clone is dropped.
///
/// The file holds `{ "users": { "<sub>": <UserConfig> } }` (see [`UsersDocument`]); the format
/// comes from the extension (`.json`, `.toml`) unless set with [`FileStoreBuilder::format`].
///
/// ```
/// use mcp_config_store::{FileStore, UserConfigStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let dir = mcp_test_support::TempDir::new("doc-file-store").unwrap();
/// let path = dir.path().join("users.toml");
/// std::fs::write(&path, r#"
/// [users.alice.virtual_hosts.vh1.backends.weather]
/// url = "http://127.0.0.1:9001/mcp"
/// "#).unwrap();
/// let store = FileStore::open(&path).await.unwrap();
/// let alice = store.load("alice".into()).await.unwrap().unwrap();
/// assert!(alice.virtual_hosts["vh1"].backends.contains_key("weather"));
/// # }
/// ```
#[derive(Clone)]
pub struct FileStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    format: DocumentFormat,
    doc: RwLock<Arc<UsersDocument>>,
    last_error: RwLock<Option<Arc<str>>>,
    seen: tokio::sync::Mutex<Seen>,
    tx: broadcast::Sender<Invalidation>,
    watcher: Mutex<Option<AbortHandle>>,
}

/// What the last check saw, to decide whether the file needs reading again.
struct Seen {
    len: u64,
    modified: Option<SystemTime>,
    /// The modification time was recent at the last check: re-read even if it looks unchanged.
    recent: bool,
    contents: Vec<u8>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let watcher = self
            .watcher
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(handle) = watcher.take() {
            handle.abort();
        }
    }
}

impl fmt::Debug for FileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileStore")
            .field("path", &self.inner.path)
            .field("format", &self.inner.format)
            .finish()
    }
}

/// Builder of a [`FileStore`]; see [`FileStore::builder`].
#[derive(Debug)]
#[must_use]
pub struct FileStoreBuilder {
    path: PathBuf,
    format: Option<DocumentFormat>,
    poll_interval: Option<Duration>,
}

impl FileStoreBuilder {
    /// Sets the format instead of deriving it from the extension.
    pub fn format(mut self, format: DocumentFormat) -> Self {
        self.format = Some(format);
        self
    }

    /// Interval between checks (default [`DEFAULT_POLL_INTERVAL`]).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// Do not watch the file: the document is read once (e.g. an embedded default on disk).
    pub fn no_watch(mut self) -> Self {
        self.poll_interval = None;
        self
    }

    /// Reads and validates the file and starts the watcher (in the current Tokio runtime).
    ///
    /// # Errors
    ///
    /// When the file cannot be read, its format is unknown, or it is invalid: a gateway must not
    /// start with a broken configuration.
    pub async fn open(self) -> Result<FileStore, FileStoreError> {
        let format = match self.format {
            Some(format) => format,
            None => DocumentFormat::from_path(&self.path).ok_or_else(|| {
                FileStoreError::UnknownFormat {
                    path: self.path.clone(),
                }
            })?,
        };
        let io = |source| FileStoreError::Io {
            path: self.path.clone(),
            source,
        };
        let meta = tokio::fs::metadata(&self.path).await.map_err(io)?;
        let contents = tokio::fs::read(&self.path).await.map_err(io)?;
        let doc = parse(&contents, format).map_err(|error| FileStoreError::Invalid {
            path: self.path.clone(),
            error,
        })?;
        log_warnings(&self.path, &doc);
        let modified = meta.modified().ok();
        let inner = Arc::new(Inner {
            path: self.path,
            format,
            doc: RwLock::new(Arc::new(doc)),
            last_error: RwLock::new(None),
            seen: tokio::sync::Mutex::new(Seen {
                len: meta.len(),
                modified,
                recent: is_recent(modified),
                contents,
            }),
            tx: invalidation_channel(),
            watcher: Mutex::new(None),
        });
        if let Some(interval) = self.poll_interval {
            let handle = tokio::spawn(watch(Arc::downgrade(&inner), interval));
            *inner.watcher.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(handle.abort_handle());
        }
        Ok(FileStore { inner })
    }
}

impl FileStore {
    /// Opens `path` with default settings (format from the extension, checked every second).
    ///
    /// # Errors
    ///
    /// See [`FileStoreBuilder::open`].
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, FileStoreError> {
        Self::builder(path).open().await
    }

    /// A builder for `path`.
    pub fn builder(path: impl AsRef<Path>) -> FileStoreBuilder {
        FileStoreBuilder {
            path: path.as_ref().to_path_buf(),
            format: None,
            poll_interval: Some(DEFAULT_POLL_INTERVAL),
        }
    }

    /// The watched file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The document currently served.
    pub fn document(&self) -> Arc<UsersDocument> {
        self.inner
            .doc
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Why the latest reload was rejected, until a later reload succeeds (for readiness checks).
    pub fn last_error(&self) -> Option<Arc<str>> {
        self.inner
            .last_error
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Checks the file now instead of waiting for the next poll (e.g. on SIGHUP). Returns whether
    /// a new document was loaded.
    ///
    /// # Errors
    ///
    /// When the file cannot be read or is invalid; the last good document stays in use.
    pub async fn reload_now(&self) -> Result<bool, FileStoreError> {
        self.inner.check(true).await
    }
}

impl Inner {
    /// One check: reload when the file changed. `force` reads the file regardless of metadata.
    async fn check(&self, force: bool) -> Result<bool, FileStoreError> {
        let mut seen = self.seen.lock().await;
        let io = |source| FileStoreError::Io {
            path: self.path.clone(),
            source,
        };
        let meta = match tokio::fs::metadata(&self.path).await {
            Ok(meta) => meta,
            Err(e) => return Err(self.reject(io(e))),
        };
        let modified = meta.modified().ok();
        let unchanged = meta.len() == seen.len && modified == seen.modified;
        if unchanged && !seen.recent && !force {
            return Ok(false);
        }
        let contents = match tokio::fs::read(&self.path).await {
            Ok(contents) => contents,
            Err(e) => return Err(self.reject(io(e))),
        };
        seen.len = meta.len();
        seen.modified = modified;
        seen.recent = is_recent(modified);
        if contents == seen.contents {
            return Ok(false);
        }
        seen.contents = contents;
        match parse(&seen.contents, self.format) {
            Ok(doc) => {
                log_warnings(&self.path, &doc);
                *self.doc.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(doc);
                *self
                    .last_error
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = None;
                tracing::info!(path = %self.path.display(), "user configuration file reloaded");
                let _ = self.tx.send(Invalidation::All);
                Ok(true)
            }
            Err(error) => Err(self.reject(FileStoreError::Invalid {
                path: self.path.clone(),
                error,
            })),
        }
    }

    /// Records and logs a failed reload; the last good document stays in use.
    fn reject(&self, error: FileStoreError) -> FileStoreError {
        let message: Arc<str> = Arc::from(error.to_string());
        let mut last = self
            .last_error
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Log each distinct failure once, not at every poll.
        if last.as_deref() != Some(&*message) {
            tracing::error!(
                path = %self.path.display(),
                error = %message,
                "user configuration file rejected; keeping the last good document"
            );
        }
        *last = Some(message);
        error
    }
}

async fn watch(weak: Weak<Inner>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = weak.upgrade() else { return };
        // Errors are logged and recorded by `check`; the watcher keeps going.
        let _ = inner.check(false).await;
    }
}

fn parse(bytes: &[u8], format: DocumentFormat) -> Result<UsersDocument, ConfigError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ConfigError::single(crate::error::FieldError::new(
            "",
            format!("file is not UTF-8: {e}"),
        ))
    })?;
    UsersDocument::parse(text, format)
}

fn is_recent(modified: Option<SystemTime>) -> bool {
    match modified {
        // Unknown modification time: always compare contents.
        None => true,
        // A time in the future (clock skew) counts as recent.
        Some(m) => SystemTime::now()
            .duration_since(m)
            .map_or(true, |age| age < COARSE_MTIME_WINDOW),
    }
}

fn log_warnings(path: &Path, doc: &UsersDocument) {
    for warning in doc.warnings() {
        tracing::warn!(path = %path.display(), warning = %warning, "user configuration warning");
    }
}

impl UserConfigStore for FileStore {
    fn load(&self, subject: Arc<str>) -> LoadFuture {
        let found: Option<Arc<UserConfig>> = self.document().users.get(&*subject).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn invalidations(&self) -> broadcast::Receiver<Invalidation> {
        self.inner.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use mcp_test_support::TempDir;

    use super::*;

    const POLL: Duration = Duration::from_millis(20);

    fn json_doc(url: &str) -> String {
        format!(
            r#"{{"users":{{"alice":{{"virtual_hosts":{{"vh1":{{"backends":{{"b":{{"url":"{url}"}}}}}}}}}}}}}}"#
        )
    }

    async fn url_of(store: &FileStore) -> String {
        let cfg = store.load("alice".into()).await.unwrap().unwrap();
        cfg.virtual_hosts["vh1"].backends["b"]
            .url
            .as_ref()
            .unwrap()
            .to_string()
    }

    /// Polls for up to 2 s (the watcher runs every 20 ms).
    async fn wait_for_url(store: &FileStore, want: &str) -> bool {
        for _ in 0..200 {
            if url_of(store).await == want {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn edit_is_picked_up_and_emits_all() {
        let dir = TempDir::new("file-store-edit").unwrap();
        let path = dir.path().join("users.json");
        std::fs::write(&path, json_doc("http://one/mcp")).unwrap();
        let store = FileStore::builder(&path)
            .poll_interval(POLL)
            .open()
            .await
            .unwrap();
        let mut events = store.invalidations();
        assert_eq!(url_of(&store).await, "http://one/mcp");

        // Same length as before: only contents (and mtime) differ.
        std::fs::write(&path, json_doc("http://two/mcp")).unwrap();
        assert!(
            wait_for_url(&store, "http://two/mcp").await,
            "edit not seen"
        );
        assert_eq!(events.recv().await.unwrap(), Invalidation::All);
    }

    #[tokio::test]
    async fn invalid_edit_keeps_the_last_good_document() {
        let dir = TempDir::new("file-store-invalid").unwrap();
        let path = dir.path().join("users.json");
        std::fs::write(&path, json_doc("http://one/mcp")).unwrap();
        let store = FileStore::builder(&path)
            .poll_interval(POLL)
            .open()
            .await
            .unwrap();

        std::fs::write(&path, json_doc("not a url")).unwrap();
        let mut rejected = false;
        for _ in 0..200 {
            if store.last_error().is_some() {
                rejected = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(rejected, "invalid edit not noticed");
        let error = store.last_error().unwrap();
        assert!(
            error.contains(
                "users.alice.virtual_hosts.vh1.backends.b.url: relative URL without a base"
            ),
            "{error}"
        );
        assert_eq!(
            url_of(&store).await,
            "http://one/mcp",
            "last good document must stay"
        );

        // A later good edit recovers and clears the error.
        std::fs::write(&path, json_doc("http://three/mcp")).unwrap();
        assert!(wait_for_url(&store, "http://three/mcp").await);
        assert!(store.last_error().is_none());
    }

    #[tokio::test]
    async fn deleted_file_keeps_the_last_good_document() {
        let dir = TempDir::new("file-store-delete").unwrap();
        let path = dir.path().join("users.json");
        std::fs::write(&path, json_doc("http://one/mcp")).unwrap();
        let store = FileStore::builder(&path).no_watch().open().await.unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(
            store.reload_now().await,
            Err(FileStoreError::Io { .. })
        ));
        assert_eq!(url_of(&store).await, "http://one/mcp");
        // Atomic replace (write elsewhere, rename over) is seen.
        let tmp = dir.path().join("users.json.tmp");
        std::fs::write(&tmp, json_doc("http://four/mcp")).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(store.reload_now().await.unwrap());
        assert_eq!(url_of(&store).await, "http://four/mcp");
    }

    #[tokio::test]
    async fn toml_file_form() {
        let dir = TempDir::new("file-store-toml").unwrap();
        let path = dir.path().join("users.TOML");
        std::fs::write(
            &path,
            r#"
[users.alice.virtual_hosts.vh1]
naming = "auto"

[users.alice.virtual_hosts.vh1.backends.b]
url = "http://one/mcp"
replicas = ["http://two/mcp"]
timeout_ms = 1500
"#,
        )
        .unwrap();
        let store = FileStore::open(&path).await.unwrap();
        let cfg = store.load("alice".into()).await.unwrap().unwrap();
        let vh = &cfg.virtual_hosts["vh1"];
        assert_eq!(vh.naming, crate::Naming::Auto);
        assert_eq!(vh.backends["b"].timeout_ms, 1500);
        assert_eq!(vh.backends["b"].replicas.len(), 1);
        assert!(store.load("bob".into()).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn open_rejects_bad_files() {
        let dir = TempDir::new("file-store-open").unwrap();
        let unknown = dir.path().join("users.yaml");
        std::fs::write(&unknown, "{}").unwrap();
        assert!(matches!(
            FileStore::open(&unknown).await,
            Err(FileStoreError::UnknownFormat { .. })
        ));
        let missing = dir.path().join("missing.json");
        assert!(matches!(
            FileStore::open(&missing).await,
            Err(FileStoreError::Io { .. })
        ));
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[users.alice.virtual_hosts.v.backends.b]\nurl = 5\n").unwrap();
        let err = FileStore::open(&bad).await.unwrap_err();
        assert!(
            err.to_string()
                .ends_with("users.alice.virtual_hosts.v.backends.b.url: invalid type: integer `5`, expected a string"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn watcher_stops_when_the_store_is_dropped() {
        let dir = TempDir::new("file-store-drop").unwrap();
        let path = dir.path().join("users.json");
        std::fs::write(&path, json_doc("http://one/mcp")).unwrap();
        let store = FileStore::builder(&path)
            .poll_interval(POLL)
            .open()
            .await
            .unwrap();
        let weak = Arc::downgrade(&store.inner);
        drop(store);
        tokio::time::sleep(POLL * 3).await;
        assert!(
            weak.upgrade().is_none(),
            "watcher must not keep the store alive"
        );
    }
}
