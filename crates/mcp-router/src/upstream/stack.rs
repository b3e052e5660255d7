//! Backend stacks: every call to a backend goes through a `tower::Service<UpstreamRequest>` built
//! with `ServiceBuilder` from the published layers (book: docs/src/architecture.md):
//!
//! ```text
//! [integrator's layer] -> mcp_fallback::FallbackLayer (alternates = the replicas, MCP replay rule)
//!   -> mcp_breaker::BreakerLayer (outcome at the end of the answer: AtEnd) -> timeout
//!   -> the transport client (HTTP in the backend's era, HTTP+SSE, stdio)
//! ```
//!
//! Each replica is an alternate with its own breaker, timeout and transport. One stack is kept
//! per credential scope of the backend's primary address and breaker settings (the breaker key):
//! a tenant's stack, its breakers and the integrator layer's state (a concurrency limit, say) are
//! never another scope's.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::BoxFuture;
use mcp_breaker::{AtEnd, BreakerError, BreakerLayer, CircuitBreaker, Classify, Outcome};
use mcp_config_store::BackendConfig;
use mcp_fallback::{FallbackLayer, McpReplay};
use opentelemetry::KeyValue;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Layer, Service, ServiceBuilder};
use url::Url;

use super::{
    Client, CredentialScope, HttpClient, Target, UpstreamError, UpstreamReply, UpstreamRequest,
    outcome_of,
};
use crate::telemetry;

/// One backend's stack as the router calls it (and as an integrator's layer wraps it).
pub type BackendService = BoxCloneSyncService<UpstreamRequest, UpstreamReply, UpstreamError>;

/// An integrator's layer applied to every backend stack (see
/// [`McpRouterBuilder::backend_layer`](crate::McpRouterBuilder::backend_layer)), boxed so the
/// router's type does not name it.
#[derive(Clone)]
pub(crate) struct BackendLayer(Arc<dyn Fn(BackendService) -> BackendService + Send + Sync>);

impl BackendLayer {
    pub(crate) fn new<L>(layer: L) -> Self
    where
        L: Layer<BackendService> + Send + Sync + 'static,
        L::Service: Service<UpstreamRequest, Response = UpstreamReply, Error = UpstreamError>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as Service<UpstreamRequest>>::Future: Send + 'static,
    {
        Self(Arc::new(move |inner| {
            BoxCloneSyncService::new(layer.layer(inner))
        }))
    }

    /// `outer` around this layer: the later an integrator adds a layer, the further out it sits.
    pub(crate) fn then(self, outer: Self) -> Self {
        Self(Arc::new(move |inner| (outer.0)((self.0)(inner))))
    }

    fn apply(&self, inner: BackendService) -> BackendService {
        (self.0)(inner)
    }
}

/// A cached backend stack and the config it serves.
pub(crate) struct BackendStack {
    /// The backend's config when the stack was built: a call with another config (the user
    /// changed it) gets a new stack.
    pub(crate) config: Arc<BackendConfig>,
    pub(crate) service: BackendService,
}

impl Client {
    /// Builds the stack of `target`'s backend in the caller's scope: the primary address and its
    /// replicas, each behind its breaker (`None` for an address without one) and the backend's
    /// timeout.
    pub(crate) fn build_stack(
        self: &Arc<Self>,
        target: &Target<'_>,
        layer: Option<&BackendLayer>,
    ) -> Result<BackendStack, UpstreamError> {
        let timeout = Self::timeout(target);
        let primary = match super::stdio::label(target.config) {
            Some(label) => {
                let scope = Self::scope(target, &format!("stdio:{label}"));
                self.guarded(None, self.breaker(target, &scope), timeout)
            }
            None => {
                let url = Self::url(target)?;
                let scope = target.primary_scope().clone();
                let breaker = self.breaker(target, &scope);
                self.guarded(Some((url, scope)), breaker, timeout)
            }
        };
        let replicas: Vec<BackendService> = if super::stdio::label(target.config).is_some() {
            Vec::new()
        } else {
            target
                .config
                .replicas
                .iter()
                .map(|url| {
                    let scope = Self::scope(target, url.as_str());
                    let breaker = self.breaker(target, &scope);
                    self.guarded(Some((url, scope)), breaker, timeout)
                })
                .collect()
        };
        // Each replica may take as long as one call does, and one more for good measure: the
        // replicas' own timeouts end them first.
        let attempts = u32::try_from(replicas.len() + 1).unwrap_or(u32::MAX);
        let fallback_timeout = timeout.saturating_mul(attempts);
        let stack = ServiceBuilder::new()
            .map_response(mcp_fallback::Served::into_inner)
            .layer(
                FallbackLayer::new(replicas)
                    .replay(McpReplay)
                    .timeout(fallback_timeout),
            )
            .service(primary);
        let service = BoxCloneSyncService::new(stack);
        Ok(BackendStack {
            config: Arc::new(target.config.clone()),
            service: match layer {
                Some(layer) => layer.apply(service),
                None => service,
            },
        })
    }

    /// One address (a URL and its scope, or the stdio process when `None`) behind its breaker
    /// and timeout.
    fn guarded(
        self: &Arc<Self>,
        address: Option<(&Url, CredentialScope)>,
        breaker: Option<CircuitBreaker>,
        timeout: Duration,
    ) -> BackendService {
        let transport = TransportClient {
            client: Arc::clone(self),
            address: address.map(|(url, scope)| {
                let http = self.pools.client(&scope);
                Arc::new((url.clone(), scope, http))
            }),
        };
        let timed = ServiceBuilder::new()
            .map_err(move |e: BoxError| match e.downcast::<UpstreamError>() {
                Ok(e) => *e,
                // The only other error here is the timeout's.
                Err(_) => UpstreamError::Timeout(timeout),
            })
            .timeout(timeout)
            .service(transport);
        match breaker {
            Some(breaker) => BoxCloneSyncService::new(
                ServiceBuilder::new()
                    .map_err(|e: BreakerError<UpstreamError>| match e {
                        BreakerError::Open { retry_after } => {
                            telemetry::annotate_current(|| {
                                KeyValue::new(telemetry::ATTR_BREAKER_STATE, "open")
                            });
                            UpstreamError::CircuitOpen(retry_after)
                        }
                        BreakerError::Inner(e) => e,
                    })
                    .layer(BreakerLayer::new(breaker).classifier(AtEnd(UpstreamOutcome)))
                    .service(timed),
            ),
            None => BoxCloneSyncService::new(timed),
        }
    }
}

/// How an exchange counts for its breaker when its head is known: an error by [`outcome_of`];
/// an answer is judged at its end by the reply itself (the permit rides along, see
/// [`AtEnd`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UpstreamOutcome;

impl Classify<UpstreamReply, UpstreamError> for UpstreamOutcome {
    fn classify(&self, result: &Result<UpstreamReply, UpstreamError>, _: Duration) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(e) => outcome_of(e),
        }
    }
}

/// The transport client of one backend address: streamable HTTP in the backend's era (with
/// legacy sessions and the HTTP+SSE fallback rule), a configured HTTP+SSE backend, or the stdio
/// process (`address` is `None`).
///
/// The address's credential scope is computed once, when the stack is built: a stack serves
/// exactly one scope of its primary address (its table key holds that scope's digest, which
/// covers the principal and every credential part), so every request it sees has the same
/// scope at each of its addresses, and no call digests it again. So is the scope's keep-alive
/// pool, which the stack holds: no call looks it up.
#[derive(Clone)]
struct TransportClient {
    client: Arc<Client>,
    address: Option<Arc<(Url, CredentialScope, HttpClient)>>,
}

impl Service<UpstreamRequest> for TransportClient {
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = BoxFuture<'static, Result<UpstreamReply, UpstreamError>>;

    #[inline]
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Connections, sessions and processes are pooled per call, below the stack.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: UpstreamRequest) -> Self::Future {
        let client = Arc::clone(&self.client);
        let address = self.address.clone();
        Box::pin(async move {
            let target = req.target();
            let address = address
                .as_deref()
                .map(|(url, scope, http)| (url, scope, http));
            if req.is_describe() {
                return client.describe_one(&target, address).await;
            }
            let call = req.call();
            match address {
                Some((url, scope, http)) => client.send_at(&target, url, scope, http, &call).await,
                None => client.stdio.send(&target, &call).await,
            }
        })
    }
}
