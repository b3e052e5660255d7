//! One exchange with one URL in its era: a 2026-07-28 request with the standard headers and
//! synthesised `_meta`, or a request inside the caller's 2025 session (re-initialised once when
//! the backend forgot it), and messages posted into a 2025 session.

// The parent's items, glob-imported: one impl of `Client`, split by concern.
use super::*;

impl Client {
    /// One URL in its era. For a legacy backend whose session expired (404), the session is
    /// re-initialised once and the call retried: the backend never executed it.
    pub(super) async fn send_at(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
        http: &HttpClient,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        if self.speaks_sse(target, scope) {
            return self.sse.send(target, url, scope, call).await;
        }
        let result = match self.route(target, url, scope).await {
            Err(e) => Err(e),
            Ok(Route::Modern) => self.send_modern(target, url, http, call).await,
            Ok(Route::Legacy { only }) => {
                match self.send_legacy(target, url, scope, http, call).await {
                    Err(UpstreamError::SessionExpired) => {
                        self.send_legacy(target, url, scope, http, call).await
                    }
                    Err(e) if only => match self.fall_back_to_sse(target, url, scope, e).await {
                        Ok(()) => self.sse.send(target, url, scope, call).await,
                        Err(e) => Err(e),
                    },
                    other => other,
                }
            }
        };
        if let Err(e) = &result
            && !matches!(
                e,
                UpstreamError::SessionExpired | UpstreamError::TooManySessions
            )
        {
            self.forget_era(scope);
        }
        result
    }

    pub(super) async fn send_modern(
        &self,
        target: &Target<'_>,
        url: &Url,
        http: &HttpClient,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let id = self.next_id();
        let mut params = call.params.clone();
        params.set_raw(
            "_meta",
            meta::modern(
                target.meta,
                target.client_caps,
                &self.client_info,
                call.progress_token,
            ),
        );
        let out = Outgoing {
            url,
            body: mcp_core::encode_request_object(&id, call.method, &params),
            mcp_headers: modern_headers(call.method, call.name),
            forward_param_headers: call.method == "tools/call",
        };
        let mut request = request::build(out, target.downstream, &target.config.headers);
        request::add_headers(&mut request, call.headers);
        telemetry::annotate_current(|| {
            KeyValue::new("mcp.protocol.version", ProtocolVersion::LATEST.as_str())
        });
        // A subscription stream may idle for as long as nothing changes.
        let timeout = Self::timeout(target);
        let gap = (call.method != "subscriptions/listen").then_some(timeout);
        let answer = transport::exchange_with(http, request, timeout, gap).await?;
        Ok(UpstreamReply {
            id,
            messages: checked(answer)?,
            session: None,
            link: None,
            permit: None,
        })
    }

    pub(super) async fn send_legacy(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
        http: &HttpClient,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let (key, session) = self.session_in(target, url, scope).await?;
        let id = self.next_id();
        let mut params = call.params.clone();
        if let Some(meta) = meta::legacy(target.meta, call.progress_token) {
            params.set_raw("_meta", meta);
        }
        let out = Outgoing {
            url,
            body: mcp_core::encode_request_object(&id, call.method, &params),
            mcp_headers: legacy_headers(&session),
            forward_param_headers: false,
        };
        let mut request = request::build(out, target.downstream, &target.config.headers);
        request::add_headers(&mut request, call.headers);
        telemetry::annotate_current(|| {
            KeyValue::new("mcp.protocol.version", session.version.clone())
        });
        let answer = transport::exchange(http, request, Self::timeout(target)).await?;
        if answer.status == StatusCode::NOT_FOUND && session.id.is_some() {
            self.sessions.forget(&key, &session, true);
            return Err(UpstreamError::SessionExpired);
        }
        Ok(UpstreamReply {
            id,
            messages: checked(answer)?,
            session: Some(session),
            link: None,
            permit: None,
        })
    }

    /// Posts a JSON-RPC response or notification into a legacy session (e.g. the answer to a
    /// server-to-client request).
    pub(crate) async fn post_to_session(
        &self,
        target: &Target<'_>,
        session: &LegacySession,
        message: Vec<u8>,
    ) -> Result<(), UpstreamError> {
        let http = self.pools.client(&Self::scope_at(target, &session.url));
        let to = SessionPost {
            http: &http,
            session,
            downstream: target.downstream,
            policy: &target.config.headers,
            timeout: Self::timeout(target),
        };
        to.post(message).await
    }
}

/// Turns an answer into its messages, mapping HTTP errors: a JSON-RPC error body is a message
/// (the backend's own error is relayed), anything else is an [`UpstreamError::Status`].
pub(super) fn checked(answer: Answer) -> Result<MessageStream, UpstreamError> {
    if answer.status.is_success() {
        return Ok(answer.messages);
    }
    if answer.status.is_server_error() {
        return Err(UpstreamError::Status(answer.status.as_u16()));
    }
    let status = answer.status.as_u16();
    // 4xx: relay a JSON-RPC error body when there is one.
    Ok(Box::pin(answer.messages.map(move |m| match m {
        Ok(bytes) if Envelope::parse(&bytes).is_ok_and(|e| e.kind() == MessageKind::Error) => {
            Ok(bytes)
        }
        _ => Err(UpstreamError::Status(status)),
    })))
}

pub(super) fn modern_headers(method: &str, name: Option<&str>) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = vec![
        (
            MCP_PROTOCOL_VERSION,
            HeaderValue::from_static(ProtocolVersion::LATEST.as_str()),
        ),
        (MCP_METHOD, encode_header_value(method)),
    ];
    if let Some(name) = name {
        headers.push((MCP_NAME, encode_header_value(name)));
    }
    headers
}

pub(crate) fn legacy_headers(session: &LegacySession) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = Vec::new();
    if let Some(id) = &session.id {
        headers.push((MCP_SESSION_ID, id.clone()));
    }
    // The header exists since 2025-06-18; older sessions go without it.
    if session.version.as_str() >= "2025-06-18"
        && let Ok(v) = HeaderValue::from_str(&session.version)
    {
        headers.push((MCP_PROTOCOL_VERSION, v));
    }
    headers
}

/// Where a JSON-RPC message for a legacy upstream session goes, and as whom: the caller's
/// pool, the session, the caller's headers under the backend's header policy.
pub(super) struct SessionPost<'a> {
    pub(super) http: &'a HttpClient,
    pub(super) session: &'a LegacySession,
    pub(super) downstream: &'a HeaderMap,
    pub(super) policy: &'a mcp_config_store::HeaderPolicy,
    pub(super) timeout: Duration,
}

impl SessionPost<'_> {
    /// POSTs `message` into the session (a response, or a notification).
    pub(super) async fn post(&self, message: Vec<u8>) -> Result<(), UpstreamError> {
        let out = Outgoing {
            url: &self.session.url,
            body: message,
            mcp_headers: legacy_headers(self.session),
            forward_param_headers: false,
        };
        let request = request::build(out, self.downstream, self.policy);
        let answer = transport::exchange(self.http, request, self.timeout).await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(UpstreamError::Status(answer.status.as_u16()))
        }
    }
}

/// Client capabilities in the legacy shape: the same object without the modern `extensions`.
pub(super) fn legacy_capabilities(caps: &RawValue) -> Box<RawValue> {
    match RawObject::from_raw(caps) {
        Ok(mut obj) => {
            obj.remove("extensions");
            obj.to_raw()
        }
        Err(_) => empty_object(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn legacy_capabilities_drop_extensions() {
        let caps = RawValue::from_string(
            r#"{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#.into(),
        )
        .expect("raw");
        assert_eq!(legacy_capabilities(&caps).get(), r#"{"sampling":{}}"#);
    }
}
