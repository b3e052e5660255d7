//! One HTTPS connector for every outgoing client of the gateway (JWKS fetches, backends):
//! rustls over aws-lc-rs, the platform's roots plus any private CAs ([`ClientTls`]), an optional
//! client certificate, HTTP/1.1 and h2, plain `http` URLs allowed. Feature `https`.
//!
//! ```
//! use mcp_core::tls::{ClientTls, https_connector};
//! use hyper_util::client::legacy::connect::HttpConnector;
//!
//! let mut http = HttpConnector::new();
//! http.enforce_http(false);
//! // A full rustls configuration replaces the platform roots and the options below.
//! let config = rustls::ClientConfig::builder_with_provider(mcp_core::tls::provider())
//!     .with_safe_default_protocol_versions()
//!     .unwrap()
//!     .with_root_certificates(rustls::RootCertStore::empty())
//!     .with_no_client_auth();
//! let tls = ClientTls::new().config(config);
//! let connector = https_connector(tls.client_config().unwrap(), http);
//! # let _ = connector;
//! ```

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

pub use hyper_rustls::HttpsConnector;

/// The error of building a TLS client configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM document holds no certificate, or one that rustls refuses.
    #[error("bad CA certificates: {0}")]
    Roots(String),
    /// The client certificate chain or its private key cannot be used.
    #[error("bad client certificate or key: {0}")]
    ClientCertificate(String),
    /// No trusted root at all: the platform has none and no CA was given.
    #[error("no trusted root certificates: the platform has none ({0}) and no CA file was given")]
    NoRoots(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The TLS settings of an outgoing client: the platform's roots, extra trusted CAs (a private
/// PKI), an optional client certificate (mutual TLS), or a complete rustls configuration that
/// replaces all of these.
#[derive(Clone, Default)]
#[must_use]
pub struct ClientTls {
    extra_roots: Vec<CertificateDer<'static>>,
    client_auth: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
    config: Option<ClientConfig>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key.
        f.debug_struct("ClientTls")
            .field("extra_roots", &self.extra_roots.len())
            .field("client_certificate", &self.client_auth.is_some())
            .field("config", &self.config.is_some())
            .finish()
    }
}

impl ClientTls {
    /// The platform's roots, no client certificate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also trusts the CA certificates of a PEM document (one or more `CERTIFICATE` blocks).
    ///
    /// ```
    /// use mcp_core::tls::ClientTls;
    ///
    /// assert!(ClientTls::new().add_roots_pem(b"not pem").is_err());
    /// ```
    pub fn add_roots_pem(mut self, pem: &[u8]) -> Result<Self, TlsError> {
        let certs = certificates(pem).map_err(TlsError::Roots)?;
        self.extra_roots.extend(certs);
        Ok(self)
    }

    /// Presents this client certificate (the chain, leaf first, as PEM) with its private key
    /// (PKCS#8, PKCS#1 or SEC1 PEM) when a server asks for one.
    pub fn client_certificate_pem(mut self, chain: &[u8], key: &[u8]) -> Result<Self, TlsError> {
        let chain = certificates(chain).map_err(TlsError::ClientCertificate)?;
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| TlsError::ClientCertificate(format!("private key: {e}")))?;
        self.client_auth = Some((chain, Arc::new(key)));
        Ok(self)
    }

    /// Uses this complete configuration instead (its roots and client authentication win over
    /// everything else set here). Its ALPN protocols are replaced by the connector's.
    pub fn config(mut self, config: ClientConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// Whether only the platform's roots are used (nothing added or replaced).
    pub fn is_default(&self) -> bool {
        self.extra_roots.is_empty() && self.client_auth.is_none() && self.config.is_none()
    }

    /// The rustls configuration: the platform's roots (unreadable ones skipped) plus the extra
    /// CAs, with the client certificate if one is set. [`TlsError::NoRoots`] when that leaves no
    /// trusted root.
    pub fn client_config(&self) -> Result<ClientConfig, TlsError> {
        if let Some(config) = &self.config {
            return Ok(config.clone());
        }
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        let (added, _) = roots.add_parsable_certificates(self.extra_roots.iter().cloned());
        if added != self.extra_roots.len() {
            return Err(TlsError::Roots("a CA certificate was refused".into()));
        }
        if roots.is_empty() {
            let why = native
                .errors
                .first()
                .map_or_else(|| "none found".to_owned(), ToString::to_string);
            return Err(TlsError::NoRoots(why));
        }
        self.with_roots(roots)
    }

    /// A configuration that trusts nothing: for a client whose URLs are all plain `http`, or that
    /// should fail every `https` connection rather than not start.
    pub fn untrusting_config() -> Result<ClientConfig, TlsError> {
        Self::new().with_roots(RootCertStore::empty())
    }

    fn with_roots(&self, roots: RootCertStore) -> Result<ClientConfig, TlsError> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(roots);
        match &self.client_auth {
            None => Ok(builder.with_no_client_auth()),
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| TlsError::ClientCertificate(e.to_string())),
        }
    }
}

/// The crypto provider of every client: aws-lc-rs.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// Wraps a TCP connector (`inner`, which must allow `https` URLs, e.g.
/// `HttpConnector::enforce_http(false)`) into the connector of every outgoing client: TLS with
/// `config` for `https` URLs, plain for `http` ones, HTTP/1.1 and h2 (ALPN).
pub fn https_connector<C>(config: ClientConfig, inner: C) -> HttpsConnector<C> {
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(inner)
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block in the PEM document".into());
    }
    Ok(certs)
}
