use super::*;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    (dir, store)
}

#[test]
fn an_issued_credential_is_found_by_its_hash_only() {
    let (_dir, store) = store();
    let ana = Principal::person("ana");
    store.add_principal(&ana, false).unwrap();
    let (cred, token) = store.issue_credential(&ana, "laptop", None).unwrap();
    let found = store.lookup_credential(&credential::hash(&token)).unwrap().unwrap();
    assert_eq!(found.credential, cred);
    assert!(!found.owner_disabled);
    assert!(store
        .lookup_credential(&credential::hash("pcl_other"))
        .unwrap()
        .is_none());
}

#[test]
fn revoking_and_disabling_show_in_lookups() {
    let (_dir, store) = store();
    let bot = Principal::bot("ci");
    store.add_principal(&bot, true).unwrap();
    let (cred, token) = store.issue_credential(&bot, "ci", None).unwrap();
    store.revoke_credential(&cred.id).unwrap();
    store.disable_principal(&bot).unwrap();
    let found = store.lookup_credential(&credential::hash(&token)).unwrap().unwrap();
    assert!(found.credential.revoked_at.is_some());
    assert!(found.owner_disabled);
}

#[test]
fn names_that_would_confuse_the_cluster_are_refused() {
    let (_dir, store) = store();
    for bad in ["", "Ana", "a b", "a:b", "-x"] {
        assert!(store.add_principal(&Principal::person(bad), false).is_err(), "{bad}");
    }
    assert!(matches!(
        store.issue_credential(&Principal::person("ghost"), "x", None),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn only_enabled_people_marked_admin_are_admins() {
    let (_dir, store) = store();
    let ana = Principal::person("ana");
    store.add_principal(&ana, false).unwrap();
    assert!(!store.is_admin(&ana).unwrap());
    store.set_admin(&ana, true).unwrap();
    assert!(store.is_admin(&ana).unwrap());
    assert!(store.list_principals(PrincipalKind::Person).unwrap()[0].admin);
    store.disable_principal(&ana).unwrap();
    assert!(!store.is_admin(&ana).unwrap());
    assert!(!store.is_admin(&Principal::person("ghost")).unwrap());
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
