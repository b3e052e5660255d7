//! HTTP+SSE backends: the deprecated 2024-11-05 transport, spoken towards backends that offer
//! nothing newer.
//!
//! - **Wire**: the gateway GETs the backend URL and keeps the event stream open. Its first event
//!   must be `endpoint`, whose data is the URI to POST messages to; every server message
//!   (responses, notifications, server requests) then arrives on the stream as `event: message`.
//!   Each outgoing message is one POST through the shared HTTP client with the backend's header
//!   policy (a call's POST carries that caller's forwarded headers and plugin headers); a POST
//!   that fails or is answered non-2xx fails its call. POSTs of one connection go out one after
//!   the other, so the server sees `notifications/initialized` before the calls that follow it.
//! - **Same origin only**: the `endpoint` URI is resolved against the backend URL and refused
//!   unless it has the same scheme, host and port — a backend must not make the gateway POST
//!   (with the caller's forwarded headers) anywhere else.
//! - **Multiplexing**: a connection carries a [`Link`] (ids `g<n>`, progress routed to its caller,
//!   server requests and log messages to the only call in flight (a connection is one principal's)
//!   or declined, `notifications/cancelled` for callers that go away). Handshake:
//!   `initialize` (the latest legacy version; the server's answer is accepted) +
//!   `notifications/initialized`; callers never see the upstream session (the backend describes
//!   itself like a stdio one).
//! - **Connections**: one per backend name and credential scope (URL, effective credentials,
//!   principal: [`CredentialScope`](super::CredentialScope)), opened by that principal's first call (the GET carries that caller's forwarded headers), ended after the
//!   backend's `idle_timeout_s` without calls (default 300 s; a running call keeps it). At most
//!   [`MAX_CONNECTIONS`] at once per router, [`MAX_CONNECTIONS_PER_PRINCIPAL`] of them one
//!   principal's; beyond that a call fails at once ("too many backend connections").
//! - **Failures**: the stream ending or breaking kills the link: calls in flight fail with
//!   `backend connection lost`, and the next call reconnects after a backoff (100 ms doubling to
//!   5 s; until then calls fail at once with `backend unreachable`). The URL's circuit breaker
//!   sees every failure.
//! - **Selection** (in [`Upstream`](super::Upstream)): `transport = "sse"` uses this directly; with
//!   the default transport, a legacy `initialize` POST answered 400, 404 or 405 makes the gateway
//!   try the GET, and an `endpoint` event marks the URL as SSE until the era is probed again.

use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use mcp_core::Budget;
use mcp_core::sse::{SseDecoder, SseEvent};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use url::Url;

use super::link::{Carrier, Link, LinkBuffers, LinkKey, Outbound, Pool};
use super::request::{self, Outgoing};
use super::transport::{HttpClient, MAX_MESSAGE_BYTES, ScopedPools};
use super::{Call, CredentialScope, LinkEvents, Target, UpstreamError, UpstreamReply};
use crate::upstream::error::classify_client_error;

/// Most SSE connections open at once (each holds a GET stream and a backend session).
pub(crate) const MAX_CONNECTIONS: usize = 1024;
/// Most SSE connections one principal holds, so one tenant cannot take all of them.
pub(crate) const MAX_CONNECTIONS_PER_PRINCIPAL: usize = 32;
/// Idle lifetime of a connection without `idle_timeout_s`.
const DEFAULT_IDLE: Duration = Duration::from_secs(300);
/// Largest body read from the answer to a POST (it carries nothing the gateway needs).
const MAX_POST_ANSWER: usize = 64 * 1024;

/// Which connection serves a call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ConnectionKey {
    backend: String,
    /// The GET carries the scope's credentials, so two callers (or two virtual hosts naming the
    /// same backend with different credentials) never share a stream.
    scope: CredentialScope,
}

impl LinkKey for ConnectionKey {
    fn reapable(&self) -> bool {
        true
    }

    fn principal(&self) -> Option<&mcp_core::Principal> {
        Some(&self.scope.principal)
    }
}

/// The SSE connections of one router.
pub(crate) struct SsePool {
    pool: Pool<ConnectionKey, Connection>,
    /// The keep-alive pools: a connection's GET stream and POSTs go through its scope's.
    pools: Arc<ScopedPools>,
    client_info: Box<RawValue>,
    /// What the connections' calls hold for their clients is drawn from here.
    buffers: LinkBuffers,
}

impl SsePool {
    /// The budget of each principal's connections, for metrics.
    pub(crate) fn budget(&self) -> Option<&Budget> {
        Some(self.pool.budget())
    }

    pub(crate) fn new(
        pools: Arc<ScopedPools>,
        client_info: Box<RawValue>,
        buffers: LinkBuffers,
    ) -> Self {
        Self {
            pool: Pool::new(
                "sse_links",
                MAX_CONNECTIONS,
                MAX_CONNECTIONS_PER_PRINCIPAL,
                UpstreamError::Connect,
                UpstreamError::TooManyConnections,
            ),
            pools,
            client_info,
            buffers,
        }
    }

    /// Sends `call` over the caller's connection to `url`, opening it when needed.
    pub(crate) async fn send(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
        call: &Call<'_>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let connection = self.connection(target, url, scope).await?;
        let mut post = post_request(&connection.endpoint, target);
        request::add_headers(&mut post, call.headers);
        let (parts, _) = post.into_parts();
        connection
            .link
            .send(target, call, &self.client_info, Some(parts.headers))
    }

    /// The backend's `InitializeResult`.
    pub(crate) async fn describe(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Bytes, UpstreamError> {
        Ok(self
            .connection(target, url, scope)
            .await?
            .link
            .description())
    }

    /// The connection's notifications of no call (see [`Link::events`]) and its era.
    pub(crate) async fn listen(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<LinkEvents, UpstreamError> {
        let connection = self.connection(target, url, scope).await?;
        Ok(LinkEvents {
            era: connection.link.era(),
            shared: false,
            events: connection.link.events(),
        })
    }

    /// Opens (or reuses) the caller's connection to `url`: `Ok` when the backend speaks SSE.
    pub(crate) async fn connect(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<(), UpstreamError> {
        self.connection(target, url, scope).await.map(drop)
    }

    async fn connection(
        &self,
        target: &Target<'_>,
        url: &Url,
        scope: &CredentialScope,
    ) -> Result<Arc<Connection>, UpstreamError> {
        let key = ConnectionKey {
            backend: target.name.to_owned(),
            scope: scope.clone(),
        };
        self.pool
            .get(&key, || {
                Connection::open(
                    self.pools.client(scope),
                    target,
                    url,
                    &self.client_info,
                    self.buffers.clone(),
                )
            })
            .await
    }
}

/// One open GET stream and the link it carries.
struct Connection {
    link: Arc<Link>,
    /// Where messages are POSTed (same origin as the backend URL).
    endpoint: Url,
    /// Reads the GET stream; aborting it closes the stream (the backend ends the session).
    reader: tokio::task::AbortHandle,
}

impl Carrier for Connection {
    fn link(&self) -> &Link {
        &self.link
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    async fn open(
        http: HttpClient,
        target: &Target<'_>,
        url: &Url,
        client_info: &RawValue,
        buffers: LinkBuffers,
    ) -> Result<Arc<Self>, UpstreamError> {
        let timeout = Duration::from_millis(target.config.timeout_ms.max(1));
        let mut events = Events::open(&http, target, url, timeout).await?;
        let endpoint = match tokio::time::timeout(timeout, events.next()).await {
            Err(_) => return Err(UpstreamError::Timeout(timeout)),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(None)) => return Err(UpstreamError::Malformed("SSE stream ended at once")),
            Ok(Ok(Some(first))) if first.event.as_deref() == Some("endpoint") => {
                resolve_endpoint(url, &first.data).inspect_err(|e| {
                    tracing::warn!(backend = target.name, %url, endpoint = %first.data, error = %e, "refusing an SSE endpoint");
                })?
            }
            Ok(Ok(Some(_))) => {
                return Err(UpstreamError::Malformed(
                    "SSE stream did not start with an endpoint event",
                ));
            }
        };
        let idle = target
            .config
            .idle_timeout_s
            .map_or(DEFAULT_IDLE, Duration::from_secs);
        // One credential scope (so one principal) per connection.
        let (link, outbound) = Link::new(target.name, idle, true, buffers);
        let poster = Poster {
            http,
            uri: endpoint_uri(&endpoint)?,
            headers: post_request(&endpoint, target).into_parts().0.headers,
            timeout,
            link: Arc::downgrade(&link),
        };
        tokio::spawn(poster.run(outbound));
        let reader = tokio::spawn(read_events(Arc::downgrade(&link), events)).abort_handle();
        // Built before the handshake so that a failed one closes the stream (on drop).
        let connection = Arc::new(Self {
            link,
            endpoint,
            reader,
        });
        connection
            .link
            .handshake(target, client_info, false)
            .await?;
        tracing::info!(
            backend = target.name,
            "connected to an HTTP+SSE (2024-11-05) backend"
        );
        Ok(connection)
    }
}

/// The `endpoint` event's URI resolved against the backend URL; refused unless it is on the
/// backend's origin (scheme, host, port).
fn resolve_endpoint(base: &Url, data: &str) -> Result<Url, UpstreamError> {
    let endpoint = base
        .join(data.trim())
        .map_err(|_| UpstreamError::Malformed("invalid SSE endpoint"))?;
    if endpoint.origin() != base.origin() {
        return Err(UpstreamError::Malformed("SSE endpoint on another origin"));
    }
    Ok(endpoint)
}

fn endpoint_uri(endpoint: &Url) -> Result<http::Uri, UpstreamError> {
    endpoint
        .as_str()
        .parse()
        .map_err(|_| UpstreamError::Malformed("invalid SSE endpoint"))
}

/// A POST to `endpoint` with the caller's header policy applied (no body yet).
fn post_request(endpoint: &Url, target: &Target<'_>) -> Request<Full<Bytes>> {
    let out = Outgoing {
        url: endpoint,
        body: Vec::new(),
        mcp_headers: Vec::new(),
        forward_param_headers: false,
    };
    request::build(out, target.downstream, &target.config.headers)
}

/// Sends a connection's messages, one POST each, in order.
struct Poster {
    http: HttpClient,
    uri: http::Uri,
    /// Headers of messages without their own (handshake, cancellations, declined requests).
    headers: HeaderMap,
    timeout: Duration,
    link: Weak<Link>,
}

impl Poster {
    async fn run(self, mut outbound: mpsc::Receiver<Outbound>) {
        while let Some(message) = outbound.recv().await {
            let Err(e) = self.post(message.body, message.headers).await else {
                continue;
            };
            let link = self.link.upgrade();
            tracing::debug!(backend = link.as_ref().map_or("", |l| l.backend()), error = %e, "an SSE backend refused a message");
            if let (Some(link), Some(call)) = (link, message.call) {
                link.fail(&call, e);
            }
        }
    }

    async fn post(&self, body: Vec<u8>, headers: Option<HeaderMap>) -> Result<(), UpstreamError> {
        let mut request = Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = headers.unwrap_or_else(|| self.headers.clone());
        let response = tokio::time::timeout(self.timeout, self.http.request(request))
            .await
            .map_err(|_| UpstreamError::Timeout(self.timeout))?
            .map_err(|e| classify_client_error(&e))?;
        let status = response.status();
        // Read the (small) answer so the pooled connection can be reused.
        let drain = Limited::new(response.into_body(), MAX_POST_ANSWER).collect();
        let _ = tokio::time::timeout(self.timeout, drain).await;
        if status.is_success() {
            Ok(())
        } else {
            Err(UpstreamError::Status(status.as_u16()))
        }
    }
}

/// The events of a GET stream.
struct Events {
    body: Incoming,
    decoder: SseDecoder,
}

impl Events {
    /// GETs `url` with the caller's header policy; the answer must be a 2xx event stream.
    async fn open(
        http: &HttpClient,
        target: &Target<'_>,
        url: &Url,
        timeout: Duration,
    ) -> Result<Self, UpstreamError> {
        let mut request = post_request(url, target);
        *request.method_mut() = http::Method::GET;
        request.headers_mut().remove(header::CONTENT_TYPE);
        request.headers_mut().insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let response = tokio::time::timeout(timeout, http.request(request))
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))?
            .map_err(|e| classify_client_error(&e))?;
        if !response.status().is_success() {
            return Err(UpstreamError::Status(response.status().as_u16()));
        }
        let event_stream = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| mcp_core::media::is_media_type(v, "text/event-stream"));
        if !event_stream {
            return Err(UpstreamError::Malformed("not an SSE stream"));
        }
        Ok(Self {
            body: response.into_body(),
            decoder: SseDecoder::with_max_event_size(MAX_MESSAGE_BYTES),
        })
    }

    /// The next event; `None` when the stream ended.
    async fn next(&mut self) -> Result<Option<SseEvent>, UpstreamError> {
        loop {
            match self.decoder.next_event() {
                Ok(Some(event)) => return Ok(Some(event)),
                Ok(None) => {}
                Err(_) => return Err(UpstreamError::Malformed("invalid SSE stream")),
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(_)) => return Err(UpstreamError::Disconnected),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.decoder
                            .push(&data)
                            .map_err(|_| UpstreamError::Malformed("SSE event too large"))?;
                    }
                }
            }
        }
    }
}

/// Hands the stream's `message` events to the link; the stream ending kills the link.
async fn read_events(link: Weak<Link>, mut events: Events) {
    loop {
        let event = events.next().await;
        let Some(link) = link.upgrade() else {
            return;
        };
        match event {
            Ok(Some(event)) if matches!(event.event.as_deref(), None | Some("message")) => {
                link.dispatch(event.data.as_bytes());
            }
            Ok(Some(event)) => {
                tracing::debug!(
                    backend = link.backend(),
                    event = event.event.as_deref().unwrap_or(""),
                    "ignoring an SSE event"
                );
            }
            Ok(None) => {
                tracing::info!(backend = link.backend(), "SSE backend stream ended");
                link.died();
                return;
            }
            Err(e) => {
                tracing::info!(backend = link.backend(), error = %e, "SSE backend stream failed");
                link.died();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("http://127.0.0.1:8000/sse").expect("url")
    }

    #[test]
    fn relative_endpoints_resolve_against_the_backend_url() {
        let endpoint =
            resolve_endpoint(&base(), "/messages/?session_id=abc\n").expect("same origin");
        assert_eq!(
            endpoint.as_str(),
            "http://127.0.0.1:8000/messages/?session_id=abc"
        );
        let sibling = resolve_endpoint(&base(), "messages?s=1").expect("same origin");
        assert_eq!(sibling.as_str(), "http://127.0.0.1:8000/messages?s=1");
        let absolute =
            resolve_endpoint(&base(), "http://127.0.0.1:8000/m?s=2").expect("same origin");
        assert_eq!(absolute.as_str(), "http://127.0.0.1:8000/m?s=2");
        let default_port = Url::parse("https://mcp.example/sse").expect("url");
        assert!(resolve_endpoint(&default_port, "https://mcp.example:443/m").is_ok());
    }

    #[test]
    fn endpoints_on_another_origin_are_refused() {
        let refused = Err(UpstreamError::Malformed("SSE endpoint on another origin"));
        for endpoint in [
            "http://evil.example/messages/",
            "//evil.example/messages/",
            "http://127.0.0.1:8001/messages/",
            "https://127.0.0.1:8000/messages/",
            "http://localhost:8000/messages/",
            "file:///etc/passwd",
            "data:text/plain,x",
        ] {
            assert_eq!(resolve_endpoint(&base(), endpoint), refused, "{endpoint}");
        }
    }
}
