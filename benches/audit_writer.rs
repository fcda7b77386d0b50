//! Rows per second the audit writer sustains into SQLite, and into
//! PostgreSQL (a server of the bench's own, started as the tests start
//! theirs, so with fsync off: `scripts/bench` measures the writer on a
//! durable one; the group is left out, saying why, where PostgreSQL 15 is
//! not installed):
//! reads (group-committed) and writes (an intent committed before
//! forwarding, then the row), from many concurrent requests as the proxy
//! would send them.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use portcullis::audit::postgres::PostgresAuditStore;
use portcullis::audit::row::AuditRow;
use portcullis::audit::sqlite::SqliteAuditStore;
use portcullis::audit::store::AuditStore;
use portcullis::audit::writer::{AuditWriter, WriterMetrics, WriterSettings};

#[path = "../tests/support/postgres.rs"]
mod pg_fixture;

/// Rows per measured iteration.
const ROWS: u64 = 2000;
/// Concurrent requests.
const CLIENTS: u64 = 64;

fn row() -> AuditRow {
    let now = chrono::Utc::now();
    let mut row = AuditRow::new(uuid::Uuid::now_v7(), now);
    row.cluster = "prod".into();
    row.principal_kind = "person".into();
    row.login = "ana".into();
    row.method = "GET".into();
    row.path = "/api/v1/namespaces/shop/pods".into();
    row.verb = "list".into();
    row.resource = "pods".into();
    row.namespace = "shop".into();
    row.code = 200;
    row.bytes_out = 4096;
    row.finish(now);
    row
}

fn writer_throughput(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = SqliteAuditStore::open(&dir.path().join("bench.db")).expect("store");
    bench_writer(c, "audit_writer", Box::new(store));
}

fn writer_throughput_postgres(c: &mut Criterion) {
    let server = match pg_fixture::PgServer::start() {
        Ok(server) => server,
        Err(e) => {
            eprintln!("audit_writer_postgres left out: {e}");
            return;
        }
    };
    let url = server.create_database("audit_writer").expect("a database");
    let store = portcullis::store::Store::connect(url.parse().expect("a URL")).expect("the store");
    let pool = store.postgres_pool().expect("a PostgreSQL store");
    let audit = PostgresAuditStore::open(pool).expect("the audit");
    bench_writer(c, "audit_writer_postgres", Box::new(audit));
}

/// Reads, then writes with their intents, through a writer on `store`.
fn bench_writer(c: &mut Criterion, name: &str, store: Box<dyn AuditStore>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let writer = runtime
        .block_on(async { AuditWriter::spawn(store, None, WriterSettings::default(), WriterMetrics::default()) });

    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(ROWS));
    group.sample_size(10);
    group.bench_function("read_rows", |b| {
        b.iter(|| runtime.block_on(clients(&writer, false)));
    });
    group.bench_function("write_rows_with_intents", |b| {
        b.iter(|| runtime.block_on(clients(&writer, true)));
    });
    group.finish();
    runtime.block_on(writer.close());
}

/// `CLIENTS` tasks together sending `ROWS` rows, then a flush.
async fn clients(writer: &AuditWriter, writes: bool) {
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let writer = writer.clone();
            tokio::spawn(async move {
                for _ in 0..ROWS / CLIENTS {
                    let row = row();
                    if writes {
                        writer.commit_intent(row.clone()).await.expect("intent committed");
                    }
                    writer.append(row).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client finished");
    }
    writer.flush().await;
}

criterion_group!(benches, writer_throughput, writer_throughput_postgres);
criterion_main!(benches);
