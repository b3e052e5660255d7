//! [`poll_until`]: for the few conditions a test cannot await (a file reloaded, a process gone),
//! checked every 50 ms up to a generous limit; the limit is a hang detector, not a timing
//! assertion.

use std::time::{Duration, Instant};

/// Polls `check` every 50 ms until it holds (`true`) or `limit` passes (`false`).
pub async fn poll_until<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
