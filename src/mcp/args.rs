//! The tools' arguments. Their names are a public contract (MCP.md); the
//! doc comments become the JSON Schema descriptions a model reads, so they
//! say what to pass, not how it is implemented.

use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `list_api_resources`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClusterArgs {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
}

/// Arguments of `list_resources`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListResources {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// What to list: a kind, its plural or a short name (`Pod`, `deployments`, `svc`).
    pub kind: String,
    /// The API version (`apps/v1`), only to choose between two kinds of the same name.
    pub api_version: Option<String>,
    /// The namespace; leave out to list across all namespaces (or for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// Only objects with these labels, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// Only objects whose fields match, e.g. `status.phase=Running`.
    pub field_selector: Option<String>,
    /// At most this many objects (1 to 500, default 500); the answer ends with a continue token when there are more.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// The continue token of the previous page, with the same other arguments.
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
}

/// Arguments of `get_resource` and `delete_resource`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ObjectArgs {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// The kind, its plural or a short name (`Deployment`, `configmaps`, `cm`).
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object's namespace (leave out for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// The API version (`apps/v1`), only to choose between two kinds of the same name.
    pub api_version: Option<String>,
}

/// Arguments of `delete_resource`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteResource {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectArgs,
    /// The approval id of this same delete, when a person was asked to approve it.
    pub approval_id: Option<String>,
}

/// Arguments of `get_events`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetEvents {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// The namespace; leave out for all namespaces.
    pub namespace: Option<String>,
    /// Only events about objects of this kind (`Pod`, `deployments`).
    pub kind: Option<String>,
    /// Only events about the object of this name.
    pub name: Option<String>,
}

/// Arguments of `get_logs`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetLogs {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container; needed when the pod has several.
    pub container: Option<String>,
    /// Only the last this many lines (1 to 2000, default 2000).
    #[schemars(range(min = 1, max = 2000))]
    pub tail_lines: Option<u32>,
    /// Only lines from the last this many seconds.
    pub since_seconds: Option<u64>,
    /// The previous (terminated) container's logs, e.g. after a crash.
    pub previous: Option<bool>,
}

/// Arguments of `read_secret`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadSecret {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// Only this key's value; leave out for all keys.
    pub key: Option<String>,
}

/// Arguments of `apply`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Apply {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// One whole object, YAML or JSON (at most 1 MiB; YAML anchors and aliases are refused), with apiVersion, kind, metadata.name (and metadata.namespace when namespaced). Fields you leave out that you set before through apply are removed.
    pub manifest: String,
    /// Take over fields another manager owns (only after a conflict you understood).
    pub force: Option<bool>,
    /// The approval id of this same apply, when a person was asked to approve it.
    pub approval_id: Option<String>,
}

/// Arguments of `scale`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Scale {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// A kind with a scale subresource (`Deployment`, `StatefulSet`, `ReplicaSet`).
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object's namespace.
    pub namespace: String,
    /// The number of replicas wanted.
    pub replicas: i64,
    /// The approval id of this same scale, when a person was asked to approve it.
    pub approval_id: Option<String>,
}

/// Arguments of `rollout_restart`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RolloutRestart {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// `Deployment`, `StatefulSet` or `DaemonSet`.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object's namespace.
    pub namespace: String,
    /// The approval id of this same restart, when a person was asked to approve it.
    pub approval_id: Option<String>,
}

/// Arguments of `request_access`.
#[derive(Debug, Deserialize, JsonSchema)]
// A field misspelt is refused, not dropped: `namspace` dropped would ask
// for the whole cluster.
#[serde(deny_unknown_fields)]
pub struct RequestAccess {
    /// The cluster, a name from `list_clusters`.
    pub cluster: String,
    /// The role wanted (`viewer`, `developer`, `debugger`, `secrets-reader`, `admin`, or a custom one).
    pub role: String,
    /// The namespace; leave out to ask for the whole cluster.
    pub namespace: Option<String>,
    /// For how long, e.g. `2h` or `30m`.
    pub duration: String,
    /// Why you need it: the person deciding reads this.
    pub reason: String,
}
