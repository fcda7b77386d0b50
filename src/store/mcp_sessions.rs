//! Sessions of the 2025-11-25 MCP revision (see `crate::mcp::sessions`), by
//! the SHA-256 of their id only. The state is opaque JSON here: what it
//! means is the MCP layer's business.

use super::sql::{params, OptionalExt};
use super::{Store, StoreError};
use chrono::{DateTime, Utc};

/// Who began a session, and when it was last used (if it is still kept).
pub type OwnerAndUse = (String, Option<DateTime<Utc>>);

impl Store {
    /// Keep a session's state under the SHA-256 of its id (replacing what was
    /// there), as used now.
    pub fn save_mcp_session(&self, id_sha256: &str, state: &str) -> Result<(), StoreError> {
        let now = Utc::now();
        self.with(|c| {
            c.execute(
                "INSERT INTO mcp_sessions (id_sha256, state, created_at, last_used_at) VALUES (?1, ?2, ?3, ?3) \
                 ON CONFLICT (id_sha256) DO UPDATE SET state = excluded.state, last_used_at = excluded.last_used_at",
                params![id_sha256, state, now],
            )?;
            Ok(())
        })
    }

    /// The state of the session whose id hashes to `id_sha256`, if it was
    /// used after `used_after`; it counts as used now.
    pub fn mcp_session(&self, id_sha256: &str, used_after: DateTime<Utc>) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "UPDATE mcp_sessions SET last_used_at = ?3 WHERE id_sha256 = ?1 AND last_used_at > ?2 RETURNING state",
                params![id_sha256, used_after, Utc::now()],
                |r| r.get(0),
            )
            .optional()?)
        })
    }

    /// Note that a session rmcp serves from memory is in use, so that a
    /// sweep keeps it for the replicas and restarts that would restore it.
    pub fn touch_mcp_session(&self, id_sha256: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE mcp_sessions SET last_used_at = ?2 WHERE id_sha256 = ?1 AND last_used_at < ?2",
                params![id_sha256, Utc::now()],
            )?;
            Ok(())
        })
    }

    /// Set every session's last use to `at` (tests age sessions so).
    #[cfg(test)]
    pub(crate) fn set_mcp_sessions_last_used(&self, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute("UPDATE mcp_sessions SET last_used_at = ?1", params![at])?;
            Ok(())
        })
    }

    /// Forget a session and who began it (the client ended it).
    pub fn delete_mcp_session(&self, id_sha256: &str) -> Result<(), StoreError> {
        self.write(|c| {
            c.execute("DELETE FROM mcp_sessions WHERE id_sha256 = ?1", params![id_sha256])?;
            c.execute(
                "DELETE FROM mcp_session_owners WHERE id_sha256 = ?1",
                params![id_sha256],
            )?;
            Ok(())
        })
    }

    /// Note that agent `agent_id` began the session whose id hashes to
    /// `id_sha256` (the first to say so keeps it). An agent keeps at most
    /// `most` sessions: beginning another forgets its least recently used,
    /// so no agent fills the store with sessions it never ends.
    pub fn own_mcp_session(&self, id_sha256: &str, agent_id: &str, most: usize) -> Result<(), StoreError> {
        self.write(|c| {
            c.execute(
                "INSERT INTO mcp_session_owners (id_sha256, agent_id, created_at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                params![id_sha256, agent_id, Utc::now()],
            )?;
            let kept: i64 = c.query_row(
                "SELECT COUNT(*) FROM mcp_session_owners WHERE agent_id = ?1",
                params![agent_id],
                |r| r.get(0),
            )?;
            let over = usize::try_from(kept).unwrap_or(0).saturating_sub(most);
            if over == 0 {
                return Ok(());
            }
            let oldest: Vec<String> = c.query_map(
                "SELECT o.id_sha256 FROM mcp_session_owners o LEFT JOIN mcp_sessions s ON s.id_sha256 = o.id_sha256 \
                 WHERE o.agent_id = ?1 AND o.id_sha256 <> ?2 \
                 ORDER BY COALESCE(s.last_used_at, o.created_at), o.id_sha256 LIMIT ?3",
                params![agent_id, id_sha256, i64::try_from(over).unwrap_or(i64::MAX)],
                |r| r.get(0),
            )?;
            for id in oldest {
                c.execute("DELETE FROM mcp_sessions WHERE id_sha256 = ?1", params![id])?;
                c.execute("DELETE FROM mcp_session_owners WHERE id_sha256 = ?1", params![id])?;
            }
            Ok(())
        })
    }

    /// The agent that began the session whose id hashes to `id_sha256`, and
    /// when the session was last used (if it is still kept).
    pub fn mcp_session_owner_and_use(&self, id_sha256: &str) -> Result<Option<OwnerAndUse>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT o.agent_id, s.last_used_at FROM mcp_session_owners o \
                 LEFT JOIN mcp_sessions s ON s.id_sha256 = o.id_sha256 WHERE o.id_sha256 = ?1",
                params![id_sha256],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
        })
    }

    /// The agent that began the session whose id hashes to `id_sha256`.
    pub fn mcp_session_owner(&self, id_sha256: &str) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT agent_id FROM mcp_session_owners WHERE id_sha256 = ?1",
                params![id_sha256],
                |r| r.get(0),
            )
            .optional()?)
        })
    }

    /// Forget every session last used at or before `older_than`; returns how
    /// many. An owner noted that long ago whose session was never kept (rmcp
    /// goes on when its store fails) goes too.
    pub fn sweep_mcp_sessions(&self, older_than: DateTime<Utc>) -> Result<usize, StoreError> {
        // One transaction: a session used between the two deletes keeps its owner.
        self.write(|c| {
            c.execute(
                "DELETE FROM mcp_session_owners WHERE id_sha256 IN \
                 (SELECT id_sha256 FROM mcp_sessions WHERE last_used_at <= ?1)",
                params![older_than],
            )?;
            c.execute(
                "DELETE FROM mcp_session_owners WHERE created_at <= ?1 AND id_sha256 NOT IN \
                 (SELECT id_sha256 FROM mcp_sessions)",
                params![older_than],
            )?;
            Ok(c.execute("DELETE FROM mcp_sessions WHERE last_used_at <= ?1", params![older_than])?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;
    use chrono::TimeDelta;

    #[test]
    fn a_session_is_found_until_it_is_deleted_or_unused_for_too_long() {
        for store in testing::both() {
            let b = store.backend;
            let day_ago = Utc::now() - TimeDelta::days(1);
            store.save_mcp_session("a", r#"{"v":1}"#).unwrap();
            store.save_mcp_session("a", r#"{"v":2}"#).unwrap();
            store.save_mcp_session("b", "{}").unwrap();
            assert_eq!(
                store.mcp_session("a", day_ago).unwrap().as_deref(),
                Some(r#"{"v":2}"#),
                "{b}"
            );
            assert_eq!(store.mcp_session("never", day_ago).unwrap(), None, "{b}");
            store.delete_mcp_session("a").unwrap();
            assert_eq!(
                store.mcp_session("a", day_ago).unwrap(),
                None,
                "{b}: a deleted session is gone"
            );
            let later = Utc::now() + TimeDelta::seconds(1);
            assert_eq!(
                store.mcp_session("b", later).unwrap(),
                None,
                "{b}: a session unused since the cutoff is not found"
            );
            assert_eq!(
                store.sweep_mcp_sessions(day_ago).unwrap(),
                0,
                "{b}: a recent session stays"
            );
            assert_eq!(store.sweep_mcp_sessions(later).unwrap(), 1, "{b}");
            assert_eq!(store.mcp_session("b", day_ago).unwrap(), None, "{b}");
        }
    }

    /// An agent keeps at most so many sessions: the one it begins stays,
    /// its least recently used goes, and another agent's are untouched.
    #[test]
    fn an_agent_past_its_sessions_forgets_its_least_recently_used() {
        for store in testing::both() {
            let b = store.backend;
            store.save_mcp_session("other", "{}").unwrap();
            store.own_mcp_session("other", "agent-2", 2).unwrap();
            for id in ["s1", "s2", "s3"] {
                store.save_mcp_session(id, "{}").unwrap();
                store.own_mcp_session(id, "agent-1", 2).unwrap();
                if id == "s2" {
                    // s1 used after s2 began: s2 is then the least recent.
                    let later = Utc::now() + TimeDelta::seconds(1);
                    store
                        .with(|c| {
                            c.execute(
                                "UPDATE mcp_sessions SET last_used_at = ?1 WHERE id_sha256 = 's1'",
                                params![later],
                            )?;
                            Ok(())
                        })
                        .unwrap();
                }
            }
            let owner = |id| store.mcp_session_owner(id).unwrap();
            assert_eq!(owner("s2"), None, "{b}");
            assert_eq!(
                store.mcp_session("s2", Utc::now() - TimeDelta::days(1)).unwrap(),
                None,
                "{b}"
            );
            assert_eq!(owner("s1").as_deref(), Some("agent-1"), "{b}");
            assert_eq!(owner("s3").as_deref(), Some("agent-1"), "{b}: the new one stays");
            assert_eq!(owner("other").as_deref(), Some("agent-2"), "{b}");
        }
    }

    #[test]
    fn an_ended_or_never_kept_session_leaves_no_owner_behind() {
        for store in testing::both() {
            let b = store.backend;
            store.save_mcp_session("a", "{}").unwrap();
            store.own_mcp_session("a", "agent-1", 100).unwrap();
            store.delete_mcp_session("a").unwrap();
            assert_eq!(
                store.mcp_session_owner("a").unwrap(),
                None,
                "{b}: ended with its session"
            );
            // rmcp goes on when its store fails: an owner without a session.
            store.own_mcp_session("lost", "agent-1", 100).unwrap();
            let day_ago = Utc::now() - TimeDelta::days(1);
            store.sweep_mcp_sessions(day_ago).unwrap();
            assert!(
                store.mcp_session_owner("lost").unwrap().is_some(),
                "{b}: its session may yet be kept"
            );
            store.sweep_mcp_sessions(Utc::now() + TimeDelta::seconds(1)).unwrap();
            assert_eq!(
                store.mcp_session_owner("lost").unwrap(),
                None,
                "{b}: swept once as old as an unused session"
            );
        }
    }

    #[test]
    fn a_touched_session_is_kept_by_a_sweep() {
        for store in testing::both() {
            let b = store.backend;
            store.save_mcp_session("busy", "{}").unwrap();
            store.own_mcp_session("busy", "agent-1", 100).unwrap();
            store
                .set_mcp_sessions_last_used(Utc::now() - TimeDelta::days(2))
                .unwrap();
            store.touch_mcp_session("busy").unwrap();
            let day_ago = Utc::now() - TimeDelta::days(1);
            assert_eq!(store.sweep_mcp_sessions(day_ago).unwrap(), 0, "{b}");
            assert_eq!(
                store.mcp_session_owner("busy").unwrap().as_deref(),
                Some("agent-1"),
                "{b}"
            );
        }
    }

    #[test]
    fn loading_a_session_counts_as_using_it() {
        for store in testing::both() {
            let b = store.backend;
            // PostgreSQL keeps microseconds: each use is a few apart from `between`.
            let pause = || {
                let start = Utc::now();
                while Utc::now() < start + TimeDelta::microseconds(3) {
                    std::hint::spin_loop();
                }
            };
            store.save_mcp_session("a", "{}").unwrap();
            store.save_mcp_session("b", "{}").unwrap();
            pause();
            let between = Utc::now();
            pause();
            assert!(
                store.mcp_session("a", between - TimeDelta::days(1)).unwrap().is_some(),
                "{b}"
            );
            assert_eq!(
                store.sweep_mcp_sessions(between).unwrap(),
                1,
                "{b}: only b was unused since"
            );
            assert!(store.mcp_session("a", between).unwrap().is_some(), "{b}");
        }
    }

    #[test]
    fn the_first_agent_to_own_a_session_keeps_it_until_the_session_is_swept() {
        for store in testing::both() {
            let b = store.backend;
            store.save_mcp_session("a", "{}").unwrap();
            store.own_mcp_session("a", "agent-1", 100).unwrap();
            store.own_mcp_session("a", "agent-2", 100).unwrap();
            assert_eq!(store.mcp_session_owner("a").unwrap().as_deref(), Some("agent-1"), "{b}");
            store.sweep_mcp_sessions(Utc::now() + TimeDelta::seconds(1)).unwrap();
            assert_eq!(
                store.mcp_session_owner("a").unwrap(),
                None,
                "{b}: swept with its session"
            );
        }
    }
}
