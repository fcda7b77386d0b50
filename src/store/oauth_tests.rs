use super::*;
use crate::identity::Grant;
use chrono::TimeDelta;

fn store_with_ana() -> (tempfile::TempDir, Store, Principal) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let ana = Principal::person("ana");
    store.add_principal(&ana, false).unwrap();
    (dir, store, ana)
}

fn grant(store: &Store, id: &str, who: &Principal, role: &str) -> Grant {
    let grant = Grant {
        id: id.into(),
        subject: who.clone(),
        cluster: "c".into(),
        namespace: Some("shop".into()),
        role: role.into(),
        expires_at: Utc::now() + TimeDelta::hours(8),
        granted_by: "t".into(),
        created_at: Utc::now(),
        revoked_at: None,
    };
    store.add_grant(&grant).unwrap();
    grant
}

fn plan(ana: &Principal, grants: &[(&str, &str)]) -> SessionPlan {
    SessionPlan {
        person: ana.clone(),
        client_id: "https://client.example/meta.json".into(),
        client_name: "Example".into(),
        grants: grants.iter().map(|(g, r)| (g.to_string(), r.to_string())).collect(),
        until: Utc::now() + TimeDelta::hours(2),
        writes_need_approval: true,
    }
}

#[test]
fn a_narrowed_role_is_a_derived_grant_that_ends_with_its_parent_and_at_the_consents_end() {
    let (_dir, store, ana) = store_with_ana();
    grant(&store, "g-dev", &ana, "developer");
    let (agent, clusters) = store.add_agent_session(&plan(&ana, &[("g-dev", "viewer")])).unwrap();
    assert_eq!(clusters, vec!["c".to_string()]);
    let ids = agent.grant_ids.clone().unwrap();
    assert_eq!(ids.len(), 1);
    assert_ne!(ids[0], "g-dev", "a narrower role is its own grant");
    let derived = store
        .grants_of(&ana, "c")
        .unwrap()
        .into_iter()
        .find(|g| g.id == ids[0])
        .unwrap();
    assert_eq!(derived.role, "viewer");
    assert!(derived.expires_at <= Utc::now() + TimeDelta::hours(2));
    store.revoke_grant("g-dev").unwrap();
    let all = store.list_grants().unwrap();
    let derived = all.iter().find(|g| g.id == ids[0]).unwrap();
    assert!(derived.revoked_at.is_some(), "the derived grant ends with its parent");
}

#[test]
fn the_same_role_hands_over_the_persons_grant_itself_and_only_their_own() {
    let (_dir, store, ana) = store_with_ana();
    let bob = Principal::person("bob");
    store.add_principal(&bob, false).unwrap();
    grant(&store, "g-ana", &ana, "viewer");
    grant(&store, "g-bob", &bob, "viewer");
    let (agent, clusters) = store.add_agent_session(&plan(&ana, &[("g-ana", "viewer")])).unwrap();
    assert_eq!(agent.grant_ids, Some(vec!["g-ana".to_string()]));
    assert!(clusters.is_empty());
    let err = store
        .add_agent_session(&plan(&ana, &[("g-bob", "viewer")]))
        .unwrap_err();
    assert!(err.to_string().contains("not person:ana's own grant"), "{err}");
}

#[test]
fn a_code_is_exchanged_once_and_a_second_exchange_names_the_session_it_made() {
    let (_dir, store, ana) = store_with_ana();
    grant(&store, "g-dev", &ana, "developer");
    let now = Utc::now();
    let made =
        |store: &Store, hash: &str| store.exchange_code(hash, now, |_| Ok::<_, ()>(plan(&ana, &[("g-dev", "viewer")])));
    store.put_code("h1", "{}", now + TimeDelta::minutes(10)).unwrap();
    let Taken::Fresh(Ok((agent, _))) = made(&store, "h1").unwrap() else {
        panic!("the first exchange makes the session")
    };
    assert_eq!(made(&store, "h1").unwrap(), Taken::Reused(Some(agent.id)));
    store.put_code("h2", "{}", now - TimeDelta::seconds(1)).unwrap();
    assert_eq!(made(&store, "h2").unwrap(), Taken::Unknown, "expired");
    assert_eq!(made(&store, "nope").unwrap(), Taken::Unknown);
    store.put_code("h3", "{}", now + TimeDelta::minutes(10)).unwrap();
    let refused = store
        .exchange_code("h3", now, |_| Err::<SessionPlan, _>("wrong verifier"))
        .unwrap();
    assert_eq!(refused, Taken::Fresh(Err("wrong verifier")));
    assert!(
        matches!(made(&store, "h3").unwrap(), Taken::Fresh(Ok(_))),
        "a refused check spends nothing"
    );
}

#[test]
fn ending_a_session_revokes_its_credentials_and_refresh_tokens_and_disables_it() {
    let (_dir, store, ana) = store_with_ana();
    grant(&store, "g-dev", &ana, "developer");
    let (agent, _) = store.add_agent_session(&plan(&ana, &[("g-dev", "viewer")])).unwrap();
    let (cred, _) = store.issue_agent_credential(&agent, None).unwrap();
    let later = Utc::now() + TimeDelta::hours(1);
    store.put_refresh_token("r1", &agent.id, later).unwrap();
    store.put_refresh_token("r2", &agent.id, later).unwrap();
    assert!(matches!(store.take_refresh_token("r1", Utc::now()).unwrap(), Taken::Fresh((id, _)) if id == agent.id));
    assert_eq!(
        store.take_refresh_token("r1", Utc::now()).unwrap(),
        Taken::Reused(Some(agent.id.clone()))
    );
    store.end_agent_session(&agent.id).unwrap();
    assert!(store.agent(&agent.id).unwrap().unwrap().disabled);
    let creds = store.list_credentials(Some(&ana)).unwrap();
    assert!(creds.iter().find(|c| c.id == cred.id).unwrap().revoked_at.is_some());
    assert_eq!(
        store.take_refresh_token("r2", Utc::now()).unwrap(),
        Taken::Reused(Some(agent.id.clone()))
    );
    let sessions = store.agent_sessions_of(&ana).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].client_name.as_deref(), Some("Example"));
    let derived = &agent.grant_ids.unwrap()[0];
    assert!(store
        .list_grants()
        .unwrap()
        .iter()
        .find(|g| &g.id == derived)
        .unwrap()
        .revoked_at
        .is_some());
}
