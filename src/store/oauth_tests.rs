use super::*;
use crate::identity::Grant;
use crate::store::testing::{self, TestStore};
use chrono::TimeDelta;

/// A store of each backend, with the person ana in it.
fn stores_with_ana() -> [(TestStore, Principal); 2] {
    testing::both().map(|store| {
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        (store, ana)
    })
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
        consented_with: None,
    }
}

/// Tokens to keep, the refresh token's hash `refresh`.
fn tokens(refresh: &str) -> NewTokens {
    NewTokens {
        access: credential::mint(),
        access_lifetime: TimeDelta::hours(1),
        origin: Origin::default(),
        refresh_sha256: refresh.into(),
    }
}

#[test]
fn a_narrowed_role_is_a_derived_grant_that_ends_with_its_parent_and_at_the_consents_end() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        grant(&store, "g-dev", &ana, "developer");
        let (agent, clusters) = store.add_agent_session(&plan(&ana, &[("g-dev", "viewer")])).unwrap();
        assert_eq!(clusters, vec!["c".to_string()], "{b}");
        let ids = agent.grant_ids.clone().unwrap();
        assert_eq!(ids.len(), 1, "{b}");
        assert_ne!(ids[0], "g-dev", "{b}: a narrower role is its own grant");
        let derived = store
            .grants_of(&ana, "c")
            .unwrap()
            .into_iter()
            .find(|g| g.id == ids[0])
            .unwrap();
        assert_eq!(derived.role, "viewer", "{b}");
        assert!(derived.expires_at <= Utc::now() + TimeDelta::hours(2), "{b}");
        store.revoke_grant("g-dev").unwrap();
        let all = store.list_grants().unwrap();
        let derived = all.iter().find(|g| g.id == ids[0]).unwrap();
        assert!(
            derived.revoked_at.is_some(),
            "{b}: the derived grant ends with its parent"
        );
    }
}

#[test]
fn the_same_role_hands_over_the_persons_grant_itself_and_only_their_own() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        let bob = Principal::person("bob");
        store.add_principal(&bob, false).unwrap();
        grant(&store, "g-ana", &ana, "viewer");
        grant(&store, "g-bob", &bob, "viewer");
        let (agent, clusters) = store.add_agent_session(&plan(&ana, &[("g-ana", "viewer")])).unwrap();
        assert_eq!(agent.grant_ids, Some(vec!["g-ana".to_string()]), "{b}");
        assert!(clusters.is_empty(), "{b}");
        let err = store
            .add_agent_session(&plan(&ana, &[("g-bob", "viewer")]))
            .unwrap_err();
        assert!(err.to_string().contains("not person:ana's own grant"), "{b}: {err}");
    }
}

#[test]
fn a_code_is_exchanged_once_and_a_second_exchange_names_the_session_it_made() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        grant(&store, "g-dev", &ana, "developer");
        let now = Utc::now();
        let made = |store: &Store, hash: &str| {
            store.exchange_code(hash, now, &tokens(&format!("r-{hash}")), |_| {
                Ok::<_, ()>(plan(&ana, &[("g-dev", "viewer")]))
            })
        };
        store.put_code("h1", "{}", now + TimeDelta::minutes(10)).unwrap();
        let Taken::Fresh(Ok((agent, _, _))) = made(&store, "h1").unwrap() else {
            panic!("{b}: the first exchange makes the session")
        };
        assert_eq!(store.code_session("h1").unwrap(), Some(agent.id.clone()), "{b}");
        assert_eq!(made(&store, "h1").unwrap(), Taken::Reused(Some(agent.id)), "{b}");
        store.put_code("h2", "{}", now - TimeDelta::seconds(1)).unwrap();
        assert_eq!(made(&store, "h2").unwrap(), Taken::Unknown, "{b}: expired");
        assert_eq!(made(&store, "nope").unwrap(), Taken::Unknown, "{b}");
        store.put_code("h3", "{}", now + TimeDelta::minutes(10)).unwrap();
        let refused = store
            .exchange_code("h3", now, &tokens("r-h3"), |_| Err::<SessionPlan, _>("wrong verifier"))
            .unwrap();
        assert_eq!(refused, Taken::Fresh(Err("wrong verifier")), "{b}");
        assert!(
            matches!(made(&store, "h3").unwrap(), Taken::Fresh(Ok(_))),
            "{b}: a refused check spends nothing"
        );
    }
}

#[test]
fn of_concurrent_exchanges_of_one_code_one_makes_a_session_and_the_others_name_it() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        grant(&store, "g-dev", &ana, "developer");
        let now = Utc::now();
        store.put_code("h", "{}", now + TimeDelta::minutes(10)).unwrap();
        let outcomes: Vec<_> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..6)
                .map(|_| {
                    scope.spawn(|| {
                        store
                            .exchange_code("h", now, &tokens(&uuid::Uuid::new_v4().to_string()), |_| {
                                Ok::<_, ()>(plan(&ana, &[("g-dev", "viewer")]))
                            })
                            .unwrap()
                    })
                })
                .collect();
            racers.into_iter().map(|racer| racer.join().unwrap()).collect()
        });
        let made: Vec<_> = outcomes
            .iter()
            .filter_map(|taken| match taken {
                Taken::Fresh(Ok((agent, _, _))) => Some(agent.id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(made.len(), 1, "{b}: {outcomes:?}");
        let reused = Taken::Reused(Some(made[0].clone()));
        assert_eq!(
            outcomes.iter().filter(|taken| **taken == reused).count(),
            5,
            "{b}: {outcomes:?}"
        );
        assert_eq!(store.agent_sessions_of(&ana).unwrap().len(), 1, "{b}: one session made");
    }
}

#[test]
fn of_concurrent_uses_of_one_refresh_token_one_is_fresh_and_the_others_reuses() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        grant(&store, "g-dev", &ana, "developer");
        let (agent, _) = store.add_agent_session(&plan(&ana, &[("g-dev", "viewer")])).unwrap();
        store
            .put_refresh_token("r", &agent.id, Utc::now() + TimeDelta::hours(1))
            .unwrap();
        let client = "https://client.example/meta.json";
        let outcomes: Vec<_> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..6)
                .map(|i| {
                    let (store, next) = (&store, tokens(&format!("r{i}")));
                    scope.spawn(move || store.refresh_tokens("r", Utc::now(), client, &next).unwrap())
                })
                .collect();
            racers.into_iter().map(|racer| racer.join().unwrap()).collect()
        });
        let fresh = outcomes
            .iter()
            .filter(|taken| matches!(taken, Refreshed::Fresh(_)))
            .count();
        let reused = Refreshed::Reused(Some(agent.id.clone()));
        assert_eq!(fresh, 1, "{b}: {outcomes:?}");
        assert_eq!(
            outcomes.iter().filter(|taken| **taken == reused).count(),
            5,
            "{b}: {outcomes:?}"
        );
        assert_eq!(store.refresh_token_session("r").unwrap(), Some(agent.id.clone()), "{b}");
    }
}

/// A code's exchange and a refresh spend what they use and keep their
/// tokens in one transaction: tokens that cannot be kept (here a refresh
/// token hash already taken) spend nothing, and the client's retry works
/// rather than reading as a reuse that ends the session.
#[test]
fn an_exchange_or_a_refresh_whose_tokens_are_not_kept_spends_nothing() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        grant(&store, "g-dev", &ana, "developer");
        let now = Utc::now();
        store.put_code("h", "{}", now + TimeDelta::minutes(10)).unwrap();
        let exchange = |tokens: &NewTokens| {
            store.exchange_code("h", now, tokens, |_| Ok::<_, ()>(plan(&ana, &[("g-dev", "viewer")])))
        };
        let (taken, _) = store.add_agent_session(&plan(&ana, &[("g-dev", "viewer")])).unwrap();
        store
            .put_refresh_token("taken", &taken.id, now + TimeDelta::hours(1))
            .unwrap();
        assert!(exchange(&tokens("taken")).is_err(), "{b}");
        assert_eq!(store.code_session("h").unwrap(), None, "{b}: the code is unspent");
        let Taken::Fresh(Ok((agent, _, access))) = exchange(&tokens("r1")).unwrap() else {
            panic!("{b}: the retry makes the session")
        };
        assert_eq!(access.principal, ana, "{b}");
        assert!(
            access
                .expires_at
                .is_some_and(|end| end <= now + TimeDelta::hours(1) + TimeDelta::seconds(5)),
            "{b}"
        );
        let ours = store.agent_of_credential(&access.id).unwrap().map(|a| a.id);
        assert_eq!(ours, Some(agent.id.clone()), "{b}: the access token is the agent's");
        assert_eq!(
            store.refresh_token_session("r1").unwrap(),
            Some(agent.id.clone()),
            "{b}"
        );

        let client = "https://client.example/meta.json";
        let refresh = |tokens: &NewTokens| store.refresh_tokens("r1", Utc::now(), client, tokens);
        assert!(refresh(&tokens("taken")).is_err(), "{b}");
        let Refreshed::Fresh(again) = refresh(&tokens("r2")).unwrap() else {
            panic!("{b}: the retry refreshes")
        };
        assert_eq!(again.0.id, agent.id, "{b}");
        assert!(
            !store.agent(&agent.id).unwrap().unwrap().disabled,
            "{b}: the session goes on"
        );
        assert_eq!(
            refresh(&tokens("r3")).unwrap(),
            Refreshed::Reused(Some(agent.id.clone())),
            "{b}"
        );
        assert!(
            store.agent(&agent.id).unwrap().unwrap().disabled,
            "{b}: a reuse ends it"
        );
    }
}

/// A refresh token sent by another client than its session's ends the
/// session with the refresh, in one transaction.
#[test]
fn a_refresh_token_another_client_sends_ends_its_session() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        grant(&store, "g-dev", &ana, "developer");
        let (agent, _) = store.add_agent_session(&plan(&ana, &[("g-dev", "viewer")])).unwrap();
        store
            .put_refresh_token("r", &agent.id, Utc::now() + TimeDelta::hours(1))
            .unwrap();
        let other = store.refresh_tokens("r", Utc::now(), "https://thief.example/meta.json", &tokens("r2"));
        assert_eq!(other.unwrap(), Refreshed::OtherClient, "{b}");
        assert!(store.agent(&agent.id).unwrap().unwrap().disabled, "{b}");
        assert_eq!(store.refresh_token_session("r2").unwrap(), None, "{b}: nothing kept");
    }
}

#[test]
fn ending_a_session_revokes_its_credentials_and_refresh_tokens_and_disables_it() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        grant(&store, "g-dev", &ana, "developer");
        let (agent, _) = store.add_agent_session(&plan(&ana, &[("g-dev", "viewer")])).unwrap();
        let (cred, _) = store.issue_agent_credential(&agent, None).unwrap();
        let later = Utc::now() + TimeDelta::hours(1);
        store.put_refresh_token("r1", &agent.id, later).unwrap();
        store.put_refresh_token("r2", &agent.id, later).unwrap();
        assert!(
            matches!(store.take_refresh_token("r1", Utc::now()).unwrap(), Taken::Fresh((id, _)) if id == agent.id),
            "{b}"
        );
        assert_eq!(
            store.take_refresh_token("r1", Utc::now()).unwrap(),
            Taken::Reused(Some(agent.id.clone())),
            "{b}"
        );
        store.end_agent_session(&agent.id).unwrap();
        assert!(store.agent(&agent.id).unwrap().unwrap().disabled, "{b}");
        let creds = store.list_credentials(Some(&ana)).unwrap();
        assert!(
            creds.iter().find(|c| c.id == cred.id).unwrap().revoked_at.is_some(),
            "{b}"
        );
        assert_eq!(
            store.take_refresh_token("r2", Utc::now()).unwrap(),
            Taken::Reused(Some(agent.id.clone())),
            "{b}"
        );
        let sessions = store.agent_sessions_of(&ana).unwrap();
        assert_eq!(sessions.len(), 1, "{b}");
        assert_eq!(sessions[0].client_name.as_deref(), Some("Example"), "{b}");
        let derived = &agent.grant_ids.unwrap()[0];
        let grants = store.list_grants().unwrap();
        let derived = grants.iter().find(|g| &g.id == derived).unwrap();
        assert!(derived.revoked_at.is_some(), "{b}");
    }
}

#[test]
fn codes_and_refresh_tokens_past_their_end_are_swept() {
    for (store, ana) in stores_with_ana() {
        let b = store.backend;
        grant(&store, "g-dev", &ana, "developer");
        let (agent, _) = store.add_agent_session(&plan(&ana, &[("g-dev", "viewer")])).unwrap();
        let now = Utc::now();
        store.put_code("old", "{}", now - TimeDelta::seconds(1)).unwrap();
        store.put_code("new", "{}", now + TimeDelta::minutes(10)).unwrap();
        store
            .put_refresh_token("old", &agent.id, now - TimeDelta::seconds(1))
            .unwrap();
        store
            .put_refresh_token("new", &agent.id, now + TimeDelta::hours(1))
            .unwrap();
        assert_eq!(store.sweep_oauth(now).unwrap(), 2, "{b}");
        assert_eq!(store.refresh_token_session("old").unwrap(), None, "{b}");
        assert_eq!(
            store.refresh_token_session("new").unwrap(),
            Some(agent.id.clone()),
            "{b}"
        );
        assert_eq!(
            store.agent_sessions_of_agent(&agent.id).unwrap().map(|s| s.agent),
            Some(agent),
            "{b}"
        );
    }
}
