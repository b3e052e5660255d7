//! [`TempDir`]: a unique temporary directory, removed when dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh directory under the system temp dir, removed (recursively) when dropped.
///
/// The name combines a label, the process id, a per-process counter and the current time, so
/// parallel tests and parallel test binaries never share a directory.
///
/// ```
/// let dir = mcp_test_support::TempDir::new("example").expect("temp dir");
/// std::fs::write(dir.path().join("a.txt"), "x").expect("write");
/// let path = dir.path().to_path_buf();
/// drop(dir);
/// assert!(!path.exists());
/// ```
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a new unique directory whose name starts with `mcp-test-<label>-`.
    ///
    /// # Errors
    ///
    /// When the directory cannot be created.
    pub fn new(label: &str) -> std::io::Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        // Time is only a tie-breaker across processes that reuse a pid; it cannot go wrong enough to matter.
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!("mcp-test-{label}-{}-{n}-{nanos}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover temp dir must not fail a test.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
