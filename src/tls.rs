//! Generated TLS material and rustls server configuration.
//!
//! portcullis in the demo and the tests serves TLS with a certificate minted
//! at start-up (`portcullis certs` writes one to files): a fresh CA signs a
//! serving certificate for `localhost`, `127.0.0.1` and any extra names, so
//! nothing secret is ever committed and every test run trusts only its own
//! CA.

mod trust;
pub use trust::CaFileTrust;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// A CA and a serving certificate it signed, all PEM-encoded.
#[derive(Debug, Clone)]
pub struct GeneratedTls {
    /// The CA certificate clients trust.
    pub ca_pem: String,
    /// The serving certificate (leaf only).
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

/// Why a server configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate PEM held no certificate or could not be parsed.
    #[error("invalid certificate PEM: {0}")]
    Certificate(String),
    /// The key PEM held no private key or could not be parsed.
    #[error("invalid private key PEM: {0}")]
    PrivateKey(String),
    /// rustls refused the certificate/key pair.
    #[error("rustls refused the certificate or key")]
    Rustls(#[from] rustls::Error),
}

/// The certificates a client presented on its connection (leaf first), put
/// into each of its requests' extensions when it presented any.
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// A verifier of client certificates issued by the CAs in `pem_files`,
/// which accepts clients without one too (they authenticate otherwise);
/// `None` when there are no files.
pub fn optional_client_verifier(
    pem_files: &[&std::path::Path],
) -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, TlsError> {
    if pem_files.is_empty() {
        return Ok(None);
    }
    let mut roots = rustls::RootCertStore::empty();
    for file in pem_files {
        let pem = std::fs::read(file).map_err(|e| TlsError::Certificate(format!("{}: {e}", file.display())))?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| TlsError::Certificate(format!("{}: {e}", file.display())))?;
            roots
                .add(cert)
                .map_err(|e| TlsError::Certificate(format!("{}: {e}", file.display())))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map(Some)
        .map_err(|e| TlsError::Certificate(e.to_string()))
}

/// The system's trusted roots and, when `ca_file` names one, the CA
/// certificates (PEM) in it: for a peer behind a private CA. The error says
/// what is wrong with the file, for the caller to name its setting.
pub fn system_roots_and(ca_file: Option<&std::path::Path>) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    // Certificates the system cannot parse are skipped, as curl does.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let Some(path) = ca_file else {
        return Ok(roots);
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if roots.add_parsable_certificates(certs).0 == 0 {
        return Err("no certificate in it".into());
    }
    Ok(roots)
}

/// Mint a CA and a serving certificate for `localhost`, `127.0.0.1` and
/// `names` (DNS names or IP addresses), signed by that CA.
pub fn generate(names: &[&str]) -> Result<GeneratedTls, rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "portcullis generated CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut sans = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    sans.extend(names.iter().map(|n| n.to_string()));
    sans.dedup();
    let mut params = CertificateParams::new(sans)?;
    params.distinguished_name.push(DnType::CommonName, "localhost");
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;

    Ok(GeneratedTls {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A rustls server configuration for `cert_pem` (leaf first, then any
/// chain) and `key_pem`, offering ALPN `h2` then `http/1.1`.
pub fn server_config(cert_pem: &str, key_pem: &str) -> Result<rustls::ServerConfig, TlsError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificate(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Certificate("no CERTIFICATE block".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| TlsError::PrivateKey(e.to_string()))?;
    // An explicit provider, so the process-wide default (which another crate
    // may install differently) does not matter.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificate_builds_a_server_config_with_h2_first() {
        let tls = generate(&["sim.example"]).unwrap();
        assert!(tls.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(tls.ca_pem, tls.cert_pem);
        let config = server_config(&tls.cert_pem, &tls.key_pem).unwrap();
        assert_eq!(config.alpn_protocols[0], b"h2");
        assert_eq!(config.alpn_protocols[1], b"http/1.1");
    }

    #[test]
    fn a_key_that_is_not_pem_is_refused() {
        let tls = generate(&[]).unwrap();
        let err = server_config(&tls.cert_pem, "not a key").unwrap_err();
        assert!(matches!(err, TlsError::PrivateKey(_)), "{err}");
    }
}
