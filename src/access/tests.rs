use super::*;
use crate::audit::query::Filter;
use crate::audit::sqlite::SqliteAuditStore;
use crate::audit::store::AuditStore;

const CONFIG: &str = r#"
listen = "127.0.0.1:8443"
public_url = "https://127.0.0.1:8443"
data_dir = "/tmp/unused"
protected_namespaces = ["kube-system"]
[tls]
cert_file = "c.pem"
key_file = "k.pem"
[[clusters]]
name = "prod"
server = "https://127.0.0.1:6443"
ca_file = "ca.pem"
token_file = "token"
[access]
request_ttl = "1h"
"#;

struct Env {
    _dir: tempfile::TempDir,
    store: Store,
    config: Config,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let config = Config::from_sources(CONFIG, Vec::new()).unwrap();
    for login in ["ana", "bo"] {
        store.add_principal(&Principal::person(login), false).unwrap();
    }
    let admin = crate::identity::grant::new_grant(
        &config,
        Principal::person("ana"),
        "prod",
        "admin",
        Some("shop".into()),
        Duration::from_secs(3600),
        "t",
    )
    .unwrap();
    store.add_grant(&admin).unwrap();
    Env {
        _dir: dir,
        store,
        config,
    }
}

fn ask(role: &str, namespace: Option<&str>, duration: u64) -> AccessAsk {
    AccessAsk {
        cluster: "prod".into(),
        role: role.into(),
        namespace: namespace.map(Into::into),
        duration: Duration::from_secs(duration),
        reason: "deploy the hotfix".into(),
    }
}

fn bo() -> Requester {
    Requester {
        principal: Principal::person("bo"),
        agent_id: None,
    }
}

/// Bo, admin of the whole cluster for four hours (the role's longest).
fn bo_cluster_admin(env: &Env) {
    let bo = crate::identity::grant::new_grant(
        &env.config,
        Principal::person("bo"),
        "prod",
        "cluster-admin",
        None,
        Duration::from_secs(4 * 3600),
        "t",
    )
    .unwrap();
    env.store.add_grant(&bo).unwrap();
}

/// Ana's agent `helper`, as a requester.
fn anas_agent(env: &Env) -> Requester {
    let ana = Principal::person("ana");
    let agent = env.store.add_agent(&ana, "helper", &[], false).unwrap();
    Requester {
        principal: ana,
        agent_id: Some(agent.id),
    }
}

fn audit_verbs(store: &Store) -> Vec<(String, String, u16)> {
    let rows = SqliteAuditStore::open(store.path())
        .unwrap()
        .query(&Filter::default())
        .unwrap();
    rows.into_iter()
        .map(|r| (r.row.verb, r.row.login, r.row.code))
        .collect()
}

#[test]
fn an_approved_request_becomes_a_grant_of_the_requester_and_every_step_is_audited() {
    let env = env();
    let request = request_access(&env.store, &env.config, &bo(), &ask("developer", Some("shop"), 7200)).unwrap();
    assert_eq!(request.state, AccessState::Pending);
    let (approved, grant) = approve(&env.store, &env.config, &request.id, "ana", Some("on call")).unwrap();
    assert_eq!(
        (
            approved.state,
            approved.decided_by.as_deref(),
            approved.decision_reason.as_deref()
        ),
        (AccessState::Approved, Some("ana"), Some("on call"))
    );
    assert_eq!(approved.grant_id.as_deref(), Some(grant.id.as_str()));
    assert_eq!(
        (grant.subject.clone(), grant.role.as_str(), grant.granted_by.as_str()),
        (Principal::person("bo"), "developer", "ana")
    );
    // Two hours asked; ana's admin grant, her authority to give it, ends
    // in one: the grant ends with it.
    let hers = env
        .store
        .grants_of(&Principal::person("ana"), "prod")
        .unwrap()
        .remove(0);
    assert_eq!(
        grant.expires_at, hers.expires_at,
        "no longer than the approving admin's grant"
    );
    assert!(env
        .store
        .grants_of(&Principal::person("bo"), "prod")
        .unwrap()
        .iter()
        .any(|g| g.id == grant.id));
    assert!(matches!(
        approve(&env.store, &env.config, &request.id, "ana", None),
        Err(AccessError::NotPending { .. })
    ));
    let verbs = audit_verbs(&env.store);
    assert_eq!(
        verbs,
        [
            ("request".into(), "bo".into(), 201),
            ("approve".into(), "ana".into(), 200)
        ]
    );
}

#[test]
fn the_requester_cannot_approve_its_own_request_and_the_attempt_is_audited() {
    let env = env();
    let ana = Requester {
        principal: Principal::person("ana"),
        agent_id: None,
    };
    let request = request_access(&env.store, &env.config, &ana, &ask("viewer", Some("shop"), 600)).unwrap();
    let err = approve(&env.store, &env.config, &request.id, "ana", None).unwrap_err();
    assert!(
        matches!(&err, AccessError::NotAllowed(why) if why.contains("cannot decide")),
        "{err}"
    );
    assert!(
        matches!(
            approve(&env.store, &env.config, &request.id, "bo", None),
            Err(AccessError::NotAllowed(_))
        ),
        "bo is no admin"
    );
    assert_eq!(
        env.store.access_request(&request.id).unwrap().unwrap().state,
        AccessState::Pending
    );
    let verbs = audit_verbs(&env.store);
    assert_eq!(verbs[1], ("approve".into(), "ana".into(), 403));
}

#[test]
fn a_denied_request_makes_no_grant_and_keeps_the_reason() {
    let env = env();
    let request = request_access(
        &env.store,
        &env.config,
        &bo(),
        &ask("secrets-reader", Some("shop"), 600),
    )
    .unwrap();
    let denied = deny(&env.store, &request.id, "ana", Some("use the vault")).unwrap();
    assert_eq!(
        (denied.state, denied.decision_reason.as_deref()),
        (AccessState::Denied, Some("use the vault"))
    );
    assert!(env
        .store
        .grants_of(&Principal::person("bo"), "prod")
        .unwrap()
        .is_empty());
    assert_eq!(audit_verbs(&env.store)[1], ("deny".into(), "ana".into(), 200));
}

#[test]
fn an_undecided_request_expires_once_and_can_no_longer_be_approved() {
    let mut env = env();
    env.config.access.request_ttl = Duration::ZERO;
    let request = request_access(&env.store, &env.config, &bo(), &ask("viewer", Some("shop"), 600)).unwrap();
    let listed = list(&env.store).unwrap();
    assert_eq!(listed[0].state, AccessState::Expired);
    assert!(expire_pending(&env.store).unwrap().is_empty(), "expired once");
    let err = approve(&env.store, &env.config, &request.id, "ana", None).unwrap_err();
    assert!(matches!(err, AccessError::NotPending { state: "expired", .. }), "{err}");
    assert_eq!(audit_verbs(&env.store)[1], ("expire".into(), "bo".into(), 200));
}

/// Every console view and agent write reads the pending requests: one
/// requester (with its agents) has at most `MAX_PENDING` waiting; an
/// expired one no longer counts.
#[test]
fn a_requester_has_at_most_twenty_requests_pending() {
    let mut env = env();
    let ttl = env.config.access.request_ttl;
    // Requests past their expiry, decided or not, do not count.
    env.config.access.request_ttl = Duration::ZERO;
    for _ in 0..MAX_PENDING + 5 {
        request_access(&env.store, &env.config, &bo(), &ask("viewer", Some("shop"), 600)).unwrap();
    }
    env.config.access.request_ttl = ttl;
    for _ in 0..MAX_PENDING {
        request_access(&env.store, &env.config, &bo(), &ask("viewer", Some("shop"), 600)).unwrap();
    }
    let refused = request_access(&env.store, &env.config, &bo(), &ask("viewer", Some("shop"), 600)).unwrap_err();
    assert!(
        refused.to_string().contains("you have 20 access requests waiting"),
        "{refused}"
    );
    // The refused request is on record too, as asked and not made.
    let verbs = audit_verbs(&env.store);
    assert_eq!(verbs.last(), Some(&("request".into(), "bo".into(), 403)), "{verbs:?}");
    assert_eq!(env.store.list_access_requests().unwrap().len(), 2 * MAX_PENDING + 5);
    // Others are not held to bo's.
    request_access(
        &env.store,
        &env.config,
        &anas_agent(&env),
        &ask("viewer", Some("shop"), 600),
    )
    .unwrap();
}

#[test]
fn a_request_is_checked_like_a_grant_before_it_is_stored() {
    let env = env();
    let refused = |a: AccessAsk| {
        request_access(&env.store, &env.config, &bo(), &a)
            .unwrap_err()
            .to_string()
    };
    assert!(refused(ask("cluster-admin", None, 5 * 3600)).contains("at most 4h"));
    assert!(refused(ask("viewer", Some("kube-system"), 60)).contains("protected"));
    assert!(refused(ask("wizard", None, 60)).contains("unknown role"));
    assert!(refused(AccessAsk {
        reason: "  ".into(),
        ..ask("viewer", None, 60)
    })
    .contains("reason"));
    let ghost = Requester {
        principal: Principal::bot("ghost"),
        agent_id: None,
    };
    assert!(request_access(&env.store, &env.config, &ghost, &ask("viewer", None, 60)).is_err());
    assert!(env.store.list_access_requests().unwrap().is_empty());
}

#[test]
fn a_delegated_agents_approved_request_is_given_to_the_agent_and_capped_by_its_persons_grant() {
    let env = env();
    let ana = Principal::person("ana");
    let hers = crate::identity::grant::new_grant(
        &env.config,
        ana.clone(),
        "prod",
        "viewer",
        Some("payments".into()),
        Duration::from_secs(1800),
        "t",
    )
    .unwrap();
    env.store.add_grant(&hers).unwrap();
    let agent = env.store.add_agent(&ana, "helper", &[], false).unwrap();
    let requester = Requester {
        principal: ana.clone(),
        agent_id: Some(agent.id.clone()),
    };
    let request = request_access(
        &env.store,
        &env.config,
        &requester,
        &ask("viewer", Some("payments"), 7200),
    )
    .unwrap();
    let (_, grant) = approve(&env.store, &env.config, &request.id, "ana", None).unwrap();
    assert_eq!(grant.expires_at, hers.expires_at, "no longer than her own grant");
    let agent = env
        .store
        .list_agents()
        .unwrap()
        .into_iter()
        .find(|a| a.id == agent.id)
        .unwrap();
    assert_eq!(agent.grant_ids, Some(vec![grant.id]));
}

#[test]
fn an_admin_approving_their_own_agents_request_does_not_lengthen_their_own_access() {
    let env = env();
    let ana = Principal::person("ana");
    let hers = env.store.grants_of(&ana, "prod").unwrap().remove(0);
    let requester = anas_agent(&env);
    // 30 days of admin in shop, asked by her agent, where hers ends in 1 h.
    let request = request_access(
        &env.store,
        &env.config,
        &requester,
        &ask("admin", Some("shop"), 30 * 86400),
    )
    .unwrap();
    let (_, grant) = approve(&env.store, &env.config, &request.id, "ana", None).unwrap();
    assert_eq!(grant.subject, ana);
    assert_eq!(grant.expires_at, hers.expires_at, "no longer than her own admin grant");
    // Bo, admin of the cluster for four hours, may give the same request
    // up to his own admin grant's end, past hers.
    bo_cluster_admin(&env);
    let again = request_access(
        &env.store,
        &env.config,
        &requester,
        &ask("admin", Some("shop"), 7 * 86400),
    )
    .unwrap();
    let (_, grant) = approve(&env.store, &env.config, &again.id, "bo", None).unwrap();
    let his = env.store.grants_of(&Principal::person("bo"), "prod").unwrap().remove(0);
    assert_eq!(grant.expires_at, his.expires_at, "{grant:?}");
    assert!(
        grant.expires_at > hers.expires_at + chrono::TimeDelta::hours(2),
        "{grant:?}"
    );
}

/// A grant the agent's own person approved rests on a grant of theirs:
/// revoking that one ends it too, else approving her own agent's request
/// would keep her access past the revocation of the grant it came from. A
/// grant an admin approved rests on no grant of hers.
#[test]
fn a_grant_approved_by_the_agents_own_person_is_revoked_with_the_grant_it_rests_on() {
    let env = env();
    let ana = Principal::person("ana");
    let hers = env.store.grants_of(&ana, "prod").unwrap().remove(0);
    let requester = anas_agent(&env);
    // Capped to hers (admin of shop): it ends when hers does.
    let asked = request_access(&env.store, &env.config, &requester, &ask("admin", Some("shop"), 7200)).unwrap();
    let (_, own) = approve(&env.store, &env.config, &asked.id, "ana", None).unwrap();
    // Another agent's, decided on the admin grant that ends last: hers, or
    // the one just approved. Either way it rests on hers, not on the other
    // agent's (whose session may end first), and no chain grows.
    let second = Requester {
        principal: ana.clone(),
        agent_id: Some(env.store.add_agent(&ana, "second", &[], false).unwrap().id),
    };
    let asked = request_access(&env.store, &env.config, &second, &ask("admin", Some("shop"), 7200)).unwrap();
    let (_, own_too) = approve(&env.store, &env.config, &asked.id, "ana", None).unwrap();
    bo_cluster_admin(&env);
    let asked = request_access(&env.store, &env.config, &requester, &ask("viewer", Some("shop"), 600)).unwrap();
    let (_, by_admin) = approve(&env.store, &env.config, &asked.id, "bo", None).unwrap();
    let in_effect = || -> Vec<String> {
        let mut ids: Vec<String> = env
            .store
            .grants_of(&ana, "prod")
            .unwrap()
            .into_iter()
            .map(|g| g.id)
            .collect();
        ids.sort();
        ids
    };
    let mut all = vec![hers.id.clone(), own.id.clone(), own_too.id.clone(), by_admin.id.clone()];
    all.sort();
    assert_eq!(in_effect(), all);
    env.store.revoke_grant(&hers.id).unwrap();
    assert_eq!(
        in_effect(),
        vec![by_admin.id],
        "hers and the grant resting on it are revoked"
    );
}

/// A request whose requester was disabled since it asked is not approved:
/// no grant waits for a bot that is enabled again later; the refusal is on
/// record.
#[test]
fn a_request_of_a_requester_disabled_since_is_not_approved() {
    let env = env();
    let request = request_access(&env.store, &env.config, &bo(), &ask("developer", Some("shop"), 3600)).unwrap();
    env.store.disable_principal(&Principal::person("bo")).unwrap();
    let refused = approve(&env.store, &env.config, &request.id, "ana", None).unwrap_err();
    assert!(refused.to_string().contains("person:bo is disabled"), "{refused}");
    assert!(env
        .store
        .grants_of(&Principal::person("bo"), "prod")
        .unwrap()
        .is_empty());
    let pending = env.store.access_request(&request.id).unwrap().unwrap();
    assert_eq!(pending.state, AccessState::Pending);
    let rows = SqliteAuditStore::open(env.store.path())
        .unwrap()
        .query(&Filter::default())
        .unwrap();
    assert!(
        rows.iter()
            .any(|r| r.row.refused == "requester_disabled" && r.row.login == "ana"),
        "the refusal is on record"
    );
}
