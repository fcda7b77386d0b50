//! Kind resolution from a cluster's own discovery.
//!
//! A tool's `kind` may be a kind, a plural or a short name (`Deployment`,
//! `deployments`, `deploy`); `api_version` tells apart two of the same name
//! (`events` in the core group and in `events.k8s.io`). Without it, each
//! group's preferred version is used; matches in two groups are ambiguous
//! and the tool error lists them. The resources come from the aggregated
//! discovery documents at `/api` and `/apis` (two requests, sent through the
//! gateway like any other, so they are audited with the tool's name), cached
//! per cluster for a few minutes and fetched again when a kind is not found
//! in a copy older than a few seconds.

use super::context::{ClusterRequest, ToolContext};
use super::error::ToolError;
use dashmap::DashMap;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a cluster's resources are trusted.
const TTL: Duration = Duration::from_secs(300);
/// A miss refetches only a copy older than this (no refetch storm).
const REFETCH_AFTER: Duration = Duration::from_secs(5);
/// What `Accept` asks for: the aggregated discovery document.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Characters escaped in a name put into a path segment.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\');

/// One resource of a cluster, as discovery describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResource {
    /// API group; empty for the core group.
    pub group: String,
    /// Version (`v1`).
    pub version: String,
    /// Kind (`Deployment`).
    pub kind: String,
    /// Plural resource (`deployments`).
    pub plural: String,
    /// Singular (`deployment`).
    pub singular: String,
    /// Short names (`deploy`).
    pub short_names: Vec<String>,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Verbs it supports.
    pub verbs: Vec<String>,
    /// Subresources (`status`, `scale`, `log`).
    pub subresources: Vec<String>,
}

impl ApiResource {
    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `deployments.apps`, or `pods` for the core group.
    pub fn qualified(&self) -> String {
        crate::status::qualified_resource(&self.plural, &self.group)
    }

    /// The path of the collection (no name) or of one object, with a
    /// subresource. A namespaced resource needs `namespace`.
    pub fn path(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
        subresource: Option<&str>,
    ) -> Result<String, ToolError> {
        let mut path = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}", self.api_version())
        };
        match (self.namespaced, namespace) {
            (true, Some(namespace)) => path.push_str(&format!("/namespaces/{}", segment("namespace", namespace)?)),
            (false, Some(_)) => {
                return Err(ToolError::invalid(
                    "namespace",
                    format!("{} is cluster-scoped: leave namespace out", self.plural),
                ))
            }
            (_, None) => {}
        }
        path.push('/');
        path.push_str(&self.plural);
        if let Some(name) = name {
            path.push('/');
            path.push_str(&segment("name", name)?);
        }
        if let Some(subresource) = subresource {
            path.push('/');
            path.push_str(subresource);
        }
        Ok(path)
    }

    fn matches(&self, wanted: &str) -> bool {
        self.kind.eq_ignore_ascii_case(wanted)
            || self.plural == wanted
            || self.singular == wanted
            || self.short_names.iter().any(|s| s == wanted)
    }
}

/// A name or namespace as one escaped path segment; `.`, `..`, slashes and
/// empty names are refused (they would change which object the path means,
/// and the gateway refuses such paths anyway).
pub fn segment(argument: &'static str, value: &str) -> Result<String, ToolError> {
    if value.is_empty() || value == "." || value == ".." || value.len() > 253 || value.contains(['/', '\\']) {
        return Err(ToolError::invalid(
            argument,
            format!("{argument} {value:?} is not a Kubernetes name"),
        ));
    }
    Ok(utf8_percent_encode(value, SEGMENT).to_string())
}

/// The resources of an aggregated discovery document (`APIGroupDiscoveryList`),
/// each group's versions in the server's order of preference.
pub fn parse_aggregated(document: &Value) -> Vec<ApiResource> {
    let mut out = Vec::new();
    for group in document["items"].as_array().into_iter().flatten() {
        let group_name = group["metadata"]["name"].as_str().unwrap_or_default();
        for version in group["versions"].as_array().into_iter().flatten() {
            let version_name = version["version"].as_str().unwrap_or_default();
            for resource in version["resources"].as_array().into_iter().flatten() {
                let strings = |field: &str| -> Vec<String> {
                    resource[field]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                };
                let subresources = resource["subresources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["subresource"].as_str().map(String::from))
                    .collect();
                out.push(ApiResource {
                    group: group_name.to_string(),
                    version: version_name.to_string(),
                    kind: resource["responseKind"]["kind"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    plural: resource["resource"].as_str().unwrap_or_default().to_string(),
                    singular: resource["singularResource"].as_str().unwrap_or_default().to_string(),
                    short_names: strings("shortNames"),
                    namespaced: resource["scope"] == "Namespaced",
                    verbs: strings("verbs"),
                    subresources,
                });
            }
        }
    }
    out
}

/// Resolve `kind` (kind, plural or short name, any case) among `resources`
/// of `cluster`, narrowed by `api_version` when given.
pub fn resolve(
    resources: &[ApiResource],
    cluster: &str,
    kind: &str,
    api_version: Option<&str>,
) -> Result<ApiResource, ToolError> {
    let wanted = kind.trim().to_ascii_lowercase();
    let mut found: Vec<&ApiResource> = Vec::new();
    for resource in resources.iter().filter(|r| r.matches(&wanted)) {
        if api_version.is_some_and(|v| v != resource.api_version()) {
            continue;
        }
        // The first version of a group is its preferred one.
        if !found.iter().any(|f| f.group == resource.group) {
            found.push(resource);
        }
    }
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let candidates = resources
                .iter()
                .filter(|r| !wanted.is_empty() && (r.plural.contains(&wanted) || wanted.contains(&r.singular)))
                .map(|r| format!("{} {}", r.api_version(), r.kind))
                .take(5)
                .collect();
            Err(ToolError::UnknownKind {
                cluster: cluster.into(),
                kind: kind.into(),
                candidates,
            })
        }
        many => Err(ToolError::AmbiguousKind {
            cluster: cluster.into(),
            kind: kind.into(),
            candidates: many.iter().map(|r| format!("{} {}", r.api_version(), r.kind)).collect(),
        }),
    }
}

/// Each cluster's resources, as last fetched.
#[derive(Debug, Default)]
pub struct KindCache {
    entries: DashMap<String, (Arc<Vec<ApiResource>>, Instant)>,
}

impl KindCache {
    /// Resolve `kind` on the call's cluster, fetching discovery when the
    /// cached copy is missing, stale, or (for an unknown kind) not recent.
    pub async fn resolve(
        &self,
        ctx: &ToolContext,
        kind: &str,
        api_version: Option<&str>,
    ) -> Result<ApiResource, ToolError> {
        let (resources, fetched) = self.resources(ctx, false).await?;
        match resolve(&resources, &ctx.cluster, kind, api_version) {
            Err(ToolError::UnknownKind { .. }) if fetched.elapsed() > REFETCH_AFTER => {
                let (resources, _) = self.resources(ctx, true).await?;
                resolve(&resources, &ctx.cluster, kind, api_version)
            }
            resolved => resolved,
        }
    }

    /// The call's cluster's resources and when they were fetched.
    pub async fn resources(
        &self,
        ctx: &ToolContext,
        refetch: bool,
    ) -> Result<(Arc<Vec<ApiResource>>, Instant), ToolError> {
        if !refetch {
            if let Some(entry) = self.entries.get(&ctx.cluster).filter(|e| e.1.elapsed() < TTL) {
                return Ok(entry.clone());
            }
        }
        let mut resources = Vec::new();
        for path in ["/api", "/apis"] {
            let answer = ctx.send(ClusterRequest::get(path).accept(AGGREGATED)).await?;
            let document: Value = serde_json::from_slice(&answer.body).map_err(|_| ToolError::Refused {
                code: "cluster.discovery",
                message: format!("the cluster's discovery document at {path} is not JSON"),
                audit_id: answer.audit_id.clone(),
            })?;
            resources.extend(parse_aggregated(&document));
        }
        let entry = (Arc::new(resources), Instant::now());
        self.entries.insert(ctx.cluster.clone(), entry.clone());
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resources() -> Vec<ApiResource> {
        let document = json!({"items": [
            {"metadata": {}, "versions": [{"version": "v1", "resources": [
                {"resource": "events", "responseKind": {"kind": "Event"}, "scope": "Namespaced", "singularResource": "event", "shortNames": ["ev"]},
                {"resource": "pods", "responseKind": {"kind": "Pod"}, "scope": "Namespaced", "singularResource": "pod", "shortNames": ["po"], "subresources": [{"subresource": "log"}]},
                {"resource": "nodes", "responseKind": {"kind": "Node"}, "scope": "Cluster", "singularResource": "node"}
            ]}]},
            {"metadata": {"name": "apps"}, "versions": [
                {"version": "v1", "resources": [{"resource": "deployments", "responseKind": {"kind": "Deployment"}, "scope": "Namespaced", "singularResource": "deployment", "shortNames": ["deploy"]}]},
                {"version": "v1beta1", "resources": [{"resource": "deployments", "responseKind": {"kind": "Deployment"}, "scope": "Namespaced", "singularResource": "deployment"}]}
            ]},
            {"metadata": {"name": "events.k8s.io"}, "versions": [{"version": "v1", "resources": [
                {"resource": "events", "responseKind": {"kind": "Event"}, "scope": "Namespaced", "singularResource": "event"}
            ]}]}
        ]});
        parse_aggregated(&document)
    }

    #[test]
    fn kinds_plurals_and_short_names_resolve_to_the_preferred_version() {
        let all = resources();
        for name in ["Deployment", "deployments", "deploy", "DEPLOYMENT", "deployment"] {
            let found = resolve(&all, "c", name, None).unwrap();
            assert_eq!(
                (found.api_version().as_str(), found.plural.as_str()),
                ("apps/v1", "deployments"),
                "{name}"
            );
        }
        assert_eq!(
            resolve(&all, "c", "deployments", Some("apps/v1beta1")).unwrap().version,
            "v1beta1"
        );
        let pod = resolve(&all, "c", "po", None).unwrap();
        assert_eq!(pod.subresources, ["log"]);
        assert_eq!(
            pod.path(Some("shop"), Some("web"), Some("log")).unwrap(),
            "/api/v1/namespaces/shop/pods/web/log"
        );
    }

    #[test]
    fn the_same_name_in_two_groups_is_ambiguous_until_api_version_chooses() {
        let all = resources();
        let Err(ToolError::AmbiguousKind { candidates, .. }) = resolve(&all, "c", "events", None) else {
            panic!("ambiguous")
        };
        assert_eq!(candidates, ["v1 Event", "events.k8s.io/v1 Event"]);
        assert_eq!(
            resolve(&all, "c", "events", Some("events.k8s.io/v1")).unwrap().group,
            "events.k8s.io"
        );
        assert_eq!(
            resolve(&all, "c", "ev", None).unwrap().group,
            "",
            "the short name is only the core one's"
        );
    }

    #[test]
    fn an_unknown_kind_lists_near_candidates() {
        let Err(ToolError::UnknownKind { candidates, .. }) = resolve(&resources(), "c", "deploymentz", None) else {
            panic!("unknown")
        };
        assert!(candidates.contains(&"apps/v1 Deployment".to_string()), "{candidates:?}");
    }

    #[test]
    fn names_are_escaped_and_dot_segments_refused() {
        let nodes = resolve(&resources(), "c", "nodes", None).unwrap();
        assert_eq!(nodes.path(None, Some("a b%"), None).unwrap(), "/api/v1/nodes/a%20b%25");
        assert!(nodes.path(None, Some(".."), None).is_err());
        assert!(nodes.path(None, Some("a/b"), None).is_err());
        assert!(nodes.path(Some("shop"), None, None).is_err(), "cluster-scoped");
    }
}
