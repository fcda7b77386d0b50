//! Trust in a cluster's CA bundle file, read again when it changes: a CA
//! rotated (the new CA added to the bundle, then the API server's serving
//! certificate renewed under it) needs no restart of portcullis.
//!
//! The verifier is asked only while a connection is set up, so the request
//! path never looks at it; connections made before a change stay as they
//! were verified, and new ones verify against the bundle as it is now.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// The certificates of a CA bundle file, as the verifier of a cluster's
/// serving certificate.
#[derive(Debug)]
pub struct CaFileTrust {
    path: PathBuf,
    /// The verifier of the file as last read, and the file's modification
    /// time then.
    current: RwLock<(Arc<WebPkiServerVerifier>, Option<SystemTime>)>,
}

impl CaFileTrust {
    /// Trust the certificates in the PEM file at `path` (at least one).
    pub fn open(path: &Path) -> Result<Arc<CaFileTrust>, String> {
        Ok(Arc::new(CaFileTrust {
            path: path.to_path_buf(),
            current: RwLock::new(read(path)?),
        }))
    }

    /// Read the file again if it changed since it was last read. `Ok(true)`:
    /// new connections trust what it holds now. A file that changed and
    /// cannot be used (being written, emptied) is an error, and the trust
    /// before it stays: no certificate is trusted that was not before.
    pub fn reload(&self) -> Result<bool, String> {
        let modified = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok();
        let before = self.current.read().unwrap_or_else(|p| p.into_inner()).1;
        if modified.is_none() || modified == before {
            return Ok(false);
        }
        let fresh = read(&self.path)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(true)
    }

    fn verifier(&self) -> Arc<WebPkiServerVerifier> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).0.clone()
    }
}

/// The verifier of the certificates in the PEM file at `path`, and the
/// file's modification time.
fn read(path: &Path) -> Result<(Arc<WebPkiServerVerifier>, Option<SystemTime>), String> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let pem = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| e.to_string())?;
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    if roots.is_empty() {
        return Err("no certificate found".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| e.to_string())?;
    Ok((verifier, modified))
}

impl ServerCertVerifier for CaFileTrust {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_bundle_is_trusted_anew_and_an_unusable_one_leaves_the_trust_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        let (first, second) = (crate::tls::generate(&[]).unwrap(), crate::tls::generate(&[]).unwrap());
        std::fs::write(&path, &first.ca_pem).unwrap();
        let trust = CaFileTrust::open(&path).unwrap();
        let leaf = |tls: &crate::tls::GeneratedTls| CertificateDer::from_pem_slice(tls.cert_pem.as_bytes()).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let verifies = |tls: &crate::tls::GeneratedTls| {
            trust
                .verify_server_cert(&leaf(tls), &[], &name, &[], UnixTime::now())
                .is_ok()
        };
        assert!(verifies(&first) && !verifies(&second));
        assert_eq!(trust.reload(), Ok(false), "unchanged");

        std::fs::write(&path, "").unwrap();
        bump(&path, 1);
        assert!(trust.reload().is_err(), "an emptied file");
        assert!(verifies(&first), "the trust before stays");

        std::fs::write(&path, format!("{}{}", first.ca_pem, second.ca_pem)).unwrap();
        bump(&path, 2);
        assert_eq!(trust.reload(), Ok(true));
        assert!(verifies(&first) && verifies(&second), "both CAs of a rotation");
        assert!(CaFileTrust::open(&dir.path().join("missing.pem")).is_err());
    }

    /// Move the file's modification time on by `seconds`, so a write within
    /// the same clock tick still reads as a change.
    fn bump(path: &Path, seconds: u64) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(seconds);
        file.set_modified(later).unwrap();
    }
}
