//! [`CachedStore`]: a bounded, single-flight, invalidation-aware cache in front of any store.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use moka::Expiry;
use moka::future::Cache;
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use crate::error::StoreError;
use crate::model::UserConfig;
use crate::store::{Invalidation, LoadFuture, LoadResult, UserConfigStore, invalidation_channel};

/// Default maximum number of cached subjects.
pub const DEFAULT_MAX_CAPACITY: u64 = 10_000;
/// Default lifetime of a cached configuration. Only a safety net: stores invalidate on change.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// Default lifetime of a cached "no configuration" answer.
pub const DEFAULT_NEGATIVE_TTL: Duration = Duration::from_secs(5);

type Value = Option<Arc<UserConfig>>;

/// A caching [`UserConfigStore`] wrapper.
///
/// - **Bounded**: at most `max_capacity` subjects (moka's TinyLFU eviction).
/// - **TTL** per entry, a safety net behind invalidation; a shorter **negative TTL** for subjects
///   without configuration, so a client probing with a bad subject cannot hammer the store while a
///   newly added user still shows up quickly.
/// - **Single-flight**: concurrent misses for one subject share one store read.
/// - **Errors are never cached**: the next request tries the store again (stores that know they are
///   down answer fast by themselves, see [`RedisStore`](crate::RedisStore)).
/// - **Invalidation**: a background task follows the inner store's [`Invalidation`]s and drops the
///   subject's entry (or everything on [`Invalidation::All`], or when it lagged behind). Events are
///   re-emitted on this store's own [`invalidations`](UserConfigStore::invalidations) channel
///   *after* the entry is gone, so downstream consumers that reload see the new value.
///
/// The background task starts in [`build`](CachedStoreBuilder::build) when called inside a Tokio
/// runtime, otherwise on the first load; it ends when the last clone of the cache is dropped.
///
/// ```
/// use std::time::Duration;
/// use mcp_config_store::{CachedStore, MemoryStore, UserConfig, UserConfigStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let memory = MemoryStore::new().with_user("alice", UserConfig::default());
/// let cache = CachedStore::builder(memory.clone())
///     .max_capacity(1_000)
///     .ttl(Duration::from_secs(30))
///     .negative_ttl(Duration::from_secs(2))
///     .build();
/// assert!(cache.load("alice".into()).await.unwrap().is_some()); // miss: reads the store
/// assert!(cache.load("alice".into()).await.unwrap().is_some()); // hit
/// let stats = cache.stats();
/// assert_eq!((stats.hits, stats.misses), (1, 1));
/// # }
/// ```
pub struct CachedStore<S> {
    inner: Arc<Inner<S>>,
}

impl<S> Clone for CachedStore<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<S> fmt::Debug for CachedStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedStore")
            .field("entries", &self.inner.cache.entry_count())
            .field("stats", &self.stats())
            .finish()
    }
}

struct Inner<S> {
    store: S,
    cache: Cache<Arc<str>, Value>,
    /// Bumped on every invalidation. A load that started before a bump may have read a value that
    /// the invalidation meant to drop, and moka inserts it after the invalidation ran; the loader
    /// compares generations afterwards and drops such an entry.
    generation: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    load_errors: AtomicU64,
    tx: broadcast::Sender<Invalidation>,
    task: Mutex<TaskState>,
    task_started: AtomicBool,
}

enum TaskState {
    Pending(broadcast::Receiver<Invalidation>),
    Running(AbortHandle),
    Empty,
}

impl<S> Drop for Inner<S> {
    fn drop(&mut self) {
        let state = self.task.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let TaskState::Running(handle) = state {
            handle.abort();
        }
    }
}

/// Counters of a [`CachedStore`], for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Loads answered from the cache, including requests that waited for another request's
    /// in-flight store read (single-flight).
    pub hits: u64,
    /// Loads that read the store (one per single-flight group).
    pub misses: u64,
    /// Loads that ended in a store error (every waiter of a failed read counts).
    pub load_errors: u64,
}

/// Builder of a [`CachedStore`]; see [`CachedStore::builder`].
#[derive(Debug)]
#[must_use]
pub struct CachedStoreBuilder<S> {
    store: S,
    max_capacity: u64,
    ttl: Duration,
    negative_ttl: Duration,
}

impl<S: UserConfigStore> CachedStoreBuilder<S> {
    /// Maximum number of cached subjects (default [`DEFAULT_MAX_CAPACITY`]).
    pub fn max_capacity(mut self, max_capacity: u64) -> Self {
        self.max_capacity = max_capacity;
        self
    }

    /// Lifetime of a cached configuration (default [`DEFAULT_TTL`]).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Lifetime of a cached "no configuration" answer (default [`DEFAULT_NEGATIVE_TTL`];
    /// `Duration::ZERO` disables negative caching).
    pub fn negative_ttl(mut self, negative_ttl: Duration) -> Self {
        self.negative_ttl = negative_ttl;
        self
    }

    /// Builds the cache and subscribes to the inner store's invalidations.
    pub fn build(self) -> CachedStore<S> {
        let cache = Cache::builder()
            .name("mcp-config-store")
            .max_capacity(self.max_capacity)
            .expire_after(PerEntryExpiry {
                ttl: self.ttl,
                negative_ttl: self.negative_ttl,
            })
            .build();
        // Subscribe now, before any load, so no event between build and the first load is lost.
        let rx = self.store.invalidations();
        let cached = CachedStore {
            inner: Arc::new(Inner {
                store: self.store,
                cache,
                generation: AtomicU64::new(0),
                hits: AtomicU64::new(0),
                misses: AtomicU64::new(0),
                load_errors: AtomicU64::new(0),
                tx: invalidation_channel(),
                task: Mutex::new(TaskState::Pending(rx)),
                task_started: AtomicBool::new(false),
            }),
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            cached.inner.ensure_task();
        }
        cached
    }
}

impl<S> CachedStore<S> {
    /// The wrapped store.
    pub fn get_ref(&self) -> &S {
        &self.inner.store
    }

    /// Hit, miss and error counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.inner.hits.load(Ordering::Relaxed),
            misses: self.inner.misses.load(Ordering::Relaxed),
            load_errors: self.inner.load_errors.load(Ordering::Relaxed),
        }
    }

    /// Approximate number of cached subjects (moka applies some bookkeeping lazily).
    pub fn entry_count(&self) -> u64 {
        self.inner.cache.entry_count()
    }
}

impl<S: UserConfigStore> CachedStore<S> {
    /// A cache with default settings.
    pub fn new(store: S) -> Self {
        Self::builder(store).build()
    }

    /// A builder with default settings.
    pub fn builder(store: S) -> CachedStoreBuilder<S> {
        CachedStoreBuilder {
            store,
            max_capacity: DEFAULT_MAX_CAPACITY,
            ttl: DEFAULT_TTL,
            negative_ttl: DEFAULT_NEGATIVE_TTL,
        }
    }

    /// Drops `subject`'s entry now.
    pub async fn invalidate(&self, subject: &str) {
        self.inner
            .apply(&Invalidation::Subject(Arc::from(subject)))
            .await;
    }

    /// Drops every entry now.
    pub async fn invalidate_all(&self) {
        self.inner.apply(&Invalidation::All).await;
    }
}

impl<S: UserConfigStore> Inner<S> {
    async fn load(self: Arc<Self>, subject: Arc<str>) -> LoadResult {
        self.ensure_task();
        let generation = self.generation.load(Ordering::Acquire);
        // The store is only called when this request performs the read (a miss), so a hit
        // allocates nothing and a counting store sees only real reads.
        let read = async { self.store.load(subject.clone()).await };
        let result = self
            .cache
            .entry(subject.clone())
            .or_try_insert_with(read)
            .await;
        match result {
            Ok(entry) => {
                let counter = if entry.is_fresh() {
                    &self.misses
                } else {
                    &self.hits
                };
                counter.fetch_add(1, Ordering::Relaxed);
                if self.generation.load(Ordering::Acquire) != generation {
                    // An invalidation raced with this load: do not keep what we may have read
                    // before the change.
                    self.cache.invalidate(&subject).await;
                }
                Ok(entry.into_value())
            }
            Err(err) => {
                self.load_errors.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::clone(&err))
            }
        }
    }

    async fn apply(&self, event: &Invalidation) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        match event {
            Invalidation::Subject(subject) => self.cache.invalidate(subject).await,
            Invalidation::All => self.cache.invalidate_all(),
        }
        // Forward after the entry is gone; nobody listening is fine.
        let _ = self.tx.send(event.clone());
    }

    /// Starts the invalidation task once (now if a runtime is present, else at the first load).
    fn ensure_task(self: &Arc<Self>) {
        if self.task_started.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if let TaskState::Pending(_) = &*state
            && let TaskState::Pending(rx) = std::mem::replace(&mut *state, TaskState::Empty)
        {
            let weak = Arc::downgrade(self);
            let handle = tokio::spawn(follow_invalidations(weak, rx));
            *state = TaskState::Running(handle.abort_handle());
            self.task_started.store(true, Ordering::Release);
        }
    }
}

async fn follow_invalidations<S: UserConfigStore>(
    weak: Weak<Inner<S>>,
    mut rx: broadcast::Receiver<Invalidation>,
) {
    loop {
        let event = match rx.recv().await {
            Ok(event) => event,
            // Missed events: any entry may be stale.
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "config cache missed invalidations; dropping every entry"
                );
                Invalidation::All
            }
            // The store is gone; nothing will change any more.
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(inner) = weak.upgrade() else { return };
        tracing::debug!(?event, "config cache invalidation");
        inner.apply(&event).await;
    }
}

impl<S: UserConfigStore> UserConfigStore for CachedStore<S> {
    fn load(&self, subject: Arc<str>) -> LoadFuture {
        Box::pin(self.inner.clone().load(subject))
    }

    fn invalidations(&self) -> broadcast::Receiver<Invalidation> {
        self.inner.tx.subscribe()
    }

    fn check(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        self.inner.store.check()
    }
}

/// Positive entries live `ttl`, negative ones `negative_ttl`, counted from their (re)insertion.
struct PerEntryExpiry {
    ttl: Duration,
    negative_ttl: Duration,
}

impl PerEntryExpiry {
    fn lifetime(&self, value: &Value) -> Duration {
        if value.is_some() {
            self.ttl
        } else {
            self.negative_ttl
        }
    }
}

impl Expiry<Arc<str>, Value> for PerEntryExpiry {
    fn expire_after_create(
        &self,
        _key: &Arc<str>,
        value: &Value,
        _at: Instant,
    ) -> Option<Duration> {
        Some(self.lifetime(value))
    }

    fn expire_after_update(
        &self,
        _key: &Arc<str>,
        value: &Value,
        _at: Instant,
        _remaining: Option<Duration>,
    ) -> Option<Duration> {
        Some(self.lifetime(value))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::MemoryStore;

    /// Counts store reads and makes each one slow enough that concurrent requests overlap.
    #[derive(Clone)]
    struct Counting {
        inner: MemoryStore,
        reads: Arc<AtomicUsize>,
        delay: Duration,
        fail: Arc<AtomicBool>,
    }

    impl Counting {
        fn new(inner: MemoryStore, delay: Duration) -> Self {
            Self {
                inner,
                reads: Arc::new(AtomicUsize::new(0)),
                delay,
                fail: Arc::new(AtomicBool::new(false)),
            }
        }
        fn reads(&self) -> usize {
            self.reads.load(Ordering::SeqCst)
        }
    }

    impl UserConfigStore for Counting {
        fn load(&self, subject: Arc<str>) -> LoadFuture {
            self.reads.fetch_add(1, Ordering::SeqCst);
            // Read at call time, answer after the delay: models a store read that completed
            // before a concurrent change but reaches the cache after it.
            let found = self.inner.get(&subject);
            let delay = self.delay;
            let fail = self.fail.load(Ordering::SeqCst);
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                if fail {
                    return Err(StoreError::unavailable("test outage"));
                }
                Ok(found)
            })
        }
        fn invalidations(&self) -> broadcast::Receiver<Invalidation> {
            self.inner.invalidations()
        }
    }

    fn user() -> UserConfig {
        UserConfig::from_json_str(
            r#"{"virtual_hosts":{"v":{"backends":{"b":{"url":"http://x/"}}}}}"#,
        )
        .unwrap()
    }

    async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..100 {
            if cond() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cond()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hundred_concurrent_cold_loads_make_one_store_read() {
        let store = Counting::new(
            MemoryStore::new().with_user("alice", user()),
            Duration::from_millis(100),
        );
        let cache = CachedStore::new(store.clone());
        let barrier = Arc::new(tokio::sync::Barrier::new(100));
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let cache = cache.clone();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait().await;
                    cache.load("alice".into()).await
                })
            })
            .collect();
        for task in tasks {
            assert!(task.await.unwrap().unwrap().is_some());
        }
        assert_eq!(
            store.reads(),
            1,
            "single-flight must coalesce concurrent misses"
        );
        let stats = cache.stats();
        assert_eq!(stats.misses, 1);
        assert_eq!(stats.hits, 99);
    }

    #[tokio::test]
    async fn missing_subjects_are_cached_for_the_negative_ttl_only() {
        let memory = MemoryStore::new();
        let store = Counting::new(memory.clone(), Duration::ZERO);
        let cache = CachedStore::builder(store.clone())
            .negative_ttl(Duration::from_millis(200))
            .build();
        assert!(cache.load("bob".into()).await.unwrap().is_none());
        assert!(cache.load("bob".into()).await.unwrap().is_none());
        assert_eq!(
            store.reads(),
            1,
            "second miss must come from the negative cache"
        );
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert!(cache.load("bob".into()).await.unwrap().is_none());
        assert_eq!(store.reads(), 2, "negative entry must expire");
    }

    #[tokio::test]
    async fn zero_negative_ttl_disables_negative_caching() {
        let store = Counting::new(MemoryStore::new(), Duration::ZERO);
        let cache = CachedStore::builder(store.clone())
            .negative_ttl(Duration::ZERO)
            .build();
        assert!(cache.load("bob".into()).await.unwrap().is_none());
        assert!(cache.load("bob".into()).await.unwrap().is_none());
        assert_eq!(store.reads(), 2);
    }

    #[tokio::test]
    async fn positive_entries_expire_after_the_ttl() {
        let memory = MemoryStore::new().with_user("alice", user());
        let store = Counting::new(memory, Duration::ZERO);
        let cache = CachedStore::builder(store.clone())
            .ttl(Duration::from_millis(200))
            .build();
        cache.load("alice".into()).await.unwrap();
        cache.load("alice".into()).await.unwrap();
        assert_eq!(store.reads(), 1);
        tokio::time::sleep(Duration::from_millis(350)).await;
        cache.load("alice".into()).await.unwrap();
        assert_eq!(store.reads(), 2, "entry must expire after its TTL");
    }

    #[tokio::test]
    async fn errors_are_not_cached() {
        let memory = MemoryStore::new().with_user("alice", user());
        let store = Counting::new(memory, Duration::ZERO);
        let cache = CachedStore::new(store.clone());
        store.fail.store(true, Ordering::SeqCst);
        assert!(
            cache
                .load("alice".into())
                .await
                .unwrap_err()
                .is_unavailable()
        );
        store.fail.store(false, Ordering::SeqCst);
        assert!(cache.load("alice".into()).await.unwrap().is_some());
        assert_eq!(store.reads(), 2);
        assert_eq!(cache.stats().load_errors, 1);
    }

    #[tokio::test]
    async fn subject_invalidation_drops_only_that_entry() {
        let memory = MemoryStore::new()
            .with_user("alice", user())
            .with_user("bob", user());
        let store = Counting::new(memory.clone(), Duration::ZERO);
        let cache = CachedStore::new(store.clone());
        let mut events = cache.invalidations();
        cache.load("alice".into()).await.unwrap();
        cache.load("bob".into()).await.unwrap();
        assert_eq!(store.reads(), 2);

        memory.insert("alice", UserConfig::default());
        // The cache re-emits once the entry is gone.
        assert_eq!(
            events.recv().await.unwrap(),
            Invalidation::Subject("alice".into())
        );
        let alice = cache.load("alice".into()).await.unwrap().unwrap();
        assert!(alice.virtual_hosts.is_empty(), "must see the new value");
        cache.load("bob".into()).await.unwrap();
        assert_eq!(store.reads(), 3, "bob must still be cached");
    }

    #[tokio::test]
    async fn all_invalidation_drops_everything() {
        let memory = MemoryStore::new()
            .with_user("alice", user())
            .with_user("bob", user());
        let store = Counting::new(memory.clone(), Duration::ZERO);
        let cache = CachedStore::new(store.clone());
        cache.load("alice".into()).await.unwrap();
        cache.load("bob".into()).await.unwrap();
        memory.replace_all(crate::UsersDocument::default());
        let reads = store.reads();
        assert!(
            eventually(|| {
                // Probe without going through load: the entries must be gone.
                !cache.inner.cache.contains_key("alice") && !cache.inner.cache.contains_key("bob")
            })
            .await
        );
        assert!(cache.load("alice".into()).await.unwrap().is_none());
        assert!(cache.load("bob".into()).await.unwrap().is_none());
        assert_eq!(store.reads(), reads + 2);
    }

    #[tokio::test]
    async fn invalidation_racing_a_load_does_not_keep_the_old_value() {
        let memory = MemoryStore::new().with_user("alice", user());
        // Slow reads so the invalidation lands while the read is in flight.
        let store = Counting::new(memory.clone(), Duration::from_millis(150));
        let cache = CachedStore::new(store.clone());
        let loading = tokio::spawn({
            let cache = cache.clone();
            async move { cache.load("alice".into()).await }
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        // The in-flight read already holds the old config; the change lands before it returns.
        memory.insert("alice", UserConfig::default());
        let old = loading.await.unwrap().unwrap().unwrap();
        assert!(!old.virtual_hosts.is_empty());
        let new = cache.load("alice".into()).await.unwrap().unwrap();
        assert!(
            new.virtual_hosts.is_empty(),
            "stale value must not stay cached"
        );
    }

    #[tokio::test]
    async fn manual_invalidation_and_capacity() {
        let memory = MemoryStore::new().with_user("alice", user());
        let store = Counting::new(memory, Duration::ZERO);
        let cache = CachedStore::builder(store.clone()).max_capacity(10).build();
        cache.load("alice".into()).await.unwrap();
        cache.invalidate("alice").await;
        cache.load("alice".into()).await.unwrap();
        cache.invalidate_all().await;
        cache.load("alice".into()).await.unwrap();
        assert_eq!(store.reads(), 3);
        for i in 0..100 {
            cache.load(Arc::from(format!("nobody-{i}"))).await.unwrap();
        }
        cache.inner.cache.run_pending_tasks().await;
        assert!(cache.entry_count() <= 10, "cache must stay bounded");
    }

    #[test]
    fn build_outside_a_runtime_defers_the_task() {
        let memory = MemoryStore::new().with_user("alice", user());
        let cache = CachedStore::new(memory.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            cache.load("alice".into()).await.unwrap();
            memory.insert("alice", UserConfig::default());
            assert!(
                eventually(|| !cache.inner.cache.contains_key("alice")).await,
                "deferred task must follow invalidations"
            );
        });
    }
}
