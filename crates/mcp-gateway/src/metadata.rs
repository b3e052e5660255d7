//! RFC 9728 protected resource metadata: the documents at
//! `/.well-known/oauth-protected-resource/servers/{vhost}/mcp` (one per virtual host) and
//! `/.well-known/oauth-protected-resource` (the gateway as a whole), and the per-virtual-host URL
//! that 401 challenges advertise as `resource_metadata`.
//!
//! Document: `{"resource": "<base>/servers/{vhost}/mcp", "authorization_servers": [...],
//! "scopes_supported": [...], "bearer_methods_supported": ["header"]}`. `<base>` is
//! `auth.public_url` when configured (its path, if any, is kept: the metadata URL inserts the
//! well-known prefix between host and path, RFC 9728 §3.1), else the scheme of the listener and the
//! request's `Host`. The documents are public (no token), `Access-Control-Allow-Origin: *`.

use std::str::FromStr;

use bytes::Bytes;
use http::request::Parts;
use http::uri::Authority;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use mcp_core::{APPLICATION_JSON, VirtualHostId, detail_body};
use mcp_vhost::{PathError, PathPattern, WELL_KNOWN_PREFIX};
use serde_json::json;

use crate::body::GatewayBody;
use crate::config::GatewayConfig;

/// The RFC 9728 documents of a gateway.
#[derive(Clone, Debug)]
pub(crate) struct ResourceMetadata {
    /// `auth.public_url` as origin (`https://gw.example`) and path prefix (`""` or `/base`).
    public: Option<(String, String)>,
    scheme: &'static str,
    pattern: PathPattern,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
}

impl ResourceMetadata {
    pub(crate) fn from_config(config: &GatewayConfig) -> Self {
        let public = config.auth.public_url.as_ref().map(|url| {
            let origin = url.origin().ascii_serialization();
            let prefix = url.path().trim_end_matches('/').to_owned();
            (origin, prefix)
        });
        Self {
            public,
            scheme: if config.listen.tls.is_some() {
                "https"
            } else {
                "http"
            },
            pattern: PathPattern::default(),
            authorization_servers: config.auth.authorization_servers.clone(),
            scopes_supported: config.auth.scopes_supported.clone(),
        }
    }

    /// Whether `path` is served here rather than by the MCP stack.
    pub(crate) fn handles(path: &str) -> bool {
        path.strip_prefix(WELL_KNOWN_PREFIX)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// Origin and path prefix of the gateway as the client sees it.
    fn base(&self, headers: &HeaderMap, uri: &Uri) -> Option<(String, String)> {
        if let Some(public) = &self.public {
            return Some(public.clone());
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| uri.authority().map(|a| a.as_str().to_owned()))?;
        let authority = Authority::from_str(&host).ok()?;
        if authority.as_str().contains('@') {
            return None;
        }
        Some((format!("{}://{}", self.scheme, authority), String::new()))
    }

    /// The per-virtual-host metadata URL for the 401 challenge of this request (needs the
    /// `VirtualHostId` extension, which the vhost layer inserts before authentication).
    pub(crate) fn url_for_request(&self, parts: &Parts) -> Option<String> {
        let id = parts.extensions.get::<VirtualHostId>()?;
        let (origin, prefix) = self.base(&parts.headers, &parts.uri)?;
        Some(format!(
            "{origin}{WELL_KNOWN_PREFIX}{prefix}{}",
            self.pattern.path_for(id)
        ))
    }

    /// Answers a request under `/.well-known/oauth-protected-resource`.
    pub(crate) fn respond(&self, parts: &Parts) -> Response<GatewayBody> {
        match parts.method {
            Method::GET | Method::HEAD => {}
            Method::OPTIONS => {
                let mut res = empty(StatusCode::NO_CONTENT);
                let h = res.headers_mut();
                h.insert(
                    header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                );
                h.insert(
                    header::ACCESS_CONTROL_ALLOW_METHODS,
                    HeaderValue::from_static("GET, HEAD, OPTIONS"),
                );
                h.insert(
                    header::ACCESS_CONTROL_ALLOW_HEADERS,
                    HeaderValue::from_static("mcp-protocol-version"),
                );
                return res;
            }
            _ => {
                let mut res = detail(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed");
                res.headers_mut().insert(
                    header::ALLOW,
                    HeaderValue::from_static("GET, HEAD, OPTIONS"),
                );
                return res;
            }
        }
        let Some((origin, prefix)) = self.base(&parts.headers, &parts.uri) else {
            return detail(StatusCode::BAD_REQUEST, "Missing or invalid Host header");
        };
        let rest = parts
            .uri
            .path()
            .strip_prefix(WELL_KNOWN_PREFIX)
            .unwrap_or_default();
        let resource = if rest.is_empty() || rest == "/" {
            format!("{origin}{prefix}")
        } else {
            let local = if prefix.is_empty() {
                rest
            } else {
                rest.strip_prefix(prefix.as_str()).unwrap_or(rest)
            };
            match self.pattern.extract(local) {
                Ok(id) => format!("{origin}{prefix}{}", self.pattern.path_for(&id)),
                Err(PathError::InvalidId) => {
                    return detail(StatusCode::BAD_REQUEST, "Invalid virtual host id");
                }
                // `NotAnEndpoint`, and whatever else a path may fail with.
                Err(_) => {
                    return detail(StatusCode::NOT_FOUND, "Not found");
                }
            }
        };
        let document = json!({
            "resource": resource,
            "authorization_servers": self.authorization_servers,
            "scopes_supported": self.scopes_supported,
            "bearer_methods_supported": ["header"],
        });
        let bytes = Bytes::from(document.to_string());
        let mut res = if parts.method == Method::HEAD {
            empty(StatusCode::OK)
        } else {
            full(StatusCode::OK, bytes)
        };
        let h = res.headers_mut();
        h.insert(header::CONTENT_TYPE, APPLICATION_JSON);
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=300"),
        );
        res
    }
}

fn full(status: StatusCode, bytes: Bytes) -> Response<GatewayBody> {
    let mut res = Response::new(
        Full::new(bytes)
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *res.status_mut() = status;
    res
}

fn empty(status: StatusCode) -> Response<GatewayBody> {
    full(status, Bytes::new())
}

/// A `{"detail":"..."}` JSON response.
pub(crate) fn detail(status: StatusCode, text: &str) -> Response<GatewayBody> {
    let mut res = full(status, Bytes::from(detail_body(text)));
    res.headers_mut()
        .insert(header::CONTENT_TYPE, APPLICATION_JSON);
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, host: Option<&str>) -> Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        if let Some(host) = host {
            b = b.header("host", host);
        }
        b.body(()).expect("request").into_parts().0
    }

    async fn json(res: Response<GatewayBody>) -> serde_json::Value {
        let bytes = res.into_body().collect().await.expect("body").to_bytes();
        serde_json::from_slice(&bytes).expect("json")
    }

    #[tokio::test]
    async fn documents_from_host_and_from_public_url() {
        let config = GatewayConfig::default();
        let m = ResourceMetadata::from_config(&config);
        let res = m.respond(&parts(
            "GET",
            "/.well-known/oauth-protected-resource/servers/vh1/mcp",
            Some("gw.test:8080"),
        ));
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(
            json(res).await,
            json!({
                "resource": "http://gw.test:8080/servers/vh1/mcp",
                "authorization_servers": ["https://issuer.example"],
                "scopes_supported": [],
                "bearer_methods_supported": ["header"],
            })
        );
        let root = m.respond(&parts(
            "GET",
            "/.well-known/oauth-protected-resource",
            Some("gw.test"),
        ));
        assert_eq!(json(root).await["resource"], "http://gw.test");
        assert_eq!(
            m.respond(&parts(
                "GET",
                "/.well-known/oauth-protected-resource/x",
                Some("h")
            ))
            .status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            m.respond(&parts(
                "POST",
                "/.well-known/oauth-protected-resource",
                Some("h")
            ))
            .status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            m.respond(&parts(
                "GET",
                "/.well-known/oauth-protected-resource",
                Some("a b")
            ))
            .status(),
            StatusCode::BAD_REQUEST
        );

        let config = GatewayConfig::from_toml_str(
            "[auth]\npublic_url = \"https://gw.example/base/\"\nscopes_supported = [\"mcp\"]\n",
        )
        .expect("valid");
        let m = ResourceMetadata::from_config(&config);
        let doc = json(m.respond(&parts(
            "GET",
            "/.well-known/oauth-protected-resource/base/servers/vh1/mcp",
            Some("internal:1"),
        )))
        .await;
        assert_eq!(doc["resource"], "https://gw.example/base/servers/vh1/mcp");
        assert_eq!(doc["scopes_supported"], json!(["mcp"]));
        let mut p = parts("POST", "/servers/vh1/mcp", Some("internal:1"));
        assert_eq!(m.url_for_request(&p), None);
        p.extensions.insert(VirtualHostId::new("vh1"));
        assert_eq!(
            m.url_for_request(&p).as_deref(),
            Some("https://gw.example/.well-known/oauth-protected-resource/base/servers/vh1/mcp")
        );
    }

    #[test]
    fn handles_only_the_well_known_tree() {
        assert!(ResourceMetadata::handles(
            "/.well-known/oauth-protected-resource"
        ));
        assert!(ResourceMetadata::handles(
            "/.well-known/oauth-protected-resource/servers/a/mcp"
        ));
        assert!(!ResourceMetadata::handles(
            "/.well-known/oauth-protected-resourcex"
        ));
        assert!(!ResourceMetadata::handles("/servers/a/mcp"));
    }
}
