//! The TLS listener's rustls configuration (aws-lc-rs provider, TLS 1.2 and 1.3, ALPN `h2` and
//! `http/1.1`) from PEM files, and the TLS settings towards https backends (`backends.tls_*`).

use std::path::Path;
use std::sync::Arc;

use mcp_core::tls::ClientTls;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::config::{ConfigError, GatewayConfig, TlsFiles};

/// Reads the certificate chain and key and builds the acceptor.
///
/// # Errors
///
/// Unreadable or empty PEM files, a key that does not match the certificate; each names
/// `listen.tls_cert` or `listen.tls_key`.
pub(crate) fn acceptor(
    config: &GatewayConfig,
    files: &TlsFiles,
) -> Result<TlsAcceptor, ConfigError> {
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
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| config.problem("listen.tls_cert", e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            config.problem(
                "listen.tls_key",
                format!("does not fit the certificate chain: {e}"),
            )
        })?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(server)))
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
