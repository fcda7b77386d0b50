use super::*;
use crate::identity::Grant;

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

fn setup() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let ana = Principal::person("ana");
    store.add_principal(&ana, false).unwrap();
    store
        .add_grant(&Grant {
            id: "g-dev".into(),
            subject: ana,
            cluster: "c".into(),
            namespace: Some("shop".into()),
            role: "developer".into(),
            expires_at: Utc::now() + TimeDelta::hours(8),
            granted_by: "t".into(),
            created_at: Utc::now(),
            revoked_at: None,
        })
        .unwrap();
    (dir, store)
}

fn consent() -> Consent {
    Consent {
        login: "ana".into(),
        client_id: "https://client.example/meta.json".into(),
        client_name: "Example".into(),
        grants: vec![("g-dev".into(), "viewer".into())],
        until: Utc::now() + TimeDelta::hours(4),
        writes_need_approval: true,
        redirect_uri: "http://127.0.0.1:5000/cb".into(),
        code_challenge: CHALLENGE.into(),
        resource: "https://portcullis.example/mcp".into(),
        signed_in_with: String::new(),
    }
}

fn ask(code: &str) -> CodeExchange<'_> {
    CodeExchange {
        code,
        client_id: "https://client.example/meta.json",
        redirect_uri: "http://127.0.0.1:5000/cb",
        code_verifier: VERIFIER,
        resource: Some("https://portcullis.example/mcp"),
    }
}

#[test]
fn the_rfc_7636_example_verifier_matches_its_challenge_and_nothing_else_does() {
    assert!(pkce_matches(VERIFIER, CHALLENGE));
    assert!(!pkce_matches(&VERIFIER.replace('d', "e"), CHALLENGE));
    assert!(!pkce_matches("short", CHALLENGE));
    assert!(!pkce_matches(CHALLENGE, CHALLENGE));
}

#[test]
fn a_code_becomes_an_mcp_only_access_token_of_a_new_session_and_a_refresh_token() {
    let (_dir, store) = setup();
    let code = issue_code(&store, &consent()).unwrap();
    let issued = exchange_code(&store, ask(&code)).unwrap();
    assert!(
        issued.expires_in > 3500 && issued.expires_in <= 3600,
        "{}",
        issued.expires_in
    );
    assert_eq!(issued.clusters, vec!["c".to_string()]);
    let found = store
        .lookup_credential(&credential::hash(&issued.access_token))
        .unwrap()
        .unwrap();
    let origin = found.origin.unwrap();
    assert_eq!(origin.audience, Some(Audience::Mcp));
    assert_eq!(origin.via, "oauth client=https://client.example/meta.json");
    assert!(issued.agent.writes_need_approval);
    let body: serde_json::Value = serde_json::from_str(&issued.body()).unwrap();
    assert_eq!(body["token_type"], "Bearer");
}

#[test]
fn a_wrong_verifier_client_redirect_or_resource_is_refused() {
    let (_dir, store) = setup();
    let wrong = [
        CodeExchange {
            code_verifier: "a-verifier-that-is-long-enough-but-not-the-right-one-at-all",
            ..ask("")
        },
        CodeExchange {
            client_id: "https://other.example/meta.json",
            ..ask("")
        },
        CodeExchange {
            redirect_uri: "http://127.0.0.1:5001/cb",
            ..ask("")
        },
        CodeExchange {
            resource: Some("https://elsewhere.example/mcp"),
            ..ask("")
        },
    ];
    for bad in wrong {
        let code = issue_code(&store, &consent()).unwrap();
        let error = exchange_code(&store, CodeExchange { code: &code, ..bad }).unwrap_err();
        assert!(matches!(error.error, "invalid_grant" | "invalid_target"), "{error}");
    }
    assert!(store.agent_sessions_of(&Principal::person("ana")).unwrap().is_empty());
}

#[test]
fn a_code_used_twice_ends_the_session_its_first_use_made() {
    let (_dir, store) = setup();
    let code = issue_code(&store, &consent()).unwrap();
    let issued = exchange_code(&store, ask(&code)).unwrap();
    let error = exchange_code(&store, ask(&code)).unwrap_err();
    assert_eq!(error.error, "invalid_grant");
    assert!(error.description.contains("already used"), "{error}");
    assert!(store.agent(&issued.agent.id).unwrap().unwrap().disabled);
    let error = refresh(&store, &issued.refresh_token, "https://client.example/meta.json").unwrap_err();
    assert_eq!(error.error, "invalid_grant");
}

#[test]
fn a_refresh_token_rotates_and_its_reuse_ends_the_whole_session() {
    let (_dir, store) = setup();
    let code = issue_code(&store, &consent()).unwrap();
    let first = exchange_code(&store, ask(&code)).unwrap();
    let client = "https://client.example/meta.json";
    let second = refresh(&store, &first.refresh_token, client).unwrap();
    assert_ne!(second.refresh_token, first.refresh_token);
    assert_eq!(second.agent.id, first.agent.id);
    let error = refresh(&store, &first.refresh_token, client).unwrap_err();
    assert!(error.description.contains("already used"), "{error}");
    assert!(store.agent(&first.agent.id).unwrap().unwrap().disabled);
    assert!(
        refresh(&store, &second.refresh_token, client).is_err(),
        "every token of it ends"
    );
}

#[test]
fn a_refresh_token_presented_by_another_client_ends_the_session() {
    let (_dir, store) = setup();
    let code = issue_code(&store, &consent()).unwrap();
    let issued = exchange_code(&store, ask(&code)).unwrap();
    let error = refresh(&store, &issued.refresh_token, "https://thief.example/meta.json").unwrap_err();
    assert_eq!(error.error, "invalid_grant");
    assert!(store.agent(&issued.agent.id).unwrap().unwrap().disabled);
}

#[test]
fn revoking_a_refresh_token_ends_its_session_and_an_access_token_only_itself() {
    let (_dir, store) = setup();
    let code = issue_code(&store, &consent()).unwrap();
    let issued = exchange_code(&store, ask(&code)).unwrap();
    assert_eq!(revoke(&store, &issued.access_token).unwrap(), Revoked::Credential);
    let found = store
        .lookup_credential(&credential::hash(&issued.access_token))
        .unwrap()
        .unwrap();
    assert!(found.credential.revoked_at.is_some());
    assert!(!store.agent(&issued.agent.id).unwrap().unwrap().disabled);
    assert_eq!(
        revoke(&store, &issued.refresh_token).unwrap(),
        Revoked::Session(issued.agent.id.clone())
    );
    assert!(store.agent(&issued.agent.id).unwrap().unwrap().disabled);
    assert_eq!(revoke(&store, "pcl_not-a-token").unwrap(), Revoked::Nothing);
}

#[test]
fn a_code_just_past_its_end_is_still_taken_within_the_skew_and_not_after() {
    let (_dir, store) = setup();
    let kept = serde_json::to_string(&consent()).unwrap();
    store
        .put_code(
            &credential::hash("pcl_within"),
            &kept,
            Utc::now() - TimeDelta::seconds(30),
        )
        .unwrap();
    store
        .put_code(
            &credential::hash("pcl_beyond"),
            &kept,
            Utc::now() - TimeDelta::seconds(90),
        )
        .unwrap();
    assert!(
        exchange_code(&store, ask("pcl_within")).is_ok(),
        "30 s late is within the 60 s skew"
    );
    let error = exchange_code(&store, ask("pcl_beyond")).unwrap_err();
    assert!(error.description.contains("expired"), "{error}");
}

#[test]
fn a_wrong_verifier_does_not_spend_the_code_and_the_right_one_still_works() {
    let (_dir, store) = setup();
    let code = issue_code(&store, &consent()).unwrap();
    let wrong = CodeExchange {
        code_verifier: "a-verifier-that-is-long-enough-but-not-the-right-one-at-all",
        ..ask(&code)
    };
    assert_eq!(exchange_code(&store, wrong).unwrap_err().error, "invalid_grant");
    assert!(
        exchange_code(&store, ask(&code)).is_ok(),
        "the code was not burnt by a wrong attempt"
    );
}

#[test]
fn a_registered_client_in_use_is_not_swept_as_unused() {
    let (_dir, store) = setup();
    let uris = vec!["http://127.0.0.1:5000/cb".to_string()];
    let client = store.register_oauth_client("Example", &uris).unwrap();
    let id = client.client_id.as_str();
    let ttl = TimeDelta::days(30);
    let month_ago = Utc::now() - ttl - TimeDelta::days(1);
    let sweep = || store.delete_oauth_clients_unused_since(Utc::now() - ttl).unwrap();
    let consent = Consent {
        client_id: id.into(),
        ..consent()
    };
    let code = issue_code(&store, &consent).unwrap();
    let issued = exchange_code(
        &store,
        CodeExchange {
            client_id: id,
            ..ask(&code)
        },
    )
    .unwrap();
    // Refreshing is using it, though authorize was a month ago.
    store.set_oauth_client_last_used(id, month_ago).unwrap();
    let issued = refresh(&store, &issued.refresh_token, id).unwrap();
    assert_eq!(sweep(), 0, "refreshed now");
    assert!(store.find_oauth_client(id).unwrap().is_some());
    // Unused for a month, but with a session in effect.
    store.set_oauth_client_last_used(id, month_ago).unwrap();
    assert_eq!(sweep(), 0, "its agent session is in effect");
    store.end_agent_session(&issued.agent.id).unwrap();
    assert_eq!(sweep(), 1, "unused, and its session ended");
    assert!(store.find_oauth_client(id).unwrap().is_none());
}
