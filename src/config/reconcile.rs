//! `[reconcile]`: how often each cluster's RBAC objects are resynced,
//! which installation this is, and the Lease that picks the one replica
//! reconciling each cluster.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest instance id: it becomes a label value and the name part of
/// a label key (`instance.portcullis.dev/<id>`), with room to spare.
pub const MAX_INSTANCE_ID: usize = 40;

/// `[reconcile]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconcileConfig {
    /// A full pass runs at least this often (20 s), besides the passes that
    /// changes and expiries trigger.
    #[serde(with = "crate::config::humantime_serde")]
    pub resync: Duration,
    /// This installation's id in the clusters' RBAC objects (`staging`), so
    /// that two installations in front of one cluster never touch each
    /// other's. Unset: the random id the store was created with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The namespace, in each cluster, of the Lease that lets one replica at
    /// a time reconcile it (`portcullis`, where portcullis runs); the
    /// ServiceAccount needs `get`, `create` and `update` on Leases there.
    pub lease_namespace: String,
    /// How long the Lease is good for without a renewal (15 s, whole
    /// seconds): when its holder stops without releasing it, another
    /// replica takes over after this long. It is renewed every third of it.
    #[serde(with = "crate::config::humantime_serde")]
    pub lease_duration: Duration,
}

impl Default for ReconcileConfig {
    fn default() -> Self {
        ReconcileConfig {
            resync: Duration::from_secs(20),
            instance: None,
            lease_namespace: "portcullis".into(),
            lease_duration: Duration::from_secs(15),
        }
    }
}

impl ReconcileConfig {
    /// Check the instance id and the Lease's settings; the error names the
    /// field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !valid_namespace(&self.lease_namespace) {
            return Err((
                "reconcile.lease_namespace",
                format!("{:?} is not a namespace name", self.lease_namespace),
            ));
        }
        if !(1..=3600).contains(&self.lease_duration.as_secs()) {
            return Err((
                "reconcile.lease_duration",
                "must be between 1 s and 1 h (whole seconds)".into(),
            ));
        }
        match &self.instance {
            Some(id) if !valid_instance_id(id) => Err((
                "reconcile.instance",
                format!(
                    "{id:?} is not a valid instance id: 1 to {MAX_INSTANCE_ID} lower-case letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// An instance id is a lower-case label value that can also be the name
/// part of a label key, of at most [`MAX_INSTANCE_ID`] characters.
pub fn valid_instance_id(id: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=MAX_INSTANCE_ID).contains(&id.len())
        && id.bytes().all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
        && id.bytes().next().is_some_and(alnum)
        && id.bytes().last().is_some_and(alnum)
}

/// A namespace name is a DNS label: 1 to 63 lower-case letters, digits or
/// '-', starting and ending with a letter or digit.
pub fn valid_namespace(name: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&name.len())
        && name.bytes().all(|b| alnum(b) || b == b'-')
        && name.bytes().next().is_some_and(alnum)
        && name.bytes().last().is_some_and(alnum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_id_is_a_short_lower_case_label_value() {
        let longest = "a".repeat(MAX_INSTANCE_ID);
        for good in ["staging", "eu-1.prod", "a", "0f3a9c", "ci_42", longest.as_str()] {
            assert!(valid_instance_id(good), "{good:?}");
        }
        let too_long = "a".repeat(MAX_INSTANCE_ID + 1);
        for bad in [
            "",
            "Staging",
            "prod/eu",
            "-prod",
            "prod-",
            ".x",
            "a b",
            too_long.as_str(),
        ] {
            assert!(!valid_instance_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_lease_needs_a_namespace_name_and_a_duration_of_whole_seconds() {
        let good = ReconcileConfig::default();
        assert!(good.validate().is_ok());
        for namespace in ["", "Portcullis", "a_b", "-x"] {
            let bad = ReconcileConfig {
                lease_namespace: namespace.into(),
                ..Default::default()
            };
            assert_eq!(
                bad.validate().unwrap_err().0,
                "reconcile.lease_namespace",
                "{namespace:?}"
            );
        }
        let instant = ReconcileConfig {
            lease_duration: Duration::from_millis(500),
            ..Default::default()
        };
        assert_eq!(instant.validate().unwrap_err().0, "reconcile.lease_duration");
    }
}
