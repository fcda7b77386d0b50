//! What a person may hand to an agent session, and whether a choice made on
//! the consent page stays within it: only their own grants in effect (never
//! one derived for another agent session), each with its own role or a
//! narrower one ([`crate::identity::roles::narrower`]), for one of the
//! offered durations, and never past the chosen grants' own expiry (nor a
//! chosen role's longest grant).

use crate::config::Config;
use crate::identity::{roles, Grant, Principal};
use crate::store::{Store, StoreError};
use chrono::{DateTime, TimeDelta, Utc};

/// The durations offered, in seconds, with their words.
pub const DURATIONS: &[(i64, &str)] = &[
    (3600, "1 hour"),
    (8 * 3600, "8 hours"),
    (24 * 3600, "1 day"),
    (7 * 24 * 3600, "7 days"),
    (30 * 24 * 3600, "30 days"),
];
/// The duration chosen unless the person changes it.
pub const DEFAULT_DURATION: i64 = 8 * 3600;

/// One grant the person may hand over, and the roles narrower than its
/// own that they may hand over instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The person's own grant, in effect.
    pub grant: Grant,
    /// Narrower roles, in the catalogue's order (the grant's own not among
    /// them).
    pub narrower: Vec<String>,
}

/// What the person chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Grant ids, each with the role chosen for it.
    pub grants: Vec<(String, String)>,
    /// How long, in seconds (one of [`DURATIONS`]).
    pub duration_secs: i64,
}

/// A choice found to be within what the person may hand over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Grant ids with their roles, as chosen.
    pub grants: Vec<(String, String)>,
    /// When the consent ends.
    pub until: DateTime<Utc>,
}

/// Why a choice cannot be made a consent.
#[derive(Debug, thiserror::Error)]
pub enum ConsentError {
    /// The choice goes beyond what the person may hand over (words for the
    /// person).
    #[error("{0}")]
    Refused(String),
    /// The store could not be read.
    #[error("portcullis cannot read its store now; try again")]
    Store(#[from] StoreError),
}

/// What `person` may hand over now. Blocking (the store).
pub fn offers(store: &Store, config: &Config, person: &Principal) -> Result<Vec<Offer>, StoreError> {
    let catalogue = roles::all(config);
    let grants = store.own_grants_in_effect(person)?;
    Ok(grants
        .into_iter()
        .map(|grant| {
            let narrower = catalogue
                .iter()
                .find(|role| role.name == grant.role)
                .map(|role| roles::narrower(role, &catalogue))
                .unwrap_or_default();
            Offer { grant, narrower }
        })
        .collect())
}

/// Check `choice` against what `person` may hand over now. Blocking (the
/// store).
pub fn settle(store: &Store, config: &Config, person: &Principal, choice: &Choice) -> Result<Settled, ConsentError> {
    let offered = offers(store, config, person)?;
    check(&offered, &roles::all(config), choice, Utc::now())
}

/// [`settle`] on what was offered, at `now`.
fn check(
    offered: &[Offer],
    catalogue: &[roles::Role],
    choice: &Choice,
    now: DateTime<Utc>,
) -> Result<Settled, ConsentError> {
    let refused = |why: String| Err(ConsentError::Refused(why));
    if choice.grants.is_empty() {
        return refused("Choose at least one of your grants for the agent.".into());
    }
    if !DURATIONS.iter().any(|(secs, _)| *secs == choice.duration_secs) {
        return refused("Choose one of the durations offered.".into());
    }
    let mut until = now + TimeDelta::seconds(choice.duration_secs);
    let mut latest = None;
    for (index, (id, role)) in choice.grants.iter().enumerate() {
        if choice.grants[..index].iter().any(|(seen, _)| seen == id) {
            return refused(format!("Grant {id} is chosen twice."));
        }
        let Some(offer) = offered.iter().find(|o| o.grant.id == *id) else {
            return refused(format!("Grant {id} is not one of your own grants in effect."));
        };
        if *role != offer.grant.role && !offer.narrower.contains(role) {
            return refused(format!(
                "The role {role} is neither the grant's own ({}) nor narrower than it.",
                offer.grant.role
            ));
        }
        let longest = catalogue.iter().find(|r| r.name == *role).and_then(|r| r.max_duration);
        if let Some(longest) = longest.and_then(|d| TimeDelta::from_std(d).ok()) {
            until = until.min(now + longest);
        }
        latest = latest.max(Some(offer.grant.expires_at));
    }
    Ok(Settled {
        grants: choice.grants.clone(),
        until: latest.map_or(until, |latest| until.min(latest)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::roles::builtin;

    fn offer(id: &str, role: &str, ends_in: TimeDelta, now: DateTime<Utc>) -> Offer {
        let catalogue = builtin();
        let own = catalogue.iter().find(|r| r.name == role).unwrap();
        Offer {
            grant: Grant {
                id: id.into(),
                subject: Principal::person("ana"),
                cluster: "sim".into(),
                namespace: Some("shop".into()),
                role: role.into(),
                expires_at: now + ends_in,
                granted_by: "root".into(),
                created_at: now,
                revoked_at: None,
            },
            narrower: roles::narrower(own, &catalogue),
        }
    }

    fn choice(grants: &[(&str, &str)], duration_secs: i64) -> Choice {
        Choice {
            grants: grants.iter().map(|(g, r)| (g.to_string(), r.to_string())).collect(),
            duration_secs,
        }
    }

    #[test]
    fn a_choice_of_own_grants_with_their_roles_or_narrower_ends_with_the_latest_chosen_grant_at_the_latest() {
        let now = Utc::now();
        let offered = [
            offer("dev", "developer", TimeDelta::hours(3), now),
            offer("adm", "admin", TimeDelta::hours(5), now),
        ];
        let catalogue = builtin();
        let settled = check(&offered, &catalogue, &choice(&[("dev", "viewer")], 3600), now).unwrap();
        assert_eq!(settled.until, now + TimeDelta::hours(1));
        assert_eq!(settled.grants, [("dev".to_string(), "viewer".to_string())]);
        let both = choice(&[("dev", "developer"), ("adm", "secrets-reader")], 24 * 3600);
        assert_eq!(
            check(&offered, &catalogue, &both, now).unwrap().until,
            now + TimeDelta::hours(5)
        );
    }

    #[test]
    fn a_choice_beyond_what_the_person_may_hand_over_is_refused_with_the_reason() {
        let now = Utc::now();
        let offered = [offer("dev", "developer", TimeDelta::hours(3), now)];
        let catalogue = builtin();
        for (asked, why) in [
            (choice(&[], 3600), "at least one"),
            (choice(&[("dev", "developer")], 1234), "durations"),
            (choice(&[("other", "viewer")], 3600), "not one of your own"),
            (choice(&[("dev", "admin")], 3600), "neither the grant's own"),
            (choice(&[("dev", "debugger")], 3600), "neither the grant's own"),
            (choice(&[("dev", "viewer"), ("dev", "developer")], 3600), "twice"),
        ] {
            let error = check(&offered, &catalogue, &asked, now).unwrap_err();
            assert!(error.to_string().contains(why), "{asked:?}: {error}");
        }
    }

    #[test]
    fn a_chosen_role_with_a_longest_grant_shortens_the_consent() {
        let now = Utc::now();
        let offered = [offer("root", "cluster-admin", TimeDelta::hours(30), now)];
        let settled = check(
            &offered,
            &builtin(),
            &choice(&[("root", "cluster-admin")], 24 * 3600),
            now,
        )
        .unwrap();
        assert_eq!(settled.until, now + TimeDelta::hours(4));
    }
}
