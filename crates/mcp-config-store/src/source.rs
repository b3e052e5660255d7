//! [`ConfigSource`]: where a request's user configuration came from, so that what outlives the
//! request (a notification stream) can learn that its virtual host was removed.

use std::fmt;
use std::sync::Arc;

use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use crate::store::{Invalidation, UserConfigStore};

/// The store a request's configuration was loaded from and the key it was read under, a request
/// extension set by [`ConfigStoreLayer`](crate::ConfigStoreLayer). A long-lived response asks
/// it whether the virtual host it serves is still configured
/// ([`vhost_removed`](Self::vhost_removed)).
///
/// ```
/// use std::sync::Arc;
/// use mcp_config_store::{ConfigSource, MemoryStore, UserConfig};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store = MemoryStore::new();
/// let config: UserConfig = serde_json::from_str(
///     r#"{"virtual_hosts": {"vh": {"backends": {"a": {"url": "http://127.0.0.1:9/mcp"}}}}}"#,
/// ).unwrap();
/// store.insert("alice", config);
/// let source = ConfigSource::new(Arc::new(store.clone()), "alice".into());
/// let removed = tokio::spawn(source.vhost_removed("vh"));
/// store.remove("alice");
/// removed.await.unwrap(); // resolves: alice's configuration no longer has `vh`
/// # }
/// ```
#[derive(Clone)]
pub struct ConfigSource {
    store: Arc<dyn UserConfigStore>,
    subject: Arc<str>,
}

impl fmt::Debug for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigSource")
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

impl ConfigSource {
    /// The configuration read from `store` under `subject`.
    pub fn new(store: Arc<dyn UserConfigStore>, subject: Arc<str>) -> Self {
        Self { store, subject }
    }

    /// Resolves once the configuration no longer has virtual host `vhost` (the host was
    /// removed, or the whole configuration), as the store's invalidations tell. The store's
    /// announcements are followed from this call on (not from the first poll), and the
    /// configuration is read once at the start and again after each invalidation that may
    /// concern it, so a removal between the request's load and this call is not missed. A store
    /// that cannot be read is not a removal (it is read again after a second, then at the next
    /// invalidation); a store that stops announcing changes never resolves this.
    pub fn vhost_removed(&self, vhost: &str) -> impl Future<Output = ()> + Send + 'static {
        let mut changes = self.store.invalidations();
        let store = Arc::clone(&self.store);
        let subject = Arc::clone(&self.subject);
        let vhost = vhost.to_owned();
        async move {
            loop {
                match store.load(Arc::clone(&subject)).await {
                    Ok(Some(config)) if config.virtual_hosts.contains_key(&vhost) => {}
                    Ok(_) => return,
                    Err(e) => {
                        tracing::debug!(error = %e, "store unreadable while checking a stream's virtual host");
                        // Read again soon: the invalidation that told of a removal is spent.
                        tokio::select! {
                            () = tokio::time::sleep(UNREADABLE_RETRY) => continue,
                            () = next_change(&mut changes, &subject) => continue,
                        }
                    }
                }
                next_change(&mut changes, &subject).await;
            }
        }
    }
}

/// How soon a store that could not be read is read again.
const UNREADABLE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The next invalidation that may concern `subject` (a lagging receiver may have missed one:
/// that counts); never when the store stops announcing.
async fn next_change(changes: &mut Receiver<Invalidation>, subject: &str) {
    loop {
        match changes.recv().await {
            Ok(Invalidation::Subject(changed)) if *changed != *subject => {}
            Ok(_) | Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => return std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Poll;

    use super::*;
    use crate::{MemoryStore, UserConfig};

    fn config(vhosts: &[&str]) -> UserConfig {
        let hosts: Vec<String> = vhosts
            .iter()
            .map(|v| {
                format!(r#""{v}": {{"backends": {{"a": {{"url": "http://127.0.0.1:9/mcp"}}}}}}"#)
            })
            .collect();
        serde_json::from_str(&format!(r#"{{"virtual_hosts": {{{}}}}}"#, hosts.join(",")))
            .expect("valid configuration")
    }

    /// Lets the store's announcements reach the waiting future, then polls it once.
    async fn settled(future: std::pin::Pin<&mut impl Future<Output = ()>>) -> bool {
        let mut future = future;
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        matches!(futures_util::poll!(future.as_mut()), Poll::Ready(()))
    }

    #[tokio::test]
    async fn a_removal_before_the_first_poll_is_seen() {
        let store = MemoryStore::new();
        store.insert("alice", config(&["vh"]));
        let source = ConfigSource::new(Arc::new(store.clone()), "alice".into());
        let mut removed = pin!(source.vhost_removed("vh"));
        // Removed after the wait began, before anything polled it.
        store.insert("alice", config(&["other"]));
        assert!(settled(removed.as_mut()).await, "the removal was missed");
        // A configuration that lacks the host already ends the wait at once.
        let mut gone = pin!(source.vhost_removed("vh"));
        assert!(settled(gone.as_mut()).await);
    }

    #[tokio::test]
    async fn only_the_removal_of_its_own_virtual_host_ends_the_wait() {
        let store = MemoryStore::new();
        store.insert("alice", config(&["vh", "other"]));
        store.insert("bob", config(&["vh"]));
        let source = ConfigSource::new(Arc::new(store.clone()), "alice".into());
        let mut removed = pin!(source.vhost_removed("vh"));
        assert!(!settled(removed.as_mut()).await, "nothing changed yet");

        // Another subject losing the same virtual host name is not alice's concern.
        store.remove("bob");
        assert!(
            !settled(removed.as_mut()).await,
            "bob's change ended alice's wait"
        );
        // Alice's configuration changing while keeping `vh` is not a removal either.
        store.insert("alice", config(&["vh"]));
        assert!(
            !settled(removed.as_mut()).await,
            "a kept virtual host ended the wait"
        );
        // Dropping `vh` from alice's configuration is.
        store.insert("alice", config(&["other"]));
        assert!(settled(removed.as_mut()).await, "the removal was not seen");
    }
}
