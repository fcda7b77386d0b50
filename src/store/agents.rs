//! Agents: credentials that act for a person (with a chosen subset of that
//! person's grants) or for a bot.

use super::credentials::{insert_credential, new_credential, Tie};
use super::sql::{params, Db, OptionalExt};
use super::{exists, Store, StoreError};
use crate::identity::{credential, Agent, Credential, Origin, Principal, PrincipalKind};
use chrono::Utc;

impl Store {
    /// Add an agent for `owner`. A person's agent gets exactly `grant_ids`,
    /// each of which must be that person's own grant; a bot's agent acts with
    /// all the bot's grants and takes no list.
    pub fn add_agent(
        &self,
        owner: &Principal,
        name: &str,
        grant_ids: &[String],
        writes_need_approval: bool,
    ) -> Result<Agent, StoreError> {
        let agent = new_agent(owner, name, grant_ids, writes_need_approval)?;
        self.write(|tx| insert_agent(tx, &agent, grant_ids))?;
        Ok(agent)
    }

    /// Issue a credential for an agent; returns its record and the token.
    pub fn issue_agent_credential(
        &self,
        agent: &Agent,
        expires_at: Option<chrono::DateTime<Utc>>,
    ) -> Result<(Credential, String), StoreError> {
        self.issue_agent_credential_with(agent, expires_at, &Origin::default())
    }

    /// Issue a credential for an agent with an origin (an OAuth access
    /// token: for `/mcp` only, naming its client).
    pub fn issue_agent_credential_with(
        &self,
        agent: &Agent,
        expires_at: Option<chrono::DateTime<Utc>>,
        origin: &Origin,
    ) -> Result<(Credential, String), StoreError> {
        let name = credential_name(agent);
        self.issue(&agent.principal, &name, expires_at, origin, Tie::Agent(&agent.id))
    }

    /// Add an agent and issue its first credential, in one transaction: an
    /// agent is not left without the token it was made for.
    pub fn add_agent_with_credential(
        &self,
        owner: &Principal,
        name: &str,
        grant_ids: &[String],
        writes_need_approval: bool,
        expires_at: Option<chrono::DateTime<Utc>>,
    ) -> Result<(Agent, Credential, String), StoreError> {
        let agent = new_agent(owner, name, grant_ids, writes_need_approval)?;
        let new = credential::mint();
        let credential = new_credential(owner, &credential_name(&agent), expires_at, &new);
        self.write(|tx| {
            insert_agent(tx, &agent, grant_ids)?;
            insert_credential(tx, &credential, &new, &Origin::default(), &Tie::Agent(&agent.id))
        })?;
        Ok((agent, credential, new.token))
    }

    /// The agent a credential belongs to, if any.
    pub fn agent_of_credential(&self, credential_id: &str) -> Result<Option<Agent>, StoreError> {
        self.with(|c| {
            let agent_id: Option<String> = c
                .query_row(
                    "SELECT agent_id FROM credentials WHERE id = ?1",
                    params![credential_id],
                    |r| r.get(0),
                )
                .optional()?
                .flatten();
            agent_id.map(|id| load(c, &id)).transpose().map(Option::flatten)
        })
    }

    /// Every agent's id and name, in one query (the pages name agents).
    pub fn agent_names(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.with(|c| Ok(c.query_map("SELECT id, name FROM agents", params![], |r| Ok((r.get(0)?, r.get(1)?)))?))
    }

    /// All agents.
    pub fn list_agents(&self) -> Result<Vec<Agent>, StoreError> {
        self.with(|c| {
            let ids: Vec<String> =
                c.query_map("SELECT id FROM agents ORDER BY created_at, id", params![], |r| r.get(0))?;
            ids.iter().filter_map(|id| load(c, id).transpose()).collect()
        })
    }

    /// Disable an agent at once, and end what it holds: its credentials
    /// and refresh tokens revoked, the grants narrowed for it revoked. An
    /// agent session an OAuth client made ends whole, whichever door
    /// disables it (the console, `admin agent disable`).
    pub fn disable_agent(&self, id: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            if tx.execute("UPDATE agents SET disabled = TRUE WHERE id = ?1", params![id])? == 0 {
                return Err(StoreError::NotFound(format!("agent {id}")));
            }
            super::oauth::end_agents(tx, "SELECT id FROM agents WHERE id = ?1", id, Utc::now())
        })
    }
}

/// Every one of `grant_ids` must be `owner`'s own: an agent never acts with
/// more than its person holds.
fn only_own_grants(c: &dyn Db, owner: &Principal, grant_ids: &[String]) -> Result<(), StoreError> {
    for grant in grant_ids {
        let theirs: Option<i64> = c
            .query_row(
                "SELECT 1 FROM grants WHERE id = ?1 AND kind = ?2 AND subject = ?3",
                params![grant, owner.kind.as_str(), owner.name],
                |r| r.get(0),
            )
            .optional()?;
        if theirs.is_none() {
            return Err(StoreError::Invalid(format!(
                "grant {grant} is not {owner}'s: an agent gets only its person's grants"
            )));
        }
    }
    Ok(())
}

/// The record of a new agent, checked for what needs no store.
fn new_agent(
    owner: &Principal,
    name: &str,
    grant_ids: &[String],
    writes_need_approval: bool,
) -> Result<Agent, StoreError> {
    super::validate_name(name)?;
    let delegated = owner.kind == PrincipalKind::Person;
    if !delegated && !grant_ids.is_empty() {
        return Err(StoreError::Invalid(
            "a bot's agent acts with the bot's grants; give no --grant".into(),
        ));
    }
    Ok(Agent {
        id: uuid::Uuid::now_v7().to_string(),
        name: name.into(),
        principal: owner.clone(),
        writes_need_approval,
        grant_ids: delegated.then(|| grant_ids.to_vec()),
        disabled: false,
    })
}

/// The name an agent's credentials go by in lists.
pub(super) fn credential_name(agent: &Agent) -> String {
    format!("agent:{}", agent.name)
}

/// Insert `agent` and its grants, in the caller's transaction: its owner
/// must exist and own every one of `grant_ids`. A name taken is told
/// without a failed statement, which would end a PostgreSQL transaction.
fn insert_agent(tx: &dyn Db, agent: &Agent, grant_ids: &[String]) -> Result<(), StoreError> {
    let owner = &agent.principal;
    exists(tx, owner)?;
    only_own_grants(tx, owner, grant_ids)?;
    let inserted = tx.execute(
        "INSERT INTO agents (id, name, kind, owner, writes_need_approval, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT DO NOTHING",
        params![
            agent.id,
            agent.name,
            owner.kind.as_str(),
            owner.name,
            agent.writes_need_approval,
            Utc::now()
        ],
    )?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists(format!("agent {} of {owner}", agent.name)));
    }
    for grant in grant_ids {
        tx.execute(
            "INSERT INTO agent_grants (agent_id, grant_id) VALUES (?1, ?2)",
            params![agent.id, grant],
        )?;
    }
    Ok(())
}

/// Agent `id`, with its grants when it is a person's.
pub(super) fn load(c: &dyn Db, id: &str) -> Result<Option<Agent>, StoreError> {
    let row = c
        .query_row(
            "SELECT name, kind, owner, writes_need_approval, disabled FROM agents WHERE id = ?1",
            params![id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, bool>(3)?,
                    r.get::<_, bool>(4)?,
                ))
            },
        )
        .optional()?;
    let Some((name, kind, owner, writes_need_approval, disabled)) = row else {
        return Ok(None);
    };
    let kind =
        PrincipalKind::parse(&kind).ok_or_else(|| StoreError::Invalid(format!("bad agent owner kind {kind}")))?;
    let grant_ids = if kind == PrincipalKind::Person {
        let ids = c.query_map(
            "SELECT grant_id FROM agent_grants WHERE agent_id = ?1 ORDER BY grant_id",
            params![id],
            |r| r.get(0),
        )?;
        Some(ids)
    } else {
        None
    };
    Ok(Some(Agent {
        id: id.into(),
        name,
        principal: Principal { kind, name: owner },
        writes_need_approval,
        grant_ids,
        disabled,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{credential, Grant};
    use crate::store::testing;

    fn grant(id: &str, who: &Principal) -> Grant {
        Grant {
            id: id.into(),
            subject: who.clone(),
            cluster: "c".into(),
            namespace: Some("shop".into()),
            role: "viewer".into(),
            expires_at: Utc::now() + chrono::TimeDelta::hours(1),
            granted_by: "t".into(),
            created_at: Utc::now(),
            revoked_at: None,
        }
    }

    /// People ana and bob, each with a grant of their own (`g-ana`,
    /// `g-bob`).
    fn ana_and_bob(store: &Store) -> (Principal, Principal) {
        let (ana, bob) = (Principal::person("ana"), Principal::person("bob"));
        store.add_principal(&ana, false).unwrap();
        store.add_principal(&bob, false).unwrap();
        store.add_grant(&grant("g-ana", &ana)).unwrap();
        store.add_grant(&grant("g-bob", &bob)).unwrap();
        (ana, bob)
    }

    #[test]
    fn a_delegated_agent_gets_only_its_persons_grants() {
        for store in testing::both() {
            let (ana, _) = ana_and_bob(&store);
            let err = store.add_agent(&ana, "helper", &["g-bob".into()], false).unwrap_err();
            assert!(err.to_string().contains("not person:ana's"), "{}: {err}", store.backend);
            let agent = store.add_agent(&ana, "helper", &["g-ana".into()], true).unwrap();
            let (cred, token) = store.issue_agent_credential(&agent, None).unwrap();
            assert!(credential::check(&token).is_ok());
            let found = store.agent_of_credential(&cred.id).unwrap().unwrap();
            assert_eq!(found.grant_ids, Some(vec!["g-ana".to_string()]), "{}", store.backend);
            assert!(found.writes_need_approval, "{}", store.backend);
            store.disable_agent(&agent.id).unwrap();
            assert!(
                store.agent_of_credential(&cred.id).unwrap().unwrap().disabled,
                "{}",
                store.backend
            );
            assert_eq!(
                store.list_agents().unwrap(),
                [Agent {
                    disabled: true,
                    ..agent
                }],
                "{}",
                store.backend
            );
        }
    }

    #[test]
    fn a_second_agent_of_the_same_name_is_refused_and_leaves_no_grants_behind() {
        for store in testing::both() {
            let ana = Principal::person("ana");
            store.add_principal(&ana, false).unwrap();
            store.add_grant(&grant("g1", &ana)).unwrap();
            store.add_grant(&grant("g2", &ana)).unwrap();
            let first = store.add_agent(&ana, "helper", &["g1".into()], false).unwrap();
            let err = store.add_agent(&ana, "helper", &["g2".into()], false).unwrap_err();
            assert!(matches!(err, StoreError::AlreadyExists(_)), "{}: {err}", store.backend);
            assert_eq!(store.list_agents().unwrap(), [first], "{}", store.backend);
            assert!(
                matches!(
                    store.add_agent(&Principal::bot("nobody"), "x", &[], false),
                    Err(StoreError::NotFound(_))
                ),
                "{}",
                store.backend
            );
        }
    }

    #[test]
    fn an_agent_and_its_first_credential_are_added_together_or_not_at_all() {
        for store in testing::both() {
            let (ana, _) = ana_and_bob(&store);
            let (agent, cred, token) = store
                .add_agent_with_credential(&ana, "helper", &["g-ana".into()], true, None)
                .unwrap();
            assert!(credential::check(&token).is_ok());
            assert_eq!(
                store.agent_of_credential(&cred.id).unwrap(),
                Some(agent.clone()),
                "{}",
                store.backend
            );
            assert_eq!(cred.name, "agent:helper", "{}", store.backend);
            // Refused for a grant not ana's, or a name taken: neither an
            // agent nor a credential is left.
            for (name, grant) in [("other", "g-bob"), ("helper", "g-ana")] {
                let refused = store.add_agent_with_credential(&ana, name, &[grant.into()], false, None);
                assert!(refused.is_err(), "{}: {name}", store.backend);
            }
            assert_eq!(store.list_agents().unwrap(), [agent], "{}", store.backend);
            assert_eq!(store.list_credentials(None).unwrap(), [cred], "{}", store.backend);
        }
    }

    #[test]
    fn a_disabled_agent_is_issued_no_credential() {
        for store in testing::both() {
            let ana = Principal::person("ana");
            store.add_principal(&ana, false).unwrap();
            let agent = store.add_agent(&ana, "helper", &[], false).unwrap();
            store.disable_agent(&agent.id).unwrap();
            let refused = store.issue_agent_credential(&agent, None);
            assert!(
                matches!(refused, Err(StoreError::NotFound(_))),
                "{}: {refused:?}",
                store.backend
            );
            assert_eq!(store.list_credentials(None).unwrap(), [], "{}", store.backend);
        }
    }

    #[test]
    fn a_disabled_agent_keeps_no_credential_or_refresh_token() {
        for store in testing::both() {
            let ana = Principal::person("ana");
            store.add_principal(&ana, false).unwrap();
            let (agent, cred, _) = store
                .add_agent_with_credential(&ana, "helper", &[], false, None)
                .unwrap();
            let until = Utc::now() + chrono::TimeDelta::hours(1);
            store.put_refresh_token("refresh-sha", &agent.id, until).unwrap();
            store.disable_agent(&agent.id).unwrap();
            let listed = store.list_credentials(None).unwrap();
            assert!(
                listed.iter().all(|c| c.id != cred.id || c.revoked_at.is_some()),
                "{}",
                store.backend
            );
            let taken = store.take_refresh_token("refresh-sha", Utc::now()).unwrap();
            assert!(
                !matches!(taken, crate::store::Taken::Fresh(_)),
                "{}: the refresh token still worked",
                store.backend
            );
            assert!(
                matches!(store.disable_agent("nobody"), Err(StoreError::NotFound(_))),
                "{}",
                store.backend
            );
        }
    }
}
