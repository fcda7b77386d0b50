//! The HTTP client `openidconnect` talks to the identity provider with:
//! the hyper-rustls client the rest of portcullis uses (ring, the system's
//! roots or `[oidc] ca_file`), bounded in size and time, so the crate needs
//! no HTTP stack of its own.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The largest answer read from the provider (discovery, keys, tokens).
const ANSWER_LIMIT: usize = 1024 * 1024;
/// How long one call to the provider may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to the provider failed (it is down, slow, or answered
/// something unreadable).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpError(pub String);

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot use the identity provider's CA bundle {path}: {message}")]
pub struct CaError {
    /// The file.
    pub path: String,
    /// Why.
    pub message: String,
}

/// A pooled client to the provider; cheap to clone.
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl HttpClient {
    /// A client trusting `ca_file`'s CAs, or the system's roots.
    pub fn new(ca_file: Option<&Path>) -> Result<HttpClient, CaError> {
        let roots = roots(ca_file)?;
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| CaError {
                path: String::new(),
                message: e.to_string(),
            })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // Plain HTTP is for a loopback issuer only (the configuration
        // refuses any other http:// issuer).
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        Ok(HttpClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// Send `request`, reading at most [`ANSWER_LIMIT`] within [`TIMEOUT`].
    pub async fn send(&self, request: http::Request<Vec<u8>>) -> Result<http::Response<Vec<u8>>, HttpError> {
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, Full::new(Bytes::from(body)));
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| HttpError(format!("cannot reach it: {}", super::provider::chain(&e))))?;
            let (parts, body) = response.into_parts();
            let bytes = Limited::new(body, ANSWER_LIMIT)
                .collect()
                .await
                .map_err(|e| HttpError(format!("its answer broke off or was too large: {e}")))?
                .to_bytes();
            Ok(http::Response::from_parts(parts, bytes.to_vec()))
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| HttpError(format!("it did not answer within {} s", TIMEOUT.as_secs())))?
    }
}

fn roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, CaError> {
    let mut roots = rustls::RootCertStore::empty();
    let Some(path) = ca_file else {
        // Certificates the system cannot parse are skipped, as curl does.
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        return Ok(roots);
    };
    let error = |message: String| CaError {
        path: path.display().to_string(),
        message,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(e.to_string()))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(error("no certificate in it".into()));
    }
    Ok(roots)
}
