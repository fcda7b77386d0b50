//! A person ending what is theirs: a credential, or an agent session (its
//! tokens, refresh tokens and narrowed grants with it). Done as that
//! person, on their own things only, and on record before it takes effect,
//! as an operator's `admin credential revoke` is: a revocation is a change
//! of who may do what.

use super::groups::{event, Actor};
use crate::audit::AuditError;
use crate::identity::Principal;
use crate::store::{Store, StoreError};

/// Why nothing was revoked.
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    /// Not one of the person's own (or no such thing): one answer for
    /// both, so another's ids are not confirmed.
    #[error("you have no {what} {id}")]
    NotYours {
        /// A credential or an agent.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The revocation could not be put on record first: nothing was done.
    #[error(transparent)]
    Audit(#[from] AuditError),
}

/// `person` revokes their credential `id`: its web sessions, and what was
/// signed in with it, end with it.
pub fn own_credential(store: &Store, person: &Principal, id: &str) -> Result<(), RevokeError> {
    if store.credential_of(person, id)?.is_none() {
        return Err(RevokeError::NotYours {
            what: "credential",
            id: id.into(),
        });
    }
    recorded(store, person, "credentials", id, || store.revoke_credential(id))
}

/// `person` ends their agent session `id`, whole.
pub fn own_agent(store: &Store, person: &Principal, id: &str) -> Result<(), RevokeError> {
    if !store.agent(id)?.is_some_and(|agent| agent.principal == *person) {
        return Err(RevokeError::NotYours {
            what: "agent",
            id: id.into(),
        });
    }
    recorded(store, person, "agents", id, || store.disable_agent(id))
}

/// `change`, with its row's intent committed before it and the row after.
fn recorded(
    store: &Store,
    person: &Principal,
    resource: &str,
    id: &str,
    change: impl FnOnce() -> Result<(), StoreError>,
) -> Result<(), RevokeError> {
    let row = event("revoke", resource, &Actor::Person(person.clone()), "", None, id);
    let recorded = crate::audit::begin_event(store, row.clone())?;
    match change() {
        Ok(()) => {
            // Revoked, and its intent on record (recovery records it as of
            // unknown outcome): the person is told it is done, as it is.
            if let Err(error) = recorded.done(row, Vec::new()) {
                tracing::error!(%error, "a person's revocation is made, its row not yet on record");
            }
            Ok(())
        }
        Err(error) => Err(recorded.store_failed(error).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::query::Filter;
    use crate::store::testing;

    /// The revocation's row is on record, named as the person who did it,
    /// and another's credential is not theirs to revoke.
    #[test]
    fn a_person_revokes_only_their_own_and_it_is_on_record_as_them() {
        for store in testing::both() {
            let b = store.backend;
            let (ana, bob) = (Principal::person("ana"), Principal::person("bob"));
            store.add_principal(&ana, false).unwrap();
            store.add_principal(&bob, false).unwrap();
            let (mine, _) = store.issue_credential(&ana, "laptop", None).unwrap();
            let (theirs, _) = store.issue_credential(&bob, "laptop", None).unwrap();
            assert!(matches!(
                own_credential(&store, &ana, &theirs.id),
                Err(RevokeError::NotYours { .. })
            ));
            own_credential(&store, &ana, &mine.id).unwrap();
            let listed = store.list_credentials(None).unwrap();
            let revoked = |id: &str| listed.iter().find(|c| c.id == id).unwrap().revoked_at.is_some();
            assert!(revoked(&mine.id) && !revoked(&theirs.id), "{b}");
            let agent = store.add_agent(&ana, "helper", &[], false).unwrap();
            assert!(matches!(
                own_agent(&store, &bob, &agent.id),
                Err(RevokeError::NotYours { .. })
            ));
            own_agent(&store, &ana, &agent.id).unwrap();
            assert!(store.agent(&agent.id).unwrap().unwrap().disabled, "{b}");
            let rows = crate::audit::open(&store).unwrap().query(&Filter::default()).unwrap();
            let rows: Vec<_> = rows.iter().map(|r| &r.row).filter(|r| r.verb == "revoke").collect();
            assert_eq!(rows.len(), 2, "{b}: {rows:?}");
            assert!(rows
                .iter()
                .all(|r| r.login == "ana" && r.principal_kind == "person" && r.write && r.code == 200));
            assert_eq!(rows[0].resource, "credentials", "{b}");
            assert_eq!(
                (rows[1].resource.as_str(), rows[1].name.as_str()),
                ("agents", agent.id.as_str())
            );
        }
    }
}
