use super::*;
use crate::identity::{roles, Principal};
use serde_json::json;

fn grant(id: &str, namespace: Option<&str>, role: &str, expires_in: i64) -> Grant {
    Grant {
        id: id.into(),
        subject: Principal::person("ana"),
        cluster: "prod".into(),
        namespace: namespace.map(Into::into),
        role: role.into(),
        expires_at: Utc::now() + chrono::TimeDelta::seconds(expires_in),
        granted_by: "test".into(),
        created_at: Utc::now(),
        revoked_at: None,
    }
}

fn keys(objects: &[Object]) -> Vec<ObjectKey> {
    objects.iter().map(Object::key).collect()
}

#[test]
fn every_role_gets_a_labelled_cluster_role_and_each_grant_in_effect_a_binding() {
    let mut revoked = grant("g4", Some("shop"), "viewer", 3600);
    revoked.revoked_at = Some(Utc::now());
    let mut elsewhere = grant("g5", Some("shop"), "viewer", 3600);
    elsewhere.cluster = "staging".into();
    let grants = [
        grant("g1", Some("shop"), "viewer", 3600),
        grant("g2", None, "cluster-admin", 60),
        grant("g3", Some("shop"), "admin", -1),
        revoked,
        elsewhere,
    ];
    let want = desired(&roles::builtin(), &grants, "prod", Utc::now());
    assert_eq!((want.roles, want.bindings), (6, 2));
    assert!(want.errors.is_empty(), "{:?}", want.errors);
    let keys = keys(&want.objects);
    assert!(keys.contains(&ObjectKey::ClusterRole("portcullis:secrets-reader".into())));
    assert!(keys.contains(&ObjectKey::RoleBinding("shop".into(), "portcullis-grant-g1".into())));
    assert!(keys.contains(&ObjectKey::ClusterRoleBinding("portcullis-grant-g2".into())));
    assert_eq!(
        want.next_expiry,
        Some(grants[1].expires_at),
        "the soonest expiry of the bound grants"
    );
    let Object::RoleBinding(binding) = &want.objects[6] else {
        panic!("{:?}", want.objects[6])
    };
    assert_eq!(binding.role_ref.name, "portcullis:viewer");
    assert_eq!(binding.subjects.as_ref().unwrap()[0].name, "portcullis:grant:g1");
    assert_eq!(binding.subjects.as_ref().unwrap()[0].kind, "Group");
    let labels = binding.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "portcullis");
    assert_eq!(labels["portcullis.dev/grant"], "g1");
}

#[test]
fn a_custom_role_with_bad_rules_or_a_grant_of_a_vanished_role_is_reported_not_written() {
    let bad = Role {
        name: "odd".into(),
        rules: vec![json!({"verbs": "get"})],
        reveals_secrets: false,
        max_duration: None,
    };
    let good = Role {
        name: "log reader".into(),
        rules: vec![json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})],
        reveals_secrets: false,
        max_duration: None,
    };
    let want = desired(
        &[bad, good],
        &[grant("g1", Some("shop"), "viewer", 60)],
        "prod",
        Utc::now(),
    );
    assert_eq!((want.roles, want.bindings), (1, 0));
    assert!(matches!(&want.errors[0], DesiredError::InvalidRules { role, .. } if role == "odd"));
    assert!(matches!(&want.errors[1], DesiredError::UnknownRole { grant, .. } if grant == "g1"));
    let Object::ClusterRole(role) = &want.objects[0] else {
        panic!()
    };
    let labels = role.metadata.labels.as_ref().unwrap();
    assert!(
        !labels.contains_key(ROLE_LABEL),
        "a name that is no label value is left out"
    );
    assert_eq!(labels[MANAGED_BY.0], MANAGED_BY.1);
}

#[test]
fn a_pass_applies_only_what_is_missing_or_changed_and_deletes_only_labelled_strays() {
    let grants = [grant("g1", Some("shop"), "viewer", 3600)];
    let want = desired(&roles::builtin(), &grants, "prod", Utc::now());
    let mut actual = want.objects.clone();
    // Someone edited the viewer ClusterRole and removed the grant's binding.
    let Object::ClusterRole(viewer) = &mut actual[0] else {
        panic!()
    };
    viewer.rules = Some(Vec::new());
    actual.retain(|o| !matches!(o, Object::RoleBinding(_)));
    // A labelled binding left over from a revoked grant, and an unlabelled one.
    let Object::RoleBinding(mut stray) = binding(&grant("old", Some("shop"), "viewer", 60)) else {
        panic!()
    };
    actual.push(Object::RoleBinding(stray.clone()));
    stray.metadata.name = Some("someone-elses".into());
    stray.metadata.labels = None;
    actual.push(Object::RoleBinding(stray));

    let plan = plan(&want, &actual);
    assert_eq!(
        keys(&plan.apply),
        [
            ObjectKey::ClusterRole("portcullis:viewer".into()),
            ObjectKey::RoleBinding("shop".into(), "portcullis-grant-g1".into())
        ]
    );
    assert_eq!(
        plan.delete,
        [ObjectKey::RoleBinding("shop".into(), "portcullis-grant-old".into())]
    );
}

#[test]
fn an_object_in_step_needs_nothing_even_with_labels_added_by_others() {
    let want = desired(&roles::builtin(), &[grant("g1", None, "admin", 60)], "prod", Utc::now());
    let mut actual = want.objects.clone();
    let Object::ClusterRoleBinding(b) = actual.last_mut().unwrap() else {
        panic!()
    };
    b.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("team".into(), "infra".into());
    assert_eq!(plan(&want, &actual), Plan::default());
}

#[test]
fn bindings_are_deleted_before_the_cluster_roles_they_bind() {
    let stale_role = Role {
        name: "gone".into(),
        rules: Vec::new(),
        reveals_secrets: false,
        max_duration: None,
    };
    let actual = [
        Object::ClusterRole(cluster_role(&stale_role).unwrap()),
        binding(&grant("old", None, "gone", 60)),
    ];
    let plan = plan(&Desired::default(), &actual);
    assert_eq!(
        plan.delete,
        [
            ObjectKey::ClusterRoleBinding("portcullis-grant-old".into()),
            ObjectKey::ClusterRole("portcullis:gone".into())
        ]
    );
}
