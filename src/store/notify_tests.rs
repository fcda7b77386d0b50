use super::*;
use crate::identity::authenticate::{AuthError, Authenticator};
use crate::identity::Principal;
use crate::store::sql::params;
use crate::store::testing::{self, TestStore};
use crate::store::StoreError;
use tokio::sync::broadcast::Receiver;

/// How long a change may take to arrive before a test gives up: only a
/// broken listener comes near it.
const PATIENCE: Duration = Duration::from_secs(30);

/// Two replicas on one PostgreSQL database: `a` changes, `b` listens, its
/// listener already listening.
async fn replicas() -> (TestStore, Store, Receiver<Change>) {
    let a = testing::postgres();
    let b = Store::connect(a.postgres_pool().expect("on PostgreSQL").config().clone()).unwrap();
    let mut changes = b.changes().expect("PostgreSQL has changes");
    until(&mut changes, Change::Lost).await;
    (a, b, changes)
}

/// Every change received up to and including `wanted`.
async fn until(changes: &mut Receiver<Change>, wanted: Change) -> Vec<Change> {
    let mut seen = Vec::new();
    let arrived = tokio::time::timeout(PATIENCE, async {
        while let Some(change) = next(changes).await {
            seen.push(change);
            if change == wanted {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(arrived, Ok(true), "waiting for {wanted:?}, saw {seen:?}");
    seen
}

/// A bot with a credential, made through `store`; the credential's id and
/// token.
fn bot_with_credential(store: &Store, name: &str) -> (String, String) {
    let bot = Principal::bot(name);
    store.add_principal(&bot, false).unwrap();
    let (credential, token) = store.issue_credential(&bot, "ci", None).unwrap();
    (credential.id, token)
}

fn bearer(token: &str) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    headers
}

#[test]
fn a_sqlite_store_has_no_changes_to_listen_to() {
    assert!(testing::sqlite().changes().is_none());
}

#[test]
fn each_watched_table_names_its_change_and_others_none() {
    assert_eq!(Change::of_table("credentials"), Some(Change::Credentials));
    assert_eq!(Change::of_table("held_writes"), Some(Change::HeldWrites));
    assert_eq!(Change::of_table("audit"), None);
    assert!(Change::AgentGrants.stales_credentials() && !Change::AgentGrants.stales_grants());
    assert!(Change::Principals.stales_grants() && !Change::HeldWrites.stales_grants());
    assert!(Change::Lost.moves_held_writes() && !Change::Grants.moves_held_writes());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revocation_committed_through_one_replica_reaches_the_other_s_changes() {
    let (a, _b, mut changes) = replicas().await;
    let (id, _) = bot_with_credential(&a, "ci");
    until(&mut changes, Change::Credentials).await;
    a.revoke_credential(&id).unwrap();
    until(&mut changes, Change::Credentials).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolled_back_change_and_a_recorded_use_notify_nothing() {
    let (a, _b, mut changes) = replicas().await;
    let (id, _) = bot_with_credential(&a, "ci");
    until(&mut changes, Change::Credentials).await;
    let rolled_back = a.write(|tx| {
        tx.execute(
            "UPDATE credentials SET revoked_at = ?2 WHERE id = ?1",
            params![id, chrono::Utc::now()],
        )?;
        Err::<(), _>(StoreError::Invalid("changed my mind".into()))
    });
    assert!(rolled_back.is_err());
    a.touch_credential(&id, chrono::Utc::now()).unwrap();
    // Notifications arrive in commit order: whatever either made would come
    // before this one.
    a.add_principal(&Principal::bot("marker"), false).unwrap();
    let seen = until(&mut changes, Change::Principals).await;
    assert_eq!(seen, [Change::Principals]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_listener_comes_back_after_its_connection_is_killed_and_says_changes_were_lost() {
    let (a, _b, mut changes) = replicas().await;
    let killed: Vec<bool> = a
        .with(|c| {
            Ok(c.query_map(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = ?1 AND datname = current_database()",
                params![APPLICATION_NAME],
                |r| r.get(0),
            )?)
        })
        .unwrap();
    assert_eq!(killed, [true]);
    until(&mut changes, Change::Lost).await;
    let (id, _) = bot_with_credential(&a, "ci");
    a.revoke_credential(&id).unwrap();
    until(&mut changes, Change::Credentials).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_authenticator_on_one_replica_refuses_a_credential_revoked_through_another_once_told() {
    let (a, b, mut changes) = replicas().await;
    let (id, token) = bot_with_credential(&a, "ci");
    until(&mut changes, Change::Credentials).await;
    let authenticator = Authenticator::new(b.clone());
    // Authenticated, so cached on b for the cache's lifetime.
    authenticator.authenticate(&bearer(&token), "").await.unwrap();
    a.revoke_credential(&id).unwrap();
    let seen = until(&mut changes, Change::Credentials).await;
    // What the server does with each change (app::follow_changes).
    for change in seen {
        if change.stales_credentials() {
            authenticator.forget_all();
        }
    }
    let refused = authenticator.authenticate(&bearer(&token), "").await.unwrap_err();
    assert!(matches!(refused, AuthError::Revoked { .. }), "{refused:?}");
}
