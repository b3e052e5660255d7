//! [`McpClient`]: one benchmark client on its own HTTP/1.1 connection, speaking one era.

use std::fmt;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::protocol::{self, Endpoint, Era, SESSION_HEADER};

/// Why one operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpError(String);

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OpError {}

impl OpError {
    pub(crate) fn from_message(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    pub(crate) fn from_panic(e: &tokio::task::JoinError) -> Self {
        Self(format!("load worker failed: {e}"))
    }
}

/// What one HTTP exchange returned.
struct Reply {
    status: StatusCode,
    session: Option<String>,
    body: Bytes,
}

/// One client: a keep-alive HTTP/1.1 connection (`TCP_NODELAY`), reopened after a failure, and
/// the legacy session it holds, if any. Like a real MCP client, it sends one request at a time.
pub struct McpClient {
    endpoint: Endpoint,
    era: Era,
    sender: Option<http1::SendRequest<Full<Bytes>>>,
    session: Option<String>,
    next_id: u64,
}

impl fmt::Debug for McpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClient")
            .field("endpoint", &self.endpoint)
            .field("era", &self.era)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// A client of `endpoint` speaking `era`; it connects on first use.
    #[must_use]
    pub fn new(endpoint: Endpoint, era: Era) -> Self {
        Self {
            endpoint,
            era,
            sender: None,
            session: None,
            next_id: 1,
        }
    }

    /// The legacy session this client holds.
    #[must_use]
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// `tools/call` of the endpoint's tool with `{"text":"hello"}`; a legacy client opens its
    /// session first when it has none.
    ///
    /// # Errors
    ///
    /// A transport failure, an unexpected status or an answer without a result.
    pub async fn call_tool(&mut self) -> Result<(), OpError> {
        self.ensure_session().await?;
        let name = self.endpoint.tool.clone();
        let params = format!(r#""name":"{name}","arguments":{{"text":"hello"}}"#);
        self.rpc("tools/call", Some(&name), &params).await.map(drop)
    }

    /// `tools/list`; a legacy client opens its session first when it has none. Returns the
    /// number of bytes of the answer.
    ///
    /// # Errors
    ///
    /// As [`call_tool`](Self::call_tool).
    pub async fn list_tools(&mut self) -> Result<usize, OpError> {
        self.ensure_session().await?;
        self.rpc("tools/list", None, "").await.map(|b| b.len())
    }

    /// `server/discover` (modern clients only).
    ///
    /// # Errors
    ///
    /// As [`call_tool`](Self::call_tool).
    pub async fn discover(&mut self) -> Result<(), OpError> {
        self.rpc("server/discover", None, "").await.map(drop)
    }

    /// Opens a legacy session when the client has none.
    ///
    /// # Errors
    ///
    /// As [`initialize`](Self::initialize).
    pub async fn ensure_session(&mut self) -> Result<(), OpError> {
        if self.era == Era::Legacy && self.session.is_none() {
            self.initialize().await?;
        }
        Ok(())
    }

    /// Legacy `initialize` then `notifications/initialized`; the client keeps the session id.
    ///
    /// # Errors
    ///
    /// A transport failure, an unexpected status, no `Mcp-Session-Id` in the answer.
    pub async fn initialize(&mut self) -> Result<(), OpError> {
        self.session = None;
        let id = self.id();
        let request = protocol::request(
            &self.endpoint,
            Era::Legacy,
            None,
            id,
            "initialize",
            None,
            &protocol::initialize_params(),
        );
        let reply = self.exchange(request).await?;
        check_result(&reply)?;
        let session = reply
            .session
            .ok_or_else(|| OpError::from_message("initialize answered without Mcp-Session-Id"))?;
        let reply = self
            .exchange(protocol::initialized(&self.endpoint, &session))
            .await?;
        if !reply.status.is_success() {
            return Err(OpError::from_message(format!(
                "notifications/initialized: HTTP {}",
                reply.status
            )));
        }
        self.session = Some(session);
        Ok(())
    }

    /// Hands over the legacy session id: the client forgets it (to keep many sessions open
    /// while reusing one connection, then [`delete`](Self::delete) them later).
    pub fn take_session(&mut self) -> Option<String> {
        self.session.take()
    }

    /// DELETE of the client's legacy session (the client forgets it either way).
    ///
    /// # Errors
    ///
    /// No session, a transport failure or a status other than 2xx.
    pub async fn delete_session(&mut self) -> Result<(), OpError> {
        let Some(session) = self.session.take() else {
            return Err(OpError::from_message("no session to delete"));
        };
        self.delete(&session).await
    }

    /// DELETE of legacy session `session`.
    ///
    /// # Errors
    ///
    /// A transport failure or a status other than 2xx.
    pub async fn delete(&mut self, session: &str) -> Result<(), OpError> {
        let reply = self.exchange(self.endpoint.delete(session)).await?;
        if reply.status.is_success() {
            Ok(())
        } else {
            Err(OpError::from_message(format!(
                "DELETE: HTTP {}",
                reply.status
            )))
        }
    }

    /// One session cycle: initialize + initialized + DELETE.
    ///
    /// # Errors
    ///
    /// As [`initialize`](Self::initialize) and [`delete_session`](Self::delete_session).
    pub async fn session_cycle(&mut self) -> Result<(), OpError> {
        self.initialize().await?;
        self.delete_session().await
    }

    /// One session cycle with a list in it: initialize + initialized + `tools/list` + DELETE.
    ///
    /// # Errors
    ///
    /// As [`session_cycle`](Self::session_cycle) and [`list_tools`](Self::list_tools).
    pub async fn session_cycle_with_list(&mut self) -> Result<(), OpError> {
        self.initialize().await?;
        self.rpc("tools/list", None, "").await?;
        self.delete_session().await
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    async fn rpc(
        &mut self,
        method: &str,
        name: Option<&str>,
        params: &str,
    ) -> Result<Bytes, OpError> {
        let id = self.id();
        let request = protocol::request(
            &self.endpoint,
            self.era,
            self.session.as_deref(),
            id,
            method,
            name,
            params,
        );
        let reply = self.exchange(request).await?;
        if reply.status == StatusCode::NOT_FOUND && self.session.is_some() {
            // The session is gone (e.g. expired): the next operation opens a new one.
            self.session = None;
        }
        check_result(&reply)?;
        Ok(reply.body)
    }

    async fn exchange(&mut self, request: Request<Full<Bytes>>) -> Result<Reply, OpError> {
        let sender = match &mut self.sender {
            Some(sender) if !sender.is_closed() => sender,
            _ => self.sender.insert(connect(&self.endpoint).await?),
        };
        if sender.ready().await.is_err() {
            self.sender = None;
            return Err(OpError::from_message("connection closed"));
        }
        let response = match sender.send_request(request).await {
            Ok(response) => response,
            Err(e) => {
                self.sender = None;
                return Err(OpError::from_message(format!("send: {e}")));
            }
        };
        let status = response.status();
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = match response.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) => {
                self.sender = None;
                return Err(OpError::from_message(format!("body: {e}")));
            }
        };
        Ok(Reply {
            status,
            session,
            body,
        })
    }
}

async fn connect(endpoint: &Endpoint) -> Result<http1::SendRequest<Full<Bytes>>, OpError> {
    let stream = TcpStream::connect(endpoint.addr)
        .await
        .map_err(|e| OpError::from_message(format!("connect {}: {e}", endpoint.addr)))?;
    // Without it a small request can wait ~40 ms for a delayed ACK.
    stream
        .set_nodelay(true)
        .map_err(|e| OpError::from_message(format!("nodelay: {e}")))?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| OpError::from_message(format!("handshake: {e}")))?;
    tokio::spawn(connection);
    Ok(sender)
}

/// A 200 whose body (JSON or an SSE stream) holds a JSON-RPC `result`.
fn check_result(reply: &Reply) -> Result<(), OpError> {
    if reply.status != StatusCode::OK {
        return Err(OpError::from_message(format!(
            "HTTP {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body[..reply.body.len().min(200)])
        )));
    }
    if contains(&reply.body, br#""result""#) {
        Ok(())
    } else {
        Err(OpError::from_message(format!(
            "no result: {}",
            String::from_utf8_lossy(&reply.body[..reply.body.len().min(200)])
        )))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
