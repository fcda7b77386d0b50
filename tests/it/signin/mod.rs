//! Sign-in with an OpenID Connect provider (issue 18, items 1, 2 and 8):
//! against a real one (npm `oidc-provider`, `tests/oidc/provider.mjs`),
//! driven by a raw client ([`Visitor`]) and by headless Chromium
//! ([`browser`]); and against a hand-built issuer ([`fake_issuer`]) that
//! mints the ID tokens a certified provider never would ([`tokens`]).

mod api;
pub mod browser;
mod cli_login;
mod console;
mod console_actions;
mod console_audit;
mod fake_issuer;
mod flow;
mod groups;
mod kubectl_plugin;
mod refusals;
mod tokens;

use crate::harness::Portcullis;
use portcullis::config::{Config, OidcConfig};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// portcullis's client at the provider.
pub const CLIENT_ID: &str = "portcullis";
/// Its secret (a test value).
pub const CLIENT_SECRET: &str = "test-client-secret-not-a-real-one";

/// The real provider, a child process on 127.0.0.1.
pub struct Idp {
    child: Child,
    /// Its issuer URL.
    pub issuer: String,
}

impl Idp {
    /// Start the provider with portcullis at `port` as its one client.
    pub fn start(port: u16) -> Idp {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests");
        let settings = serde_json::json!({
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "redirect_uris": [format!("https://127.0.0.1:{port}/login/callback")],
        });
        let mut child = Command::new("node")
            .arg("oidc/provider.mjs")
            .arg(settings.to_string())
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node runs tests/oidc/provider.mjs (scripts/setup installs oidc-provider)");
        let mut line = String::new();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        // Whatever it prints later is drained: a closed pipe would kill it
        // at its next console line (EPIPE).
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let started: serde_json::Value = serde_json::from_str(&line).expect("the provider says its issuer");
        Idp {
            child,
            issuer: started["issuer"].as_str().unwrap().to_string(),
        }
    }

    /// Replace the provider's signing key, as a provider rotating keys.
    pub async fn rotate(&self) {
        let answer = http_client()
            .post(format!("{}/test/rotate", self.issuer))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 204);
    }

    /// Put test person `login` in exactly `groups` at the provider.
    pub async fn set_groups(&self, login: &str, groups: &[&str]) {
        let answer = http_client()
            .post(format!("{}/test/groups", self.issuer))
            .header("content-type", "application/json")
            .body(serde_json::json!({"login": login, "groups": groups}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 204);
    }
}

impl Drop for Idp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free port on 127.0.0.1: portcullis's callback URL must be registered
/// at the provider before portcullis starts.
pub use crate::support::free_port;

/// portcullis on `port`, signing people in with `issuer`; `adjust` edits
/// `[oidc]`.
pub async fn portcullis(issuer: &str, port: u16, adjust: impl FnOnce(&mut OidcConfig)) -> Portcullis {
    portcullis_configured(issuer, port, |config| adjust(config.oidc.as_mut().unwrap())).await
}

/// [`portcullis`], with `adjust` editing the whole configuration (its
/// `[oidc]` already set).
pub async fn portcullis_configured(issuer: &str, port: u16, adjust: impl FnOnce(&mut Config)) -> Portcullis {
    let mut oidc = OidcConfig {
        issuer: issuer.into(),
        client_id: CLIENT_ID.into(),
        client_secret_file: PathBuf::new(),
        scopes: vec!["groups".into()],
        login_claim: None,
        groups_claim: "groups".into(),
        allowed_email_domains: Vec::new(),
        login_domains: Vec::new(),
        create_people: true,
        ca_file: None,
    };
    Portcullis::start_with(move |config| {
        // Beside the harness's other files, so that it goes with them.
        oidc.client_secret_file = Portcullis::folder_of(config).join("oidc-client-secret");
        std::fs::write(&oidc.client_secret_file, format!("{CLIENT_SECRET}\n")).unwrap();
        config.listen = format!("127.0.0.1:{port}");
        config.public_url = format!("https://127.0.0.1:{port}");
        config.oidc = Some(oidc);
        adjust(config);
    })
    .await
}

/// A client without a browser: follows nothing by itself, keeps cookies
/// by name (portcullis's and the provider's names differ), trusts
/// portcullis's CA.
pub struct Visitor {
    http: reqwest::Client,
    /// The cookies it holds.
    pub cookies: Mutex<BTreeMap<String, String>>,
    base: String,
}

/// One answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
    pub audit_id: Option<String>,
}

impl Visitor {
    /// A visitor of `env`.
    pub fn new(env: &Portcullis) -> Visitor {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls_pki_types::pem::PemObject::from_pem_slice(env.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Visitor {
            http,
            cookies: Mutex::new(BTreeMap::new()),
            base: format!("https://{}", env.addr),
        }
    }

    /// GET `url` (or a portcullis path).
    pub async fn get(&self, url: &str) -> Answer {
        self.send(reqwest::Method::GET, url, None).await
    }

    /// POST a form to `url`.
    pub async fn post(&self, url: &str, form: &str) -> Answer {
        self.send(reqwest::Method::POST, url, Some(form.to_string())).await
    }

    async fn send(&self, method: reqwest::Method, url: &str, form: Option<String>) -> Answer {
        let url = if url.starts_with('/') {
            format!("{}{url}", self.base)
        } else {
            url.to_string()
        };
        let cookie = self
            .cookies
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut request = self.http.request(method, &url).header("cookie", cookie);
        if let Some(form) = form {
            request = request
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form);
        }
        let response = request.send().await.expect("request sent");
        let header = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap().to_string());
        let (location, audit_id) = (header("location"), header("audit-id"));
        let location = location.map(|l| absolute(&url, &l));
        for set in response.headers().get_all("set-cookie") {
            self.keep(set.to_str().unwrap());
        }
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        Answer {
            status,
            location,
            body,
            audit_id,
        }
    }

    fn keep(&self, set_cookie: &str) {
        let pair = set_cookie.split(';').next().unwrap_or_default();
        let Some((name, value)) = pair.split_once('=') else {
            return;
        };
        let mut cookies = self.cookies.lock().unwrap();
        let expired = set_cookie.to_ascii_lowercase().contains("max-age=0") || value.is_empty();
        if expired {
            cookies.remove(name.trim());
        } else {
            cookies.insert(name.trim().to_string(), value.to_string());
        }
    }

    /// Sign in at the provider as `person` from portcullis's `/login`,
    /// stopping before portcullis's callback: its URL.
    pub async fn to_callback(&self, person: &str) -> String {
        let to_provider = self.get("/login?next=/approvals").await;
        assert_eq!(to_provider.status, 303, "{to_provider:?}");
        let mut next = to_provider.location.unwrap();
        loop {
            let answer = self.get(&next).await;
            if answer.status == 200 && answer.body.contains("id=\"login\"") {
                let uid_path = next.clone();
                let login = self
                    .post(&format!("{uid_path}/login"), &format!("login={person}"))
                    .await;
                next = login
                    .location
                    .clone()
                    .unwrap_or_else(|| panic!("the provider signed {person} in: {login:?}"));
                continue;
            }
            let location = answer
                .location
                .clone()
                .unwrap_or_else(|| panic!("a redirect: {answer:?}"));
            if location.contains("/login/callback") {
                return location;
            }
            next = location;
        }
    }

    /// Sign in as `person` all the way: the callback's answer.
    pub async fn sign_in(&self, person: &str) -> Answer {
        let callback = self.to_callback(person).await;
        self.get(&callback).await
    }
}

/// `location` made absolute against `url`'s origin.
fn absolute(url: &str, location: &str) -> String {
    if !location.starts_with('/') {
        return location.to_string();
    }
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let origin_end = url[scheme_end..].find('/').map_or(url.len(), |i| scheme_end + i);
    format!("{}{location}", &url[..origin_end])
}

/// The CSRF token in a page of a signed-in visitor's session.
pub fn csrf_of(page: &str) -> String {
    let after = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .expect("a form with its CSRF token");
    after.split('"').next().unwrap().to_string()
}

/// A plain HTTP client (for the providers on loopback).
pub fn http_client() -> reqwest::Client {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The query parameter `name` of `url`.
pub fn param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}
