//! One cluster's RBAC API, with kube-rs: list what this installation owns
//! or shares, apply (server-side, field manager `portcullis-<instance>`),
//! release, delete; and the Lease that picks the replica reconciling it
//! (read, create, replace).
//!
//! The client is built from the cluster's configuration: server URL, CA
//! bundle and ServiceAccount token file. kube-rs re-reads the token file at
//! least once a minute (projected tokens rotate) and the CA file likewise,
//! and connects lazily, so a cluster that is down at start costs nothing
//! until a pass.

use super::desired::{Apply, Deletion, Object, ObjectKey, SELECTOR};
use super::instance::{Instance, UNMARKED_BINDINGS};
use crate::audit::forwarded::{Forwarded, Recorder};
use crate::config::ClusterConfig;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Client;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use std::time::Duration;

/// Why a cluster's client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The CA bundle could not be read or holds no certificate.
    #[error("cluster {cluster}: cannot use CA bundle {path}: {message}")]
    CaBundle {
        /// Cluster.
        cluster: String,
        /// File.
        path: std::path::PathBuf,
        /// Why.
        message: String,
    },
    /// The server URL is not a URI.
    #[error("cluster {cluster}: invalid server URL {url}")]
    Url {
        /// Cluster.
        cluster: String,
        /// URL.
        url: String,
    },
    /// This installation's instance id could not be read from the store.
    #[error(transparent)]
    Instance(#[from] super::instance::InstanceError),
    /// kube-rs refused the configuration (e.g. the token file is unreadable).
    #[error("cluster {cluster}: {source}")]
    Kube {
        /// Cluster.
        cluster: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// A cluster's RBAC API as portcullis's ServiceAccount.
#[derive(Clone)]
pub struct ClusterClient {
    /// Cluster name.
    pub name: String,
    client: Client,
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterClient").field("name", &self.name).finish()
    }
}

/// A layer that gives each request its own `Audit-ID`, recorded as
/// portcullis's own (kind `system`) before it is sent.
fn audited(
    cluster: String,
    recorder: Recorder,
) -> tower::util::MapRequestLayer<impl Fn(http::Request<kube::client::Body>) -> http::Request<kube::client::Body> + Clone>
{
    tower::util::MapRequestLayer::new(move |mut request: http::Request<kube::client::Body>| {
        let audit_id = crate::audit::id::new().to_string();
        if let Ok(value) = http::HeaderValue::from_str(&audit_id) {
            request.headers_mut().insert("audit-id", value);
            recorder.record(Forwarded::system(&audit_id, &cluster));
        }
        request
    })
}

impl ClusterClient {
    /// Build the client for `config`; no connection is made yet. Each of
    /// its requests carries an `Audit-ID` recorded through `recorder`, so
    /// the API server's audit event for it is joined to portcullis's
    /// records and raises no bypass alert.
    pub fn new(config: &ClusterConfig, recorder: Recorder) -> Result<ClusterClient, ClientError> {
        let ca_error = |message: String| ClientError::CaBundle {
            cluster: config.name.clone(),
            path: config.ca_file.clone(),
            message,
        };
        let pem = std::fs::read(&config.ca_file).map_err(|e| ca_error(e.to_string()))?;
        let roots = CertificateDer::pem_slice_iter(&pem)
            .map(|c| c.map(|c| c.to_vec()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ca_error(e.to_string()))?;
        if roots.is_empty() {
            return Err(ca_error("no certificate found".into()));
        }
        let url = config.server.parse().map_err(|_| ClientError::Url {
            cluster: config.name.clone(),
            url: config.server.clone(),
        })?;
        let mut kube_config = kube::Config::new(url);
        kube_config.root_cert = Some(roots);
        kube_config.root_cert_file = Some(config.ca_file.clone());
        kube_config.auth_info.token_file = Some(config.token_file.display().to_string());
        // A hung API server must not hang the reconciler; it retries on its
        // own schedule (with backoff), so kube-rs's own retries are off.
        kube_config.connect_timeout = Some(Duration::from_secs(5));
        kube_config.read_timeout = Some(Duration::from_secs(20));
        kube_config.reset_reader_on_write = true;
        kube_config.default_retry = false;
        let builder = kube::client::ClientBuilder::try_from(kube_config).map_err(|source| ClientError::Kube {
            cluster: config.name.clone(),
            source,
        })?;
        let client = builder.with_layer(&audited(config.name.clone(), recorder)).build();
        Ok(ClusterClient {
            name: config.name.clone(),
            client,
        })
    }

    /// Every ClusterRole labelled as portcullis's (they are shared between
    /// installations), and `instance`'s ClusterRoleBindings and
    /// RoleBindings (all namespaces). The selectors are applied by the
    /// server, so objects portcullis does not own, and other installations'
    /// bindings, are never even seen.
    pub async fn list_owned(&self, instance: &Instance) -> Result<(Vec<ClusterRole>, Vec<Object>), kube::Error> {
        let roles = Api::<ClusterRole>::all(self.client.clone())
            .list(&ListParams::default().labels(SELECTOR))
            .await?;
        let bindings = self.list_bindings(&instance.bindings_selector()).await?;
        Ok((roles.items, bindings))
    }

    /// The bindings from before instance ids (no instance label): the
    /// caller adopts only those of its own grants.
    pub async fn list_unmarked_bindings(&self) -> Result<Vec<Object>, kube::Error> {
        self.list_bindings(UNMARKED_BINDINGS).await
    }

    async fn list_bindings(&self, selector: &str) -> Result<Vec<Object>, kube::Error> {
        let params = ListParams::default().labels(selector);
        let cluster_bindings = Api::<ClusterRoleBinding>::all(self.client.clone())
            .list(&params)
            .await?;
        let bindings = Api::<RoleBinding>::all(self.client.clone()).list(&params).await?;
        Ok(cluster_bindings
            .items
            .into_iter()
            .map(Object::ClusterRoleBinding)
            .chain(bindings.items.into_iter().map(Object::RoleBinding))
            .collect())
    }

    /// Server-side apply as `instance`'s field manager. Forced, it takes the
    /// fields it changes from hand edits (portcullis is the only writer of
    /// what it owns); the plan never forces over another installation.
    pub async fn apply(&self, apply: &Apply, instance: &Instance) -> Result<(), kube::Error> {
        let mut params = PatchParams::apply(&instance.field_manager());
        params.force = apply.force;
        let name = match apply.object.key() {
            ObjectKey::ClusterRole(n) | ObjectKey::ClusterRoleBinding(n) | ObjectKey::RoleBinding(_, n) => n,
        };
        match &apply.object {
            Object::ClusterRole(o) => {
                Api::<ClusterRole>::all(self.client.clone())
                    .patch(&name, &params, &Patch::Apply(o))
                    .await?;
            }
            Object::ClusterRoleBinding(o) => {
                Api::<ClusterRoleBinding>::all(self.client.clone())
                    .patch(&name, &params, &Patch::Apply(o))
                    .await?;
            }
            Object::RoleBinding(o) => {
                let namespace = o.metadata.namespace.as_deref().unwrap_or("default");
                Api::<RoleBinding>::namespaced(self.client.clone(), namespace)
                    .patch(&name, &params, &Patch::Apply(o))
                    .await?;
            }
        }
        Ok(())
    }

    /// Give up `instance`'s mark and fields on a shared ClusterRole: an
    /// apply of nothing removes what only it owned and keeps what other
    /// installations own too.
    pub async fn release(&self, name: &str, instance: &Instance) -> Result<(), kube::Error> {
        let nothing = serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
        });
        let params = PatchParams::apply(&instance.field_manager());
        match Api::<ClusterRole>::all(self.client.clone())
            .patch(name, &params, &Patch::Apply(nothing))
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Delete what `deletion` names, if it still has the version it names;
    /// already gone is success, and so is changed since (`Ok(false)`: the
    /// next pass looks again).
    pub async fn delete(&self, deletion: &Deletion) -> Result<bool, kube::Error> {
        let params = DeleteParams {
            preconditions: deletion.resource_version.as_ref().map(|version| Preconditions {
                resource_version: Some(version.clone()),
                uid: None,
            }),
            ..Default::default()
        };
        let result = match &deletion.key {
            ObjectKey::ClusterRole(name) => Api::<ClusterRole>::all(self.client.clone())
                .delete(name, &params)
                .await
                .map(|_| ()),
            ObjectKey::ClusterRoleBinding(name) => Api::<ClusterRoleBinding>::all(self.client.clone())
                .delete(name, &params)
                .await
                .map(|_| ()),
            ObjectKey::RoleBinding(namespace, name) => Api::<RoleBinding>::namespaced(self.client.clone(), namespace)
                .delete(name, &params)
                .await
                .map(|_| ()),
        };
        match result {
            Ok(()) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 && deletion.resource_version.is_some() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl ClusterClient {
    /// The Lease `name` in `namespace`, or `None` when there is none yet.
    pub async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>, kube::Error> {
        Api::<Lease>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
    }

    /// Create `lease` in `namespace`; a 409 means another replica made it
    /// first.
    pub async fn create_lease(&self, namespace: &str, lease: &Lease) -> Result<Lease, kube::Error> {
        Api::<Lease>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), lease)
            .await
    }

    /// Replace `lease` (an update at its `resourceVersion`); a 409 means
    /// another replica wrote it since it was read.
    pub async fn replace_lease(&self, namespace: &str, lease: &Lease) -> Result<Lease, kube::Error> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        Api::<Lease>::namespaced(self.client.clone(), namespace)
            .replace(&name, &PostParams::default(), lease)
            .await
    }
}

/// Did `error` come from not reaching the cluster at all (as opposed to the
/// cluster answering with an error)?
pub fn is_unreachable(error: &kube::Error) -> bool {
    !matches!(error, kube::Error::Api(_) | kube::Error::SerdeError(_))
}
