//! The exchange itself (RFC 8693): a CI job's token in, a short-lived
//! credential of the bot whose trust rule it meets out. The token endpoint
//! (`POST /oauth/token`, `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`)
//! calls [`Exchange::exchange`] with the form and the request's audit row.

use super::issuers::Issuers;
use super::token::{self, Unverified};
use super::{claims, rules, Refused, SKEW_SECONDS};
use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::config::Config;
use crate::identity::{credential, Origin, Principal};
use crate::oauth::error::OAuthError;
use crate::signin::http::{CaError, HttpClient};
use crate::store::{Store, StoreError, TrustRule};
use chrono::{TimeDelta, Utc};
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap};

/// The grant type of a token exchange.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The subject token type of a CI job's token.
pub const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
/// The type of the token issued.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The exchange, built once per server: the store and the issuers' cached
/// keys.
#[derive(Debug)]
pub struct Exchange {
    store: Store,
    issuers: Issuers,
    clusters: Vec<String>,
}

/// A checked token and the rule it meets.
struct Accepted {
    rule: TrustRule,
    claims: Map<String, Value>,
}

impl Exchange {
    /// The exchange over `store`, reaching issuers with `[ci] ca_file`'s CAs
    /// (or the system's roots).
    pub fn new(config: &Config, store: Store) -> Result<Exchange, CaError> {
        let http = HttpClient::new(config.ci.ca_file.as_deref())?;
        Ok(Exchange {
            store,
            issuers: Issuers::new(http),
            clusters: config.clusters.iter().map(|c| c.name.clone()).collect(),
        })
    }

    /// Exchange the form's `subject_token` for a bot credential: the token
    /// endpoint's JSON answer, or the OAuth error (and `row`'s refusal).
    /// `row` names the bot, the rule and the job's token once known.
    pub async fn exchange(&self, form: &HashMap<String, String>, row: &mut AuditRow) -> Result<Value, OAuthError> {
        match self.run(form, row).await {
            Ok(answer) => Ok(answer),
            Err(refused) => {
                row.refuse(refused.refusal);
                tracing::info!(refused = %refused.refusal, why = %refused.description, "CI token exchange refused");
                Err(refused.oauth())
            }
        }
    }

    async fn run(&self, form: &HashMap<String, String>, row: &mut AuditRow) -> Result<Value, Refused> {
        let token = subject_token(form)?;
        let unverified = token::read(token)?;
        let accepted = self.check(token, &unverified).await?;
        let (rule, claims) = (&accepted.rule, &accepted.claims);
        let bot = Principal::bot(&rule.bot);
        let origin = Origin {
            audience: None,
            via: via(rule, claims),
        };
        row.principal_kind = bot.kind.as_str().into();
        row.login = rule.bot.clone();
        row.via = origin.via.clone();
        self.bot_enabled(&bot).await?;
        self.not_replayed(token, claims).await?;
        let expires = Utc::now() + TimeDelta::seconds(rule.duration_seconds as i64);
        let store = self.store.clone();
        let rule_id = rule.id.clone();
        let issue = move || match store.issue_ci_credential(&bot, expires, &origin, &rule_id) {
            // Removed while the token was checked: no rule trusts it now.
            Err(StoreError::NotFound(_)) => Ok(None),
            issued => issued.map(Some),
        };
        let Some((credential, secret)) = blocking(issue).await? else {
            let why = format!("trust rule {} was removed while this token was checked", rule.id);
            return Err(Refused::new(Refusal::CiNoRule, why));
        };
        row.name = credential.id.clone();
        row.credential_prefix = credential.display_prefix.clone();
        Ok(json!({
            "access_token": secret,
            "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer",
            "expires_in": rule.duration_seconds,
            "clusters": self.clusters_of(&rule.bot).await,
        }))
    }

    /// The token's signature, issuer, times and claims checked against the
    /// rules trusting its issuer: the one rule it meets.
    async fn check(&self, token: &str, unverified: &Unverified) -> Result<Accepted, Refused> {
        let issuer = unverified.claims.get("iss").and_then(Value::as_str).unwrap_or_default();
        let store = self.store.clone();
        let wanted = issuer.to_string();
        let rules = blocking(move || store.trust_rules_for_issuer(&wanted)).await?;
        if rules.is_empty() {
            return Err(Refused::new(
                Refusal::CiTokenIssuer,
                format!("no trust rule trusts tokens from issuer {:?}", shown(issuer)),
            ));
        }
        let key = self.issuers.key(issuer, unverified.kid.as_deref()).await?;
        let claims = token::verify(token, unverified.alg, &key, issuer)?;
        let rule = choose(&rules, &claims)?.clone();
        Ok(Accepted { rule, claims })
    }

    async fn bot_enabled(&self, bot: &Principal) -> Result<(), Refused> {
        let (store, who) = (self.store.clone(), bot.clone());
        match blocking(move || store.principal_disabled(&who)).await? {
            Some(false) => Ok(()),
            _ => Err(Refused::new(
                Refusal::CiBotDisabled,
                format!("bot {} is disabled: its trust rules give no credential", bot.name),
            )),
        }
    }

    /// Remember the token as exchanged, refusing it if it was already: by
    /// its issuer and `jti`, or the digest of its signed part when it has
    /// none.
    async fn not_replayed(&self, token: &str, claims: &Map<String, Value>) -> Result<(), Refused> {
        let digest = replay_key(token, claims);
        let exp = token::seconds(claims, "exp").unwrap_or_default();
        // Kept well past the last second the token still verifies (exp and
        // the skew, compared in whole seconds).
        let keep_until = chrono::DateTime::from_timestamp(exp + SKEW_SECONDS + 300, 0).unwrap_or_else(Utc::now);
        let store = self.store.clone();
        if blocking(move || store.mark_exchanged(&digest, keep_until)).await? {
            return Ok(());
        }
        Err(Refused::new(
            Refusal::CiTokenReplayed,
            "the subject token was exchanged already: each CI token gives one credential",
        ))
    }

    /// The clusters the bot holds a grant in effect on (for `ci-login`'s
    /// contexts); empty when the store cannot say.
    async fn clusters_of(&self, bot: &str) -> Vec<String> {
        let (store, clusters, bot) = (self.store.clone(), self.clusters.clone(), Principal::bot(bot));
        let held = blocking(move || {
            let now = Utc::now();
            let mut held = Vec::new();
            for cluster in clusters {
                let grants = store.grants_of(&bot, &cluster)?;
                if grants.iter().any(|g| g.revoked_at.is_none() && g.expires_at > now) {
                    held.push(cluster);
                }
            }
            Ok(held)
        });
        held.await.unwrap_or_default()
    }
}

/// The form's subject token, if the request is a JWT token exchange.
fn subject_token(form: &HashMap<String, String>) -> Result<&str, Refused> {
    let malformed = |why: String| Refused::new(Refusal::CiRequest, why);
    let grant_type = form.get("grant_type").map(String::as_str).unwrap_or_default();
    if grant_type != GRANT_TYPE {
        return Err(malformed(format!("grant_type must be {GRANT_TYPE}")));
    }
    let token_type = form.get("subject_token_type").map(String::as_str).unwrap_or_default();
    if token_type != JWT_TYPE {
        return Err(malformed(format!(
            "subject_token_type must be {JWT_TYPE} (a CI job's OpenID Connect token)"
        )));
    }
    match form.get("subject_token").map(|t| t.trim()) {
        Some(token) if !token.is_empty() => Ok(token),
        _ => Err(malformed("give the CI job's token as subject_token".into())),
    }
}

/// The one rule the verified `claims` meet: its audience, all its
/// conditions, its token age; rules of one bot only.
fn choose<'r>(rules: &'r [TrustRule], claims: &Map<String, Value>) -> Result<&'r TrustRule, Refused> {
    let audiences = token::audiences(claims);
    let for_us: Vec<&TrustRule> = rules
        .iter()
        .filter(|r| audiences.contains(&r.audience.as_str()))
        .collect();
    if for_us.is_empty() {
        let said = audiences.iter().map(|a| shown(a)).collect::<Vec<_>>().join(", ");
        return Err(Refused::new(
            Refusal::CiTokenAudience,
            format!("the token's audience ({said}) is not one a trust rule of its issuer names: request the token with portcullis's URL as audience"),
        ));
    }
    let matching: Vec<&TrustRule> = for_us
        .into_iter()
        .filter(|r| rules::pins_an_owner(&r.claims) && claims::all_hold(&r.claims, claims))
        .collect();
    let subject = claims.get("sub").and_then(Value::as_str).unwrap_or("-");
    if matching.is_empty() {
        return Err(Refused::new(
            Refusal::CiNoRule,
            format!(
                "the token (sub {:?}) meets no trust rule's claim conditions",
                shown(subject)
            ),
        ));
    }
    let fresh = fresh(matching, claims)?;
    let bots: BTreeSet<&str> = fresh.iter().map(|r| r.bot.as_str()).collect();
    if bots.len() > 1 {
        let bots = bots.into_iter().collect::<Vec<_>>().join(", ");
        return Err(Refused::new(
            Refusal::CiNoRule,
            format!(
                "the token meets trust rules of several bots ({bots}): narrow their conditions so one bot is meant"
            ),
        ));
    }
    Ok(fresh[0])
}

/// The rules whose maximum token age the token's `iat` is within.
fn fresh<'r>(rules: Vec<&'r TrustRule>, claims: &Map<String, Value>) -> Result<Vec<&'r TrustRule>, Refused> {
    let Some(iat) = token::seconds(claims, "iat") else {
        return Err(Refused::new(
            Refusal::CiTokenMalformed,
            "the subject token has no iat claim",
        ));
    };
    let age = Utc::now().timestamp() - iat;
    if age < -SKEW_SECONDS {
        return Err(Refused::new(
            Refusal::CiTokenNotYetValid,
            "the subject token was issued in the future (iat)",
        ));
    }
    let oldest = rules.iter().map(|r| r.max_token_age_seconds).max().unwrap_or_default();
    let fresh: Vec<&TrustRule> = rules
        .into_iter()
        .filter(|r| age <= r.max_token_age_seconds as i64)
        .collect();
    if fresh.is_empty() {
        return Err(Refused::new(
            Refusal::CiTokenTooOld,
            format!("the subject token was issued {age} s ago; its trust rule accepts tokens at most {oldest} s old: exchange it as soon as the job gets it"),
        ));
    }
    Ok(fresh)
}

/// What the credential was issued through, for the audit row of each of
/// its requests: the rule, and the job's subject, repository and run.
fn via(rule: &TrustRule, claims: &Map<String, Value>) -> String {
    let first = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| claims.get(*n).and_then(claims::text))
            .map_or("-".to_string(), |v| safe(&v))
    };
    format!(
        "ci rule={} sub={} repository={} run_id={}",
        rule.id,
        first(&["sub"]),
        first(&["repository", "project_path"]),
        first(&["run_id", "pipeline_id", "build_id"]),
    )
}

/// Client text for the `via` words: controls made visible, no spaces
/// (which separate the words), bounded.
fn safe(text: &str) -> String {
    let short: String = text.chars().take(200).collect();
    crate::text::escape_control(&short).replace(' ', "\\u{20}")
}

/// Client text for a refusal's description: bounded, controls visible.
fn shown(text: &str) -> String {
    crate::text::escape_control(&text.chars().take(120).collect::<String>()).into_owned()
}

/// Run a store call off the async threads; a failure is the store's.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Refused> {
    let failed = |cause: String| {
        tracing::warn!(%cause, "CI token exchange: the store failed");
        Refused::new(
            Refusal::CredentialsUnavailable,
            "portcullis cannot reach its store; try again",
        )
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(failed(error.to_string())),
        Err(error) => Err(failed(error.to_string())),
    }
}
/// What a token is remembered by once exchanged: its issuer and `jti`, or
/// the digest of its signed part when it has no `jti` — the signed part
/// only, because an ECDSA signature has a second valid form (s and n - s)
/// and a digest over it would let one token be exchanged twice.
fn replay_key(token: &str, claims: &Map<String, Value>) -> String {
    let issuer = claims.get("iss").and_then(Value::as_str).unwrap_or_default();
    match claims.get("jti").and_then(Value::as_str) {
        Some(jti) => credential::hash(&format!("jti\n{issuer}\n{jti}")),
        None => {
            let signed = token.rsplit_once('.').map_or(token, |(signed, _)| signed);
            credential::hash(&format!("token\n{signed}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_stored_on_the_reusable_workflow_alone_is_met_by_no_token() {
        let now = Utc::now().timestamp();
        let claims: Map<String, Value> = serde_json::from_value(json!({
            "aud": "https://portcullis.example", "sub": "repo:evil/x:ref:refs/heads/main",
            "repository": "evil/x", "iat": now,
            "job_workflow_ref": "acme/shop/.github/workflows/deploy.yml@refs/heads/main",
        }))
        .unwrap();
        let rule = |conditions: &[(&str, &str)]| TrustRule {
            id: "r".into(),
            bot: "deployer".into(),
            issuer: "https://token.actions.githubusercontent.com".into(),
            audience: "https://portcullis.example".into(),
            claims: conditions.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            duration_seconds: 3600,
            max_token_age_seconds: 600,
            created_at: Utc::now(),
            created_by: "operator".into(),
        };
        let workflow = (
            "job_workflow_ref",
            "acme/shop/.github/workflows/deploy.yml@refs/heads/main",
        );
        let refused = choose(&[rule(&[workflow])], &claims).unwrap_err();
        assert_eq!(refused.refusal, Refusal::CiNoRule, "{}", refused.description);
        // Pinned beside the repository, the same rule is met by its own jobs.
        let mut own = claims.clone();
        own.insert("repository".into(), json!("acme/shop"));
        assert!(choose(&[rule(&[workflow, ("repository", "acme/shop")])], &own).is_ok());
        assert!(choose(&[rule(&[workflow, ("repository", "acme/shop")])], &claims).is_err());
    }

    #[test]
    fn a_token_without_jti_is_remembered_by_its_signed_part_whatever_its_signature() {
        let claims: Map<String, Value> = serde_json::from_str(r#"{"iss": "https://i.example"}"#).unwrap();
        let one = replay_key("aGVhZA.Ym9keQ.c2lnLW9uZQ", &claims);
        assert_eq!(
            one,
            replay_key("aGVhZA.Ym9keQ.c2lnLXR3bw", &claims),
            "same token, other signature"
        );
        assert_ne!(one, replay_key("aGVhZA.b3RoZXI.c2lnLW9uZQ", &claims), "another payload");
        let with_jti: Map<String, Value> = serde_json::from_str(r#"{"iss": "https://i.example", "jti": "7"}"#).unwrap();
        assert_eq!(
            replay_key("a.b.c", &with_jti),
            replay_key("x.y.z", &with_jti),
            "by issuer and jti"
        );
    }
}
