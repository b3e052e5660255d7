//! One HTTP exchange with a backend: send a JSON-RPC message, read the answer as a stream of
//! JSON-RPC messages whether the backend replied `application/json` or `text/event-stream`.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use mcp_core::media::{MediaKind, media_kind};
use mcp_core::sse::SseDecoder;
use mcp_core::tls::{ClientTls, HttpsConnector, https_connector};

use super::error::{UpstreamError, classify_client_error};

mod destinations;
mod pools;

use destinations::Guarded;
pub(crate) use destinations::is_denied;
pub use destinations::{DEFAULT_DENIED, DestinationError, DestinationPolicy};
pub(crate) use pools::ScopedPools;
pub use pools::set_pool_lane;

/// A pooled HTTP client: one credential scope's (see [`ScopedPools`]), for streamable HTTP, GET
/// streams and HTTP+SSE alike.
pub(crate) use pools::HttpClient;

/// Largest single JSON answer or SSE event read from a backend.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A stream of JSON-RPC message texts from a backend. Dropping it closes the upstream response,
/// which is how a modern backend learns that the call was cancelled.
pub(crate) type MessageStream = Pin<Box<dyn Stream<Item = Result<Bytes, UpstreamError>> + Send>>;

/// What a backend sent back for one POST.
pub(crate) struct Answer {
    /// HTTP status.
    pub(crate) status: StatusCode,
    /// Response headers (for `Mcp-Session-Id`).
    pub(crate) headers: HeaderMap,
    /// The messages: empty for 202.
    pub(crate) messages: MessageStream,
}

/// Builds the connector every scope's pool connects through: https through `mcp-core`'s
/// connector (rustls, aws-lc-rs) with the platform roots and the operator's TLS override
/// (private CAs, client certificate), plain http where a backend URL says so, TCP_NODELAY, every
/// connection checked against `destinations`.
pub(crate) fn build_connector(
    connect_timeout: Duration,
    destinations: DestinationPolicy,
    tls: &ClientTls,
) -> HttpsConnector<Guarded> {
    let config = tls.client_config().unwrap_or_else(|e| {
        // Fail closed: https backends are refused rather than reached with weaker settings.
        tracing::warn!(error = %e, "backend TLS settings unusable: https backends will fail");
        ClientTls::untrusting_config().unwrap_or_else(|_| {
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        })
    });
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    https_connector(config, Guarded::new(http, destinations))
}

/// POSTs `request` and turns the answer into messages. `timeout` bounds the wait for the response
/// head and, on a stream, each gap between events.
pub(crate) async fn exchange(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    timeout: Duration,
) -> Result<Answer, UpstreamError> {
    exchange_with(client, request, timeout, Some(timeout)).await
}

/// Like [`exchange`], with a separate bound on the gap between stream events (`None`: a
/// long-lived stream that may idle, such as a session's GET stream).
pub(crate) async fn exchange_with(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    timeout: Duration,
    event_gap: Option<Duration>,
) -> Result<Answer, UpstreamError> {
    let response = tokio::time::timeout(timeout, client.request(request))
        .await
        .map_err(|_| UpstreamError::Timeout(timeout))?
        .map_err(|e| {
            tracing::debug!(error = %e, "upstream request failed");
            classify_client_error(&e)
        })?;
    let (parts, body) = response.into_parts();
    let messages = match media_kind(&parts.headers) {
        _ if parts.status == StatusCode::ACCEPTED => empty(),
        MediaKind::EventStream => sse_messages(body, event_gap),
        MediaKind::Json | MediaKind::Other => json_message(body, timeout),
    };
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        messages,
    })
}

fn empty() -> MessageStream {
    Box::pin(futures_util::stream::empty())
}

fn json_message(body: Incoming, timeout: Duration) -> MessageStream {
    Box::pin(futures_util::stream::once(async move {
        let collected =
            tokio::time::timeout(timeout, Limited::new(body, MAX_MESSAGE_BYTES).collect())
                .await
                .map_err(|_| UpstreamError::Timeout(timeout))?
                .map_err(|_| UpstreamError::Disconnected)?;
        Ok(collected.to_bytes())
    }))
}

struct SseState {
    body: Incoming,
    decoder: SseDecoder,
    event_gap: Option<Duration>,
    done: bool,
}

fn sse_messages(body: Incoming, event_gap: Option<Duration>) -> MessageStream {
    let state = SseState {
        body,
        decoder: SseDecoder::with_max_event_size(MAX_MESSAGE_BYTES),
        event_gap,
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        loop {
            match st.decoder.next_event() {
                Ok(Some(event)) if event.data.trim().is_empty() => continue,
                Ok(Some(event)) => return Some((Ok(Bytes::from(event.data)), st)),
                Ok(None) => {}
                Err(_) => {
                    st.done = true;
                    return Some((Err(UpstreamError::Malformed("invalid SSE stream")), st));
                }
            }
            let frame = match st.event_gap {
                Some(gap) => tokio::time::timeout(gap, st.body.frame())
                    .await
                    .map_err(|_| gap),
                None => Ok(st.body.frame().await),
            };
            match frame {
                Err(gap) => {
                    st.done = true;
                    return Some((Err(UpstreamError::Timeout(gap)), st));
                }
                Ok(None) => return None,
                Ok(Some(Err(_))) => {
                    st.done = true;
                    return Some((Err(UpstreamError::Disconnected), st));
                }
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data()
                        && st.decoder.push(&data).is_err()
                    {
                        st.done = true;
                        return Some((Err(UpstreamError::Malformed("SSE event too large")), st));
                    }
                }
            }
        }
    }))
}
