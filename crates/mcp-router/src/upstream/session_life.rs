//! The lifecycle of the caller's upstream 2025 sessions: opened by `initialize` on first use,
//! shared by the caller's downstream sessions (attached and released), adopted from a session
//! record another node wrote, followed by a GET stream.

// The parent's items, glob-imported: one impl of `Client`, split by concern.
use super::*;

impl Client {
    pub(super) fn session_key(target: &Target<'_>, scope: &CredentialScope) -> SessionKey {
        SessionKey {
            scope: scope.clone(),
            capabilities: capability_digest(target.client_caps.get().as_bytes()),
        }
    }

    pub(super) fn session_key_at(target: &Target<'_>, url: &Url) -> SessionKey {
        Self::session_key(target, &Self::scope_at(target, url))
    }

    /// Changes whenever an upstream 2025 session leaves this node's table (evicted, expired,
    /// ended): adopted records are adopted again after that.
    pub(crate) fn session_generation(&self) -> u64 {
        self.sessions.generation()
    }

    /// A downstream 2025 session starts using the caller's upstream session at `url`.
    pub(crate) fn attach(&self, target: &Target<'_>, url: &Url) {
        self.sessions.attach(&Self::session_key_at(target, url));
    }

    /// A downstream 2025 session that used the upstream session at `url` ended: when it was the
    /// last one, the upstream session is forgotten (new calls open another) and ended with an
    /// HTTP DELETE (best effort) once no call still uses it: 2026-07-28 clients of the same
    /// caller share it without being counted as its users, and their calls in flight must finish.
    pub(crate) async fn release(&self, target: &Target<'_>, url: &Url) {
        let Some(session) = self.sessions.detach(&Self::session_key_at(target, url)) else {
            return;
        };
        let Some(id) = session.id.clone() else {
            return;
        };
        let out = Outgoing {
            url: &session.url,
            body: Vec::new(),
            mcp_headers: legacy_headers(&session),
            forward_param_headers: false,
        };
        let mut request = request::build(out, target.downstream, &target.config.headers);
        *request.method_mut() = http::Method::DELETE;
        let http = self.pools.client(&Self::scope_at(target, &session.url));
        let timeout = Self::timeout(target);
        let backend = target.name.to_owned();
        self.owed.spawn(async move {
            // Calls in flight hold the session (their replies keep it); wait for them, as long as
            // the backend's own timeout at most.
            let waited = Instant::now();
            while Arc::strong_count(&session) > 1 && waited.elapsed() < timeout {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            match transport::exchange(&http, request, timeout).await {
                Ok(answer) => {
                    tracing::debug!(backend = %backend, status = %answer.status, session = ?id, "upstream session ended")
                }
                Err(e) => {
                    tracing::debug!(backend = %backend, error = %e, "could not end an upstream session")
                }
            }
        });
    }

    /// Continues the upstream session a downstream session record names (created by another node,
    /// or by this node before a restart) unless this node already holds a session for the caller
    /// at `url`: consecutive requests of one 2025 session then reach the same backend session
    /// whichever node serves them, so its subscriptions, log level and GET stream carry over.
    pub(crate) fn adopt(&self, target: &Target<'_>, url: &Url, id: &str, version: &str) {
        let Ok(id) = HeaderValue::from_str(id) else {
            return;
        };
        let session = LegacySession {
            url: url.clone(),
            id: Some(id),
            version: version.to_owned(),
            // Unknown here; `describe` initialises a session of its own when it needs one.
            initialize_result: Bytes::new(),
            clock: telemetry::SessionClock::unknown(),
        };
        if self
            .sessions
            .adopt(&Self::session_key_at(target, url), session)
        {
            tracing::debug!(
                backend = target.name,
                "continuing a recorded upstream session"
            );
        }
    }

    /// Listens to the GET stream of the caller's upstream session with a legacy backend (shared
    /// with every other listener of that session). `None` when the session cannot be had.
    pub(crate) async fn listen(
        &self,
        target: &Target<'_>,
        url: &Url,
    ) -> Option<(
        Arc<get_stream::Hub>,
        tokio::sync::broadcast::Receiver<Bytes>,
        Arc<LegacySession>,
    )> {
        let scope = Self::scope_at(target, url);
        let (key, session) = self.session_in(target, url, &scope).await.ok()?;
        let hub = self.hubs.hub(
            key,
            get_stream::Opening {
                client: self.pools.client(&scope),
                session: Arc::clone(&session),
                downstream: target.downstream.clone(),
                policy: target.config.headers.clone(),
                timeout: Self::timeout(target),
                backend: target.name.to_owned(),
            },
        );
        let receiver = hub.subscribe();
        Some((hub, receiver, session))
    }

    /// The caller's session with a legacy backend in `scope`, initialising it on first use.
    pub(super) async fn session_in(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<(SessionKeyHandle, Arc<LegacySession>), UpstreamError> {
        let key = Self::session_key(target, scope);
        let slot = self.sessions.slot(&key)?;
        let session = match slot
            .get_or_try_init(|| async {
                let session = self.initialize(target, url, scope).await?;
                self.sessions.keep(&key, &session);
                Ok(Arc::new(session))
            })
            .await
        {
            Ok(session) => session,
            Err(e) => {
                self.sessions.forget_failed(&key);
                return Err(e);
            }
        };
        Ok((key, Arc::clone(session)))
    }

    pub(super) async fn initialize(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<LegacySession, UpstreamError> {
        let id = self.next_id();
        let mut params = RawObject::new();
        params.set_str("protocolVersion", LEGACY_PROTOCOL.as_str());
        params.set_raw("capabilities", legacy_capabilities(target.client_caps));
        params.set_borrowed("clientInfo", &self.client_info);
        let out = Outgoing {
            url,
            body: mcp_core::encode_request(&id, "initialize", Some(&params.to_raw())),
            mcp_headers: Vec::new(),
            forward_param_headers: false,
        };
        let request = request::build(out, target.downstream, &target.config.headers);
        let http = self.pools.client(scope);
        let answer = transport::exchange(&http, request, Self::timeout(target)).await?;
        let session_id = answer.headers.get(MCP_SESSION_ID).cloned();
        let mut messages = checked(answer)?;
        let result = loop {
            let message = messages
                .next()
                .await
                .ok_or(UpstreamError::Malformed("no initialize result"))??;
            let Ok(env) = Envelope::parse(&message) else {
                return Err(UpstreamError::Malformed("invalid JSON-RPC message"));
            };
            match env.kind() {
                MessageKind::Response if env.id() == Some(&id) => {
                    break env
                        .result()
                        .map(|r| Bytes::copy_from_slice(r.get().as_bytes()));
                }
                MessageKind::Error if env.id() == Some(&id) => {
                    return Err(UpstreamError::Malformed("backend refused initialize"));
                }
                _ => continue,
            }
        };
        let result = result.ok_or(UpstreamError::Malformed("no initialize result"))?;
        let version = identity::checked_identity(&result, session_id.as_ref())?;
        let mut session = LegacySession {
            url: url.clone(),
            id: session_id,
            version,
            initialize_result: result,
            clock: telemetry::SessionClock::unknown(),
        };
        let initialized = mcp_core::encode_notification("notifications/initialized", None);
        self.post_to_session(target, &session, initialized).await?;
        // Counted from here: a session whose initialisation failed never was one.
        session.clock = telemetry::SessionClock::opened(&session.version);
        Ok(session)
    }
}
