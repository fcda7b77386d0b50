//! `/oauth/authorize` over HTTP (issue 19, items 3 and 4): a refused
//! authorization request is a plain-text 400 and never a redirect, signed
//! in or not, and audited; a signed-out person is sent to sign in with the
//! request kept as where to return. The shared set-up is here: a client
//! registered by DCR with a loopback redirect URI (and an https one, for
//! the warning), and ana's consent driven over HTTP ([`approve`]). The page
//! in Chromium is `consent_page`; what a consent makes, `consent_agents`.

use crate::approvals::audit_rows;
use crate::harness::{Portcullis, RawResponse};
use crate::signin::{free_port, param, portcullis, Answer, Idp, Visitor};
use http::Method;
use portcullis::doors::web::cli_login::challenge_of;
use portcullis::identity::Grant;
use serde_json::json;
use std::time::Duration;

/// The redirect URIs the client declares.
pub(super) const LOOPBACK: &str = "http://127.0.0.1/callback";
pub(super) const ELSEWHERE: &str = "https://agent.example.com/callback";
/// The loopback URI it presents: any port, as RFC 8252 allows.
pub(super) const PRESENTED: &str = "http://127.0.0.1:45871/callback";
pub(super) const CLIENT_NAME: &str = "Consent Test Agent";
pub(super) const VERIFIER: &str = "a-pkce-verifier-of-at-least-forty-three-characters-0123";
pub(super) const STATE: &str = "st-123";
pub(super) const FORM: &str = "application/x-www-form-urlencoded";

/// A portcullis signing people in at a real provider; ana holds developer
/// in shop and viewer in payments; a client registered by DCR.
pub(super) struct Setup {
    pub idp: Idp,
    pub env: Portcullis,
    pub port: u16,
    pub client_id: String,
    /// ana's own grants: developer in shop, viewer in payments.
    pub grants: Vec<Grant>,
    /// A token of ana's own (for the person commands).
    pub ana: String,
}

impl Setup {
    pub async fn start() -> Setup {
        let port = free_port();
        let idp = Idp::start(port);
        let env = portcullis(&idp.issuer, port, |_| {}).await;
        let (ana, grants) = env.person_with_ttl(
            "ana",
            &[("developer", Some("shop")), ("viewer", Some("payments"))],
            Duration::from_secs(3 * 3600),
        );
        let body = json!({"client_name": CLIENT_NAME, "redirect_uris": [LOOPBACK, ELSEWHERE]});
        let headers = [("content-type", "application/json")];
        let registered = env
            .raw()
            .send(Method::POST, "/oauth/register", &headers, body.to_string().into_bytes())
            .await;
        assert_eq!(registered.status, 201, "{:?}", registered.body);
        let client_id = registered.json()["client_id"].as_str().unwrap().to_string();
        Setup {
            idp,
            env,
            port,
            client_id,
            grants,
            ana,
        }
    }

    /// The issuer, and the resource of `/mcp`.
    pub fn issuer(&self) -> String {
        self.env.config.public_url.trim_end_matches('/').to_string()
    }

    /// A good authorization request to `redirect_uri`, as parameters.
    pub fn params(&self, redirect_uri: &str) -> Vec<(String, String)> {
        let challenge = challenge_of(VERIFIER);
        let resource = format!("{}/mcp", self.issuer());
        [
            ("response_type", "code"),
            ("client_id", self.client_id.as_str()),
            ("redirect_uri", redirect_uri),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", STATE),
            ("resource", resource.as_str()),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
    }

    pub async fn stop(self) {
        self.env.stop().await;
        drop(self.idp);
    }
}

/// `params` with `name` set to `value` (`None`: left out).
fn with(params: &[(String, String)], name: &str, value: Option<&str>) -> Vec<(String, String)> {
    let mut changed: Vec<(String, String)> = params.iter().filter(|(n, _)| n != name).cloned().collect();
    changed.extend(value.map(|v| (name.to_string(), v.to_string())));
    changed
}

/// `/oauth/authorize?` with `params`.
pub(super) fn path(params: &[(String, String)]) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.extend_pairs(params);
    format!("/oauth/authorize?{}", query.finish())
}

/// Undo the pages' HTML escaping.
fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The hidden fields of the consent form in `page`.
fn hidden_fields(page: &str) -> Vec<(String, String)> {
    let form = &page[page.find("action=\"/oauth/authorize\"").expect("the consent form")..];
    let marker = "<input type=\"hidden\" name=\"";
    form.split(marker)
        .skip(1)
        .map(|rest| {
            let (name, rest) = rest.split_once('"').unwrap();
            let value = rest.split_once("value=\"").unwrap().1.split('"').next().unwrap();
            (name.to_string(), unescape(value))
        })
        .collect()
}

/// The signed-in visitor's consent page for `params`.
pub(super) async fn consent_page(visitor: &Visitor, params: &[(String, String)]) -> String {
    let page = visitor.get(&path(params)).await;
    assert_eq!(page.status, 200, "{page:?}");
    page.body
}

/// Post `page`'s consent form with its hidden fields and `choices`.
pub(super) async fn decide(visitor: &Visitor, page: &str, choices: &[(&str, &str)]) -> Answer {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.extend_pairs(hidden_fields(page));
    form.extend_pairs(choices);
    visitor.post("/oauth/authorize", &form.finish()).await
}

/// Where the page after a decision sends the browser.
pub(super) fn handed_to(answer: &Answer) -> String {
    assert_eq!(answer.status, 200, "{answer:?}");
    let marker = "id=\"continue\" href=\"";
    let start = answer.body.find(marker).unwrap_or_else(|| panic!("{answer:?}")) + marker.len();
    unescape(answer.body[start..].split('"').next().unwrap())
}

/// Consent as ana to `role` on her shop grant, then exchange the code:
/// the access token.
pub(super) async fn approve(setup: &Setup, visitor: &Visitor, role: &str, writes_need_approval: bool) -> String {
    let code = allowed_code(setup, visitor, role, writes_need_approval).await;
    let exchanged = exchange(setup, &code).await;
    assert_eq!(exchanged.status, 200, "{:?}", exchanged.body);
    let tokens = exchanged.json();
    assert!(tokens["expires_in"].as_i64().unwrap() <= 3600, "{tokens}");
    tokens["access_token"].as_str().unwrap().to_string()
}

/// Consent as ana to `role` on her shop grant: the code the client is sent.
pub(super) async fn allowed_code(setup: &Setup, visitor: &Visitor, role: &str, writes_need_approval: bool) -> String {
    let page = consent_page(visitor, &setup.params(PRESENTED)).await;
    let shop = &setup.grants[0].id;
    let role_field = format!("role-{shop}");
    let mut choices = vec![
        ("decision", "approve"),
        ("grant", shop.as_str()),
        (role_field.as_str(), role),
        ("duration", "3600"),
    ];
    if writes_need_approval {
        choices.push(("writes_need_approval", "yes"));
    }
    let to = handed_to(&decide(visitor, &page, &choices).await);
    assert!(to.starts_with(&format!("{PRESENTED}?code=")), "{to}");
    assert_eq!(param(&to, "state").as_deref(), Some(STATE), "{to}");
    assert_eq!(param(&to, "iss"), Some(setup.issuer()), "{to}");
    param(&to, "code").unwrap()
}

/// `POST /oauth/token` for `code`.
pub(super) async fn exchange(setup: &Setup, code: &str) -> RawResponse {
    let resource = format!("{}/mcp", setup.issuer());
    let form: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", PRESENTED),
            ("client_id", setup.client_id.as_str()),
            ("code_verifier", VERIFIER),
            ("resource", resource.as_str()),
        ])
        .finish();
    let headers = [("content-type", FORM)];
    setup
        .env
        .raw()
        .send(Method::POST, "/oauth/token", &headers, form.into_bytes())
        .await
}

/// The visitor's cookies, as a `Cookie` header.
fn cookies(visitor: &Visitor) -> String {
    let jar = visitor.cookies.lock().unwrap();
    jar.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A refused request: what, the request, words of the answer, the audit's
/// word.
type Case = (&'static str, Vec<(String, String)>, &'static str, &'static str);

fn refused_requests(setup: &Setup) -> Vec<Case> {
    let good = setup.params(PRESENTED);
    let mut repeated = good.clone();
    repeated.push(("client_id".into(), "pcl-client-other".into()));
    let long_state = "s".repeat(501);
    vec![
        (
            "response_type token",
            with(&good, "response_type", Some("token")),
            "response_type must be \"code\"",
            "oauth_authorize_invalid",
        ),
        (
            "an unknown client",
            with(&good, "client_id", Some("pcl-client-nobody")),
            "knows no client",
            "oauth_client_refused",
        ),
        (
            "no client",
            with(&good, "client_id", None),
            "client_id is missing",
            "oauth_client_refused",
        ),
        (
            "a redirect URI not declared",
            with(&good, "redirect_uri", Some("https://evil.example/callback")),
            "redirect_uri",
            "oauth_redirect_refused",
        ),
        (
            "another loopback path",
            with(&good, "redirect_uri", Some("http://127.0.0.1:45871/other")),
            "redirect_uri",
            "oauth_redirect_refused",
        ),
        (
            "no redirect URI",
            with(&good, "redirect_uri", None),
            "redirect_uri is missing",
            "oauth_redirect_refused",
        ),
        (
            "no PKCE",
            with(&with(&good, "code_challenge", None), "code_challenge_method", None),
            "S256",
            "oauth_authorize_invalid",
        ),
        (
            "plain PKCE",
            with(&good, "code_challenge_method", Some("plain")),
            "code_challenge_method must be S256",
            "oauth_authorize_invalid",
        ),
        (
            "a malformed challenge",
            with(&good, "code_challenge", Some("short")),
            "43 base64url",
            "oauth_authorize_invalid",
        ),
        (
            "a state too long",
            with(&good, "state", Some(&long_state)),
            "state is longer",
            "oauth_authorize_invalid",
        ),
        (
            "another resource",
            with(&good, "resource", Some("https://other.example/mcp")),
            "resource must be",
            "oauth_authorize_invalid",
        ),
        (
            "a repeated parameter",
            repeated,
            "more than once",
            "oauth_authorize_invalid",
        ),
    ]
}

/// Anyone may register a client whose web address looks like this one's:
/// a person who denies it is not sent there unasked (RFC 9700 §4.11.2),
/// while a client on this computer gets its `access_denied` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denying_a_client_on_another_host_does_not_send_the_browser_there_by_itself() {
    let setup = Setup::start().await;
    let visitor = Visitor::new(&setup.env);
    visitor.sign_in("ana").await;
    let refresh = "http-equiv=\"refresh\"";
    let page = consent_page(&visitor, &setup.params(ELSEWHERE)).await;
    let denied = decide(&visitor, &page, &[("decision", "deny")]).await;
    assert!(!denied.body.contains(refresh), "{denied:?}");
    assert!(denied.body.contains("it was given nothing"), "{denied:?}");
    assert!(
        denied.body.contains("Go back to agent.example.com anyway"),
        "{denied:?}"
    );
    let to = handed_to(&denied);
    assert!(to.starts_with(&format!("{ELSEWHERE}?error=access_denied")), "{to}");
    let page = consent_page(&visitor, &setup.params(PRESENTED)).await;
    let denied = decide(&visitor, &page, &[("decision", "deny")]).await;
    assert!(denied.body.contains(refresh), "{denied:?}");
    assert!(handed_to(&denied).starts_with(&format!("{PRESENTED}?error=access_denied")));
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_authorization_request_is_a_plain_text_400_without_a_redirect_signed_in_or_not_and_audited() {
    let setup = Setup::start().await;
    let visitor = Visitor::new(&setup.env);
    visitor.sign_in("ana").await;
    let signed_in = cookies(&visitor);
    let cases = refused_requests(&setup);
    for (what, params, words, _) in &cases {
        for cookie in [None, Some(signed_in.as_str())] {
            let headers: Vec<(&str, &str)> = cookie.map(|c| ("cookie", c)).into_iter().collect();
            let answer = setup
                .env
                .raw()
                .send(Method::GET, &path(params), &headers, Vec::new())
                .await;
            let body = String::from_utf8_lossy(&answer.body);
            assert_eq!(answer.status, 400, "{what} (cookie {}): {body}", cookie.is_some());
            assert!(answer.headers.get("location").is_none(), "{what}: never a redirect");
            let kind = answer.headers["content-type"].to_str().unwrap();
            assert!(kind.starts_with("text/plain"), "{what}: {kind}");
            assert!(body.contains(words), "{what}: {body}");
        }
    }
    let page = consent_page(&visitor, &setup.params(PRESENTED)).await;
    let tampered = page.replace(PRESENTED, "http://127.0.0.1:45871/other");
    let posted = decide(&visitor, &tampered, &[("decision", "deny")]).await;
    assert_eq!((posted.status, posted.location.as_deref()), (400, None), "{posted:?}");
    let admin_role = format!("role-{}", setup.grants[0].id);
    let wider = [
        ("decision", "approve"),
        ("grant", setup.grants[0].id.as_str()),
        (admin_role.as_str(), "admin"),
        ("duration", "3600"),
    ];
    let posted = decide(&visitor, &page, &wider).await;
    assert_eq!(posted.status, 400, "{posted:?}");
    assert!(posted.body.contains("neither the grant's own"), "{posted:?}");

    let rows = audit_rows(&setup.env).await;
    let refused: Vec<&str> = rows
        .iter()
        .filter(|r| r.resource == "oauthconsents")
        .map(|r| r.refused.as_str())
        .collect();
    for (what, _, _, word) in &cases {
        assert!(refused.contains(word), "{what}: {refused:?}");
    }
    assert!(refused.contains(&"oauth_consent_refused"), "{refused:?}");
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_out_a_good_authorization_request_goes_to_sign_in_with_its_query_kept_as_where_to_return() {
    let setup = Setup::start().await;
    let asked = path(&setup.params(PRESENTED));
    let answer = Visitor::new(&setup.env).get(&asked).await;
    assert_eq!(answer.status, 303, "{answer:?}");
    let location = answer.location.unwrap();
    assert!(location.contains("/login?next="), "{location}");
    let next = param(&location, "next").unwrap();
    assert_eq!(portcullis::doors::web::safe_next(&next), next, "sign-in returns there");
    let back: Vec<(String, String)> = form_urlencoded::parse(next.split_once('?').unwrap().1.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(back, setup.params(PRESENTED), "every parameter comes back unchanged");
    // Named, signed out, the registered client is not in use; shown to a
    // signed-in person, it is (the bound on unused clients spares it).
    let client = || setup.env.store.find_oauth_client(&setup.client_id).unwrap().unwrap();
    assert_eq!(client().last_used_at, client().created_at, "naming it is not its use");
    let visitor = Visitor::new(&setup.env);
    assert_eq!(visitor.sign_in("ana").await.status, 200);
    consent_page(&visitor, &setup.params(PRESENTED)).await;
    assert!(
        client().last_used_at > client().created_at,
        "shown to a person, it is in use"
    );
    setup.stop().await;
}
