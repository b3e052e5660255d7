//! Backend eras, per credential scope: a `server/discover` probe tells a 2026-07-28 backend
//! from a 2025-only one, the first 2025 caller's `initialize` finds out whether a modern backend
//! speaks 2025 too, failures forget the era (the next call probes again), and the spec's
//! HTTP+SSE fallback rule marks a URL as the 2024-11-05 transport.

// The parent's items, glob-imported: one impl of `Client`, split by concern.
use super::*;

/// What a backend speaks towards one credential scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Speaks {
    /// 2026-07-28 and 2025: each caller is served in its own era.
    Both,
    /// 2026-07-28 only, or 2025 without sessions (an `initialize` answered without an
    /// `Mcp-Session-Id`, like the TypeScript SDK 2.x's per-request 2025 serving): such a 2025
    /// side can carry neither requests inside a call nor subscriptions, which the bridge from
    /// 2026-07-28 does carry. 2025 callers are bridged.
    ModernOnly,
    /// 2025 only: 2026-07-28 callers are bridged.
    LegacyOnly,
}

/// One era-cache entry. `server/discover` tells a modern backend from a 2025-only one at once;
/// whether a modern backend speaks 2025 too is found out by the first 2025 caller's
/// `initialize` (its `supportedVersions` name modern revisions only, and probing eagerly would
/// open an upstream session for every scope, wanted or not).
#[derive(Debug)]
pub(super) struct EraEntry {
    modern: bool,
    /// Whether 2025 callers get 2025 sessions: set at once for a 2025-only backend.
    legacy: OnceCell<bool>,
    probed_at: Instant,
}

impl EraEntry {
    /// What the backend speaks, `None` while a modern backend's 2025 side is untried.
    pub(super) fn speaks(&self) -> Option<Speaks> {
        match (self.modern, self.legacy.get()) {
            (false, _) => Some(Speaks::LegacyOnly),
            (true, Some(true)) => Some(Speaks::Both),
            (true, Some(false)) => Some(Speaks::ModernOnly),
            (true, None) => None,
        }
    }
}

/// The era one call is sent in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    Modern,
    /// 2025, `only` when the backend speaks nothing else (then an `initialize` refused may mean
    /// the HTTP+SSE transport).
    Legacy {
        only: bool,
    },
}

pub(super) type EraSlot = Arc<OnceCell<EraEntry>>;

impl Client {
    /// The scope's era-cache entry: probed with `server/discover` when unknown or stale. A full
    /// table (no share left) probes without caching.
    pub(super) async fn era_entry(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<EraSlot, UpstreamError> {
        let slot = {
            let slot = self
                .eras
                .get_or_insert_with(scope, &scope.principal, EraSlot::default)
                .value
                .unwrap_or_default();
            if slot
                .get()
                .is_some_and(|e| e.probed_at.elapsed() > self.options.era_ttl)
            {
                let fresh = EraSlot::default();
                self.eras.replace(scope, Arc::clone(&fresh));
                fresh
            } else {
                slot
            }
        };
        slot.get_or_try_init(|| async {
            let era = self.probe(target, url, scope).await?;
            tracing::debug!(backend = target.name, ?era, "backend era detected");
            let legacy = OnceCell::new();
            if era == Era::Legacy {
                let _ = legacy.set(true);
            }
            Ok::<_, UpstreamError>(EraEntry {
                modern: era == Era::Modern,
                legacy,
                probed_at: Instant::now(),
            })
        })
        .await?;
        Ok(slot)
    }

    /// The era to talk to the backend in for this caller: the caller's own when the backend
    /// speaks it, the other one otherwise. A 2025 caller is the first to find out whether a
    /// modern backend speaks 2025 too: its upstream session is opened here (and kept for its
    /// calls), and a backend that refuses `initialize` is recorded as modern only.
    pub(super) async fn route(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Route, UpstreamError> {
        let slot = self.era_entry(target, url, scope).await?;
        let Some(entry) = slot.get() else {
            return Err(UpstreamError::Malformed("no era detected"));
        };
        if !entry.modern {
            return Ok(Route::Legacy { only: true });
        }
        if target.era == Era::Modern {
            return Ok(Route::Modern);
        }
        let speaks = match entry.speaks() {
            Some(speaks) => speaks,
            None => match self.session_in(target, url, scope).await {
                Ok((_, session)) if session.id.is_some() => {
                    let _ = entry.legacy.set(true);
                    Speaks::Both
                }
                Ok(_) => {
                    tracing::debug!(
                        backend = target.name,
                        "backend serves 2025 without sessions: 2025 callers are bridged"
                    );
                    let _ = entry.legacy.set(false);
                    Speaks::ModernOnly
                }
                Err(e) if refuses_legacy(&e) => {
                    tracing::debug!(backend = target.name, error = %e, "backend speaks 2026-07-28 only");
                    let _ = entry.legacy.set(false);
                    Speaks::ModernOnly
                }
                Err(e) => return Err(e),
            },
        };
        tracing::trace!(backend = target.name, ?speaks, "era for a 2025 caller");
        Ok(match speaks {
            Speaks::Both => Route::Legacy { only: false },
            Speaks::ModernOnly => Route::Modern,
            Speaks::LegacyOnly => Route::Legacy { only: true },
        })
    }

    /// Forgets the era of a scope whose backend failed, so its next call probes again.
    pub(super) fn forget_era(&self, scope: &CredentialScope) {
        self.eras.remove(scope);
    }

    /// Sends a modern `server/discover`: a DiscoverResult (or a modern version error) means modern,
    /// any other answer means legacy; no answer at all is an error.
    pub(super) async fn probe(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Era, UpstreamError> {
        let id = self.next_id();
        let meta = meta::modern(None, target.client_caps, &self.client_info, None);
        let mut params = RawObject::new();
        params.set_raw("_meta", meta);
        let body = mcp_core::encode_request(&id, "server/discover", Some(&params.to_raw()));
        let out = Outgoing {
            url,
            body,
            mcp_headers: modern_headers("server/discover", None),
            forward_param_headers: false,
        };
        let request = request::build(out, target.downstream, &target.config.headers);
        let http = self.pools.client(scope);
        let mut answer = transport::exchange(&http, request, Self::timeout(target)).await?;
        if answer.status.is_server_error() {
            return Err(UpstreamError::Status(answer.status.as_u16()));
        }
        let Some(Ok(first)) = answer.messages.next().await else {
            return Ok(Era::Legacy);
        };
        Ok(if looks_modern(&first) {
            Era::Modern
        } else {
            Era::Legacy
        })
    }

    /// Whether the scope's URL is served over HTTP+SSE: configured so, or found so for this
    /// scope by the fallback rule within the last `era_ttl`.
    pub(super) fn speaks_sse(&self, target: &Target<'_>, scope: &CredentialScope) -> bool {
        if target.config.transport == Transport::Sse {
            return true;
        }
        if !self.any_sse_url.load(Ordering::Acquire) {
            return false;
        }
        match self.sse_urls.get(scope) {
            Some(found) if found.elapsed() <= self.options.era_ttl => true,
            Some(_) => {
                self.sse_urls.remove(scope);
                false
            }
            None => false,
        }
    }

    /// The spec's backwards-compatibility rule for clients: a legacy `initialize` POST answered
    /// 400, 404 or 405 may come from an HTTP+SSE (2024-11-05) server, so GET the URL; when its
    /// stream starts with an `endpoint` event, the URL is SSE (remembered like an era). Otherwise
    /// the original `error` stands.
    pub(super) async fn fall_back_to_sse(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
        error: UpstreamError,
    ) -> Result<(), UpstreamError> {
        if !matches!(error, UpstreamError::Status(400 | 404 | 405)) {
            return Err(error);
        }
        if let Err(e) = self.sse.connect(target, url, scope).await {
            tracing::debug!(backend = target.name, error = %e, "no HTTP+SSE endpoint either");
            return Err(error);
        }
        tracing::info!(
            backend = target.name,
            "backend speaks the 2024-11-05 HTTP+SSE transport"
        );
        self.sse_urls
            .upsert(scope, &scope.principal, Instant::now());
        self.any_sse_url.store(true, Ordering::Release);
        Ok(())
    }
}

/// Whether a failed `initialize` says the backend has no 2025 side (an HTTP 4xx, or a JSON-RPC
/// error or no result where an `InitializeResult` belongs), rather than that it is unreachable.
pub(super) fn refuses_legacy(error: &UpstreamError) -> bool {
    match error {
        UpstreamError::Status(code) => (400..500).contains(code) && *code != 408 && *code != 429,
        UpstreamError::Malformed(_) => true,
        _ => false,
    }
}

/// Whether a probe answer comes from a modern server: a result with `supportedVersions`, or a
/// modern protocol error (-32022 unsupported version / -32020 header mismatch / -32021).
pub(super) fn looks_modern(message: &Bytes) -> bool {
    let Ok(env) = Envelope::parse(message) else {
        return false;
    };
    match env.kind() {
        MessageKind::Response => env
            .result()
            .and_then(|r| RawObject::from_raw(r).ok())
            .is_some_and(|r| r.contains("supportedVersions")),
        MessageKind::Error => env.error().is_some_and(|e| {
            matches!(
                e.code,
                mcp_core::error_code::UNSUPPORTED_PROTOCOL_VERSION
                    | mcp_core::error_code::HEADER_MISMATCH
                    | mcp_core::error_code::MISSING_REQUIRED_CLIENT_CAPABILITY
            )
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn probe_answers_are_classified() {
        let modern = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}"#);
        assert!(looks_modern(&modern));
        let version = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}}"#,
        );
        assert!(looks_modern(&version));
        let legacy = Bytes::from_static(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: missing session"}}"#);
        assert!(!looks_modern(&legacy));
        assert!(!looks_modern(&Bytes::from_static(b"<html>")));
    }
}
