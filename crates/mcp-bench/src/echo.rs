//! [`EchoBackend`]: a minimal, fast MCP server of either era (plain hyper, no SDK), so that in a
//! benchmark the gateway, not the backend, dominates the cost.
//!
//! It answers `server/discover` (modern), `initialize` + `notifications/initialized` + DELETE
//! (legacy sessions), `ping`, `tools/list` (a fixed list of `echo`, `echo_1`, … tools) and
//! `tools/call` (every tool echoes its `arguments` as JSON text). Every answer is one
//! `application/json` object; nothing streams.

use std::borrow::Cow;
use std::collections::HashSet;
use std::convert::Infallible;
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use crate::protocol::{Era, LEGACY_VERSION, MODERN_VERSION, SESSION_HEADER};

/// A running echo backend; it stops (listener and every connection) when dropped.
///
/// ```
/// use mcp_bench::{EchoBackend, Era};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let backend = EchoBackend::builder().era(Era::Modern).tools(3).spawn().await.unwrap();
/// assert!(backend.url().ends_with("/mcp"));
/// assert_eq!(backend.era(), Era::Modern);
/// # }
/// ```
#[derive(Debug)]
pub struct EchoBackend {
    addr: SocketAddr,
    era: Era,
    server: JoinHandle<()>,
}

/// Builds an [`EchoBackend`].
#[derive(Clone, Debug)]
pub struct EchoBackendBuilder {
    era: Era,
    tools: usize,
    addr: SocketAddr,
}

impl EchoBackend {
    /// A builder: modern era, one tool, a free loopback port.
    #[must_use]
    pub fn builder() -> EchoBackendBuilder {
        EchoBackendBuilder {
            era: Era::Modern,
            tools: 1,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        }
    }

    /// The listening address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint URL, `http://<addr>/mcp`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The era this backend speaks.
    #[must_use]
    pub fn era(&self) -> Era {
        self.era
    }
}

impl Drop for EchoBackend {
    fn drop(&mut self) {
        // The accept task owns the connections' JoinSet: aborting it ends them all.
        self.server.abort();
    }
}

impl EchoBackendBuilder {
    /// The era to speak: modern (stateless 2026-07-28) or legacy (2025-11-25 sessions).
    #[must_use]
    pub fn era(mut self, era: Era) -> Self {
        self.era = era;
        self
    }

    /// How many tools `tools/list` returns (at least one: `echo`).
    #[must_use]
    pub fn tools(mut self, tools: usize) -> Self {
        self.tools = tools.max(1);
        self
    }

    /// The address to listen on (default `127.0.0.1:0`).
    #[must_use]
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Binds and starts serving on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound.
    pub async fn spawn(self) -> io::Result<EchoBackend> {
        let listener = TcpListener::bind(self.addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::new(self.era, self.tools));
        let server = tokio::spawn(accept_loop(listener, state));
        Ok(EchoBackend {
            addr,
            era: self.era,
            server,
        })
    }
}

/// What every connection of one backend shares.
struct State {
    era: Era,
    /// The `tools/list` result, serialised once.
    tools_list: Box<RawValue>,
    /// Open legacy sessions (ids are random-looking hex numbers).
    sessions: Mutex<HashSet<u64>>,
    session_seed: u64,
    session_counter: AtomicU64,
}

impl State {
    fn new(era: Era, tools: usize) -> Self {
        let tools: Vec<serde_json::Value> = (0..tools)
            .map(|i| {
                let name = if i == 0 {
                    "echo".to_owned()
                } else {
                    format!("echo_{i}")
                };
                serde_json::json!({
                    "name": name,
                    "description": "Returns its arguments as JSON text.",
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                    "annotations": {"readOnlyHint": true, "idempotentHint": true}
                })
            })
            .collect();
        let mut result = serde_json::json!({ "tools": tools });
        if era == Era::Modern {
            result["resultType"] = "complete".into();
        }
        let tools_list =
            serde_json::value::to_raw_value(&result).expect("a JSON value always serialises");
        Self {
            era,
            tools_list,
            sessions: Mutex::new(HashSet::new()),
            session_seed: RandomState::new().hash_one(0_u8),
            session_counter: AtomicU64::new(1),
        }
    }

    fn new_session(&self) -> u64 {
        let n = self.session_counter.fetch_add(1, Ordering::Relaxed);
        // Mixing in a per-process seed keeps ids unguessable enough for a benchmark peer while
        // staying unique (the counter part never repeats within a process).
        let id = n ^ self.session_seed.rotate_left(17);
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id);
        id
    }

    fn has_session(&self, id: u64) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&id)
    }

    fn end_session(&self, id: u64) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        // Small JSON answers must not wait for delayed ACKs.
        let _ = stream.set_nodelay(true);
        while connections.try_join_next().is_some() {}
        let state = Arc::clone(&state);
        connections.spawn(async move {
            let service = service_fn(move |req| handle(Arc::clone(&state), req));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The parts of a JSON-RPC message the echo backend looks at; payloads stay raw.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| u64::from_str_radix(v, 16).ok());
    let has_session_header = req.headers().contains_key(SESSION_HEADER);
    match (req.method(), state.era) {
        (&Method::POST, _) => {}
        (&Method::DELETE, Era::Legacy) => {
            let status = match session {
                Some(id) if state.end_session(id) => StatusCode::OK,
                Some(_) => StatusCode::NOT_FOUND,
                None => StatusCode::BAD_REQUEST,
            };
            return Ok(empty(status));
        }
        _ => {
            let mut res = empty(StatusCode::METHOD_NOT_ALLOWED);
            res.headers_mut()
                .insert(http::header::ALLOW, HeaderValue::from_static("POST"));
            return Ok(res);
        }
    }
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(empty(StatusCode::BAD_REQUEST));
    };
    let Ok(message) = serde_json::from_slice::<Message<'_>>(&body) else {
        return Ok(error(StatusCode::BAD_REQUEST, None, -32700, "Parse error"));
    };
    let Some(method) = message.method.as_deref() else {
        // A client's answer to a server request: this server sends none.
        return Ok(empty(StatusCode::ACCEPTED));
    };
    let Some(id) = message.id else {
        return Ok(empty(StatusCode::ACCEPTED));
    };
    if state.era == Era::Legacy && method != "initialize" {
        match session {
            Some(s) if state.has_session(s) => {}
            _ if has_session_header => {
                return Ok(error(
                    StatusCode::NOT_FOUND,
                    Some(id),
                    -32001,
                    "Session not found",
                ));
            }
            _ => {
                return Ok(error(
                    StatusCode::BAD_REQUEST,
                    Some(id),
                    -32600,
                    "Bad Request: missing session",
                ));
            }
        }
    }
    Ok(match (method, state.era) {
        ("tools/call", era) => {
            let arguments = message
                .params
                .and_then(|p| serde_json::from_str::<CallParams<'_>>(p.get()).ok())
                .and_then(|p| p.arguments)
                .map_or("{}", RawValue::get);
            let text = serde_json::to_string(arguments).unwrap_or_default();
            let result_type = if era == Era::Modern {
                r#","resultType":"complete""#
            } else {
                ""
            };
            let result = format!(
                r#"{{"content":[{{"type":"text","text":{text}}}],"isError":false{result_type}}}"#
            );
            json(StatusCode::OK, result_message(id, &result))
        }
        ("tools/list", _) => json(StatusCode::OK, result_message(id, state.tools_list.get())),
        ("ping", _) => json(StatusCode::OK, result_message(id, "{}")),
        ("server/discover", Era::Modern) => {
            let result = format!(
                r#"{{"resultType":"complete","supportedVersions":["{MODERN_VERSION}"],"capabilities":{{"tools":{{}}}},"_meta":{{"io.modelcontextprotocol/serverInfo":{{"name":"mcp-bench-echo","version":"{}"}}}}}}"#,
                env!("CARGO_PKG_VERSION")
            );
            json(StatusCode::OK, result_message(id, &result))
        }
        ("initialize", Era::Legacy) => {
            let session = state.new_session();
            let result = format!(
                r#"{{"protocolVersion":"{LEGACY_VERSION}","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"mcp-bench-echo","version":"{}"}}}}"#,
                env!("CARGO_PKG_VERSION")
            );
            let mut res = json(StatusCode::OK, result_message(id, &result));
            let value = HeaderValue::from_str(&format!("{session:x}"))
                .expect("hex digits are a valid header value");
            res.headers_mut().insert(SESSION_HEADER, value);
            res
        }
        _ => error(StatusCode::NOT_FOUND, Some(id), -32601, "Method not found"),
    })
}

fn result_message(id: &RawValue, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get())
}

fn json(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

fn error(
    status: StatusCode,
    id: Option<&RawValue>,
    code: i32,
    message: &str,
) -> Response<Full<Bytes>> {
    let id = id.map_or("null", RawValue::get);
    json(
        status,
        format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"{message}"}}}}"#),
    )
}

fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::new()));
    *res.status_mut() = status;
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::McpClient;
    use crate::protocol::Endpoint;

    async fn start(era: Era, backend_era: Era) -> (EchoBackend, McpClient) {
        let backend = EchoBackend::builder()
            .era(backend_era)
            .tools(3)
            .spawn()
            .await
            .expect("bind");
        let client = McpClient::new(Endpoint::new(backend.addr(), "/mcp"), era);
        (backend, client)
    }

    #[tokio::test]
    async fn a_modern_backend_is_stateless_and_refuses_initialize() {
        let (_backend, mut client) = start(Era::Modern, Era::Modern).await;
        client.discover().await.expect("discover");
        client.call_tool().await.expect("call");
        let listed = client.list_tools().await.expect("list");
        assert!(listed > 0);
        let err = client
            .initialize()
            .await
            .expect_err("no initialize in 2026-07-28");
        assert!(err.to_string().starts_with("HTTP 404"), "{err}");
    }

    #[tokio::test]
    async fn a_legacy_backend_needs_a_session_and_forgets_a_deleted_one() {
        let (_backend, mut client) = start(Era::Modern, Era::Legacy).await;
        // What the gateway's era probe sees: a sessionless request is refused.
        let err = client.discover().await.expect_err("no session");
        assert!(err.to_string().contains("missing session"), "{err}");

        let (_backend, mut client) = start(Era::Legacy, Era::Legacy).await;
        client.call_tool().await.expect("call opens a session");
        let session = client.session().expect("session").to_owned();
        client.delete_session().await.expect("delete");
        let err = client.delete(&session).await.expect_err("already deleted");
        assert_eq!(err.to_string(), "DELETE: HTTP 404 Not Found");
        client.session_cycle().await.expect("a new session");
    }
}
