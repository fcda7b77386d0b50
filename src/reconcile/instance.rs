//! Which installation of portcullis this is, in a cluster's RBAC objects.
//!
//! Two installations may stand in front of one cluster (staging and
//! production, or two tests). Each has an instance id: `[reconcile]
//! instance`, or else the random id its store was created with, so a
//! restart keeps it and another store gets another. With it:
//!
//! - each binding it writes is labelled [`INSTANCE_LABEL`]`=<id>` and it
//!   lists (hence can delete) only those: another installation's bindings
//!   are never seen;
//! - the ClusterRoles `portcullis:<role>` are shared (their names are what
//!   `deploy/rbac.yaml` allows to bind), so each installation marks the ones
//!   it uses with its own label key `instance.portcullis.dev/<id>` under its
//!   own field manager `portcullis-<id>`; server-side apply keeps every
//!   installation's mark, and a ClusterRole is deleted only once no other
//!   installation's mark is left on it.

use super::desired::SELECTOR;
use crate::config::{valid_instance_id, Config};
use crate::store::Store;

/// The label naming the installation a binding belongs to.
pub const INSTANCE_LABEL: &str = "portcullis.dev/instance";
/// The prefix of the label key by which an installation marks a ClusterRole
/// it uses (`instance.portcullis.dev/<id>: "true"`).
pub const MARK_PREFIX: &str = "instance.portcullis.dev/";
/// The value of a mark.
pub const MARK_VALUE: &str = "true";
/// The prefix of each installation's field manager (`portcullis-<id>`).
const MANAGER_PREFIX: &str = "portcullis-";
/// Bindings written before installations had ids: labelled as portcullis's,
/// with no instance label. An installation adopts those of its own grants.
pub const UNMARKED_BINDINGS: &str = "app.kubernetes.io/managed-by=portcullis,!portcullis.dev/instance";

/// Why the instance id could not be settled.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// The store could not say.
    #[error("cannot read this installation's instance id from the store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// The configured or stored id is not one (a configuration built
    /// without [`Config::from_sources`], or an edited store).
    #[error("{0:?} is not a valid instance id")]
    Invalid(String),
}

/// This installation's id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Instance(String);

impl Instance {
    /// `id`, if it is a valid instance id (see [`valid_instance_id`]).
    pub fn new(id: &str) -> Option<Instance> {
        valid_instance_id(id).then(|| Instance(id.to_string()))
    }

    /// The configured id, or else the store's.
    pub fn resolve(config: &Config, store: &Store) -> Result<Instance, InstanceError> {
        let id = match &config.reconcile.instance {
            Some(id) => id.clone(),
            None => store.instance_id()?,
        };
        Instance::new(&id).ok_or(InstanceError::Invalid(id))
    }

    /// The id.
    pub fn id(&self) -> &str {
        &self.0
    }

    /// The server-side apply field manager of everything it writes.
    pub fn field_manager(&self) -> String {
        format!("{MANAGER_PREFIX}{}", self.0)
    }

    /// The label key of its mark on a ClusterRole it uses.
    pub fn mark(&self) -> String {
        format!("{MARK_PREFIX}{}", self.0)
    }

    /// The label selector of its own bindings.
    pub fn bindings_selector(&self) -> String {
        format!("{SELECTOR},{INSTANCE_LABEL}={}", self.0)
    }

    /// Another installation's id, if `manager` is that installation's field
    /// manager (`portcullis` alone, from before instance ids, is none).
    pub fn other_by_manager<'a>(&self, manager: &'a str) -> Option<&'a str> {
        manager
            .strip_prefix(MANAGER_PREFIX)
            .filter(|id| *id != self.0 && valid_instance_id(id))
    }

    /// Other installations' ids, from the marks among `labels`.
    pub fn others_marking<'a>(&self, labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Vec<String> {
        labels
            .into_iter()
            .filter_map(|(key, _)| key.strip_prefix(MARK_PREFIX))
            .filter(|id| *id != self.0)
            .map(str::to_string)
            .collect()
    }
}

impl std::fmt::Display for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn an_instance_names_its_manager_mark_and_selector_and_tells_others_apart() {
        let staging = Instance::new("staging").unwrap();
        assert_eq!(staging.field_manager(), "portcullis-staging");
        assert_eq!(staging.mark(), "instance.portcullis.dev/staging");
        assert_eq!(
            staging.bindings_selector(),
            "app.kubernetes.io/managed-by=portcullis,portcullis.dev/instance=staging"
        );
        assert_eq!(staging.other_by_manager("portcullis-prod"), Some("prod"));
        for not_another in ["portcullis-staging", "portcullis", "kubectl-edit", "portcullis-Bad/x"] {
            assert_eq!(staging.other_by_manager(not_another), None, "{not_another}");
        }
        let labels = BTreeMap::from([
            ("instance.portcullis.dev/staging".to_string(), "true".to_string()),
            ("instance.portcullis.dev/prod".to_string(), "true".to_string()),
            ("app.kubernetes.io/managed-by".to_string(), "portcullis".to_string()),
        ]);
        assert_eq!(staging.others_marking(&labels), ["prod"]);
        assert!(Instance::new("Not Valid").is_none());
    }

    #[test]
    fn the_configured_id_wins_over_the_stores() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        let mut config = crate::config::Config::from_sources(
            "listen = \"127.0.0.1:1\"\npublic_url = \"https://x\"\ndata_dir = \"/tmp\"\n[tls]\ncert_file = \"c\"\nkey_file = \"k\"\n",
            Vec::new(),
        )
        .unwrap();
        let from_store = Instance::resolve(&config, &store).unwrap();
        assert_eq!(from_store.id(), store.instance_id().unwrap());
        config.reconcile.instance = Some("staging".into());
        assert_eq!(Instance::resolve(&config, &store).unwrap().id(), "staging");
    }
}
