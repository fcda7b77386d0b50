//! `portcullis group-rule add|list|remove`: rules mapping a group of the
//! identity provider's groups claim to a role (`crate::signin::groups`).
//! A person command: the signed-in admin changes them through the server's
//! API ([`run`]), which decides and audits. `portcullis admin group-rule`
//! is the operator's form on the server's store, for bootstrapping
//! ([`run_operator`]), recorded as `cli` as the other operator commands.

use super::access::io;
use super::remote::Remote;
use super::{when, CliError};
use crate::config::Config;
use crate::signin::groups::{self, Actor, RuleAsk, RuleError};
use crate::store::{GroupRule, Store};
use crate::text::escape_control as esc;
use clap::Subcommand;
use serde_json::json;
use std::io::Write;

/// `group-rule …`.
#[derive(Debug, Subcommand)]
pub enum GroupRuleCommand {
    /// People signed in with `--group` hold `--role` on `--cluster` (in
    /// `--namespace`, or cluster-wide) until their sign-in session ends.
    Add {
        /// The group, exactly as the identity provider's groups claim names it.
        #[arg(long)]
        group: String,
        /// Cluster name.
        #[arg(long)]
        cluster: String,
        /// Role name.
        #[arg(long)]
        role: String,
        /// Namespace; omit for the whole cluster.
        #[arg(long)]
        namespace: Option<String>,
    },
    /// List the rules.
    List,
    /// Remove a rule: the grants it made are revoked at once.
    Remove {
        /// Rule id.
        id: String,
    },
}

/// Run a `group-rule` command as the signed-in person, against `remote`.
pub async fn run(remote: &Remote, command: GroupRuleCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        GroupRuleCommand::Add {
            group,
            cluster,
            role,
            namespace,
        } => {
            let body = json!({"group": group, "cluster": cluster, "role": role, "namespace": namespace});
            let answer = remote.post("group-rules", body).await?;
            added(&rule_of(&answer["rule"])?, out)
        }
        GroupRuleCommand::List => {
            let answer = remote.get("group-rules").await?;
            let rules: Vec<GroupRule> = serde_json::from_value(answer["rules"].clone()).map_err(unreadable)?;
            list(&rules, out)
        }
        GroupRuleCommand::Remove { id } => {
            let answer = remote
                .post(
                    &format!("group-rules/{}/remove", super::remote::segment(&id)?),
                    json!({}),
                )
                .await?;
            let revoked = answer["revoked_grants"].as_u64().unwrap_or_default();
            removed(&rule_of(&answer["rule"])?, revoked, out)
        }
    }
}

/// Run `admin group-rule` on the server's store, as the operator.
pub fn run_operator(
    config: &Config,
    store: &Store,
    command: GroupRuleCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        GroupRuleCommand::Add {
            group,
            cluster,
            role,
            namespace,
        } => {
            let ask = RuleAsk {
                group,
                cluster,
                namespace,
                role,
            };
            added(
                &groups::add_rule(config, store, ask, &Actor::Operator).map_err(message)?,
                out,
            )
        }
        GroupRuleCommand::List => list(&store.group_rules()?, out),
        GroupRuleCommand::Remove { id } => {
            let (rule, revoked) = groups::remove_rule(store, &id, &Actor::Operator).map_err(message)?;
            removed(&rule, revoked.len() as u64, out)
        }
    }
}

fn added(rule: &GroupRule, out: &mut dyn Write) -> Result<(), CliError> {
    let scope = rule
        .namespace
        .as_deref()
        .map_or("the whole cluster".into(), |ns| format!("namespace {}", esc(ns)));
    writeln!(
        out,
        "group rule {}: people in group {} are {} on {} in {} while signed in",
        esc(&rule.id),
        esc(&rule.group),
        esc(&rule.role),
        esc(&rule.cluster),
        scope
    )
    .map_err(io)
}

fn removed(rule: &GroupRule, revoked: u64, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "removed group rule {} (group {}): {revoked} grant(s) revoked",
        esc(&rule.id),
        esc(&rule.group)
    )
    .map_err(io)
}

fn list(rules: &[GroupRule], out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "{:<38} {:<24} {:<12} {:<16} {:<14} {:<12} CREATED",
        "ID", "GROUP", "CLUSTER", "NAMESPACE", "ROLE", "BY"
    )
    .map_err(io)?;
    for r in rules {
        writeln!(
            out,
            "{:<38} {:<24} {:<12} {:<16} {:<14} {:<12} {}",
            esc(&r.id),
            esc(&r.group),
            esc(&r.cluster),
            esc(r.namespace.as_deref().unwrap_or("*")),
            esc(&r.role),
            esc(&r.created_by),
            when(&r.created_at)
        )
        .map_err(io)?;
    }
    Ok(())
}

fn rule_of(value: &serde_json::Value) -> Result<GroupRule, CliError> {
    serde_json::from_value(value.clone()).map_err(unreadable)
}

fn unreadable(error: serde_json::Error) -> CliError {
    CliError::Message(format!("the server's answer is not a group rule: {error}"))
}

fn message(error: RuleError) -> CliError {
    match error {
        RuleError::Store(e) => CliError::Store(e),
        RuleError::Grant(e) => CliError::Grant(e),
        other => CliError::Message(other.to_string()),
    }
}
