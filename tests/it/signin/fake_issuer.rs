//! A hand-built OpenID issuer on 127.0.0.1 that answers the token request
//! with whatever ID token the test hands it: forged, expired, for another
//! audience or issuer or nonce, unsigned, or signed with an unpublished
//! key, which a certified provider never mints. It publishes one ES256 key
//! (ring signs; `openidconnect` verifies ES256 like RS256).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A signing key and its key id.
pub struct Signer {
    key: EcdsaKeyPair,
    /// The `kid` its tokens carry.
    pub kid: String,
}

impl Signer {
    /// A fresh P-256 key named `kid`.
    pub fn new(kid: &str) -> Signer {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        Signer { key, kid: kid.into() }
    }

    /// The public key as a JWK.
    fn jwk(&self) -> Value {
        let point = self.key.public_key().as_ref();
        json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        })
    }

    /// `claims` signed ES256 under `kid` (which may name another key).
    pub fn sign(&self, kid: &str, claims: &Value) -> String {
        let header = json!({"alg": "ES256", "typ": "JWT", "kid": kid});
        let input = format!("{}.{}", encode(&header), encode(claims));
        let signature = self
            .key
            .sign(&ring::rand::SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }
}

/// `claims` with `alg: none` and no signature.
pub fn unsigned(claims: &Value) -> String {
    format!("{}.{}.", encode(&json!({"alg": "none", "typ": "JWT"})), encode(claims))
}

fn encode(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// The running issuer.
pub struct FakeIssuer {
    /// Its issuer URL.
    pub issuer: String,
    /// The key it publishes.
    pub signer: Arc<Signer>,
    next: Arc<Mutex<String>>,
    /// How often its key set was fetched.
    pub key_fetches: Arc<AtomicUsize>,
}

impl FakeIssuer {
    /// Serve on a free loopback port until the test ends.
    pub async fn start() -> FakeIssuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let fake = FakeIssuer {
            issuer: issuer.clone(),
            signer: Arc::new(Signer::new("published")),
            next: Arc::new(Mutex::new(String::new())),
            key_fetches: Arc::new(AtomicUsize::new(0)),
        };
        let (signer, next, fetches) = (fake.signer.clone(), fake.next.clone(), fake.key_fetches.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (issuer, signer, next, fetches) = (issuer.clone(), signer.clone(), next.clone(), fetches.clone());
                let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let body = answer(&issuer, &signer, &next, &fetches, request.uri().path());
                    async move { Ok::<_, std::convert::Infallible>(body) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        fake
    }

    /// The ID token the next token request gets.
    pub fn will_answer(&self, id_token: String) {
        *self.next.lock().unwrap() = id_token;
    }
}

fn answer(
    issuer: &str,
    signer: &Signer,
    next: &Mutex<String>,
    fetches: &AtomicUsize,
    path: &str,
) -> http::Response<Full<Bytes>> {
    let body = match path {
        "/.well-known/openid-configuration" => json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/auth"),
            "token_endpoint": format!("{issuer}/token"),
            "jwks_uri": format!("{issuer}/jwks"),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        }),
        "/jwks" => {
            fetches.fetch_add(1, Ordering::SeqCst);
            json!({"keys": [signer.jwk()]})
        }
        "/token" => json!({
            "access_token": "not-used", "token_type": "Bearer", "expires_in": 60,
            "id_token": next.lock().unwrap().clone(),
        }),
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
