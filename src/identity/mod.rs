//! People, bots, credentials, grants and roles, and how a bearer token
//! becomes an [`Identity`] ([`authenticate`]). Below the store: identity
//! imports only `config`; the store implements what [`authenticate`] reads
//! credentials through.
//!
//! A person is impersonated on a cluster as `user:<login>`, a bot as
//! `bot:<name>`. Each grant in effect is sent as its own group
//! (`portcullis:grant:<id>`), so ending a grant ends its access on the next
//! request, before any clean-up in the cluster.

pub mod authenticate;
pub mod clock;
pub mod credential;
pub mod grant;
pub mod roles;

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::fmt;

/// Who a credential belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalKind {
    /// A human.
    Person,
    /// A CI job or other automation.
    Bot,
}

impl PrincipalKind {
    /// `person` or `bot`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::Person => "person",
            PrincipalKind::Bot => "bot",
        }
    }

    /// Parse the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "person" => Some(PrincipalKind::Person),
            "bot" => Some(PrincipalKind::Bot),
            _ => None,
        }
    }
}

/// A person or a bot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Principal {
    /// Person or bot.
    pub kind: PrincipalKind,
    /// Login (person) or name (bot).
    pub name: String,
}

impl Principal {
    /// A person.
    pub fn person(login: impl Into<String>) -> Self {
        Principal {
            kind: PrincipalKind::Person,
            name: login.into(),
        }
    }

    /// A bot.
    pub fn bot(name: impl Into<String>) -> Self {
        Principal {
            kind: PrincipalKind::Bot,
            name: name.into(),
        }
    }

    /// The user name the cluster sees.
    pub fn kube_user(&self) -> String {
        // `concat`, not `format!`: this runs on every request.
        let kind = match self.kind {
            PrincipalKind::Person => "user:",
            PrincipalKind::Bot => "bot:",
        };
        [kind, &self.name].concat()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.name)
    }
}

/// A credential's record (never the token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Credential {
    /// Stable id, sent to the cluster as an extra and written to the audit.
    pub id: String,
    /// Owner.
    pub principal: Principal,
    /// Owner's label for it (`laptop`, `ci`).
    pub name: String,
    /// `pcl_` and the first characters, for lists.
    pub display_prefix: String,
    /// When it was issued.
    pub created_at: DateTime<Utc>,
    /// When it stops working.
    pub expires_at: Option<DateTime<Utc>>,
    /// Last time it authenticated a request (updated at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A role for a subject on a cluster, over a namespace or the whole cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// Stable id; the cluster sees `portcullis:grant:<id>`.
    pub id: String,
    /// Who it is for.
    pub subject: Principal,
    /// Cluster name.
    pub cluster: String,
    /// `None` for the whole cluster.
    pub namespace: Option<String>,
    /// Role name.
    pub role: String,
    /// When it ends.
    pub expires_at: DateTime<Utc>,
    /// Who granted it.
    pub granted_by: String,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl Grant {
    /// The group the cluster binds to the grant's role.
    pub fn group(&self) -> String {
        ["portcullis:grant:", &self.id].concat()
    }

    /// Is it in effect at `now`?
    pub fn in_effect(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at > now
    }
}

/// An AI agent: acts for a person (delegated, with a chosen subset of the
/// person's grants) or for a bot (with the bot's grants).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Agent {
    /// Stable id; sent to the cluster as the `portcullis.dev/agent-session`
    /// extra and written to the audit.
    pub id: String,
    /// The owner's label for it.
    pub name: String,
    /// The person or bot it acts for (and is impersonated as).
    pub principal: Principal,
    /// Its writes wait for a person's approval.
    pub writes_need_approval: bool,
    /// For a delegated agent, the only grants it is sent; `None` for a bot's
    /// agent (all of the bot's grants).
    pub grant_ids: Option<Vec<String>>,
    /// Disabled agents' credentials stop working.
    pub disabled: bool,
}

/// Where a credential may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Audience {
    /// `/mcp` only: an OAuth access token of an agent session (RFC 8707:
    /// its resource is portcullis's MCP server, nothing else).
    Mcp,
}

impl Audience {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            Audience::Mcp => "mcp",
        }
    }

    /// Parse the stored form.
    pub fn parse(s: &str) -> Option<Audience> {
        (s == "mcp").then_some(Audience::Mcp)
    }
}

/// How a credential came to be, when it was not simply handed over: kept
/// with the credential, and named in the audit row of every request it makes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Origin {
    /// Where it is accepted; `None`: wherever its owner may go.
    pub audience: Option<Audience>,
    /// What it was issued through, in words for the audit
    /// (`oauth client=<id>`, `ci rule=<id> sub=… repository=… run_id=…`).
    pub via: String,
}

/// Who a request is from: what `authenticate` proves and later stages use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The person or bot (for an agent, the one it acts for).
    pub principal: Principal,
    /// The credential that authenticated the request.
    pub credential_id: String,
    /// Set when the credential is an agent's.
    pub agent: Option<std::sync::Arc<Agent>>,
    /// Set when the credential was issued with an [`Origin`] (an OAuth
    /// access token, a CI job's exchanged token).
    pub origin: Option<std::sync::Arc<Origin>>,
}

impl Identity {
    /// Is this an AI agent (which never sees Secret values)?
    pub fn is_agent(&self) -> bool {
        self.agent.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_sees_a_person_as_user_and_a_bot_as_bot() {
        assert_eq!(Principal::person("ana").kube_user(), "user:ana");
        assert_eq!(Principal::bot("deploy").kube_user(), "bot:deploy");
    }
}
