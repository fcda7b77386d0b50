//! The PostgreSQL schema (`src/store/migrations/postgres/`) is SQLite's
//! (`src/store/migrations/`) translated: the same versions, tables, columns,
//! keys, indexes and foreign keys, so that the two cannot drift apart. Each
//! side is described in the same words (SQLite's storage classes: a
//! PostgreSQL BIGINT or BOOLEAN is an INTEGER, a TIMESTAMPTZ is TEXT) and
//! the descriptions compared.

use crate::pg_fixture::{self, PgServer};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

fn migrations_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/migrations")
}

/// The `.sql` files of `dir`, in version order.
fn migrations(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .collect();
    files.sort();
    files
}

/// A new SQLite database with every SQLite migration applied, each in a
/// transaction as the store applies them.
fn sqlite() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    for file in migrations(&migrations_dir()) {
        let sql = std::fs::read_to_string(&file).unwrap();
        conn.execute_batch(&format!("BEGIN; {sql}; COMMIT;"))
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
    conn
}

/// A new database on the shared server with every PostgreSQL migration
/// applied in order by psql, each in a transaction, stopping at an error.
fn postgres() -> (&'static PgServer, String) {
    let server = pg_fixture::shared();
    let url = server.create_database("schema").unwrap();
    for file in migrations(&migrations_dir().join("postgres")) {
        server
            .psql_file(&url, &file)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
    (server, url)
}

/// The rows psql printed, each split into its `|`-separated fields.
fn rows(server: &PgServer, url: &str, sql: &str) -> Vec<Vec<String>> {
    let out = server.psql(url, sql).unwrap();
    out.lines()
        .map(|line| line.split('|').map(str::to_string).collect())
        .collect()
}

fn sqlite_tables(conn: &Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap();
    let names = stmt.query_map([], |r| r.get(0)).unwrap();
    names.collect::<Result<_, _>>().unwrap()
}

/// `table.column TYPE [not null] [default] [pk N]` for every column, in
/// each table's column order.
fn sqlite_columns(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for table in sqlite_tables(conn) {
        let mut stmt = conn.prepare(&format!("PRAGMA table_info(\"{table}\")")).unwrap();
        let columns = stmt
            .query_map([], |r| {
                let (name, kind, not_null, default, pk): (String, String, bool, Option<String>, i64) =
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
                // A PRIMARY KEY column takes NULL in SQLite only by an old
                // quirk the store never uses; PostgreSQL refuses it.
                Ok(column(&table, &name, &kind, not_null || pk > 0, default.is_some(), pk))
            })
            .unwrap();
        out.extend(columns.map(Result::unwrap));
    }
    out
}

fn postgres_columns(server: &PgServer, url: &str) -> Vec<String> {
    let sql = "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable, c.column_default IS NOT NULL, \
               COALESCE(k.ordinal_position, 0) \
               FROM information_schema.columns c \
               LEFT JOIN information_schema.table_constraints t ON t.table_schema = c.table_schema \
                 AND t.table_name = c.table_name AND t.constraint_type = 'PRIMARY KEY' \
               LEFT JOIN information_schema.key_column_usage k ON k.constraint_name = t.constraint_name \
                 AND k.table_schema = c.table_schema AND k.column_name = c.column_name \
               WHERE c.table_schema = 'public' ORDER BY c.table_name, c.ordinal_position";
    rows(server, url, sql)
        .iter()
        .map(|r| {
            let kind = match r[2].as_str() {
                "bigint" | "boolean" => "INTEGER",
                "text" | "timestamp with time zone" => "TEXT",
                "bytea" => "BLOB",
                other => panic!(
                    "{}.{} is of type {other}, which SQLite has no counterpart of",
                    r[0], r[1]
                ),
            };
            column(&r[0], &r[1], kind, r[3] == "NO", r[4] == "t", r[5].parse().unwrap())
        })
        .collect()
}

fn column(table: &str, name: &str, kind: &str, not_null: bool, default: bool, pk: i64) -> String {
    let mut line = format!("{table}.{name} {kind}");
    if not_null {
        line.push_str(" not null");
    }
    if default {
        line.push_str(" default");
    }
    if pk > 0 {
        line.push_str(&format!(" pk {pk}"));
    }
    line
}

/// `table(columns) [unique] name` for every index but primary keys'; the
/// name is `-` for an index a UNIQUE constraint made (SQLite and
/// PostgreSQL name those differently).
fn sqlite_indexes(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for table in sqlite_tables(conn) {
        let mut list = conn.prepare(&format!("PRAGMA index_list(\"{table}\")")).unwrap();
        let indexes: Vec<(String, bool, String)> = list
            .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (name, unique, origin) in indexes.into_iter().filter(|(_, _, origin)| origin != "pk") {
            let mut info = conn.prepare(&format!("PRAGMA index_info(\"{name}\")")).unwrap();
            let columns: Vec<String> = info.query_map([], |r| r.get(2)).unwrap().map(Result::unwrap).collect();
            let name = if origin == "u" { "-" } else { name.as_str() };
            out.push(index(&table, &columns.join(","), unique, name));
        }
    }
    out.sort();
    out
}

fn postgres_indexes(server: &PgServer, url: &str) -> Vec<String> {
    let sql = "SELECT t.relname, string_agg(a.attname, ',' ORDER BY k.n), ix.indisunique, \
               CASE WHEN EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid) \
               THEN '-' ELSE i.relname END \
               FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class t ON t.oid = ix.indrelid \
               JOIN pg_namespace ns ON ns.oid = t.relnamespace \
               CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, n) \
               JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum \
               WHERE ns.nspname = 'public' AND NOT ix.indisprimary \
               GROUP BY t.relname, i.relname, ix.indexrelid, ix.indisunique";
    let mut out: Vec<String> = rows(server, url, sql)
        .iter()
        .map(|r| index(&r[0], &r[1], r[2] == "t", &r[3]))
        .collect();
    out.sort();
    out
}

fn index(table: &str, columns: &str, unique: bool, name: &str) -> String {
    format!("{table}({columns}){} {name}", if unique { " unique" } else { "" })
}

/// `table(columns) -> table(columns)` for every foreign key.
fn sqlite_foreign_keys(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for table in sqlite_tables(conn) {
        let mut stmt = conn.prepare(&format!("PRAGMA foreign_key_list(\"{table}\")")).unwrap();
        let parts: Vec<(i64, String, String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut ids: Vec<i64> = parts.iter().map(|p| p.0).collect();
        ids.dedup();
        for id in ids {
            let of_key: Vec<_> = parts.iter().filter(|p| p.0 == id).collect();
            let from: Vec<&str> = of_key.iter().map(|p| p.2.as_str()).collect();
            let to: Vec<&str> = of_key.iter().map(|p| p.3.as_str()).collect();
            out.push(format!(
                "{table}({}) -> {}({})",
                from.join(","),
                of_key[0].1,
                to.join(",")
            ));
        }
    }
    out.sort();
    out
}

fn postgres_foreign_keys(server: &PgServer, url: &str) -> Vec<String> {
    let sql = "SELECT t.relname, string_agg(a.attname, ',' ORDER BY k.n), r.relname, \
               string_agg(fa.attname, ',' ORDER BY k.n) \
               FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class r ON r.oid = c.confrelid \
               CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(attnum, fattnum, n) \
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum \
               JOIN pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = k.fattnum \
               WHERE c.contype = 'f' GROUP BY c.oid, t.relname, r.relname";
    let mut out: Vec<String> = rows(server, url, sql)
        .iter()
        .map(|r| format!("{}({}) -> {}({})", r[0], r[1], r[2], r[3]))
        .collect();
    out.sort();
    out
}

/// Equal descriptions, or a failure naming only the lines that differ.
fn assert_same(what: &str, postgres: &[String], sqlite: &[String]) {
    let only_postgres: Vec<&String> = postgres.iter().filter(|line| !sqlite.contains(line)).collect();
    let only_sqlite: Vec<&String> = sqlite.iter().filter(|line| !postgres.contains(line)).collect();
    assert!(
        only_postgres.is_empty() && only_sqlite.is_empty(),
        "the {what} differ:\nonly in PostgreSQL: {only_postgres:#?}\nonly in SQLite: {only_sqlite:#?}"
    );
    assert_eq!(postgres, sqlite, "the same {what}, in another order");
}

#[test]
fn the_postgresql_migrations_are_the_sqlite_ones_version_for_version() {
    let names = |dir: &Path| -> Vec<String> {
        migrations(dir)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    let sqlite = names(&migrations_dir());
    assert!(sqlite.len() >= 15, "{sqlite:?}");
    assert_eq!(names(&migrations_dir().join("postgres")), sqlite);
}

#[test]
fn both_schemas_have_the_same_tables_with_the_same_columns_keys_indexes_and_foreign_keys() {
    let conn = sqlite();
    let (server, url) = postgres();
    let pg_tables: Vec<String> = rows(
        server,
        &url,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    assert_same("tables", &pg_tables, &sqlite_tables(&conn));
    assert_same("columns", &postgres_columns(server, &url), &sqlite_columns(&conn));
    assert_same("indexes", &postgres_indexes(server, &url), &sqlite_indexes(&conn));
    assert_same(
        "foreign keys",
        &postgres_foreign_keys(server, &url),
        &sqlite_foreign_keys(&conn),
    );
}

#[test]
fn the_times_the_audit_keeps_as_text_are_ordered_byte_by_byte_in_postgresql() {
    let (server, url) = postgres();
    let collated: Vec<String> = rows(
        server,
        &url,
        "SELECT table_name || '.' || column_name FROM information_schema.columns \
         WHERE table_schema = 'public' AND collation_name = 'C' ORDER BY 1",
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    let expected = [
        "apiserver_audit.arrived_at",
        "apiserver_audit.received_at",
        "apiserver_audit.stage_at",
        "audit.ended_at",
        "audit.started_at",
        "audit_forwarded.at",
    ];
    assert_eq!(collated, expected);
}

/// A person's grant with two grants narrowed from it (one ended already)
/// and a grant of their own, then the parent revoked; how each ended.
const PARENT_REVOKED: &str = "\
    INSERT INTO principals (kind, name, created_at) VALUES ('person', 'ann', '2025-01-01T00:00:00Z');
    INSERT INTO grants (id, kind, subject, cluster, role, expires_at, granted_by, created_at) VALUES
        ('parent', 'person', 'ann', 'prod', 'view', '2025-02-01T00:00:00Z', 'admin', '2025-01-01T00:00:00Z'),
        ('child', 'person', 'ann', 'prod', 'view', '2025-02-01T00:00:00Z', 'consent', '2025-01-01T00:00:00Z'),
        ('ended', 'person', 'ann', 'prod', 'view', '2025-02-01T00:00:00Z', 'consent', '2025-01-01T00:00:00Z'),
        ('own', 'person', 'ann', 'prod', 'edit', '2025-02-01T00:00:00Z', 'admin', '2025-01-01T00:00:00Z');
    UPDATE grants SET parent_id = 'parent' WHERE id IN ('child', 'ended');
    UPDATE grants SET revoked_at = '2025-01-01T12:00:00Z' WHERE id = 'ended';
    UPDATE grants SET revoked_at = '2025-01-02T00:00:00Z' WHERE id = 'parent';
    SELECT g.id || ':' || CASE WHEN g.revoked_at IS NULL THEN 'open' WHEN g.revoked_at = p.revoked_at \
        THEN 'with its parent' ELSE 'before' END
    FROM grants g, grants p WHERE p.id = 'parent' ORDER BY g.id;";

#[test]
fn a_grant_revoked_ends_the_grants_narrowed_from_it_in_both_stores() {
    let conn = sqlite();
    let (setup, select) = PARENT_REVOKED.rsplit_once("SELECT").unwrap();
    conn.execute_batch(setup).unwrap();
    let mut stmt = conn.prepare(&format!("SELECT {select}")).unwrap();
    let in_sqlite: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    let (server, url) = postgres();
    let in_postgres: Vec<String> = server
        .psql(&url, PARENT_REVOKED)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let expected = [
        "child:with its parent",
        "ended:before",
        "own:open",
        "parent:with its parent",
    ];
    assert_eq!(in_sqlite, expected);
    assert_eq!(in_postgres, expected);
}

#[test]
fn each_new_store_gets_its_own_instance_id_of_sixteen_hex_digits() {
    let instance_id = |(server, url): (&PgServer, String)| {
        server
            .psql(&url, "SELECT value FROM settings WHERE key = 'instance_id'")
            .unwrap()
    };
    let (first, second) = (instance_id(postgres()), instance_id(postgres()));
    let in_sqlite: String = sqlite()
        .query_row("SELECT value FROM settings WHERE key = 'instance_id'", [], |r| r.get(0))
        .unwrap();
    for id in [&first, &second, &in_sqlite] {
        assert_eq!(id.len(), 16, "{id}");
        assert!(
            id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{id}"
        );
    }
    assert_ne!(first, second);
}
