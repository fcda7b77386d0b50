//! Held writes: a write whose caller's policy asks for a person's approval
//! is dry-run, held with a preview, decided by a person, and run once.
//!
//! - `[approvals]` (key file, wait, expiry) is read by `crate::config`.
//! - [`seal`]: bodies sealed at rest (ChaCha20-Poly1305), CSRF tokens
//!   signed.
//! - [`preview`] and [`diff`]: the current object and the dry-run result,
//!   Secret values hidden (changed ones marked), and a readable diff.
//! - [`decide`]: who may decide, approve and deny (audited).
//! - [`wait`]: a caller waiting for the decision, and expiry.
//! - The pages for people (`/login`, `/approvals`, `/approvals/<id>`) are
//!   a door, `crate::doors::web`, built on [`decide`] and [`preview`].
//! - `portcullis approvals list|show|approve|deny` is `crate::cli::approvals`,
//!   through the person API (`crate::doors::api`); [`text`] is what it shows.
//!
//! The stage that holds and runs them is `crate::gateway::hold`, on the one
//! request path every door shares.

pub mod decide;
pub mod diff;
pub mod preview;
pub mod seal;
pub mod text;
pub mod wait;

use crate::identity::{Principal, PrincipalKind};
use chrono::{DateTime, Utc};

/// A held write is what the store keeps of it.
pub use crate::store::{HeldRequest, HeldState, HeldWrite, Outcome, Precondition};

// The rows are the store's; what they mean is decided here.
impl HeldRequest {
    /// The requester as a principal.
    pub fn principal(&self) -> Option<Principal> {
        let (kind, name) = self.requester.split_once(':')?;
        Some(Principal {
            kind: PrincipalKind::parse(kind)?,
            name: name.to_string(),
        })
    }

    /// `apply configmaps/flags in shop (sim)`, for messages and pages.
    pub fn summary(&self) -> String {
        let verb = if self.content_type.starts_with("application/apply-patch") {
            "apply"
        } else {
            self.verb.as_str()
        };
        let what = match (self.api_group.is_empty(), self.name.is_empty()) {
            (true, true) => self.resource.clone(),
            (true, false) => format!("{}/{}", self.resource, self.name),
            (false, true) => format!("{}.{}", self.resource, self.api_group),
            (false, false) => format!("{}.{}/{}", self.resource, self.api_group, self.name),
        };
        let place = if self.namespace.is_empty() {
            String::new()
        } else {
            format!(" in {}", self.namespace)
        };
        format!("{verb} {what}{place} ({})", self.cluster)
    }
}

/// Longer than any run of an approved write: it sends at most two
/// requests (a dry run tried again, then the write), each within the
/// request timeout (a minute by default, at most
/// [`crate::config::MAX_REQUEST_TIMEOUT`]), and commits its intent
/// between. One still executing this long after its expiry, the latest it
/// could be claimed, was stranded by a process that ended mid-run.
pub const RUN_BOUND: chrono::TimeDelta = chrono::TimeDelta::minutes(15);

impl HeldWrite {
    /// Pending or approved past its expiry.
    pub fn overdue(&self, now: DateTime<Utc>) -> bool {
        matches!(self.state, HeldState::Pending | HeldState::Approved) && self.expires_at <= now
    }

    /// Executing past its expiry and [`RUN_BOUND`]: no run is left to
    /// finish it.
    pub fn stranded(&self, now: DateTime<Utc>) -> bool {
        self.state == HeldState::Executing && self.expires_at + RUN_BOUND <= now
    }
}

/// The approval page of held write `id` under `public_url`.
pub fn approval_url(public_url: &str, id: &str) -> String {
    format!("{}/approvals/{id}", public_url.trim_end_matches('/'))
}

/// A time as RFC 3339 UTC with seconds (`2026-07-28T10:00:00Z`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// What the gateway and the web pages share about approvals, built once.
#[derive(Debug)]
pub struct Approvals {
    /// `None` when `[approvals] key_file` is unset: nothing can be held.
    pub key: Option<std::sync::Arc<seal::Key>>,
    /// Where held writes live.
    pub store: crate::store::Store,
    /// How long a repeated call waits.
    pub wait: std::time::Duration,
    /// How long a held write lives.
    pub expiry: std::time::Duration,
    /// For links to the approval pages.
    pub public_url: String,
    /// Roles that write, by name (an approved access request of one of
    /// these lets through unheld the agent's writes that the role allows).
    pub writing_roles: std::sync::Arc<std::collections::HashMap<String, crate::identity::roles::Role>>,
}

impl Approvals {
    /// Load the key (a configured key that cannot be read refuses to start).
    pub fn new(config: &crate::config::Config, store: crate::store::Store) -> Result<Approvals, seal::SealError> {
        let key = config
            .approvals
            .key_file
            .as_deref()
            .map(seal::Key::load)
            .transpose()?
            .map(std::sync::Arc::new);
        if let (Some(key), Some(file)) = (&key, &config.approvals.key_file) {
            same_key_as_the_store(key, file, &store)?;
        }
        let writing_roles = std::sync::Arc::new(
            crate::identity::roles::all(config)
                .into_iter()
                .filter(writes)
                .map(|r| (r.name.clone(), r))
                .collect(),
        );
        Ok(Approvals {
            key,
            store,
            wait: config.approvals.wait,
            expiry: config.approvals.expiry,
            public_url: config.public_url.clone(),
            writing_roles,
        })
    }
}

/// Is `key` (read from `file`) the key the store was first started with?
/// Records its fingerprint when it is the first: replicas sharing a store
/// must share the key, or one could not open what another sealed, nor
/// read another's sign-in cookies.
fn same_key_as_the_store(
    key: &seal::Key,
    file: &std::path::Path,
    store: &crate::store::Store,
) -> Result<(), seal::SealError> {
    let recorded = store
        .approvals_key_fingerprint(key.fingerprint())
        .map_err(|e| seal::SealError::Store(e.to_string()))?;
    if recorded == key.fingerprint() {
        Ok(())
    } else {
        Err(seal::SealError::OtherKey(file.display().to_string()))
    }
}

/// Does the role allow writing anything other than exec, attach and
/// port-forward (which are never held)?
fn writes(role: &crate::identity::roles::Role) -> bool {
    const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection", "*"];
    const STREAMS: &[&str] = &["pods/exec", "pods/attach", "pods/portforward"];
    role.rules.iter().any(|rule| {
        let list = |field: &str| -> Vec<String> {
            rule.get(field)
                .and_then(serde_json::Value::as_array)
                .map(|v| v.iter().filter_map(|s| s.as_str().map(String::from)).collect())
                .unwrap_or_default()
        };
        list("verbs").iter().any(|v| WRITE_VERBS.contains(&v.as_str()))
            && list("resources").iter().any(|r| !STREAMS.contains(&r.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_other_than_the_one_the_store_was_first_started_with_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("p.db")).unwrap();
        let file = std::path::Path::new("/etc/portcullis/approvals.key");
        let first = seal::Key::from_bytes(&[1; 32]).unwrap();
        let other = seal::Key::from_bytes(&[2; 32]).unwrap();
        same_key_as_the_store(&first, file, &store).unwrap();
        same_key_as_the_store(&first, file, &store).expect("the same key starts again");
        let refused = same_key_as_the_store(&other, file, &store).unwrap_err();
        assert!(matches!(refused, seal::SealError::OtherKey(_)), "{refused:?}");
        assert!(
            refused
                .to_string()
                .starts_with("[approvals] key_file /etc/portcullis/approvals.key is not"),
            "{refused}"
        );
        same_key_as_the_store(&first, file, &store).expect("the refused key recorded nothing");
    }
}
