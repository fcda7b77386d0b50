//! `portcullis group-rule add|list|remove`: rules mapping a group of the
//! identity provider's groups claim to a role (`crate::signin::groups`).
//! An operator command on the server's store; each change is audited.

use super::{when, CliError};
use crate::config::Config;
use crate::identity::Principal;
use crate::signin::groups::{self, RuleAsk, RuleError};
use crate::store::Store;
use clap::Subcommand;
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
        /// The administrator making the change (recorded in the audit).
        #[arg(long)]
        by: String,
    },
    /// List the rules.
    List,
    /// Remove a rule: the grants it made are revoked at once.
    Remove {
        /// Rule id.
        id: String,
        /// The administrator making the change (recorded in the audit).
        #[arg(long)]
        by: String,
    },
}

/// Run a `group-rule` command, printing to `out`.
pub fn run(config: &Config, store: &Store, command: GroupRuleCommand, out: &mut impl Write) -> Result<(), CliError> {
    match command {
        GroupRuleCommand::Add {
            group,
            cluster,
            role,
            namespace,
            by,
        } => {
            let ask = RuleAsk {
                group,
                cluster,
                namespace,
                role,
            };
            let rule = groups::add_rule(config, store, ask, &admin(store, &by)?).map_err(message)?;
            let scope = rule
                .namespace
                .as_deref()
                .map_or("the whole cluster".into(), |ns| format!("namespace {ns}"));
            writeln!(
                out,
                "group rule {}: people in group {} are {} on {} in {} while signed in",
                rule.id, rule.group, rule.role, rule.cluster, scope
            )
            .map_err(io)
        }
        GroupRuleCommand::List => list(store, out),
        GroupRuleCommand::Remove { id, by } => {
            let (rule, revoked) = groups::remove_rule(store, &id, &admin(store, &by)?).map_err(message)?;
            writeln!(
                out,
                "removed group rule {} (group {}): {} grant(s) revoked",
                rule.id,
                rule.group,
                revoked.len()
            )
            .map_err(io)
        }
    }
}

fn list(store: &Store, out: &mut impl Write) -> Result<(), CliError> {
    writeln!(
        out,
        "{:<38} {:<24} {:<12} {:<16} {:<14} {:<12} CREATED",
        "ID", "GROUP", "CLUSTER", "NAMESPACE", "ROLE", "BY"
    )
    .map_err(io)?;
    for r in store.group_rules()? {
        writeln!(
            out,
            "{:<38} {:<24} {:<12} {:<16} {:<14} {:<12} {}",
            r.id,
            r.group,
            r.cluster,
            r.namespace.as_deref().unwrap_or("*"),
            r.role,
            r.created_by,
            when(&r.created_at)
        )
        .map_err(io)?;
    }
    Ok(())
}

/// Rules change who may do what: only an enabled admin makes them.
fn admin(store: &Store, login: &str) -> Result<Principal, CliError> {
    let person = Principal::person(login);
    if store.is_admin(&person)? {
        Ok(person)
    } else {
        Err(CliError::Message(format!(
            "{login} is not an enabled admin; group rules are changed by admins"
        )))
    }
}

fn message(error: RuleError) -> CliError {
    match error {
        RuleError::Store(e) => CliError::Store(e),
        RuleError::Grant(e) => CliError::Grant(e),
        other => CliError::Message(other.to_string()),
    }
}

fn io(error: std::io::Error) -> CliError {
    CliError::Message(format!("cannot write the answer: {error}"))
}
