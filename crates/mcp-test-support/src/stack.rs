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

use crate::{Reply, send_body, unix_now};

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
        let (headers, body) = modern_request(method, params);
        let auth = format!("Bearer {}", token(sub));
        let mut all: Vec<(&str, &str)> = vec![("authorization", &auth)];
        all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
        all.extend_from_slice(extra);
        send_body(
            self.addr,
            "POST",
            &format!("/servers/{vhost}/mcp"),
            &all,
            &body,
        )
        .await
    }
}

/// Headers and body of a well-formed 2026-07-28 request. `params._meta` gets the required keys
/// unless the caller put its own `_meta` there.
pub fn modern_request(method: &str, mut params: Value) -> (Vec<(&'static str, String)>, String) {
    if params.get("_meta").is_none() {
        params["_meta"] = modern_meta();
    }
    let mut headers = vec![
        ("accept", "application/json, text/event-stream".to_owned()),
        ("content-type", "application/json".to_owned()),
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method.to_owned()),
    ];
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" => params["uri"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        let value = mcp_core::headers::encode_header_value(name);
        headers.push(("mcp-name", value.to_str().expect("ascii").to_owned()));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    (headers, body.to_string())
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

/// The `_meta` [`modern_request`] puts on a request that has none: callers extend it (progress
/// token, log level) and put it in `params._meta` themselves.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"},
    })
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

/// An `inputResponses` answer accepting an elicitation with the content `{key: value}`.
pub fn accept_elicitation(key: &str, value: &str) -> Value {
    json!({"elicitation": {"action": "accept", "content": {key: value}}})
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
        let (headers, body) = modern_request_with_id(id, method, params);
        let auth = bearer(sub);
        let mut all: Vec<(&str, &str)> = vec![("authorization", &auth)];
        all.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
        send_body(
            self.addr,
            "POST",
            &format!("/servers/{vhost}/mcp"),
            &all,
            &body,
        )
        .await
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

    /// Opens a 2025-11-25 session of `sub` on `vhost` (`initialize` only): its id.
    pub async fn legacy_session(&self, sub: &str, vhost: &str) -> String {
        let init = self
            .raw(
                sub,
                vhost,
                "POST",
                &[
                    ("accept", "application/json, text/event-stream"),
                    ("content-type", "application/json"),
                ],
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "e2e", "version": "0"}}})
                .to_string(),
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
            .raw(
                sub,
                vhost,
                "POST",
                &[
                    ("accept", "application/json, text/event-stream"),
                    ("content-type", "application/json"),
                    ("mcp-session-id", session),
                    ("mcp-protocol-version", "2025-11-25"),
                ],
                &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(),
            )
            .await;
        match reply.sse_messages().pop() {
            Some(message) => message,
            None => reply.json(),
        }
    }
}
