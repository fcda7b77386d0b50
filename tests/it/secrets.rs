//! Secret redaction through portcullis, with real kubectl and kube-rs:
//! values never leave the cluster unless a role reveals them. Every shape of
//! answer here; who sees what, tokens and refusals in [`access`].

mod access;
mod watch;

use crate::harness::{Kubectl, Portcullis};
use http::Method;
use portcullis::identity::roles::Role;
use serde_json::{json, Value};
use std::io::BufRead;
use std::time::Duration;

/// A custom role that reads and writes Secrets (and mints ServiceAccount
/// tokens) without revealing Secret values.
const OPERATOR: &str = "secrets-operator";
/// db-credentials' password, in clear and in base64.
const PASSWORD: &str = "s3cr3t-Pa55w0rd";
const PASSWORD_B64: &str = "czNjcjN0LVBhNTV3MHJk";
const LAST_APPLIED: &str = "last-applied-configuration";

async fn start() -> Portcullis {
    // The reconciler writes the custom role's ClusterRole at start.
    Portcullis::start_with(|config| {
        config.roles.push(Role {
            name: OPERATOR.into(),
            rules: vec![
                json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}),
                json!({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}),
            ],
            reveals_secrets: false,
            namespaced: false,
            max_duration: None,
        })
    })
    .await
}

fn operator(env: &Portcullis, namespace: Option<&str>) -> (String, Kubectl) {
    let token = env.person("bo", &[(OPERATOR, namespace)]);
    let kubectl = env.kubectl(&token, "shop");
    (token, kubectl)
}

/// No value of db-credentials, in clear or base64, and no last-applied
/// annotation (which holds them in clear).
fn assert_hidden(text: &str) {
    assert!(
        !text.contains(PASSWORD) && !text.contains(PASSWORD_B64),
        "a value leaked: {text}"
    );
    assert!(
        !text.contains(LAST_APPLIED),
        "the last-applied annotation leaked: {text}"
    );
}

/// A Secret as the simulated cluster stores it.
fn stored_secret(env: &Portcullis, name: &str) -> Option<std::sync::Arc<Value>> {
    let secrets = portcullis_sim::registry::find("", "v1", "secrets").expect("secrets are served");
    env.sim().store().get(secrets, "shop", name)
}

fn put_secret(env: &Portcullis, name: &str, data: Value) {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": "shop"}, "data": data});
    env.sim().store().put(secret).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_secret_as_yaml_and_json_hides_values_and_the_last_applied_annotation() {
    let env = start().await;
    let (_, kubectl) = operator(&env, Some("shop"));
    let yaml = kubectl.ok(&["get", "secret", "db-credentials", "-o", "yaml"]);
    assert_hidden(&yaml);
    assert!(
        yaml.contains("password: <redacted, 15 bytes>") && yaml.contains("username: <redacted, 4 bytes>"),
        "{yaml}"
    );
    let secret: Value = serde_json::from_str(&kubectl.ok(&["get", "secret", "db-credentials", "-o", "json"])).unwrap();
    assert_eq!(secret["data"]["url"], "<redacted, 37 bytes>");
    assert_eq!(secret["metadata"]["name"], "db-credentials");
    assert_hidden(&secret.to_string());
    // kubectl describe decodes `data` as bytes: it shows sizes, no values.
    let described = kubectl.ok(&["describe", "secret", "db-credentials"]);
    assert!(
        described.contains("password:") && described.contains("bytes"),
        "{described}"
    );
    assert_hidden(&described);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_secrets_prints_its_table_and_table_objects_carry_no_values() {
    let env = start().await;
    let (token, kubectl) = operator(&env, Some("shop"));
    let table = kubectl.ok(&["get", "secrets"]);
    assert!(
        table.starts_with("NAME") && table.contains("TYPE") && table.contains("DATA"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("db-credentials") && l.contains("Opaque") && l.contains(" 3 ")),
        "{table}"
    );
    let auth = format!("Bearer {token}");
    for include in ["Metadata", "Object"] {
        let path = format!("/clusters/sim/api/v1/namespaces/shop/secrets?includeObject={include}");
        let accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
        let response = env
            .raw()
            .send(
                Method::GET,
                &path,
                &[("authorization", &auth), ("accept", accept)],
                vec![],
            )
            .await;
        let table = response.json();
        assert_eq!(table["kind"], "Table", "{table}");
        assert_hidden(&table.to_string());
        let db = table["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["cells"][0] == "db-credentials")
            .unwrap();
        assert_eq!(db["object"]["metadata"]["name"], "db-credentials");
        if include == "Object" {
            assert_eq!(db["object"]["data"]["password"], "<redacted, 15 bytes>");
        }
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_secrets_in_all_namespaces_as_json_hides_every_value() {
    let env = start().await;
    let (_, kubectl) = operator(&env, None);
    let list: Value = serde_json::from_str(&kubectl.ok(&["get", "secrets", "-A", "-o", "json"])).unwrap();
    let items = list["items"].as_array().unwrap();
    let stripe = items
        .iter()
        .find(|s| s["metadata"]["name"] == "stripe-key")
        .expect("payments' Secret listed");
    assert_eq!(stripe["data"]["api-key"], "<redacted, 38 bytes>");
    for item in items {
        for value in item["data"].as_object().into_iter().flat_map(|d| d.values()) {
            assert!(value.as_str().unwrap().starts_with("<redacted, "), "{item}");
        }
    }
    assert_hidden(&list.to_string());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watching_secrets_gets_every_event_redacted_as_it_happens() {
    let env = start().await;
    let (_, kubectl) = operator(&env, Some("shop"));
    let mut child = std::process::Command::new(crate::support::kubectl_path())
        .args([
            "--kubeconfig",
            kubectl.kubeconfig().to_str().unwrap(),
            "get",
            "secrets",
            "-w",
            "-o",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| tx.send(line)));
    let mut seen = String::new();
    let mut read_until = |needle: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !seen.contains(needle) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            seen.push_str(
                &rx.recv_timeout(left)
                    .unwrap_or_else(|_| panic!("no {needle:?} in: {seen}")),
            );
            seen.push('\n');
        }
    };
    read_until("\"web-tls\"");
    // A Secret created while watching arrives as an event, redacted.
    put_secret(&env, "rotated", json!({"token": "bmV3LXNlY3JldA=="}));
    read_until("\"rotated\"");
    // kubectl writes `<` and `>` as \u003c and \u003e.
    read_until("redacted, 10 bytes");
    child.kill().unwrap();
    let _ = child.wait();
    assert_hidden(&seen);
    assert!(!seen.contains("bmV3LXNlY3JldA=="), "{seen}");
    let watches = env.sim().requests().into_iter().filter(|r| r.verb == "watch").count();
    assert!(watches >= 1, "kubectl watched through portcullis");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_secret_requests_get_uncompressed_json_and_protobuf_only_clients_get_406() {
    let env = start().await;
    let (token, kubectl) = operator(&env, Some("shop"));
    let raw = kubectl.ok(&["get", "--raw", "/api/v1/namespaces/shop/secrets/db-credentials"]);
    assert_hidden(&raw);
    assert!(raw.contains("<redacted, 15 bytes>"), "{raw}");

    let auth = format!("Bearer {token}");
    let path = "/clusters/sim/api/v1/namespaces/shop/secrets";
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "application/vnd.kubernetes.protobuf, application/json"),
        ("accept-encoding", "gzip"),
    ];
    let response = env.raw().send(Method::GET, path, &headers, vec![]).await;
    assert_eq!(response.status, 200);
    assert!(response.headers.get("content-encoding").is_none());
    assert!(response
        .headers
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    assert_hidden(&response.json().to_string());
    let sent = env
        .sim()
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path == "/api/v1/namespaces/shop/secrets")
        .unwrap();
    let header = |name: &str| sent.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(header("accept").as_deref(), Some("application/json"));
    assert_eq!(header("accept-encoding"), None);

    let metadata = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let response = env
        .raw()
        .send(
            Method::GET,
            path,
            &[("authorization", &auth), ("accept", metadata)],
            vec![],
        )
        .await;
    assert_eq!(response.json()["kind"], "PartialObjectMetadataList");
    assert_hidden(&response.json().to_string());

    let before = env.sim().requests().len();
    let protobuf = [
        ("authorization", auth.as_str()),
        ("accept", "application/vnd.kubernetes.protobuf"),
    ];
    let response = env.raw().send(Method::GET, path, &protobuf, vec![]).await;
    assert_eq!(
        (response.status.as_u16(), response.json()["reason"].as_str()),
        (406, Some("NotAcceptable"))
    );
    let reached: Vec<_> = env
        .sim()
        .requests()
        .into_iter()
        .skip(before)
        .filter(|r| r.path.contains("secrets"))
        .collect();
    assert!(reached.is_empty(), "a request portcullis cannot redact is not sent");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_and_a_server_dry_run_answer_redacted_while_the_cluster_keeps_the_values() {
    let env = start().await;
    let (_, kubectl) = operator(&env, Some("shop"));
    let manifest = env.dir.path().join("secret.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: applied\ndata:\n  key: YXBwbGllZC12YWx1ZQ==\n",
    )
    .unwrap();
    let applied = kubectl.ok(&["apply", "--server-side", "-f", manifest.to_str().unwrap(), "-o", "yaml"]);
    assert!(
        applied.contains("key: <redacted, 13 bytes>") && !applied.contains("YXBwbGllZC12YWx1ZQ"),
        "{applied}"
    );
    let stored = stored_secret(&env, "applied").expect("applied for real");
    assert_eq!(
        stored["data"]["key"], "YXBwbGllZC12YWx1ZQ==",
        "the cluster keeps the value"
    );

    let dry = kubectl.ok(&[
        "create",
        "secret",
        "generic",
        "dry",
        "--from-literal=token=dry-value",
        "--dry-run=server",
        "-o",
        "yaml",
    ]);
    // kubectl create secret is a typed client: its marker comes base64-encoded.
    assert!(
        dry.contains("token: PHJlZGFjdGVkLCA5IGJ5dGVzPg==") && !dry.contains("ZHJ5LXZhbHVl"),
        "{dry}"
    );
    assert!(stored_secret(&env, "dry").is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_patch_that_would_copy_a_value_is_refused_to_a_caller_who_sees_values_hidden() {
    let env = start().await;
    let (token, kubectl) = operator(&env, Some("shop"));
    let copy = r#"[{"op":"add","path":"/metadata/annotations","value":{}},{"op":"copy","from":"/data/password","path":"/metadata/annotations/leak"}]"#;
    for dry in [&["--dry-run=server"][..], &[]] {
        let mut args = vec![
            "patch",
            "secret",
            "db-credentials",
            "--type=json",
            "-p",
            copy,
            "-o",
            "yaml",
        ];
        args.extend_from_slice(dry);
        let refused = kubectl.fails(&args);
        assert!(
            refused.contains("a JSON Patch's copy, move and test operations"),
            "{refused}"
        );
        assert_hidden(&refused);
    }
    // The cluster reads the type up to the `;` whatever bytes follow it,
    // and takes a JSON Patch; so do the simulator and portcullis.
    let auth = format!("Bearer {token}");
    let path = format!(
        "/clusters/{}/api/v1/namespaces/shop/secrets/db-credentials",
        env.cluster
    );
    for content_type in [
        "application/json-patch+json;x=\u{ff}",
        "application/json-patch+json;\u{e9}",
    ] {
        let headers = [("authorization", auth.as_str()), ("content-type", content_type)];
        let sent = env
            .raw()
            .send(http::Method::PATCH, &path, &headers, copy.as_bytes().to_vec())
            .await;
        assert_eq!(
            sent.status,
            403,
            "{content_type}: {}",
            String::from_utf8_lossy(&sent.body)
        );
        assert_hidden(&String::from_utf8_lossy(&sent.body));
    }
    assert!(
        stored_secret(&env, "db-credentials").unwrap()["metadata"]["annotations"]["leak"].is_null(),
        "nothing was copied"
    );
    let rows = crate::approvals::audit_rows(&env).await;
    let refusals = rows.iter().filter(|r| r.refused == "secret_json_patch").count();
    assert_eq!(refusals, 4, "each an audit row");
    // A merge patch reads nothing, and goes through.
    let labelled = kubectl.ok(&[
        "patch",
        "secret",
        "db-credentials",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"tier":"db"}}}"#,
        "-o",
        "yaml",
    ]);
    assert!(labelled.contains("tier: db"), "{labelled}");
    assert_hidden(&labelled);
    // Someone who sees the values may JSON-patch them.
    let admin = env.kubectl(&env.person("ana", &[("admin", Some("shop"))]), "shop");
    admin.ok(&["patch", "secret", "db-credentials", "--type=json", "-p", copy]);
    assert_eq!(
        stored_secret(&env, "db-credentials").unwrap()["metadata"]["annotations"]["leak"],
        PASSWORD_B64
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_read_redacted_and_written_back_whole_is_refused_and_keeps_its_values() {
    let env = start().await;
    let (token, _) = operator(&env, Some("shop"));
    let path = format!(
        "/clusters/{}/api/v1/namespaces/shop/secrets/db-credentials",
        env.cluster
    );
    let auth = format!("Bearer {token}");
    // As a protobuf-accepting typed client reads it: markers in base64.
    let read = env
        .raw()
        .send(
            Method::GET,
            &path,
            &[
                ("authorization", &auth),
                ("accept", "application/vnd.kubernetes.protobuf,application/json"),
            ],
            Vec::new(),
        )
        .await;
    assert_eq!(read.status, 200);
    let mut secret = read.json();
    assert_hidden(&secret.to_string());
    secret["metadata"]["labels"] = json!({"tier": "db"});
    let written = env
        .raw()
        .send(
            Method::PUT,
            &path,
            &[("authorization", &auth), ("content-type", "application/json")],
            secret.to_string().into_bytes(),
        )
        .await;
    assert_eq!(written.status, 400, "{:?}", String::from_utf8_lossy(&written.body));
    assert!(written.json()["message"].as_str().unwrap().contains("marker back"));
    let stored = stored_secret(&env, "db-credentials").unwrap();
    assert_eq!(stored["data"]["password"], PASSWORD_B64, "the value is kept");
    assert!(stored["metadata"]["labels"]["tier"].is_null(), "nothing was written");
    let rows = crate::approvals::audit_rows(&env).await;
    assert_eq!(rows.iter().filter(|r| r.refused == "secret_marker").count(), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_that_look_like_json_or_like_a_marker_are_redacted_like_any_other() {
    let env = start().await;
    let (_, kubectl) = operator(&env, Some("shop"));
    use base64::Engine;
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let json_like = r#"{"kind":"Status","apiVersion":"v1","data":{"x":"y"}}"#;
    put_secret(
        &env,
        "sneaky",
        json!({"json": b64(json_like), "marker": b64("<redacted, 3 bytes>")}),
    );
    let secret: Value = serde_json::from_str(&kubectl.ok(&["get", "secret", "sneaky", "-o", "json"])).unwrap();
    assert_eq!(secret["data"]["json"], format!("<redacted, {} bytes>", json_like.len()));
    assert_eq!(secret["data"]["marker"], "<redacted, 19 bytes>");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_listed_across_namespaces_leave_the_protected_ones_out() {
    let env = start().await;
    // portcullis's own kind of Secret, in a protected namespace.
    let admin = crate::support::Kubectl::admin(env.sim());
    admin.ok(&[
        "-n",
        "kube-system",
        "create",
        "secret",
        "generic",
        "cluster-token",
        "--from-literal=token=t0p",
    ]);
    let reader = env.kubectl(&env.person("rita", &[("secrets-reader", None)]), "shop");
    let listed = reader.ok(&["get", "secrets", "-A", "-o", "name"]);
    assert!(listed.contains("secret/db-credentials"), "{listed}");
    assert!(!listed.contains("cluster-token"), "{listed}");
    // Asking for the protected namespace by field finds nothing either.
    let asked = reader.ok(&[
        "get",
        "secrets",
        "-A",
        "--field-selector",
        "metadata.namespace=kube-system",
        "-o",
        "name",
    ]);
    assert_eq!(asked, "");
    // A query of 10,000 parameters, the most the API server reads, still
    // goes with the field selector (the empty ones are dropped, as Go
    // drops them), not without it.
    let full = format!("/clusters/{}/api/v1/secrets?x{}", env.cluster, "&".repeat(9_999));
    let token = env.person("rex", &[("secrets-reader", None)]);
    let listed = env.raw().get(&full, &token).await;
    assert_eq!(listed.status, 200);
    let listed = String::from_utf8_lossy(&listed.body);
    assert!(
        listed.contains("db-credentials") && !listed.contains("cluster-token"),
        "{listed}"
    );
    // Named in the path, the namespace was already refused its grants.
    assert!(reader
        .fails(&["-n", "kube-system", "get", "secret", "cluster-token"])
        .contains("Forbidden"));
    env.stop().await;
}

/// A custom role that may read Secrets but does not reveal them hides the
/// values from the person holding it, and so `read_secret` by that
/// person's agent is refused rather than reveal what the person would not
/// see (it revealed them before); under a revealing role it still reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_secret_reveals_nothing_under_a_role_that_does_not_reveal_secrets() {
    let env = start().await;
    let (_, grants) = env.person_with_ttl("bo", &[(OPERATOR, Some("shop"))], Duration::from_secs(3600));
    let token = env.agent("bo", &[&grants[0]]);
    let client = crate::mcp::connect(&env, &token, crate::mcp::stateless()).await;
    let ask = json!({"cluster": env.cluster, "namespace": "shop", "name": "db-credentials", "key": "password"});
    let (text, structured) = crate::mcp::fails(&client, "read_secret", ask.clone()).await;
    assert_hidden(&text);
    assert!(text.contains("reveals Secret values"), "{text}");
    assert_eq!(structured["code"], "request.refused", "{structured}");
    let rows = crate::approvals::audit_rows(&env).await;
    let row = rows
        .iter()
        .rev()
        .find(|r| r.tool == "read_secret" && r.resource == "secrets")
        .expect("its row");
    assert_eq!(row.refused, "reveal_not_granted", "{row:?}");
    assert!(!row.secret_revealed, "{row:?}");

    let (_, grants) = env.person_with_ttl("cy", &[("secrets-reader", Some("shop"))], Duration::from_secs(3600));
    let reader = crate::mcp::connect(&env, &env.agent("cy", &[&grants[0]]), crate::mcp::stateless()).await;
    assert_eq!(crate::mcp::ok(&reader, "read_secret", ask).await, PASSWORD);
    env.stop().await;
}
