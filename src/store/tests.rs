use super::testing;
use super::*;
use crate::identity::{credential, Grant, PrincipalKind};
use chrono::{SubsecRound, Utc};

#[test]
fn an_issued_credential_is_found_by_its_hash_only() {
    for store in testing::both() {
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let (cred, token) = store.issue_credential(&ana, "laptop", None).unwrap();
        let found = store.lookup_credential(&credential::hash(&token)).unwrap().unwrap();
        assert_eq!(found.credential, cred, "{}", store.backend);
        assert!(!found.owner_disabled, "{}", store.backend);
        assert!(found.origin.is_none(), "{}", store.backend);
        let other = store.lookup_credential(&credential::hash("pcl_other")).unwrap();
        assert!(other.is_none(), "{}", store.backend);
        // By id, only as its owner's.
        assert_eq!(
            store.credential_of(&ana, &cred.id).unwrap(),
            Some(cred.clone()),
            "{}",
            store.backend
        );
        let bob = Principal::person("bob");
        assert_eq!(store.credential_of(&bob, &cred.id).unwrap(), None, "{}", store.backend);
        assert_eq!(store.credential_of(&Principal::bot("ana"), &cred.id).unwrap(), None);
        // Live ones only: not the revoked, not the expired, not another's.
        let (gone, _) = store.issue_credential(&ana, "old", None).unwrap();
        store.revoke_credential(&gone.id).unwrap();
        let past = Utc::now() - chrono::TimeDelta::minutes(1);
        store.issue_credential(&ana, "expired", Some(past)).unwrap();
        store.add_principal(&bob, false).unwrap();
        store.issue_credential(&bob, "laptop", None).unwrap();
        let live = store.live_credentials_of(&ana, Utc::now()).unwrap();
        assert_eq!(live, vec![cred.clone()], "{}", store.backend);
        let agent = store.add_agent(&ana, "helper", &[], false).unwrap();
        assert_eq!(store.agent_names().unwrap(), vec![(agent.id, "helper".to_string())]);
    }
}

#[test]
fn a_credential_keeps_its_origin_and_an_unknown_audience_fails_its_lookup() {
    for store in testing::both() {
        let ci = Principal::bot("ci");
        store.add_principal(&ci, false).unwrap();
        let origin = crate::identity::Origin {
            audience: None,
            via: "ci rule=r1".into(),
        };
        let (_, token) = store.issue_credential_with(&ci, "job", None, &origin).unwrap();
        let found = store.lookup_credential(&credential::hash(&token)).unwrap().unwrap();
        assert_eq!(found.origin, Some(origin), "{}", store.backend);
        store
            .with(|c| {
                c.execute(
                    "UPDATE credentials SET audience = 'from-a-later-release' WHERE owner = 'ci'",
                    sql::params![],
                )?;
                Ok(())
            })
            .unwrap();
        let refused = store.lookup_credential(&credential::hash(&token));
        assert!(matches!(refused, Err(StoreError::Database(_))), "{}", store.backend);
    }
}

#[test]
fn revoking_and_disabling_show_in_lookups() {
    for store in testing::both() {
        let bot = Principal::bot("ci");
        store.add_principal(&bot, true).unwrap();
        let (cred, token) = store.issue_credential(&bot, "ci", None).unwrap();
        store.revoke_credential(&cred.id).unwrap();
        store.disable_principal(&bot).unwrap();
        let found = store.lookup_credential(&credential::hash(&token)).unwrap().unwrap();
        assert!(found.credential.revoked_at.is_some(), "{}", store.backend);
        assert!(found.owner_disabled, "{}", store.backend);
        assert!(
            matches!(store.revoke_credential("nope"), Err(StoreError::NotFound(_))),
            "{}",
            store.backend
        );
        assert!(
            matches!(
                store.disable_principal(&Principal::bot("nope")),
                Err(StoreError::NotFound(_))
            ),
            "{}",
            store.backend
        );
    }
}

#[test]
fn credentials_are_listed_oldest_first_all_or_one_owners_with_their_last_use() {
    for store in testing::both() {
        let (ana, ci) = (Principal::person("ana"), Principal::bot("ci"));
        store.add_principal(&ana, false).unwrap();
        store.add_principal(&ci, false).unwrap();
        let (first, _) = store.issue_credential(&ana, "laptop", None).unwrap();
        let (second, _) = store.issue_credential(&ci, "job", None).unwrap();
        let (third, _) = store.issue_credential(&ana, "desk", None).unwrap();
        let used = Utc::now().trunc_subsecs(6);
        store.touch_credential(&third.id, used).unwrap();
        let ids = |owner| -> Vec<String> {
            store
                .list_credentials(owner)
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect()
        };
        assert_eq!(
            ids(None),
            [first.id.as_str(), &second.id, &third.id],
            "{}",
            store.backend
        );
        assert_eq!(ids(Some(&ana)), [first.id.as_str(), &third.id], "{}", store.backend);
        let listed = store.list_credentials(Some(&ana)).unwrap();
        assert_eq!(listed[1].last_used_at, Some(used), "{}", store.backend);
    }
}

#[test]
fn names_that_would_confuse_the_cluster_are_refused() {
    for store in testing::both() {
        for bad in ["", "Ana", "a b", "a:b", "-x"] {
            assert!(store.add_principal(&Principal::person(bad), false).is_err(), "{bad}");
        }
        assert!(
            matches!(
                store.issue_credential(&Principal::person("ghost"), "x", None),
                Err(StoreError::NotFound(_))
            ),
            "{}",
            store.backend
        );
    }
}

#[test]
fn a_principal_is_added_once_and_listed_by_kind_with_its_flags() {
    for store in testing::both() {
        store.add_principal(&Principal::person("bo"), false).unwrap();
        store.add_principal(&Principal::person("ana"), false).unwrap();
        store.add_principal(&Principal::bot("ci"), true).unwrap();
        assert!(
            matches!(
                store.add_principal(&Principal::person("ana"), false),
                Err(StoreError::AlreadyExists(_))
            ),
            "{}",
            store.backend
        );
        let people = store.list_principals(PrincipalKind::Person).unwrap();
        let names: Vec<&str> = people.iter().map(|p| p.principal.name.as_str()).collect();
        assert_eq!(names, ["ana", "bo"], "{}", store.backend);
        let bots = store.list_principals(PrincipalKind::Bot).unwrap();
        assert_eq!(bots.len(), 1, "{}", store.backend);
        assert!(bots[0].writes_need_approval && !bots[0].disabled, "{}", store.backend);
    }
}

#[test]
fn only_enabled_people_marked_admin_are_admins() {
    for store in testing::both() {
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        assert!(!store.is_admin(&ana).unwrap(), "{}", store.backend);
        store.set_admin(&ana, true).unwrap();
        assert!(store.is_admin(&ana).unwrap(), "{}", store.backend);
        assert!(
            store.list_principals(PrincipalKind::Person).unwrap()[0].admin,
            "{}",
            store.backend
        );
        store.disable_principal(&ana).unwrap();
        assert!(!store.is_admin(&ana).unwrap(), "{}", store.backend);
        assert!(
            !store.is_admin(&Principal::person("ghost")).unwrap(),
            "{}",
            store.backend
        );
        assert!(
            matches!(
                store.set_admin(&Principal::person("ghost"), true),
                Err(StoreError::NotFound(_))
            ),
            "{}",
            store.backend
        );
    }
}

#[test]
fn grants_are_found_by_subject_and_cluster_until_revoked() {
    for store in testing::both() {
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let now = Utc::now().trunc_subsecs(6);
        let grant = |id: &str, cluster: &str| Grant {
            id: id.into(),
            subject: ana.clone(),
            cluster: cluster.into(),
            namespace: Some("shop".into()),
            role: "view".into(),
            expires_at: now + chrono::TimeDelta::hours(1),
            granted_by: "admin".into(),
            created_at: now,
            revoked_at: None,
        };
        let (g1, g2, g3) = (grant("g1", "sim"), grant("g2", "prod"), grant("g3", "sim"));
        for g in [&g1, &g2, &g3] {
            store.add_grant(g).unwrap();
        }
        let ghost = Grant {
            subject: Principal::bot("ghost"),
            ..grant("g4", "sim")
        };
        assert!(
            matches!(store.add_grant(&ghost), Err(StoreError::NotFound(_))),
            "{}",
            store.backend
        );
        assert_eq!(
            store.grants_of(&ana, "sim").unwrap(),
            [g1.clone(), g3.clone()],
            "{}",
            store.backend
        );
        store.revoke_grant("g1").unwrap();
        assert_eq!(store.grants_of(&ana, "sim").unwrap(), [g3], "{}", store.backend);
        let all = store.list_grants().unwrap();
        let ids: Vec<&str> = all.iter().map(|g| g.id.as_str()).collect();
        assert_eq!(ids, ["g1", "g2", "g3"], "{}", store.backend);
        assert!(all[0].revoked_at.is_some(), "{}", store.backend);
        assert!(
            matches!(store.revoke_grant("g9"), Err(StoreError::NotFound(_))),
            "{}",
            store.backend
        );
    }
}

#[test]
fn migrations_apply_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    Store::open(&path)
        .unwrap()
        .add_principal(&Principal::person("ana"), false)
        .unwrap();
    let again = Store::open(&path).unwrap();
    assert_eq!(again.list_principals(PrincipalKind::Person).unwrap().len(), 1);
}

#[test]
fn disabling_a_person_ends_their_agents_and_spends_their_refresh_tokens() {
    for store in testing::both() {
        let backend = store.backend;
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let agent = store.add_agent(&ana, "helper", &[], false).unwrap();
        let later = Utc::now() + chrono::TimeDelta::hours(1);
        store.put_refresh_token("r1", &agent.id, later).unwrap();
        store.disable_principal(&ana).unwrap();
        assert!(store.agent(&agent.id).unwrap().unwrap().disabled, "{backend}");
        let taken = store.take_refresh_token("r1", Utc::now()).unwrap();
        assert!(matches!(taken, crate::store::Taken::Reused(_)), "{backend}: {taken:?}");
    }
}

/// Racers that lost pause before running again: never past the bound, a
/// short pause first and longer ones later, and not all alike.
#[test]
fn a_lost_transaction_waits_a_random_growing_bounded_pause_before_it_runs_again() {
    let first: Vec<_> = (0..200).map(|_| retry_pause(1)).collect();
    let late: Vec<_> = (0..200).map(|_| retry_pause(WRITE_ATTEMPTS - 1)).collect();
    assert!(
        first.iter().all(|p| *p < std::time::Duration::from_millis(4)),
        "{first:?}"
    );
    let bound = std::time::Duration::from_millis(RETRY_PAUSE_MAX_MS);
    assert!(late.iter().all(|p| *p < bound), "{late:?}");
    assert!(
        late.iter().any(|p| *p > std::time::Duration::from_millis(4)),
        "{late:?}"
    );
    assert!(first.iter().any(|p| *p != first[0]), "{first:?}");
}
