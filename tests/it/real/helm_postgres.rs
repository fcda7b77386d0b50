//! The Helm chart on the PostgreSQL store: several replicas, the store's
//! URL or password from a Secret and never in a rendered object, each
//! pod's audit spool on an `emptyDir`, a disruption budget that follows the
//! replicas; and several replicas on SQLite refused.

use super::helm::{config_of, helm_template, install_into_real_cluster, render, str_at};
use portcullis::config::Config;
use serde_yaml::Value;
use std::path::{Path, PathBuf};

/// Three replicas on PostgreSQL, the URL whole in a Secret.
const THREE_ON_POSTGRES: &str = "deploy/helm/portcullis/ci/three-replicas-postgres-values.yaml";

/// The first object of `kind` among `objects`.
fn first<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = objects.iter().find(|o| str_at(o, &["kind"]) == kind);
    found.unwrap_or_else(|| panic!("no {kind} among {objects:?}"))
}

/// The release's objects of `kinds` as the real API server holds them.
fn live(ns: &str, kinds: &str) -> Vec<Value> {
    let selector = format!("app.kubernetes.io/instance={ns}");
    let args = ["get", kinds, "-n", ns, "-l", &selector, "-o", "json"];
    let json = super::shared().admin(&args).unwrap();
    let list: Value = serde_yaml::from_str(&json).unwrap();
    list["items"].as_sequence().expect("a list").clone()
}

/// The volume of `pod` whose mount holds `file` (the deepest mount).
fn volume_holding<'a>(pod: &'a Value, file: &Path) -> &'a Value {
    let mounts = pod["containers"][0]["volumeMounts"].as_sequence().expect("mounts");
    let mount = mounts
        .iter()
        .filter(|m| file.starts_with(str_at(m, &["mountPath"])))
        .max_by_key(|m| str_at(m, &["mountPath"]).len())
        .unwrap_or_else(|| panic!("{} is not mounted", file.display()));
    let volumes = pod["volumes"].as_sequence().expect("volumes");
    let name = str_at(mount, &["name"]);
    volumes
        .iter()
        .find(|v| str_at(v, &["name"]) == name)
        .expect("the mount's volume")
}

/// The configuration portcullis reads in the pod: the ConfigMap's file with
/// the URL the Secret gives as `PORTCULLIS_STORE__URL`.
fn config_with_url_from_env(objects: &[Value]) -> Config {
    let toml = str_at(first(objects, "ConfigMap"), &["data", "portcullis.toml"]);
    let env = [(
        "PORTCULLIS_STORE__URL".to_string(),
        "postgres://portcullis@db.internal/portcullis".to_string(),
    )];
    Config::from_sources(toml, env).unwrap_or_else(|e| panic!("{e}\n{toml}"))
}

#[test]
fn three_replicas_on_postgresql_install_with_the_url_from_its_secret_and_each_spool_on_an_empty_dir() {
    let ns = install_into_real_cluster(&["-f", THREE_ON_POSTGRES], 3);
    let objects = live(&ns, "deployment,configmap,poddisruptionbudget");
    let pod = &first(&objects, "Deployment")["spec"]["template"]["spec"];
    let env = pod["containers"][0]["env"].as_sequence().expect("env");
    let url = env
        .iter()
        .find(|e| str_at(e, &["name"]) == "PORTCULLIS_STORE__URL")
        .expect("the store's URL in the environment");
    assert!(url["value"].is_null(), "a literal URL: {url:?}");
    let from = &url["valueFrom"]["secretKeyRef"];
    assert_eq!(
        (str_at(from, &["name"]), str_at(from, &["key"])),
        ("portcullis-store", "url")
    );

    let config = config_with_url_from_env(&objects);
    assert!(config.store.postgres().unwrap().is_some(), "the store is PostgreSQL");
    let spool = config
        .audit
        .spool_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("audit-spool"));
    let volume = volume_holding(pod, &spool);
    assert!(volume["emptyDir"].is_mapping(), "the spool's volume: {volume:?}");
    let claims = super::shared().admin(&["get", "pvc", "-n", &ns, "-o", "name"]).unwrap();
    assert_eq!(claims.trim(), "", "no claim on PostgreSQL");

    let key = volume_holding(pod, config.approvals.key_file.as_ref().expect("[approvals] key_file"));
    assert_eq!(str_at(key, &["secret", "secretName"]), "portcullis-approvals");
    let budget = &first(&objects, "PodDisruptionBudget")["spec"];
    assert_eq!(budget["minAvailable"].as_u64(), Some(2), "{budget:?}");
    let lease_role = super::shared()
        .admin(&["get", "role", "-n", &ns, "-o", "name"])
        .unwrap();
    assert!(lease_role.contains("leader-election"), "{lease_role}");
}

#[test]
fn no_rendered_object_holds_the_store_password() {
    let whole = render("portcullis", "portcullis", &["-f", THREE_ON_POSTGRES]);
    assert!(whole.iter().all(|o| str_at(o, &["kind"]) != "Secret"));
    assert_eq!(config_of(&whole).store.url, None, "the URL is only in the Secret");

    let url = "postgres://portcullis@db.internal:5432/portcullis?sslmode=require";
    let apart = [
        "--set-string",
        &format!("store.postgres.url={url}"),
        "--set",
        "store.postgres.passwordSecret.name=portcullis-db",
    ];
    let rendered = render("portcullis", "portcullis", &apart);
    let config = config_of(&rendered);
    assert_eq!(config.store.url.as_deref(), Some(url));
    let password: PathBuf = config.store.password_file.clone().expect("[store] password_file");
    let pod = &first(&rendered, "Deployment")["spec"]["template"]["spec"];
    let volume = volume_holding(pod, &password);
    assert_eq!(
        secret_of(volume, &password),
        ("portcullis-db".into(), "password".into())
    );

    for url in [
        "postgres://portcullis:hunter2@db.internal/portcullis",
        "postgres://portcullis@db.internal/portcullis?password=hunter2",
        "host=db.internal user=portcullis password=hunter2",
    ] {
        let set = format!("store.postgres.url={url}");
        let refused = helm_template("portcullis", "portcullis", &["--set-string", &set]).unwrap_err();
        assert!(
            refused.contains("store.postgres.url holds a password"),
            "{url}: {refused}"
        );
        assert!(
            !refused.contains("hunter2"),
            "the message repeats the password: {refused}"
        );
    }
}

/// The Secret and key a projected volume maps to `file`'s name.
fn secret_of(volume: &Value, file: &Path) -> (String, String) {
    let name = file.file_name().unwrap().to_str().unwrap();
    let sources = volume["projected"]["sources"]
        .as_sequence()
        .expect("a projected volume");
    sources
        .iter()
        .find_map(|source| {
            let items = source["secret"]["items"].as_sequence()?;
            let item = items.iter().find(|i| str_at(i, &["path"]) == name)?;
            Some((
                str_at(source, &["secret", "name"]).to_string(),
                str_at(item, &["key"]).to_string(),
            ))
        })
        .unwrap_or_else(|| panic!("no Secret gives {name}: {volume:?}"))
}

/// A PostgreSQL under a private CA: its CA comes from a Secret, mounted
/// where `[store] ca_file` names it, beside the URL from another Secret;
/// without PostgreSQL it is refused, not ignored.
#[test]
fn the_stores_private_ca_comes_from_a_secret_mounted_where_the_configuration_names_it() {
    let with_ca = ["-f", THREE_ON_POSTGRES, "--set", "store.postgres.caSecret.name=db-ca"];
    let rendered = render("portcullis", "portcullis", &with_ca);
    let ca: PathBuf = config_of(&rendered).store.ca_file.expect("[store] ca_file");
    let pod = &first(&rendered, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(
        secret_of(volume_holding(pod, &ca), &ca),
        ("db-ca".into(), "ca.crt".into())
    );
    let alone = helm_template(
        "portcullis",
        "portcullis",
        &["--set", "store.postgres.caSecret.name=db-ca"],
    );
    let refused = alone.unwrap_err();
    assert!(refused.contains("store.postgres.caSecret needs"), "{refused}");
}

#[test]
fn several_replicas_on_the_sqlite_store_are_refused_saying_why() {
    let refused = helm_template("portcullis", "portcullis", &["--set", "replicaCount=3"]).unwrap_err();
    for said in ["replicaCount 3", "SQLite", "PostgreSQL", "store.postgres.urlSecret"] {
        assert!(refused.contains(said), "{said}: {refused}");
    }
    let sqlite = render("portcullis", "portcullis", &[]);
    let pod = &first(&sqlite, "Deployment")["spec"]["template"]["spec"];
    let data = volume_holding(pod, Path::new("/var/lib/portcullis/audit-spool"));
    assert!(data["persistentVolumeClaim"].is_mapping(), "{data:?}");
}

/// The PodDisruptionBudget's spec rendered with `args`.
fn budget(args: &[&str]) -> Value {
    first(&render("portcullis", "portcullis", args), "PodDisruptionBudget")["spec"].clone()
}

#[test]
fn the_disruption_budget_lets_a_drain_take_one_replica_at_a_time() {
    assert_eq!(budget(&[])["maxUnavailable"].as_u64(), Some(1));
    assert!(budget(&[])["minAvailable"].is_null());
    let five = budget(&["-f", THREE_ON_POSTGRES, "--set", "replicaCount=5"]);
    assert_eq!(five["minAvailable"].as_u64(), Some(4));
    let chosen = budget(&["-f", THREE_ON_POSTGRES, "--set", "podDisruptionBudget.maxUnavailable=2"]);
    assert_eq!(chosen["maxUnavailable"].as_u64(), Some(2));
    assert!(chosen["minAvailable"].is_null());
    for (bound, value) in [
        ("minAvailable", "3"),
        ("minAvailable", "100%"),
        ("maxUnavailable", "0"),
        ("maxUnavailable", "0%"),
    ] {
        let stuck = format!("podDisruptionBudget.{bound}={value}");
        let refused = helm_template("portcullis", "portcullis", &["-f", THREE_ON_POSTGRES, "--set", &stuck]);
        let refused = refused.unwrap_err();
        assert!(
            refused.contains(&format!("podDisruptionBudget.{bound}")),
            "{stuck}: {refused}"
        );
    }
    // A drain is not held up by replicas unready for an outage elsewhere.
    assert_eq!(budget(&[])["unhealthyPodEvictionPolicy"].as_str(), Some("AlwaysAllow"));
}

#[test]
fn the_pod_has_time_to_ship_its_spool_after_sigterm() {
    let rendered = render("portcullis", "portcullis", &["-f", THREE_ON_POSTGRES]);
    let pod = &first(&rendered, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["terminationGracePeriodSeconds"].as_u64(), Some(60));
    let sleep = &pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"];
    assert_eq!(sleep.as_u64(), Some(5));
    let short = ["--set", "terminationGracePeriodSeconds=20"];
    let refused = helm_template("portcullis", "portcullis", &short).unwrap_err();
    assert!(refused.contains("terminationGracePeriodSeconds"), "{refused}");
}
