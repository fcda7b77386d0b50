//! Trust rules, added and removed by administrators ([`add_rule`],
//! [`remove_rule`]: the person API as the signed-in admin, or the operator
//! on the server, [`Actor`]); each change is an audit row (resource
//! `trustrules` of `portcullis.dev`) through [`crate::audit::commit_event`].

use super::claims;
use crate::audit::row::AuditRow;
use crate::audit::AuditError;
use crate::config::Config;
use crate::signin::groups::Actor;
use crate::store::{Store, StoreError, TrustRule};
use chrono::Utc;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long an exchanged credential lasts unless the rule says.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(3600);
/// The longest a rule may let an exchanged credential last: a CI job's
/// access should end with the job.
pub const MAX_DURATION: Duration = Duration::from_secs(12 * 3600);
/// The oldest token (by `iat`) accepted unless the rule says.
pub const DEFAULT_MAX_TOKEN_AGE: Duration = Duration::from_secs(600);
/// The most a rule may set the oldest token accepted to.
pub const MAX_MAX_TOKEN_AGE: Duration = Duration::from_secs(3600);

/// What a new rule says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrustAsk {
    /// The bot.
    pub bot: String,
    /// The issuer URL, exactly as tokens' `iss` says it.
    pub issuer: String,
    /// The audience tokens must carry.
    pub audience: String,
    /// `name=value` conditions, all of which must hold.
    pub claims: Vec<String>,
    /// How long an exchanged credential lasts ([`DEFAULT_DURATION`]).
    pub duration: Option<Duration>,
    /// The oldest token accepted ([`DEFAULT_MAX_TOKEN_AGE`]).
    pub max_token_age: Option<Duration>,
}

/// Why a rule could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The rule is not usable as asked.
    #[error("{0}")]
    Invalid(String),
    /// The store failed, or has no such bot or rule.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The change could not be recorded in the audit.
    #[error(transparent)]
    Audit(#[from] AuditError),
}

/// Add a rule for `ask.bot`, by `actor`; audited.
pub fn add_rule(config: &Config, store: &Store, ask: TrustAsk, actor: &Actor) -> Result<TrustRule, TrustError> {
    check_url("issuer", &ask.issuer)?;
    check_text("audience", &ask.audience)?;
    if !config.ci.accepts_audience(&config.public_url, &ask.audience) {
        let accepted = match config.ci.audiences.is_empty() {
            true => format!("this portcullis's own URL, {}", config.public_url),
            false => format!("one of [ci] audiences: {}", config.ci.audiences.join(", ")),
        };
        return Err(TrustError::Invalid(format!(
            "the audience {:?} is not {accepted}: a job must ask for a token made for portcullis, not one \
             another service also takes (whoever receives it there could exchange it here)",
            crate::text::escape_control(&ask.audience)
        )));
    }
    let conditions = conditions(&ask.claims)?;
    let duration = within("duration", ask.duration.unwrap_or(DEFAULT_DURATION), MAX_DURATION)?;
    let max_age = within(
        "max token age",
        ask.max_token_age.unwrap_or(DEFAULT_MAX_TOKEN_AGE),
        MAX_MAX_TOKEN_AGE,
    )?;
    let rule = TrustRule {
        id: uuid::Uuid::now_v7().to_string(),
        bot: ask.bot,
        issuer: ask.issuer,
        audience: ask.audience,
        claims: conditions,
        duration_seconds: duration.as_secs(),
        max_token_age_seconds: max_age.as_secs(),
        created_at: Utc::now(),
        created_by: actor.name().to_string(),
    };
    // The rule's row is on record before the rule is (see
    // `crate::audit::Recorded`).
    let recorded = crate::audit::begin_event(store, rule_row("create", &rule, actor))?;
    if let Err(error) = store.add_trust_rule(&rule) {
        return Err(recorded.store_failed(error).into());
    }
    recorded.done(rule_row("create", &rule, actor), Vec::new())?;
    Ok(rule)
}

/// Remove rule `id`, by `actor`, revoking the credentials exchanged
/// through it (a rule is removed when what it trusted is no longer
/// trusted); audited. Returns the rule and how many were revoked.
pub fn remove_rule(store: &Store, id: &str, actor: &Actor) -> Result<(TrustRule, usize), TrustError> {
    let Some(known) = store.trust_rules(None)?.into_iter().find(|rule| rule.id == id) else {
        return Err(StoreError::NotFound(format!("trust rule {id}")).into());
    };
    // The removal's row is on record before the removal is (see
    // `crate::audit::Recorded`).
    let recorded = crate::audit::begin_event(store, rule_row("delete", &known, actor))?;
    let (rule, revoked) = match store.remove_trust_rule(id) {
        Ok(removed) => removed,
        Err(error) => return Err(recorded.store_failed(error).into()),
    };
    let mut row = rule_row("delete", &rule, actor);
    row.query = crate::audit::row::bounded(&format!("{}&revoked_credentials={revoked}", row.query));
    recorded.done(row, Vec::new())?;
    Ok((rule, revoked))
}

fn conditions(given: &[String]) -> Result<BTreeMap<String, String>, TrustError> {
    if given.is_empty() {
        return Err(TrustError::Invalid(
            "give at least one --claim: without one, every job the issuer serves (any repository) would be trusted"
                .into(),
        ));
    }
    if given.len() > claims::MAX_CONDITIONS {
        return Err(TrustError::Invalid(format!(
            "at most {} claim conditions",
            claims::MAX_CONDITIONS
        )));
    }
    let mut conditions = BTreeMap::new();
    for text in given {
        let (name, pattern) = claims::parse_condition(text).map_err(TrustError::Invalid)?;
        if conditions.insert(name.clone(), pattern).is_some() {
            return Err(TrustError::Invalid(format!("claim {name:?} is given twice")));
        }
    }
    if !pins_an_owner(&conditions) {
        return Err(TrustError::Invalid(
            "a rule must name whose jobs it trusts: give --claim repository=owner/name (or repository_owner=…, \
             sub=repo:owner/…, project_path=group/…, Buildkite's organization_slug=…, CircleCI's \
             oidc.circleci.com/project-id=…): an issuer like GitHub's serves every repository, and a job \
             chooses its own audience, so a rule on ref, environment or the reusable workflow called \
             (job_workflow_ref) alone would trust anyone's"
                .into(),
        ));
    }
    Ok(conditions)
}

/// Do these conditions pin whose jobs they trust? A rule stored before a
/// claim stopped counting (`job_workflow_ref`) is matched by no token.
pub fn pins_an_owner(conditions: &BTreeMap<String, String>) -> bool {
    conditions.iter().any(|(name, pattern)| names_an_owner(name, pattern))
}

/// Does this condition pin the owner of the job (the repository's owner or
/// group)? Exact for the claims that are only an owner; for the paths, the
/// part before the first `*` must hold the owner and its `/`, so that
/// `repository=acme*` (which `acme-evil/x` meets) does not count.
/// `job_workflow_ref` never counts: it names the reusable workflow a job
/// calls, and any repository may call a public one, so a rule on it alone
/// would trust every caller's job.
fn names_an_owner(name: &str, pattern: &str) -> bool {
    let literal = pattern.split('*').next().unwrap_or_default();
    match name {
        "repository_owner"
        | "repository_owner_id"
        | "repository_id"
        | "namespace_id"
        | "namespace_path"
        | "project_id"
        | "organization_slug"
        | "organization_id"
        | "oidc.circleci.com/project-id" => !pattern.is_empty() && !pattern.contains('*'),
        "repository" | "project_path" => path_names_an_owner(literal),
        "sub" => sub_names_an_owner(literal, !pattern.contains('*')),
        _ => false,
    }
}

/// `owner/…` with the owner whole.
fn path_names_an_owner(literal: &str) -> bool {
    literal
        .split_once('/')
        .is_some_and(|(owner, _)| !owner.is_empty() && !owner.contains(':'))
}

/// A `sub` pins the owner when it begins with a claim that does: GitHub's
/// default `repo:owner/name:…` or a custom template's first claim,
/// GitLab's `project_path:group/project:…`, Buildkite's
/// `organization:<slug>:…`, CircleCI's `org/<org id>/…`; an owner path, or
/// an owner's name or id ended by its separator (or by the pattern's end,
/// when it has no `*`).
fn sub_names_an_owner(literal: &str, whole: bool) -> bool {
    let ended = |rest: &str, separator: char| match rest.split_once(separator) {
        Some((value, _)) => !value.is_empty(),
        None => whole && !rest.is_empty(),
    };
    if let Some(rest) = literal.strip_prefix("org/") {
        return ended(rest, '/');
    }
    let Some((key, rest)) = literal.split_once(':') else {
        return false;
    };
    match key {
        "repo" | "repository" | "project_path" => path_names_an_owner(rest),
        "repository_owner"
        | "repository_owner_id"
        | "repository_id"
        | "project_id"
        | "namespace_path"
        | "namespace_id"
        | "organization" => ended(rest, ':'),
        _ => false,
    }
}

fn check_url(what: &str, url: &str) -> Result<(), TrustError> {
    check_text(what, url)?;
    let rest = url.strip_prefix("https://").unwrap_or_default();
    if rest.is_empty() || rest.starts_with('/') || url.contains(['?', '#', ' ']) {
        return Err(TrustError::Invalid(format!(
            "the {what} must be an https URL without query or fragment, exactly as its tokens' iss says it (e.g. https://token.actions.githubusercontent.com)"
        )));
    }
    Ok(())
}

fn check_text(what: &str, text: &str) -> Result<(), TrustError> {
    if text.trim().is_empty() || text.len() > 512 || text.chars().any(char::is_control) {
        return Err(TrustError::Invalid(format!(
            "the {what} is empty, too long or has control characters"
        )));
    }
    Ok(())
}

fn within(what: &str, value: Duration, max: Duration) -> Result<Duration, TrustError> {
    if value < Duration::from_secs(10) || value > max {
        return Err(TrustError::Invalid(format!(
            "the {what} must be between 10s and {}",
            humantime::format_duration(max)
        )));
    }
    Ok(value)
}

/// A rule change's row: the bot, issuer, audience and conditions in the
/// query; on record as a write, since it changes who may act as the bot.
fn rule_row(verb: &str, rule: &TrustRule, actor: &Actor) -> AuditRow {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query
        .append_pair("bot", &rule.bot)
        .append_pair("issuer", &rule.issuer)
        .append_pair("audience", &rule.audience);
    for (name, pattern) in &rule.claims {
        query.append_pair("claim", &format!("{name}={pattern}"));
    }
    let mut row = crate::signin::groups::event(verb, "trustrules", actor, "", None, &rule.id);
    row.query = crate::audit::row::bounded(&query.finish());
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Principal;

    /// portcullis at `https://p.example/`, with `[ci] audiences` as given.
    fn config(audiences: &[&str]) -> Config {
        let mut config = Config::from_sources(
            r#"
listen = "127.0.0.1:8443"
public_url = "https://p.example/"
data_dir = "/tmp/unused"
[tls]
cert_file = "c.pem"
key_file = "k.pem"
[[clusters]]
name = "c"
server = "https://127.0.0.1:6443"
ca_file = "ca.pem"
token_file = "token"
"#,
            Vec::new(),
        )
        .unwrap();
        config.ci.audiences = audiences.iter().map(|a| a.to_string()).collect();
        config
    }

    fn ask(claims: &[&str]) -> TrustAsk {
        TrustAsk {
            bot: "deployer".into(),
            issuer: "https://token.actions.githubusercontent.com".into(),
            audience: "https://p.example".into(),
            claims: claims.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_rule_gets_the_default_duration_and_age_and_is_audited_as_its_author_made_and_removed_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        store.add_principal(&Principal::bot("deployer"), false).unwrap();
        let rule = add_rule(&config(&[]), &store, ask(&["repository=acme/shop"]), &Actor::Operator).unwrap();
        assert_eq!((rule.duration_seconds, rule.max_token_age_seconds), (3600, 600));
        assert_eq!(rule.created_by, "cli");
        assert_eq!(rule.claims["repository"], "acme/shop");
        let removed = remove_rule(&store, &rule.id, &Actor::Person(Principal::person("ana"))).unwrap();
        assert_eq!(removed, (rule.clone(), 0));
        assert!(store.trust_rules(None).unwrap().is_empty());
        let filter = crate::audit::query::Filter {
            resource: Some("trustrules".into()),
            ..Default::default()
        };
        let mut audit = crate::audit::sqlite::SqliteAuditStore::open(store.path()).unwrap();
        let rows = crate::audit::store::AuditStore::query(&mut audit, &filter).unwrap();
        let said: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|r| (r.row.verb.as_str(), r.row.login.as_str(), r.row.name.as_str()))
            .collect();
        assert_eq!(
            said,
            [("create", "cli", rule.id.as_str()), ("delete", "ana", rule.id.as_str())]
        );
        assert!(
            rows[0].row.query.contains("claim=repository%3Dacme%2Fshop"),
            "{}",
            rows[0].row.query
        );
    }

    #[test]
    fn a_rule_names_only_an_audience_portcullis_takes_as_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        store.add_principal(&Principal::bot("deployer"), false).unwrap();
        let with = |audience: &str| TrustAsk {
            audience: audience.into(),
            ..ask(&["repository=acme/shop"])
        };
        // By default its own URL, a trailing `/` or not.
        for audience in ["https://p.example", "https://p.example/"] {
            add_rule(&config(&[]), &store, with(audience), &Actor::Operator).unwrap();
        }
        for audience in ["sts.amazonaws.com", "https://p.example.evil", "https://p.example/mcp"] {
            let refused = add_rule(&config(&[]), &store, with(audience), &Actor::Operator).unwrap_err();
            assert!(
                refused.to_string().contains("own URL, https://p.example/"),
                "{audience}: {refused}"
            );
        }
        // `[ci] audiences` names them instead.
        let listed = config(&["portcullis-prod"]);
        add_rule(&listed, &store, with("portcullis-prod"), &Actor::Operator).unwrap();
        let refused = add_rule(&listed, &store, with("https://p.example"), &Actor::Operator).unwrap_err();
        assert!(
            refused.to_string().contains("[ci] audiences: portcullis-prod"),
            "{refused}"
        );
        assert_eq!(store.trust_rules(None).unwrap().len(), 3);
    }

    fn names_an_owner_in(given: &[&str]) -> bool {
        let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
        conditions(&given).is_ok()
    }

    #[test]
    fn a_rule_without_conditions_or_with_a_bad_issuer_or_duration_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        store.add_principal(&Principal::bot("deployer"), false).unwrap();
        let refused = |ask: TrustAsk| {
            add_rule(&config(&[]), &store, ask, &Actor::Operator)
                .unwrap_err()
                .to_string()
        };
        assert!(refused(ask(&[])).contains("at least one --claim"));
        assert!(refused(ask(&["ref=a", "ref=b"])).contains("twice"));
        // Conditions that do not pin whose jobs: anyone's repository meets them.
        for loose in [
            &["ref=refs/heads/main"][..],
            &["environment=prod"],
            &["repository=*"],
            &["repository=acme*"],
            &["sub=repo:*"],
            &["repository_owner=acme*"],
            // The reusable workflow called, which any repository may call.
            &["job_workflow_ref=acme/shop/.github/workflows/deploy.yml@refs/heads/main"],
            &["sub=job_workflow_ref:acme/shop/.github/workflows/deploy.yml@refs/heads/main"],
            &["sub=repository_owner:acme*"],
            &["sub=context:ref:refs/heads/main:repo:acme/shop"],
            &["sub=repo:acme:x/y"],
            &["sub=organization:*"],
            &["sub=org/*"],
            &["organization_slug=acme*"],
        ] {
            assert!(refused(ask(loose)).contains("whose jobs"), "{loose:?}");
        }
        for pinned in [
            &["repository=acme/shop"][..],
            &["repository=acme/*", "ref=refs/tags/v*"],
            &["repository_owner=acme"],
            &["sub=repo:acme/shop:ref:refs/heads/main"],
            &["project_path=group/app"],
            &["sub=project_path:group/app:ref_type:branch:ref:main"],
            &["sub=repository_owner_id:4242:repository:acme/shop:*"],
            &["sub=repository_owner:acme"],
            &[
                "repository=acme/shop",
                "job_workflow_ref=acme/shop/.github/workflows/deploy.yml@*",
            ],
            // Buildkite and CircleCI.
            &["sub=organization:acme:pipeline:deploy:ref:refs/heads/main:*"],
            &["organization_slug=acme", "pipeline_slug=deploy"],
            &["sub=org/5f1b-22/project/9a0c-11/user/*"],
            &["oidc.circleci.com/project-id=9a0c-11"],
        ] {
            assert!(names_an_owner_in(pinned), "{pinned:?}");
        }
        for issuer in ["http://i.example", "https://", "https://i.example?x=1", "token.actions"] {
            let bad = TrustAsk {
                issuer: issuer.into(),
                ..ask(&["repository=acme/shop"])
            };
            assert!(refused(bad).contains("https URL"), "{issuer}");
        }
        let long = TrustAsk {
            duration: Some(Duration::from_secs(13 * 3600)),
            ..ask(&["repository=acme/shop"])
        };
        assert!(refused(long).contains("duration"));
        let ghost = TrustAsk {
            bot: "ghost".into(),
            ..ask(&["repository=acme/shop"])
        };
        assert!(matches!(
            add_rule(&config(&[]), &store, ghost, &Actor::Operator),
            Err(TrustError::Store(StoreError::NotFound(_)))
        ));
    }
}
