//! `portcullis grant add|list|revoke`: grants checked as every grant is
//! (`identity::grant`), and bound in the cluster before the command returns.

use super::{new_grant, operator_row, recorded, when, CliError, Owner};
use crate::audit::row::AuditRow;
use crate::config::Config;
use crate::identity::Grant;
use crate::store::Store;
use chrono::Utc;
use clap::Subcommand;

/// `grant …`.
#[derive(Debug, Subcommand)]
pub enum GrantCommand {
    /// Give a role on a cluster, in a namespace or cluster-wide.
    Add {
        /// Whose.
        #[command(flatten)]
        owner: Owner,
        /// Cluster name.
        #[arg(long)]
        cluster: String,
        /// Role name (viewer, developer, debugger, secrets-reader, admin,
        /// cluster-admin, or a custom role).
        #[arg(long)]
        role: String,
        /// Namespace; omit for the whole cluster.
        #[arg(long)]
        namespace: Option<String>,
        /// How long, e.g. `8h`.
        #[arg(long, default_value = "8h")]
        duration: humantime::Duration,
    },
    /// List grants.
    List,
    /// Revoke a grant at once.
    Revoke {
        /// Grant id.
        id: String,
    },
}

/// Run a `grant` command, printing to stdout.
pub fn run(config: &Config, store: &Store, command: GrantCommand) -> Result<(), CliError> {
    match command {
        GrantCommand::Add {
            owner,
            cluster,
            role,
            namespace,
            duration,
        } => {
            // The operator grants it, as the audit records: never a person
            // named on the command line.
            let grant = new_grant(config, owner.principal(), &cluster, &role, namespace, *duration, "cli")?;
            add(config, store, &grant)
        }
        GrantCommand::List => list(config, store),
        GrantCommand::Revoke { id } => revoke(config, store, &id),
    }
}

/// The row of an operator's change to `grant`.
fn grant_row(verb: &str, grant: &Grant) -> AuditRow {
    let mut row = operator_row(verb, "grants", &grant.cluster, grant.namespace.as_deref(), &grant.id);
    row.query = form_urlencoded::Serializer::new(String::new())
        .append_pair("role", &grant.role)
        .append_pair("subject", &grant.subject.to_string())
        .append_pair("until", &grant.expires_at.to_rfc3339())
        .finish();
    row
}

fn add(config: &Config, store: &Store, grant: &Grant) -> Result<(), CliError> {
    recorded(store, grant_row("grant", grant), || store.add_grant(grant), |_, _| {})?;
    let scope = grant
        .namespace
        .as_deref()
        .map_or("the whole cluster".to_string(), |ns| format!("namespace {ns}"));
    println!(
        "grant {}: {} is {} on {} in {} until {}",
        grant.id,
        grant.subject,
        grant.role,
        grant.cluster,
        scope,
        when(&grant.expires_at)
    );
    // Bound before returning, or said to be pending.
    println!("{}", super::cluster::pass_from_cli(config, store, &grant.cluster));
    Ok(())
}

/// Every grant and its state; one in a namespace protected since it was
/// made is `protected`: it applies nowhere and binds nothing.
fn list(config: &Config, store: &Store) -> Result<(), CliError> {
    println!(
        "{:<38} {:<20} {:<12} {:<16} {:<14} {:<20} STATE",
        "ID", "SUBJECT", "CLUSTER", "NAMESPACE", "ROLE", "EXPIRES"
    );
    for g in store.list_grants()? {
        let protected = g
            .namespace
            .as_ref()
            .is_some_and(|ns| config.protected_namespaces.contains(ns));
        let state = if g.revoked_at.is_some() {
            "revoked"
        } else if protected {
            "protected"
        } else if g.in_effect(Utc::now()) {
            "active"
        } else {
            "expired"
        };
        println!(
            "{:<38} {:<20} {:<12} {:<16} {:<14} {:<20} {state}",
            g.id,
            g.subject.to_string(),
            g.cluster,
            g.namespace.as_deref().unwrap_or("*"),
            g.role,
            when(&g.expires_at)
        );
    }
    Ok(())
}

fn revoke(config: &Config, store: &Store, id: &str) -> Result<(), CliError> {
    let grant = store.grant(id)?;
    recorded(store, grant_row("revoke", &grant), || store.revoke_grant(id), |_, _| {})?;
    println!("revoked grant {id}: no longer sent to the cluster");
    println!("{}", super::cluster::pass_from_cli(config, store, &grant.cluster));
    Ok(())
}
