//! Access requests (see `crate::access`): the rows, and how they are kept.

use super::principals::kind_of;
use super::sql::{params, OptionalExt, Row, SqlError};
use super::{Store, StoreError};
use crate::identity::{Grant, Principal};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::time::Duration;

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessState {
    /// Waiting for a decision.
    Pending,
    /// Approved: a grant exists.
    Approved,
    /// Denied.
    Denied,
    /// Nobody decided in time.
    Expired,
}

impl AccessState {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessState::Pending => "pending",
            AccessState::Approved => "approved",
            AccessState::Denied => "denied",
            AccessState::Expired => "expired",
        }
    }

    /// Parse the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        [
            AccessState::Pending,
            AccessState::Approved,
            AccessState::Denied,
            AccessState::Expired,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
    }
}

/// An access request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessRequest {
    /// Stable id.
    pub id: String,
    /// The person or bot the access is for (an agent's person or bot).
    pub requester: Principal,
    /// The agent that asked, if one did.
    pub agent_id: Option<String>,
    /// Cluster name.
    pub cluster: String,
    /// `None` for the whole cluster.
    pub namespace: Option<String>,
    /// Role name.
    pub role: String,
    /// How long the grant would last.
    pub duration: Duration,
    /// Why, in the requester's words.
    pub reason: String,
    /// Where it stands.
    pub state: AccessState,
    /// When asked.
    pub created_at: DateTime<Utc>,
    /// When it expires if nobody decides.
    pub expires_at: DateTime<Utc>,
    /// Who decided (login).
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The decider's reason (denials).
    pub decision_reason: Option<String>,
    /// The grant an approval created.
    pub grant_id: Option<String>,
}

const SELECT: &str = "SELECT id, kind, subject, agent_id, cluster, namespace, role, duration_secs, reason, state, created_at, expires_at, decided_by, decided_at, decision_reason, grant_id FROM access_requests";

/// The grant `id` rests on at the end of its chain of parents (a grant
/// narrowed for an agent session, or approved by an agent's own person,
/// rests on one of the person's own): a new grant rests there, so that no
/// chain grows (SQLite's trigger revokes children, not their children) and
/// it is revoked with the person's own grant, not with an agent's.
fn root_of(tx: &dyn super::sql::Db, id: &str) -> Result<String, StoreError> {
    let mut id = id.to_string();
    // Chains are one step long; the bound only stops a cycle.
    for _ in 0..8 {
        let found: Option<(Option<String>, Option<DateTime<Utc>>)> = tx
            .query_row(
                "SELECT parent_id, revoked_at FROM grants WHERE id = ?1",
                params![id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match found {
            Some((Some(parent), _)) => id = parent,
            // A child outliving its root (SQLite revokes children only,
            // not theirs) must not pass its life on.
            Some((None, Some(_))) => return Err(StoreError::Invalid(format!("grant {id} has been revoked"))),
            Some((None, None)) => return Ok(id),
            None => return Err(StoreError::Invalid(format!("grant {id} does not exist"))),
        }
    }
    Err(StoreError::Invalid(format!(
        "grant {id} rests on a chain of grants with no end"
    )))
}

/// What an approved grant rests on and who is given it besides its
/// subject.
#[derive(Debug, Clone, Copy, Default)]
pub struct Given<'a> {
    /// The grant it is revoked with: the one on whose strength the agent's
    /// own person approved it.
    pub parent: Option<&'a str>,
    /// The delegated agent given it.
    pub agent_id: Option<&'a str>,
}

impl Store {
    /// Store a new request.
    pub fn insert_access_request(&self, r: &AccessRequest) -> Result<(), StoreError> {
        self.insert_access_request_within(r, usize::MAX).map(|_| ())
    }

    /// Insert a request unless its requester already has `pending_limit`
    /// pending (false then): counted in the insert's write transaction
    /// (serializable on PostgreSQL), so racing requests cannot all pass.
    pub fn insert_access_request_within(&self, r: &AccessRequest, pending_limit: usize) -> Result<bool, StoreError> {
        self.write(|tx| {
            super::exists(tx, &r.requester)?;
            if pending_of(tx, &r.requester, r.created_at)? >= pending_limit {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO access_requests (id, kind, subject, agent_id, cluster, namespace, role, duration_secs, reason, state, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![r.id, r.requester.kind.as_str(), r.requester.name, r.agent_id, r.cluster, r.namespace, r.role, r.duration.as_secs() as i64, r.reason, r.state.as_str(), r.created_at, r.expires_at],
            )?;
            Ok(true)
        })
    }

    /// One request.
    pub fn access_request(&self, id: &str) -> Result<Option<AccessRequest>, StoreError> {
        self.with(|c| {
            Ok(
                c.query_row(&format!("{SELECT} WHERE id = ?1"), params![id], request_row)
                    .optional()?,
            )
        })
    }

    /// Every request, oldest first.
    pub fn list_access_requests(&self) -> Result<Vec<AccessRequest>, StoreError> {
        self.with(|c| Ok(c.query_map(&format!("{SELECT} ORDER BY created_at, id"), params![], request_row)?))
    }

    /// In one transaction: mark the pending request approved by `by`, add
    /// `grant` (revoked with the grant it rests on, if any), and give it to
    /// the delegated agent, if any ([`Given`]). Fails,
    /// adding nothing, if the request is no longer pending (decided by
    /// someone else, on any replica: the state changes only where it is
    /// still `pending`).
    pub fn approve_access_request(
        &self,
        id: &str,
        grant: &Grant,
        given: Given<'_>,
        by: &str,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.write(|tx| {
            // Disabled since the caller checked: no grant for it (a
            // serializable write, so a disable racing it is seen or comes
            // after and revokes as it does).
            let disabled: Option<bool> = tx
                .query_row(
                    "SELECT disabled FROM principals WHERE kind = ?1 AND name = ?2",
                    params![grant.subject.kind.as_str(), grant.subject.name],
                    |r| r.get(0),
                )
                .optional()?;
            if disabled != Some(false) {
                return Err(StoreError::Invalid(format!("{} is disabled or gone", grant.subject)));
            }
            // The agent that asked, delegated or not.
            let asker: Option<String> = tx
                .query_row("SELECT agent_id FROM access_requests WHERE id = ?1", params![id], |r| r.get(0))
                .optional()?
                .flatten();
            if let Some(agent) = asker {
                let off: Option<bool> = tx
                    .query_row("SELECT disabled FROM agents WHERE id = ?1", params![agent], |r| r.get(0))
                    .optional()?;
                if off != Some(false) {
                    return Err(StoreError::Invalid(format!("agent {agent} is disabled or gone")));
                }
            }
            let parent = match given.parent {
                Some(parent) => Some(root_of(tx, parent)?),
                None => None,
            };
            tx.execute(
                "INSERT INTO grants (id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at, parent_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![grant.id, grant.subject.kind.as_str(), grant.subject.name, grant.cluster, grant.namespace, grant.role, grant.expires_at, grant.granted_by, grant.created_at, parent],
            )?;
            if let Some(agent) = given.agent_id {
                tx.execute("INSERT INTO agent_grants (agent_id, grant_id) VALUES (?1, ?2)", params![agent, grant.id])?;
            }
            let changed = tx.execute(
                "UPDATE access_requests SET state = 'approved', decided_by = ?2, decided_at = ?3, grant_id = ?4, decision_reason = ?5 WHERE id = ?1 AND state = 'pending'",
                params![id, by, at, grant.id, reason],
            )?;
            if changed == 0 {
                return Err(StoreError::Invalid(format!("access request {id} is no longer pending")));
            }
            Ok(())
        })
    }

    /// Close a pending request as denied or expired; `false` if it was not
    /// pending any more.
    pub fn close_access_request(
        &self,
        id: &str,
        state: AccessState,
        by: Option<&str>,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.with(|c| {
            let changed = c.execute(
                "UPDATE access_requests SET state = ?2, decided_by = ?3, decision_reason = ?4, decided_at = ?5 WHERE id = ?1 AND state = 'pending'",
                params![id, state.as_str(), by, reason, at],
            )?;
            Ok(changed == 1)
        })
    }

    /// Whether `principal` is disabled; `None` if it does not exist.
    pub fn principal_disabled(&self, principal: &Principal) -> Result<Option<bool>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT disabled FROM principals WHERE kind = ?1 AND name = ?2",
                params![principal.kind.as_str(), principal.name],
                |r| r.get(0),
            )
            .optional()?)
        })
    }
}

fn request_row(r: &Row) -> Result<AccessRequest, SqlError> {
    let state: String = r.get(9)?;
    let state = AccessState::parse(&state).ok_or_else(|| SqlError::decode(9, format!("bad state {state}")))?;
    let seconds: i64 = r.get(7)?;
    Ok(AccessRequest {
        id: r.get(0)?,
        requester: Principal {
            kind: kind_of(r, 1)?,
            name: r.get(2)?,
        },
        agent_id: r.get(3)?,
        cluster: r.get(4)?,
        namespace: r.get(5)?,
        role: r.get(6)?,
        duration: Duration::from_secs(seconds.max(0) as u64),
        reason: r.get(8)?,
        state,
        created_at: r.get(10)?,
        expires_at: r.get(11)?,
        decided_by: r.get(12)?,
        decided_at: r.get(13)?,
        decision_reason: r.get(14)?,
        grant_id: r.get(15)?,
    })
}

/// How many of `requester`'s requests are pending and not expired at `now`.
fn pending_of(c: &dyn super::sql::Db, requester: &Principal, now: DateTime<Utc>) -> Result<usize, StoreError> {
    let n: i64 = c.query_row(
        "SELECT COUNT(*) FROM access_requests WHERE kind = ?1 AND subject = ?2 AND state = 'pending' \
         AND expires_at > ?3",
        params![requester.kind.as_str(), requester.name, now],
        |r| r.get(0),
    )?;
    Ok(n.max(0) as usize)
}

/// A pending request of `requester` (or its agent) for `editor` in `shop`
/// of cluster `c`, for an hour, expiring in half an hour: the tests'.
#[cfg(test)]
pub(crate) fn pending_for_tests(id: &str, requester: &Principal, agent_id: Option<&str>) -> AccessRequest {
    let now = Utc::now();
    AccessRequest {
        id: id.into(),
        requester: requester.clone(),
        agent_id: agent_id.map(Into::into),
        cluster: "c".into(),
        namespace: Some("shop".into()),
        role: "editor".into(),
        duration: Duration::from_secs(3600),
        reason: "deploy".into(),
        state: AccessState::Pending,
        created_at: now,
        expires_at: now + chrono::TimeDelta::minutes(30),
        decided_by: None,
        decided_at: None,
        decision_reason: None,
        grant_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn request(id: &str, requester: &Principal, agent_id: Option<&str>) -> AccessRequest {
        pending_for_tests(id, requester, agent_id)
    }

    fn grant(id: &str, subject: &Principal) -> Grant {
        Grant {
            id: id.into(),
            subject: subject.clone(),
            cluster: "c".into(),
            namespace: Some("shop".into()),
            role: "editor".into(),
            expires_at: Utc::now() + chrono::TimeDelta::hours(1),
            granted_by: "bob".into(),
            created_at: Utc::now(),
            revoked_at: None,
        }
    }

    /// The pending cap is counted with the insert: racing requests, each
    /// on a connection of its own on PostgreSQL, do not all pass it; an
    /// expired request is not counted.
    #[test]
    fn access_requests_racing_to_the_limit_are_kept_no_more_than_it() {
        for store in testing::both() {
            let b = store.backend;
            let ana = Principal::person("ana");
            store.add_principal(&ana, false).unwrap();
            let mut expired = request("old", &ana, None);
            expired.expires_at = Utc::now() - chrono::TimeDelta::minutes(1);
            store.insert_access_request(&expired).unwrap();
            let limit = 3;
            let kept = testing::race(8, |i| {
                let ask = request(&format!("r{i}"), &ana, None);
                store.insert_access_request_within(&ask, limit).unwrap()
            });
            let kept = kept.into_iter().filter(|&yes| yes).count();
            assert_eq!(kept, limit, "{b}");
            assert_eq!(store.list_access_requests().unwrap().len(), limit + 1, "{b}");
        }
    }

    /// The requester disabled after the caller's check, before the
    /// approval's transaction: no grant (checked inside it).
    #[test]
    fn a_request_of_a_requester_disabled_meanwhile_makes_no_grant() {
        for store in testing::both() {
            let b = store.backend;
            let bo = Principal::person("bo");
            store.add_principal(&bo, false).unwrap();
            store.insert_access_request(&request("r1", &bo, None)).unwrap();
            store.disable_principal(&bo).unwrap();
            let given = Given {
                parent: None,
                agent_id: None,
            };
            let refused = store.approve_access_request("r1", &grant("g1", &bo), given, "ana", None, Utc::now());
            assert!(matches!(refused, Err(StoreError::Invalid(_))), "{b}: {refused:?}");
            assert!(store.grants_of(&bo, "c").unwrap().is_empty(), "{b}");
            let pending = store.access_request("r1").unwrap().unwrap();
            assert_eq!(pending.state, AccessState::Pending, "{b}");
            // The agent that asked, disabled meanwhile, whether it is handed
            // the grant or not.
            let cy = Principal::person("cy");
            store.add_principal(&cy, false).unwrap();
            let agent = store.add_agent(&cy, "helper", &[], false).unwrap();
            store
                .insert_access_request(&request("r2", &cy, Some(&agent.id)))
                .unwrap();
            store.disable_agent(&agent.id).unwrap();
            let given = Given {
                parent: None,
                agent_id: None,
            };
            let refused = store.approve_access_request("r2", &grant("g2", &cy), given, "ana", None, Utc::now());
            assert!(matches!(refused, Err(StoreError::Invalid(_))), "{b}: {refused:?}");
        }
    }

    /// A grant approved on the strength of another rests on the root of
    /// that one's chain, is revoked with it, and none rests on a revoked
    /// root.
    #[test]
    fn an_approved_grant_rests_on_the_root_of_its_parents_chain_and_ends_with_it() {
        for store in testing::both() {
            let b = store.backend;
            let ana = Principal::person("ana");
            store.add_principal(&ana, false).unwrap();
            store.add_grant(&grant("root", &ana)).unwrap();
            let approve = |request_id: &str, grant_id: &str, parent: &str| {
                store.insert_access_request(&request(request_id, &ana, None)).unwrap();
                let given = Given {
                    parent: Some(parent),
                    agent_id: None,
                };
                store.approve_access_request(request_id, &grant(grant_id, &ana), given, "ana", None, Utc::now())
            };
            approve("r1", "child", "root").unwrap();
            approve("r2", "second", "child").unwrap();
            let parents: Vec<Option<String>> = ["child", "second"]
                .iter()
                .map(|id| {
                    store
                        .with(|c| {
                            Ok(c.query_row("SELECT parent_id FROM grants WHERE id = ?1", params![id], |r| r.get(0))?)
                        })
                        .unwrap()
                })
                .collect();
            assert_eq!(parents, [Some("root".to_string()), Some("root".to_string())], "{b}");
            store.revoke_grant("root").unwrap();
            assert!(store.grants_of(&ana, "c").unwrap().is_empty(), "{b}: all ended with it");
            let refused = approve("r3", "late", "child");
            assert!(matches!(refused, Err(StoreError::Invalid(_))), "{b}: {refused:?}");
        }
    }

    /// On PostgreSQL, another replica may give a child of a grant (an
    /// approval resting on it, an agent's narrowed grant) while this one
    /// revokes it: the revocation's trigger cannot see the child not yet
    /// committed, so one of the two must be refused and run again.
    #[test]
    fn a_grant_revoked_while_another_replica_gives_a_child_of_it_ends_that_child_too() {
        let store = testing::postgres();
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        store.add_grant(&grant("root", &ana)).unwrap();
        let (given, revoke) = std::sync::mpsc::channel();
        let (revoked, resume) = std::sync::mpsc::channel();
        let mut attempts = 0;
        let child = std::thread::scope(|s| {
            let store = &store;
            let revoking = s.spawn(move || {
                revoke.recv().unwrap();
                let done = store.revoke_grant("root");
                revoked.send(()).unwrap();
                done
            });
            // What giving a child does (`root_of`, then the insert), held
            // open on its first attempt until the revocation has returned.
            let child = store.write(|tx| {
                attempts += 1;
                if root_of(tx, "root").is_err() {
                    return Ok(false);
                }
                tx.execute(
                    "INSERT INTO grants (id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at, parent_id) \
                     SELECT 'child', kind, subject, cluster, namespace, role, expires_at, 'ana', created_at, id FROM grants WHERE id = 'root'",
                    params![],
                )?;
                if attempts == 1 {
                    given.send(()).unwrap();
                    resume.recv().unwrap();
                }
                Ok(true)
            });
            revoking.join().unwrap().expect("the revocation commits");
            child
        });
        let outliving: i64 = store
            .with(|c| {
                Ok(c.query_row(
                    "SELECT COUNT(*) FROM grants g JOIN grants p ON g.parent_id = p.id \
                     WHERE g.revoked_at IS NULL AND p.revoked_at IS NOT NULL",
                    params![],
                    |r| r.get(0),
                )?)
            })
            .unwrap();
        assert_eq!(outliving, 0, "a child outlives its revoked parent (given: {child:?})");
        assert!(!child.unwrap(), "given again, it finds the parent revoked");
        assert_eq!(attempts, 2);
    }

    #[test]
    fn an_access_request_is_approved_once_and_its_grant_goes_to_the_asking_agent() {
        for store in testing::both() {
            let ana = Principal::person("ana");
            store.add_principal(&ana, false).unwrap();
            let agent = store.add_agent(&ana, "helper", &[], false).unwrap();
            store
                .insert_access_request(&request("r1", &ana, Some(&agent.id)))
                .unwrap();
            let approvals: Vec<_> = std::thread::scope(|s| {
                let runs: Vec<_> = ["g1", "g2"]
                    .map(|id| {
                        let (store, ana, agent) = (&store, &ana, &agent.id);
                        s.spawn(move || {
                            store.approve_access_request(
                                "r1",
                                &grant(id, ana),
                                Given {
                                    parent: None,
                                    agent_id: Some(agent),
                                },
                                "bob",
                                None,
                                Utc::now(),
                            )
                        })
                    })
                    .into_iter()
                    .collect();
                runs.into_iter().map(|run| run.join().unwrap()).collect()
            });
            assert_eq!(
                approvals.iter().filter(|a| a.is_ok()).count(),
                1,
                "{}: {approvals:?}",
                store.backend
            );
            let decided = store.access_request("r1").unwrap().unwrap();
            let granted = decided.grant_id.clone().unwrap();
            assert_eq!(
                (decided.state, decided.decided_by.as_deref()),
                (AccessState::Approved, Some("bob")),
                "{}",
                store.backend
            );
            let lost = if granted == "g1" { "g2" } else { "g1" };
            assert!(
                matches!(store.grant(lost), Err(StoreError::NotFound(_))),
                "{}",
                store.backend
            );
            let agent = store.agent(&agent.id).unwrap().unwrap();
            assert_eq!(agent.grant_ids, Some(vec![granted]), "{}", store.backend);
            let late = store.close_access_request("r1", AccessState::Denied, Some("eve"), None, Utc::now());
            assert!(!late.unwrap(), "{}", store.backend);
        }
    }

    #[test]
    fn a_pending_request_is_closed_once_and_listed_with_its_decision() {
        for store in testing::both() {
            let ci = Principal::bot("ci");
            store.add_principal(&ci, false).unwrap();
            let missing = store.insert_access_request(&request("r0", &Principal::bot("nobody"), None));
            assert!(matches!(missing, Err(StoreError::NotFound(_))), "{}", store.backend);
            store.insert_access_request(&request("r1", &ci, None)).unwrap();
            store.insert_access_request(&request("r2", &ci, None)).unwrap();
            let at = Utc::now();
            assert!(store
                .close_access_request("r1", AccessState::Denied, Some("bob"), Some("no"), at)
                .unwrap());
            assert!(!store
                .close_access_request("r1", AccessState::Expired, None, None, at)
                .unwrap());
            let listed = store.list_access_requests().unwrap();
            let states: Vec<_> = listed.iter().map(|r| (r.id.as_str(), r.state)).collect();
            assert_eq!(
                states,
                [("r1", AccessState::Denied), ("r2", AccessState::Pending)],
                "{}",
                store.backend
            );
            assert_eq!(listed[0].decision_reason.as_deref(), Some("no"), "{}", store.backend);
            assert_eq!(listed[1].duration, Duration::from_secs(3600), "{}", store.backend);
            assert_eq!(store.principal_disabled(&ci).unwrap(), Some(false), "{}", store.backend);
            assert_eq!(store.principal_disabled(&Principal::bot("nobody")).unwrap(), None);
        }
    }
}
