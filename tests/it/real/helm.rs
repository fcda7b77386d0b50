//! The Helm chart (`deploy/helm/portcullis`): what `helm template` renders
//! is accepted by a real kube-apiserver, holds exactly `deploy/rbac.yaml`'s
//! rules, and configures portcullis with a file portcullis accepts whose
//! every path is mounted in the pod.

use portcullis::config::Config;
use serde::Deserialize;
use serde_yaml::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The values file with one remote cluster, sign-in on, ServiceMonitor off.
const ONE_CLUSTER_OIDC: &str = "deploy/helm/portcullis/ci/one-cluster-oidc-values.yaml";

pub(super) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `helm template` as `release` in `namespace`, with `args` after; its
/// output, or its error message.
pub(super) fn helm_template(release: &str, namespace: &str, args: &[&str]) -> Result<String, String> {
    let helm = root().join(".tools/bin/helm");
    assert!(helm.exists(), "{} is missing: scripts/setup builds it", helm.display());
    let out = Command::new(&helm)
        .current_dir(root())
        .args(["template", release, "deploy/helm/portcullis", "--namespace", namespace])
        .args(args)
        .output()
        .expect("helm runs");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).expect("helm prints UTF-8"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Every object of a multi-document YAML text.
pub(super) fn objects(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

pub(super) fn render(release: &str, namespace: &str, args: &[&str]) -> Vec<Value> {
    objects(&helm_template(release, namespace, args).unwrap_or_else(|e| panic!("helm template: {e}")))
}

/// The pod's own ServiceAccount token, when a cluster uses it, is one of an
/// hour that the kubelet renews, never the automounted one, which the API
/// server by default accepts for a year; the plain manifests say the same.
#[test]
fn the_pods_service_account_token_lasts_an_hour_and_is_not_the_automounted_one() {
    let plain = objects(&std::fs::read_to_string(root().join("deploy/portcullis.yaml")).unwrap());
    for (what, objects) in [("chart", render("portcullis", "portcullis", &[])), ("plain", plain)] {
        let deployment = objects.iter().find(|o| str_at(o, &["kind"]) == "Deployment").unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], false, "{what}");
        let volume = pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "service-account");
        let sources = &volume.unwrap_or_else(|| panic!("{what}: no token volume"))["projected"]["sources"];
        assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3600, "{what}");
        let mounts = pod["containers"][0]["volumeMounts"].as_sequence().unwrap();
        assert!(
            mounts
                .iter()
                .any(|m| m["name"] == "service-account"
                    && m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"),
            "{what}"
        );
    }
    let remote = render("portcullis", "portcullis", &["-f", ONE_CLUSTER_OIDC]);
    let deployment = remote.iter().find(|o| str_at(o, &["kind"]) == "Deployment").unwrap();
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_sequence().unwrap();
    assert!(
        volumes.iter().all(|v| v["name"] != "service-account"),
        "no cluster uses it"
    );
}

/// A chart serving only remote clusters leaves no RBAC in the cluster it
/// runs in: its rules are as strong as cluster-admin, and there they would
/// only wait for someone able to make the ServiceAccount's tokens.
#[test]
fn a_chart_for_remote_clusters_only_grants_nothing_in_its_own_cluster() {
    let remote = rbac_objects(&render("portcullis", "portcullis", &["-f", ONE_CLUSTER_OIDC]));
    assert!(remote.is_empty(), "{remote:?}");
    assert!(!rbac_objects(&render("portcullis", "portcullis", &[])).is_empty());
}

pub(super) fn str_at<'a>(object: &'a Value, path: &[&str]) -> &'a str {
    let mut node = object;
    for key in path {
        node = &node[*key];
    }
    node.as_str().unwrap_or_default()
}

/// `kind/name`, as `kubectl create -o name` prints it (lower-case kind and
/// its API group).
fn kubectl_name(object: &Value) -> String {
    let group = str_at(object, &["apiVersion"]).rsplit_once('/').map(|(g, _)| g);
    let kind = str_at(object, &["kind"]).to_ascii_lowercase();
    let name = str_at(object, &["metadata", "name"]);
    match group {
        Some(group) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// `helm install` the chart with `args` into a fresh namespace of the real
/// cluster, as its admin: every object the chart renders must be created,
/// the Deployment with `replicas`. Returns the namespace (the release's
/// name too).
pub(super) fn install_into_real_cluster(args: &[&str], replicas: u32) -> String {
    let cluster = super::shared();
    let ns = cluster.namespace("helm").unwrap();
    // The release's name is the namespace's: its cluster-scoped objects
    // (ClusterRoles, bindings) are its own too.
    let rendered = helm_template(&ns, &ns, args).unwrap_or_else(|e| panic!("helm template: {e}"));
    let mut expected: Vec<String> = objects(&rendered).iter().map(kubectl_name).collect();
    assert!(
        expected.iter().any(|n| n.starts_with("deployment.apps/")),
        "{expected:?}"
    );
    let kubeconfig = format!("--kubeconfig={}", cluster.admin_kubeconfig().display());
    let install = Command::new(root().join(".tools/bin/helm"))
        .current_dir(root())
        .args([
            "install",
            &ns,
            "deploy/helm/portcullis",
            "--namespace",
            &ns,
            &kubeconfig,
        ])
        .args(args)
        .output()
        .expect("helm runs");
    let said = String::from_utf8_lossy(&install.stderr);
    assert!(
        install.status.success(),
        "the real API server refused the chart: {said}"
    );
    let file = cluster.dir().join(format!("{ns}.yaml"));
    std::fs::write(&file, &rendered).unwrap();
    let found = cluster
        .admin(&["get", "-f", &file.display().to_string(), "-o", "name"])
        .unwrap_or_else(|e| panic!("not every object was created: {e}"));
    let mut found: Vec<String> = found.lines().map(str::to_string).collect();
    expected.sort();
    found.sort();
    assert_eq!(found, expected, "every rendered object is created");
    let replicas_of = [
        "get",
        "deployment",
        "-n",
        &ns,
        "-o",
        "jsonpath={.items[0].spec.replicas}",
    ];
    assert_eq!(cluster.admin(&replicas_of).unwrap(), replicas.to_string());
    ns
}

#[test]
fn the_chart_with_its_default_values_is_accepted_by_a_real_api_server() {
    install_into_real_cluster(&[], 1);
}

#[test]
fn the_chart_with_one_cluster_and_sign_in_is_accepted_by_a_real_api_server() {
    install_into_real_cluster(&["-f", ONE_CLUSTER_OIDC], 1);
}

/// Objects of RBAC kinds, by `kind/namespace/name`.
fn rbac_objects(objects: &[Value]) -> Vec<(String, Value)> {
    let rbac = ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"];
    let mut found: Vec<(String, Value)> = objects
        .iter()
        .filter(|o| rbac.contains(&str_at(o, &["kind"])))
        .map(|o| {
            let key = format!(
                "{}/{}/{}",
                str_at(o, &["kind"]),
                str_at(o, &["metadata", "namespace"]),
                str_at(o, &["metadata", "name"])
            );
            // What the objects grant, and to whom; not their labels.
            let grants = ["rules", "roleRef", "subjects"].map(|k| o[k].clone());
            (key, Value::Sequence(grants.to_vec()))
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

#[test]
fn the_charts_rbac_grants_exactly_what_deploy_rbac_yaml_grants() {
    // Release portcullis in namespace portcullis: deploy/rbac.yaml's names.
    let chart = rbac_objects(&render("portcullis", "portcullis", &[]));
    let plain = std::fs::read_to_string(root().join("deploy/rbac.yaml")).unwrap();
    let plain = rbac_objects(&objects(&plain));
    assert_eq!(plain.len(), 6, "{plain:?}");
    assert_eq!(chart, plain);
}

/// Where the Deployment's container mounts its volumes.
pub(super) fn mount_paths(objects: &[Value]) -> Vec<PathBuf> {
    let deployment = objects
        .iter()
        .find(|o| str_at(o, &["kind"]) == "Deployment")
        .expect("a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mounts = container["volumeMounts"].as_sequence().expect("volume mounts");
    mounts
        .iter()
        .map(|m| PathBuf::from(str_at(m, &["mountPath"])))
        .collect()
}

#[test]
fn the_rendered_configuration_is_accepted_by_portcullis_and_its_files_are_mounted() {
    let rendered = render("portcullis", "team-a", &["-f", ONE_CLUSTER_OIDC]);
    let config = config_of(&rendered);
    assert_eq!(config.clusters.len(), 1);
    assert_eq!(config.clusters[0].name, "prod");
    assert_eq!(config.reconcile.lease_namespace, "team-a");
    assert_eq!(config.reconcile.instance.as_deref(), Some("production"));
    assert!(config.protected_namespaces.contains(&"team-a".to_string()));
    let oidc = config.oidc.as_ref().expect("[oidc]");
    assert_eq!(oidc.issuer, "https://idp.example.com");

    let cluster = &config.clusters[0];
    let files = [
        Some(&config.tls.cert_file),
        Some(&config.tls.key_file),
        Some(&cluster.ca_file),
        Some(&cluster.token_file),
        cluster.audit_webhook_token_file.as_ref(),
        Some(&oidc.client_secret_file),
        config.approvals.key_file.as_ref(),
    ];
    let mounts = mount_paths(&rendered);
    for file in files {
        let file = file.expect("the values file sets every file");
        assert!(
            mounts.iter().any(|m| file.starts_with(m)),
            "{} is not mounted",
            file.display()
        );
    }
    assert!(mounts.contains(&config.data_dir), "the store is on a volume");
}

/// The portcullis.toml of the ConfigMap among `objects`, as portcullis reads it.
pub(super) fn config_of(objects: &[Value]) -> Config {
    config_with_env(objects, []).unwrap_or_else(|e| panic!("{e}"))
}

/// The portcullis.toml of the ConfigMap among `objects` with the variables
/// `env` laid over it, as portcullis reads them at start.
fn config_with_env(
    objects: &[Value],
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, portcullis::config::ConfigError> {
    let configmap = objects
        .iter()
        .find(|o| str_at(o, &["kind"]) == "ConfigMap")
        .expect("a ConfigMap");
    let toml = str_at(configmap, &["data", "portcullis.toml"]);
    Config::from_sources(toml, env)
}

#[test]
fn the_plain_manifests_configure_and_run_portcullis_as_the_charts_defaults_do() {
    let chart = render("portcullis", "portcullis", &[]);
    let plain = objects(&std::fs::read_to_string(root().join("deploy/portcullis.yaml")).unwrap());
    let as_json = |objects: &[Value]| serde_json::to_value(config_of(objects)).unwrap();
    assert_eq!(as_json(&plain), as_json(&chart), "the same configuration");

    let pod = |objects: &[Value]| {
        let deployment = objects.iter().find(|o| str_at(o, &["kind"]) == "Deployment");
        deployment.expect("a Deployment")["spec"]["template"]["spec"].clone()
    };
    let (plain_pod, chart_pod) = (pod(&plain), pod(&chart));
    for field in ["securityContext", "terminationGracePeriodSeconds", "enableServiceLinks"] {
        assert_eq!(plain_pod[field], chart_pod[field], "{field}");
    }
    let (plain_container, chart_container) = (&plain_pod["containers"][0], &chart_pod["containers"][0]);
    for field in ["args", "env", "securityContext", "resources", "lifecycle"] {
        assert_eq!(plain_container[field], chart_container[field], "{field}");
    }
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        assert!(chart_container[probe]["httpGet"].is_mapping(), "{probe}");
        assert_eq!(
            plain_container[probe]["httpGet"], chart_container[probe]["httpGet"],
            "{probe}"
        );
    }
    // Its bounds too: the migrations' time is the same either way.
    assert_eq!(plain_container["startupProbe"], chart_container["startupProbe"]);
    let mut mounts = [mount_paths(&plain), mount_paths(&chart)];
    mounts.iter_mut().for_each(|m| m.sort());
    assert_eq!(mounts[0], mounts[1]);
}

/// The variables a kubelet with service links on gives a pod for
/// `services`, as Kubernetes names them.
fn service_links(services: &[&Value]) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for service in services {
        let name = str_at(service, &["metadata", "name"]).to_uppercase().replace('-', "_");
        let ports = service["spec"]["ports"].as_sequence().cloned().unwrap_or_default();
        let address = "10.96.0.12";
        for (i, port) in ports.iter().enumerate() {
            let number = port["port"].as_u64().expect("a port number");
            let protocol = port["protocol"].as_str().unwrap_or("TCP");
            let url = format!("{}://{address}:{number}", protocol.to_lowercase());
            if i == 0 {
                env.push((format!("{name}_SERVICE_HOST"), address.to_string()));
                env.push((format!("{name}_SERVICE_PORT"), number.to_string()));
                env.push((format!("{name}_PORT"), url.clone()));
            }
            if let Some(port_name) = port["name"].as_str() {
                let port_name = port_name.to_uppercase().replace('-', "_");
                env.push((format!("{name}_SERVICE_PORT_{port_name}"), number.to_string()));
            }
            let at = format!("{name}_PORT_{number}_{protocol}");
            env.push((format!("{at}_PROTO"), protocol.to_lowercase()));
            env.push((format!("{at}_PORT"), number.to_string()));
            env.push((format!("{at}_ADDR"), address.to_string()));
            env.push((at, url));
        }
    }
    env
}

/// Kubernetes gives a pod variables for its namespace's Services, and the
/// chart's own is named `portcullis`: its pod turns them off, and were
/// they on (the plain manifests copied without that line), portcullis,
/// which reads `PORTCULLIS_*` as configuration, still starts.
#[test]
fn portcullis_starts_beside_its_own_service_with_service_links_on_or_off() {
    let chart = render("portcullis", "portcullis", &[]);
    let services: Vec<&Value> = chart.iter().filter(|o| str_at(o, &["kind"]) == "Service").collect();
    let links = service_links(&services);
    assert!(
        links.iter().any(|(name, _)| name == "PORTCULLIS_SERVICE_HOST"),
        "{links:?}"
    );
    let deployment = chart.iter().find(|o| str_at(o, &["kind"]) == "Deployment").unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["enableServiceLinks"].as_bool(), Some(false));
    let own: Vec<(String, String)> = pod["containers"][0]["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| Some((v["name"].as_str()?.to_string(), v["value"].as_str()?.to_string())))
        .collect();
    let loaded = config_with_env(&chart, own.into_iter().chain(links));
    assert!(loaded.is_ok(), "{loaded:?}");
}

/// A name portcullis would refuse (and that would name an invalid volume)
/// is refused when rendering, not by a pod crashing at start.
#[test]
fn the_chart_refuses_a_cluster_name_portcullis_would_refuse() {
    let named = |name: &str| {
        let name = format!("--set=clusters[0].name={name}");
        helm_template("portcullis", "portcullis", &[&name, "--set=clusters[0].inCluster=true"])
    };
    let upper = named("Prod").unwrap_err();
    assert!(
        upper.contains("clusters Prod: a cluster's name is lower-case"),
        "{upper}"
    );
    assert!(named("prod-eu-1").is_ok());
}

/// The NetworkPolicy, when asked for: the HTTPS port from the peers named,
/// and, when egress rules are given, those and DNS alone. (The values file
/// with it is also installed into the real API server above.)
#[test]
fn the_network_policy_admits_the_peers_named_and_lets_out_only_dns_and_the_rules_given() {
    let policies = |args: &[&str]| -> Vec<Value> {
        let rendered = render("portcullis", "portcullis", args);
        rendered
            .into_iter()
            .filter(|o| str_at(o, &["kind"]) == "NetworkPolicy")
            .collect()
    };
    assert!(policies(&[]).is_empty(), "off by default");
    let policy = policies(&["-f", ONE_CLUSTER_OIDC]).pop().expect("a NetworkPolicy");
    let spec = &policy["spec"];
    let selector = &spec["podSelector"]["matchLabels"];
    assert_eq!(str_at(selector, &["app.kubernetes.io/name"]), "portcullis");
    let ingress = spec["ingress"].as_sequence().unwrap();
    assert_eq!(ingress.len(), 1);
    assert_eq!(str_at(&ingress[0]["ports"][0], &["port"]), "https");
    assert_eq!(str_at(&ingress[0]["from"][0], &["ipBlock", "cidr"]), "10.0.0.0/8");
    let egress = spec["egress"].as_sequence().unwrap();
    assert_eq!(egress[0]["ports"][0]["port"].as_u64(), Some(53), "DNS first");
    assert_eq!(egress.len(), 3, "DNS and the two rules given: {egress:?}");
    let types: Vec<&str> = spec["policyTypes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert_eq!(types, ["Ingress", "Egress"]);
}

/// Who portcullis is to a remote API server is not guessed: guessed
/// wrong, its audit's bypass alerts would never fire.
#[test]
fn the_chart_refuses_a_remote_cluster_without_its_service_account() {
    let remote = [
        "--set=clusters[0].name=prod",
        "--set=clusters[0].server=https://10.0.0.1:6443",
        "--set=clusters[0].caSecret.name=prod",
        "--set=clusters[0].caSecret.key=ca.crt",
        "--set=clusters[0].tokenSecret.name=prod",
        "--set=clusters[0].tokenSecret.key=token",
    ];
    let refused = helm_template("portcullis", "portcullis", &remote).unwrap_err();
    assert!(
        refused.contains("clusters prod: a remote cluster needs serviceAccount"),
        "{refused}"
    );
    let named = [
        &remote[..],
        &["--set=clusters[0].serviceAccount=system:serviceaccount:portcullis:portcullis"],
    ]
    .concat();
    assert!(helm_template("portcullis", "portcullis", &named).is_ok());
}

#[test]
fn the_chart_refuses_sign_in_without_the_approvals_key() {
    let no_key = helm_template("portcullis", "portcullis", &["--set", "oidc.enabled=true"]).unwrap_err();
    assert!(no_key.contains("approvals.keySecret"), "{no_key}");
}

/// portcullis's ServiceAccount may impersonate anyone: the chart never
/// runs it as the namespace's `default` account, which other pods share.
#[test]
fn the_chart_never_runs_portcullis_as_the_namespaces_default_service_account() {
    let unnamed = helm_template("portcullis", "portcullis", &["--set", "serviceAccount.create=false"]).unwrap_err();
    assert!(unnamed.contains("serviceAccount.name"), "{unnamed}");
    for args in [
        &[
            "--set",
            "serviceAccount.create=false",
            "--set",
            "serviceAccount.name=default",
        ][..],
        &["--set", "serviceAccount.name=default"][..],
    ] {
        let refused = helm_template("portcullis", "portcullis", args).unwrap_err();
        assert!(refused.contains("an account of its own"), "{args:?}: {refused}");
    }
    let own = render(
        "portcullis",
        "portcullis",
        &[
            "--set",
            "serviceAccount.create=false",
            "--set",
            "serviceAccount.name=gatekeeper",
        ],
    );
    let deployment = own.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        str_at(deployment, &["spec", "template", "spec", "serviceAccountName"]),
        "gatekeeper"
    );
    assert!(!own.iter().any(|o| o["kind"] == "ServiceAccount"), "none made");
}

#[test]
fn the_service_monitor_is_rendered_only_when_asked_for() {
    let kinds = |args: &[&str]| -> Vec<String> {
        let rendered = render("portcullis", "portcullis", args);
        rendered.iter().map(|o| str_at(o, &["kind"]).to_string()).collect()
    };
    assert!(!kinds(&[]).contains(&"ServiceMonitor".to_string()));
    let on = kinds(&["--set", "serviceMonitor.enabled=true"]);
    assert!(on.contains(&"ServiceMonitor".to_string()), "{on:?}");
}
