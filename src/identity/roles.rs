//! The built-in roles, written down in one place, and custom roles from the
//! configuration.
//!
//! | role | what it allows |
//! | --- | --- |
//! | `viewer` | read (get, list, watch) namespaced workloads, services, configmaps, events, pods and their logs; not Secrets |
//! | `developer` | viewer, plus create/update/patch/delete of workloads, services, configmaps, and scaling; not Secrets, not exec |
//! | `debugger` | viewer, plus exec, attach and port-forward into pods |
//! | `secrets-reader` | read Secrets (and reveals their values) |
//! | `admin` | everything in a namespace, Secrets and RBAC included (reveals Secrets) |
//! | `cluster-admin` | everything everywhere; at most 4 hours a grant (reveals Secrets) |
//!
//! "Not Secrets" means not through the Secrets API: `developer` (creates
//! pods, reads logs) and `debugger` (exec, attach) still reach Secret values
//! through pods ([`Role::reads_secrets_through_pods`]), which `whoami` tells
//! an agent.
//!
//! Each role becomes a ClusterRole `portcullis:<role>` in every cluster; a
//! grant binds it in one namespace (RoleBinding) or cluster-wide
//! (ClusterRoleBinding).

mod subset;

use crate::config::Config;
use serde_json::{json, Value};
use std::time::Duration;
pub use subset::narrower;

/// A role's shape is configuration (custom roles are written in the
/// configuration file); what it allows is worked out here.
pub use crate::config::roles::Role;

impl Role {
    /// The ClusterRole name in each cluster.
    pub fn cluster_role_name(&self) -> String {
        format!("portcullis:{}", self.name)
    }

    /// Does one of the role's rules allow `verb` on `resource` (with its
    /// subresource, `pods/log`) in API group `group`? Wildcards as RBAC
    /// reads them (`*`, and `*/<subresource>`).
    pub fn allows(&self, group: &str, resource: &str, verb: &str) -> bool {
        self.allows_named(group, resource, verb, None)
    }

    /// [`Role::allows`] for the object `name` (`Some("")`: a request that
    /// names none, such as a create): a rule with `resourceNames` allows
    /// only those names, and never a request without one, as RBAC reads it.
    /// `None` asks about any object.
    pub fn allows_named(&self, group: &str, resource: &str, verb: &str, name: Option<&str>) -> bool {
        let subresource = resource.split_once('/').map(|(_, sub)| sub);
        self.rules.iter().any(|rule| {
            let has = |key: &str, want: &dyn Fn(&str) -> bool| {
                rule[key]
                    .as_array()
                    .is_some_and(|values| values.iter().filter_map(Value::as_str).any(want))
            };
            let names_allow = match (name, rule["resourceNames"].as_array()) {
                (Some(name), Some(names)) if !names.is_empty() => {
                    !name.is_empty() && names.iter().any(|n| n.as_str() == Some(name))
                }
                _ => true,
            };
            has("apiGroups", &|g| g == "*" || g == group)
                && has("verbs", &|v| v == "*" || v == verb)
                && has("resources", &|r| {
                    r == "*" || r == resource || subresource.is_some_and(|sub| r.strip_prefix("*/") == Some(sub))
                })
                && names_allow
        })
    }

    /// How a holder can read Secret values through pods, which redaction
    /// cannot stop since they never pass through the Secrets API: `None`
    /// when the role allows no way.
    pub fn reads_secrets_through_pods(&self) -> Option<ThroughPods> {
        let core = |resource: &str, verbs: &[&str]| verbs.iter().any(|verb| self.allows("", resource, verb));
        let logs = core("pods/log", &["get"]);
        let stream = core("pods/exec", &["create", "get"]) || core("pods/attach", &["create", "get"]);
        // A workload's pod template may mount any Secret of its namespace,
        // as a pod may.
        const WORKLOADS: [(&str, &str); 7] = [
            ("apps", "deployments"),
            ("apps", "statefulsets"),
            ("apps", "daemonsets"),
            ("apps", "replicasets"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
            ("", "replicationcontrollers"),
        ];
        let workloads = WORKLOADS
            .iter()
            .any(|(group, resource)| self.allows(group, resource, "create"));
        // The kubelet's API runs commands in any pod of the node with a
        // plain POST (`/run`), no upgrade, no pods/exec.
        if core("nodes/proxy", &["create", "get"]) {
            return Some(ThroughPods {
                how: "run commands in any pod through the kubelet (nodes/proxy)",
                any_secret: true,
            });
        }
        match (core("pods", &["create"]), workloads, logs, stream) {
            (true, _, true, _) => Some(ThroughPods {
                how: "create pods and read their logs",
                any_secret: true,
            }),
            (true, _, false, true) => Some(ThroughPods {
                how: "create pods and exec or attach into them",
                any_secret: true,
            }),
            (false, true, true, _) => Some(ThroughPods {
                how: "create workloads (deployments, jobs, …) and read their pods' logs",
                any_secret: true,
            }),
            (false, true, false, true) => Some(ThroughPods {
                how: "create workloads (deployments, jobs, …) and exec or attach into their pods",
                any_secret: true,
            }),
            (_, _, _, true) => Some(ThroughPods {
                how: "exec or attach into pods",
                any_secret: false,
            }),
            _ => None,
        }
    }
}

/// A way to Secret values through pods (see [`Role::reads_secrets_through_pods`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThroughPods {
    /// What the role allows, as a person would say it.
    pub how: &'static str,
    /// Any Secret of the scope (a new pod can mount any), rather than only
    /// those the scope's pods already mount or carry in their environment.
    pub any_secret: bool,
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

fn readable() -> Vec<Value> {
    vec![
        json!({"apiGroups": [""], "resources": ["pods", "pods/log", "pods/status", "services", "endpoints", "configmaps", "events", "persistentvolumeclaims", "serviceaccounts", "replicationcontrollers", "resourcequotas", "limitranges"], "verbs": READ}),
        json!({"apiGroups": ["apps"], "resources": ["deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale", "daemonsets", "controllerrevisions"], "verbs": READ}),
        json!({"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": READ}),
        json!({"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "networkpolicies"], "verbs": READ}),
        json!({"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": READ}),
        json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": READ}),
        json!({"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": READ}),
    ]
}

fn developer_writes() -> Vec<Value> {
    vec![
        json!({"apiGroups": [""], "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"], "verbs": WRITE}),
        json!({"apiGroups": ["apps"], "resources": ["deployments", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale", "daemonsets"], "verbs": WRITE}),
        json!({"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": WRITE}),
        json!({"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": WRITE}),
        json!({"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": WRITE}),
    ]
}

/// The six built-in roles.
pub fn builtin() -> Vec<Role> {
    let role = |name: &str, rules: Vec<Value>, reveals: bool, max: Option<u64>| Role {
        name: name.into(),
        rules,
        reveals_secrets: reveals,
        namespaced: false,
        max_duration: max.map(Duration::from_secs),
    };
    let stream = json!({"apiGroups": [""], "resources": ["pods/exec", "pods/attach", "pods/portforward"], "verbs": ["get", "create"]});
    let secrets = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": READ});
    let everything = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
    vec![
        role("viewer", readable(), false, None),
        role("developer", [readable(), developer_writes()].concat(), false, None),
        role("debugger", [readable(), vec![stream]].concat(), false, None),
        role("secrets-reader", vec![secrets], true, None),
        Role {
            namespaced: true,
            ..role("admin", vec![everything.clone()], true, None)
        },
        role(
            "cluster-admin",
            vec![everything, json!({"nonResourceURLs": ["*"], "verbs": ["*"]})],
            true,
            Some(4 * 3600),
        ),
    ]
}

/// The built-in roles and the configuration's custom ones.
pub fn all(config: &Config) -> Vec<Role> {
    builtin().into_iter().chain(config.roles.iter().cloned()).collect()
}

/// The built-in roles as ClusterRole manifests (what `deploy/roles.yaml`
/// holds, kept in step by a test).
pub fn cluster_roles_yaml() -> String {
    let mut out = String::from(
        "# Generated from src/identity/roles.rs (the test `deploy_roles_yaml_matches_the_builtin_roles`\n# fails when they differ; PORTCULLIS_BLESS=1 rewrites this file).\n",
    );
    for role in builtin() {
        let object = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role.cluster_role_name(), "labels": {"app.kubernetes.io/managed-by": "portcullis"}},
            "rules": role.rules,
        });
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&object).unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str) -> Role {
        builtin().into_iter().find(|r| r.name == name).unwrap()
    }

    fn allows(role: &Role, group: &str, resource: &str, verb: &str) -> bool {
        role.rules.iter().any(|rule| {
            let has = |key: &str, want: &str| {
                rule[key]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|x| x == want || x == "*"))
            };
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    }

    #[test]
    fn viewer_reads_workloads_but_not_secrets() {
        let viewer = role("viewer");
        assert!(allows(&viewer, "apps", "deployments", "list"));
        assert!(allows(&viewer, "", "pods/log", "get"));
        assert!(!allows(&viewer, "", "secrets", "get"));
        assert!(!allows(&viewer, "", "configmaps", "create"));
    }

    #[test]
    fn developer_writes_workloads_without_secrets_or_exec() {
        let dev = role("developer");
        assert!(allows(&dev, "apps", "deployments", "patch"));
        assert!(allows(&dev, "apps", "deployments/scale", "update"));
        assert!(!allows(&dev, "", "secrets", "get"));
        assert!(!allows(&dev, "", "pods/exec", "create"));
    }

    #[test]
    fn developer_and_debugger_can_read_secrets_through_pods_and_viewer_cannot() {
        let through_pods: Vec<String> = builtin()
            .into_iter()
            .filter(|r| !r.reveals_secrets && r.reads_secrets_through_pods().is_some())
            .map(|r| r.name)
            .collect();
        assert_eq!(through_pods, ["developer", "debugger"]);
        let developer = role("developer").reads_secrets_through_pods().unwrap();
        assert_eq!(developer.how, "create pods and read their logs");
        assert!(developer.any_secret);
        assert!(!role("debugger").reads_secrets_through_pods().unwrap().any_secret);
        assert!(role("admin").reads_secrets_through_pods().is_some());
        let custom = Role {
            name: "exec-anything".into(),
            rules: vec![json!({"apiGroups": [""], "resources": ["*/exec"], "verbs": ["create"]})],
            reveals_secrets: false,
            namespaced: false,
            max_duration: None,
        };
        assert_eq!(
            custom.reads_secrets_through_pods().unwrap().how,
            "exec or attach into pods"
        );
        let custom = |rules: serde_json::Value| Role {
            name: "custom".into(),
            rules: rules.as_array().unwrap().clone(),
            reveals_secrets: false,
            namespaced: false,
            max_duration: None,
        };
        let kubelet = custom(json!([{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["create"]}]));
        let through = kubelet.reads_secrets_through_pods().unwrap();
        assert!(through.any_secret && through.how.contains("nodes/proxy"));
        let jobs = custom(json!([
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}
        ]));
        let through = jobs.reads_secrets_through_pods().unwrap();
        assert!(through.any_secret && through.how.contains("workloads"));
        let jobs_alone = custom(json!([{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}]));
        assert_eq!(
            jobs_alone.reads_secrets_through_pods(),
            None,
            "no way to read what a job's pod sees"
        );
    }

    #[test]
    fn only_secret_revealing_roles_reveal() {
        let revealing: Vec<String> = builtin()
            .into_iter()
            .filter(|r| r.reveals_secrets)
            .map(|r| r.name)
            .collect();
        assert_eq!(revealing, ["secrets-reader", "admin", "cluster-admin"]);
    }

    #[test]
    fn deploy_roles_yaml_matches_the_builtin_roles() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/roles.yaml");
        let expected = cluster_roles_yaml();
        if std::env::var_os("PORTCULLIS_BLESS").is_some() {
            std::fs::write(path, &expected).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(path).unwrap(),
            expected,
            "run with PORTCULLIS_BLESS=1 to regenerate"
        );
    }

    #[test]
    fn cluster_admin_has_a_short_maximum() {
        assert_eq!(role("cluster-admin").max_duration, Some(Duration::from_secs(4 * 3600)));
        assert!(role("admin").namespaced && !role("cluster-admin").namespaced);
        let names: Vec<String> = builtin().into_iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            crate::config::roles::BUILTIN_NAMES,
            "the names a custom role may not take"
        );
        assert_eq!(role("admin").max_duration, None);
    }
}
