//! `portcullis audit [filters] [--json]` and `portcullis audit verify`.
//!
//! Both read the store through their own connection, so they work while the
//! server runs.

use super::CliError;
use crate::audit::query::{parse_time, Filter, Outcome};
use crate::audit::row::ChainedRow;
use crate::audit::store::verify;
use crate::config::Config;
use crate::store::Store;
use crate::text::escape_control;
use clap::{Args, Subcommand};
use std::io::Write;

/// `audit …`: query rows (a table, or JSON lines with `--json`), or verify
/// the hash chain.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditCommand {
    /// Verify instead of querying.
    #[command(subcommand)]
    pub action: Option<Box<AuditAction>>,
    /// Which rows.
    #[command(flatten)]
    pub filters: FilterArgs,
    /// One JSON object a line instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `audit verify`, `show`, `alerts`, `ingest`, `coverage`.
#[derive(Debug, Clone, Subcommand)]
pub enum AuditAction {
    /// Walk the hash chain and name the first row removed, inserted or
    /// edited; exits non-zero if there is one.
    Verify,
    /// One request by audit id: portcullis's row, and beside it the API
    /// server's stages, response code, impersonated user and groups, and
    /// its authorization decision and reason.
    Show {
        /// The audit id.
        id: String,
    },
    /// The bypass alerts: requests the API server saw made as portcullis
    /// that portcullis never sent.
    Alerts {
        /// One JSON object a line instead of a table.
        #[arg(long)]
        json: bool,
        /// Only the newest N alerts (listed oldest first).
        #[arg(long, default_value_t = DEFAULT_LIMIT)]
        limit: usize,
    },
    /// Read a cluster's API server audit log (JSON lines) into the store,
    /// as its audit webhook would deliver it.
    Ingest {
        /// The cluster whose API server wrote the log.
        #[arg(long)]
        cluster: String,
        /// The log file.
        file: std::path::PathBuf,
    },
    /// How many of a cluster's API server events matched portcullis's
    /// requests, how many on either side have no match (a request
    /// portcullis sent whose event never came: the webhook is broken), and
    /// how many were alerts.
    Coverage {
        /// The cluster.
        #[arg(long)]
        cluster: String,
        /// Since a time (RFC 3339) or a duration ago (`1h`, `7d`).
        #[arg(long, default_value = "1h")]
        since: String,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// The filters, as flags.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Rows since a time (RFC 3339) or a duration ago (`1h`, `7d`).
    #[arg(long)]
    pub since: Option<String>,
    /// Rows before a time (RFC 3339) or a duration ago.
    #[arg(long)]
    pub until: Option<String>,
    /// A person's login or a bot's name.
    #[arg(long)]
    pub login: Option<String>,
    /// A credential id, or a rejected token's prefix.
    #[arg(long)]
    pub credential: Option<String>,
    /// Cluster name.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Kubernetes verb.
    #[arg(long)]
    pub verb: Option<String>,
    /// Resource, optionally with a subresource (`pods/exec`).
    #[arg(long)]
    pub resource: Option<String>,
    /// allowed, denied (by portcullis or the cluster), refused (by
    /// portcullis), error or write.
    #[arg(long, value_enum)]
    pub outcome: Option<Outcome>,
    /// Agent session.
    #[arg(long)]
    pub session: Option<String>,
    /// MCP tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// One audit id (the API server's audit event id too).
    #[arg(long)]
    pub id: Option<String>,
    /// Include discovery requests.
    #[arg(long)]
    pub discovery: bool,
    /// Only the newest N rows (listed oldest first). A store holds
    /// months of rows: all of them at once would fill the memory of the
    /// container the command runs in, beside the server.
    #[arg(long, default_value_t = DEFAULT_LIMIT)]
    pub limit: usize,
}

/// Rows `admin audit` lists unless `--limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 1000;

impl FilterArgs {
    /// The filter these flags describe.
    pub fn filter(self) -> Result<Filter, CliError> {
        let now = chrono::Utc::now();
        let time = |flag: &str, text: Option<String>| {
            text.map(|t| parse_time(&t, now).map_err(|e| CliError::Message(format!("--{flag}: {e}"))))
                .transpose()
        };
        Ok(Filter {
            since: time("since", self.since)?,
            until: time("until", self.until)?,
            login: self.login,
            credential: self.credential,
            cluster: self.cluster,
            namespace: self.namespace,
            verb: self.verb,
            resource: self.resource,
            outcome: self.outcome,
            session: self.session,
            tool: self.tool,
            id: self.id,
            kind: None,
            discovery: self.discovery,
            limit: Some(self.limit),
            after: None,
        })
    }
}

/// Run `command` on the audit of `store`, printing to `out`.
pub fn run(config: &Config, store: &Store, command: AuditCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match command.action.as_deref().cloned() {
        Some(AuditAction::Show { id }) => return super::apiserver_audit::show(store, &id, out),
        Some(AuditAction::Alerts { json, limit }) => return super::apiserver_audit::alerts(store, json, limit, out),
        Some(AuditAction::Ingest { cluster, file }) => {
            return super::apiserver_audit::ingest(config, store, &cluster, &file, out)
        }
        Some(AuditAction::Coverage { cluster, since, json }) => {
            return super::apiserver_audit::coverage(config, store, &cluster, &since, json, out)
        }
        _ => {}
    }
    let mut audit = crate::audit::open(store).map_err(|e| CliError::Message(e.to_string()))?;
    let io = |e: std::io::Error| CliError::Message(format!("cannot write the output: {e}"));
    if let Some(AuditAction::Verify) = command.action.as_deref() {
        let report = verify(audit.as_mut()).map_err(|e| CliError::Message(e.to_string()))?;
        return match report.broken {
            None => writeln!(out, "audit chain intact: {} rows verified", report.checked).map_err(io),
            Some(broken) => Err(CliError::Message(format!(
                "audit chain broken after {} good rows: {broken}",
                report.checked
            ))),
        };
    }
    let filter = command.filters.filter()?;
    let rows = audit.query(&filter).map_err(|e| CliError::Message(e.to_string()))?;
    if !rows.is_empty() && Some(rows.len()) == filter.limit {
        eprintln!(
            "the newest {} rows; older ones may match too: --limit, --since or --until for them",
            rows.len()
        );
    }
    if command.json {
        return json_lines(out, &rows);
    }
    writeln!(
        out,
        "{:<20} {:<36} {:<20} {:<10} {:<16} {:<48} {:>4} OUTCOME",
        "TIME", "ID", "WHO", "CLUSTER", "VERB", "WHAT", "CODE"
    )
    .map_err(io)?;
    for row in &rows {
        writeln!(out, "{}", table_line(row)).map_err(io)?;
    }
    Ok(())
}

/// One row of the table: one line, whatever the row holds, since paths,
/// names and rejected token prefixes come from clients (see
/// [`crate::text`]).
fn table_line(chained: &ChainedRow) -> String {
    let row = &chained.row;
    let who = match (row.login.is_empty(), row.credential_prefix.is_empty()) {
        (false, _) => format!("{}:{}", row.principal_kind, row.login),
        (true, false) => format!("{}…", row.credential_prefix),
        (true, true) => "-".to_string(),
    };
    let what = if row.resource.is_empty() {
        row.path.clone()
    } else {
        let resource = [row.resource.as_str(), row.subresource.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("/");
        let scope = if row.namespace.is_empty() {
            String::new()
        } else {
            format!("{}/", row.namespace)
        };
        let name = if row.name.is_empty() {
            String::new()
        } else {
            format!(" {}", row.name)
        };
        format!("{scope}{resource}{name}")
    };
    let outcome = match (row.refused.is_empty(), row.reason.is_empty()) {
        (false, _) => format!("refused: {}", row.refused),
        (true, false) => row.reason.clone(),
        (true, true) => String::new(),
    };
    format!(
        "{:<20} {:<36} {:<20} {:<10} {:<16} {:<48} {:>4} {}",
        row.started_at.format("%Y-%m-%dT%H:%M:%SZ"),
        // An alert's id is the one a client gave the API server.
        escape_control(&row.id),
        escape_control(&who),
        escape_control(if row.cluster.is_empty() { "-" } else { &row.cluster }),
        escape_control(if row.verb.is_empty() { "-" } else { &row.verb }),
        escape_control(&what),
        row.code,
        escape_control(&outcome),
    )
}

/// Each of `rows` as one JSON line (`--json`).
pub(super) fn json_lines(out: &mut dyn Write, rows: &[impl serde::Serialize]) -> Result<(), CliError> {
    for row in rows {
        serde_json::to_writer(&mut *out, row).map_err(|e| CliError::Message(e.to_string()))?;
        writeln!(out).map_err(|e| CliError::Message(format!("cannot write the output: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::chain::{append, Anchor};
    use crate::audit::row::AuditRow;

    #[test]
    fn the_newest_thousand_rows_are_listed_unless_a_limit_is_given() {
        #[derive(clap::Parser)]
        struct Args {
            #[command(flatten)]
            filters: FilterArgs,
        }
        let limit = |args: &[&str]| {
            let args = <Args as clap::Parser>::try_parse_from([&["audit"], args].concat()).unwrap();
            args.filters.filter().unwrap().limit
        };
        assert_eq!(limit(&[]), Some(DEFAULT_LIMIT));
        assert_eq!(limit(&["--limit", "5000"]), Some(5000));
    }

    #[test]
    fn a_table_line_names_who_what_and_the_outcome() {
        let mut row = AuditRow::new(uuid::Uuid::now_v7(), chrono::Utc::now());
        (row.principal_kind, row.login, row.cluster) = ("person".into(), "ana".into(), "prod".into());
        (row.verb, row.namespace, row.resource, row.subresource, row.name) = (
            "create".into(),
            "shop".into(),
            "pods".into(),
            "exec".into(),
            "web-1".into(),
        );
        (row.code, row.reason) = (403, "Forbidden".into());
        let line = table_line(&append(&Anchor::default(), row.clone()));
        assert!(
            line.contains("person:ana") && line.contains("shop/pods/exec web-1"),
            "{line}"
        );
        assert!(line.ends_with(" 403 Forbidden"), "{line}");
        let refused = AuditRow {
            credential_prefix: "pcl_AbC".into(),
            refused: "revoked".into(),
            code: 401,
            ..row
        };
        let line = table_line(&append(
            &Anchor::default(),
            AuditRow {
                login: String::new(),
                ..refused
            },
        ));
        assert!(
            line.contains("pcl_AbC…") && line.ends_with("refused: revoked"),
            "{line}"
        );
    }

    #[test]
    fn a_table_line_shows_control_characters_as_escapes() {
        let mut row = AuditRow::new(uuid::Uuid::now_v7(), chrono::Utc::now());
        row.path = "/x\n2026-01-01T00:00:00Z forged\r\x1b[2K".into();
        // A bypass alert's id is whatever a client sent the API server.
        row.id = "a\tb\u{202e}c".into();
        let line = table_line(&append(&Anchor::default(), row));
        assert!(!line.contains(['\n', '\r', '\x1b', '\t', '\u{202e}']), "{line:?}");
        assert!(line.contains("a\\tb\\u{202e}c"), "{line}");
        assert!(line.contains("/x\\n2026-01-01T00:00:00Z forged\\r\\u{1b}[2K"), "{line}");
    }
}
