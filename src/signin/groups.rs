//! Groups from the identity provider: rules map a group of the groups claim
//! to a role on a cluster or namespace. A person signed in with the group
//! holds one grant per rule ([`apply`], at every sign-in), for all their
//! credentials, lasting until the sign-in session ends (or the role's
//! longest grant, if shorter); signing in without the group revokes it.
//! The grants are real grant rows (`granted_by = rule:<id>`), so the
//! policy stage sends them and the reconciler binds them like any other,
//! and an agent gets one only if its person chooses it.
//!
//! Rules are added and removed by administrators ([`add_rule`],
//! [`remove_rule`]: the person API as the signed-in admin, or the operator
//! on the server, [`Actor`]); every change, every sign-in's applying of
//! the rules, and every grant a rule makes, extends or ends, is an audit
//! row (resources `grouprules` and `grants` of `portcullis.dev`), the
//! intent on record before the change ([`crate::audit::begin_event`]).

use crate::audit::row::AuditRow;
use crate::audit::AuditError;
use crate::config::Config;
use crate::identity::grant::{new_grant, GrantError};
use crate::identity::{Grant, Principal};
use crate::store::{GroupRule, RuleGrantChange, Store, StoreError};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// What a new rule says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleAsk {
    /// The group, as the groups claim names it.
    pub group: String,
    /// Cluster name.
    pub cluster: String,
    /// `None` for the whole cluster.
    pub namespace: Option<String>,
    /// Role name.
    pub role: String,
}

/// Who changes a rule, as the audit records them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// An admin, authenticated by the server (the person API).
    Person(Principal),
    /// The operator on the server, through the store (`portcullis admin
    /// group-rule`), recorded as `cli` as the other operator commands are.
    Operator,
}

impl Actor {
    /// The kind the audit row records.
    fn kind(&self) -> &str {
        match self {
            Actor::Person(p) => p.kind.as_str(),
            Actor::Operator => "operator",
        }
    }

    /// The name the audit row and the rule record.
    pub fn name(&self) -> &str {
        match self {
            Actor::Person(p) => &p.name,
            Actor::Operator => "cli",
        }
    }
}

/// Why a rule could not be changed, or a sign-in's grants brought in step.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// The group name is unusable.
    #[error("invalid group {0:?}: give the group as the groups claim names it (1-256 printable characters)")]
    InvalidGroup(String),
    /// The role, cluster or namespace cannot be granted.
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// The store failed, or has no such rule.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The change could not be recorded in the audit.
    #[error(transparent)]
    Audit(#[from] AuditError),
}

/// Add a rule, checked as a grant is (the role and cluster exist, the
/// namespace is not protected), by `actor`; audited.
pub fn add_rule(config: &Config, store: &Store, ask: RuleAsk, actor: &Actor) -> Result<GroupRule, RuleError> {
    let group = ask.group.trim();
    if group.is_empty() || group.len() > 256 || group.chars().any(char::is_control) {
        return Err(RuleError::InvalidGroup(ask.group));
    }
    // The same checks as any grant; the duration is judged at each sign-in.
    new_grant(
        config,
        Principal::person(actor.name()),
        &ask.cluster,
        &ask.role,
        ask.namespace.clone(),
        Duration::ZERO,
        "",
    )?;
    let rule = GroupRule {
        id: uuid::Uuid::now_v7().to_string(),
        group: group.to_string(),
        cluster: ask.cluster,
        namespace: ask.namespace,
        role: ask.role,
        created_by: actor.name().to_string(),
        created_at: Utc::now(),
    };
    // The rule's row is on record before the rule is (see
    // `crate::audit::Recorded`).
    let recorded = crate::audit::begin_event(store, rule_row("create", &rule, actor))?;
    if let Err(error) = store.add_group_rule(&rule) {
        return Err(recorded.store_failed(error).into());
    }
    recorded.done(rule_row("create", &rule, actor), Vec::new())?;
    Ok(rule)
}

/// Remove rule `id` and revoke its grants at once, by `actor`; audited.
/// Returns the rule and the grants revoked.
pub fn remove_rule(store: &Store, id: &str, actor: &Actor) -> Result<(GroupRule, Vec<Grant>), RuleError> {
    let Some(known) = store.group_rules()?.into_iter().find(|rule| rule.id == id) else {
        return Err(StoreError::NotFound(format!("group rule {id}")).into());
    };
    // The removal's row is on record before the removal is (see
    // `crate::audit::Recorded`); the grants it revoked follow in its commit.
    let recorded = crate::audit::begin_event(store, rule_row("delete", &known, actor))?;
    let (rule, revoked) = match store.remove_group_rule(id) {
        Ok(removed) => removed,
        Err(error) => return Err(recorded.store_failed(error).into()),
    };
    let grants = revoked
        .iter()
        .map(|grant| grant_row("revoke", grant, &rule, actor))
        .collect();
    recorded.done(rule_row("delete", &rule, actor), grants)?;
    Ok((rule, revoked))
}

/// Bring the rule grants of `login` in step with the `groups` they signed
/// in with, for a session ending at `session_ends`; audited as the person's
/// own acts. A rule that can no longer be granted (its cluster or role
/// gone from the configuration) is treated as not matching.
pub fn apply(
    config: &Config,
    store: &Store,
    login: &str,
    groups: &[String],
    session_ends: DateTime<Utc>,
) -> Result<Vec<RuleGrantChange>, RuleError> {
    let person = Principal::person(login);
    let actor = Actor::Person(person.clone());
    let rules = store.group_rules()?;
    // Without a rule there is no rule grant to give or take (removing a
    // rule revokes its grants): nothing to do or record.
    if rules.is_empty() {
        return Ok(Vec::new());
    }
    let wanted: Vec<(String, Grant)> = rules
        .iter()
        .filter(|rule| groups.contains(&rule.group))
        .filter_map(|rule| wanted_grant(config, &person, rule, session_ends))
        .collect();
    // The grants' rows are on record before the grants are (see
    // `crate::audit::Recorded`): this sign-in's applying of the rules
    // first, then its row and one for each grant given, extended or taken.
    let applied = || event("apply", "grouprules", &actor, "", None, login);
    let recorded = crate::audit::begin_event(store, applied())?;
    let changes = match store.sync_rule_grants(&person, &wanted) {
        Ok(changes) => changes,
        Err(error) => return Err(recorded.store_failed(error).into()),
    };
    let rows = changes
        .iter()
        .filter_map(|change| {
            let (verb, grant) = match change {
                RuleGrantChange::Granted(g) => ("grant", g),
                RuleGrantChange::Extended(g) => ("extend", g),
                RuleGrantChange::Revoked(g) => ("revoke", g),
            };
            let rule_id = grant.granted_by.strip_prefix("rule:").unwrap_or_default();
            let rule = rules.iter().find(|r| r.id == rule_id)?;
            Some(grant_row(verb, grant, rule, &actor))
        })
        .collect();
    recorded.done(applied(), rows)?;
    Ok(changes)
}

/// The grant `rule` would give `person` until `session_ends` (or the
/// role's longest grant, if sooner); `None` when it can no longer be made.
fn wanted_grant(
    config: &Config,
    person: &Principal,
    rule: &GroupRule,
    session_ends: DateTime<Utc>,
) -> Option<(String, Grant)> {
    let left = (session_ends - Utc::now()).to_std().unwrap_or(Duration::ZERO);
    let max = crate::identity::roles::all(config)
        .into_iter()
        .find(|r| r.name == rule.role)
        .and_then(|r| r.max_duration);
    let duration = max.map_or(left, |max| left.min(max));
    let by = rule.granted_by();
    match new_grant(
        config,
        person.clone(),
        &rule.cluster,
        &rule.role,
        rule.namespace.clone(),
        duration,
        &by,
    ) {
        Ok(grant) => Some((rule.id.clone(), grant)),
        Err(error) => {
            tracing::warn!(rule = %rule.id, group = %rule.group, %error, "group rule cannot be granted: skipped");
            None
        }
    }
}

fn rule_row(verb: &str, rule: &GroupRule, actor: &Actor) -> AuditRow {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("group", &rule.group).append_pair("role", &rule.role);
    let mut row = event(
        verb,
        "grouprules",
        actor,
        &rule.cluster,
        rule.namespace.as_deref(),
        &rule.id,
    );
    row.query = query.finish();
    row
}

/// A rule grant's row: the rule and group it came from, its subject and
/// its end in the query.
fn grant_row(verb: &str, grant: &Grant, rule: &GroupRule, actor: &Actor) -> AuditRow {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query
        .append_pair("rule", &rule.id)
        .append_pair("group", &rule.group)
        .append_pair("role", &grant.role)
        .append_pair("subject", &grant.subject.to_string())
        .append_pair("until", &grant.expires_at.to_rfc3339());
    let mut row = event(
        verb,
        "grants",
        actor,
        &grant.cluster,
        grant.namespace.as_deref(),
        &grant.id,
    );
    row.query = query.finish();
    row
}

/// A row on a resource of portcullis's own; every one changes who may do
/// what, so it is on record as a write.
pub(crate) fn event(
    verb: &str,
    resource: &str,
    actor: &Actor,
    cluster: &str,
    namespace: Option<&str>,
    name: &str,
) -> AuditRow {
    let now = Utc::now();
    let mut row = AuditRow::new(crate::audit::id::new(), now);
    row.cluster = cluster.into();
    row.principal_kind = actor.kind().into();
    row.login = actor.name().into();
    row.path = format!("/{resource}/{name}");
    row.verb = verb.into();
    row.api_group = "portcullis.dev".into();
    row.api_version = "v1".into();
    row.resource = resource.into();
    row.namespace = namespace.unwrap_or_default().into();
    row.name = name.into();
    row.code = if verb == "create" || verb == "grant" { 201 } else { 200 };
    row.write = true;
    row.finish(now);
    row
}
