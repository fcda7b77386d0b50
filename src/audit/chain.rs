//! The hash chain: each row's hash covers its position, the previous row's
//! hash and its content, so a removed, inserted or edited row breaks the
//! chain at a place `portcullis audit verify` can name.
//!
//! Retention removes the oldest rows; the store then keeps an [`Anchor`]
//! (the last swept row's position and hash), and verification starts there.
//! The chain is unkeyed: it shows tampering by anyone who does not also
//! recompute every later hash, which is why the export sink (a copy outside
//! portcullis's hands) carries the hashes too.

use super::row::{AuditRow, ChainedRow};
use std::fmt;

/// The `prev_hash` of the first row ever written.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Where the chain starts: the last row removed by retention, or genesis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// Position of the last swept row (0 when nothing was swept).
    pub seq: i64,
    /// Its hash ([`GENESIS`] when nothing was swept).
    pub hash: String,
}

impl Default for Anchor {
    fn default() -> Self {
        Anchor {
            seq: 0,
            hash: GENESIS.to_string(),
        }
    }
}

/// A finished row and its canonical JSON, serialised once: the spool
/// writes these bytes and the chain hashes them. They are made here from
/// the row and nowhere else, and the row cannot be changed beside them, so
/// a row whose carried bytes say something else cannot be chained.
///
/// ```
/// # use portcullis::audit::{chain::Encoded, row::AuditRow};
/// let encoded = Encoded::new(AuditRow::default());
/// assert_eq!(encoded.json(), serde_json::to_vec(encoded.row()).unwrap());
/// ```
///
/// Bytes cannot be put beside a row from outside:
///
/// ```compile_fail,E0451
/// # use portcullis::audit::{chain::Encoded, row::AuditRow};
/// let forged = Encoded { row: AuditRow::default(), line: b"{}\n".to_vec() };
/// ```
#[derive(Debug, Clone)]
pub struct Encoded {
    row: AuditRow,
    /// The JSON and a newline: the spool's line as is.
    line: Vec<u8>,
    /// The row stands for its request's forwarded record, left out of the
    /// commit ([`super::forwarded::stand_in`]); not part of the JSON.
    forwarded: bool,
}

impl Encoded {
    /// Serialise `row` (field order is the struct's, so it is stable).
    /// A NUL in its texts is replaced first ([`super::row_json::without_nul`]),
    /// so the row stored, hashed and spooled is the same everywhere.
    pub fn new(mut row: AuditRow) -> Encoded {
        // A row's JSON is some 600 to 900 bytes: one allocation.
        let mut line = Vec::with_capacity(1024);
        // serde_json's bytes, written for a fraction of its cost.
        if super::row_json::write(&row, &mut line) {
            super::row_json::without_nul(&mut row);
            line.clear();
            let _ = super::row_json::write(&row, &mut line);
        }
        line.push(b'\n');
        Encoded {
            row,
            line,
            forwarded: false,
        }
    }

    /// A row shipped after a crash (an intent left, or a line of the
    /// spool): its request's forwarded record was kept in memory and died
    /// with the process, so the row of a request to a cluster that was not
    /// refused stands for it (else the API server's event for it would be
    /// taken for a bypass).
    pub(super) fn recovered(row: AuditRow) -> Encoded {
        let sent = row.kind.is_empty() && !row.cluster.is_empty() && row.refused.is_empty();
        let mut encoded = Encoded::new(row);
        encoded.forwarded = sent;
        encoded
    }

    /// Whether the row stands for its request's forwarded record.
    pub fn forwarded(&self) -> bool {
        self.forwarded
    }

    /// Mark the row as standing for its request's forwarded record.
    pub(super) fn stand_for_forwarded(&mut self) {
        self.forwarded = true;
    }

    /// The row.
    pub fn row(&self) -> &AuditRow {
        &self.row
    }

    /// Its JSON, `serde_json::to_vec(row)` byte for byte.
    pub fn json(&self) -> &[u8] {
        &self.line[..self.line.len() - 1]
    }

    /// Its JSON and a newline (the spool's line).
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// The row, its bytes dropped.
    pub fn into_row(self) -> AuditRow {
        self.row
    }
}

impl From<AuditRow> for Encoded {
    fn from(row: AuditRow) -> Self {
        Encoded::new(row)
    }
}

/// The hash of `row` at position `seq` after a row hashed `prev_hash`:
/// lower-case hex SHA-256 over `seq`, `prev_hash` and the row's canonical
/// JSON (field order is the struct's, so it is stable). Verification
/// serialises the row read back; a commit hashes the bytes it carries
/// ([`Encoded`]), the same bytes.
pub fn link(seq: i64, prev_hash: &str, row: &AuditRow) -> String {
    // serde_json here, not `row_json` as a commit writes: verification is
    // then a second, independent writing of the bytes, so a commit whose
    // writer ever drifted from serde_json's shows as edited rows rather
    // than verifying against itself. Serializing plain strings, numbers,
    // booleans and timestamps cannot fail.
    hash(seq, prev_hash, &serde_json::to_vec(row).unwrap_or_default())
}

fn hash(seq: i64, prev_hash: &str, json: &[u8]) -> String {
    // ring's SHA-256, not the `sha2` crate's: the same digest, from
    // assembly that uses the SHA extensions or AVX2 where the CPU has them
    // (`sha2` has only the SHA extensions, else portable code). Hashing the
    // row is most of an audit commit's instructions.
    let mut hasher = ring::digest::Context::new(&ring::digest::SHA256);
    hasher.update(seq.to_string().as_bytes());
    hasher.update(b"\n");
    hasher.update(prev_hash.as_bytes());
    hasher.update(b"\n");
    hasher.update(json);
    crate::identity::credential::lower_hex(hasher.finish().as_ref())
}

/// A row's place in the chain, as a store's commit returns it: the caller,
/// who owns the rows, puts each with its place ([`Link::chain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Position in the chain.
    pub seq: i64,
    /// The previous row's hash.
    pub prev_hash: String,
    /// This row's hash.
    pub hash: String,
}

impl Link {
    /// `row` at this place.
    pub fn chain(self, row: AuditRow) -> ChainedRow {
        ChainedRow {
            seq: self.seq,
            prev_hash: self.prev_hash,
            hash: self.hash,
            row,
        }
    }
}

/// Put `row` in the chain after `prev` (the last row's seq and hash),
/// which moves on to it.
pub fn next(prev: &mut Anchor, row: &Encoded) -> Link {
    let seq = prev.seq + 1;
    let hash = hash(seq, &prev.hash, row.json());
    let prev_hash = std::mem::replace(&mut prev.hash, hash.clone());
    prev.seq = seq;
    Link { seq, prev_hash, hash }
}

/// Put `row` in the chain after `prev` (the last row's seq and hash).
pub fn append(prev: &Anchor, row: AuditRow) -> ChainedRow {
    let seq = prev.seq + 1;
    let hash = link(seq, &prev.hash, &row);
    ChainedRow {
        seq,
        prev_hash: prev.hash.clone(),
        hash,
        row,
    }
}

/// Each of `rows` with its place, in order.
pub fn chained(links: Vec<Link>, rows: impl IntoIterator<Item = AuditRow>) -> Vec<ChainedRow> {
    links.into_iter().zip(rows).map(|(link, row)| link.chain(row)).collect()
}

/// The first break found in the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Break {
    /// Rows are missing before row `id` (`seq`): positions `expected` to
    /// `seq - 1` were removed.
    Removed {
        /// The first row present after the gap.
        id: String,
        /// Its position.
        seq: i64,
        /// The first missing position.
        expected: i64,
    },
    /// Row `id` does not follow the row before it: it was inserted, or the
    /// row before it was replaced.
    Inserted {
        /// The row.
        id: String,
        /// Its position.
        seq: i64,
    },
    /// Row `id`'s content no longer matches its hash.
    Edited {
        /// The row.
        id: String,
        /// Its position.
        seq: i64,
    },
    /// Row `id` is kept, yet the anchor (where retention left the chain,
    /// and verification starts) is at or after it: the anchor was moved,
    /// which would let verification pass over rows it no longer reaches.
    BeforeAnchor {
        /// The first row kept.
        id: String,
        /// Its position.
        seq: i64,
        /// The anchor's position.
        anchor: i64,
    },
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Break::Removed { id, seq, expected } if *expected + 1 == *seq => {
                write!(f, "row {expected} was removed (the chain resumes at row {seq}, {id})")
            }
            Break::Removed { id, seq, expected } => {
                write!(
                    f,
                    "rows {expected} to {} were removed (the chain resumes at row {seq}, {id})",
                    seq - 1
                )
            }
            Break::Inserted { id, seq } => {
                write!(
                    f,
                    "row {seq} ({id}) does not follow the row before it: inserted, or the row before it replaced"
                )
            }
            Break::Edited { id, seq } => write!(f, "row {seq} ({id}) was edited: its content does not match its hash"),
            Break::BeforeAnchor { id, seq, anchor } => write!(
                f,
                "row {seq} ({id}) is kept, but the chain's anchor is at row {anchor}: the anchor was moved past rows, which verification would not reach"
            ),
        }
    }
}

/// Walks rows in chain order and finds the first break.
#[derive(Debug)]
pub struct Verifier {
    prev: Anchor,
    /// Rows checked so far.
    pub checked: u64,
}

impl Verifier {
    /// Start at `anchor`.
    pub fn new(anchor: Anchor) -> Self {
        Verifier {
            prev: anchor,
            checked: 0,
        }
    }

    /// Check the next row.
    pub fn check(&mut self, row: &ChainedRow) -> Result<(), Break> {
        let expected = self.prev.seq + 1;
        if row.seq != expected {
            let id = row.row.id.clone();
            return Err(if row.seq > expected {
                Break::Removed {
                    id,
                    seq: row.seq,
                    expected,
                }
            } else {
                Break::Inserted { id, seq: row.seq }
            });
        }
        if link(row.seq, &row.prev_hash, &row.row) != row.hash {
            return Err(Break::Edited {
                id: row.row.id.clone(),
                seq: row.seq,
            });
        }
        if row.prev_hash != self.prev.hash {
            return Err(Break::Inserted {
                id: row.row.id.clone(),
                seq: row.seq,
            });
        }
        self.prev = Anchor {
            seq: row.seq,
            hash: row.hash.clone(),
        };
        self.checked += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn chain(n: usize) -> Vec<ChainedRow> {
        let mut prev = Anchor::default();
        (0..n)
            .map(|i| {
                let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
                row.login = format!("user{i}");
                let chained = append(&prev, row);
                prev = Anchor {
                    seq: chained.seq,
                    hash: chained.hash.clone(),
                };
                chained
            })
            .collect()
    }

    #[test]
    fn a_link_is_the_sha256_the_chain_has_always_been_defined_as() {
        use sha2::{Digest, Sha256};
        let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
        row.login = "ana".into();
        let json = serde_json::to_vec(&row).unwrap();
        let mut input = format!("7\n{GENESIS}\n").into_bytes();
        input.extend_from_slice(&json);
        assert_eq!(link(7, GENESIS, &row), format!("{:x}", Sha256::digest(&input)));
    }

    fn verify(rows: &[ChainedRow], anchor: Anchor) -> Result<u64, Break> {
        let mut verifier = Verifier::new(anchor);
        rows.iter().try_for_each(|r| verifier.check(r))?;
        Ok(verifier.checked)
    }

    #[test]
    fn an_untouched_chain_verifies() {
        assert_eq!(verify(&chain(5), Anchor::default()), Ok(5));
    }

    #[test]
    fn a_removed_row_is_named_by_its_position() {
        let mut rows = chain(5);
        rows.remove(2);
        let found = verify(&rows, Anchor::default()).unwrap_err();
        assert_eq!(
            found,
            Break::Removed {
                id: rows[2].row.id.clone(),
                seq: 4,
                expected: 3
            }
        );
        assert!(found.to_string().starts_with("row 3 was removed"), "{found}");
    }

    #[test]
    fn an_edited_row_is_named() {
        let mut rows = chain(5);
        rows[1].row.code = 200;
        assert_eq!(
            verify(&rows, Anchor::default()),
            Err(Break::Edited {
                id: rows[1].row.id.clone(),
                seq: 2
            })
        );
    }

    #[test]
    fn a_row_rehashed_after_an_edit_breaks_the_next_link() {
        let mut rows = chain(5);
        rows[1].row.login = "mallory".into();
        rows[1].hash = link(2, &rows[1].prev_hash, &rows[1].row);
        assert_eq!(
            verify(&rows, Anchor::default()),
            Err(Break::Inserted {
                id: rows[2].row.id.clone(),
                seq: 3
            })
        );
    }

    #[test]
    fn a_removed_row_renumbered_away_is_still_caught() {
        let mut rows = chain(4);
        rows.remove(1);
        for (i, row) in rows.iter_mut().enumerate().skip(1) {
            row.seq = i as i64 + 1;
            row.hash = link(row.seq, &row.prev_hash, &row.row);
        }
        assert_eq!(
            verify(&rows, Anchor::default()),
            Err(Break::Inserted {
                id: rows[1].row.id.clone(),
                seq: 2
            })
        );
    }

    fn tricky_row(via: &str) -> AuditRow {
        let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
        row.login = "ana \"quoted\"\nnewline é ✓ \u{7f}".into();
        row.query = "labelSelector=a%0Ab&x=<y>".into();
        row.via = via.into();
        row.bytes_out = u64::MAX;
        row.finish(Utc::now());
        row
    }

    #[test]
    fn the_carried_bytes_are_the_rows_json_and_hash_as_a_fresh_serialisation_does() {
        let mut prev = Anchor::default();
        let mut rows = Vec::new();
        for via in ["", "oauth:cli"] {
            let row = tricky_row(via);
            let encoded = Encoded::new(row.clone());
            assert_eq!(encoded.json(), serde_json::to_vec(&row).unwrap().as_slice());
            assert_eq!(encoded.line(), crate::audit::spool::encode(&row).unwrap().as_slice());
            let at = prev.clone();
            let placed = next(&mut prev, &encoded);
            assert_eq!(placed.hash, link(at.seq + 1, &at.hash, &row));
            assert_eq!(placed.chain(encoded.into_row()), append(&at, row.clone()));
            rows.push(append(&at, row));
        }
        assert_eq!(verify(&rows, Anchor::default()), Ok(2));
    }

    #[test]
    fn a_row_changed_after_it_was_encoded_is_not_the_row_chained() {
        let mut row = tricky_row("");
        let encoded = Encoded::new(row.clone());
        // The caller's copy changes; the encoded row cannot (no access but
        // `row()`), so what is hashed and what is stored stay one row.
        row.login = "mallory".into();
        let placed = next(&mut Anchor::default(), &encoded);
        let chained = placed.chain(encoded.into_row());
        assert_ne!(chained.row, row);
        assert_eq!(verify(std::slice::from_ref(&chained), Anchor::default()), Ok(1));
        // Pairing the link with another row (what carried bytes that differ
        // from their row would amount to) is caught as an edit.
        let forged = ChainedRow { row, ..chained };
        assert!(matches!(
            verify(&[forged], Anchor::default()),
            Err(Break::Edited { seq: 1, .. })
        ));
    }

    #[test]
    fn verification_starts_at_the_anchor_after_a_sweep() {
        let rows = chain(5);
        let anchor = Anchor {
            seq: rows[1].seq,
            hash: rows[1].hash.clone(),
        };
        assert_eq!(verify(&rows[2..], anchor), Ok(3));
        assert!(verify(&rows[2..], Anchor::default()).is_err());
    }
}
