//! People sign in with the company's OpenID Connect provider (`[oidc]`).
//!
//! The flow is the authorization code flow with PKCE (S256), `state` and
//! `nonce` ([`flow`]), through the `openidconnect` crate, whose HTTP calls
//! go over portcullis's own client ([`http`]). The provider's discovery
//! document and keys are cached, and the keys fetched again when a token
//! names one the cache lacks ([`provider`]). The ID token's issuer,
//! audience, signature, expiry and nonce are all checked; its claims then
//! name a person ([`login`]), keyed on the provider's issuer and `sub` in
//! the store, admitted only if enabled ([`admit`]).
//!
//! Nothing here knows HTTP doors or cookies: the web door (`doors::web`)
//! keeps the sign-in attempt's random id in a short-lived cookie and hands
//! it here; everything secret about the attempt (state, nonce, PKCE
//! verifier) is derived from that id under the approvals key, so no replica
//! needs to remember an attempt. What signing in gives (a session and its
//! credential) is the door's; `portcullis login` will build on the same.
//! The provider's tokens are never kept.

pub mod flow;
pub mod groups;
pub mod http;
pub mod login;
pub mod provider;
pub mod revoke;

use crate::audit::refusal::Refusal;
use crate::store::{ProviderPerson, SignInPerson, Store, StoreError};

pub use flow::{Callback, SignIn};

/// Why portcullis's sign-in could not be set up (at start).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `[oidc] client_secret_file` could not be read.
    #[error("cannot read [oidc] client_secret_file {path}: {source}")]
    Secret {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `[oidc] ca_file` is unusable.
    #[error(transparent)]
    Ca(#[from] http::CaError),
    /// The issuer or the callback URL is not a URL.
    #[error("[oidc] {0}")]
    Url(String),
}

/// Why a sign-in was refused. The message is for the person signing in;
/// [`SignInError::refusal`] is the audit's word for it.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// The provider could not be reached, or answered nonsense.
    #[error("the identity provider cannot be reached now ({0}), so signing in is not possible; credentials already issued keep working")]
    ProviderUnavailable(String),
    /// The provider sent the person back with an error.
    #[error("the identity provider did not sign you in: {0}")]
    ProviderError(String),
    /// The callback came without this browser's sign-in state.
    #[error("this sign-in was not started in this browser, or took too long; start again")]
    StateMissing,
    /// The callback's `state` is not this browser's.
    #[error("the sign-in answer does not belong to the sign-in this browser started; start again")]
    StateWrong,
    /// The provider refused the authorization code.
    #[error("the identity provider refused the sign-in code (used already, or not issued for this sign-in): {0}")]
    CodeRefused(String),
    /// The ID token failed a check.
    #[error("the ID token from the identity provider was refused: {1}")]
    IdToken(Refusal, String),
    /// The claims name no usable login.
    #[error("{0}")]
    LoginClaim(String),
    /// The email is unverified or outside the allowed domains.
    #[error("{0}")]
    EmailDomain(String),
    /// No such person, and people are not added at sign-in.
    #[error("there is no portcullis person {0}; ask an administrator to add you")]
    PersonUnknown(String),
    /// The person is disabled.
    #[error("the portcullis person {0} is disabled")]
    PersonDisabled(String),
    /// The login is another identity's.
    #[error("the login {0} belongs to someone else at the identity provider; ask an administrator")]
    LoginTaken(String),
    /// The store did not answer.
    #[error("portcullis cannot read its store now; try again")]
    Store(#[from] StoreError),
    /// The group rules' grants could not be brought in step.
    #[error("portcullis could not bring your group grants up to date ({0}); try again")]
    Groups(String),
}

impl SignInError {
    /// The audit's word for this refusal; `None` for the store failing.
    pub fn refusal(&self) -> Option<Refusal> {
        Some(match self {
            SignInError::ProviderUnavailable(_) => Refusal::ProviderUnavailable,
            SignInError::ProviderError(_) => Refusal::ProviderError,
            SignInError::StateMissing => Refusal::SignInStateMissing,
            SignInError::StateWrong => Refusal::SignInStateWrong,
            SignInError::CodeRefused(_) => Refusal::SignInCodeRefused,
            SignInError::IdToken(refusal, _) => *refusal,
            SignInError::LoginClaim(_) => Refusal::LoginClaim,
            SignInError::EmailDomain(_) => Refusal::EmailDomain,
            SignInError::PersonUnknown(_) => Refusal::PersonUnknown,
            SignInError::PersonDisabled(_) => Refusal::PersonDisabled,
            SignInError::LoginTaken(_) => Refusal::LoginTaken,
            SignInError::Store(_) | SignInError::Groups(_) => return None,
        })
    }
}

/// The login of the enabled person `seen` is, linking or adding them as
/// `create_people` says. Blocking (the store).
pub fn admit(store: &Store, seen: &ProviderPerson, create_people: bool) -> Result<String, SignInError> {
    match store.sign_in_person(seen, create_people)? {
        SignInPerson::Person { login, created } => {
            if created {
                tracing::info!(%login, issuer = %seen.issuer, "person added at their first sign-in");
            }
            Ok(login)
        }
        SignInPerson::Disabled(login) => Err(SignInError::PersonDisabled(login)),
        SignInPerson::Unknown(login) => Err(SignInError::PersonUnknown(login)),
        SignInPerson::LoginTaken(login) => Err(SignInError::LoginTaken(login)),
    }
}
