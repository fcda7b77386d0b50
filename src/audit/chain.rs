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
use sha2::{Digest, Sha256};
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

/// The hash of `row` at position `seq` after a row hashed `prev_hash`:
/// lower-case hex SHA-256 over `seq`, `prev_hash` and the row's canonical
/// JSON (field order is the struct's, so it is stable).
pub fn link(seq: i64, prev_hash: &str, row: &AuditRow) -> String {
    let mut hasher = Sha256::new();
    hasher.update(seq.to_string().as_bytes());
    hasher.update(b"\n");
    hasher.update(prev_hash.as_bytes());
    hasher.update(b"\n");
    // Serializing plain strings, numbers, booleans and timestamps cannot fail.
    hasher.update(serde_json::to_vec(row).unwrap_or_default());
    // One formatting call for the whole digest: this runs for every row.
    format!("{:x}", hasher.finalize())
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
