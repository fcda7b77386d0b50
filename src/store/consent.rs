//! What a person may hand to an agent session on the consent page: their
//! own grants in effect. Grants derived for agent sessions (narrowed roles,
//! `parent_id` set) are the person's too, but are never handed over again:
//! a consent narrows what the person was granted, not what an earlier
//! consent made.

use super::grants::GRANT_SELECT;
use super::sql::params;
use super::{Store, StoreError};
use crate::identity::{Grant, Principal};
use chrono::Utc;

impl Store {
    /// `person`'s own grants in effect now, oldest first: not revoked, not
    /// expired, not derived for an agent session.
    pub fn own_grants_in_effect(&self, person: &Principal) -> Result<Vec<Grant>, StoreError> {
        let grants = self.query_grants(
            &format!(
                "{GRANT_SELECT} WHERE kind = ?1 AND subject = ?2 AND parent_id IS NULL AND revoked_at IS NULL \
                 ORDER BY created_at, id"
            ),
            params![person.kind.as_str(), person.name],
        )?;
        let now = Utc::now();
        Ok(grants.into_iter().filter(|g| g.in_effect(now)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{testing, SessionPlan};
    use chrono::TimeDelta;

    fn grant(id: &str, subject: &Principal, role: &str, ends_in: TimeDelta) -> Grant {
        Grant {
            id: id.into(),
            subject: subject.clone(),
            cluster: "sim".into(),
            namespace: Some("shop".into()),
            role: role.into(),
            expires_at: Utc::now() + ends_in,
            granted_by: "root".into(),
            created_at: Utc::now(),
            revoked_at: None,
        }
    }

    #[test]
    fn only_a_persons_own_grants_in_effect_are_theirs_to_hand_over() {
        for store in testing::both() {
            let backend = store.backend;
            let (ana, bob) = (Principal::person("ana"), Principal::person("bob"));
            store.add_principal(&ana, false).unwrap();
            store.add_principal(&bob, false).unwrap();
            store
                .add_grant(&grant("dev", &ana, "developer", TimeDelta::hours(2)))
                .unwrap();
            store
                .add_grant(&grant("old", &ana, "admin", TimeDelta::seconds(-1)))
                .unwrap();
            store
                .add_grant(&grant("gone", &ana, "admin", TimeDelta::hours(2)))
                .unwrap();
            store.revoke_grant("gone").unwrap();
            store
                .add_grant(&grant("bobs", &bob, "viewer", TimeDelta::hours(2)))
                .unwrap();
            let plan = SessionPlan {
                person: ana.clone(),
                client_id: "c".into(),
                client_name: "Client".into(),
                grants: vec![("dev".into(), "viewer".into())],
                until: Utc::now() + TimeDelta::hours(1),
                writes_need_approval: true,
                consented_with: None,
            };
            store.add_agent_session(&plan).unwrap();
            let all_of_anas = store.grants_of(&ana, "sim").unwrap();
            assert!(
                all_of_anas.iter().any(|g| g.role == "viewer"),
                "{backend}: the derived grant exists"
            );
            let own: Vec<String> = store
                .own_grants_in_effect(&ana)
                .unwrap()
                .into_iter()
                .map(|g| g.id)
                .collect();
            assert_eq!(own, ["dev"], "{backend}");
        }
    }
}
