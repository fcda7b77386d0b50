//! `[[roles]]`: the shape of a role, built in or custom.
//!
//! A custom role is configuration, so its type is declared here, below
//! everything that reads it; what a role allows, and the built-in ones, are
//! `identity::roles`'s.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The built-in roles' names, which a custom role may not take: the
/// reconciler would write both under one ClusterRole name, and a grant
/// would be judged by the built-in's rules and limits.
pub const BUILTIN_NAMES: [&str; 6] = [
    "viewer",
    "developer",
    "debugger",
    "secrets-reader",
    "admin",
    "cluster-admin",
];

/// A role portcullis can grant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Role {
    /// Name, e.g. `viewer`.
    pub name: String,
    /// RBAC PolicyRules, as in a ClusterRole.
    pub rules: Vec<Value>,
    /// Whether a grant of this role lets its holder see Secret values.
    #[serde(default)]
    pub reveals_secrets: bool,
    /// The longest a grant of this role may last.
    #[serde(default, with = "humantime_serde_opt")]
    pub max_duration: Option<Duration>,
    /// Granted only in a namespace: a role whose rules are everything
    /// (the built-in `admin`) would be `cluster-admin` without its time
    /// limit if bound to the whole cluster.
    #[serde(default)]
    pub namespaced: bool,
}

/// `humantime` (de)serialization for an optional duration (`"8h"`).
mod humantime_serde_opt {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| humantime::parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}
