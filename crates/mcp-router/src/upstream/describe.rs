//! What a backend says about itself (`server/discover`, or a 2025 `initialize`), for the
//! gateway's own discover and initialize answers.

// The parent's items, glob-imported: one impl of `Client`, split by concern.
use super::*;

impl Upstream {
    /// What a backend says about itself, for `server/discover` and `initialize`: a modern
    /// backend's `DiscoverResult`, or a legacy backend's `InitializeResult` from the caller's
    /// upstream session. Sent through the backend's stack like any call: its replicas are tried
    /// when the primary fails (describing is read-only), each behind its breaker, within its
    /// timeout, and through the integrator's layer.
    pub(crate) async fn describe(&self, target: &Target<'_>) -> Result<Description, UpstreamError> {
        let stack = self.stack(target)?;
        let request = UpstreamRequest::describe(target, Arc::clone(&stack.config));
        let mut service = stack.service.clone();
        std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
        let mut reply = service.call(request).await?;
        // The breaker judges the exchange at the end of the answer (`AtEnd`): here, once the
        // result is read.
        let permit = reply.permit.take();
        let session = reply.session.take();
        let result = final_result(reply).await;
        if let Some(permit) = permit {
            permit.record_elapsed(match &result {
                Ok(_) => Outcome::Success,
                Err(e) => outcome_of(e),
            });
        }
        Ok(Description {
            era: if session.is_some() {
                Era::Legacy
            } else {
                Era::Modern
            },
            result: result?,
            session,
        })
    }
}

impl Client {
    /// What the backend at one address says about itself (`address`: a URL and its scope;
    /// `None`: the stdio process), as a reply carrying that one result; a failure forgets the
    /// scope's era.
    pub(super) async fn describe_one(
        &self,
        target: &Target<'_>,
        address: Option<(&Url, &CredentialScope, &HttpClient)>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let described = match address {
            None => self.stdio.describe(target).await.map(|result| Description {
                era: Era::Modern,
                result,
                session: None,
            }),
            Some((url, scope, http)) => {
                let described = self.describe_at(target, url, scope, http).await;
                if described.is_err() {
                    self.forget_era(scope);
                }
                described
            }
        }?;
        Ok(described.into_reply(self.next_id()))
    }

    pub(super) async fn describe_at(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
        http: &HttpClient,
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
                let reply = self.send_modern(target, url, http, &call).await?;
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

/// What [`Upstream::describe`] found. A stdio or HTTP+SSE backend describes itself like a modern
/// one: callers never see its session.
pub(crate) struct Description {
    /// The backend's era.
    pub(crate) era: Era,
    /// `DiscoverResult` (modern) or `InitializeResult` (legacy), raw JSON.
    pub(crate) result: Bytes,
    /// The caller's upstream session (legacy).
    pub(crate) session: Option<Arc<LegacySession>>,
}

impl Description {
    /// The description as a stack's reply: one response message with `id` whose result it is,
    /// and the caller's upstream session (a 2025 backend's).
    fn into_reply(self, id: RequestId) -> UpstreamReply {
        let mut message = format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, id.to_json());
        message.push_str(&String::from_utf8_lossy(&self.result));
        message.push('}');
        let messages: MessageStream = Box::pin(futures_util::stream::once(async move {
            Ok(Bytes::from(message))
        }));
        UpstreamReply {
            id,
            messages,
            session: self.session,
            link: None,
            permit: None,
        }
    }
}
