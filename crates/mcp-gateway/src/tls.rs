//! The TLS listener's rustls configuration (aws-lc-rs provider, TLS 1.2 and 1.3, ALPN `h2` and
//! `http/1.1`) from PEM files, with a certificate a reload replaces, and the TLS settings towards https backends (`backends.tls_*`).

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use mcp_core::tls::ClientTls;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::config::{ConfigError, GatewayConfig, TlsFiles};

/// The listener's certificate and key, which a reload replaces: handshakes from then on present
/// the new certificate, connections already established keep theirs.
#[derive(Debug)]
pub(crate) struct ServerCert(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for ServerCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

impl ServerCert {
    /// Presents `key` (from [`certified_key`]) from the next handshake on.
    pub(crate) fn replace(&self, key: CertifiedKey) {
        self.0.store(Arc::new(key));
    }
}

/// Reads the certificate chain and key and builds the acceptor, with the handle that replaces
/// them.
///
/// # Errors
///
/// Unreadable or empty PEM files, a key that does not match the certificate; each names
/// `listen.tls_cert` or `listen.tls_key`.
pub(crate) fn acceptor(
    config: &GatewayConfig,
    files: &TlsFiles,
) -> Result<(TlsAcceptor, Arc<ServerCert>), ConfigError> {
    let cert = Arc::new(ServerCert(ArcSwap::from_pointee(certified_key(
        config, files,
    )?)));
    let mut server = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| config.problem("listen.tls_cert", e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::clone(&cert) as Arc<dyn ResolvesServerCert>);
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(server)), cert))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The certificate chain and key of `files`, checked to fit each other.
///
/// # Errors
///
/// As [`acceptor`].
pub(crate) fn certified_key(
    config: &GatewayConfig,
    files: &TlsFiles,
) -> Result<CertifiedKey, ConfigError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            config.problem(
                "listen.tls_cert",
                format!(
                    "cannot read certificates from {}: {e}",
                    files.cert.display()
                ),
            )
        })?;
    if certs.is_empty() {
        return Err(config.problem(
            "listen.tls_cert",
            format!("{} holds no PEM certificate", files.cert.display()),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        config.problem(
            "listen.tls_key",
            format!(
                "cannot read a private key from {}: {e}",
                files.key.display()
            ),
        )
    })?;
    CertifiedKey::from_der(certs, key, &provider()).map_err(|e| {
        config.problem(
            "listen.tls_key",
            format!("does not fit the certificate chain: {e}"),
        )
    })
}

/// The TLS settings towards https backends (`backends.tls_ca_file`,
/// `backends.tls_client_cert_file`, `backends.tls_client_key_file`): the files are read and the
/// rustls configuration built once, so `check-config` and startup refuse what would fail later.
pub(crate) fn backend_tls(config: &GatewayConfig) -> Result<ClientTls, ConfigError> {
    let backends = &config.backends;
    let mut tls = ClientTls::new();
    if let Some(file) = &backends.tls_ca_file {
        let pem = read(config, "backends.tls_ca_file", file)?;
        tls = tls.add_roots_pem(&pem).map_err(|e| {
            config.problem("backends.tls_ca_file", format!("{}: {e}", file.display()))
        })?;
    }
    if let Some(files) = &backends.tls_client_identity {
        let chain = read(config, "backends.tls_client_cert_file", &files.cert)?;
        let key = read(config, "backends.tls_client_key_file", &files.key)?;
        tls = tls
            .client_certificate_pem(&chain, &key)
            .map_err(|e| config.problem("backends.tls_client_cert_file", e.to_string()))?;
    }
    if !tls.is_default() {
        // Reject a key that does not fit its certificate now, not at the first https call.
        tls.client_config()
            .map_err(|e| config.problem("backends.tls_client_cert_file", e.to_string()))?;
    }
    Ok(tls)
}

fn read(config: &GatewayConfig, key: &str, file: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(file)
        .map_err(|e| config.problem(key, format!("cannot read {}: {e}", file.display())))
}
