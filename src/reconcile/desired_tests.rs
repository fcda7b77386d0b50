use super::*;
use crate::identity::{roles, Principal};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::json;

fn us() -> Instance {
    Instance::new("staging").unwrap()
}

fn listed(objects: &[Object]) -> Listed {
    let mut out = Listed::default();
    for object in objects {
        match object {
            Object::ClusterRole(role) => out.roles.push(role.clone()),
            binding => out.bindings.push(binding.clone()),
        }
    }
    out
}

fn applied(plan: &Plan) -> Vec<ObjectKey> {
    plan.apply.iter().map(|a| a.object.key()).collect()
}

fn deleted(plan: &Plan) -> Vec<ObjectKey> {
    plan.delete.iter().map(|d| d.key.clone()).collect()
}

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
    let want = desired(&roles::builtin(), &[], &grants, "prod", Utc::now(), &us());
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
    assert_eq!(labels["portcullis.dev/instance"], "staging");
    let Object::ClusterRole(role) = &want.objects[0] else {
        panic!("{:?}", want.objects[0])
    };
    let labels = role.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["instance.portcullis.dev/staging"], "true");
    assert!(!labels.contains_key("portcullis.dev/instance"), "shared: no one owner");
}

#[test]
fn a_custom_role_with_bad_rules_or_a_grant_of_a_vanished_role_is_reported_not_written() {
    let bad = Role {
        name: "odd".into(),
        rules: vec![json!({"verbs": "get"})],
        reveals_secrets: false,
        namespaced: false,
        max_duration: None,
    };
    let good = Role {
        name: "log reader".into(),
        rules: vec![json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})],
        reveals_secrets: false,
        namespaced: false,
        max_duration: None,
    };
    let want = desired(
        &[bad, good],
        &[],
        &[grant("g1", Some("shop"), "viewer", 60)],
        "prod",
        Utc::now(),
        &us(),
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
    let want = desired(&roles::builtin(), &[], &grants, "prod", Utc::now(), &us());
    let mut actual = want.objects.clone();
    // Someone edited the viewer ClusterRole and removed the grant's binding.
    let Object::ClusterRole(viewer) = &mut actual[0] else {
        panic!()
    };
    viewer.rules = Some(Vec::new());
    actual.retain(|o| !matches!(o, Object::RoleBinding(_)));
    // A labelled binding left over from a revoked grant, and an unlabelled one.
    let Object::RoleBinding(mut stray) = binding(&grant("old", Some("shop"), "viewer", 60), &us()) else {
        panic!()
    };
    actual.push(Object::RoleBinding(stray.clone()));
    stray.metadata.name = Some("someone-elses".into());
    stray.metadata.labels = None;
    actual.push(Object::RoleBinding(stray));

    let plan = super::plan(&want, &listed(&actual), &us());
    assert_eq!(
        applied(&plan),
        [
            ObjectKey::ClusterRole("portcullis:viewer".into()),
            ObjectKey::RoleBinding("shop".into(), "portcullis-grant-g1".into())
        ]
    );
    assert!(plan.apply.iter().all(|a| a.force), "a hand edit is overwritten");
    assert_eq!(
        deleted(&plan),
        [ObjectKey::RoleBinding("shop".into(), "portcullis-grant-old".into())]
    );
}

#[test]
fn an_object_in_step_needs_nothing_even_with_labels_added_by_others() {
    let want = desired(
        &roles::builtin(),
        &[],
        &[grant("g1", None, "admin", 60)],
        "prod",
        Utc::now(),
        &us(),
    );
    let mut actual = want.objects.clone();
    let Object::ClusterRoleBinding(b) = actual.last_mut().unwrap() else {
        panic!()
    };
    b.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("team".into(), "infra".into());
    assert_eq!(plan(&want, &listed(&actual), &us()), Plan::default());
}

#[test]
fn bindings_are_deleted_before_the_cluster_roles_they_bind() {
    let stale_role = Role {
        name: "gone".into(),
        rules: Vec::new(),
        reveals_secrets: false,
        namespaced: false,
        max_duration: None,
    };
    let mut role = cluster_role(&stale_role, &us()).unwrap();
    role.metadata.resource_version = Some("41".into());
    let actual = [
        Object::ClusterRole(role),
        binding(&grant("old", None, "gone", 60), &us()),
    ];
    let plan = super::plan(&Desired::default(), &listed(&actual), &us());
    assert_eq!(
        plan.delete,
        [
            Deletion {
                key: ObjectKey::ClusterRoleBinding("portcullis-grant-old".into()),
                resource_version: None
            },
            Deletion {
                key: ObjectKey::ClusterRole("portcullis:gone".into()),
                resource_version: Some("41".into())
            }
        ],
        "a ClusterRole only if no installation marked it since it was listed"
    );
}

/// The viewer ClusterRole as `instances` marked it, its rules owned by the
/// field managers `rule_owners`.
fn viewer_marked_by(instances: &[&str], rule_owners: &[&str]) -> ClusterRole {
    let viewer = roles::builtin().into_iter().find(|r| r.name == "viewer").unwrap();
    let mut role = cluster_role(&viewer, &Instance::new(instances.first().unwrap_or(&"x")).unwrap()).unwrap();
    let labels = role.metadata.labels.as_mut().unwrap();
    labels.retain(|k, _| !k.starts_with("instance.portcullis.dev/"));
    for id in instances {
        labels.insert(format!("instance.portcullis.dev/{id}"), "true".into());
    }
    role.metadata.resource_version = Some("7".into());
    role.metadata.managed_fields = Some(
        rule_owners
            .iter()
            .map(|m| ManagedFieldsEntry {
                manager: Some(m.to_string()),
                operation: Some("Apply".into()),
                fields_v1: Some(FieldsV1(json!({"f:rules": {}, "f:metadata": {"f:labels": {}}}))),
                ..Default::default()
            })
            .collect(),
    );
    role
}

/// What `us()` wants with no grants: every built-in ClusterRole.
fn only_roles() -> Desired {
    desired(&roles::builtin(), &[], &[], "prod", Utc::now(), &us())
}

#[test]
fn a_cluster_role_another_installation_uses_is_marked_without_force_and_never_deleted() {
    let shared = viewer_marked_by(&["prod"], &["portcullis-prod"]);
    let plan = super::plan(&only_roles(), &listed(&[Object::ClusterRole(shared.clone())]), &us());
    let viewer = plan
        .apply
        .iter()
        .find(|a| a.object.key() == ObjectKey::ClusterRole("portcullis:viewer".into()))
        .unwrap();
    assert!(!viewer.force, "equal rules are shared, not taken");
    let Object::ClusterRole(role) = &viewer.object else {
        panic!()
    };
    assert_eq!(
        role.metadata.labels.as_ref().unwrap()["instance.portcullis.dev/staging"],
        "true"
    );
    assert!(plan.conflicts.is_empty());

    // Not one of ours: only the other installation's, left alone.
    let plan = super::plan(&Desired::default(), &listed(&[Object::ClusterRole(shared)]), &us());
    assert_eq!(plan, Plan::default());
}

#[test]
fn a_cluster_role_this_installation_stops_using_is_released_while_others_use_it_and_deleted_when_none_do() {
    let both = viewer_marked_by(&["staging", "prod"], &["portcullis-staging", "portcullis-prod"]);
    let plan = super::plan(&Desired::default(), &listed(&[Object::ClusterRole(both)]), &us());
    assert_eq!(plan.release, ["portcullis:viewer"]);
    assert!(plan.delete.is_empty(), "{:?}", plan.delete);

    let ours = viewer_marked_by(&["staging"], &["portcullis-staging"]);
    let plan = super::plan(&Desired::default(), &listed(&[Object::ClusterRole(ours)]), &us());
    assert!(plan.release.is_empty());
    assert_eq!(deleted(&plan), [ObjectKey::ClusterRole("portcullis:viewer".into())]);

    // Another installation still holds fields though its mark was removed
    // by hand: it still uses the role.
    let held = viewer_marked_by(&["staging"], &["portcullis-staging", "portcullis-prod"]);
    let plan = super::plan(&Desired::default(), &listed(&[Object::ClusterRole(held)]), &us());
    assert_eq!(plan.release, ["portcullis:viewer"]);
    assert!(plan.delete.is_empty());
}

#[test]
fn a_role_another_installation_defines_otherwise_is_reported_and_only_marked_never_forced() {
    let mut theirs = viewer_marked_by(&["prod"], &["portcullis-prod"]);
    theirs.rules = Some(Vec::new());
    let plan = super::plan(&only_roles(), &listed(&[Object::ClusterRole(theirs.clone())]), &us());
    assert_eq!(
        plan.conflicts,
        [RoleConflict {
            name: "portcullis:viewer".into(),
            others: vec!["prod".into()]
        }]
    );
    let viewer = plan
        .apply
        .iter()
        .find(|a| a.object.key() == ObjectKey::ClusterRole("portcullis:viewer".into()))
        .unwrap();
    let Object::ClusterRole(mark_only) = &viewer.object else {
        panic!()
    };
    assert!(!viewer.force);
    assert_eq!(mark_only.rules, None, "its mark, not its rules");
    assert!(plan.conflicts[0]
        .to_string()
        .contains("installation prod defines it with other rules"));

    // Marked already, and not holding the rules: nothing more to write.
    let mut marked = viewer_marked_by(&["prod", "staging"], &["portcullis-prod"]);
    marked.rules = Some(Vec::new());
    let plan = super::plan(&only_roles(), &listed(&[Object::ClusterRole(marked)]), &us());
    assert_eq!(plan.conflicts.len(), 1);
    assert!(!applied(&plan).contains(&ObjectKey::ClusterRole("portcullis:viewer".into())));
}

#[test]
fn rules_a_hand_edit_or_portcullis_before_instance_ids_owns_are_taken_back_by_force() {
    for owner in ["kubectl-edit", "portcullis"] {
        let mut edited = viewer_marked_by(&[], &[owner]);
        edited.rules = Some(Vec::new());
        let plan = super::plan(&only_roles(), &listed(&[Object::ClusterRole(edited)]), &us());
        assert!(plan.conflicts.is_empty(), "{owner}");
        let viewer = plan
            .apply
            .iter()
            .find(|a| a.object.key() == ObjectKey::ClusterRole("portcullis:viewer".into()))
            .unwrap();
        assert!(viewer.force, "{owner}");
    }
}

#[test]
fn an_unmarked_cluster_role_from_before_instance_ids_is_adopted_when_used_and_deleted_when_not() {
    let unmarked = viewer_marked_by(&[], &["portcullis"]);
    let plan = super::plan(&only_roles(), &listed(&[Object::ClusterRole(unmarked.clone())]), &us());
    assert!(applied(&plan).contains(&ObjectKey::ClusterRole("portcullis:viewer".into())));
    let plan = super::plan(&Desired::default(), &listed(&[Object::ClusterRole(unmarked)]), &us());
    assert_eq!(plan.delete[0].resource_version.as_deref(), Some("7"));
    assert_eq!(deleted(&plan), [ObjectKey::ClusterRole("portcullis:viewer".into())]);
}

#[test]
fn an_adopted_binding_from_before_instance_ids_gets_the_instance_label() {
    let grants = [grant("g1", Some("shop"), "viewer", 3600)];
    let want = desired(&roles::builtin(), &[], &grants, "prod", Utc::now(), &us());
    let Object::RoleBinding(mut old) = binding(&grants[0], &us()) else {
        panic!()
    };
    old.metadata.labels.as_mut().unwrap().remove("portcullis.dev/instance");
    let mut actual: Vec<Object> = want
        .objects
        .iter()
        .filter(|o| matches!(o, Object::ClusterRole(_)))
        .cloned()
        .collect();
    actual.push(Object::RoleBinding(old));
    let plan = super::plan(&want, &listed(&actual), &us());
    assert_eq!(
        applied(&plan),
        [ObjectKey::RoleBinding("shop".into(), "portcullis-grant-g1".into())]
    );
}

#[test]
fn a_stored_grant_whose_namespace_is_no_namespace_name_binds_nothing() {
    let want = desired(
        &roles::builtin(),
        &[],
        &[
            grant("g1", Some("shop/rolebindings/x?"), "viewer", 60),
            grant("g2", Some("shop"), "viewer", 60),
        ],
        "prod",
        Utc::now(),
        &us(),
    );
    assert_eq!(want.bindings, 1, "only shop's");
    assert!(
        matches!(&want.errors[..], [DesiredError::InvalidNamespace { grant, .. }] if grant == "g1"),
        "{:?}",
        want.errors
    );
}

#[test]
fn a_grant_in_a_namespace_protected_since_it_was_made_binds_nothing() {
    let protected = ["kube-system".to_string()];
    let grants = [
        grant("g1", Some("kube-system"), "viewer", 60),
        grant("g2", Some("shop"), "viewer", 60),
        grant("g3", None, "viewer", 60),
    ];
    let want = desired(&roles::builtin(), &protected, &grants, "prod", Utc::now(), &us());
    assert_eq!(want.bindings, 2, "shop's and the cluster-wide one");
    assert!(
        !keys(&want.objects).contains(&ObjectKey::RoleBinding(
            "kube-system".into(),
            "portcullis-grant-g1".into()
        )),
        "{:?}",
        keys(&want.objects)
    );
    assert!(want.errors.is_empty(), "not an error: {:?}", want.errors);
}

/// The labels are anyone's to set: a cluster's own RBAC labelled as
/// portcullis's (by mistake or on purpose) is never deleted or released,
/// since portcullis's ServiceAccount may patch and delete any.
#[test]
fn only_objects_named_as_portcullis_names_them_are_ever_deleted_or_released() {
    let mut node = viewer_marked_by(&["staging"], &["portcullis-staging"]);
    node.metadata.name = Some("system:node".into());
    let mut shared = viewer_marked_by(&["staging", "prod"], &["portcullis-staging", "portcullis-prod"]);
    shared.metadata.name = Some("system:kube-scheduler".into());
    let Object::RoleBinding(mut proxy) = binding(&grant("old", Some("kube-system"), "viewer", 60), &us()) else {
        panic!()
    };
    proxy.metadata.name = Some("kube-proxy".into());
    let objects = [
        Object::ClusterRole(node),
        Object::ClusterRole(shared),
        Object::RoleBinding(proxy),
    ];
    let plan = super::plan(&Desired::default(), &listed(&objects), &us());
    assert!(plan.delete.is_empty(), "{:?}", plan.delete);
    assert!(plan.release.is_empty(), "{:?}", plan.release);
}

/// A role another installation defines with other rules binds none of
/// this installation's grants: they would get that installation's rules.
/// A binding already made for one is taken away until the two agree.
#[test]
fn a_grant_of_a_role_another_installation_defines_otherwise_is_not_bound() {
    let grants = [
        grant("g1", Some("shop"), "viewer", 3600),
        grant("g2", Some("shop"), "developer", 3600),
    ];
    let want = desired(&roles::builtin(), &[], &grants, "prod", Utc::now(), &us());
    let binding_of = |id: &str| {
        want.objects
            .iter()
            .find(|o| !matches!(o, Object::ClusterRole(_)) && o.key().to_string().contains(id))
            .cloned()
            .unwrap()
    };
    let mut theirs = viewer_marked_by(&["prod"], &["portcullis-prod"]);
    theirs.rules = Some(Vec::new());
    let listed_now = listed(&[Object::ClusterRole(theirs), binding_of("g1")]);
    let plan = super::plan(&want, &listed_now, &us());
    assert_eq!(plan.conflicts.len(), 1);
    let (viewer, developer) = (binding_of("g1").key(), binding_of("g2").key());
    assert!(!applied(&plan).contains(&viewer), "{:?}", applied(&plan));
    assert!(deleted(&plan).contains(&viewer), "{:?}", deleted(&plan));
    assert!(applied(&plan).contains(&developer), "another role's grant is bound");
    assert_eq!(plan.unbound, 1, "counted out of step");
}
