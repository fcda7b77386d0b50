//! `portcullis admin store migrate` (issue 22): a store portcullis made on
//! SQLite, with people, an agent, a held write, an OAuth client, a sign-in
//! and its audit, copied into PostgreSQL by the CLI; portcullis then serves
//! on PostgreSQL as it did before, and the audit chain goes on from the
//! copied rows. A database that holds rows already is refused untouched,
//! and a missing SQLite file is said plainly.

use crate::approvals::{careful_bot_in, held_id, manifest, person_ok, real_writes, FLAGS};
use crate::harness::{Portcullis, CLUSTER};
use crate::pg_fixture;
use crate::serve::configmaps;
use chrono::{SubsecRound, Utc};
use http::{Method, StatusCode};
use portcullis::approvals::HeldState;
use portcullis::audit::query::Filter;
use portcullis::identity::Principal;
use portcullis::store::{ProviderPerson, SignInPerson, WebSession};
use std::process::Output;
use std::time::Duration;

const ISSUER: &str = "https://idp.example.test";

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `admin audit verify` with `env`'s configuration: how many rows it
/// verified, after it said the chain is intact.
fn verified_rows(env: &Portcullis) -> u64 {
    let out = env.cli(&["admin", "audit", "verify"]);
    let said = stdout(&out);
    assert!(out.status.success(), "{said}{}", stderr(&out));
    said.trim()
        .strip_prefix("audit chain intact: ")
        .and_then(|rest| rest.strip_suffix(" rows verified"))
        .unwrap_or_else(|| panic!("not an intact chain: {said}"))
        .parse()
        .unwrap()
}

/// What `migrate` printed for `table`: `<table>: <n> rows`.
fn copied(said: &str, table: &str) -> u64 {
    let line = said
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{table}: ")))
        .unwrap_or_else(|| panic!("no count for {table} in {said}"));
    line.strip_suffix(" rows").unwrap().parse().unwrap()
}

/// Every table's row count and the instance id, as psql reads them from
/// `url`: what a refused migration must leave as it was.
fn contents(url: &str) -> String {
    let server = pg_fixture::shared();
    let tables = server
        .psql(
            url,
            "SELECT string_agg(table_name, ' ' ORDER BY table_name) FROM information_schema.tables \
             WHERE table_schema = 'public'",
        )
        .unwrap();
    let counts: Vec<String> = tables
        .split(' ')
        .map(|t| {
            format!(
                "{t}={}",
                server.psql(url, &format!("SELECT count(*) FROM \"{t}\"")).unwrap()
            )
        })
        .collect();
    let instance = server
        .psql(url, "SELECT value FROM settings WHERE key = 'instance_id'")
        .unwrap();
    format!("{} instance={instance}", counts.join(" "))
}

/// What the SQLite store held before it was copied, to be found again.
struct Made {
    ana: String,
    bot: String,
    agent: String,
    held: String,
    apply: Vec<String>,
    client_id: String,
    session: WebSession,
    audit_id: String,
}

/// People, an agent narrowed to one of its person's grants, a held write,
/// a registered OAuth client, a sign-in at a provider with its session,
/// and requests by each, all through `env` on SQLite.
async fn fill(env: &Portcullis) -> Made {
    let (bot, ana) = careful_bot_in(env, "shop", "developer");
    let (_, grants) = env.person_with_ttl(
        "cy",
        &[("viewer", Some("shop")), ("viewer", Some("payments"))],
        Duration::from_secs(3600),
    );
    let agent = env.agent("cy", &[&grants[0]]);
    let file = manifest(env, FLAGS);
    let apply: Vec<String> = ["apply", "--server-side", "-f", &file].map(String::from).to_vec();
    let args: Vec<&str> = apply.iter().map(String::as_str).collect();
    let held = held_id(&env.kubectl(&bot, "shop").fails(&args));

    let registration = serde_json::json!({
        "client_name": "Migrated client",
        "redirect_uris": ["http://localhost/callback"],
        "token_endpoint_auth_method": "none",
    });
    let headers = [("content-type", "application/json")];
    let body = registration.to_string().into_bytes();
    let registered = env.raw().send(Method::POST, "/oauth/register", &headers, body).await;
    assert_eq!(registered.status, StatusCode::CREATED);
    let client_id = registered.json()["client_id"].as_str().unwrap().to_string();

    let seen = ProviderPerson {
        issuer: ISSUER.into(),
        subject: "sub-ana".into(),
        login: "ana".into(),
        email: Some("ana@example.test".into()),
        groups: vec!["shop-admins".into()],
    };
    let signed_in = env.store.sign_in_person(&seen, false).unwrap();
    assert!(matches!(signed_in, SignInPerson::Person { .. }), "{signed_in:?}");
    let (credential, _) = env
        .store
        .issue_credential(&Principal::person("ana"), "web", None)
        .unwrap();
    let session = WebSession {
        login: "ana".into(),
        credential_id: credential.id,
        expires_at: (Utc::now() + chrono::Duration::hours(1)).trunc_subsecs(0),
        oidc: true,
        groups: vec!["shop-admins".into()],
    };
    env.store.insert_web_session(&"ab".repeat(32), &session).unwrap();

    let answered = env.raw().get(&configmaps(), &ana).await;
    assert_eq!(answered.status, 200);
    for token in [&ana, &agent] {
        assert_eq!(env.raw().get(&configmaps(), token).await.status, 200);
    }
    Made {
        audit_id: crate::audit::audit_id(&answered),
        ana,
        bot,
        agent,
        held,
        apply,
        client_id,
        session,
    }
}

/// `env`'s installation started again on the PostgreSQL database `url`,
/// with the approvals key the store was first started with.
async fn on_postgres(env: &Portcullis, url: &str) -> Portcullis {
    Portcullis::start_beside(env, |c| {
        c.store.url = Some(url.into());
        c.approvals.key_file = env.config.approvals.key_file.clone();
    })
    .await
}

/// The migrated store's people, agent, held write, OAuth client and
/// sign-in, found and used through `pg`.
async fn assert_serves_on(env: &Portcullis, pg: &Portcullis, made: &Made) {
    let payments = format!("/clusters/{CLUSTER}/api/v1/namespaces/payments/configmaps");
    assert_eq!(pg.raw().get(&configmaps(), &made.ana).await.status, 200, "ana's token");
    assert_eq!(
        pg.raw().get(&configmaps(), &made.agent).await.status,
        200,
        "the agent's grant"
    );
    let beyond = pg.raw().get(&payments, &made.agent).await;
    assert_eq!(beyond.status, 403, "cy's other grant is not the agent's");

    assert_eq!(pg.store.held(&made.held).unwrap().unwrap().state, HeldState::Pending);
    let approved = person_ok(pg, &made.ana, &["approvals", "approve", &made.held]);
    assert!(approved.contains("approved"), "{approved}");
    let args: Vec<&str> = made.apply.iter().map(String::as_str).collect();
    let ran = pg.kubectl(&made.bot, "shop").ok(&args);
    assert!(ran.contains("configmap/flags serverside-applied"), "{ran}");
    assert_eq!(real_writes(env, "bot:deployer", "patch"), 1, "the held body, unsealed");

    let client = pg.store.find_oauth_client(&made.client_id).unwrap();
    assert_eq!(client.map(|c| c.client_name), Some("Migrated client".to_string()));
    assert_eq!(pg.store.person_groups(ISSUER, "ana").unwrap(), ["shop-admins"]);
    assert_eq!(
        pg.store.web_session(&"ab".repeat(32)).unwrap(),
        Some(made.session.clone())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_migrated_into_postgresql_serves_on_with_its_tokens_grants_held_writes_and_audit_chain() {
    let mut env = Portcullis::start().await;
    let made = fill(&env).await;
    env.halt().await;
    let before = verified_rows(&env);
    assert!(before >= 4, "the requests' rows: {before}");

    let url = pg_fixture::shared().create_database("store_migrate").unwrap();
    env.config.store.url = Some(url.clone());
    let out = env.cli(&["admin", "store", "migrate"]);
    let said = stdout(&out);
    assert!(out.status.success(), "{said}{}", stderr(&out));
    assert_eq!(copied(&said, "audit"), before);
    assert_eq!(copied(&said, "principals"), 3, "ana, cy and the bot");
    assert_eq!(copied(&said, "agents"), 1);
    assert_eq!(copied(&said, "held_writes"), 1);
    assert_eq!(copied(&said, "oauth_clients"), 1);
    assert_eq!(copied(&said, "person_identities"), 1);
    assert_eq!(copied(&said, "web_sessions"), 1);
    let db = env.config.data_dir.join("portcullis.db");
    let last = said.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("copied {} into PostgreSQL database", db.display())),
        "{said}"
    );
    assert!(
        last.ends_with(&format!("audit chain intact: {before} rows verified")),
        "{said}"
    );

    let pg = on_postgres(&env, &url).await;
    assert_serves_on(&env, &pg, &made).await;
    pg.gateway.audit().writer().flush().await;
    let mut audit = portcullis::audit::open(&pg.store).unwrap();
    let old = Filter {
        id: Some(made.audit_id.clone()),
        ..Filter::default()
    };
    assert_eq!(
        audit.query(&old).unwrap().len(),
        1,
        "a row written on SQLite, read on PostgreSQL"
    );
    let after = verified_rows(&pg);
    assert!(after > before, "the copied {before} rows and the new ones: {after}");
    pg.stop().await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_into_a_postgresql_database_that_holds_rows_is_refused_and_changes_nothing() {
    let mut env = Portcullis::start().await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    assert_eq!(env.raw().get(&configmaps(), &ana).await.status, 200);
    env.halt().await;
    let url = pg_fixture::shared().create_database("store_migrate_used").unwrap();
    // The new installation was started on PostgreSQL before the migration.
    let pg = on_postgres(&env, &url).await;
    let zed = pg.person("zed", &[("viewer", Some("shop"))]);
    assert_eq!(pg.raw().get(&configmaps(), &zed).await.status, 200);
    pg.gateway.audit().writer().flush().await;
    let held = contents(&url);

    env.config.store.url = Some(url.clone());
    let out = env.cli(&["admin", "store", "migrate"]);
    assert!(!out.status.success());
    assert_eq!(stdout(&out), "", "nothing copied");
    let said = stderr(&out);
    let said = said
        .lines()
        .find(|l| l.starts_with("portcullis: "))
        .unwrap_or_else(|| panic!("no message: {said}"));
    assert!(
        said.starts_with("portcullis: the PostgreSQL database is not empty (rows: "),
        "{said}"
    );
    assert!(said.contains("principals 1") && said.contains("audit "), "{said}");
    assert!(
        said.trim_end()
            .ends_with("store migrate copies into an empty database only, and changed nothing"),
        "{said}"
    );
    assert_eq!(contents(&url), held, "every table as it was, and the instance id");
    assert_eq!(pg.raw().get(&configmaps(), &zed).await.status, 200);
    assert_eq!(pg.raw().get(&configmaps(), &ana).await.status, 401, "not copied");
    pg.stop().await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_from_a_sqlite_file_that_does_not_exist_says_so_plainly() {
    let mut env = Portcullis::start().await;
    env.halt().await;
    let url = pg_fixture::shared().create_database("store_migrate_missing").unwrap();
    env.config.store.url = Some(url.clone());
    let missing = env.dir.path().join("elsewhere/portcullis.db");
    let out = env.cli(&["admin", "store", "migrate", "--from", &missing.display().to_string()]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "portcullis: there is no SQLite store at {}: name it with --from, or set data_dir to the folder \
             that holds portcullis.db\n",
            missing.display()
        )
    );
    assert!(!missing.exists(), "no empty store made in its place");
    let tables = pg_fixture::shared()
        .psql(&url, "SELECT count(*) FROM principals")
        .unwrap();
    assert_eq!(tables, "0");
    env.stop().await;
}
