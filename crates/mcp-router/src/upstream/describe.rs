//! What a backend says about itself (`server/discover`, or a 2025 `initialize`), for the
//! gateway's own discover and initialize answers.

#[allow(clippy::wildcard_imports)] // one impl of `Client`, split by concern
use super::*;

impl Client {
    /// What a backend says about itself, for `server/discover` and `initialize`: a modern
    /// backend's `DiscoverResult`, or a legacy backend's `InitializeResult` from the caller's
    /// upstream session. Tries the replicas when the primary fails (describing is read-only), each
    /// behind its breaker.
    pub(crate) async fn describe(&self, target: &Target<'_>) -> Result<Description, UpstreamError> {
        if stdio::label(target.config).is_some() {
            // Callers never see a stdio backend's session: it describes itself like a modern one.
            return Ok(Description {
                era: Era::Modern,
                result: self.stdio.describe(target).await?,
                session: None,
            });
        }
        let mut first_error = None;
        for url in Self::urls(target)? {
            let scope = Self::scope(target, url.as_str());
            let permit = match self.breaker(target, &scope) {
                Some(breaker) => match breaker.try_acquire() {
                    Ok(permit) => Some(permit),
                    Err(open) => {
                        first_error.get_or_insert(UpstreamError::CircuitOpen(open.retry_after()));
                        continue;
                    }
                },
                None => None,
            };
            let outcome = self.describe_at(target, url, &scope).await;
            if let Some(permit) = permit {
                permit.record_elapsed(match &outcome {
                    Ok(_) => Outcome::Success,
                    Err(e) => outcome_of(e),
                });
            }
            match outcome {
                Ok(description) => return Ok(description),
                Err(e) => {
                    self.forget_era(&scope);
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or(UpstreamError::NoUrl))
    }

    pub(super) async fn describe_at(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Description, UpstreamError> {
        if self.speaks_sse(target, scope) {
            return self.describe_sse(target, url, scope).await;
        }
        match self.route(target, url, scope).await? {
            Route::Modern => {
                let call = Call {
                    method: "server/discover",
                    params: RawObject::new(),
                    name: None,
                    progress_token: None,
                    hints: ToolHints::NONE,
                    headers: None,
                };
                let reply = self.send_modern(target, url, &call).await?;
                let result = final_result(reply).await?;
                Ok(Description {
                    era: Era::Modern,
                    result,
                    session: None,
                })
            }
            Route::Legacy { only } => {
                let (key, mut session) = match self.session_in(target, url, scope).await {
                    Ok(session) => session,
                    Err(e) if !only => return Err(e),
                    Err(e) => {
                        self.fall_back_to_sse(target, url, scope, e).await?;
                        return self.describe_sse(target, url, scope).await;
                    }
                };
                if session.initialize_result.is_empty() {
                    // An adopted session: its InitializeResult is not known on this node.
                    self.sessions.forget(&key, &session, false);
                    (_, session) = self.session_in(target, url, scope).await?;
                }
                Ok(Description {
                    era: Era::Legacy,
                    result: session.initialize_result.clone(),
                    session: Some(session),
                })
            }
        }
    }

    /// Callers never see an HTTP+SSE backend's session: it describes itself like a modern one.
    pub(super) async fn describe_sse(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Description, UpstreamError> {
        Ok(Description {
            era: Era::Modern,
            result: self.sse.describe(target, url, scope).await?,
            session: None,
        })
    }
}

/// What [`Upstream::describe`] found.
pub(crate) struct Description {
    /// The backend's era.
    pub(crate) era: Era,
    /// `DiscoverResult` (modern) or `InitializeResult` (legacy), raw JSON.
    pub(crate) result: Bytes,
    /// The caller's upstream session (legacy).
    pub(crate) session: Option<Arc<LegacySession>>,
}
