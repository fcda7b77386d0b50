//! The table of served resource types, as kube-apiserver 1.37's discovery
//! describes them (verbs, short names, categories, subresources and their
//! kinds).
//!
//! Groups are listed in kube-apiserver's priority order, which is the order
//! `/apis` shows them in; discovery sorts resources by name itself.
//!
//! # Differences from kube-apiserver
//!
//! - Only the resources the simulator stores or answers are listed: no
//!   `bindings`, `componentstatuses`, `replicationcontrollers`,
//!   `persistentvolumes`, storage, scheduling, autoscaling or admission
//!   groups, and no `pods/resize`.
//! - The custom resource `stable.example.com/v1` `CronTab` is compiled in;
//!   a CustomResourceDefinition created at run time is stored but does not
//!   add a served type.

use super::registry::{ResourceType, Subresource, ALL_VERBS};

/// Verbs of a status-like subresource (`pods/status`, `deployments/status`).
const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];
/// Verbs of a stream subresource that accepts both GET and POST upgrades.
const CREATE_GET: &[&str] = &["create", "get"];
/// Verbs of a proxy subresource.
const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];
/// Verbs of a review resource: it answers a create and stores nothing.
const CREATE: &[&str] = &["create"];
/// Namespaces have no `deletecollection`.
const NAMESPACE_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
/// The `all` category, as `kubectl get all` uses it.
const ALL: &[&str] = &["all"];

/// A subresource whose object has `kind` in the parent's group and version.
const fn sub(
    name: &'static str,
    kind: &'static str,
    group: &'static str,
    verbs: &'static [&'static str],
) -> Subresource {
    Subresource {
        name,
        kind,
        group,
        version: "v1",
        verbs,
    }
}

/// An ordinary stored resource with every verb and no extras; callers
/// override fields with struct update syntax.
const fn res(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        group,
        version: "v1",
        kind,
        plural,
        singular,
        namespaced,
        verbs: ALL_VERBS,
        short_names: &[],
        categories: &[],
        subresources: &[],
        stored: true,
    }
}

/// A review resource: create only, never stored.
const fn review(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        verbs: CREATE,
        stored: false,
        ..res(group, kind, plural, singular, namespaced)
    }
}

const NAMESPACE_SUBS: &[Subresource] = &[
    sub("finalize", "Namespace", "", &["update"]),
    sub("status", "Namespace", "", GET_PATCH_UPDATE),
];
const NODE_SUBS: &[Subresource] = &[
    sub("proxy", "NodeProxyOptions", "", PROXY_VERBS),
    sub("status", "Node", "", GET_PATCH_UPDATE),
];
const POD_SUBS: &[Subresource] = &[
    sub("attach", "PodAttachOptions", "", CREATE_GET),
    sub("binding", "Binding", "", CREATE),
    sub("ephemeralcontainers", "Pod", "", GET_PATCH_UPDATE),
    sub("eviction", "Eviction", "policy", CREATE),
    sub("exec", "PodExecOptions", "", CREATE_GET),
    sub("log", "Pod", "", &["get"]),
    sub("portforward", "PodPortForwardOptions", "", CREATE_GET),
    sub("proxy", "PodProxyOptions", "", PROXY_VERBS),
    sub("status", "Pod", "", GET_PATCH_UPDATE),
];
const SERVICE_SUBS: &[Subresource] = &[
    sub("proxy", "ServiceProxyOptions", "", PROXY_VERBS),
    sub("status", "Service", "", GET_PATCH_UPDATE),
];
const SERVICE_ACCOUNT_SUBS: &[Subresource] = &[sub("token", "TokenRequest", "authentication.k8s.io", CREATE)];

/// `status` of `kind` in `group`.
const fn status(kind: &'static str, group: &'static str) -> Subresource {
    sub("status", kind, group, GET_PATCH_UPDATE)
}
/// `scale`, whose object is always `autoscaling/v1` `Scale`.
const SCALE: Subresource = sub("scale", "Scale", "autoscaling", GET_PATCH_UPDATE);

/// Every resource type served.
pub static RESOURCES: &[ResourceType] = &[
    // core/v1
    ResourceType {
        short_names: &["cm"],
        ..res("", "ConfigMap", "configmaps", "configmap", true)
    },
    ResourceType {
        short_names: &["ep"],
        ..res("", "Endpoints", "endpoints", "endpoints", true)
    },
    ResourceType {
        short_names: &["ev"],
        ..res("", "Event", "events", "event", true)
    },
    ResourceType {
        short_names: &["limits"],
        ..res("", "LimitRange", "limitranges", "limitrange", true)
    },
    ResourceType {
        verbs: NAMESPACE_VERBS,
        short_names: &["ns"],
        subresources: NAMESPACE_SUBS,
        ..res("", "Namespace", "namespaces", "namespace", false)
    },
    ResourceType {
        short_names: &["no"],
        subresources: NODE_SUBS,
        ..res("", "Node", "nodes", "node", false)
    },
    ResourceType {
        short_names: &["pvc"],
        subresources: &[status("PersistentVolumeClaim", "")],
        ..res(
            "",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            true,
        )
    },
    ResourceType {
        short_names: &["po"],
        categories: ALL,
        subresources: POD_SUBS,
        ..res("", "Pod", "pods", "pod", true)
    },
    ResourceType {
        short_names: &["quota"],
        subresources: &[status("ResourceQuota", "")],
        ..res("", "ResourceQuota", "resourcequotas", "resourcequota", true)
    },
    res("", "Secret", "secrets", "secret", true),
    ResourceType {
        short_names: &["sa"],
        subresources: SERVICE_ACCOUNT_SUBS,
        ..res("", "ServiceAccount", "serviceaccounts", "serviceaccount", true)
    },
    ResourceType {
        short_names: &["svc"],
        categories: ALL,
        subresources: SERVICE_SUBS,
        ..res("", "Service", "services", "service", true)
    },
    // apps/v1
    res(
        "apps",
        "ControllerRevision",
        "controllerrevisions",
        "controllerrevision",
        true,
    ),
    ResourceType {
        short_names: &["ds"],
        categories: ALL,
        subresources: &[status("DaemonSet", "apps")],
        ..res("apps", "DaemonSet", "daemonsets", "daemonset", true)
    },
    ResourceType {
        short_names: &["deploy"],
        categories: ALL,
        subresources: &[SCALE, status("Deployment", "apps")],
        ..res("apps", "Deployment", "deployments", "deployment", true)
    },
    ResourceType {
        short_names: &["rs"],
        categories: ALL,
        subresources: &[SCALE, status("ReplicaSet", "apps")],
        ..res("apps", "ReplicaSet", "replicasets", "replicaset", true)
    },
    ResourceType {
        short_names: &["sts"],
        categories: ALL,
        subresources: &[SCALE, status("StatefulSet", "apps")],
        ..res("apps", "StatefulSet", "statefulsets", "statefulset", true)
    },
    // events.k8s.io/v1
    ResourceType {
        short_names: &["ev"],
        ..res("events.k8s.io", "Event", "events", "event", true)
    },
    // authentication.k8s.io/v1
    review(
        "authentication.k8s.io",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        false,
    ),
    review(
        "authentication.k8s.io",
        "TokenReview",
        "tokenreviews",
        "tokenreview",
        false,
    ),
    // authorization.k8s.io/v1
    review(
        "authorization.k8s.io",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        true,
    ),
    review(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        false,
    ),
    review(
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        false,
    ),
    review(
        "authorization.k8s.io",
        "SubjectAccessReview",
        "subjectaccessreviews",
        "subjectaccessreview",
        false,
    ),
    // batch/v1
    ResourceType {
        short_names: &["cj"],
        categories: ALL,
        subresources: &[status("CronJob", "batch")],
        ..res("batch", "CronJob", "cronjobs", "cronjob", true)
    },
    ResourceType {
        categories: ALL,
        subresources: &[status("Job", "batch")],
        ..res("batch", "Job", "jobs", "job", true)
    },
    // networking.k8s.io/v1
    ResourceType {
        short_names: &["ing"],
        subresources: &[status("Ingress", "networking.k8s.io")],
        ..res("networking.k8s.io", "Ingress", "ingresses", "ingress", true)
    },
    ResourceType {
        short_names: &["netpol"],
        ..res(
            "networking.k8s.io",
            "NetworkPolicy",
            "networkpolicies",
            "networkpolicy",
            true,
        )
    },
    // policy/v1
    ResourceType {
        short_names: &["pdb"],
        subresources: &[status("PodDisruptionBudget", "policy")],
        ..res(
            "policy",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            true,
        )
    },
    // rbac.authorization.k8s.io/v1
    res(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        "clusterrolebinding",
        false,
    ),
    res(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        "clusterrole",
        false,
    ),
    res(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        "rolebinding",
        true,
    ),
    res("rbac.authorization.k8s.io", "Role", "roles", "role", true),
    // apiextensions.k8s.io/v1
    ResourceType {
        short_names: &["crd", "crds"],
        categories: &["api-extensions"],
        subresources: &[status("CustomResourceDefinition", "apiextensions.k8s.io")],
        ..res(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            "customresourcedefinition",
            false,
        )
    },
    // coordination.k8s.io/v1
    res("coordination.k8s.io", "Lease", "leases", "lease", true),
    // stable.example.com/v1, served from the CustomResourceDefinition
    // `crontabs.stable.example.com` in the seed.
    ResourceType {
        short_names: &["ct"],
        ..res("stable.example.com", "CronTab", "crontabs", "crontab", true)
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{find, find_kind};

    #[test]
    fn every_plural_is_unique_within_its_group_version() {
        for (i, a) in RESOURCES.iter().enumerate() {
            for b in &RESOURCES[i + 1..] {
                assert!(
                    !(a.group == b.group && a.version == b.version && a.plural == b.plural),
                    "{} listed twice",
                    a.plural
                );
            }
        }
    }

    #[test]
    fn deployments_scale_is_an_autoscaling_v1_scale() {
        let deployments = find("apps", "v1", "deployments").expect("deployments served");
        let scale = deployments.subresource("scale").expect("scale served");
        assert_eq!((scale.group, scale.version, scale.kind), ("autoscaling", "v1", "Scale"));
        assert_eq!(deployments.short_names, ["deploy"]);
        assert_eq!(deployments.categories, ["all"]);
    }

    #[test]
    fn review_resources_are_create_only_and_not_stored() {
        let is_review = |r: &&ResourceType| {
            let path = format!("/apis/{}/{}/{}", r.group, r.version, r.plural);
            crate::request_info::classify(&http::Method::POST, &path, None).is_ok_and(|info| info.is_review())
        };
        let reviews: Vec<_> = RESOURCES.iter().filter(is_review).collect();
        assert_eq!(reviews.len(), 6, "every review resource is served");
        for r in reviews {
            assert_eq!(r.verbs, ["create"], "{}", r.plural);
            assert!(!r.stored, "{}", r.plural);
        }
        let local = find("authorization.k8s.io", "v1", "localsubjectaccessreviews").expect("served");
        assert!(local.namespaced);
    }

    #[test]
    fn service_account_token_is_an_authentication_token_request() {
        let sa = find_kind("", "ServiceAccount").expect("served");
        let token = sa.subresource("token").expect("token served");
        assert_eq!(
            (token.group, token.kind, token.verbs),
            ("authentication.k8s.io", "TokenRequest", CREATE)
        );
    }

    #[test]
    fn namespaces_cannot_be_deleted_as_a_collection() {
        let ns = find("", "v1", "namespaces").expect("served");
        assert!(!ns.verbs.contains(&"deletecollection"));
        assert!(!ns.namespaced);
    }
}
