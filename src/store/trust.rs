//! Trust rules of bots for CI jobs' OpenID Connect tokens, and the tokens
//! already exchanged (replay detection). The domain side (checking a token,
//! the exchange, the audit) is `crate::ci`.

use super::sql::{params, OptionalExt, Row, SqlError};
use super::{exists, Store, StoreError};
use crate::identity::Principal;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// A bot trusts tokens from `issuer` for `audience` whose claims meet every
/// condition of `claims`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TrustRule {
    /// Stable id, named in the audit of every request its credentials make.
    pub id: String,
    /// The bot the exchanged credential belongs to.
    pub bot: String,
    /// The token's `iss`, exactly (e.g. `https://token.actions.githubusercontent.com`).
    pub issuer: String,
    /// The audience the token must carry (portcullis's URL, usually).
    pub audience: String,
    /// Claim name → an exact value, or a glob with `*`; all must hold.
    pub claims: BTreeMap<String, String>,
    /// How long an exchanged credential lasts, in seconds.
    pub duration_seconds: u64,
    /// The oldest token (by `iat`) accepted, in seconds.
    pub max_token_age_seconds: u64,
    /// When it was added.
    pub created_at: DateTime<Utc>,
    /// Who added it.
    pub created_by: String,
}

const RULE_SELECT: &str = "SELECT id, bot, issuer, audience, claims, duration_seconds, max_token_age_seconds, created_at, created_by FROM ci_trust_rules";

impl Store {
    /// Add a trust rule; its bot must exist.
    pub fn add_trust_rule(&self, rule: &TrustRule) -> Result<(), StoreError> {
        let claims = serde_json::to_string(&rule.claims).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.with(|c| {
            exists(c, &Principal::bot(&rule.bot))?;
            c.execute(
                "INSERT INTO ci_trust_rules (id, bot, issuer, audience, claims, duration_seconds, max_token_age_seconds, created_at, created_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![rule.id, rule.bot, rule.issuer, rule.audience, claims, rule.duration_seconds as i64, rule.max_token_age_seconds as i64, rule.created_at, rule.created_by],
            )?;
            Ok(())
        })
    }

    /// The rules of `bot`, or every rule; oldest first.
    pub fn trust_rules(&self, bot: Option<&str>) -> Result<Vec<TrustRule>, StoreError> {
        self.query_trust_rules("CAST(?1 AS TEXT) IS NULL OR bot = ?1", bot)
    }

    /// The rules trusting `issuer`, oldest first.
    pub fn trust_rules_for_issuer(&self, issuer: &str) -> Result<Vec<TrustRule>, StoreError> {
        self.query_trust_rules("issuer = ?1", Some(issuer))
    }

    /// Remove rule `id` and revoke the credentials exchanged through it
    /// (their origin names it); returns the rule and how many were revoked.
    pub fn remove_trust_rule(&self, id: &str) -> Result<(TrustRule, usize), StoreError> {
        self.write(|tx| {
            let rule = tx
                .query_row(&format!("{RULE_SELECT} WHERE id = ?1"), params![id], rule_row)
                .optional()?
                .ok_or_else(|| StoreError::NotFound(format!("trust rule {id}")))?;
            tx.execute("DELETE FROM ci_trust_rules WHERE id = ?1", params![id])?;
            // A prefix compared as text: an id is never read as a pattern.
            let revoked = tx.execute(
                "UPDATE credentials SET revoked_at = ?4 WHERE kind = 'bot' AND owner = ?1 AND revoked_at IS NULL \
                 AND substr(via, 1, length(CAST(?2 AS TEXT))) = ?2 AND length(via) > length(CAST(?3 AS TEXT))",
                params![rule.bot, format!("ci rule={id} "), format!("ci rule={id}"), Utc::now()],
            )?;
            Ok((rule, revoked))
        })
    }

    /// Record that the token of `digest` was exchanged, to be remembered
    /// until `keep_until`; `false` when it was already (a replay). The
    /// insert is the check, so two replicas cannot both accept a token.
    /// Records past their time are swept first.
    pub fn mark_exchanged(&self, digest: &str, keep_until: DateTime<Utc>) -> Result<bool, StoreError> {
        self.with(|c| {
            c.execute(
                "DELETE FROM ci_exchanged_tokens WHERE keep_until < ?1",
                params![Utc::now()],
            )?;
            let inserted = c.execute(
                "INSERT INTO ci_exchanged_tokens (digest, keep_until) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![digest, keep_until],
            )?;
            Ok(inserted == 1)
        })
    }

    fn query_trust_rules(&self, filter: &str, arg: Option<&str>) -> Result<Vec<TrustRule>, StoreError> {
        self.with(|c| {
            Ok(c.query_map(
                &format!("{RULE_SELECT} WHERE {filter} ORDER BY created_at, id"),
                params![arg],
                rule_row,
            )?)
        })
    }
}

fn rule_row(r: &Row) -> Result<TrustRule, SqlError> {
    let claims: String = r.get(4)?;
    let claims = serde_json::from_str(&claims).map_err(|e| SqlError::decode(4, e))?;
    Ok(TrustRule {
        id: r.get(0)?,
        bot: r.get(1)?,
        issuer: r.get(2)?,
        audience: r.get(3)?,
        claims,
        duration_seconds: r.get::<_, i64>(5)?.max(0) as u64,
        max_token_age_seconds: r.get::<_, i64>(6)?.max(0) as u64,
        created_at: r.get(7)?,
        created_by: r.get(8)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, bot: &str, issuer: &str) -> TrustRule {
        TrustRule {
            id: id.into(),
            bot: bot.into(),
            issuer: issuer.into(),
            audience: "https://p.example".into(),
            claims: BTreeMap::from([("repository".into(), "acme/shop".into())]),
            duration_seconds: 3600,
            max_token_age_seconds: 600,
            created_at: Utc::now(),
            created_by: "admin".into(),
        }
    }

    #[test]
    fn trust_rules_are_kept_per_bot_found_by_issuer_and_removed_with_the_credentials_they_gave() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        assert!(matches!(
            store.add_trust_rule(&rule("r0", "ghost", "https://a")),
            Err(StoreError::NotFound(_))
        ));
        store.add_principal(&Principal::bot("deployer"), false).unwrap();
        store.add_principal(&Principal::bot("tester"), false).unwrap();
        let (a, b) = (rule("r1", "deployer", "https://a"), rule("r2", "tester", "https://b"));
        store.add_trust_rule(&a).unwrap();
        store.add_trust_rule(&b).unwrap();
        assert_eq!(store.trust_rules(None).unwrap(), [a.clone(), b.clone()]);
        assert_eq!(store.trust_rules(Some("tester")).unwrap(), std::slice::from_ref(&b));
        assert_eq!(
            store.trust_rules_for_issuer("https://a").unwrap(),
            std::slice::from_ref(&a)
        );
        let origin = |via: &str| crate::identity::Origin {
            audience: None,
            via: via.into(),
        };
        let bot = Principal::bot("deployer");
        let (through, _) = store
            .issue_credential_with(&bot, "ci", None, &origin("ci rule=r1 sub=x repository=y run_id=1"))
            .unwrap();
        let (other, _) = store
            .issue_credential_with(&bot, "ci", None, &origin("ci rule=r10 sub=x repository=y run_id=2"))
            .unwrap();
        assert_eq!(store.remove_trust_rule("r1").unwrap(), (a, 1));
        let revoked: Vec<(String, bool)> = store
            .list_credentials(Some(&bot))
            .unwrap()
            .into_iter()
            .map(|c| (c.id, c.revoked_at.is_some()))
            .collect();
        assert_eq!(revoked, [(through.id, true), (other.id, false)]);
        assert!(store.trust_rules_for_issuer("https://a").unwrap().is_empty());
        assert!(matches!(store.remove_trust_rule("r1"), Err(StoreError::NotFound(_))));
    }

    #[test]
    fn a_ci_credential_is_issued_only_while_its_rule_is_kept() {
        for store in crate::store::testing::both() {
            let bot = Principal::bot("deployer");
            store.add_principal(&bot, false).unwrap();
            store.add_trust_rule(&rule("r1", "deployer", "https://a")).unwrap();
            let origin = crate::identity::Origin {
                audience: None,
                via: "ci rule=r1 sub=x repository=y run_id=1".into(),
            };
            let until = Utc::now() + chrono::TimeDelta::hours(1);
            let (kept, _) = store.issue_ci_credential(&bot, until, &origin, "r1").unwrap();
            assert_eq!(kept.name, "ci");
            store.remove_trust_rule("r1").unwrap();
            // An exchange that read the rule before it was removed.
            let late = store.issue_ci_credential(&bot, until, &origin, "r1");
            assert!(matches!(late, Err(StoreError::NotFound(_))), "{}", store.backend);
            let left: Vec<bool> = store
                .list_credentials(Some(&bot))
                .unwrap()
                .iter()
                .map(|c| c.revoked_at.is_some())
                .collect();
            assert_eq!(left, [true], "{}: the one issued, revoked with its rule", store.backend);
        }
    }

    #[test]
    fn a_token_is_exchanged_once_and_forgotten_after_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let later = Utc::now() + chrono::TimeDelta::minutes(5);
        assert!(store.mark_exchanged("d1", later).unwrap());
        assert!(!store.mark_exchanged("d1", later).unwrap(), "a replay");
        let past = Utc::now() - chrono::TimeDelta::seconds(1);
        assert!(store.mark_exchanged("d2", past).unwrap());
        assert!(store.mark_exchanged("d2", later).unwrap(), "swept once past its time");
    }
}
