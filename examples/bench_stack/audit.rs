//! `audit`: the audit writer alone, fed finished rows as the request path
//! feeds it (`submit`, from many tasks, as fast as they can), then flushed;
//! rows per second, and rows lost (sent but not in the database). Into a
//! fresh SQLite file, or with `--postgres` into a PostgreSQL database.

use portcullis::audit::postgres::PostgresAuditStore;
use portcullis::audit::row::AuditRow;
use portcullis::audit::sqlite::SqliteAuditStore;
use portcullis::audit::store::AuditStore;
use portcullis::audit::writer::{AuditWriter, WriterMetrics, WriterSettings};
use portcullis::store::Store;
use std::path::PathBuf;
use std::time::Instant;

/// Command-line arguments of `audit`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to put the database (a fresh file).
    #[arg(long)]
    dir: PathBuf,
    /// Rows to send.
    #[arg(long, default_value_t = 200_000)]
    rows: u64,
    /// Concurrent senders.
    #[arg(long, default_value_t = 64)]
    senders: u64,
    /// A PostgreSQL database (`postgres://…`) to commit into instead of a
    /// SQLite file; its rows are counted before and after.
    #[arg(long)]
    postgres: Option<String>,
}

/// Where the rows go, and how many it holds.
enum Target {
    Sqlite(PathBuf),
    Postgres(Store),
}

impl Target {
    fn open(args: &Args) -> anyhow::Result<(Target, Box<dyn AuditStore>)> {
        if let Some(url) = &args.postgres {
            let store = Store::connect(url.parse()?)?;
            let pool = store.postgres_pool().expect("a PostgreSQL store");
            return Ok((Target::Postgres(store), Box::new(PostgresAuditStore::open(pool)?)));
        }
        std::fs::create_dir_all(&args.dir)?;
        let path = args.dir.join(format!("audit-{}.db", uuid::Uuid::new_v4()));
        let store = SqliteAuditStore::open(&path)?;
        Ok((Target::Sqlite(path), Box::new(store)))
    }

    fn rows(&self) -> anyhow::Result<u64> {
        let count: i64 = match self {
            Target::Sqlite(path) => {
                rusqlite::Connection::open(path)?.query_row("SELECT count(*) FROM audit", [], |r| r.get(0))?
            }
            Target::Postgres(store) => {
                let client = store.postgres_pool().expect("a PostgreSQL store").client()?;
                let row = portcullis::store::postgres::wait(client.query_one("SELECT count(*) FROM audit", &[]))?;
                row.get(0)
            }
        };
        Ok(count.max(0) as u64)
    }
}

/// Send, flush, count; print one JSON object.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let (target, store) = Target::open(&args)?;
    let before = target.rows()?;
    let metrics = WriterMetrics::default();
    let writer = AuditWriter::spawn(store, None, WriterSettings::default(), metrics.clone());
    let per_sender = args.rows / args.senders.max(1);
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.senders)
        .map(|_| {
            let writer = writer.clone();
            tokio::spawn(async move {
                for _ in 0..per_sender {
                    writer.submit(row());
                    // One row per request: let other tasks run, as requests would.
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await?;
    }
    writer.flush().await;
    let seconds = started.elapsed().as_secs_f64();
    writer.close().await;
    let sent = per_sender * args.senders;
    let stored = target.rows()?.saturating_sub(before);
    let result = serde_json::json!({
        "rows": sent,
        "stored": stored,
        "lost": sent.saturating_sub(stored),
        "committed_metric": metrics.rows.get(),
        "seconds": seconds,
        "rows_per_second": sent as f64 / seconds,
    });
    println!("{result}");
    if let Target::Sqlite(path) = &target {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// A finished read's row, as the proxy fills it.
fn row() -> AuditRow {
    let now = chrono::Utc::now();
    let mut row = AuditRow::new(uuid::Uuid::now_v7(), now);
    row.cluster = "sim".into();
    row.principal_kind = "person".into();
    row.login = "bench".into();
    row.method = "GET".into();
    row.path = "/api/v1/namespaces/bench/configmaps/small".into();
    row.verb = "get".into();
    row.resource = "configmaps".into();
    row.namespace = "bench".into();
    row.name = "small".into();
    row.code = 200;
    row.bytes_out = 1024;
    row.finish(now);
    row
}
