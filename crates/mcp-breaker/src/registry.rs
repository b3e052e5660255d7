//! [`BreakerRegistry`]: one shared breaker per key.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::{BreakerConfig, BreakerConfigError, BreakerSnapshot, CircuitBreaker};

/// Breakers by key, so a router can hold one breaker per backend and every session, request and
/// service clone reaches the same one. Cheap to clone; clones share the map.
///
/// A breaker is created on first use with the config given then; asking again with an *equal*
/// config returns the same breaker, asking with a *different* config (the backend's overrides
/// were edited) replaces it with a fresh, closed breaker. Callers still holding the old one keep
/// using it until they ask again.
///
/// ```
/// use mcp_breaker::{BreakerConfig, BreakerRegistry, BreakerState};
///
/// let registry = BreakerRegistry::new();
/// let cfg = BreakerConfig::default();
/// let a = registry.get_or_insert("weather", &cfg).unwrap();
/// let b = registry.get_or_insert("weather", &cfg).unwrap();
/// a.handle().force_open();
/// assert_eq!(b.state(), BreakerState::ForcedOpen); // same breaker
/// assert_eq!(registry.get("weather").unwrap().state(), BreakerState::ForcedOpen);
///
/// let mut edited = cfg.clone();
/// edited.open_ms = 1000;
/// let c = registry.get_or_insert("weather", &edited).unwrap();
/// assert_eq!(c.state(), BreakerState::Closed); // replaced
/// assert_eq!(registry.len(), 1);
/// ```
#[derive(Clone)]
pub struct BreakerRegistry {
    map: Arc<RwLock<HashMap<Arc<str>, CircuitBreaker>>>,
    /// Whether the breakers it creates set their `mcp_breaker_state` gauge.
    state_gauges: bool,
    /// The names that label their breakers' metrics themselves, at most `max` of them.
    labels: Arc<MetricLabels>,
}

/// A cap on the distinct `breaker` label values of the breakers a registry creates.
#[derive(Debug, Default)]
struct MetricLabels {
    /// `None`: every name labels its own series.
    max: Option<usize>,
    own: Mutex<HashSet<Arc<str>>>,
}

/// The `breaker` label of the breakers whose names came past
/// [`BreakerRegistry::max_metric_labels`].
pub const OTHER_METRIC_LABEL: &str = "other";

impl MetricLabels {
    /// The label of `name`'s breakers: the name itself while fewer than `max` names have one,
    /// else [`OTHER_METRIC_LABEL`]. A name keeps its label once it has one, so its series do not
    /// move when breakers are replaced.
    fn of(&self, name: &str) -> Option<&'static str> {
        let max = self.max?;
        let mut own = self.own.lock().unwrap_or_else(PoisonError::into_inner);
        if own.contains(name) || (own.len() < max && own.insert(Arc::from(name))) {
            None
        } else {
            Some(OTHER_METRIC_LABEL)
        }
    }
}

impl Default for BreakerRegistry {
    fn default() -> Self {
        Self {
            map: Arc::default(),
            state_gauges: true,
            labels: Arc::default(),
        }
    }
}

impl fmt::Debug for BreakerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerRegistry")
            .field("len", &self.len())
            .finish()
    }
}

impl BreakerRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The breakers it creates leave the `mcp_breaker_state` gauge to the application
    /// ([`BreakerBuilder::without_state_gauge`](crate::BreakerBuilder::without_state_gauge)):
    /// for keys that give several breakers one name (a backend per tenant), whose states the
    /// application counts from [`snapshots`](Self::snapshots) instead.
    #[must_use]
    pub fn without_state_gauges(mut self) -> Self {
        self.state_gauges = false;
        self
    }

    /// At most `max` distinct names label their breakers' metrics (`breaker=<name>`); the
    /// breakers of later names are labelled [`OTHER_METRIC_LABEL`]. For names that come from
    /// users' configurations (a backend's name), which would otherwise set the number of series
    /// the metrics backend stores. A name that got its own label keeps it.
    ///
    /// ```
    /// use mcp_breaker::{BreakerConfig, BreakerRegistry};
    ///
    /// let registry = BreakerRegistry::new().max_metric_labels(1);
    /// let cfg = BreakerConfig::default();
    /// let first = registry.get_or_insert("weather", &cfg).unwrap();
    /// let second = registry.get_or_insert("search", &cfg).unwrap();
    /// assert_eq!(first.name(), "weather");
    /// assert_eq!(second.name(), "search"); // messages keep the name; its series read `other`
    /// ```
    #[must_use]
    pub fn max_metric_labels(mut self, max: usize) -> Self {
        self.labels = Arc::new(MetricLabels {
            max: Some(max),
            own: Mutex::default(),
        });
        self
    }

    /// The breaker of `key`, if any.
    pub fn get(&self, key: &str) -> Option<CircuitBreaker> {
        self.read().get(key).cloned()
    }

    /// The breaker of `key`, named `key` (its metrics label and error-message name).
    pub fn get_or_insert(
        &self,
        key: &str,
        config: &BreakerConfig,
    ) -> Result<CircuitBreaker, BreakerConfigError> {
        self.get_or_insert_named(key, key, config)
    }

    /// The breaker of `key`, named `name` when it is created: use this when the key must be
    /// unique (e.g. a backend URL or `tenant/backend`) but the name should stay the backend's
    /// public name (error messages never show addresses).
    pub fn get_or_insert_named(
        &self,
        key: &str,
        name: &str,
        config: &BreakerConfig,
    ) -> Result<CircuitBreaker, BreakerConfigError> {
        if let Some(existing) = self.read().get(key)
            && existing.config() == config
            && existing.name() == name
        {
            return Ok(existing.clone());
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = map.get(key)
            && existing.config() == config
            && existing.name() == name
        {
            return Ok(existing.clone());
        }
        let mut builder = CircuitBreaker::builder(name).config(config.clone());
        if !self.state_gauges {
            builder = builder.without_state_gauge();
        }
        if let Some(label) = self.labels.of(name) {
            builder = builder.metric_label(label);
        }
        let breaker = builder.build()?;
        if map.insert(Arc::from(key), breaker.clone()).is_some() {
            tracing::info!(
                breaker = name,
                "circuit breaker config changed; state reset"
            );
        }
        Ok(breaker)
    }

    /// Adds or replaces the breaker of `key`.
    pub fn insert(&self, key: &str, breaker: CircuitBreaker) -> Option<CircuitBreaker> {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(Arc::from(key), breaker)
    }

    /// Removes the breaker of `key`.
    pub fn remove(&self, key: &str) -> Option<CircuitBreaker> {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key)
    }

    /// Keeps the breakers for which `keep` returns true (e.g. drop backends no config names).
    pub fn retain(&self, mut keep: impl FnMut(&str, &CircuitBreaker) -> bool) {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|k, b| keep(k, b));
    }

    /// Every key with its breaker's snapshot, sorted by key (for health pages).
    pub fn snapshots(&self) -> Vec<(Arc<str>, BreakerSnapshot)> {
        let mut all: Vec<_> = self
            .read()
            .iter()
            .map(|(k, b)| (Arc::clone(k), b.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.into_iter().map(|(k, b)| (k, b.snapshot())).collect()
    }

    /// Number of breakers.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there is no breaker.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Arc<str>, CircuitBreaker>> {
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }
}
