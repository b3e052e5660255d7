//! The HTTP(S) client that fetches JWK Sets: hyper-util's pooled client over `mcp-core`'s HTTPS
//! connector (native root certificates, aws-lc-rs), plain `http` allowed.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcp_core::tls::{ClientTls, HttpsConnector, https_connector};

use crate::error::{ClaimsConfigError, JwksFailure};

/// Largest JWKS document we read.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// The pooled client shared by every JWKS source of a validator.
pub(crate) type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Builds the client over `mcp-core`'s HTTPS connector. `tls` overrides the TLS configuration;
/// otherwise the platform's native roots are loaded, and failing that is only an error when an
/// `https` URL needs them.
pub(crate) fn build_client(
    tls: Option<rustls::ClientConfig>,
    need_https: bool,
    connect_timeout: Duration,
) -> Result<HttpClient, ClaimsConfigError> {
    let config = match tls {
        Some(config) => config,
        None => match ClientTls::new().client_config() {
            Ok(config) => config,
            Err(e) if need_https => return Err(ClaimsConfigError::Tls(e.to_string())),
            // Only plain http URLs: an https connector that trusts nothing is never used.
            Err(_) => {
                ClientTls::untrusting_config().map_err(|e| ClaimsConfigError::Tls(e.to_string()))?
            }
        },
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(https_connector(config, http)))
}

/// GETs `uri` and returns the body of a 2xx answer (at most 1 MiB), all within `timeout`.
pub(crate) async fn fetch(
    client: &HttpClient,
    uri: &Uri,
    timeout: Duration,
) -> Result<Bytes, JwksFailure> {
    let request = Request::get(uri.clone())
        .header(header::ACCEPT, "application/jwk-set+json, application/json")
        .header(
            header::USER_AGENT,
            concat!("mcp-claims/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::new())
        .map_err(JwksFailure::Request)?;
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(JwksFailure::Exchange)?;
        let status = response.status();
        if !status.is_success() {
            return Err(JwksFailure::Status(status));
        }
        let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(JwksFailure::Body)?;
        Ok(body.to_bytes())
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| JwksFailure::Timeout(timeout))?
}
