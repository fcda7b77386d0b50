//! Secrets through portcullis in front of the real kube-apiserver: an agent
//! never sees a value in any shape the API server answers in (objects,
//! lists, Tables, PartialObjectMetadata, watch events, write and dry-run
//! answers), checked on the bytes each client received; a person holding
//! `secrets-reader` sees them. Each value is made for the test, so finding
//! it anywhere is a leak and nothing else.

mod watch;

use crate::harness::Portcullis;
use base64::Engine;
use http::Method;
use std::time::Duration;

const LAST_APPLIED: &str = "last-applied-configuration";

/// A value no other test uses whose base64 form is plain letters and digits,
/// so it reads the same in any JSON or YAML encoding of it.
pub fn distinctive() -> String {
    loop {
        let value = format!("real-secret-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
        if b64(&value).chars().all(|c| c.is_ascii_alphanumeric()) {
            return value;
        }
    }
}

/// `text` in base64, as a Secret's `data` holds it.
pub fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The admin puts Secret `name` with `password: <value>` into `ns` with
/// client-side `kubectl apply`: its last-applied annotation then holds the
/// value too, as in many real clusters, and so does an annotation of
/// another deploy tool's (kapp's copy of the object it applied).
pub fn plant(ns: &str, name: &str, value: &str) {
    let value = b64(value);
    let manifest = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    \
         kapp.k14s.io/original: '{{\"data\":{{\"password\":\"{value}\"}}}}'\ntype: Opaque\ndata:\n  password: {value}\n"
    );
    super::shared().admin_apply(&manifest).unwrap();
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// No byte of `answer` gives a value away: not in clear, not in base64, not
/// through the last-applied annotation.
pub fn assert_hidden(what: &str, answer: &[u8], values: &[&str]) {
    let text = String::from_utf8_lossy(answer);
    for value in values {
        assert!(
            !contains(answer, value) && !contains(answer, &b64(value)),
            "{what}: a value leaked: {text}"
        );
    }
    assert!(
        !has_last_applied(&text),
        "{what}: the last-applied annotation leaked: {text}"
    );
}

/// The last-applied annotation with its value (which holds the Secret's
/// data). Its name alone in `managedFields` (`…last-applied-configuration":{}`
/// in JSON, `: {}` in YAML) is a field path, no value.
fn has_last_applied(text: &str) -> bool {
    text.match_indices(LAST_APPLIED).any(|(at, _)| {
        let rest = text[at + LAST_APPLIED.len()..].trim_start_matches(['"', ':', ' ']);
        !rest.starts_with("{}")
    })
}

/// portcullis in front of the real cluster, a namespace of the test's own
/// with the Secret `db` planted, and an agent of ana given her `admin`
/// grant there: a role that reveals Secrets to ana, so what hides them
/// from the agent is that it is an agent. Returns the agent's token.
async fn agent_beside_a_secret(prefix: &str) -> (Portcullis, String, String, String) {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace(prefix).unwrap();
    let value = distinctive();
    plant(&ns, "db", &value);
    let (_, grants) = env.person_with_ttl("ana", &[("admin", Some(&ns))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    (env, ns, value, agent)
}

/// stdout and stderr of a kubectl run that succeeded.
fn kubectl_bytes(kubectl: &crate::harness::Kubectl, args: &[&str]) -> Vec<u8> {
    let out = kubectl.run(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    [out.stdout, out.stderr].concat()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_sees_no_value_of_a_real_secret_in_kubectl_get_as_json_yaml_or_its_table() {
    let (env, ns, value, agent) = agent_beside_a_secret("secrets-kubectl").await;
    let kubectl = env.kubectl(&agent, &ns);
    for args in [
        &["get", "secret", "db", "-o", "json"][..],
        &["get", "secret", "db", "-o", "yaml"],
        &["get", "secrets", "-o", "json"],
        &["get", "secrets", "-o", "yaml"],
        &["describe", "secret", "db"],
    ] {
        let answer = kubectl_bytes(&kubectl, args);
        assert_hidden(&format!("kubectl {args:?}"), &answer, &[&value]);
        // kubectl writes `<` as \u003c in JSON; describe shows sizes only.
        let shown = String::from_utf8_lossy(&answer);
        let marker = if args[0] == "describe" {
            "password:"
        } else {
            "redacted, 24 bytes"
        };
        assert!(shown.contains(marker), "{args:?}: {shown}");
    }
    let table = kubectl_bytes(&kubectl, &["get", "secrets"]);
    assert_hidden("kubectl get secrets", &table, &[&value]);
    let table = String::from_utf8_lossy(&table);
    assert!(
        table.starts_with("NAME") && table.contains("TYPE") && table.contains("DATA"),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.starts_with("db ") && l.contains("Opaque")),
        "{table}"
    );
    env.stop().await;
}

/// (path, Accept, the kind answered): the Secret `db` in `ns` and the
/// namespace's Secrets, in each shape the API server answers in.
fn raw_shapes(ns: &str) -> Vec<(String, &'static str, &'static str)> {
    let one = format!("/clusters/real/api/v1/namespaces/{ns}/secrets/db");
    let all = format!("/clusters/real/api/v1/namespaces/{ns}/secrets");
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    vec![
        (one.clone(), "application/json", "Secret"),
        (all.clone(), "application/json", "SecretList"),
        // A client preferring protobuf gets JSON (portcullis can read it).
        (
            one.clone(),
            "application/vnd.kubernetes.protobuf, application/json",
            "Secret",
        ),
        (one.clone(), table, "Table"),
        (format!("{one}?includeObject=Object"), table, "Table"),
        (format!("{all}?includeObject=Metadata"), table, "Table"),
        (format!("{all}?includeObject=Object"), table, "Table"),
        (
            one,
            "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            "PartialObjectMetadata",
        ),
        (
            all,
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            "PartialObjectMetadataList",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_sees_no_value_in_raw_objects_lists_tables_or_partial_object_metadata() {
    let (env, ns, value, agent) = agent_beside_a_secret("secrets-raw").await;
    let auth = format!("Bearer {agent}");
    for (path, accept, kind) in raw_shapes(&ns) {
        let headers = [("authorization", auth.as_str()), ("accept", accept)];
        let response = env.raw().send(Method::GET, &path, &headers, Vec::new()).await;
        let what = format!("GET {path} as {accept}");
        assert_eq!(
            response.status,
            200,
            "{what}: {}",
            String::from_utf8_lossy(&response.body)
        );
        assert_hidden(&what, &response.body, &[&value]);
        let answer = response.json();
        assert_eq!(answer["kind"], kind, "{what}: {answer}");
        let text = answer.to_string();
        assert!(text.contains("\"db\""), "{what}: the Secret is there: {text}");
        if kind.starts_with("Secret") || path.ends_with("includeObject=Object") {
            // A client that asks for protobuf decodes `data` as bytes: its
            // marker comes base64-encoded.
            let marker = "<redacted, 24 bytes>";
            assert!(text.contains(marker) || text.contains(&b64(marker)), "{what}: {text}");
        }
    }
    env.stop().await;
}

/// A manifest file in the test's folder.
fn manifest(env: &Portcullis, name: &str, yaml: String) -> String {
    let path = env.dir.path().join(name);
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_answers_an_agent_redacted_while_the_real_cluster_keeps_the_value() {
    let (env, ns, value, agent) = agent_beside_a_secret("secrets-apply").await;
    let kubectl = env.kubectl(&agent, &ns);
    // The agent adds a key to the planted Secret: the answer is the whole
    // object, the planted value included.
    let added = distinctive();
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  added: {}\n",
        b64(&added)
    );
    let apply = manifest(&env, "db.yaml", yaml);
    let answer = kubectl_bytes(&kubectl, &["apply", "--server-side", "-f", &apply, "-o", "yaml"]);
    assert_hidden("server-side apply", &answer, &[&value, &added]);
    assert!(String::from_utf8_lossy(&answer).contains("added: <redacted, 24 bytes>"));
    let stored = super::shared()
        .admin(&["get", "secret", "db", "-n", &ns, "-o", "jsonpath={.data.added}"])
        .unwrap();
    assert_eq!(stored, b64(&added), "the cluster keeps the value the agent applied");

    let created = distinctive();
    let literal = format!("--from-literal=token={created}");
    let answer = kubectl_bytes(
        &kubectl,
        &["create", "secret", "generic", "made", &literal, "-o", "json"],
    );
    assert_hidden("create", &answer, &[&created]);
    let stored = super::shared()
        .admin(&["get", "secret", "made", "-n", &ns, "-o", "jsonpath={.data.token}"])
        .unwrap();
    assert_eq!(stored, b64(&created));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dry_runs_answer_an_agent_redacted_and_create_nothing() {
    let (env, ns, _, agent) = agent_beside_a_secret("secrets-dry-run").await;
    let kubectl = env.kubectl(&agent, &ns);
    let dry = distinctive();
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: dry\ndata:\n  key: {}\n",
        b64(&dry)
    );
    let apply = manifest(&env, "dry.yaml", yaml);
    let args = ["apply", "--server-side", "--dry-run=server", "-f", &apply, "-o", "json"];
    let answer = kubectl_bytes(&kubectl, &args);
    assert_hidden("server-side apply --dry-run=server", &answer, &[&dry]);
    assert!(String::from_utf8_lossy(&answer).contains("redacted, 24 bytes"));
    let literal = format!("--from-literal=token={dry}");
    let create = [
        "create",
        "secret",
        "generic",
        "dry",
        &literal,
        "--dry-run=server",
        "-o",
        "yaml",
    ];
    let answer = kubectl_bytes(&kubectl, &create);
    assert_hidden("create --dry-run=server", &answer, &[&dry]);
    // A typed client: the marker comes base64-encoded.
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains(&b64("<redacted, 24 bytes>")), "{text}");
    let found = super::shared().admin(&["get", "secret", "dry", "-n", &ns]);
    assert!(found.is_err(), "a dry run creates nothing");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secrets_reader_sees_the_values_the_real_api_server_holds_and_her_agent_does_not() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("secrets-reader").unwrap();
    let value = distinctive();
    plant(&ns, "db", &value);
    let (reader, grants) = env.person_with_ttl("ana", &[("secrets-reader", Some(&ns))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);

    let kubectl = env.kubectl(&reader, &ns);
    assert_eq!(
        kubectl.ok(&["get", "secret", "db", "-o", "jsonpath={.data.password}"]),
        b64(&value)
    );
    let listed = kubectl.ok(&["get", "secrets", "-o", "json"]);
    assert!(
        listed.contains(&b64(&value)) && has_last_applied(&listed),
        "nothing is taken out: {listed}"
    );

    let path = format!("/clusters/real/api/v1/namespaces/{ns}/secrets/db");
    let revealed = env.raw().get(&path, &reader).await;
    assert_eq!(revealed.json()["data"]["password"], b64(&value));
    let row = crate::audit::row(&env, &crate::audit::audit_id(&revealed)).await;
    assert!(!row.redacted, "the audit row says nothing was hidden");

    let hidden = env.raw().get(&path, &agent).await;
    assert_eq!(hidden.status, 200);
    assert_hidden("the reader's agent", &hidden.body, &[&value]);
    assert_eq!(hidden.json()["data"]["password"], "<redacted, 24 bytes>");
    assert!(crate::audit::row(&env, &crate::audit::audit_id(&hidden)).await.redacted);
    env.stop().await;
}

/// A ValidatingAdmissionPolicy on the Secrets of `ns` named `name`, whose
/// message quotes the Secret's password: `action` Deny refuses an update
/// that leaves `condition` false, Warn warns of it.
fn quoting_policy(ns: &str, name: &str, action: &str, condition: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [\"\"]
      apiVersions: [\"v1\"]
      operations: [\"UPDATE\"]
      resources: [\"secrets\"]
  validations:
  - expression: \"{condition}\"
    messageExpression: \"'the password is ' + string(oldObject.data.password)\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
  validationActions: [{action}]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {ns}
"
    )
}

/// An admission check's words are its own: a real ValidatingAdmissionPolicy
/// whose refusal and warning quote the Secret's password (as the real API
/// server sends them to ana, who may see values) reaches her agent with
/// the policy named and its words hidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_policys_refusal_and_warning_quoting_a_value_reach_an_agent_hidden() {
    let env = Portcullis::start_real().await;
    let ns = super::shared().namespace("secrets-admission").unwrap();
    let value = distinctive();
    plant(&ns, "db", &value);
    let (ana, grants) = env.person_with_ttl("ana", &[("admin", Some(&ns))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    let (deny, warn) = (format!("deny-{ns}"), format!("warn-{ns}"));
    let approved = "has(object.metadata.labels) && 'approved' in object.metadata.labels";
    let policies = format!(
        "{}---\n{}",
        quoting_policy(&ns, &deny, "Deny", approved),
        quoting_policy(&ns, &warn, "Warn", "false")
    );
    super::shared().admin_apply(&policies).unwrap();
    let path = format!("/clusters/real/api/v1/namespaces/{ns}/secrets/db");
    let patch = |token: &str, label: &str| {
        let (env, path) = (&env, &path);
        let auth = format!("Bearer {token}");
        let body = format!(r#"{{"metadata":{{"labels":{{"{label}":"yes"}}}}}}"#);
        async move {
            let headers = [
                ("authorization", auth.as_str()),
                ("content-type", "application/merge-patch+json"),
            ];
            env.raw().send(Method::PATCH, path, &headers, body.into_bytes()).await
        }
    };
    let warnings = |response: &crate::harness::RawResponse| -> String {
        let all: Vec<String> = response
            .headers
            .get_all("warning")
            .iter()
            .map(|w| String::from_utf8_lossy(w.as_bytes()).into_owned())
            .collect();
        all.join("\n")
    };
    // The policies take effect once the API server has loaded them.
    let refused_to_ana = crate::support::eventually("the policy to refuse ana's patch", async || {
        let answer = patch(&ana, "touched").await;
        (answer.status == 422).then_some(answer)
    })
    .await;
    let quotes = |text: &str| text.contains(&value) || text.contains(&b64(&value));
    let said = String::from_utf8_lossy(&refused_to_ana.body);
    assert!(quotes(&said), "the real API server quotes the value to ana: {said}");

    let refused = patch(&agent, "touched").await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    assert_hidden("the refusal", &refused.body, &[&value]);
    assert_hidden("the refusal's warnings", warnings(&refused).as_bytes(), &[&value]);
    let message = refused.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(&format!("ValidatingAdmissionPolicy '{deny}'")) && message.contains("<hidden"),
        "{message}"
    );

    // An agent whose writes wait for approval: its write's dry run is
    // read as one who sees values, and its refusal comes back to it.
    let careful = env
        .store
        .add_agent(
            &portcullis::identity::Principal::person("ana"),
            "careful",
            std::slice::from_ref(&grants[0].id),
            true,
        )
        .unwrap();
    let (_, careful) = env.store.issue_agent_credential(&careful, None).unwrap();
    let dry_refused = patch(&careful, "touched").await;
    assert_eq!(dry_refused.status, 422, "{:?}", dry_refused.body);
    assert_hidden("the held write's dry-run refusal", &dry_refused.body, &[&value]);
    assert_hidden("its warnings", warnings(&dry_refused).as_bytes(), &[&value]);

    let warned_to_ana = patch(&ana, "approved").await;
    assert_eq!(warned_to_ana.status, 200, "{:?}", warned_to_ana.body);
    assert!(quotes(&warnings(&warned_to_ana)), "{}", warnings(&warned_to_ana));
    let warned = patch(&agent, "approved").await;
    assert_eq!(warned.status, 200, "{:?}", warned.body);
    assert_hidden("the warnings", warnings(&warned).as_bytes(), &[&value]);
    assert_hidden("the patched Secret", &warned.body, &[&value]);
    assert!(warnings(&warned).contains("hidden"), "{}", warnings(&warned));

    super::shared()
        .admin(&[
            "delete",
            "validatingadmissionpolicybinding,validatingadmissionpolicy",
            &deny,
            &warn,
        ])
        .unwrap();
    env.stop().await;
}
