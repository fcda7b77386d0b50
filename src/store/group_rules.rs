//! Group rules and the grants they make: a rule maps a group of the
//! identity provider's groups claim to a role on a cluster or namespace;
//! each person signed in with the group holds one real grant row per rule
//! (its `rule_id` set), so the policy stage sends it and the reconciler
//! binds it like any grant. The domain side (what a sign-in wants, the
//! audit) is `crate::signin::groups`.

use super::grants::grant_row;
use super::sql::{params, Db, OptionalExt, Params, Row, SqlError};
use super::{Store, StoreError};
use crate::identity::{Grant, Principal};
use chrono::{DateTime, Utc};

/// People signed in with `group` hold `role` on `cluster`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupRule {
    /// Stable id; its grants say `granted_by = rule:<id>`.
    pub id: String,
    /// The group, exactly as the groups claim names it.
    pub group: String,
    /// Cluster name.
    pub cluster: String,
    /// `None` for the whole cluster.
    pub namespace: Option<String>,
    /// Role name.
    pub role: String,
    /// Who added it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
}

impl GroupRule {
    /// What its grants record as `granted_by`.
    pub fn granted_by(&self) -> String {
        format!("rule:{}", self.id)
    }
}

/// What bringing a person's rule grants up to date did to one grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleGrantChange {
    /// A new grant from the rule.
    Granted(Grant),
    /// The grant the person held from the rule lasts longer now.
    Extended(Grant),
    /// The person is no longer in the rule's group: the grant ends.
    Revoked(Grant),
}

const RULE_SELECT: &str = "SELECT id, group_name, cluster, namespace, role, created_by, created_at FROM group_rules";

impl Store {
    /// Add a rule.
    pub fn add_group_rule(&self, rule: &GroupRule) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO group_rules (id, group_name, cluster, namespace, role, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![rule.id, rule.group, rule.cluster, rule.namespace, rule.role, rule.created_by, rule.created_at],
            )?;
            Ok(())
        })
    }

    /// Every rule, oldest first.
    pub fn group_rules(&self) -> Result<Vec<GroupRule>, StoreError> {
        self.with(|c| Ok(c.query_map(&format!("{RULE_SELECT} ORDER BY created_at, id"), params![], rule_row)?))
    }

    /// Remove rule `id` and revoke the grants it made; returns the rule and
    /// the grants revoked (in effect or not).
    pub fn remove_group_rule(&self, id: &str) -> Result<(GroupRule, Vec<Grant>), StoreError> {
        self.write(|tx| {
            let rule = tx
                .query_row(&format!("{RULE_SELECT} WHERE id = ?1"), params![id], rule_row)
                .optional()?
                .ok_or_else(|| StoreError::NotFound(format!("group rule {id}")))?;
            let grants: Vec<Grant> = rule_grants(tx, "rule_id = ?1", params![id])?
                .into_iter()
                .map(|(_, g)| g)
                .collect();
            let now = Utc::now();
            for grant in &grants {
                revoke(tx, &grant.id, now)?;
            }
            tx.execute("DELETE FROM group_rules WHERE id = ?1", params![id])?;
            let revoked = grants.into_iter().map(|g| Grant {
                revoked_at: Some(now),
                ..g
            });
            Ok((rule, revoked.collect()))
        })
    }

    /// Bring `person`'s rule grants in step with `wanted` (each rule the
    /// person's groups match, with the grant it would make): a rule's grant
    /// the person holds already is extended to the new expiry when that is
    /// later, a missing one is added, and the grant of every rule not
    /// wanted is revoked. One transaction.
    pub fn sync_rule_grants(
        &self,
        person: &Principal,
        wanted: &[(String, Grant)],
    ) -> Result<Vec<RuleGrantChange>, StoreError> {
        self.write(|tx| {
            let held = rule_grants(
                tx,
                "kind = ?1 AND subject = ?2",
                params![person.kind.as_str(), person.name],
            )?;
            let mut changes = Vec::new();
            let now = Utc::now();
            for (rule_id, grant) in &held {
                if !wanted.iter().any(|(id, _)| id == rule_id) {
                    revoke(tx, &grant.id, now)?;
                    changes.push(RuleGrantChange::Revoked(Grant {
                        revoked_at: Some(now),
                        ..grant.clone()
                    }));
                }
            }
            for (rule_id, candidate) in wanted {
                // The rules were read before this transaction: one removed
                // since (its grants revoked with it) gives nothing.
                let kept: i64 = tx.query_row(
                    "SELECT COUNT(*) FROM group_rules WHERE id = ?1",
                    params![rule_id],
                    |r| r.get(0),
                )?;
                if kept == 0 {
                    continue;
                }
                match held.iter().find(|(id, _)| id == rule_id) {
                    Some((_, grant)) if grant.expires_at >= candidate.expires_at => {}
                    Some((_, grant)) => {
                        tx.execute(
                            "UPDATE grants SET expires_at = ?2 WHERE id = ?1",
                            params![grant.id, candidate.expires_at],
                        )?;
                        changes.push(RuleGrantChange::Extended(Grant {
                            expires_at: candidate.expires_at,
                            ..grant.clone()
                        }));
                    }
                    None => {
                        insert(tx, rule_id, candidate)?;
                        changes.push(RuleGrantChange::Granted(candidate.clone()));
                    }
                }
            }
            Ok(changes)
        })
    }
}

/// The unrevoked rule grants matching `filter`, with their rule ids.
fn rule_grants(c: &dyn Db, filter: &str, args: Params<'_>) -> Result<Vec<(String, Grant)>, StoreError> {
    let sql = format!(
        "SELECT id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at, revoked_at, rule_id \
         FROM grants WHERE rule_id IS NOT NULL AND revoked_at IS NULL AND {filter} ORDER BY created_at, id"
    );
    Ok(c.query_map(&sql, args, |r| Ok((r.get::<_, String>(10)?, grant_row(r)?)))?)
}

fn insert(c: &dyn Db, rule_id: &str, grant: &Grant) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO grants (id, kind, subject, cluster, namespace, role, expires_at, granted_by, created_at, rule_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![grant.id, grant.subject.kind.as_str(), grant.subject.name, grant.cluster, grant.namespace, grant.role, grant.expires_at, grant.granted_by, grant.created_at, rule_id],
    )?;
    Ok(())
}

fn revoke(c: &dyn Db, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
    c.execute(
        "UPDATE grants SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
        params![id, at],
    )?;
    Ok(())
}

fn rule_row(r: &Row) -> Result<GroupRule, SqlError> {
    Ok(GroupRule {
        id: r.get(0)?,
        group: r.get(1)?,
        cluster: r.get(2)?,
        namespace: r.get(3)?,
        role: r.get(4)?,
        created_by: r.get(5)?,
        created_at: r.get(6)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;
    use chrono::SubsecRound;

    /// Now, as precisely as both stores keep a time (PostgreSQL: microseconds).
    fn now() -> DateTime<Utc> {
        Utc::now().trunc_subsecs(6)
    }

    fn rule(id: &str, group: &str) -> GroupRule {
        GroupRule {
            id: id.into(),
            group: group.into(),
            cluster: "c".into(),
            namespace: Some("shop".into()),
            role: "viewer".into(),
            created_by: "admin".into(),
            created_at: now(),
        }
    }

    fn candidate(rule: &GroupRule, hours: i64) -> (String, Grant) {
        let now = now();
        let grant = Grant {
            id: uuid::Uuid::now_v7().to_string(),
            subject: Principal::person("ana"),
            cluster: rule.cluster.clone(),
            namespace: rule.namespace.clone(),
            role: rule.role.clone(),
            expires_at: now + chrono::TimeDelta::hours(hours),
            granted_by: rule.granted_by(),
            created_at: now,
            revoked_at: None,
        };
        (rule.id.clone(), grant)
    }

    #[test]
    fn a_person_holds_one_grant_per_rule_extended_at_each_sign_in_and_revoked_when_not_wanted() {
        for store in testing::both() {
            let backend = store.backend;
            let ana = Principal::person("ana");
            store.add_principal(&ana, false).unwrap();
            let (devs, ops) = (rule("r1", "devs"), rule("r2", "ops"));
            store.add_group_rule(&devs).unwrap();
            store.add_group_rule(&ops).unwrap();
            assert_eq!(store.group_rules().unwrap(), [devs.clone(), ops.clone()], "{backend}");

            let first = store
                .sync_rule_grants(&ana, &[candidate(&devs, 1), candidate(&ops, 1)])
                .unwrap();
            assert!(
                matches!(first[..], [RuleGrantChange::Granted(_), RuleGrantChange::Granted(_)]),
                "{backend}"
            );
            let again = store.sync_rule_grants(&ana, &[candidate(&devs, 2)]).unwrap();
            let [RuleGrantChange::Revoked(gone), RuleGrantChange::Extended(kept)] = &again[..] else {
                panic!("{backend}: {again:?}");
            };
            assert_eq!(gone.granted_by, "rule:r2", "{backend}");
            assert_eq!(kept.granted_by, "rule:r1", "{backend}");
            let held = store.grants_of(&ana, "c").unwrap();
            assert_eq!(held.len(), 1, "{backend}: {held:?}");
            assert_eq!(
                (held[0].id.as_str(), held[0].expires_at),
                (kept.id.as_str(), kept.expires_at),
                "{backend}"
            );
            assert!(
                store.sync_rule_grants(&ana, &[candidate(&devs, 1)]).unwrap().is_empty(),
                "{backend}: a shorter sign-in never shortens the grant"
            );

            let (removed, revoked) = store.remove_group_rule("r1").unwrap();
            assert_eq!((removed, revoked.len()), (devs.clone(), 1), "{backend}");
            assert!(store.grants_of(&ana, "c").unwrap().is_empty(), "{backend}");
            // A sign-in that read the rules before the removal.
            assert!(
                store.sync_rule_grants(&ana, &[candidate(&devs, 3)]).unwrap().is_empty(),
                "{backend}: a removed rule grants nothing"
            );
            assert!(store.grants_of(&ana, "c").unwrap().is_empty(), "{backend}");
            assert!(
                matches!(store.remove_group_rule("r1"), Err(StoreError::NotFound(_))),
                "{backend}"
            );
        }
    }
}
