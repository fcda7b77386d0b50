//! What the stream handlers need to know about a pod: its containers, their
//! environment, ports and restarts, and the container a request means.

use super::exec::commands::Container;
use super::exec::fs;
use crate::status::Status;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// Init, regular or ephemeral, in the order kube-apiserver visits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    /// `spec.initContainers`.
    Init,
    /// `spec.containers`.
    Regular,
    /// `spec.ephemeralContainers`.
    Ephemeral,
}

/// One container of the pod.
#[derive(Debug, Clone)]
pub struct ContainerInfo {
    /// Name.
    pub name: String,
    /// Which list it is in.
    pub kind: ContainerKind,
    /// Literal `env` values (`valueFrom` entries are skipped).
    pub env: Vec<(String, String)>,
    /// Declared `containerPort`s.
    pub ports: Vec<u16>,
    /// `status.containerStatuses[].restartCount`.
    pub restart_count: u64,
    /// When the current instance started, if the status says.
    pub started_at: Option<DateTime<Utc>>,
}

/// A pod as the stream handlers see it.
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
    /// `spec.nodeName`.
    pub node_name: String,
    /// `metadata.creationTimestamp`.
    pub created: Option<DateTime<Utc>>,
    /// All containers: init, then regular, then ephemeral.
    pub containers: Vec<ContainerInfo>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter().fold(v, |v, k| &v[*k]).as_str().unwrap_or("")
}

fn time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

impl PodInfo {
    /// Read a pod object.
    pub fn from_object(pod: &Value) -> Self {
        let statuses: Vec<&Value> = [
            "initContainerStatuses",
            "containerStatuses",
            "ephemeralContainerStatuses",
        ]
        .iter()
        .filter_map(|k| pod["status"][*k].as_array())
        .flatten()
        .collect();
        let mut containers = Vec::new();
        for (list, kind) in [
            ("initContainers", ContainerKind::Init),
            ("containers", ContainerKind::Regular),
            ("ephemeralContainers", ContainerKind::Ephemeral),
        ] {
            for c in pod["spec"][list].as_array().into_iter().flatten() {
                let name = str_at(c, &["name"]).to_string();
                let status = statuses.iter().find(|s| s["name"] == name.as_str());
                containers.push(ContainerInfo {
                    env: c["env"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|e| e.get("value").is_some() || e.get("valueFrom").is_none())
                        .map(|e| (str_at(e, &["name"]).to_string(), str_at(e, &["value"]).to_string()))
                        .collect(),
                    ports: c["ports"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["containerPort"].as_u64())
                        .filter_map(|p| u16::try_from(p).ok())
                        .collect(),
                    restart_count: status.and_then(|s| s["restartCount"].as_u64()).unwrap_or(0),
                    started_at: status.and_then(|s| time(str_at(s, &["state", "running", "startedAt"]))),
                    name,
                    kind,
                });
            }
        }
        PodInfo {
            name: str_at(pod, &["metadata", "name"]).to_string(),
            namespace: str_at(pod, &["metadata", "namespace"]).to_string(),
            uid: str_at(pod, &["metadata", "uid"]).to_string(),
            node_name: str_at(pod, &["spec", "nodeName"]).to_string(),
            created: time(str_at(pod, &["metadata", "creationTimestamp"])),
            containers,
        }
    }

    /// The container `requested` names, or the only regular one when it is
    /// empty; 400 with kube-apiserver's wording otherwise.
    pub fn container(&self, requested: &str) -> Result<&ContainerInfo, Status> {
        if !requested.is_empty() {
            return self.containers.iter().find(|c| c.name == requested).ok_or_else(|| {
                Status::bad_request(format!("container {requested} is not valid for pod {}", self.name))
            });
        }
        let regular: Vec<&ContainerInfo> = self
            .containers
            .iter()
            .filter(|c| c.kind == ContainerKind::Regular)
            .collect();
        match regular.as_slice() {
            [only] => Ok(only),
            [] => Err(Status::bad_request(format!(
                "a container name must be specified for pod {}",
                self.name
            ))),
            _ => {
                let names: Vec<&str> = self.containers.iter().map(|c| c.name.as_str()).collect();
                Err(Status::bad_request(format!(
                    "a container name must be specified for pod {}, choose one of: [{}]",
                    self.name,
                    names.join(" ")
                )))
            }
        }
    }

    /// 400 when the pod is not scheduled: there is no kubelet to stream from.
    pub fn require_node(&self) -> Result<(), Status> {
        if self.node_name.is_empty() {
            return Err(Status::bad_request(format!(
                "pod {} does not have a host assigned",
                self.name
            )));
        }
        Ok(())
    }

    /// Does any container declare `port`?
    pub fn listens_on(&self, port: u16) -> bool {
        self.containers.iter().any(|c| c.ports.contains(&port))
    }

    /// The runtime view of `container` for running commands in it.
    pub fn runtime(&self, container: &ContainerInfo, tty: bool) -> Container {
        let mut env = vec![
            (
                "PATH".to_string(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
            ),
            ("HOSTNAME".to_string(), self.name.clone()),
        ];
        if tty {
            env.push(("TERM".into(), "xterm".into()));
        }
        env.extend(container.env.iter().cloned());
        env.extend(
            [
                ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
                ("KUBERNETES_SERVICE_PORT", "443"),
                ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
                ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
                ("HOME", "/root"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let key = if self.uid.is_empty() {
            format!("{}/{}", self.namespace, self.name)
        } else {
            self.uid.clone()
        };
        Container {
            pod: self.name.clone(),
            container: container.name.clone(),
            env,
            fs: fs::for_container(&key, &container.name, &self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: Value) -> PodInfo {
        PodInfo::from_object(&json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
            "spec": {"nodeName": "node-1", "initContainers": [{"name": "init"}], "containers": containers},
            "status": {"containerStatuses": [{"name": "a", "restartCount": 2}]}
        }))
    }

    #[test]
    fn the_only_container_is_the_default() {
        let p = pod(json!([{"name": "a", "ports": [{"containerPort": 80}], "env": [{"name": "X", "value": "1"}]}]));
        let c = p.container("").unwrap();
        assert_eq!((c.name.as_str(), c.restart_count, c.ports.clone()), ("a", 2, vec![80]));
        assert!(p.listens_on(80) && !p.listens_on(81));
        assert_eq!(p.container("init").unwrap().kind, ContainerKind::Init);
    }

    #[test]
    fn several_containers_need_a_name_and_unknown_names_are_rejected() {
        let p = pod(json!([{"name": "a"}, {"name": "b"}]));
        let err = p.container("").unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "a container name must be specified for pod web, choose one of: [init a b]"
        );
        assert_eq!(
            p.container("x").unwrap_err().message,
            "container x is not valid for pod web"
        );
    }

    #[test]
    fn unscheduled_pods_cannot_stream() {
        let p = PodInfo::from_object(&json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}));
        assert_eq!(
            p.require_node().unwrap_err().message,
            "pod p does not have a host assigned"
        );
    }
}
