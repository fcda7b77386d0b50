//! `portcullis cluster status`, and the pass the CLI runs itself after a
//! grant changes (`grant add`, `grant revoke`, `access approve`): the CLI is
//! a separate process from the server, but it has the configuration, so it
//! binds the grant before returning, or says that binding is pending.

use super::CliError;
use crate::audit::forwarded::Recorder;
use crate::config::Config;
use crate::identity::clock::GrantClock;
use crate::reconcile::cluster::ClusterClient;
use crate::reconcile::instance::Instance;
use crate::reconcile::pass::run_pass;
use crate::reconcile::status::ClusterStatus;
use crate::store::Store;
use chrono::{DateTime, Utc};
use clap::Subcommand;
use std::io::Write;

/// `cluster …`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// This installation's instance id, then per cluster: reachable or not
    /// and since when, the last reconcile and its error, and how many roles
    /// and bindings are in step.
    Status,
}

/// Run a `cluster` command.
pub fn run(config: &Config, store: &Store, command: ClusterCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        ClusterCommand::Status => print_status(config, store, out),
    }
}

fn print_status(config: &Config, store: &Store, out: &mut dyn Write) -> Result<(), CliError> {
    let io = |e: std::io::Error| CliError::Message(e.to_string());
    let instance = Instance::resolve(config, store).map_err(|e| CliError::Message(e.to_string()))?;
    let source = if config.reconcile.instance.is_some() {
        "[reconcile] instance"
    } else {
        "made by the store"
    };
    writeln!(out, "instance {instance} ({source})").map_err(io)?;
    writeln!(
        out,
        "{:<16} {:<11} {:<21} {:<21} {:<7} {:<9} {:<7} ERROR",
        "CLUSTER", "REACHABLE", "SINCE", "LAST RECONCILE", "ROLES", "BINDINGS", "REMOVED"
    )
    .map_err(io)?;
    for cluster in &config.clusters {
        let status = store.cluster_status(&cluster.name)?.unwrap_or_default();
        writeln!(out, "{}", status_line(&cluster.name, &status)).map_err(io)?;
    }
    Ok(())
}

/// One line of `cluster status`.
fn status_line(name: &str, s: &ClusterStatus) -> String {
    let reachable = match s.reachable {
        None => "unknown",
        Some(true) => "yes",
        Some(false) => "no",
    };
    let when =
        |t: &Option<DateTime<Utc>>| t.map_or("never".to_string(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    let roles = format!("{}/{}", s.roles_in_step, s.roles_wanted);
    let bindings = format!("{}/{}", s.bindings_in_step, s.bindings_wanted);
    let error = s.last_error.as_deref().unwrap_or("-");
    format!(
        "{name:<16} {reachable:<11} {:<21} {:<21} {roles:<7} {bindings:<9} {:<7} {error}",
        when(&s.since),
        when(&s.last_reconcile),
        s.removed
    )
}

/// Run one pass of `cluster` from the CLI and say what became of the
/// bindings: in step, or pending (the server's reconciler will retry).
/// Blocking, with a runtime of its own: never call it from async code (a
/// server uses [`crate::reconcile::Reconciler::pass_now`] or `trigger`).
pub fn pass_from_cli(config: &Config, store: &Store, cluster: &str) -> String {
    let Some(cluster_config) = config.clusters.iter().find(|c| c.name == cluster) else {
        return format!("cluster {cluster} is not configured: nothing bound");
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return format!("binding pending: cannot start a runtime: {e}"),
    };
    // kube-rs's client spawns its buffer task: build it inside the runtime.
    let client = match runtime.block_on(async { ClusterClient::new(cluster_config, Recorder::Store(store.clone())) }) {
        Ok(client) => client,
        Err(e) => return format!("binding pending: {e}"),
    };
    let instance = match Instance::resolve(config, store) {
        Ok(instance) => instance,
        Err(e) => return format!("binding pending: {e}"),
    };
    let roles = crate::identity::roles::all(config);
    let wanted = (roles.as_slice(), config.protected_namespaces.as_slice());
    let report = runtime.block_on(run_pass(&client, store, wanted, &instance, &GrantClock::default()));
    let outcome = &report.outcome;
    if outcome.ok() {
        format!(
            "cluster {cluster} in step: {} roles and {} bindings ({} applied, {} removed)",
            outcome.roles_in_step, outcome.bindings_in_step, outcome.applied, outcome.removed
        )
    } else if !outcome.reachable {
        format!(
            "binding pending: cluster {cluster} is unreachable ({}); the server's reconciler will bind it",
            outcome.errors.join("; ")
        )
    } else {
        format!(
            "binding pending on cluster {cluster}: {}; the server's reconciler retries",
            outcome.errors.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_says_reachability_counts_and_the_error() {
        let at = "2026-01-02T03:04:05Z".parse::<DateTime<Utc>>().unwrap();
        let status = ClusterStatus {
            cluster: "prod".into(),
            reachable: Some(false),
            since: Some(at),
            last_reconcile: Some(at),
            last_error: Some("connection refused".into()),
            roles_wanted: 6,
            roles_in_step: 6,
            bindings_wanted: 3,
            bindings_in_step: 2,
            ..Default::default()
        };
        let line = status_line("prod", &status);
        assert!(line.starts_with("prod "), "{line}");
        for part in [" no ", "2026-01-02T03:04:05Z", " 6/6 ", " 2/3 ", "connection refused"] {
            assert!(line.contains(part), "{part:?} in {line}");
        }
        assert!(status_line("new", &ClusterStatus::default()).contains("unknown"));
    }
}
