//! [`shutdown_signal`]: completes on SIGTERM or SIGINT (Ctrl-C).

/// Completes when the process receives SIGTERM or SIGINT (on non-Unix: Ctrl-C), logging which.
/// Pass it to [`Gateway::serve`](crate::Gateway::serve).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!(signal = "SIGTERM", "signal received"),
                    _ = int.recv() => tracing::info!(signal = "SIGINT", "signal received"),
                }
                return;
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM/SIGINT; falling back to Ctrl-C");
            }
        }
    }
    if tokio::signal::ctrl_c().await.is_ok() {
        tracing::info!(signal = "ctrl-c", "signal received");
    } else {
        // No way to be told: never complete rather than shut down at once.
        std::future::pending::<()>().await;
    }
}
