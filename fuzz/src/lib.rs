//! Helpers shared by the fuzz targets in `fuzz_targets/`: polling futures that never wait on I/O,
//! and a router that answers requests as if the foundation layers (vhost, claims, config store)
//! had run.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use mcp_config_store::{UserConfig, VirtualHost};
use mcp_core::{Principal, VirtualHostId};
use mcp_router::McpRouter;
use tower::ServiceExt;

/// Polls a future that completes without waiting (validation with static keys, the sealed
/// session store): a pending poll would mean it waits on I/O, which these entry points must not.
pub fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("future expected to complete without I/O is pending"),
    }
}

/// The fixed sealing secret of the fuzzed router (a forged handle must never open).
pub const SEALING_SECRET: &[u8] = b"fuzz-sealing-secret-fuzz-sealing-secret!";

/// Issuer, subject and virtual host of every fuzzed router request.
pub const ISSUER: &str = "https://issuer.example";
/// Subject of every fuzzed router request.
pub const SUBJECT: &str = "alice";
/// Virtual host of every fuzzed router request; its one backend is `b`.
pub const VHOST: &str = "vh";

struct Harness {
    runtime: tokio::runtime::Runtime,
    router: McpRouter,
    config: Arc<UserConfig>,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        // Port 9 (discard) on loopback: nothing listens, and no fuzzed request may reach it.
        let config = UserConfig::from_json_str(
            r#"{"virtual_hosts":{"vh":{"backends":{"b":{"url":"http://127.0.0.1:9/mcp"}}}}}"#,
        )
        .expect("fixed config is valid");
        Harness {
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime"),
            router: McpRouter::builder().sealing_secret(SEALING_SECRET).build(),
            config: Arc::new(config),
        }
    })
}

/// Sends a 2026-07-28 request (`method`, `params`, with `Mcp-Name` when given) through the router
/// and returns the JSON-RPC error code of the answer, or `None` when the answer is no error.
pub fn modern_call(method: &str, name: Option<&str>, params: serde_json::Value) -> Option<i64> {
    let h = harness();
    let mut params = params;
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut builder = Request::post("/servers/vh/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        builder = builder.header("mcp-name", mcp_core::headers::encode_header_value(name));
    }
    let mut req = builder
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let ext = req.extensions_mut();
    ext.insert(VirtualHostId::new(VHOST));
    ext.insert(Principal::new(ISSUER, SUBJECT));
    ext.insert(Arc::clone(&h.config));
    ext.insert(VirtualHost::new(
        VirtualHostId::new(VHOST),
        Arc::clone(h.config.virtual_hosts.get(VHOST).expect("vh")),
    ));
    let router = h.router.clone();
    let bytes = h.runtime.block_on(async move {
        let res = router.oneshot(req).await.expect("infallible");
        res.into_body().collect().await.expect("body").to_bytes()
    });
    let json: serde_json::Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("router answer is not JSON ({e}): {bytes:?}"));
    json["error"]["code"].as_i64()
}
