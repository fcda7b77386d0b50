//! Issuing a grant: every grant, whoever asks for it (an administrator's
//! `portcullis grant add`, an approved access request, the demo), is checked
//! here the same way before it exists.

use super::{Grant, Principal};
use crate::config::Config;
use chrono::Utc;
use std::time::Duration;

/// Why a grant cannot be issued as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// No built-in or configured role has this name.
    #[error("unknown role {role:?}; roles are: {}", known.join(", "))]
    UnknownRole {
        /// The name asked for.
        role: String,
        /// The roles there are.
        known: Vec<String>,
    },
    /// No configured cluster has this name.
    #[error("unknown cluster {0:?}")]
    UnknownCluster(String),
    /// Not a namespace name (an RFC 1123 label): it becomes part of the
    /// RoleBinding's path and name in the cluster.
    #[error("{0:?} is not a namespace name: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit")]
    InvalidNamespace(String),
    /// The namespace is one of `protected_namespaces`.
    #[error("namespace {0:?} is protected: no grant applies there")]
    ProtectedNamespace(String),
    /// A role granted only in a namespace, asked for the whole cluster.
    #[error("role {0} is granted in a namespace only: name one (cluster-admin is the whole cluster's)")]
    NamespaceNeeded(String),
    /// Longer than the role's `max_duration`.
    #[error("role {role} may be granted for at most {}", humantime::format_duration(*max))]
    TooLong {
        /// The role.
        role: String,
        /// Its longest grant.
        max: Duration,
    },
    /// The duration does not fit in a date.
    #[error(transparent)]
    OutOfRange(#[from] chrono::OutOfRangeError),
    /// The grant would end past the last date there is.
    #[error("the duration is too long: the grant would end past the last date there is")]
    TooFar,
}

/// Check and build a grant: the role exists, the cluster is configured, a
/// namespace is named if the role needs one and is not protected, and the
/// duration is within the role's maximum.
pub fn new_grant(
    config: &Config,
    subject: Principal,
    cluster: &str,
    role: &str,
    namespace: Option<String>,
    duration: Duration,
    by: &str,
) -> Result<Grant, GrantError> {
    let all_roles = super::roles::all(config);
    let found = all_roles
        .iter()
        .find(|r| r.name == role)
        .ok_or_else(|| GrantError::UnknownRole {
            role: role.into(),
            known: all_roles.iter().map(|r| r.name.clone()).collect(),
        })?;
    if !config.clusters.iter().any(|c| c.name == cluster) {
        return Err(GrantError::UnknownCluster(cluster.into()));
    }
    if found.namespaced && namespace.is_none() {
        return Err(GrantError::NamespaceNeeded(role.into()));
    }
    if let Some(ns) = namespace
        .as_deref()
        .filter(|ns| !crate::config::reconcile::valid_namespace(ns))
    {
        return Err(GrantError::InvalidNamespace(ns.into()));
    }
    if let Some(ns) = namespace
        .as_deref()
        .filter(|ns| config.protected_namespaces.iter().any(|p| p == ns))
    {
        return Err(GrantError::ProtectedNamespace(ns.into()));
    }
    if let Some(max) = found.max_duration.filter(|max| duration > *max) {
        return Err(GrantError::TooLong { role: role.into(), max });
    }
    let now = Utc::now();
    Ok(Grant {
        id: uuid::Uuid::now_v7().to_string(),
        subject,
        cluster: cluster.into(),
        namespace,
        role: role.into(),
        expires_at: within_dates(now.checked_add_signed(chrono::TimeDelta::from_std(duration)?))
            .ok_or(GrantError::TooFar)?,
        granted_by: by.into(),
        created_at: now,
        revoked_at: None,
    })
}

/// `end`, if it is a date the stores keep in order: their times are text,
/// and one past the year 9999 (`+10000-…`) sorts before every other.
pub fn within_dates(end: Option<chrono::DateTime<Utc>>) -> Option<chrono::DateTime<Utc>> {
    use chrono::Datelike;
    end.filter(|end| end.year() <= 9999)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
listen = "127.0.0.1:8443"
public_url = "https://127.0.0.1:8443"
data_dir = "/tmp/unused"
protected_namespaces = ["kube-system"]
[tls]
cert_file = "c.pem"
key_file = "k.pem"
[[clusters]]
name = "prod"
server = "https://127.0.0.1:6443"
ca_file = "ca.pem"
token_file = "token"
"#;

    fn refusal(cluster: &str, role: &str, namespace: Option<&str>, hours: u64) -> String {
        let config = Config::from_sources(CONFIG, Vec::new()).unwrap();
        let ana = Principal::person("ana");
        let namespace = namespace.map(String::from);
        let duration = Duration::from_secs(hours * 3600);
        new_grant(&config, ana, cluster, role, namespace, duration, "t")
            .unwrap_err()
            .to_string()
    }

    /// A role with no longest grant, for a million years: a message, not
    /// a date that overflows.
    #[test]
    fn a_grant_that_would_end_past_the_last_date_is_refused() {
        assert_eq!(
            refusal("prod", "viewer", Some("shop"), 1_000_000 * 365 * 24),
            "the duration is too long: the grant would end past the last date there is"
        );
        // Past 9999 too: the stores keep times as text, which would sort it
        // before today.
        assert_eq!(
            refusal("prod", "viewer", Some("shop"), 8_000 * 365 * 24),
            "the duration is too long: the grant would end past the last date there is"
        );
    }

    #[test]
    fn each_refusal_says_what_to_change_in_the_words_the_cli_prints() {
        assert_eq!(
            refusal("prod", "owner", None, 1),
            "unknown role \"owner\"; roles are: viewer, developer, debugger, secrets-reader, admin, cluster-admin"
        );
        assert_eq!(refusal("staging", "viewer", None, 1), "unknown cluster \"staging\"");
        assert_eq!(
            refusal("prod", "viewer", Some("kube-system"), 1),
            "namespace \"kube-system\" is protected: no grant applies there"
        );
        assert_eq!(
            refusal("prod", "cluster-admin", None, 5),
            "role cluster-admin may be granted for at most 4h"
        );
        // `admin` is everything: bound to the whole cluster it would be
        // cluster-admin without the four hours.
        assert_eq!(
            refusal("prod", "admin", None, 24 * 30),
            "role admin is granted in a namespace only: name one (cluster-admin is the whole cluster's)"
        );
        // A namespace becomes part of the RoleBinding's path in the cluster.
        for bad in [
            "shop/rolebindings/x?",
            "kube-system?x",
            "Shop",
            "-shop",
            "shop-",
            "",
            &"a".repeat(64),
        ] {
            let said = refusal("prod", "viewer", Some(bad), 1);
            assert!(said.ends_with("is not a namespace name: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"), "{bad}: {said}");
        }
    }

    #[test]
    fn a_grant_within_the_rules_is_issued_by_whoever_asked() {
        let config = Config::from_sources(CONFIG, Vec::new()).unwrap();
        let duration = Duration::from_secs(3600);
        let grant = new_grant(
            &config,
            Principal::person("ana"),
            "prod",
            "viewer",
            None,
            duration,
            "bo",
        )
        .unwrap();
        assert_eq!((grant.role.as_str(), grant.granted_by.as_str()), ("viewer", "bo"));
        assert!(grant.in_effect(Utc::now()));
    }
}
