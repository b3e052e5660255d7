//! Hot reload by polling ([`PluginRuntime::watch_file`], `PluginRuntime::watch_redis`); the rules
//! are on [`ReloadHandle`].

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;

use crate::{ConfigError, Format, PluginRuntime};

#[cfg(feature = "redis")]
mod redis_source;

#[cfg(feature = "redis")]
pub use redis_source::RedisSource;

/// A running watcher; dropping it stops the watching.
///
/// [`PluginRuntime::watch_file`] polls a file, `PluginRuntime::watch_redis` (feature `redis`)
/// polls a Redis key. Both apply a changed document through [`PluginRuntime::apply_str`], so a
/// valid one is swapped in atomically and an invalid one fails closed (or keeps the last good
/// chain).
///
/// Polling is deliberate: it needs no platform file-notification API, works on network and
/// container-mounted files, survives editors that replace files by renaming, and for Redis needs no
/// long-lived subscriber connection or keyspace-notification setup. A change is seen within one
/// interval. A file is first compared by modification time and length, and only read when those
/// changed (or while it was modified less than two seconds ago, since a same-length rewrite within
/// the file system's timestamp granularity changes neither); the text is then compared with the
/// last document applied, so rewriting the same text applies nothing. Write the file atomically
/// (write a temp file, then rename over it): a half-written file is an invalid document.
///
/// What counts as an invalid reload: a document that fails validation, a file that is missing or
/// unreadable, a Redis key that is missing. An unreachable Redis is *not*: the current chain stays
/// and the poller retries (the document did not change, the store is down).
#[derive(Debug)]
#[must_use = "dropping the handle stops the watcher"]
pub struct ReloadHandle {
    task: JoinHandle<()>,
}

impl Drop for ReloadHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long after its modification a file is read on every poll (see `watch_file`).
const RACY_WINDOW: Duration = Duration::from_secs(2);

fn is_fresh(modified: SystemTime) -> bool {
    SystemTime::now()
        .duration_since(modified)
        .map_or(true, |age| age < RACY_WINDOW)
}

impl PluginRuntime {
    /// Polls `path` every `interval` and applies it when its text changed (see
    /// [`ReloadHandle`]). Needs a tokio runtime.
    pub fn watch_file(&self, path: impl Into<PathBuf>, interval: Duration) -> ReloadHandle {
        let runtime = self.clone();
        let path = path.into();
        let task = tokio::spawn(async move {
            let mut last: Option<(SystemTime, u64)> = None;
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let source = path.display().to_string();
                let stamp = tokio::fs::metadata(&path)
                    .await
                    .and_then(|m| Ok((m.modified()?, m.len())));
                match stamp {
                    // Unchanged metadata proves nothing while the file is fresh: a same-length
                    // rewrite within the file system's timestamp granularity keeps both.
                    Ok(stamp) if last == Some(stamp) && !is_fresh(stamp.0) => continue,
                    Ok(stamp) => last = Some(stamp),
                    Err(e) => {
                        last = None;
                        runtime.forget_text();
                        if runtime.state().error().is_none() {
                            runtime.apply_failure(
                                &ConfigError::new("", format!("cannot read: {e}"))
                                    .with_source(source),
                            );
                        }
                        continue;
                    }
                }
                match tokio::fs::read_to_string(&path).await {
                    Ok(text) if runtime.is_new(&text) => {
                        // The error is logged and recorded in the runtime state.
                        let _ = runtime.apply_str(&text, Format::from_path(&path), &source);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        runtime.forget_text();
                        runtime.apply_failure(
                            &ConfigError::new("", format!("cannot read: {e}")).with_source(source),
                        );
                    }
                }
            }
        });
        ReloadHandle { task }
    }
}
