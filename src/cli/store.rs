//! `portcullis admin store …`: the database itself.

use super::CliError;
use crate::config::Config;
use crate::store::{Store, StoreError};
use clap::Subcommand;
use std::io::Write;
use std::path::PathBuf;

/// `admin store …`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy the embedded SQLite store into the PostgreSQL one of `[store]
    /// url` (which must have no rows yet), audit chain included, and verify
    /// the copy: every table's row count, and the audit's hash chain end to
    /// end. Stop portcullis first: rows written during the copy would be
    /// left behind.
    Migrate {
        /// The SQLite file (default: `portcullis.db` in `data_dir`).
        #[arg(long)]
        from: Option<PathBuf>,
    },
}

/// Run `command` with `store` (the configured one: PostgreSQL).
pub fn run(config: &Config, store: &Store, command: StoreCommand, out: &mut dyn Write) -> Result<(), CliError> {
    let StoreCommand::Migrate { from } = command;
    if config.store.url.is_none() {
        return Err(CliError::Message(
            "admin store migrate copies into PostgreSQL: set [store] url (or PORTCULLIS_STORE__URL) to the target"
                .into(),
        ));
    }
    let from = from.unwrap_or_else(|| config.data_dir.join("portcullis.db"));
    if !from.is_file() {
        return Err(CliError::Message(format!(
            "there is no SQLite store at {}: name it with --from, or set data_dir to the folder that holds portcullis.db",
            from.display()
        )));
    }
    let tables = crate::store::copy_sqlite_into(&from, store).map_err(|e| match e {
        // A refusal says itself what it left alone.
        StoreError::Invalid(refused) => CliError::Message(refused),
        failed => CliError::Message(format!(
            "the copy failed, and nothing was kept: {}",
            crate::text::with_causes(&failed)
        )),
    })?;
    let io = |e: std::io::Error| CliError::Message(format!("cannot write the output: {e}"));
    for (table, rows) in &tables {
        writeln!(out, "{table}: {rows} rows").map_err(io)?;
    }
    let mut audit = crate::audit::open(store).map_err(|e| CliError::Message(e.to_string()))?;
    let report = crate::audit::store::verify(&mut *audit).map_err(|e| CliError::Message(e.to_string()))?;
    if let Some(broken) = report.broken {
        return Err(CliError::Message(format!(
            "copied, but the audit chain does not verify in PostgreSQL after {} rows: {broken}",
            report.checked
        )));
    }
    writeln!(
        out,
        "copied {} into {}; audit chain intact: {} rows verified",
        from.display(),
        config.store.describe(),
        report.checked
    )
    .map_err(io)
}
