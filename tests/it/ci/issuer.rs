//! A CI token issuer for the tests, shaped like GitHub Actions': https on
//! 127.0.0.1 under a CA of its own (portcullis trusts it through `[ci]
//! ca_file`, as it would a company's GitLab), a discovery document and a
//! key set, and tokens with GitHub's claims signed RS256 or ES256. It can
//! rotate its keys and mint the tokens a real issuer never would (forged,
//! unsigned, HMAC, under an unpublished key).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A signing key: its id, algorithm, private half and public JWK.
#[derive(Clone)]
pub struct Key {
    pub kid: String,
    alg: Algorithm,
    private: EncodingKey,
    jwk: Value,
}

/// RSA keys take seconds to make in a debug build: a few are made once
/// per test binary and handed out in turn.
fn rsa_der(index: usize) -> (Vec<u8>, Value) {
    static POOL: OnceLock<Vec<(Vec<u8>, Value)>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        (0..3)
            .map(|_| {
                let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
                let der = key.to_pkcs1_der().unwrap().as_bytes().to_vec();
                let n = URL_SAFE_NO_PAD.encode(key.n().to_bytes_be());
                let e = URL_SAFE_NO_PAD.encode(key.e().to_bytes_be());
                (der, json!({"kty": "RSA", "n": n, "e": e}))
            })
            .collect()
    });
    pool[index % pool.len()].clone()
}

impl Key {
    /// An RS256 key (the `index`th of the pool) named `kid`.
    pub fn rsa(kid: &str, index: usize) -> Key {
        let (der, mut jwk) = rsa_der(index);
        jwk["kid"] = json!(kid);
        jwk["alg"] = json!("RS256");
        jwk["use"] = json!("sig");
        Key {
            kid: kid.into(),
            alg: Algorithm::RS256,
            private: EncodingKey::from_rsa_der(&der),
            jwk,
        }
    }

    /// A fresh ES256 key named `kid`.
    pub fn ec(kid: &str) -> Key {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let point = pair.public_key().as_ref();
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        });
        Key {
            kid: kid.into(),
            alg: Algorithm::ES256,
            private: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk,
        }
    }

    /// `claims` signed with this key, its header naming `kid`.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, claims, &self.private).unwrap()
    }

    /// `claims` signed with this key under its own id.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

/// `claims` with `alg: none` and no signature.
pub fn unsigned(claims: &Value) -> String {
    let encode = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.", encode(&json!({"alg": "none", "typ": "JWT"})), encode(claims))
}

/// `claims` signed HS256 with `secret`, naming key `kid`.
pub fn hmac(kid: &str, secret: &[u8], claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret)).unwrap()
}

/// The running issuer.
pub struct CiIssuer {
    /// Its issuer URL, `https://127.0.0.1:<port>`.
    pub issuer: String,
    /// The CA its certificate is signed by.
    pub ca_file: PathBuf,
    /// The keys it publishes now.
    keys: Arc<Mutex<Vec<Key>>>,
    /// How often its key set was fetched (or asked for while failing).
    pub key_fetches: Arc<AtomicUsize>,
    /// While set, its key set answers 503.
    pub failing: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

impl CiIssuer {
    /// Serve on a free loopback port until the test ends, publishing an
    /// RS256 key `rsa-1` and an ES256 key `ec-1`.
    pub async fn start() -> CiIssuer {
        let dir = tempfile::tempdir().unwrap();
        let tls = portcullis::tls::generate(&[]).unwrap();
        let ca_file = dir.path().join("ci-issuer-ca.pem");
        std::fs::write(&ca_file, &tls.ca_pem).unwrap();
        let mut config = portcullis::tls::server_config(&tls.cert_pem, &tls.key_pem).unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("https://{}", listener.local_addr().unwrap());
        let fake = CiIssuer {
            issuer: issuer.clone(),
            ca_file,
            keys: Arc::new(Mutex::new(vec![Key::rsa("rsa-1", 0), Key::ec("ec-1")])),
            key_fetches: Arc::new(AtomicUsize::new(0)),
            failing: Arc::new(AtomicBool::new(false)),
            _dir: dir,
        };
        let (keys, fetches, failing) = (fake.keys.clone(), fake.key_fetches.clone(), fake.failing.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, issuer, keys, fetches, failing) = (
                    acceptor.clone(),
                    issuer.clone(),
                    keys.clone(),
                    fetches.clone(),
                    failing.clone(),
                );
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let body = answer(&issuer, &keys, &fetches, &failing, request.uri().path());
                        async move { Ok::<_, std::convert::Infallible>(body) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        fake
    }

    /// The published key `kid`.
    pub fn key(&self, kid: &str) -> Key {
        let keys = self.keys.lock().unwrap();
        keys.iter().find(|k| k.kid == kid).cloned().expect("a published key")
    }

    /// Publish `keys` instead of the current ones (a key rotation).
    pub fn publish(&self, keys: Vec<Key>) {
        *self.keys.lock().unwrap() = keys;
    }

    /// The claims GitHub Actions puts in a job's token for `acme/shop`'s
    /// main branch, for `audience`, issued now; `run_id` tells jobs apart.
    pub fn github_claims(&self, audience: &str, run_id: &str) -> Value {
        let now = chrono::Utc::now().timestamp();
        json!({
            "iss": self.issuer,
            "aud": audience,
            "sub": "repo:acme/shop:ref:refs/heads/main",
            "jti": uuid::Uuid::new_v4().to_string(),
            "iat": now, "nbf": now - 5, "exp": now + 300,
            "repository": "acme/shop", "repository_owner": "acme", "repository_id": "4242",
            "ref": "refs/heads/main", "ref_type": "branch", "sha": "8f2e1c0",
            "workflow": "deploy", "workflow_ref": "acme/shop/.github/workflows/deploy.yml@refs/heads/main",
            "job_workflow_ref": "acme/shop/.github/workflows/deploy.yml@refs/heads/main",
            "event_name": "push", "actor": "ana", "environment": "prod",
            "run_id": run_id, "run_number": "7", "run_attempt": "1", "runner_environment": "github-hosted",
        })
    }
}

fn answer(
    issuer: &str,
    keys: &Mutex<Vec<Key>>,
    fetches: &AtomicUsize,
    failing: &AtomicBool,
    path: &str,
) -> http::Response<Full<Bytes>> {
    let body = match path {
        "/.well-known/openid-configuration" => json!({
            "issuer": issuer,
            "jwks_uri": format!("{issuer}/.well-known/jwks"),
            "subject_types_supported": ["public", "pairwise"],
            "response_types_supported": ["id_token"],
            "claims_supported": ["sub", "aud", "exp", "iat", "iss", "jti", "nbf", "ref", "repository", "run_id"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            "scopes_supported": ["openid"],
        }),
        "/.well-known/jwks" => {
            fetches.fetch_add(1, Ordering::SeqCst);
            if failing.load(Ordering::SeqCst) {
                return http::Response::builder()
                    .status(503)
                    .body(Full::new(Bytes::new()))
                    .unwrap();
            }
            let keys: Vec<Value> = keys.lock().unwrap().iter().map(|k| k.jwk.clone()).collect();
            json!({ "keys": keys })
        }
        _ => {
            return http::Response::builder()
                .status(404)
                .body(Full::new(Bytes::new()))
                .unwrap()
        }
    };
    http::Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}
