//! The degraded marker and the other `_meta` the gateway adds to the results it builds.
//!
//! A merged result that is missing something says so in `_meta["mcp-gateway/degraded"]`:
//!
//! ```json
//! {"backends": [{"name": "weather", "reason": "backend unreachable"}],
//!  "items": [{"name": "a-b-x", "reason": "ambiguous"}]}
//! ```
//!
//! `backends` lists backends that contributed nothing (unreachable, timed out, answered an error);
//! `items` lists items left out (ambiguous public names, names too long or with invalid
//! characters); `stale` lists backends that failed and were answered from their last good result
//! for the same caller (stale-if-error), with its age: `{"name": "weather", "age_ms": 1200}`. The
//! call itself still succeeds with what the other backends returned.

use serde::Serialize;
use serde_json::value::RawValue;

/// `_meta` key of the degraded marker.
pub const DEGRADED_META_KEY: &str = "mcp-gateway/degraded";
/// `_meta` key of the server's implementation info (2026-07-28).
pub const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct BackendIssue {
    pub(crate) name: String,
    pub(crate) reason: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct StaleIssue {
    pub(crate) name: String,
    pub(crate) age_ms: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct ItemIssue {
    pub(crate) name: String,
    pub(crate) reason: &'static str,
}

/// What a merged result is missing.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub(crate) struct Degraded {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) backends: Vec<BackendIssue>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) items: Vec<ItemIssue>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) stale: Vec<StaleIssue>,
}

impl Degraded {
    pub(crate) fn is_empty(&self) -> bool {
        self.backends.is_empty() && self.items.is_empty() && self.stale.is_empty()
    }

    /// A backend that failed and was answered from its last good result.
    pub(crate) fn stale(&mut self, name: &str, age: std::time::Duration) {
        self.stale.push(StaleIssue {
            name: name.to_owned(),
            age_ms: u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
        });
    }

    pub(crate) fn backend(&mut self, name: &str, reason: String) {
        self.backends.push(BackendIssue {
            name: name.to_owned(),
            reason,
        });
    }

    pub(crate) fn item(&mut self, name: &str, reason: &'static str) {
        self.items.push(ItemIssue {
            name: name.to_owned(),
            reason,
        });
    }

    /// Names the backends left out or answered stale on the current span (the fan-out's server
    /// span), with spans on.
    pub(crate) fn annotate_span(&self) {
        if self.backends.is_empty() && self.stale.is_empty() {
            return;
        }
        crate::telemetry::annotate_current(|| {
            let names: Vec<opentelemetry::StringValue> = self
                .backends
                .iter()
                .map(|b| b.name.clone().into())
                .chain(self.stale.iter().map(|s| s.name.clone().into()))
                .collect();
            opentelemetry::KeyValue::new(
                crate::telemetry::ATTR_DEGRADED,
                opentelemetry::Value::Array(names.into()),
            )
        });
    }

    /// The result `_meta`: server info, plus the marker when something is missing.
    pub(crate) fn to_meta(&self, server_info: &RawValue) -> Box<RawValue> {
        let mut meta = mcp_core::RawObject::new();
        meta.set_borrowed(SERVER_INFO_META_KEY, server_info);
        if !self.is_empty() {
            meta.set_json(DEGRADED_META_KEY, self);
        }
        meta.to_raw()
    }
}

/// The cache hints of a merged result: the smallest `ttlMs` of the contributors.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TtlMin(Option<u64>);

impl TtlMin {
    pub(crate) fn add(&mut self, ttl_ms: u64) {
        self.0 = Some(self.0.map_or(ttl_ms, |t| t.min(ttl_ms)));
    }

    /// The merged `ttlMs` (0 when nothing contributed).
    pub(crate) fn get(self) -> u64 {
        self.0.unwrap_or(0)
    }
}

/// `cacheScope` of every merged result: the gateway's view is per principal (it authenticates,
/// prefixes and filters per caller), so nothing it merges may be shared across callers.
pub(crate) const CACHE_SCOPE: &str = "private";

/// A backend result's `ttlMs` (absent or negative counts as 0, as the spec says).
pub(crate) fn ttl_of(result: &mcp_core::RawObject<'_>) -> u64 {
    result
        .get_as::<f64>("ttlMs")
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(|t| t as u64)
        .unwrap_or(0)
}
