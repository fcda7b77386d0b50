//! The audit webhook authenticated by a client certificate instead of a
//! bearer token: a certificate the cluster's own webhook CA issued is let
//! in; none, one from another cluster's webhook CA, or one from an unknown
//! CA is not.

use crate::harness::{Portcullis, CLUSTER};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use std::sync::Arc;

/// A CA: its PEM, and what signs with it.
fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    (pem, Issuer::new(params, key))
}

/// A client certificate `issuer` signs: its DER and its key's.
fn client(issuer: &Issuer<'static, KeyPair>) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver-audit");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (cert.der().clone(), der)
}

/// POST an empty event list to the webhook of `CLUSTER`, presenting
/// `identity`'s certificate if given: the status, or `None` when the TLS
/// handshake itself is refused.
async fn post(env: &Portcullis, identity: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>) -> Option<u16> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::pem::PemObject::pem_slice_iter(env.ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let tls = match identity {
        Some((cert, key)) => builder.with_client_auth_cert(vec![cert], key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    let body = json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": []}).to_string();
    let request = http::Request::post(format!("https://{}/apiserver-audit/{CLUSTER}", env.addr))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = client.request(request).await.ok()?;
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    Some(status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_certificate_from_the_clusters_own_webhook_ca_lets_the_api_server_deliver_its_audit() {
    let dir = tempfile::tempdir().unwrap();
    let (own_pem, own) = ca("sim webhook CA");
    let (other_pem, other) = ca("other cluster's webhook CA");
    let (_, unknown) = ca("nobody's CA");
    let (own_file, other_file) = (dir.path().join("own.pem"), dir.path().join("other.pem"));
    std::fs::write(&own_file, own_pem).unwrap();
    std::fs::write(&other_file, other_pem).unwrap();
    let env = Portcullis::start_with(|config| {
        config.clusters[0].audit_webhook_client_ca_file = Some(own_file);
        let mut second = config.clusters[0].clone();
        second.name = "other".into();
        second.audit_webhook_client_ca_file = Some(other_file);
        config.clusters.push(second);
    })
    .await;
    assert_eq!(
        post(&env, Some(client(&own))).await,
        Some(200),
        "its own CA's certificate"
    );
    assert_eq!(post(&env, None).await, Some(401), "no certificate, no token");
    assert_eq!(
        post(&env, Some(client(&other))).await,
        Some(401),
        "a certificate the other cluster's webhook CA issued"
    );
    assert_ne!(post(&env, Some(client(&unknown))).await, Some(200), "an unknown CA's");
    // The pages and the API still work without a certificate.
    let health = env.raw().send(http::Method::GET, "/healthz", &[], Vec::new()).await;
    assert_eq!(health.status, 200);
    env.stop().await;
}
