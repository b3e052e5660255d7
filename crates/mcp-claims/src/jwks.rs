//! [`JwksSource`]: one issuer's JWK Set, fetched on demand and cached.
//!
//! Request-driven, no background task of its own:
//! - the first token that needs the set fetches it (concurrent requests wait for that one fetch:
//!   single-flight);
//! - a set older than the refresh interval keeps being served while one background refresh runs;
//! - a token whose `kid` is not in the set triggers a refetch, at most once per minimum refetch
//!   interval (counted from the end of the last attempt of any kind), so garbage `kid`s cannot
//!   hammer the IdP; a request arriving while a fetch is in flight waits for that fetch;
//! - a failed fetch keeps the last good set; a set without any usable key counts as a failure.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use std::time::Instant;

use http::Uri;
use jsonwebtoken::Algorithm;

use crate::clock::JwksClock;
use crate::error::JwksError;
use crate::fetch::{HttpClient, fetch};
use crate::jwk::parse_jwks;
use crate::key::VerifyingKey;

/// Timing knobs shared by every JWKS source of a validator.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JwksTiming {
    /// Age after which a set is refreshed (in the background, while still served).
    pub(crate) refresh_interval: Duration,
    /// Minimum time between two fetch attempts, whatever triggered them.
    pub(crate) min_refetch_interval: Duration,
    /// Whole-exchange timeout of one fetch.
    pub(crate) fetch_timeout: Duration,
}

#[derive(Debug, Default)]
struct CacheState {
    keys: Option<Arc<[VerifyingKey]>>,
    /// When `keys` was fetched.
    fetched_at: Option<Instant>,
    /// When the last fetch attempt ended (success or not).
    last_attempt: Option<Instant>,
    /// Number of completed fetch attempts: lets a waiter see that someone else fetched.
    attempts: u64,
}

/// What the cache holds right now.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) keys: Option<Arc<[VerifyingKey]>>,
    /// Whether a fetch attempt is allowed now by the minimum refetch interval.
    pub(crate) may_fetch: bool,
    /// How long until the next attempt is allowed.
    pub(crate) retry_after: Duration,
    /// The attempt counter at snapshot time (for single-flight).
    pub(crate) attempts: u64,
}

/// One issuer's JWKS endpoint and its cached key set.
#[derive(Debug)]
pub(crate) struct JwksSource {
    uri: Uri,
    allowed: Option<Vec<Algorithm>>,
    client: HttpClient,
    timing: JwksTiming,
    clock: JwksClock,
    state: RwLock<CacheState>,
    fetch_lock: tokio::sync::Mutex<()>,
    refreshing: AtomicBool,
}

impl JwksSource {
    pub(crate) fn new(
        uri: Uri,
        allowed: Option<Vec<Algorithm>>,
        client: HttpClient,
        timing: JwksTiming,
        clock: JwksClock,
    ) -> Self {
        Self {
            uri,
            allowed,
            client,
            timing,
            clock,
            state: RwLock::new(CacheState::default()),
            fetch_lock: tokio::sync::Mutex::new(()),
            refreshing: AtomicBool::new(false),
        }
    }

    /// Whether a key of this set could ever be bound to `alg`: never an HMAC algorithm (symmetric
    /// keys are not taken from a URL), and only the issuer's allowed algorithms when it names them.
    pub(crate) fn may_accept(&self, alg: Algorithm) -> bool {
        !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
            && self
                .allowed
                .as_ref()
                .is_none_or(|allowed| allowed.contains(&alg))
    }

    /// The cached set, starting a background refresh when it is stale.
    ///
    /// Never blocks on I/O. When no tokio runtime is around to run the refresh, a stale set is
    /// reported as absent so that the caller refreshes inline.
    pub(crate) fn snapshot(self: &Arc<Self>) -> Snapshot {
        let now = self.clock.now();
        let (snapshot, stale) = {
            let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
            let since_attempt = state.last_attempt.map(|t| now.saturating_duration_since(t));
            let may_fetch =
                since_attempt.is_none_or(|since| since >= self.timing.min_refetch_interval);
            let retry_after = since_attempt
                .map(|since| self.timing.min_refetch_interval.saturating_sub(since))
                .unwrap_or_default();
            let stale = state
                .fetched_at
                .is_some_and(|t| now.saturating_duration_since(t) >= self.timing.refresh_interval);
            (
                Snapshot {
                    keys: state.keys.clone(),
                    may_fetch,
                    retry_after,
                    attempts: state.attempts,
                },
                stale,
            )
        };
        if stale && snapshot.may_fetch && !self.spawn_refresh() {
            return Snapshot {
                keys: None,
                ..snapshot
            };
        }
        snapshot
    }

    /// Starts one background refresh unless one is running. `false` if there is no runtime.
    fn spawn_refresh(self: &Arc<Self>) -> bool {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        if self
            .refreshing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let this = Arc::clone(self);
            handle.spawn(async move {
                let seen = this.attempts();
                let _ = this.fetch_single_flight(seen).await;
                this.refreshing.store(false, Ordering::Release);
            });
        }
        true
    }

    fn attempts(&self) -> u64 {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .attempts
    }

    /// Fetches the set unless another fetch completed since the caller's snapshot (`seen`) or the
    /// minimum refetch interval forbids it. Concurrent callers wait for the one fetch in flight.
    pub(crate) async fn fetch_single_flight(&self, seen: u64) -> Result<(), JwksError> {
        let _guard = self.fetch_lock.lock().await;
        {
            let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
            if state.attempts != seen {
                return Ok(()); // someone else fetched while we waited
            }
            if state.last_attempt.is_some_and(|t| {
                self.clock.now().saturating_duration_since(t) < self.timing.min_refetch_interval
            }) {
                return Ok(()); // rate-limited: keep what we have
            }
        }
        self.fetch_locked().await
    }

    /// Fetches now, ignoring the refetch interval (startup prefetch).
    pub(crate) async fn fetch_now(&self) -> Result<(), JwksError> {
        let _guard = self.fetch_lock.lock().await;
        self.fetch_locked().await
    }

    async fn fetch_locked(&self) -> Result<(), JwksError> {
        let result = fetch(&self.client, &self.uri, self.timing.fetch_timeout)
            .await
            .and_then(|body| parse_jwks(&body, self.allowed.as_deref()));
        // Recorded when the attempt ends: while a fetch is in flight, `may_fetch` stays true so
        // that callers without a usable key queue up behind it (single-flight) instead of being
        // turned away by the rate limit.
        let finished = self.clock.now();
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.attempts += 1;
        state.last_attempt = Some(finished);
        match result {
            Ok(keys) => {
                tracing::debug!(url = %self.uri, keys = keys.len(), "fetched JWKS");
                state.keys = Some(keys.into());
                state.fetched_at = Some(finished);
                Ok(())
            }
            Err(reason) => {
                tracing::warn!(
                    url = %self.uri,
                    %reason,
                    keeping_cached = state.keys.is_some(),
                    "JWKS fetch failed"
                );
                Err(JwksError {
                    url: self.uri.to_string(),
                    reason: reason.to_string(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::build_client;

    fn source(min_refetch: Duration) -> Arc<JwksSource> {
        let client = build_client(None, false, Duration::from_millis(200)).expect("client");
        Arc::new(JwksSource::new(
            // Port 9 (discard) on loopback: connection refused.
            Uri::from_static("http://127.0.0.1:9/jwks.json"),
            None,
            client,
            JwksTiming {
                refresh_interval: Duration::from_secs(300),
                min_refetch_interval: min_refetch,
                fetch_timeout: Duration::from_millis(500),
            },
            JwksClock::tokio(),
        ))
    }

    #[tokio::test]
    async fn failed_fetch_is_rate_limited() {
        let src = source(Duration::from_secs(60));
        let snap = src.snapshot();
        assert!(snap.keys.is_none());
        assert!(snap.may_fetch);
        assert_eq!(snap.attempts, 0);

        let err = src.fetch_single_flight(0).await.expect_err("refused");
        assert!(err.reason.contains("request failed"), "{err}");
        let snap = src.snapshot();
        assert_eq!(snap.attempts, 1);
        assert!(!snap.may_fetch, "within the minimum refetch interval");
        assert!(snap.retry_after > Duration::from_secs(50));

        // Same `seen` again: someone already fetched, no new attempt.
        src.fetch_single_flight(0).await.expect("skipped");
        // Current `seen`: rate-limited, no new attempt.
        src.fetch_single_flight(1).await.expect("skipped");
        assert_eq!(src.snapshot().attempts, 1);

        // An explicit prefetch ignores the rate limit.
        assert!(src.fetch_now().await.is_err());
        assert_eq!(src.snapshot().attempts, 2);
    }

    #[tokio::test]
    async fn zero_interval_allows_refetch() {
        let src = source(Duration::ZERO);
        assert!(src.fetch_single_flight(0).await.is_err());
        assert!(src.snapshot().may_fetch);
        assert!(src.fetch_single_flight(1).await.is_err());
        assert_eq!(src.snapshot().attempts, 2);
    }
}
