//! Held writes of Secrets never store or show a value: for every write verb
//! (create, update, patch, server-side and client-side apply, delete,
//! deletecollection), the held row as stored, the approval page and
//! `portcullis approvals show` carry markers, never a value nor the
//! last-applied annotation (which holds the values in clear). A dry-run
//! answer whose values cannot be hidden is refused, not held.

use crate::approvals::{careful_bot, held_id, manifest};
use crate::harness::{Kubectl, Portcullis};
use base64::Engine;
use http::Method;
use portcullis::identity::Principal;

/// A new value the writes send.
const NEW_PASSWORD: &str = "n3w-Pa55w0rd-held";

/// Values of the seeded Secrets of shop (db-credentials, web-tls) and the
/// new one, in clear and base64, and the annotation that repeats them.
fn secret_values() -> Vec<String> {
    let clear = ["s3cr3t-Pa55w0rd", "postgres://shop@db.shop.svc:5432/shop", NEW_PASSWORD];
    let encoded = [
        "czNjcjN0LVBhNTV3MHJk",
        "cG9zdGdyZXM6Ly9zaG9wQGRiLnNob3Auc3ZjOjU0MzIvc2hvcA",
        "c2hvcA==",
        // web-tls's tls.key and tls.crt.
        "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0t",
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0t",
    ];
    let mut values: Vec<String> = clear.iter().chain(encoded.iter()).map(|v| v.to_string()).collect();
    values.push(base64::engine::general_purpose::STANDARD.encode(NEW_PASSWORD));
    values.push("last-applied-configuration".into());
    values
}

/// ana's session cookie for the approval pages, signed in with the sign-in
/// form as a browser would (its pre-session cookie and CSRF token).
pub async fn session(env: &Portcullis, token: &str) -> String {
    let raw = env.raw();
    let form = raw.send(Method::GET, "/login", &[], Vec::new()).await;
    let cookies = |headers: &http::HeaderMap| -> Vec<String> {
        headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or_default().to_string())
            .collect()
    };
    let html = String::from_utf8_lossy(&form.body).into_owned();
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_string();
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("token", token)
        .append_pair("next", "/approvals")
        .append_pair("csrf", &csrf)
        .finish();
    let cookie = cookies(&form.headers).join("; ");
    let signed_in = raw
        .send(
            Method::POST,
            "/login",
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("cookie", &cookie),
            ],
            body.into_bytes(),
        )
        .await;
    assert_eq!(signed_in.status, 303, "{}", String::from_utf8_lossy(&signed_in.body));
    cookies(&signed_in.headers)
        .into_iter()
        .find(|c| c.starts_with("__Host-portcullis="))
        .expect("a session cookie")
}

/// Run a write as the careful bot; it is held. Returns the held write's id.
fn held(bot: &Kubectl, args: &[&str]) -> String {
    let answer = bot.fails(args);
    assert!(answer.contains("waits for a person's approval"), "{args:?}: {answer}");
    held_id(&answer)
}

/// The stored row (every column, raw from SQLite), the approval page and
/// `approvals show` show no value; `approvals show` shows the markers.
async fn assert_no_value_shows(env: &Portcullis, id: &str, cookie: &str) -> String {
    let db = rusqlite::Connection::open(env.store.path()).unwrap();
    let mut statement = db.prepare("SELECT * FROM held_writes WHERE id = ?1").unwrap();
    let columns = statement.column_count();
    let row: Vec<Vec<u8>> = statement
        .query_row([id], |row| {
            (0..columns)
                .map(|i| {
                    Ok(match row.get::<_, rusqlite::types::Value>(i)? {
                        rusqlite::types::Value::Text(text) => text.into_bytes(),
                        rusqlite::types::Value::Blob(bytes) => bytes,
                        other => format!("{other:?}").into_bytes(),
                    })
                })
                .collect()
        })
        .unwrap();
    let stored = row.concat();
    assert!(
        String::from_utf8_lossy(&stored).contains("redacted, "),
        "the row holds the preview"
    );

    let page = env
        .raw()
        .send(
            Method::GET,
            &format!("/approvals/{id}"),
            &[("cookie", cookie)],
            Vec::new(),
        )
        .await;
    assert_eq!(page.status, 200);
    let page = String::from_utf8_lossy(&page.body).into_owned();
    assert!(page.contains("Dry-run result") && page.contains("redacted, "), "{page}");

    let ana = env
        .store
        .issue_credential(&Principal::person("ana"), "cli", None)
        .unwrap()
        .1;
    let out = env.person_cli(&ana, &["approvals", "show", id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(shown.contains("<redacted, "), "{shown}");

    for value in secret_values() {
        assert!(
            !stored.windows(value.len()).any(|w| w == value.as_bytes()),
            "{value} is in the stored row"
        );
        assert!(!page.contains(&value), "{value} is on the approval page: {page}");
        assert!(!shown.contains(&value), "{value} is in approvals show: {shown}");
    }
    shown
}

/// db-credentials as the writes want it: the new password.
fn db_credentials(env: &Portcullis) -> String {
    manifest(
        env,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\n  namespace: shop\ntype: Opaque\nstringData:\n  password: {NEW_PASSWORD}\n"
        ),
    )
}

async fn start() -> (Portcullis, Kubectl, String) {
    let env = Portcullis::start().await;
    let (bot, ana) = careful_bot(&env, "admin");
    let cookie = session(&env, &ana).await;
    (env, bot, cookie)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_secret_create_shows_its_new_values_only_as_changed_markers() {
    let (env, bot, cookie) = start().await;
    let literal = format!("--from-literal=password={NEW_PASSWORD}");
    let id = held(&bot, &["create", "secret", "generic", "fresh", &literal]);
    let shown = assert_no_value_shows(&env, &id, &cookie).await;
    assert!(shown.contains("password: <redacted, 17 bytes, changed>"), "{shown}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_secret_update_shows_no_value_in_the_row_the_page_or_the_cli() {
    let (env, bot, cookie) = start().await;
    let file = db_credentials(&env);
    let id = held(&bot, &["replace", "-f", &file]);
    let shown = assert_no_value_shows(&env, &id, &cookie).await;
    assert!(shown.contains("password: <redacted, 17 bytes, changed>"), "{shown}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_secret_patch_shows_no_value_in_the_row_the_page_or_the_cli() {
    let (env, bot, cookie) = start().await;
    let patch = format!(r#"{{"stringData":{{"password":"{NEW_PASSWORD}"}}}}"#);
    let id = held(&bot, &["patch", "secret", "db-credentials", "-p", &patch]);
    let shown = assert_no_value_shows(&env, &id, &cookie).await;
    assert!(shown.contains("password: <redacted, 17 bytes, changed>"), "{shown}");
    assert!(shown.contains("url: <redacted, 37 bytes>\n"), "{shown}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_secret_apply_server_side_or_client_side_shows_no_value_nor_last_applied() {
    let (env, bot, cookie) = start().await;
    let file = db_credentials(&env);
    let id = held(&bot, &["apply", "--server-side", "--force-conflicts", "-f", &file]);
    let shown = assert_no_value_shows(&env, &id, &cookie).await;
    assert!(shown.contains("password: <redacted, 17 bytes, changed>"), "{shown}");
    // Client-side apply sends the new last-applied annotation, values and all.
    let id = held(&bot, &["apply", "-f", &file]);
    assert_no_value_shows(&env, &id, &cookie).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_secret_delete_shows_no_value_in_the_row_the_page_or_the_cli() {
    let (env, bot, cookie) = start().await;
    let id = held(&bot, &["delete", "secret", "db-credentials"]);
    let shown = assert_no_value_shows(&env, &id, &cookie).await;
    assert!(shown.contains("-   password: <redacted, 15 bytes>"), "{shown}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_secret_deletecollection_hides_the_values_of_every_item() {
    let (env, bot, cookie) = start().await;
    let id = held(&bot, &["delete", "--raw", "/api/v1/namespaces/shop/secrets"]);
    let shown = assert_no_value_shows(&env, &id, &cookie).await;
    assert!(
        shown.contains("password: <redacted, 15 bytes>") && shown.contains("tls.key: <redacted, "),
        "{shown}"
    );
    assert!(!shown.contains("changed>"), "a delete changes no value: {shown}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_dry_run_answer_whose_values_cannot_be_hidden_is_refused_and_not_held() {
    let (env, bot, _) = start().await;
    // The dry run answers a Secret whose `data` is not a map of values.
    let odd = br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db-credentials","namespace":"shop"},"data":["czNjcjN0LVBhNTV3MHJk"]}"#;
    env.sim().faults().add(portcullis_sim::faults::FaultRule {
        method: Some(Method::PATCH),
        path_prefix: "/api/v1/namespaces/shop/secrets/db-credentials".into(),
        times: Some(1),
        action: portcullis_sim::faults::FaultAction::Body {
            content_type: "application/json".into(),
            body: bytes::Bytes::from_static(odd),
            code: 200,
        },
    });
    let patch = format!(r#"{{"stringData":{{"password":"{NEW_PASSWORD}"}}}}"#);
    let refused = bot.fails(&["patch", "secret", "db-credentials", "-p", &patch]);
    assert!(
        refused.contains("cannot hide") && refused.contains("cannot be held for approval"),
        "{refused}"
    );
    assert!(!refused.contains("czNjcjN0LVBhNTV3MHJk"), "{refused}");
    assert!(env.store.list_held().unwrap().is_empty(), "nothing held");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_dry_runs_rejection_reaches_an_agent_with_the_values_hidden_or_not_at_all() {
    let env = Portcullis::start().await;
    let agent = crate::approvals_mcp::careful_agent(&env);
    let auth = format!("Bearer {agent}");
    let path = format!(
        "/clusters/{}/api/v1/namespaces/shop/secrets/db-credentials",
        env.cluster
    );
    let patch = format!(r#"{{"stringData":{{"password":"{NEW_PASSWORD}"}}}}"#);
    let send = async || {
        env.raw()
            .send(
                Method::PATCH,
                &path,
                &[
                    ("authorization", &auth),
                    ("content-type", "application/merge-patch+json"),
                ],
                patch.clone().into_bytes(),
            )
            .await
    };
    // The dry run (read as one who sees values, to mark the changed ones)
    // is rejected with a body that is the Secret itself, as a webhook or
    // an aggregated server could answer.
    let reject = |body: &'static [u8]| portcullis_sim::faults::FaultRule {
        method: Some(Method::PATCH),
        path_prefix: "/api/v1/namespaces/shop/secrets/db-credentials".into(),
        times: Some(1),
        action: portcullis_sim::faults::FaultAction::Body {
            content_type: "application/json".into(),
            body: bytes::Bytes::from_static(body),
            code: 422,
        },
    };
    let secret = br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db-credentials","namespace":"shop"},"data":{"password":"czNjcjN0LVBhNTV3MHJk"}}"#;
    env.sim().faults().add(reject(secret));
    let rejected = send().await;
    let body = String::from_utf8_lossy(&rejected.body).into_owned();
    assert_eq!(rejected.status, 422, "{body}");
    assert!(!body.contains("czNjcjN0LVBhNTV3MHJk"), "{body}");
    assert!(body.contains("redacted"), "{body}");
    // One it cannot read is refused whole.
    let odd =
        br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db-credentials"},"data":["czNjcjN0LVBhNTV3MHJk"]}"#;
    env.sim().faults().add(reject(odd));
    let refused = send().await;
    let body = String::from_utf8_lossy(&refused.body).into_owned();
    assert_eq!(refused.status, 502, "{body}");
    assert!(!body.contains("czNjcjN0LVBhNTV3MHJk"), "{body}");
    assert!(env.store.list_held().unwrap().is_empty(), "nothing held");
    env.stop().await;
}
