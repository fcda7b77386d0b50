//! Held writes: a write whose caller's policy asks for a person's approval
//! is dry-run, held with a preview, decided by a person, and run once.
//!
//! - [`config`]: `[approvals]` (key file, wait, expiry).
//! - [`seal`]: bodies sealed at rest (ChaCha20-Poly1305), CSRF tokens
//!   signed.
//! - [`preview`] and [`diff`]: the current object and the dry-run result,
//!   Secret values hidden (changed ones marked), and a readable diff.
//! - [`decide`]: who may decide, approve and deny (audited).
//! - [`wait`]: a caller waiting for the decision, and expiry.
//! - [`web`]: `/login`, `/approvals`, `/approvals/<id>` for people.
//! - [`cli`]: `portcullis approvals list|show|approve|deny`.
//!
//! The stage that holds and runs them is `crate::gateway::hold`, on the one
//! request path every door shares.

pub mod cli;
pub mod config;
pub mod decide;
pub mod diff;
pub mod preview;
pub mod seal;
pub mod wait;
pub mod web;

use crate::identity::{Principal, PrincipalKind};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where a held write stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeldState {
    /// Waiting for a person.
    Pending,
    /// Approved; the next call runs it.
    Approved,
    /// Denied.
    Denied,
    /// Nobody decided, or nobody ran it, in time; the body is gone.
    Expired,
    /// A call claimed it and is running it now.
    Executing,
    /// It ran; the outcome is kept.
    Executed,
}

impl HeldState {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            HeldState::Pending => "pending",
            HeldState::Approved => "approved",
            HeldState::Denied => "denied",
            HeldState::Expired => "expired",
            HeldState::Executing => "executing",
            HeldState::Executed => "executed",
        }
    }

    /// Parse the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        [
            HeldState::Pending,
            HeldState::Approved,
            HeldState::Denied,
            HeldState::Expired,
            HeldState::Executing,
            HeldState::Executed,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
    }
}

/// What never changes about a held write (stored as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldRequest {
    /// Cluster name.
    pub cluster: String,
    /// `person:<login>` or `bot:<name>` (an agent's person or bot).
    pub requester: String,
    /// The agent that asked, if one did.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The agent acts for its person (who then decides).
    #[serde(default)]
    pub delegated: bool,
    /// The credential that asked (never decides).
    pub credential_id: String,
    /// The MCP tool, if a tool asked.
    #[serde(default)]
    pub tool: String,
    /// The client's address.
    #[serde(default)]
    pub client: String,
    /// HTTP method.
    pub method: String,
    /// Kubernetes path (raw).
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// The body's media type.
    #[serde(default)]
    pub content_type: String,
    /// Kubernetes verb.
    pub verb: String,
    /// API group (empty for core).
    pub api_group: String,
    /// Plural resource (and `/subresource`).
    pub resource: String,
    /// Namespace (empty for cluster scope).
    pub namespace: String,
    /// Object name (empty for collections).
    pub name: String,
    /// What a person sees before deciding.
    pub preview: preview::Preview,
    /// Sent with the real write so that a changed object answers 409.
    pub precondition: Precondition,
}

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

/// Preconditions taken from the dry run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Precondition {
    /// For apply, update and patch: the object's resourceVersion.
    #[serde(default)]
    pub resource_version: Option<String>,
    /// For delete: the object's uid.
    #[serde(default)]
    pub uid: Option<String>,
}

/// What the write answered when it ran (Secret values hidden).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// HTTP status.
    pub code: u16,
    /// The answer's body as text (cut at 64 KiB).
    pub body: String,
}

/// A held write as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldWrite {
    /// Stable id (UUIDv7), in its URL.
    pub id: String,
    /// The intent's digest: the same first call gets the same held write.
    pub digest: String,
    /// Where it stands.
    pub state: HeldState,
    /// What was asked.
    pub request: HeldRequest,
    /// When held.
    pub created_at: DateTime<Utc>,
    /// When it expires.
    pub expires_at: DateTime<Utc>,
    /// Who decided (login).
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The decider's reason.
    pub decision_reason: Option<String>,
    /// When it ran.
    pub executed_at: Option<DateTime<Utc>>,
    /// What it answered.
    pub outcome: Option<Outcome>,
    /// Its end (denied, expired, run) was told to a caller; the same first
    /// call after that starts a new held write.
    pub answered: bool,
}

impl HeldWrite {
    /// Pending or approved past its expiry.
    pub fn overdue(&self, now: DateTime<Utc>) -> bool {
        matches!(self.state, HeldState::Pending | HeldState::Approved) && self.expires_at <= now
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
    /// Roles that write (an approved access request of one of these lets
    /// an agent's writes through unheld).
    pub writing_roles: std::collections::HashSet<String>,
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
        let writing_roles = crate::gateway::all_roles(config)
            .into_iter()
            .filter(writes)
            .map(|r| r.name)
            .collect();
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
