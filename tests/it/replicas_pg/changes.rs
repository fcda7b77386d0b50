//! What one replica (or the operator's CLI) changes reaches another
//! replica's caches within [`WITHIN`] of the commit: a revoked credential,
//! a disabled person and a revoked grant are refused by a replica that had
//! just let them through, a new grant and an approved access request are
//! honoured by one that had just refused.

use super::{by, on_postgres, Replica, CACHE_TTL, WITHIN};
use crate::harness::{Portcullis, CLUSTER};
use crate::rbac::bound;
use crate::serve::configmaps;
use http::{Method, StatusCode};
use portcullis::identity::Principal;
use serde_json::json;
use std::time::{Duration, Instant};

/// Halt `env`'s own server and start replicas `a` and `b` on its database
/// (waiting until each answers `token`).
async fn two_replicas(env: &mut Portcullis, token: &str) -> (Replica, Replica) {
    env.halt().await;
    tokio::join!(Replica::start(env, "a", token), Replica::start(env, "b", token))
}

/// Poll `replica` with `token`'s small GET until it answers `expected`, by
/// [`WITHIN`] after `committed`.
async fn answers(replica: &Replica, token: &str, expected: StatusCode, committed: Instant, what: &str) {
    by(committed + WITHIN, what, async || {
        let status = replica.raw().get(&configmaps(), token).await.status;
        if status == expected {
            Ok(())
        } else {
            Err(status)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_revoked_or_a_person_disabled_through_one_replica_is_refused_at_once_by_another_that_had_just_let_it_in(
) {
    let mut env = on_postgres(|c| c.store.cache_ttl = CACHE_TTL).await;
    let ana = env.person("ana", &[("viewer", Some("shop"))]);
    let bo = env.person("bo", &[("viewer", Some("shop"))]);
    let (laptop, laptop_token) = env
        .store
        .issue_credential(&Principal::person("ana"), "laptop", None)
        .unwrap();
    let (a, b) = two_replicas(&mut env, &ana).await;

    // B authenticates the laptop's credential (and caches it), then ana
    // revokes it through A's person API.
    assert_eq!(b.raw().get(&configmaps(), &laptop_token).await.status, 200);
    let revoke = format!("credentials/{}/revoke", laptop.id);
    let (code, answer) = a.api(Method::POST, &revoke, &ana, json!({})).await;
    assert_eq!((code, &answer["revoked"]), (200, &json!(laptop.id)), "{answer}");
    let revoked = Instant::now();
    answers(
        &b,
        &laptop_token,
        StatusCode::UNAUTHORIZED,
        revoked,
        "B refuses the revoked credential",
    )
    .await;
    assert_eq!(a.raw().get(&configmaps(), &laptop_token).await.status, 401);
    assert_eq!(
        b.raw().get(&configmaps(), &ana).await.status,
        200,
        "ana's other credential still works"
    );

    // The operator disables bo with the CLI while B has him cached.
    assert_eq!(b.raw().get(&configmaps(), &bo).await.status, 200);
    crate::rbac::cli_ok(&env, &["admin", "person", "disable", "bo"]);
    let disabled = Instant::now();
    answers(
        &b,
        &bo,
        StatusCode::UNAUTHORIZED,
        disabled,
        "B refuses the disabled person",
    )
    .await;
    assert_eq!(a.raw().get(&configmaps(), &bo).await.status, 401);
    tokio::join!(a.serve.terminate(), b.serve.terminate());
    env.stop().await;
}

/// Ask, as `token` through `replica`, to be developer in shop for an hour;
/// the request's id.
async fn ask_access(replica: &Replica, token: &str) -> String {
    let ask = json!({
        "cluster": CLUSTER, "role": "developer", "namespace": "shop",
        "duration_seconds": 3600, "reason": "ship the hotfix",
    });
    let (code, answer) = replica.api(Method::POST, "access-requests", token, ask).await;
    assert_eq!(code, 200, "{answer}");
    answer["request"]["id"].as_str().unwrap().to_string()
}

/// Store a grant of viewer in shop for `login`, for an hour, without a
/// pass.
fn store_viewer_grant(env: &Portcullis, login: &str) {
    let hour = Duration::from_secs(3600);
    let grant = portcullis::cli::new_grant(
        &env.config,
        Principal::person(login),
        CLUSTER,
        "viewer",
        Some("shop".into()),
        hour,
        "test",
    )
    .unwrap();
    env.store.add_grant(&grant).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_stops_and_a_new_grant_or_an_approved_access_request_starts_applying_at_once_on_another_replica(
) {
    let mut env = on_postgres(|c| c.store.cache_ttl = CACHE_TTL).await;
    let watcher = env.person("watcher", &[("viewer", Some("shop"))]);
    let (ana, ana_grants) = env.person_with_ttl("ana", &[("admin", Some("shop"))], Duration::from_secs(3600));
    let cy = env.person("cy", &[]);
    let bo = env.person("bo", &[]);
    let di = env.person("di", &[("admin", Some("shop"))]);
    let (a, b) = two_replicas(&mut env, &watcher).await;

    // Revoked in the store alone: its binding stays in the cluster, so only
    // B's dropping the grant from its cache refuses ana.
    assert_eq!(b.raw().get(&configmaps(), &ana).await.status, 200);
    env.store.revoke_grant(&ana_grants[0].id).unwrap();
    let revoked = Instant::now();
    answers(
        &b,
        &ana,
        StatusCode::FORBIDDEN,
        revoked,
        "B stops sending the revoked grant",
    )
    .await;
    assert!(bound(&env, "shop", &ana_grants[0].id).await, "no pass unbound it");

    // A new grant for cy, bound by a pass, while B has cached that he has none.
    assert_eq!(b.raw().get(&configmaps(), &cy).await.status, 403);
    store_viewer_grant(&env, "cy");
    let granted = Instant::now();
    env.reconcile().await;
    answers(&b, &cy, StatusCode::OK, granted, "B sends cy's new grant").await;

    // bo asks through A; an admin of shop approves it there, while B has
    // cached that bo has no grant.
    let id = ask_access(&a, &bo).await;
    assert_eq!(b.raw().get(&configmaps(), &bo).await.status, 403);
    let approve = format!("access-requests/{id}/approve");
    let (code, answer) = a.api(Method::POST, &approve, &di, json!({})).await;
    assert_eq!(code, 200, "{answer}");
    assert!(
        answer["binding"].as_str().unwrap().contains("the grant is bound"),
        "{answer}"
    );
    let approved = Instant::now();
    answers(&b, &bo, StatusCode::OK, approved, "B sends bo's approved grant").await;
    tokio::join!(a.serve.terminate(), b.serve.terminate());
    env.stop().await;
}
