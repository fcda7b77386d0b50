//! `[reconcile]`: how often each cluster's RBAC objects are resynced, and
//! which installation this is.

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
}

impl Default for ReconcileConfig {
    fn default() -> Self {
        ReconcileConfig {
            resync: Duration::from_secs(20),
            instance: None,
        }
    }
}

impl ReconcileConfig {
    /// Check the instance id; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
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
}
