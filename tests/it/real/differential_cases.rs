//! The requests the differential test sends, in order, to kube-apiserver and
//! to the simulator. Later cases rely on what earlier ones created.
//!
//! Placeholders, filled per side: `{ns}` (the test's namespace, the same
//! name on both sides), `{rv}`, `{uid}` and `{continue}` (from the last
//! successful answer that had them in its top-level `metadata`), and
//! `{portcullis}` (the token of portcullis's ServiceAccount). Requests
//! carry the admin's token unless they name an `authorization` header.

/// How an answer is read and compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Read {
    /// JSON in the test's namespace: keys, types, values, list lengths.
    Values,
    /// Cluster-wide JSON: keys and types only.
    Shape,
    /// YAML, compared as [`Read::Values`].
    Yaml,
    /// Plain text, compared whole.
    Text,
    /// Protobuf: content type and the `k8s\0` envelope magic.
    Protobuf,
    /// A watch stream: event types in order, and each event's object.
    Watch,
}

/// One request of the sequence.
#[derive(Debug)]
pub struct Case {
    /// Unique; the accepted-differences table in docs/sim.md names it.
    pub name: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub headers: &'static [(&'static str, &'static str)],
    pub body: &'static str,
    pub read: Read,
}

pub(super) const fn get(name: &'static str, path: &'static str) -> Case {
    with(name, "GET", path, &[], "", Read::Values)
}

pub(super) const fn get_as(
    name: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
) -> Case {
    with(name, "GET", path, headers, "", Read::Values)
}

pub(super) const fn shape(
    name: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
) -> Case {
    with(name, "GET", path, headers, "", Read::Shape)
}

pub(super) const fn send(name: &'static str, method: &'static str, path: &'static str, body: &'static str) -> Case {
    with(name, method, path, JSON, body, Read::Values)
}

pub(super) const fn patch(name: &'static str, path: &'static str, content_type: Hdrs, body: &'static str) -> Case {
    with(name, "PATCH", path, content_type, body, Read::Values)
}

pub(super) const fn watch(name: &'static str, path: &'static str) -> Case {
    with(name, "GET", path, &[], "", Read::Watch)
}

pub(super) const fn with(
    name: &'static str,
    method: &'static str,
    path: &'static str,
    headers: Hdrs,
    body: &'static str,
    read: Read,
) -> Case {
    Case {
        name,
        method,
        path,
        headers,
        body,
        read,
    }
}

pub(super) type Hdrs = &'static [(&'static str, &'static str)];

pub(super) const JSON: Hdrs = &[("content-type", "application/json")];
pub(super) const PROTOBUF_BODY: Hdrs = &[("content-type", "application/vnd.kubernetes.protobuf")];
pub(super) const TABLE: Hdrs = &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")];
pub(super) const PARTIAL: Hdrs = &[("accept", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")];
pub(super) const PARTIAL_LIST: Hdrs = &[(
    "accept",
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
)];
pub(super) const PROTOBUF: Hdrs = &[("accept", "application/vnd.kubernetes.protobuf")];
pub(super) const YAML: Hdrs = &[("accept", "application/yaml")];
const AGGREGATED: Hdrs = &[(
    "accept",
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
)];
pub(super) const MERGE: Hdrs = &[("content-type", "application/merge-patch+json")];
pub(super) const STRATEGIC: Hdrs = &[("content-type", "application/strategic-merge-patch+json")];
pub(super) const JSON_PATCH: Hdrs = &[("content-type", "application/json-patch+json")];
pub(super) const APPLY: Hdrs = &[("content-type", "application/apply-patch+yaml")];
pub(super) const NOBODY: Hdrs = &[("impersonate-user", "nobody")];
pub(super) const READER: Hdrs = &[("impersonate-user", "reader")];

const CM: &str = "/api/v1/namespaces/{ns}/configmaps";

/// The first part of the sequence: discovery, RBAC set-up, ConfigMaps
/// with every verb and error, apply, preconditions and watches.
pub const CASES: &[Case] = &[
    // The namespace, and discovery (cluster-wide: shape only).
    get("ns-get", "/api/v1/namespaces/{ns}"),
    get("ns-list-by-field-selector", "/api/v1/namespaces?fieldSelector=metadata.name%3D{ns}"),
    get("ns-list-by-label-selector", "/api/v1/namespaces?labelSelector=kubernetes.io%2Fmetadata.name%3D{ns}"),
    get_as("ns-get-table", "/api/v1/namespaces/{ns}", TABLE),
    get("ns-default-service-account", "/api/v1/namespaces/{ns}/serviceaccounts/default"),
    shape("discovery-version", "/version", &[]),
    shape("discovery-api", "/api", &[]),
    shape("discovery-apis", "/apis", &[]),
    shape("discovery-core-v1", "/api/v1", &[]),
    shape("discovery-apps", "/apis/apps", &[]),
    shape("discovery-apps-v1", "/apis/apps/v1", &[]),
    shape("discovery-aggregated-apis", "/apis", AGGREGATED),
    shape("discovery-aggregated-api", "/api", AGGREGATED),
    shape("discovery-openapi-v3-root", "/openapi/v3", &[]),
    get("discovery-missing-group", "/apis/nope.example.com"),
    get("discovery-missing-version", "/apis/apps/v9"),
    get("discovery-missing-resource", "/api/v1/namespaces/{ns}/nopes"),
    with("discovery-protobuf", "GET", "/api/v1", PROTOBUF, "", Read::Protobuf),
    with("health-healthz", "GET", "/healthz", &[], "", Read::Text),
    with("health-readyz", "GET", "/readyz", &[], "", Read::Text),
    with("health-livez", "GET", "/livez", &[], "", Read::Text),
    with("unknown-path", "GET", "/nope", &[], "", Read::Text),
    // RBAC for the impersonation cases below.
    send(
        "rbac-role-create",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"cm-reader"},
            "rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","watch"]}]}"#,
    ),
    send(
        "rbac-rolebinding-create",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"cm-readers"},
            "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"cm-reader"},
            "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"reader"},
              {"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"readers"},
              {"kind":"ServiceAccount","name":"default","namespace":"{ns}"}]}"#,
    ),
    send(
        "rbac-clusterrole-create",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"{ns}-pod-reader"},
            "rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}]}"#,
    ),
    send(
        "rbac-rolebinding-to-clusterrole",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"pod-readers"},
            "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"{ns}-pod-reader"},
            "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"reader"}]}"#,
    ),
    patch(
        "rbac-rolebinding-roleref-change",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/pod-readers",
        MERGE,
        r#"{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"cm-reader"}}"#,
    ),
    send(
        "rbac-role-without-verbs",
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles?dryRun=All",
        r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"no-verbs"},
            "rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":[]}]}"#,
    ),
    get("rbac-role-get", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/cm-reader"),
    get("rbac-rolebinding-list", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
    get("rbac-clusterrole-get", "/apis/rbac.authorization.k8s.io/v1/clusterroles/{ns}-pod-reader"),
    // ConfigMaps: every verb, and the errors around them.
    send(
        "cm-create-a",
        "POST",
        CM,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-a","labels":{"app":"web","tier":"front"}},"data":{"k":"v"}}"#,
    ),
    send(
        "cm-create-b",
        "POST",
        CM,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-b","labels":{"app":"db"}},"data":{"k":"v"}}"#,
    ),
    send("cm-create-c", "POST", CM, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-c"}}"#),
    send("cm-create-duplicate", "POST", CM, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-a"}}"#),
    send("cm-create-invalid-name", "POST", CM, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#),
    send("cm-create-without-name", "POST", CM, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#),
    send("cm-create-malformed-json", "POST", CM, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":"#),
    send(
        "cm-create-namespace-mismatch",
        "POST",
        CM,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-x","namespace":"elsewhere"}}"#,
    ),
    send("cm-create-wrong-kind", "POST", CM, r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"cm-x"}}"#),
    send(
        "cm-create-unknown-field-strict",
        "POST",
        "/api/v1/namespaces/{ns}/configmaps?fieldValidation=Strict",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-x"},"bogus":1}"#,
    ),
    send(
        "cm-create-unknown-field-warns",
        "POST",
        CM,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-warn"},"bogus":1}"#,
    ),
    send(
        "cm-create-unknown-field-ignored",
        "POST",
        "/api/v1/namespaces/{ns}/configmaps?fieldValidation=Ignore",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-ignore"},"bogus":1}"#,
    ),
    send(
        "cm-create-bad-field-validation",
        "POST",
        "/api/v1/namespaces/{ns}/configmaps?fieldValidation=Loud",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-x"}}"#,
    ),
    send(
        "cm-create-generate-name",
        "POST",
        CM,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"gen-","labels":{"generated":"yes"}},"data":{"k":"v"}}"#,
    ),
    // The generated name differs by design; it must not reach later lists.
    send("cm-delete-generated", "DELETE", "/api/v1/namespaces/{ns}/configmaps?labelSelector=generated", ""),
    send(
        "cm-create-dry-run",
        "POST",
        "/api/v1/namespaces/{ns}/configmaps?dryRun=All",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-dry"},"data":{"k":"v"}}"#,
    ),
    get("cm-dry-run-did-not-persist", "/api/v1/namespaces/{ns}/configmaps/cm-dry"),
    // Past Go's limit on a query's parameters the server reads none: no
    // dryRun, so the object is stored (portcullis refuses such a query).
    send(
        "cm-create-dry-run-past-the-query-limit",
        "POST",
        "/api/v1/namespaces/{ns}/configmaps?dryRun=All{too_many_parameters}",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-many"},"data":{"k":"v"}}"#,
    ),
    get("cm-past-the-query-limit-persisted", "/api/v1/namespaces/{ns}/configmaps/cm-many"),
    send("cm-past-the-query-limit-delete", "DELETE", "/api/v1/namespaces/{ns}/configmaps/cm-many", ""),
    send(
        "cm-create-bad-dry-run",
        "POST",
        "/api/v1/namespaces/{ns}/configmaps?dryRun=Maybe",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-x"}}"#,
    ),
    send(
        "cm-create-immutable",
        "POST",
        CM,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-frozen"},"immutable":true,"data":{"k":"v"}}"#,
    ),
    get("cm-get", "/api/v1/namespaces/{ns}/configmaps/cm-a"),
    get("cm-get-missing", "/api/v1/namespaces/{ns}/configmaps/cm-nope"),
    get("cm-list", CM),
    // Go's EqualFold folds the long s: a list, not a watch.
    get("cm-list-watch-long-s-false", "/api/v1/namespaces/{ns}/configmaps?watch=fal%C5%BFe"),
    get("cm-list-label-equals", "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dweb"),
    get("cm-list-label-set", "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%20in%20(web,db)"),
    get("cm-list-label-not-exists", "/api/v1/namespaces/{ns}/configmaps?labelSelector=!tier"),
    get("cm-list-label-not-equals", "/api/v1/namespaces/{ns}/configmaps?labelSelector=app!%3Dweb"),
    get("cm-list-label-invalid", "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%20in%20web"),
    get("cm-list-field-name", "/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name%3Dcm-b"),
    get("cm-list-field-not-name", "/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name!%3Dcm-b"),
    get("cm-list-field-namespace", "/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.namespace%3D{ns}"),
    get("cm-list-field-unsupported", "/api/v1/namespaces/{ns}/configmaps?fieldSelector=data.k%3Dv"),
    get("cm-list-both-selectors", "/api/v1/namespaces/{ns}/configmaps?labelSelector=app&fieldSelector=metadata.name%3Dcm-a"),
    get("cm-list-limit", "/api/v1/namespaces/{ns}/configmaps?limit=2"),
    get("cm-list-continue", "/api/v1/namespaces/{ns}/configmaps?limit=2&continue={continue}"),
    get("cm-list-bad-continue", "/api/v1/namespaces/{ns}/configmaps?limit=2&continue=bogus"),
    get("cm-list-bad-limit", "/api/v1/namespaces/{ns}/configmaps?limit=abc"),
    get_as("cm-get-table", "/api/v1/namespaces/{ns}/configmaps/cm-a", TABLE),
    get_as("cm-list-table", CM, TABLE),
    get_as("cm-list-table-with-object", "/api/v1/namespaces/{ns}/configmaps?includeObject=Object", TABLE),
    get_as("cm-list-table-without-object", "/api/v1/namespaces/{ns}/configmaps?includeObject=None", TABLE),
    get_as("cm-get-partial", "/api/v1/namespaces/{ns}/configmaps/cm-a", PARTIAL),
    get_as("cm-list-partial", CM, PARTIAL_LIST),
    get_as("cm-list-partial-as-single", CM, PARTIAL),
    get_as("cm-get-not-acceptable", "/api/v1/namespaces/{ns}/configmaps/cm-a", &[("accept", "text/html")]),
    with("cm-get-protobuf", "GET", "/api/v1/namespaces/{ns}/configmaps/cm-a", PROTOBUF, "", Read::Protobuf),
    with("cm-list-protobuf", "GET", CM, PROTOBUF, "", Read::Protobuf),
    with("cm-get-missing-protobuf", "GET", "/api/v1/namespaces/{ns}/configmaps/cm-nope", PROTOBUF, "", Read::Protobuf),
    with("cm-get-yaml", "GET", "/api/v1/namespaces/{ns}/configmaps/cm-a", YAML, "", Read::Yaml),
    send(
        "cm-update",
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-a","labels":{"app":"web","tier":"front"}},"data":{"k":"v2"}}"#,
    ),
    send(
        "cm-update-stale-resource-version",
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-a","resourceVersion":"1"},"data":{"k":"v3"}}"#,
    ),
    // A held write's guard in a protobuf body is a field appended to the
    // object (portcullis's gateway::hold::protobuf): the API server merges
    // it into the metadata, so this stale version, after the body's own
    // name, is a conflict. ConfigMap{metadata{name}, data{k: v4}} and then
    // metadata{resourceVersion: "1"}; every byte ASCII.
    with(
        "cm-update-protobuf-appended-stale-resource-version",
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        PROTOBUF_BODY,
        "k8s\0\n\x0f\n\x02v1\x12\tConfigMap\x12\x16\n\x06\n\x04cm-a\x12\x07\n\x01k\x12\x02v4\n\x032\x011",
        Read::Values,
    ),
    send(
        "cm-update-bad-resource-version",
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-a","resourceVersion":"abc"},"data":{"k":"v3"}}"#,
    ),
    send(
        "cm-update-name-mismatch",
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-b"}}"#,
    ),
    send(
        "cm-update-missing",
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/cm-nope",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-nope"}}"#,
    ),
    send(
        "cm-update-immutable",
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/cm-frozen",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-frozen"},"immutable":true,"data":{"k":"changed"}}"#,
    ),
    patch("cm-patch-merge", "/api/v1/namespaces/{ns}/configmaps/cm-a", MERGE, r#"{"data":{"m":"1"}}"#),
    patch("cm-patch-strategic", "/api/v1/namespaces/{ns}/configmaps/cm-a", STRATEGIC, r#"{"data":{"s":"1"}}"#),
    patch(
        "cm-patch-json",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        JSON_PATCH,
        r#"[{"op":"add","path":"/data/j","value":"1"}]"#,
    ),
    patch(
        "cm-patch-json-test-fails",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        JSON_PATCH,
        r#"[{"op":"test","path":"/data/k","value":"nope"}]"#,
    ),
    patch(
        "cm-patch-json-missing-path",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        JSON_PATCH,
        r#"[{"op":"remove","path":"/data/nope"}]"#,
    ),
    patch("cm-patch-json-not-a-list", "/api/v1/namespaces/{ns}/configmaps/cm-a", JSON_PATCH, r#"{"op":"add"}"#),
    // A parameter with bytes above 0x7f: the type is what comes before `;`.
    patch(
        "cm-patch-json-non-ascii-parameter",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        &[("content-type", "application/json-patch+json;x=\u{ff}")],
        r#"[{"op":"add","path":"/data/nonascii","value":"1"}]"#,
    ),
    patch(
        "cm-patch-json-space-before-parameter",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        &[("content-type", "application/json-patch+json ;x=1")],
        r#"[{"op":"add","path":"/data/spaced","value":"1"}]"#,
    ),
    patch(
        "cm-patch-json-upper-case",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        &[("content-type", "Application/JSON-Patch+JSON")],
        r#"[{"op":"add","path":"/data/upper","value":"1"}]"#,
    ),
    patch(
        "cm-patch-unsupported-type",
        "/api/v1/namespaces/{ns}/configmaps/cm-a",
        &[("content-type", "text/plain")],
        r#"{"data":{"x":"1"}}"#,
    ),
    patch("cm-patch-malformed", "/api/v1/namespaces/{ns}/configmaps/cm-a", MERGE, r#"{"data":"#),
    patch("cm-patch-missing", "/api/v1/namespaces/{ns}/configmaps/cm-nope", MERGE, r#"{"data":{"x":"1"}}"#),
    patch("cm-patch-dry-run", "/api/v1/namespaces/{ns}/configmaps/cm-a?dryRun=All", MERGE, r#"{"data":{"dry":"1"}}"#),
    patch("cm-patch-immutable", "/api/v1/namespaces/{ns}/configmaps/cm-frozen", MERGE, r#"{"data":{"k":"changed"}}"#),
    patch("cm-patch-invalid-label", "/api/v1/namespaces/{ns}/configmaps/cm-a?dryRun=All", MERGE, r#"{"metadata":{"labels":{"bad key":"x"}}}"#),
    // Server-side apply: create, re-apply, conflict, force.
    patch(
        "cm-apply-create",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?fieldManager=alice",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-apply\ndata:\n  a: \"1\"\n",
    ),
    patch(
        "cm-apply-again",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?fieldManager=alice",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-apply\n  labels:\n    owner: alice\ndata:\n  a: \"1\"\n",
    ),
    patch(
        "cm-apply-conflict",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?fieldManager=bob",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-apply\n  labels:\n    owner: bob\ndata:\n  a: \"2\"\n",
    ),
    patch(
        "cm-apply-force",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?fieldManager=bob&force=true",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-apply\n  labels:\n    owner: bob\ndata:\n  a: \"2\"\n",
    ),
    patch(
        "cm-apply-shared-value",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?fieldManager=carol",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-apply\ndata:\n  a: \"2\"\n  c: \"3\"\n",
    ),
    patch(
        "cm-apply-without-field-manager",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-apply\n",
    ),
    patch(
        "cm-apply-force-on-merge-patch",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?force=true",
        MERGE,
        r#"{"data":{"f":"1"}}"#,
    ),
    patch(
        "cm-apply-dry-run",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply-dry?fieldManager=alice&dryRun=All",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-apply-dry\ndata:\n  a: \"1\"\n",
    ),
    patch(
        "cm-apply-malformed-yaml",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?fieldManager=alice",
        APPLY,
        "apiVersion: v1\nkind: [ConfigMap\n",
    ),
    patch(
        "cm-apply-name-mismatch",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?fieldManager=alice",
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-other\n",
    ),
    patch(
        "cm-apply-without-kind",
        "/api/v1/namespaces/{ns}/configmaps/cm-apply?fieldManager=alice",
        APPLY,
        "metadata:\n  name: cm-apply\n",
    ),
    get("cm-apply-result", "/api/v1/namespaces/{ns}/configmaps/cm-apply"),
    // Preconditions.
    get("cm-get-b", "/api/v1/namespaces/{ns}/configmaps/cm-b"),
    send(
        "cm-delete-wrong-uid",
        "DELETE",
        "/api/v1/namespaces/{ns}/configmaps/cm-b",
        r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}"#,
    ),
    send(
        "cm-delete-wrong-resource-version",
        "DELETE",
        "/api/v1/namespaces/{ns}/configmaps/cm-b",
        r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}"#,
    ),
    send(
        "cm-update-current-resource-version",
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/cm-b",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-b","resourceVersion":"{rv}","labels":{"app":"db"}},"data":{"k":"v2"}}"#,
    ),
    send("cm-delete-dry-run", "DELETE", "/api/v1/namespaces/{ns}/configmaps/cm-b?dryRun=All", ""),
    send(
        "cm-delete-with-uid",
        "DELETE",
        "/api/v1/namespaces/{ns}/configmaps/cm-b",
        r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"{uid}"}}"#,
    ),
    send("cm-delete-missing", "DELETE", "/api/v1/namespaces/{ns}/configmaps/cm-b", ""),
    send("cm-delete-malformed-options", "DELETE", "/api/v1/namespaces/{ns}/configmaps/cm-c", "{"),
    send(
        "cm-delete-bad-propagation",
        "DELETE",
        "/api/v1/namespaces/{ns}/configmaps/cm-c?propagationPolicy=Sideways",
        "",
    ),
    send("cm-deletecollection", "DELETE", "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dweb", ""),
    get("cm-list-after-deletes", CM),
    // 405: verbs a path does not serve.
    send("method-post-to-named", "POST", "/api/v1/namespaces/{ns}/configmaps/cm-c", "{}"),
    send("method-put-to-collection", "PUT", CM, "{}"),
    patch("method-patch-collection", CM, MERGE, "{}"),
    send("method-delete-review", "DELETE", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ""),
    // Watches: from a resourceVersion, initial events, bookmarks, 410.
    get("watch-list-for-rv", CM),
    send("watch-create", "POST", CM, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-w","labels":{"app":"w"}}}"#),
    patch("watch-patch", "/api/v1/namespaces/{ns}/configmaps/cm-w", MERGE, r#"{"data":{"x":"1"}}"#),
    send("watch-delete", "DELETE", "/api/v1/namespaces/{ns}/configmaps/cm-w", ""),
    watch("watch-from-rv", "/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
    watch(
        "watch-from-rv-label-selector",
        "/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}&labelSelector=app%3Dw&timeoutSeconds=1",
    ),
    watch("watch-initial", "/api/v1/namespaces/{ns}/configmaps?watch=1&timeoutSeconds=1"),
    watch("watch-initial-rv-0", "/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=0&timeoutSeconds=1"),
    watch(
        "watch-field-selector",
        "/api/v1/namespaces/{ns}/configmaps?watch=1&fieldSelector=metadata.name%3Dcm-c&timeoutSeconds=1",
    ),
    watch("watch-legacy-path", "/api/v1/watch/namespaces/{ns}/configmaps/cm-c?timeoutSeconds=1"),
    watch(
        "watch-send-initial-events",
        "/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    ),
    watch(
        "watch-send-initial-events-without-bookmarks",
        "/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
    ),
    watch("watch-bad-resource-version", "/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=abc&timeoutSeconds=1"),
    watch(
        "watch-bookmarks",
        "/api/v1/namespaces/{ns}/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=3",
    ),
    with(
        "watch-table",
        "GET",
        "/api/v1/namespaces/{ns}/configmaps?watch=1&fieldSelector=metadata.name%3Dcm-c&timeoutSeconds=1",
        TABLE,
        "",
        Read::Watch,
    ),
    watch("watch-too-old-resource-version", "/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=1&timeoutSeconds=1"),
];
