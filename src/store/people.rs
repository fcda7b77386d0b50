//! People as the identity provider knows them: each (issuer, `sub`) is
//! linked once to a portcullis person, so a login claim or an email that
//! changes at the provider never moves a sign-in to someone else.

use super::sql::{params, Db, OptionalExt};
use super::{validate_name, Store, StoreError};
use crate::identity::{Principal, PrincipalKind};
use chrono::{SubsecRound, Utc};

/// Who signed in at the provider, as its ID token says (login already
/// normalised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderPerson {
    /// The provider's issuer URL.
    pub issuer: String,
    /// The provider's `sub`.
    pub subject: String,
    /// The login the claims name, for a first sign-in.
    pub login: String,
    /// A verified email, if the token had one.
    pub email: Option<String>,
    /// The groups claim, kept for group rules.
    pub groups: Vec<String>,
}

/// Which person a sign-in is, or why none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInPerson {
    /// An enabled person; `created` at this sign-in.
    Person {
        /// Their login.
        login: String,
        /// Added by this sign-in.
        created: bool,
    },
    /// The person is disabled.
    Disabled(String),
    /// No such person, and people are not created at sign-in.
    Unknown(String),
    /// The login belongs to another identity at this provider.
    LoginTaken(String),
}

impl Store {
    /// The person `seen` is: linked earlier by issuer and `sub`, or now by
    /// login (an operator's `person add`, or created when `create`). The
    /// email and groups are brought up to date. One transaction.
    pub fn sign_in_person(&self, seen: &ProviderPerson, create: bool) -> Result<SignInPerson, StoreError> {
        let groups = serde_json::to_string(&seen.groups).unwrap_or_else(|_| "[]".into());
        let now = Utc::now().trunc_subsecs(6);
        self.write(|tx| {
            let linked: Option<String> = tx
                .query_row(
                    "SELECT login FROM person_identities WHERE issuer = ?1 AND subject = ?2",
                    params![seen.issuer, seen.subject],
                    |r| r.get(0),
                )
                .optional()?;
            let (login, created) = match linked {
                Some(login) => (login, false),
                None => match link(tx, seen, create, now)? {
                    Ok(created) => (seen.login.clone(), created),
                    Err(refused) => return Ok(refused),
                },
            };
            tx.execute(
                "UPDATE person_identities SET email = ?3, groups = ?4, last_sign_in_at = ?5 WHERE issuer = ?1 AND subject = ?2",
                params![seen.issuer, seen.subject, seen.email, groups, now],
            )?;
            let disabled: Option<bool> = tx
                .query_row(
                    "SELECT disabled FROM principals WHERE kind = 'person' AND name = ?1",
                    params![login],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(match disabled {
                None => SignInPerson::Unknown(login),
                Some(true) => SignInPerson::Disabled(login),
                Some(false) => SignInPerson::Person { login, created },
            })
        })
    }

    /// The groups of `login`'s last sign-in at `issuer`.
    pub fn person_groups(&self, issuer: &str, login: &str) -> Result<Vec<String>, StoreError> {
        self.with(|c| {
            let text: Option<String> = c
                .query_row(
                    "SELECT groups FROM person_identities WHERE issuer = ?1 AND login = ?2",
                    params![issuer, login],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(text.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default())
        })
    }
}

/// Link a first sign-in to the person its login names: `Ok(created)`, or
/// the refusal.
fn link(
    c: &dyn Db,
    seen: &ProviderPerson,
    create: bool,
    now: chrono::DateTime<Utc>,
) -> Result<Result<bool, SignInPerson>, StoreError> {
    let taken: Option<String> = c
        .query_row(
            "SELECT subject FROM person_identities WHERE issuer = ?1 AND login = ?2",
            params![seen.issuer, seen.login],
            |r| r.get(0),
        )
        .optional()?;
    if taken.is_some() {
        return Ok(Err(SignInPerson::LoginTaken(seen.login.clone())));
    }
    let person = Principal::person(&seen.login);
    let exists: bool = c.query_row(
        "SELECT EXISTS (SELECT 1 FROM principals WHERE kind = ?1 AND name = ?2)",
        params![PrincipalKind::Person.as_str(), person.name],
        |r| r.get(0),
    )?;
    if !exists && !create {
        return Ok(Err(SignInPerson::Unknown(seen.login.clone())));
    }
    if !exists {
        validate_name(&person.name)?;
        c.execute(
            "INSERT INTO principals (kind, name, disabled, writes_need_approval, created_at) VALUES ('person', ?1, FALSE, FALSE, ?2)",
            params![person.name, now],
        )?;
    }
    c.execute(
        "INSERT INTO person_identities (issuer, subject, login, created_at, last_sign_in_at) VALUES (?1, ?2, ?3, ?4, ?4)",
        params![seen.issuer, seen.subject, seen.login, now],
    )?;
    Ok(Ok(!exists))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn seen(subject: &str, login: &str) -> ProviderPerson {
        ProviderPerson {
            issuer: "https://idp".into(),
            subject: subject.into(),
            login: login.into(),
            email: Some(format!("{login}@example.com")),
            groups: vec!["devs".into()],
        }
    }

    #[test]
    fn a_sign_in_finds_its_person_by_issuer_and_subject_even_when_the_login_claim_changes() {
        for store in testing::both() {
            finds_by_issuer_and_subject(&store, store.backend);
        }
    }

    fn finds_by_issuer_and_subject(store: &Store, backend: &str) {
        let person = |login: &str, created| SignInPerson::Person {
            login: login.into(),
            created,
        };
        let sign_in = |subject, login, create| store.sign_in_person(&seen(subject, login), create).unwrap();
        assert_eq!(
            sign_in("s1", "ana", false),
            SignInPerson::Unknown("ana".into()),
            "{backend}"
        );
        assert_eq!(sign_in("s1", "ana", true), person("ana", true), "{backend}");
        assert_eq!(sign_in("s1", "anna", true), person("ana", false), "{backend}");
        assert_eq!(
            sign_in("s2", "ana", true),
            SignInPerson::LoginTaken("ana".into()),
            "{backend}"
        );
        assert_eq!(
            store.person_groups("https://idp", "ana").unwrap(),
            ["devs"],
            "{backend}"
        );
        store.disable_principal(&Principal::person("ana")).unwrap();
        assert_eq!(
            sign_in("s1", "ana", true),
            SignInPerson::Disabled("ana".into()),
            "{backend}"
        );
    }

    #[test]
    fn a_person_an_operator_added_is_linked_at_their_first_sign_in() {
        for store in testing::both() {
            store.add_principal(&Principal::person("bo"), false).unwrap();
            assert_eq!(
                store.sign_in_person(&seen("s9", "bo"), false).unwrap(),
                SignInPerson::Person {
                    login: "bo".into(),
                    created: false
                },
                "{}",
                store.backend
            );
        }
    }
}
