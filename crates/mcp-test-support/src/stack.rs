//! The in-process gateway stack of the end-to-end tests (feature `stack`): the foundation layers
//! and the router over a memory store, served on a loopback port, plus helpers to mint tokens and
//! speak 2026-07-28 and 2025-11-25 to it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcp_claims::{ClaimsLayer, Issuer, JwtValidator};
use mcp_config_store::{ConfigStoreLayer, MemoryStore, UserConfig, VirtualHostConfigLayer};
use mcp_router::McpRouter;
use mcp_vhost::VhostLayer;
use serde_json::{Value, json};
use tower::ServiceBuilder;

use crate::{
    Reply, legacy_headers, modern_meta_with, modern_request_with_meta, post_modern, rpc_request,
    send_body, unix_now,
};

/// The issuer the stack's validator trusts.
pub const ISSUER: &str = "https://issuer.test";
/// The audience the stack's validator requires.
pub const AUDIENCE: &str = "mcp-gateway";
const SECRET: &[u8] = b"test-secret-test-secret-test-sec";

/// A running gateway.
pub struct Gateway {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its user config store: tests insert and replace users while it runs.
    pub store: MemoryStore,
}

/// Mints a token for `sub`.
pub fn token(sub: &str) -> String {
    let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": unix_now() + 600});
    let key = EncodingKey::from_secret(SECRET).expect("hmac key");
    encode(&Header::new(Algorithm::HS256), &claims, &key).expect("encode")
}

impl Gateway {
    /// Starts the stack; `users` maps subjects to user config JSON.
    pub async fn start(users: &[(&str, Value)]) -> Self {
        Self::start_with(
            users,
            McpRouter::builder()
                .fanout_deadline(Duration::from_secs(5))
                .build(),
        )
        .await
    }

    /// Starts the stack with a custom router.
    pub async fn start_with(users: &[(&str, Value)], router: McpRouter) -> Self {
        let store = MemoryStore::new();
        for (sub, config) in users {
            let config = UserConfig::from_json_str(&config.to_string()).expect("valid user config");
            store.insert(*sub, config);
        }
        let validator = JwtValidator::builder()
            .issuer(Issuer::new(ISSUER).hmac_secret(SECRET, [Algorithm::HS256]))
            .audience(AUDIENCE)
            .build()
            .expect("validator");
        let service = ServiceBuilder::new()
            .layer(VhostLayer::new())
            .layer(ClaimsLayer::new(validator))
            .layer(ConfigStoreLayer::from_shared(Arc::new(store.clone())))
            .layer(VirtualHostConfigLayer::new())
            .service(router);
        let addr = crate::serve(service).await;
        Self { addr, store }
    }

    /// POSTs a 2026-07-28 request for `sub` to `/servers/{vhost}/mcp`.
    pub async fn modern(&self, sub: &str, vhost: &str, method: &str, params: Value) -> Reply {
        self.modern_with(sub, vhost, method, params, &[]).await
    }

    /// Like [`modern`](Self::modern) with extra headers.
    pub async fn modern_with(
        &self,
        sub: &str,
        vhost: &str,
        method: &str,
        params: Value,
        extra: &[(&str, &str)],
    ) -> Reply {
        let request = modern_request(method, params);
        post_modern(self.addr, &bearer(sub), vhost, request, extra).await
    }
}

/// Headers and body of a well-formed 2026-07-28 request. `params._meta` gets [`modern_meta`]
/// unless the caller put its own `_meta` there.
pub fn modern_request(method: &str, params: Value) -> (Vec<(&'static str, String)>, String) {
    modern_request_with_meta(method, params, modern_meta())
}

/// A user config with one virtual host `vh` holding `backends` (name -> url).
pub fn user_config(backends: &[(&str, String)]) -> Value {
    let mut map = serde_json::Map::new();
    for (name, url) in backends {
        map.insert((*name).to_owned(), json!({"url": url, "timeout_ms": 5000}));
    }
    json!({"virtual_hosts": {"vh": {"backends": map}}})
}

/// `Bearer <token for sub>`.
pub fn bearer(sub: &str) -> String {
    format!("Bearer {}", token(sub))
}

/// The `_meta` [`modern_request`] puts on a request that has none (the client declares
/// elicitation): callers extend it (progress token, log level) and put it in `params._meta`
/// themselves.
pub fn modern_meta() -> Value {
    modern_meta_with(json!({"elicitation": {}}))
}

/// Like [`modern_request`] with JSON-RPC id `id` instead of `1`.
pub fn modern_request_with_id(
    id: Value,
    method: &str,
    params: Value,
) -> (Vec<(&'static str, String)>, String) {
    let (headers, body) = modern_request(method, params);
    let mut body: Value = serde_json::from_str(&body).expect("request body is JSON");
    body["id"] = id;
    (headers, body.to_string())
}

/// A user config with one virtual host `vh` given as JSON (`naming`, `backends`, …).
pub fn vhost_config(vhost: Value) -> Value {
    json!({"virtual_hosts": {"vh": vhost}})
}

impl Gateway {
    /// Like [`modern`](Self::modern) with JSON-RPC id `id`.
    pub async fn modern_id(
        &self,
        sub: &str,
        vhost: &str,
        id: Value,
        method: &str,
        params: Value,
    ) -> Reply {
        let request = modern_request_with_id(id, method, params);
        post_modern(self.addr, &bearer(sub), vhost, request, &[]).await
    }

    /// Sends `body` as-is with `headers` (plus a valid token for `sub`) to `/servers/{vhost}/mcp`.
    pub async fn raw(
        &self,
        sub: &str,
        vhost: &str,
        method: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        let auth = bearer(sub);
        let mut all: Vec<(&str, &str)> = vec![("authorization", &auth)];
        all.extend_from_slice(headers);
        send_body(
            self.addr,
            method,
            &format!("/servers/{vhost}/mcp"),
            &all,
            body,
        )
        .await
    }

    /// A 2026-07-28 `tools/call` of `tool` for `sub` on virtual host `vh`.
    pub async fn call_tool(&self, sub: &str, tool: &str, arguments: Value) -> Reply {
        self.modern(
            sub,
            "vh",
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .await
    }

    /// POSTs the JSON-RPC message `body` of `sub` to `vhost` in the 2025-11-25 session `session`,
    /// or outside any (`initialize`) when `None`.
    pub async fn legacy_post(
        &self,
        sub: &str,
        vhost: &str,
        session: Option<&str>,
        body: Value,
    ) -> Reply {
        self.raw(
            sub,
            vhost,
            "POST",
            &legacy_headers(None, session),
            &body.to_string(),
        )
        .await
    }

    /// Opens a 2025-11-25 session of `sub` on `vhost` (`initialize` only): its id.
    pub async fn legacy_session(&self, sub: &str, vhost: &str) -> String {
        let init = self
            .legacy_post(
                sub,
                vhost,
                None,
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "e2e", "version": "0"}}}),
            )
            .await;
        init.header("mcp-session-id")
            .unwrap_or_else(|| panic!("a session: {}", init.text()))
            .to_owned()
    }

    /// A request (id 1) in the 2025 session `session`: the final message, JSON or SSE.
    pub async fn legacy(
        &self,
        sub: &str,
        vhost: &str,
        session: &str,
        method: &str,
        params: Value,
    ) -> Value {
        let reply = self
            .legacy_post(sub, vhost, Some(session), rpc_request(1, method, params))
            .await;
        match reply.sse_messages().pop() {
            Some(message) => message,
            None => reply.json(),
        }
    }
}
