//! Reloading a running `serve` (book: docs/src/deploying.md, "Reloading without a restart"): on
//! SIGHUP, and when the configuration file's content changes (checked every `config_watch_ms`),
//! the configuration is read again from the same sources as at start and handed to the gateway's
//! [`Reloader`]; a new `telemetry.log_level` is applied to the log here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_gateway::config::Override;
use mcp_gateway::{Reloader, Telemetry};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Where the configuration came from at start.
pub(crate) struct Sources {
    pub(crate) file: Option<PathBuf>,
    pub(crate) overrides: Vec<Override>,
}

/// Listens for SIGHUP from now on: installed before the gateway is built, so that a reload
/// asked during startup is not the signal's default action (ending the process); it is applied
/// once the gateway serves. `None` (logged) when the handler cannot be installed.
pub(crate) fn hangups() -> Option<Signal> {
    match signal(SignalKind::hangup()) {
        Ok(hangups) => Some(hangups),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP: only a change of the configuration file reloads it");
            None
        }
    }
}

/// Reloads on SIGHUP and on a change of the file's content, until the task is dropped. `seen`:
/// the file's content the running configuration was read from.
pub(crate) async fn run(
    reloader: Reloader,
    telemetry: Arc<Telemetry>,
    sources: Sources,
    mut hangups: Option<Signal>,
    mut seen: Option<Vec<u8>>,
) {
    let sources = Arc::new(sources);
    loop {
        let watch = reloader.running().config_watch;
        let watching = sources.file.is_some() && !watch.is_zero();
        let cause = tokio::select! {
            () = hangup(&mut hangups) => "SIGHUP",
            () = tokio::time::sleep(watch), if watching => "file changed",
        };
        let now = content(sources.file.as_deref()).await;
        if cause == "file changed" {
            // Unreadable for now (an editor renaming it into place): look again next time.
            if now.is_none() || now == seen {
                continue;
            }
            // Written in place, a file may be read half written: only content that stayed the
            // same for one more interval is taken.
            tokio::time::sleep(watch).await;
            if content(sources.file.as_deref()).await != now {
                continue;
            }
        }
        // Counted as seen even when it is refused: the same bad file is reported once, not at
        // every check; the next edit (or SIGHUP) tries again.
        seen = now;
        let reloading = reloader.clone();
        let from = Arc::clone(&sources);
        // Reading and building do blocking file I/O: off the serving threads.
        let result = tokio::task::spawn_blocking(move || {
            reloading.reload_from(from.file.as_deref(), &from.overrides)
        })
        .await;
        match result {
            Ok(result) => report(&reloader, &telemetry, result, cause),
            Err(e) => tracing::error!(cause, error = %e, "configuration reload failed"),
        }
    }
}

/// The next SIGHUP; never, without a handler.
async fn hangup(hangups: &mut Option<Signal>) {
    if let Some(signals) = hangups.as_mut()
        && signals.recv().await.is_some()
    {
        return;
    }
    std::future::pending().await
}

fn report(
    reloader: &Reloader,
    telemetry: &Telemetry,
    result: Result<mcp_gateway::Reloaded, mcp_gateway::ReloadError>,
    cause: &str,
) {
    match result {
        Ok(reloaded) => {
            // Before a new level applies: one that hides info lines would hide this one.
            tracing::info!(
                cause,
                generation = reloaded.generation,
                changed = ?reloaded.changed,
                "configuration reloaded"
            );
            if reloaded.changed.contains(&"telemetry.log_level") {
                let level = reloader.running().telemetry.log_level.clone();
                match telemetry.set_log_level(&level) {
                    Ok(true) => {}
                    Ok(false) => tracing::warn!(
                        "telemetry.log_level changed, but RUST_LOG sets the log filter; it stays"
                    ),
                    Err(e) => tracing::error!(error = %e, "telemetry.log_level not applied"),
                }
            }
        }
        Err(e) => tracing::error!(cause, error = %e, "configuration not reloaded"),
    }
}

/// The file's bytes, `None` when there is no file or it cannot be read now.
pub(crate) async fn content(file: Option<&Path>) -> Option<Vec<u8>> {
    tokio::fs::read(file?).await.ok()
}
