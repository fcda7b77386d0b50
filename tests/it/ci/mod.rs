//! CI jobs exchange their OpenID Connect token for a short-lived bot
//! credential (issue 20): against a test-run issuer shaped like GitHub
//! Actions' ([`issuer`]), the exchange works and kubectl then acts as the
//! bot, audited with the rule and the job ([`exchange`]); every bad token
//! is refused with its own reason and no credential ([`refusals`]); the
//! rules are managed from the command line and `ci-login` writes a
//! kubeconfig kubectl uses ([`cli`]).

mod cli;
mod exchange;
pub mod issuer;
mod refusals;

use crate::harness::Portcullis;
use issuer::CiIssuer;
use portcullis::audit::row::AuditRow;
use portcullis::ci::rules::{self, TrustAsk};
use portcullis::identity::Principal;
use portcullis::signin::groups::Actor;
use portcullis::store::TrustRule;
use serde_json::Value;
use std::time::Duration;

/// The bot the jobs act as.
pub const BOT: &str = "deployer";

/// An issuer, portcullis trusting its CA, bot [`BOT`] (viewer in `shop`)
/// trusting its tokens for acme/shop's main branch.
pub struct Ci {
    pub issuer: CiIssuer,
    pub env: Portcullis,
    pub rule: TrustRule,
}

/// What one exchange at `/oauth/token` answered, and its audit row.
pub struct Answer {
    pub status: http::StatusCode,
    pub body: Value,
    pub row: AuditRow,
}

impl Answer {
    /// The answer of an exchange that worked.
    pub fn ok(&self) -> &Value {
        assert_eq!(self.status, 200, "{}", self.body);
        &self.body
    }
}

impl Ci {
    /// Set it all up.
    pub async fn start() -> Ci {
        Ci::start_with(|_| {}).await
    }

    /// Set it all up, with `change` made to portcullis's configuration.
    pub async fn start_with(change: impl FnOnce(&mut portcullis::config::Config) + Send + 'static) -> Ci {
        let issuer = CiIssuer::start().await;
        let ca_file = issuer.ca_file.clone();
        let env = Portcullis::start_with(move |config| {
            config.ci.ca_file = Some(ca_file);
            change(config);
        })
        .await;
        let bot = Principal::bot(BOT);
        env.store.add_principal(&bot, false).unwrap();
        let grant = portcullis::cli::new_grant(
            &env.config,
            bot,
            env.cluster,
            "viewer",
            Some("shop".into()),
            Duration::from_secs(3600),
            "test",
        )
        .unwrap();
        env.store.add_grant(&grant).unwrap();
        env.reconcile().await;
        let rule = trust(&env, &issuer, &["repository=acme/shop", "ref=refs/heads/main"], None);
        Ci { issuer, env, rule }
    }

    /// The audience the rule names: portcullis's URL.
    pub fn audience(&self) -> String {
        self.env.config.public_url.clone()
    }

    /// GitHub's claims for this portcullis, run `run_id`.
    pub fn claims(&self, run_id: &str) -> Value {
        self.issuer.github_claims(&self.audience(), run_id)
    }

    /// Exchange `token` at portcullis's token endpoint, as `ci-login` and
    /// the README's `curl` line do.
    pub async fn exchange(&self, token: &str) -> Answer {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange")
            .append_pair("subject_token", token)
            .append_pair("subject_token_type", "urn:ietf:params:oauth:token-type:jwt")
            .finish();
        let headers = [("content-type", "application/x-www-form-urlencoded")];
        let answer = self
            .env
            .raw()
            .send(http::Method::POST, "/oauth/token", &headers, form.into_bytes())
            .await;
        let row = crate::audit::row(&self.env, &crate::audit::audit_id(&answer)).await;
        Answer {
            status: answer.status,
            body: answer.json(),
            row,
        }
    }

    /// The bot's credentials.
    pub fn credentials(&self) -> Vec<portcullis::identity::Credential> {
        self.env.store.list_credentials(Some(&Principal::bot(BOT))).unwrap()
    }
}

/// Bot [`BOT`] trusts `issuer`'s tokens for `env`'s URL meeting `claims`.
pub fn trust(env: &Portcullis, issuer: &CiIssuer, claims: &[&str], duration: Option<Duration>) -> TrustRule {
    let ask = TrustAsk {
        bot: BOT.into(),
        issuer: issuer.issuer.clone(),
        audience: env.config.public_url.clone(),
        claims: claims.iter().map(|c| c.to_string()).collect(),
        duration,
        max_token_age: None,
    };
    rules::add_rule(&env.config, &env.store, ask, &Actor::Operator).unwrap()
}
