//! The HTTPS connector's TLS override over real TLS sockets: a server whose certificate comes from
//! a private CA (generated here) is refused with the platform's roots and reached once the CA is
//! added; a server that requires a client certificate is reached only when one is presented.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_core::tls::{ClientTls, https_connector, provider};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A private CA and what it signed: PEM texts.
struct Pki {
    ca: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("CA");
    let leaf = |name: &str| {
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(vec![name.to_owned()])
            .expect("params")
            .signed_by(&key, &ca)
            .expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf("127.0.0.1");
    let (client_cert, client_key) = leaf("client.example");
    Pki {
        ca: ca.pem(),
        server_cert,
        server_key,
        client_cert,
        client_key,
    }
}

/// Serves `200 ok` over TLS on a free port; with `client_ca`, only to clients presenting a
/// certificate that CA signed.
async fn serve(pki: &Pki, client_ca: bool) -> SocketAddr {
    let chain = vec![CertificateDer::from_pem_slice(pki.server_cert.as_bytes()).expect("cert")];
    let key = PrivateKeyDer::from_pem_slice(pki.server_key.as_bytes()).expect("key");
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = if client_ca {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(pki.ca.as_bytes()).expect("ca"))
            .expect("root");
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .expect("verifier");
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(chain, key).expect("server config");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A refused handshake is what some tests expect.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(|_req| async {
                    Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

/// GETs `https://<addr>/` through the connector built from `tls`: the body, or the error text.
async fn get(tls: &ClientTls, addr: SocketAddr) -> Result<String, String> {
    let config = tls.client_config().map_err(|e| e.to_string())?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let client: Client<_, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(https_connector(config, http));
    let request = Request::get(format!("https://{addr}/"))
        .body(Empty::new())
        .expect("request");
    let response = client
        .request(request)
        .await
        .map_err(|e| format!("{e:?}"))?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
}

#[tokio::test]
async fn a_private_ca_is_trusted_only_when_added() {
    let pki = pki();
    let addr = serve(&pki, false).await;

    let refused = get(&ClientTls::new(), addr).await;
    assert!(refused.is_err(), "{refused:?}");

    let with_ca = ClientTls::new()
        .add_roots_pem(pki.ca.as_bytes())
        .expect("CA PEM");
    assert_eq!(get(&with_ca, addr).await, Ok("ok".to_owned()));
}

#[tokio::test]
async fn a_server_requiring_a_client_certificate_is_reached_only_with_one() {
    let pki = pki();
    let addr = serve(&pki, true).await;
    let with_ca = ClientTls::new()
        .add_roots_pem(pki.ca.as_bytes())
        .expect("CA PEM");

    let refused = get(&with_ca, addr).await;
    assert!(refused.is_err(), "{refused:?}");

    let with_identity = with_ca
        .client_certificate_pem(pki.client_cert.as_bytes(), pki.client_key.as_bytes())
        .expect("client certificate");
    assert_eq!(get(&with_identity, addr).await, Ok("ok".to_owned()));
}

#[test]
fn a_key_that_does_not_fit_its_certificate_is_refused() {
    let pki = pki();
    let other = KeyPair::generate().expect("key").serialize_pem();
    let tls = ClientTls::new()
        .client_certificate_pem(pki.client_cert.as_bytes(), other.as_bytes())
        .expect("both parse");
    assert!(tls.client_config().is_err());
}
