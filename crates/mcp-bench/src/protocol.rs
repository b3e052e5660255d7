//! The MCP messages the load generator sends, in both eras, and their HTTP framing.

use std::fmt;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use http::{Method, Request};
use http_body_util::Full;

/// The stateless protocol revision (every request carries `_meta` and the standard headers).
pub const MODERN_VERSION: &str = "2026-07-28";
/// The session-based protocol revision (`initialize`, `Mcp-Session-Id`, DELETE).
pub const LEGACY_VERSION: &str = "2025-11-25";
/// The legacy session header.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// Which protocol era a client or backend speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2026-07-28: stateless, `server/discover`, `_meta` on every request.
    Modern,
    /// 2025-11-25: `initialize` + `notifications/initialized`, `Mcp-Session-Id`, DELETE.
    Legacy,
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Modern => "modern",
            Self::Legacy => "legacy",
        })
    }
}

/// Where requests go: an MCP endpoint and how to authenticate to it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// `host:port` of the server.
    pub addr: std::net::SocketAddr,
    /// The request path, e.g. `/mcp` or `/servers/bench/mcp`.
    pub path: String,
    /// `Authorization` header value (the gateway needs a bearer token; echo backends do not).
    pub authorization: Option<HeaderValue>,
    /// The name `tools/call` uses (direct: `echo`; through the gateway: `<backend>-echo`).
    pub tool: String,
}

impl Endpoint {
    /// An endpoint without authentication calling the tool `echo`.
    #[must_use]
    pub fn new(addr: std::net::SocketAddr, path: impl Into<String>) -> Self {
        Self {
            addr,
            path: path.into(),
            authorization: None,
            tool: "echo".to_owned(),
        }
    }

    /// With `Authorization: Bearer <token>`.
    ///
    /// # Panics
    ///
    /// When the token has characters a header value cannot hold (a JWT never has).
    #[must_use]
    pub fn bearer(mut self, token: &str) -> Self {
        self.authorization =
            Some(HeaderValue::from_str(&format!("Bearer {token}")).expect("a JWT is header-safe"));
        self
    }

    /// With another tool name for `tools/call`.
    #[must_use]
    pub fn tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = tool.into();
        self
    }

    /// A POST with the headers every request carries.
    pub(crate) fn post(&self) -> http::request::Builder {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(&self.path)
            .header(HOST, self.addr.to_string())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if let Some(auth) = &self.authorization {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        builder
    }

    /// A DELETE of a legacy session.
    pub(crate) fn delete(&self, session: &str) -> Request<Full<Bytes>> {
        let mut builder = Request::builder()
            .method(Method::DELETE)
            .uri(&self.path)
            .header(HOST, self.addr.to_string())
            .header(SESSION_HEADER, session)
            .header("mcp-protocol-version", LEGACY_VERSION);
        if let Some(auth) = &self.authorization {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        builder
            .body(Full::new(Bytes::new()))
            .expect("static parts make a valid request")
    }
}

/// The `_meta` of a modern request.
const MODERN_META: &str = concat!(
    r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
    r#""io.modelcontextprotocol/clientCapabilities":{},"#,
    r#""io.modelcontextprotocol/clientInfo":{"name":"mcp-bench","version":"0.1.0"}}"#
);

/// One MCP request, framed for `era` (modern: `_meta` and the standard headers; legacy: the
/// session header after `initialize`).
pub(crate) fn request(
    endpoint: &Endpoint,
    era: Era,
    session: Option<&str>,
    id: u64,
    method: &str,
    name: Option<&str>,
    params: &str,
) -> Request<Full<Bytes>> {
    let body = match era {
        Era::Modern if params.is_empty() => {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{MODERN_META}}}}}"#
            )
        }
        Era::Modern => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params},{MODERN_META}}}}}"#
        ),
        Era::Legacy => {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params}}}}}"#)
        }
    };
    let mut builder = endpoint.post();
    match era {
        Era::Modern => {
            builder = builder
                .header("mcp-protocol-version", MODERN_VERSION)
                .header("mcp-method", method);
            if let Some(name) = name {
                builder = builder.header("mcp-name", name);
            }
        }
        Era::Legacy => {
            if method != "initialize" {
                builder = builder.header("mcp-protocol-version", LEGACY_VERSION);
            }
            if let Some(session) = session {
                builder = builder.header(SESSION_HEADER, session);
            }
        }
    }
    builder
        .body(Full::new(Bytes::from(body)))
        .expect("validated parts make a valid request")
}

/// The legacy `notifications/initialized` of a session.
pub(crate) fn initialized(endpoint: &Endpoint, session: &str) -> Request<Full<Bytes>> {
    endpoint
        .post()
        .header("mcp-protocol-version", LEGACY_VERSION)
        .header(SESSION_HEADER, session)
        .body(Full::new(Bytes::from_static(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )))
        .expect("validated parts make a valid request")
}

/// The params of a legacy `initialize`.
pub(crate) fn initialize_params() -> String {
    format!(
        r#""protocolVersion":"{LEGACY_VERSION}","capabilities":{{}},"clientInfo":{{"name":"mcp-bench","version":"0.1.0"}}"#
    )
}
