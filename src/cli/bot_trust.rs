//! `portcullis bot trust add|list|remove`: a bot's trust rules for CI
//! jobs' OpenID Connect tokens (`crate::ci`). A person command: the
//! signed-in admin changes them through the server's API ([`run`]), which
//! decides and audits. `portcullis admin bot trust` is the operator's form
//! on the server's store ([`run_operator`]), recorded as `cli` as the other
//! operator commands.

use super::access::io;
use super::remote::Remote;
use super::{when, CliError, PrincipalCommand};
use crate::ci::rules::{self, TrustAsk, TrustError};
use crate::config::Config;
use crate::signin::groups::Actor;
use crate::store::{Store, TrustRule};
use crate::text::escape_control as esc;
use clap::Subcommand;
use serde_json::json;
use std::io::Write;

/// `bot …` as a person.
#[derive(Debug, Subcommand)]
pub enum BotCommand {
    /// Admins: which CI jobs' tokens a bot trusts (`ci-login` exchanges
    /// them for a short-lived credential of the bot).
    #[command(subcommand)]
    Trust(TrustCommand),
}

/// `admin bot …`: the bots themselves, and their trust rules.
#[derive(Debug, Subcommand)]
pub enum AdminBotCommand {
    /// Add, list, disable bots.
    #[command(flatten)]
    Principal(PrincipalCommand),
    /// Which CI jobs' tokens a bot trusts, on the store as the operator.
    #[command(subcommand)]
    Trust(TrustCommand),
}

/// `bot trust …`.
#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Trust tokens from `--issuer` for `--audience` whose claims meet
    /// every `--claim` (an exact value, or a glob with `*`). Name the
    /// repository (or `sub`): the issuer serves every repository it hosts.
    Add(AddArgs),
    /// List trust rules.
    List {
        /// Only this bot's.
        #[arg(long)]
        bot: Option<String>,
    },
    /// Remove a trust rule; the credentials it gave are revoked.
    Remove {
        /// Rule id.
        id: String,
    },
}

/// `bot trust add`'s options.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The bot whose credential an exchanged token gives.
    #[arg(long)]
    bot: String,
    /// The issuer, exactly as the tokens' `iss` says it
    /// (`https://token.actions.githubusercontent.com`, `https://gitlab.com`).
    #[arg(long)]
    issuer: String,
    /// The audience the tokens must carry: this portcullis's URL.
    #[arg(long)]
    audience: String,
    /// `name=value` (repeat it), e.g. `repository=acme/shop`,
    /// `ref=refs/tags/v*`; all must hold.
    #[arg(long = "claim")]
    claims: Vec<String>,
    /// How long an exchanged credential lasts (default 1h, at most 12h).
    #[arg(long)]
    duration: Option<humantime::Duration>,
    /// The oldest token accepted, by its `iat` (default 10m, at most 1h).
    #[arg(long)]
    max_token_age: Option<humantime::Duration>,
}

/// Run a `bot` command as the signed-in person, against `remote`.
pub async fn run(remote: &Remote, command: BotCommand, out: &mut dyn Write) -> Result<(), CliError> {
    let BotCommand::Trust(command) = command;
    match command {
        TrustCommand::Add(args) => {
            let ask = ask(args);
            let body = json!({
                "bot": ask.bot, "issuer": ask.issuer, "audience": ask.audience, "claims": ask.claims,
                "duration_seconds": ask.duration.map(|d| d.as_secs()),
                "max_token_age_seconds": ask.max_token_age.map(|d| d.as_secs()),
            });
            let answer = remote.post("trust-rules", body).await?;
            added(&rule_of(&answer["rule"])?, out)
        }
        TrustCommand::List { bot } => {
            let path = match bot {
                Some(bot) => format!(
                    "trust-rules?bot={}",
                    form_urlencoded::byte_serialize(bot.as_bytes()).collect::<String>()
                ),
                None => "trust-rules".into(),
            };
            let answer = remote.get(&path).await?;
            let rules: Vec<TrustRule> = serde_json::from_value(answer["rules"].clone()).map_err(unreadable)?;
            list(&rules, out)
        }
        TrustCommand::Remove { id } => {
            let answer = remote
                .post(
                    &format!("trust-rules/{}/remove", super::remote::segment(&id)?),
                    json!({}),
                )
                .await?;
            let revoked = answer["revoked_credentials"].as_u64().unwrap_or_default();
            removed(&rule_of(&answer["rule"])?, revoked as usize, out)
        }
    }
}

/// Run `admin bot trust` on the server's store, as the operator.
pub fn run_operator(
    config: &Config,
    store: &Store,
    command: TrustCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        TrustCommand::Add(args) => added(
            &rules::add_rule(config, store, ask(args), &Actor::Operator).map_err(message)?,
            out,
        ),
        TrustCommand::List { bot } => list(&store.trust_rules(bot.as_deref())?, out),
        TrustCommand::Remove { id } => {
            let (rule, revoked) = rules::remove_rule(store, &id, &Actor::Operator).map_err(message)?;
            removed(&rule, revoked, out)
        }
    }
}

fn ask(args: AddArgs) -> TrustAsk {
    TrustAsk {
        bot: args.bot,
        issuer: args.issuer,
        audience: args.audience,
        claims: args.claims,
        duration: args.duration.map(Into::into),
        max_token_age: args.max_token_age.map(Into::into),
    }
}

fn added(rule: &TrustRule, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "trust rule {}: bot {} trusts tokens from {} for audience {} with {}; a credential lasts {}, tokens at most {} old",
        esc(&rule.id),
        esc(&rule.bot),
        esc(&rule.issuer),
        esc(&rule.audience),
        esc(&conditions(rule)),
        humantime::format_duration(std::time::Duration::from_secs(rule.duration_seconds)),
        humantime::format_duration(std::time::Duration::from_secs(rule.max_token_age_seconds)),
    )
    .map_err(io)
}

fn removed(rule: &TrustRule, revoked: usize, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "removed trust rule {} (bot {}): its tokens are no longer exchanged; {revoked} credential(s) it gave revoked",
        esc(&rule.id),
        esc(&rule.bot)
    )
    .map_err(io)
}

fn list(rules: &[TrustRule], out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "{:<38} {:<16} {:<44} {:<8} {:<8} {:<20} CLAIMS",
        "ID", "BOT", "ISSUER", "LASTS", "MAX AGE", "CREATED"
    )
    .map_err(io)?;
    for r in rules {
        writeln!(
            out,
            "{:<38} {:<16} {:<44} {:<8} {:<8} {:<20} aud={} {}",
            esc(&r.id),
            esc(&r.bot),
            esc(&r.issuer),
            humantime::format_duration(std::time::Duration::from_secs(r.duration_seconds)).to_string(),
            humantime::format_duration(std::time::Duration::from_secs(r.max_token_age_seconds)).to_string(),
            when(&r.created_at),
            esc(&r.audience),
            esc(&conditions(r)),
        )
        .map_err(io)?;
        if !crate::ci::rules::pins_an_owner(&r.claims) {
            writeln!(
                out,
                "  ^ names no owner of the jobs it trusts: no token meets it; replace it (see `bot trust add`)"
            )
            .map_err(io)?;
        }
    }
    Ok(())
}

fn conditions(rule: &TrustRule) -> String {
    let pairs: Vec<String> = rule.claims.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(" ")
}

fn rule_of(value: &serde_json::Value) -> Result<TrustRule, CliError> {
    serde_json::from_value(value.clone()).map_err(unreadable)
}

fn unreadable(error: serde_json::Error) -> CliError {
    CliError::Message(format!("the server's answer is not a trust rule: {error}"))
}

fn message(error: TrustError) -> CliError {
    match error {
        TrustError::Store(e) => CliError::Store(e),
        other => CliError::Message(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_marks_a_rule_that_names_no_owner_and_so_is_met_by_no_token() {
        let rule = |claim: (&str, &str)| TrustRule {
            id: claim.0.into(),
            bot: "deployer".into(),
            issuer: "https://token.actions.githubusercontent.com".into(),
            audience: "https://portcullis.example".into(),
            claims: [(claim.0.to_string(), claim.1.to_string())].into(),
            duration_seconds: 3600,
            max_token_age_seconds: 600,
            created_at: chrono::Utc::now(),
            created_by: "operator".into(),
        };
        let mut out = Vec::new();
        let rules = [
            rule(("repository", "acme/shop")),
            rule((
                "job_workflow_ref",
                "acme/shop/.github/workflows/deploy.yml@refs/heads/main",
            )),
        ];
        list(&rules, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[1].starts_with("repository "), "{text}");
        assert!(lines[2].starts_with("job_workflow_ref "), "{text}");
        assert!(lines[3].contains("names no owner"), "{text}");
    }
}
