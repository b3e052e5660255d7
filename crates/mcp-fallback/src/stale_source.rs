//! [`StaleSource`]: where the fallback layer finds a stale answer; [`NoStale`] and
//! [`CacheSource`] (a [`StaleCache`] keyed by a function of the request).

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use crate::{Stale, StaleCache};

/// The stale-if-error step of the fallback layer: remembers good answers and hands back the last
/// one when the primary and every alternate failed.
///
/// [`store`](Self::store) is called with every answer that stands (the primary's or an
/// alternate's, never a stale one); [`lookup`](Self::lookup) once per exhausted call, after the
/// alternates. A source decides what it keeps (only list and discover results, typically), how
/// stale it may be, and marks what it returns (see [`degraded`](crate::degraded)).
pub trait StaleSource<Req, Resp> {
    /// A stale answer for `req` and its age, if there is one fresh enough.
    fn lookup(&self, req: &Req) -> Option<Stale<Resp>>;
    /// Remembers `resp` as the last good answer to `req`.
    fn store(&self, req: &Req, resp: &Resp);
}

/// No stale step: stores nothing, finds nothing. The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStale;

impl<Req, Resp> StaleSource<Req, Resp> for NoStale {
    fn lookup(&self, _req: &Req) -> Option<Stale<Resp>> {
        None
    }

    fn store(&self, _req: &Req, _resp: &Resp) {}
}

/// A [`StaleSource`] over a [`StaleCache`]: `key(req)` picks the entry (`None`: the request is
/// not cached, e.g. a `tools/call`), answers younger than `max_staleness` are served, passed
/// through `mark(answer, age)` first. Made by [`StaleCache::source`].
///
/// ```
/// use std::time::Duration;
/// use mcp_fallback::{StaleCache, StaleSource};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let cache = StaleCache::new(1000);
/// let source = cache
///     .source(Duration::from_secs(300), |req: &(&str, &str)| {
///         (req.1 == "tools/list").then(|| req.0.to_owned())
///     })
///     .mark(|answer: String, age| format!("{answer} (stale {}s)", age.as_secs()));
///
/// source.store(&("alice", "tools/list"), &"[echo]".to_owned());
/// source.store(&("alice", "tools/call"), &"done".to_owned()); // not cached
/// tokio::time::advance(Duration::from_secs(7)).await;
///
/// let stale = source.lookup(&("alice", "tools/list")).unwrap();
/// assert_eq!(stale.value, "[echo] (stale 7s)");
/// assert!(source.lookup(&("alice", "tools/call")).is_none());
/// assert!(source.lookup(&("bob", "tools/list")).is_none());
/// # }
/// ```
pub struct CacheSource<K, V, F, M = fn(V, Duration) -> V> {
    cache: StaleCache<K, V>,
    key: F,
    max_staleness: Duration,
    mark: M,
}

impl<K, V, F, M> CacheSource<K, V, F, M> {
    /// Replaces the marker applied to a stale answer before it is served (default: none).
    #[must_use]
    pub fn mark<M2>(self, mark: M2) -> CacheSource<K, V, F, M2>
    where
        M2: Fn(V, Duration) -> V,
    {
        CacheSource {
            cache: self.cache,
            key: self.key,
            max_staleness: self.max_staleness,
            mark,
        }
    }

    /// The cache.
    pub fn cache(&self) -> &StaleCache<K, V> {
        &self.cache
    }

    /// The maximum staleness served.
    pub fn max_staleness(&self) -> Duration {
        self.max_staleness
    }
}

impl<K, V, F: Clone, M: Clone> Clone for CacheSource<K, V, F, M> {
    fn clone(&self) -> Self {
        Self {
            cache: self.cache.clone(),
            key: self.key.clone(),
            max_staleness: self.max_staleness,
            mark: self.mark.clone(),
        }
    }
}

impl<K, V, F, M> fmt::Debug for CacheSource<K, V, F, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheSource")
            .field("max_staleness", &self.max_staleness)
            .finish_non_exhaustive()
    }
}

impl<K, V> StaleCache<K, V>
where
    K: Hash + Eq + Clone,
{
    /// A [`StaleSource`] over this cache (sharing its entries): `key` picks the entry of a
    /// request, or `None` for requests that are not cached; answers younger than `max_staleness`
    /// are served.
    pub fn source<F>(&self, max_staleness: Duration, key: F) -> CacheSource<K, V, F> {
        fn unmarked<V>(value: V, _age: Duration) -> V {
            value
        }
        CacheSource {
            cache: self.clone(),
            key,
            max_staleness,
            mark: unmarked::<V>,
        }
    }
}

impl<Req, K, V, F, M> StaleSource<Req, V> for CacheSource<K, V, F, M>
where
    K: Hash + Eq + Clone,
    V: Clone,
    F: Fn(&Req) -> Option<K>,
    M: Fn(V, Duration) -> V,
{
    fn lookup(&self, req: &Req) -> Option<Stale<V>> {
        let key = (self.key)(req)?;
        let stale = self.cache.get(&key, self.max_staleness)?;
        let age = stale.age;
        Some(stale.map(|value| (self.mark)(value, age)))
    }

    fn store(&self, req: &Req, resp: &V) {
        if let Some(key) = (self.key)(req) {
            self.cache.insert(key, resp.clone());
        }
    }
}
