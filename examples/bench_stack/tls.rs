//! Client connections for the watch, audit and training parts: TLS trusting one CA,
//! HTTP/2 or HTTP/1.1 by ALPN, or plain HTTP/1.1.

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpStream;

/// A request sender on one connection.
pub enum Sender {
    /// HTTP/2: many streams on one connection.
    H2(http2::SendRequest<Full<Bytes>>),
    /// HTTP/1.1: one request at a time.
    H1(http1::SendRequest<Full<Bytes>>),
}

impl Sender {
    /// Another handle on the same HTTP/2 connection; `None` for HTTP/1.1.
    pub fn share(&self) -> Option<Sender> {
        match self {
            Sender::H2(tx) => Some(Sender::H2(tx.clone())),
            Sender::H1(_) => None,
        }
    }

    /// Send a request (for HTTP/2, concurrently with others).
    pub async fn send(
        &mut self,
        request: http::Request<Full<Bytes>>,
    ) -> hyper::Result<http::Response<hyper::body::Incoming>> {
        match self {
            Sender::H2(tx) => tx.send_request(request).await,
            Sender::H1(tx) => tx.send_request(request).await,
        }
    }
}

/// Where and how to connect.
#[derive(Clone)]
pub struct Target {
    /// `host:port`.
    pub authority: String,
    /// TLS (`https://`), with this client configuration; `None` for plain HTTP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Target {
    /// From `https://host:port` (trusting `ca`) or `http://host:port`; ALPN
    /// offers only HTTP/2 unless `http1`.
    pub fn new(base: &str, ca: Option<&Path>, http1: bool) -> anyhow::Result<Target> {
        let (scheme, authority) = base
            .split_once("://")
            .ok_or_else(|| anyhow::anyhow!("bad URL {base}"))?;
        let tls = match scheme {
            "https" => Some(Arc::new(client_config(ca, http1)?)),
            _ => None,
        };
        Ok(Target {
            authority: authority.trim_end_matches('/').to_string(),
            tls,
        })
    }

    /// A request for `path` with `token` as its bearer: an absolute URI
    /// over HTTP/2, a path and `Host` over HTTP/1.1 (`http1`).
    pub fn request(
        &self,
        method: http::Method,
        path: &str,
        token: Option<&str>,
        http1: bool,
    ) -> http::request::Builder {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let builder = if http1 {
            http::Request::builder()
                .uri(path)
                .header(http::header::HOST, self.authority.as_str())
        } else {
            http::Request::builder().uri(format!("{scheme}://{}{path}", self.authority))
        };
        let builder = builder.method(method);
        match token {
            Some(token) => builder.header(http::header::AUTHORIZATION, format!("Bearer {token}")),
            None => builder,
        }
    }

    /// Open a connection; HTTP/2 if `http2`.
    pub async fn connect(&self, http2: bool) -> anyhow::Result<Sender> {
        let tcp = TcpStream::connect(&self.authority).await?;
        tcp.set_nodelay(true)?;
        match &self.tls {
            Some(config) => {
                let name = rustls_pki_types::ServerName::try_from("localhost")?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await?;
                handshake(TokioIo::new(tls), http2).await
            }
            None => handshake(TokioIo::new(tcp), http2).await,
        }
    }
}

async fn handshake<T>(io: T, h2: bool) -> anyhow::Result<Sender>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    if h2 {
        let (tx, connection) = http2::Builder::new(TokioExecutor::new()).handshake(io).await?;
        tokio::spawn(connection);
        Ok(Sender::H2(tx))
    } else {
        let (tx, connection) = http1::handshake(io).await?;
        tokio::spawn(connection);
        Ok(Sender::H1(tx))
    }
}

fn client_config(ca: Option<&Path>, http1: bool) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let ca = ca.ok_or_else(|| anyhow::anyhow!("an https URL needs --ca"))?;
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = if http1 {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec()]
    };
    Ok(config)
}
