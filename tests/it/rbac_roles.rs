//! Each built-in role's allow and deny cases, asked of the cluster with
//! `kubectl auth can-i` through portcullis once the reconciler has bound the
//! grants.

use crate::harness::{Kubectl, Portcullis};
use crate::rbac::cli_ok;

/// `kubectl auth can-i <args>` answers `want` ("yes" or "no").
fn can_i(kubectl: &Kubectl, role: &str, args: &[&str], want: &str) {
    let mut full = vec!["auth", "can-i"];
    full.extend_from_slice(args);
    let out = kubectl.run(&full);
    let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        answer,
        want,
        "{role}: can-i {args:?}; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn check(env: &Portcullis, role: &str, namespace: Option<&str>, yes: &[&[&str]], no: &[&[&str]]) {
    let token = env.person(role, &[(role, namespace)]);
    let kubectl = env.kubectl(&token, "shop");
    for args in yes {
        can_i(&kubectl, role, args, "yes");
    }
    for args in no {
        can_i(&kubectl, role, args, "no");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_builtin_role_allows_what_it_says_and_nothing_more() {
    let env = Portcullis::start().await;
    let shop = Some("shop");
    check(
        &env,
        "viewer",
        shop,
        &[
            &["get", "pods"],
            &["list", "deployments.apps"],
            &["get", "pods", "--subresource=log"],
            &["watch", "configmaps"],
        ],
        &[
            &["get", "secrets"],
            &["create", "configmaps"],
            &["delete", "pods"],
            &["list", "pods", "-n", "payments"],
        ],
    );
    check(
        &env,
        "developer",
        shop,
        &[
            &["create", "deployments.apps"],
            &["patch", "services"],
            &["update", "deployments.apps", "--subresource=scale"],
            &["delete", "configmaps"],
        ],
        &[
            &["get", "secrets"],
            &["create", "pods", "--subresource=exec"],
            &["create", "rolebindings.rbac.authorization.k8s.io"],
        ],
    );
    check(
        &env,
        "debugger",
        shop,
        &[
            &["create", "pods", "--subresource=exec"],
            &["create", "pods", "--subresource=attach"],
            &["create", "pods", "--subresource=portforward"],
            &["get", "pods"],
        ],
        &[&["create", "deployments.apps"], &["get", "secrets"]],
    );
    check(
        &env,
        "secrets-reader",
        shop,
        &[&["get", "secrets"], &["list", "secrets"]],
        &[
            &["create", "secrets"],
            &["delete", "secrets"],
            &["get", "secrets", "-n", "payments"],
        ],
    );
    check(
        &env,
        "admin",
        shop,
        &[
            &["create", "rolebindings.rbac.authorization.k8s.io"],
            &["delete", "secrets"],
            &["create", "pods", "--subresource=exec"],
        ],
        // Cluster-scoped questions are asked without a namespace (`-A`): with
        // one, the API server answers about that namespace's bindings.
        &[
            &["get", "pods", "-n", "payments"],
            &["list", "nodes", "-A"],
            &["create", "namespaces", "-A"],
        ],
    );
    check(
        &env,
        "cluster-admin",
        None,
        &[
            &["list", "nodes", "-A"],
            &["create", "namespaces", "-A"],
            &["get", "secrets", "-n", "payments"],
            &["get", "/metrics"],
        ],
        &[],
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_admin_beyond_its_maximum_duration_is_refused() {
    let env = Portcullis::start().await;
    env.store
        .add_principal(&portcullis::identity::Principal::person("ana"), false)
        .unwrap();
    let out = env.cli(&[
        "admin",
        "grant",
        "add",
        "--person",
        "ana",
        "--cluster",
        "sim",
        "--role",
        "cluster-admin",
        "--duration",
        "5h",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("role cluster-admin may be granted for at most 4h"),
        "{err}"
    );
    let ok = cli_ok(
        &env,
        &[
            "admin",
            "grant",
            "add",
            "--person",
            "ana",
            "--cluster",
            "sim",
            "--role",
            "cluster-admin",
            "--duration",
            "4h",
        ],
    );
    assert!(ok.contains("in step"), "{ok}");
    env.stop().await;
}
