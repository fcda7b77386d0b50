//! The records a batch's INSERT reads: the row's own JSON and the keys
//! given again after it, checked against real PostgreSQL and against the
//! records as they were built before (a `serde_json::Value` per row).

use super::*;
use crate::audit::store::{verify, VerifyReport};
use crate::store::testing::{self, TestStore};
use serde_json::Map;

/// A row as `append` used to make its record: the row serialised again
/// into a map, its keys patched. The oracle for what the columns hold.
fn old_record(link: &Link, row: &AuditRow) -> Value {
    let mut value = serde_json::to_value(row).unwrap();
    let fields: &mut Map<String, Value> = value.as_object_mut().unwrap();
    fields.insert("seq".into(), link.seq.into());
    fields.insert("prev_hash".into(), link.prev_hash.clone().into());
    fields.insert("hash".into(), link.hash.clone().into());
    fields.insert("forwarded".into(), false.into());
    fields.insert("started_at".into(), timestamp(&row.started_at).into());
    fields.insert("ended_at".into(), timestamp(&row.ended_at).into());
    if let Some(write) = fields.remove("write") {
        fields.insert("is_write".into(), write);
    }
    for text in ["via", "kind"] {
        fields.entry(text).or_insert_with(|| "".into());
    }
    for count in ["bytes_in", "bytes_out", "duration_ms"] {
        if fields.get(count).is_some_and(|n| n.as_i64().is_none()) {
            fields.insert(count.into(), i64::MAX.into());
        }
    }
    value
}

/// Text no field should mangle: quotes, backslashes, control characters
/// (all but NUL, which PostgreSQL's text refuses on any path), non-ASCII.
const TRICKY: &str = "\"q\" \\back\\ \u{1}\t\n\r\u{1f}\u{7f} é ✓ 𝄞 </script>";

/// A row with every field set, each text different, `variant` choosing
/// the flags, `via` and `kind`.
fn full_row(variant: usize) -> AuditRow {
    let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
    let texts: [&mut String; 21] = [
        &mut row.cluster,
        &mut row.principal_kind,
        &mut row.login,
        &mut row.credential_id,
        &mut row.credential_prefix,
        &mut row.session,
        &mut row.tool,
        &mut row.client,
        &mut row.method,
        &mut row.path,
        &mut row.query,
        &mut row.verb,
        &mut row.api_group,
        &mut row.api_version,
        &mut row.resource,
        &mut row.subresource,
        &mut row.namespace,
        &mut row.name,
        &mut row.reason,
        &mut row.refused,
        &mut row.via,
    ];
    for (i, text) in texts.into_iter().enumerate() {
        *text = format!("{i}:{TRICKY}:{variant}");
    }
    // The longest texts a row keeps, ending on a character boundary.
    row.path = crate::audit::row::bounded(&TRICKY.repeat(60));
    row.query = crate::audit::row::bounded(&"é".repeat(1100));
    assert_eq!(row.query.len(), 2048);
    row.code = 403;
    row.bytes_in = 1;
    row.bytes_out = i64::MAX as u64;
    let even = variant.is_multiple_of(2);
    row.write = even;
    row.discovery = !even;
    row.dry_run = true;
    row.redacted = even;
    row.truncated = true;
    row.secret_revealed = !even;
    row.held = true;
    row.approved = even;
    row.via = match variant % 3 {
        0 => String::new(),
        _ => format!("oauth:{TRICKY}"),
    };
    row.kind = match variant % 4 {
        0 | 1 => String::new(),
        _ => "system".into(),
    };
    if variant == 1 {
        // A whole second: the row's JSON writes no fraction, the column six
        // digits.
        row.started_at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    }
    row.finish(Utc::now());
    row
}

/// `read` is `rows`; a failure names the differing fields, not every text.
fn assert_rows(read: &[AuditRow], rows: &[AuditRow]) {
    assert_eq!(read.len(), rows.len());
    for (i, (read, row)) in read.iter().zip(rows).enumerate() {
        let (read, row) = (serde_json::to_value(read).unwrap(), serde_json::to_value(row).unwrap());
        let differ: Vec<String> = row
            .as_object()
            .unwrap()
            .iter()
            .filter(|(name, value)| read.get(name.as_str()) != Some(value))
            .map(|(name, value)| format!("{name}: {:?} read as {:?}", value, read.get(name.as_str())))
            .collect();
        assert!(differ.is_empty(), "row {i}: {differ:?}");
        assert_eq!(read, row);
    }
}

/// Rows covering both values of each flag and `via`/`kind` empty or not.
fn full_rows() -> Vec<AuditRow> {
    (0..6).map(full_row).collect()
}

/// Each row of the table as `row_to_json`, in chain order.
fn stored(db: &TestStore) -> Vec<String> {
    let pg = db.postgres_pool().unwrap();
    let client = pg.client().unwrap();
    let db: &dyn Db = &Pg(&client);
    db.query_map(
        "SELECT CAST(row_to_json(a) AS TEXT) FROM audit AS a ORDER BY seq",
        params![],
        |r| r.get(0),
    )
    .unwrap()
}

/// What the old records of `chained` store, by the same statement, in a
/// fresh database.
fn stored_the_old_way(chained: &[ChainedRow]) -> Vec<String> {
    let db = testing::postgres();
    let records: Vec<Value> = chained
        .iter()
        .map(|c| {
            let link = Link {
                seq: c.seq,
                prev_hash: c.prev_hash.clone(),
                hash: c.hash.clone(),
            };
            old_record(&link, &c.row)
        })
        .collect();
    let pg = db.postgres_pool().unwrap();
    let client = pg.client().unwrap();
    (&Pg(&client) as &dyn Db)
        .execute(insert_sql(), params![Value::Array(records).to_string()])
        .unwrap();
    stored(&db)
}

/// Commit `rows` through the store, on a fresh database.
fn committed(rows: &[AuditRow]) -> (TestStore, PostgresAuditStore, Vec<ChainedRow>) {
    let db = testing::postgres();
    let mut store = PostgresAuditStore::open(db.postgres_pool().unwrap()).unwrap();
    let chained = store.commit(&[], rows).unwrap();
    (db, store, chained)
}

/// The records `append` sends for `rows` at their places.
fn records(rows: &[AuditRow]) -> Vec<(Link, AuditRow, Vec<u8>)> {
    let mut prev = Anchor::default();
    rows.iter()
        .map(|row| {
            let encoded = Encoded::new(row.clone());
            let link = chain::next(&mut prev, &encoded);
            let mut out = Vec::new();
            json::record(&mut out, &link, &encoded).unwrap();
            (link, row.clone(), out)
        })
        .collect()
}

#[test]
fn postgres_json_records_take_the_last_of_a_repeated_key_and_never_read_an_earlier_one() {
    let db = testing::postgres();
    let pg = db.postgres_pool().unwrap();
    let client = pg.client().unwrap();
    let db: &dyn Db = &Pg(&client);
    let sql = "SELECT login, code, bytes_out, is_write, via FROM json_populate_recordset(NULL::audit, \
               CAST(CAST(?1 AS TEXT) AS json))";
    let read = |text: &str| {
        db.query_row(sql, params![text], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
    };
    let repeated = r#"[{"login":"first","code":1,"bytes_out":18446744073709551615,"is_write":"maybe","via":"a",
        "login":"last","code":2,"bytes_out":9223372036854775807,"is_write":true,"via":""}]"#;
    let row: (String, i64, i64, bool, String) = read(repeated).map_err(|e| format!("{e:?}")).unwrap();
    assert_eq!(row, ("last".into(), 2, i64::MAX, true, String::new()));
    // Read alone, the earlier values fail: so they were not read above.
    let alone = format!("{:?}", read(r#"[{"bytes_out":18446744073709551615}]"#).unwrap_err());
    assert!(alone.contains("out of range"), "{alone}");
    assert!(read(r#"[{"is_write":"maybe"}]"#).is_err());
}

#[test]
fn a_record_is_the_rows_json_then_the_columns_the_old_record_gave() {
    let mut rows = full_rows();
    rows[0].bytes_in = u64::MAX;
    rows[1].duration_ms = i64::MAX as u64 + 1;
    rows[2].bytes_out = u64::MAX;
    for (link, row, record) in records(&rows) {
        let json = serde_json::to_vec(&row).unwrap();
        assert_eq!(record[..json.len() - 1], json[..json.len() - 1]);
        // serde_json too keeps the last of a repeated key.
        let mut read: Value = serde_json::from_slice(&record).unwrap();
        read.as_object_mut().unwrap().remove("write");
        assert_eq!(read, old_record(&link, &row));
    }
}

#[test]
fn rows_of_every_kind_read_back_equal_chain_and_are_stored_as_the_old_records_stored_them() {
    let rows = full_rows();
    let (db, mut store, chained) = committed(&rows);
    let read = store.chain_page(0, 100).unwrap();
    assert_rows(&read.iter().map(|c| c.row.clone()).collect::<Vec<_>>(), &rows);
    assert_eq!(read, chained);
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(rows.len() as u64));
    let columns = stored(&db);
    assert_eq!(columns.len(), rows.len());
    assert_eq!(columns, stored_the_old_way(&chained));
}

#[test]
fn counts_past_i64_are_stored_at_its_maximum_as_before() {
    let mut rows = full_rows();
    rows[0].bytes_in = u64::MAX;
    rows[3].bytes_out = i64::MAX as u64 + 1;
    rows[4].duration_ms = u64::MAX;
    let (db, mut store, chained) = committed(&rows);
    let mut clamped = rows.clone();
    clamped[0].bytes_in = i64::MAX as u64;
    clamped[3].bytes_out = i64::MAX as u64;
    clamped[4].duration_ms = i64::MAX as u64;
    let read = store.chain_page(0, 100).unwrap();
    assert_rows(&read.into_iter().map(|c| c.row).collect::<Vec<_>>(), &clamped);
    assert_eq!(stored(&db), stored_the_old_way(&chained));
}

#[test]
fn a_batch_of_one_and_batches_after_it_chain_on() {
    let rows = full_rows();
    let (db, mut store, mut chained) = committed(&rows[..1]);
    chained.extend(store.commit(&[], &rows[1..]).unwrap());
    let read = store.chain_page(0, 100).unwrap();
    assert_rows(&read.iter().map(|c| c.row.clone()).collect::<Vec<_>>(), &rows);
    assert_eq!(read, chained);
    assert_eq!(verify(&mut store).unwrap(), VerifyReport::intact(rows.len() as u64));
    assert_eq!(stored(&db), stored_the_old_way(&chained));
}
