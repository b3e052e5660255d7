//! [`AdminService`]: the admin listener's endpoints.
//!
//! | path | answer |
//! |---|---|
//! | `GET /healthz` | `200 {"status":"ok"}` while the process serves (liveness) |
//! | `GET /readyz` | `200 {"status":"ready","config":{"generation":N},"checks":{...}}` (`generation`: 1 at start, one more per applied reload), or `503 {"status":"unready",...}` when the user config store is unreachable or the gateway is draining; `checks.backends` has one row per backend name called so far: the worst state of its breakers (one per tenant and credentials), how many there are and how many are not closed, and their trips, never a URL or a principal (a URL may carry credentials in its query or userinfo); detail only: an open breaker does not make the gateway unready |
//! | `GET /metrics` | Prometheus text format (every family: [`crate::metric_table`]) |

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;
use tower_service::Service;

use crate::body::GatewayBody;
use crate::metadata::detail;
use crate::metrics;
use crate::store::UserStore;

/// State behind the admin endpoints.
pub(crate) struct AdminState {
    pub(crate) store: UserStore,
    /// The process configuration generation running (1 at start, one more per applied reload).
    pub(crate) config_generation: Arc<AtomicU64>,
    pub(crate) metrics: Option<PrometheusHandle>,
    pub(crate) draining: AtomicBool,
    /// The router's circuit breakers, shown in the readiness detail and counted in `/metrics`.
    pub(crate) breakers: mcp_breaker::BreakerRegistry,
    /// The breakers' states by backend name, for `/metrics`.
    pub(crate) breaker_counts: metrics::BreakerCounts,
    /// The plugin runtime, when `plugins.config` is set (unready while its document is invalid).
    pub(crate) plugins: Option<crate::plugins::Plugins>,
    /// How many 2024-11-05 SSE streams are open (the SSE bridge's count, read at scrape time).
    pub(crate) sse_sessions: Box<dyn Fn() -> usize + Send + Sync>,
    /// How many upstream calls wait for a client's `input_required` retry (the router's count).
    pub(crate) parked_calls: Box<dyn Fn() -> usize + Send + Sync>,
    /// What 2025 sessions and notification streams hold on this node (the router's counts).
    pub(crate) held: Box<dyn Fn() -> metrics::Held + Send + Sync>,
}

impl AdminState {
    /// Live readiness: `(ready, JSON body)`.
    pub(crate) async fn readiness(&self) -> (bool, serde_json::Value) {
        let store = self.store.readiness().await;
        metrics::record_store_ready(store.ready);
        let draining = self.draining.load(Ordering::Acquire);
        let (plugins_ready, plugins) = self.plugins.as_ref().map_or(
            (true, serde_json::Value::Null),
            crate::plugins::Plugins::readiness,
        );
        let ready = store.ready && !draining && plugins_ready;
        let body = json!({
            "status": if ready { "ready" } else { "unready" },
            "config": { "generation": self.config_generation.load(Ordering::Relaxed) },
            "checks": {
                "config_store": store.detail,
                "draining": draining,
                "plugins": plugins,
                "backends": self.backend_detail(),
            },
        });
        (ready, body)
    }
}

impl AdminState {
    /// Every backend the router has called, by name, with its breaker state. An open breaker
    /// does not make the gateway unready (the other backends still serve); it is detail for
    /// operators. The URL is left out: a user configuration's URL may carry a token in its query
    /// or userinfo, and the readiness answer is no place for it.
    ///
    /// Breakers are per credential scope (one per tenant and backend), so the detail is one row
    /// per backend name: the worst state of its breakers, how many there are, how many are not
    /// closed, and their trips in total (nothing per tenant: the admin answer names no principal).
    fn backend_detail(&self) -> Vec<serde_json::Value> {
        use mcp_breaker::BreakerState;
        fn severity(state: BreakerState) -> u8 {
            match state {
                BreakerState::Open | BreakerState::ForcedOpen => 3,
                BreakerState::HalfOpen => 2,
                BreakerState::ForcedClosed => 1,
                _ => 0,
            }
        }
        let mut rows: std::collections::BTreeMap<String, (BreakerState, usize, usize, u64)> =
            std::collections::BTreeMap::new();
        for (key, snapshot) in self.breakers.snapshots() {
            let name = metrics::backend_of(&key).to_owned();
            let row = rows.entry(name).or_insert((BreakerState::Closed, 0, 0, 0));
            if severity(snapshot.state) > severity(row.0) {
                row.0 = snapshot.state;
            }
            row.1 += 1;
            row.2 += usize::from(snapshot.state != BreakerState::Closed);
            row.3 += u64::from(snapshot.trips);
        }
        rows.into_iter()
            .map(|(name, (state, breakers, not_closed, trips))| {
                json!({
                    "backend": name,
                    "breaker": state.as_str(),
                    "breakers": breakers,
                    "not_closed": not_closed,
                    "trips": trips,
                })
            })
            .collect()
    }
}

/// The admin listener as a tower `Service` ([`Gateway::admin_service`](crate::Gateway::admin_service)).
#[derive(Clone)]
pub struct AdminService {
    state: Arc<AdminState>,
}

impl std::fmt::Debug for AdminService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminService").finish_non_exhaustive()
    }
}

impl AdminService {
    pub(crate) fn new(state: Arc<AdminState>) -> Self {
        Self { state }
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<Response<GatewayBody>, Infallible>> + Send>>;

impl<B> Service<Request<B>> for AdminService {
    type Response = Response<GatewayBody>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let state = Arc::clone(&self.state);
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        Box::pin(async move {
            if method != Method::GET && method != Method::HEAD {
                let mut res = detail(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed");
                res.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
                return Ok(res);
            }
            let res = match path.as_str() {
                "/healthz" => json_response(StatusCode::OK, &json!({ "status": "ok" })),
                "/readyz" => {
                    let (ready, body) = state.readiness().await;
                    let status = if ready {
                        StatusCode::OK
                    } else {
                        StatusCode::SERVICE_UNAVAILABLE
                    };
                    json_response(status, &body)
                }
                "/metrics" => {
                    metrics::record_cache(state.store.stats());
                    metrics::record_sse_sessions((state.sse_sessions)());
                    metrics::record_parked_calls((state.parked_calls)());
                    metrics::record_held(&(state.held)());
                    state.breaker_counts.record(&state.breakers);
                    let text = metrics::render(state.metrics.as_ref());
                    let mut res = Response::new(boxed(Bytes::from(text)));
                    res.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                    );
                    res
                }
                _ => detail(StatusCode::NOT_FOUND, "Not found"),
            };
            Ok(res)
        })
    }
}

fn boxed(bytes: Bytes) -> GatewayBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<GatewayBody> {
    let mut res = Response::new(boxed(Bytes::from(body.to_string())));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, mcp_core::APPLICATION_JSON);
    res
}
