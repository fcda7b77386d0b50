//! Who an OAuth client is. A `client_id` that is an https URL names a
//! Client ID Metadata Document (draft-ietf-oauth-client-id-metadata-document):
//! the client publishes its name and redirect URIs there, and portcullis
//! fetches it ([`fetch`]) and keeps it for an hour. Any other `client_id` was
//! given by Dynamic Client Registration (RFC 7591, [`super::register`]) and
//! is looked up in the store. Either way, a client with a redirect URI that
//! [`redirect::acceptable`] refuses does not authorise at all.

mod fetch;

use super::error::OAuthError;
use super::redirect;
use crate::audit::refusal::Refusal;
use crate::config::Config;
use crate::document::{self, Bounds};
use crate::store::{RegisteredClient, Store, StoreError};
use chrono::Utc;
use dashmap::DashMap;
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long a fetched metadata document is reused.
const CACHE_FOR: Duration = Duration::from_secs(3600);
/// The most documents kept at once: anyone can make portcullis fetch one.
const CACHE_SIZE: usize = 1000;
/// The longest client name accepted.
pub const MAX_NAME_CHARS: usize = 200;

/// An OAuth client, as the authorize and token endpoints see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMetadata {
    /// The metadata document's URL, or the registered id.
    pub client_id: String,
    /// The name it gives itself, for the consent page ("" when it gave none:
    /// the page shows the client_id's host).
    pub client_name: String,
    /// The redirect URIs it declared, every one acceptable.
    pub redirect_uris: Vec<String>,
    /// Its home page, when the document names an https one.
    pub client_uri: Option<String>,
    /// How it identified itself.
    pub kind: ClientKind,
}

/// How a client identified itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// With the URL of its Client ID Metadata Document.
    Metadata,
    /// With the id Dynamic Client Registration gave it.
    Registered,
}

/// Why a client cannot be used, in words for the plain-text page of the
/// authorize endpoint (or the token endpoint's `invalid_client`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// No registered client has this id.
    #[error(
        "portcullis knows no client {0:?}: a client registers first, or uses the https URL of its metadata document as its client_id"
    )]
    Unknown(String),
    /// The metadata document could not be fetched, or is not acceptable.
    #[error("the client's metadata document {url:?} {reason}")]
    Document {
        /// The client_id.
        url: String,
        /// Completes the sentence ("is refused: …", "could not be fetched: …").
        reason: String,
    },
    /// A registered client whose metadata is not acceptable (any more).
    #[error("the client {client_id:?} is refused: {reason}")]
    Refused {
        /// The client_id.
        client_id: String,
        /// Why.
        reason: String,
    },
    /// The store could not be asked.
    #[error("portcullis cannot reach its store; try again")]
    Unavailable,
}

impl ClientError {
    /// The audit row's refusal.
    pub fn refusal(&self) -> Refusal {
        match self {
            ClientError::Unavailable => Refusal::CredentialsUnavailable,
            _ => Refusal::OAuthClientRefused,
        }
    }

    /// The token endpoint's error: `invalid_client`, or 503.
    pub fn oauth(&self) -> OAuthError {
        match self {
            ClientError::Unavailable => OAuthError::unavailable(),
            other => OAuthError::invalid_client(other.to_string()),
        }
    }
}

/// Resolves client_ids; built once, shared by the OAuth endpoints.
pub struct Clients {
    store: Store,
    fetcher: fetch::Fetcher,
    cache: DashMap<String, (Instant, ClientMetadata)>,
    unused_client_ttl: Duration,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("fetcher", &self.fetcher)
            .field("cached", &self.cache.len())
            .finish()
    }
}

impl Clients {
    /// Clients trusting the system's roots and `[oauth]
    /// client_metadata_ca_file` for metadata documents. `Err` says why the
    /// CA file cannot be used.
    pub fn new(config: &Config, store: Store) -> Result<Clients, String> {
        let oauth = &config.oauth;
        let fetcher = fetch::Fetcher::new(
            oauth.client_metadata_ca_file.as_deref(),
            oauth.insecure_test_only_fetch_client_metadata_from_private_addresses,
        )?;
        Ok(Clients {
            store,
            fetcher,
            cache: DashMap::new(),
            unused_client_ttl: oauth.unused_client_ttl,
        })
    }

    /// The client `client_id`: its metadata document (fetched, or reused
    /// within the hour) or its registration (noting that it was used).
    pub async fn resolve(&self, client_id: &str) -> Result<ClientMetadata, ClientError> {
        match client_id.starts_with("https://") {
            true => self.metadata_document(client_id).await,
            false => self.registered(client_id).await,
        }
    }

    /// Whether resolving `client_id` would fetch its metadata document (not
    /// held from a fetch within the hour): what a per-client budget guards,
    /// since anyone may name any client.
    pub fn would_fetch(&self, client_id: &str) -> bool {
        client_id.starts_with("https://")
            && self
                .cache
                .get(client_id)
                .is_none_or(|entry| entry.0.elapsed() >= CACHE_FOR)
    }

    /// Delete the registered clients unused for `[oauth]
    /// unused_client_ttl`; returns how many. Blocking (the store).
    pub fn sweep_unused(&self) -> Result<usize, StoreError> {
        let age = chrono::TimeDelta::from_std(self.unused_client_ttl).unwrap_or(chrono::TimeDelta::MAX);
        let cutoff = Utc::now()
            .checked_sub_signed(age)
            .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC);
        self.store.delete_oauth_clients_unused_since(cutoff)
    }

    /// The store, for registration.
    pub(super) fn store(&self) -> &Store {
        &self.store
    }

    async fn metadata_document(&self, url: &str) -> Result<ClientMetadata, ClientError> {
        if let Some(cached) = self.cache.get(url).filter(|entry| entry.0.elapsed() < CACHE_FOR) {
            return Ok(cached.1.clone());
        }
        let refused = |reason: String| ClientError::Document {
            url: url.to_string(),
            reason,
        };
        let target = fetch::Target::parse(url).map_err(|e| refused(format!("is not a usable URL: {e}")))?;
        let bytes = self.fetcher.get(&target).await.map_err(refused)?;
        let client = from_document(url, &bytes).map_err(|e| refused(format!("is refused: {e}")))?;
        self.remember(&client);
        Ok(client)
    }

    fn remember(&self, client: &ClientMetadata) {
        if self.cache.len() >= CACHE_SIZE {
            self.cache.retain(|_, entry| entry.0.elapsed() < CACHE_FOR);
        }
        // Still full: the oldest goes, so that documents fetched to fill the
        // cache keep no other client out of it for good (then every
        // authorize naming that client would fetch, and spend its budget).
        if self.cache.len() >= CACHE_SIZE {
            let oldest = self
                .cache
                .iter()
                .min_by_key(|entry| entry.value().0)
                .map(|entry| entry.key().clone());
            if let Some(oldest) = oldest {
                self.cache.remove(&oldest);
            }
        }
        self.cache
            .insert(client.client_id.clone(), (Instant::now(), client.clone()));
    }

    async fn registered(&self, client_id: &str) -> Result<ClientMetadata, ClientError> {
        let (store, id) = (self.store.clone(), client_id.to_string());
        // Not noted as used here: anyone may name a client at the
        // authorize page, signed in or not, and that would keep a flood of
        // registrations out of the unused clients' bound. Issuing it
        // tokens notes the use.
        let found = tokio::task::spawn_blocking(move || store.find_oauth_client(&id))
            .await
            .map_err(|_| ClientError::Unavailable)?
            .map_err(|error| {
                tracing::error!(%error, "cannot look up a registered OAuth client");
                ClientError::Unavailable
            })?;
        let client = found.ok_or_else(|| ClientError::Unknown(shown(client_id)))?;
        registered_metadata(client)
    }
}

/// A registered client, refused if it holds a redirect URI that the rules
/// (which may have tightened since it registered) refuse.
fn registered_metadata(client: RegisteredClient) -> Result<ClientMetadata, ClientError> {
    if let Err(reason) = redirect_uris(&Value::from(client.redirect_uris.clone())) {
        return Err(ClientError::Refused {
            client_id: client.client_id,
            reason,
        });
    }
    Ok(ClientMetadata {
        client_id: client.client_id,
        client_name: client.client_name,
        redirect_uris: client.redirect_uris,
        client_uri: None,
        kind: ClientKind::Registered,
    })
}

/// A client_id as shown in a message: at most 200 characters.
fn shown(client_id: &str) -> String {
    client_id.chars().take(200).collect()
}

/// The client a metadata document fetched from `url` describes; `Err`
/// completes "the document is refused: …".
fn from_document(url: &str, bytes: &[u8]) -> Result<ClientMetadata, String> {
    let document = document::parse_json(bytes, Bounds::body(fetch::LIMIT)).map_err(|e| format!("it {e}"))?;
    let Value::Object(fields) = &document else {
        return Err("it is not a JSON object".into());
    };
    if fields.get("client_id").and_then(Value::as_str) != Some(url) {
        return Err("its client_id is not exactly its own URL".into());
    }
    if fields.contains_key("client_secret") {
        return Err("it holds a client_secret, which a metadata document may not".into());
    }
    token_endpoint_auth_method(fields.get("token_endpoint_auth_method"))?;
    let redirect_uris = redirect_uris(fields.get("redirect_uris").unwrap_or(&Value::Null))?;
    Ok(ClientMetadata {
        client_id: url.to_string(),
        client_name: client_name(fields.get("client_name"))?,
        redirect_uris,
        client_uri: fields
            .get("client_uri")
            .and_then(Value::as_str)
            .filter(|uri| uri.starts_with("https://") && redirect::split(uri).is_ok())
            .map(str::to_string),
        kind: ClientKind::Metadata,
    })
}

/// `token_endpoint_auth_method`: absent, or `none` (a public client:
/// portcullis keeps no client secrets and checks PKCE instead).
pub(super) fn token_endpoint_auth_method(value: Option<&Value>) -> Result<(), String> {
    match value {
        None => Ok(()),
        Some(Value::String(method)) if method == "none" => Ok(()),
        Some(other) => Err(format!(
            "its token_endpoint_auth_method is {}; only \"none\" is accepted (PKCE, no client secret)",
            shown(&other.to_string())
        )),
    }
}

/// `client_name`: absent, or a string of at most [`MAX_NAME_CHARS`]
/// without control characters (it is shown to a person).
pub(super) fn client_name(value: Option<&Value>) -> Result<String, String> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(name)) if name.chars().count() > MAX_NAME_CHARS => {
            Err(format!("its client_name is longer than {MAX_NAME_CHARS} characters"))
        }
        Some(Value::String(name)) if name.chars().any(char::is_control) => {
            Err("its client_name holds control characters".into())
        }
        Some(Value::String(name)) => Ok(name.trim().to_string()),
        Some(_) => Err("its client_name is not a string".into()),
    }
}

/// `redirect_uris`: a non-empty array of strings, every one acceptable.
pub(super) fn redirect_uris(value: &Value) -> Result<Vec<String>, String> {
    let Value::Array(items) = value else {
        return Err("it declares no redirect_uris array".into());
    };
    if items.is_empty() {
        return Err("its redirect_uris are empty".into());
    }
    items
        .iter()
        .map(|item| {
            let uri = item.as_str().ok_or("one of its redirect_uris is not a string")?;
            redirect::acceptable(uri).map_err(|e| format!("its redirect URI {:?} is refused: {e}", shown(uri)))?;
            Ok(uri.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const URL: &str = "https://client.example.com/oauth/client.json";

    fn document(changes: Value) -> Vec<u8> {
        let mut document = json!({
            "client_id": URL,
            "client_name": "Example Agent",
            "client_uri": "https://client.example.com/",
            "redirect_uris": ["http://127.0.0.1/callback", "https://client.example.com/cb"],
            "token_endpoint_auth_method": "none",
        });
        for (key, value) in changes.as_object().unwrap() {
            match value {
                Value::Null => document.as_object_mut().unwrap().remove(key),
                other => document.as_object_mut().unwrap().insert(key.clone(), other.clone()),
            };
        }
        document.to_string().into_bytes()
    }

    #[test]
    fn a_good_metadata_document_describes_its_client() {
        let client = from_document(URL, &document(json!({}))).unwrap();
        assert_eq!(client.client_id, URL);
        assert_eq!(client.client_name, "Example Agent");
        assert_eq!(client.redirect_uris.len(), 2);
        assert_eq!(client.client_uri.as_deref(), Some("https://client.example.com/"));
        assert_eq!(client.kind, ClientKind::Metadata);
        let bare = from_document(
            URL,
            &document(json!({"client_name": null, "token_endpoint_auth_method": null})),
        );
        assert_eq!(bare.unwrap().client_name, "", "no name and no auth method are fine");
        let script = from_document(URL, &document(json!({"client_uri": "javascript:alert(1)"}))).unwrap();
        assert_eq!(script.client_uri, None, "only an https home page is kept");
    }

    #[test]
    fn a_metadata_document_that_breaks_a_rule_is_refused() {
        let long_name = "n".repeat(MAX_NAME_CHARS + 1);
        let cases = [
            (
                json!({"client_id": "https://client.example.com/other.json"}),
                "client_id",
            ),
            (json!({"client_id": null}), "client_id"),
            (json!({"client_id": format!("{URL}#")}), "client_id"),
            (
                json!({"token_endpoint_auth_method": "client_secret_basic"}),
                "token_endpoint_auth_method",
            ),
            (
                json!({"token_endpoint_auth_method": "private_key_jwt"}),
                "token_endpoint_auth_method",
            ),
            (json!({"client_secret": "s3cret"}), "client_secret"),
            (json!({"redirect_uris": null}), "redirect_uris"),
            (json!({"redirect_uris": []}), "redirect_uris"),
            (
                json!({"redirect_uris": "https://client.example.com/cb"}),
                "redirect_uris",
            ),
            (json!({"redirect_uris": [7]}), "not a string"),
            (
                json!({"redirect_uris": ["https://client.example.com/cb", "http://evil.example/cb"]}),
                "evil",
            ),
            (json!({"redirect_uris": ["javascript:alert(1)"]}), "scheme"),
            (
                json!({"redirect_uris": ["https://client.example.com/cb#x"]}),
                "fragment",
            ),
            (json!({"client_name": long_name}), "longer"),
            (json!({"client_name": "a\u{1b}[31mb"}), "control"),
            (json!({"client_name": 3}), "not a string"),
        ];
        for (changes, why) in cases {
            let error = from_document(URL, &document(changes.clone())).unwrap_err();
            assert!(error.contains(why), "{changes}: {error}");
        }
        assert!(from_document(URL, b"[1]").unwrap_err().contains("not a JSON object"));
        assert!(from_document(URL, b"{").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn a_registered_client_with_a_refused_redirect_uri_does_not_authorise() {
        let registered = |uris: &[&str]| RegisteredClient {
            client_id: "pcl-client-1".into(),
            client_name: "Cursor".into(),
            redirect_uris: uris.iter().map(|u| u.to_string()).collect(),
            created_at: Utc::now(),
            last_used_at: Utc::now(),
        };
        let good = registered_metadata(registered(&["cursor://anysphere.cursor-retrieval/oauth/callback"])).unwrap();
        assert_eq!(
            (good.kind, good.client_name.as_str()),
            (ClientKind::Registered, "Cursor")
        );
        let error = registered_metadata(registered(&["http://127.0.0.1/cb", "googlechrome://x/cb"])).unwrap_err();
        assert!(matches!(error, ClientError::Refused { .. }), "{error}");
        assert!(error.to_string().contains("googlechrome"), "{error}");
    }

    fn clients(dir: &tempfile::TempDir) -> Clients {
        let text = format!(
            "listen = \"127.0.0.1:0\"\npublic_url = \"https://127.0.0.1\"\ndata_dir = \"{}\"\n[tls]\ncert_file = \"c\"\nkey_file = \"k\"\n",
            dir.path().display()
        );
        let config = Config::from_sources(&text, Vec::new()).unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        Clients::new(&config, store).unwrap()
    }

    #[test]
    fn only_a_metadata_document_not_held_would_be_fetched() {
        let dir = tempfile::tempdir().unwrap();
        let clients = clients(&dir);
        let url = "https://client.example/meta.json";
        assert!(clients.would_fetch(url));
        let document = format!(r#"{{"client_id":"{url}","redirect_uris":["http://127.0.0.1/cb"]}}"#);
        clients.remember(&from_document(url, document.as_bytes()).unwrap());
        assert!(!clients.would_fetch(url), "held from a fetch within the hour");
        assert!(clients.would_fetch("https://other.example/meta.json"));
        assert!(
            !clients.would_fetch("pcl-client-1"),
            "a registered client is looked up, not fetched"
        );
        // A cache filled by others' documents still takes this one, in
        // place of the oldest.
        for n in 0..CACHE_SIZE {
            let other = format!("https://filler.example/{n}.json");
            let filler = format!(r#"{{"client_id":"{other}","redirect_uris":["http://127.0.0.1/cb"]}}"#);
            clients.remember(&from_document(&other, filler.as_bytes()).unwrap());
        }
        assert!(clients.would_fetch(url), "the oldest went");
        clients.remember(&from_document(url, document.as_bytes()).unwrap());
        assert!(!clients.would_fetch(url));
        assert!(clients.cache.len() <= CACHE_SIZE);
    }

    #[tokio::test]
    async fn a_registered_client_resolves_without_being_noted_as_used_and_an_unknown_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let clients = clients(&dir);
        let uris = vec!["http://127.0.0.1/cb".to_string()];
        let registered = clients.store().register_oauth_client("Agent", &uris).unwrap();
        let client = clients.resolve(&registered.client_id).await.unwrap();
        assert_eq!((client.kind, client.redirect_uris), (ClientKind::Registered, uris));
        let used = clients
            .store()
            .find_oauth_client(&registered.client_id)
            .unwrap()
            .unwrap();
        assert_eq!(
            used.last_used_at, registered.last_used_at,
            "naming a client, as anyone may at the authorize page, is not its use"
        );
        let error = clients.resolve("pcl-client-nobody").await.unwrap_err();
        assert_eq!(error, ClientError::Unknown("pcl-client-nobody".into()));
        assert_eq!(error.oauth().error, "invalid_client");
        assert_eq!(error.refusal(), Refusal::OAuthClientRefused);
    }

    #[tokio::test]
    async fn a_metadata_document_url_that_is_not_acceptable_is_refused_before_any_fetch() {
        let dir = tempfile::tempdir().unwrap();
        let clients = clients(&dir);
        for url in [
            "https://client.example.com",
            "https://u@client.example.com/c.json",
            "https://x/a/../c",
        ] {
            let error = clients.resolve(url).await.unwrap_err();
            assert!(error.to_string().contains("not a usable URL"), "{url}: {error}");
        }
    }

    #[test]
    fn registered_clients_unused_for_the_ttl_are_swept_and_used_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let clients = clients(&dir);
        let uris = vec!["http://127.0.0.1/cb".to_string()];
        let idle = clients.store().register_oauth_client("idle", &uris).unwrap();
        let busy = clients.store().register_oauth_client("busy", &uris).unwrap();
        assert_eq!(clients.sweep_unused().unwrap(), 0, "both were used within 30 days");
        let ago = Utc::now() - chrono::TimeDelta::days(31);
        clients
            .store()
            .set_oauth_client_last_used(&idle.client_id, ago)
            .unwrap();
        assert_eq!(clients.sweep_unused().unwrap(), 1);
        assert_eq!(clients.store().find_oauth_client(&idle.client_id).unwrap(), None);
        assert!(clients.store().find_oauth_client(&busy.client_id).unwrap().is_some());
    }
}
