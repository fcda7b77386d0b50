//! `portcullis admin audit show <id>`, `… alerts`, `… ingest` and
//! `… coverage`: the API server's own audit beside portcullis's rows, the
//! bypass alerts, the API server's log read from a file (for clusters whose
//! audit cannot reach the webhook), and how well both sides matched. Like the rest of `audit`, they open the store directly.

use super::CliError;
use crate::audit::apiserver;
use crate::audit::bypass::ALERT;
use crate::audit::query::Filter;
use crate::audit::row::ChainedRow;
use crate::config::Config;
use crate::store::{ApiserverEvent, Store};
use crate::text::escape_control as esc;
use std::io::Write;
use std::path::Path;

fn io(e: std::io::Error) -> CliError {
    CliError::Message(format!("cannot write the output: {e}"))
}

fn rows(store: &Store, filter: &Filter) -> Result<Vec<ChainedRow>, CliError> {
    let mut audit = crate::audit::open(store).map_err(|e| CliError::Message(e.to_string()))?;
    audit.query(filter).map_err(|e| CliError::Message(e.to_string()))
}

/// `audit show <id>`: portcullis's row(s) of request `id`, and beside them
/// what the API server recorded of it.
pub fn show(store: &Store, id: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let filter = Filter {
        id: Some(id.to_string()),
        discovery: true,
        ..Filter::default()
    };
    let rows = rows(store, &filter)?;
    let events = store
        .apiserver_events(id)
        .map_err(|e| CliError::Message(e.to_string()))?;
    if rows.is_empty() && events.is_empty() {
        return Err(CliError::Message(format!(
            "no audit row or API server event has id {}",
            esc(id)
        )));
    }
    for chained in &rows {
        let row = &chained.row;
        let kind = if row.kind.is_empty() { "request" } else { &row.kind };
        writeln!(out, "portcullis ({kind}):").map_err(io)?;
        writeln!(out, "  who:      {}:{}", esc(&row.principal_kind), esc(&row.login)).map_err(io)?;
        writeln!(out, "  cluster:  {}", esc(&row.cluster)).map_err(io)?;
        writeln!(out, "  request:  {} {}", esc(&row.verb), esc(&row.path)).map_err(io)?;
        writeln!(
            out,
            "  answered: {} {}{}",
            row.code,
            esc(&row.reason),
            refused(&row.refused)
        )
        .map_err(io)?;
        writeln!(
            out,
            "  at:       {} ({} ms)",
            row.started_at.to_rfc3339(),
            row.duration_ms
        )
        .map_err(io)?;
    }
    if rows.is_empty() {
        writeln!(out, "portcullis: no row (a request portcullis never sent)").map_err(io)?;
    }
    if events.is_empty() {
        writeln!(out, "API server: no event (yet)").map_err(io)?;
    }
    for event in &events {
        write_event(event, out)?;
    }
    Ok(())
}

fn refused(word: &str) -> String {
    if word.is_empty() {
        String::new()
    } else {
        format!(" (refused: {})", esc(word))
    }
}

fn write_event(event: &ApiserverEvent, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(out, "API server ({}, {}):", esc(&event.stage), esc(&event.cluster)).map_err(io)?;
    writeln!(out, "  user:         {}", esc(&event.user)).map_err(io)?;
    writeln!(
        out,
        "  impersonated: {} [{}]",
        esc(&event.impersonated_user),
        esc(&event.impersonated_groups.join(", "))
    )
    .map_err(io)?;
    writeln!(out, "  request:      {} {}", esc(&event.verb), esc(&event.request_uri)).map_err(io)?;
    writeln!(out, "  code:         {}", event.code).map_err(io)?;
    writeln!(out, "  decision:     {} ({})", esc(&event.decision), esc(&event.reason)).map_err(io)?;
    writeln!(
        out,
        "  from:         {} ({})",
        esc(&event.source_ips.join(", ")),
        esc(&event.user_agent)
    )
    .map_err(io)?;
    writeln!(out, "  at:           {}", event.stage_at.to_rfc3339()).map_err(io)
}

/// `audit alerts`: the newest `limit` bypass alerts, oldest first.
pub fn alerts(store: &Store, json: bool, limit: usize, out: &mut dyn Write) -> Result<(), CliError> {
    let filter = Filter {
        kind: Some(ALERT.into()),
        limit: Some(limit),
        ..Filter::default()
    };
    let rows = rows(store, &filter)?;
    if limit > 0 && rows.len() == limit {
        eprintln!("the newest {limit} alerts; older ones may exist: --limit for more");
    }
    if json {
        return super::audit::json_lines(out, &rows);
    }
    writeln!(
        out,
        "{:<20} {:<18} {:<38} {:<10} {:<8} {:<40} FROM",
        "TIME", "REASON", "AUDIT ID", "CLUSTER", "VERB", "URI"
    )
    .map_err(io)?;
    for chained in &rows {
        let row = &chained.row;
        writeln!(
            out,
            "{:<20} {:<18} {:<38} {:<10} {:<8} {:<40} {}",
            row.started_at.format("%Y-%m-%dT%H:%M:%SZ"),
            esc(&row.reason),
            esc(&row.id),
            esc(&row.cluster),
            esc(&row.verb),
            esc(&row.path),
            esc(&row.query)
        )
        .map_err(io)?;
    }
    Ok(())
}

/// `audit ingest --cluster C FILE`: the API server's JSON lines log, kept
/// whole or not at all (a line that is not an event refuses the file).
pub fn ingest(config: &Config, store: &Store, cluster: &str, file: &Path, out: &mut dyn Write) -> Result<(), CliError> {
    let Some(cluster_config) = config.clusters.iter().find(|c| c.name == cluster) else {
        return Err(CliError::Message(format!("cluster {} is not configured", esc(cluster))));
    };
    let text =
        std::fs::read_to_string(file).map_err(|e| CliError::Message(format!("cannot read {}: {e}", file.display())))?;
    let events = apiserver::parse_lines(&text)
        .map_err(|e| CliError::Message(format!("{}: nothing ingested: {e}", file.display())))?;
    let ingested = apiserver::ingest(store, cluster_config, events).map_err(|e| CliError::Message(e.to_string()))?;
    writeln!(
        out,
        "{} events kept ({} already there), {} of other users ignored",
        ingested.kept - ingested.duplicates,
        ingested.duplicates,
        ingested.ignored
    )
    .map_err(io)
}

/// `audit coverage --cluster C --since T`: both sides' counts, and what
/// each lacks of the other.
pub fn coverage(
    config: &Config,
    store: &Store,
    cluster: &str,
    since: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if !config.clusters.iter().any(|c| c.name == cluster) {
        return Err(CliError::Message(format!("cluster {} is not configured", esc(cluster))));
    }
    let now = chrono::Utc::now();
    let since = crate::audit::query::parse_time(since, now).map_err(|e| CliError::Message(format!("--since: {e}")))?;
    let grace = chrono::TimeDelta::from_std(config.audit.bypass_grace).unwrap_or(chrono::TimeDelta::MAX);
    let coverage = store
        .apiserver_coverage(cluster, since, now - grace)
        .map_err(|e| CliError::Message(e.to_string()))?;
    if json {
        serde_json::to_writer(&mut *out, &coverage).map_err(|e| CliError::Message(e.to_string()))?;
        return writeln!(out).map_err(io);
    }
    let c = &coverage;
    let text = format!(
        "cluster {cluster} since {since} (grace {grace}):\n\
         API server requests about portcullis: {}\n  matched to portcullis:    {}\n  \
         alerts:                   {}\n  not checked yet:          {}\n\
         portcullis requests sent:             {}\n  without an API server event: {} ({} of them portcullis's own)\n",
        c.apiserver_requests,
        c.matched,
        c.alerts,
        c.unchecked,
        c.portcullis_requests,
        c.missing,
        c.missing_own,
        cluster = esc(cluster),
        since = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        grace = humantime::format_duration(config.audit.bypass_grace),
    );
    out.write_all(text.as_bytes()).map_err(io)?;
    if c.missing > 0 {
        writeln!(
            out,
            "warning: the API server's audit did not arrive for {} requests: is its webhook working?",
            c.missing
        )
        .map_err(io)?;
    }
    Ok(())
}
