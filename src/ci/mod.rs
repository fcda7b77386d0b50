//! CI jobs exchange their own OpenID Connect token for a short-lived bot
//! credential, so no long-lived secret is stored in the CI system (issue
//! 20).
//!
//! GitHub Actions, GitLab CI, Buildkite and CircleCI hand a job a signed
//! JWT saying which repository, branch and workflow it runs for. A bot
//! trusts such tokens through trust rules ([`rules`]: an issuer, the
//! audience the token must carry, and claim conditions, exact or `*`
//! globs, all of which must hold: [`claims`]). The token endpoint's OAuth
//! 2.0 Token Exchange grant (RFC 8693) hands the token to [`Exchange`]
//! ([`exchange`]), which checks it ([`token`]: only RS256/RS384/RS512,
//! ES256/ES384 and PS256, refusing `alg: none` and every HMAC before any
//! key is looked up; the signature against the issuer's published keys,
//! fetched over https and cached by [`issuers`]; issuer, audience, expiry
//! and `nbf` with 60 s of skew, the age by `iat`), refuses a token already
//! exchanged (by issuer and `jti`, or the whole token's digest: one insert
//! in the store, so atomic across replicas), and issues a credential of the
//! rule's bot for the rule's duration. The credential carries its origin
//! (`ci rule=… sub=… repository=… run_id=…`), which the audit row of every
//! request it makes names.
//!
//! Every refusal is a [`Refused`]: an OAuth error for the client, a
//! [`Refusal`] for the audit row, never a credential.

pub mod claims;
pub mod exchange;
pub mod issuers;
pub mod rules;
pub mod token;

use crate::audit::refusal::Refusal;
use crate::oauth::error::OAuthError;

pub use exchange::Exchange;

/// Clock skew allowed on `exp`, `nbf` and `iat`.
pub const SKEW_SECONDS: i64 = 60;

/// Why an exchange was refused: the words for the client and the audit's
/// reason. The words never hold a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{description}")]
pub struct Refused {
    /// The audit row's reason.
    pub refusal: Refusal,
    /// What went wrong, for the CI job's log.
    pub description: String,
}

impl Refused {
    /// Refused for `refusal`, saying `description`.
    pub fn new(refusal: Refusal, description: impl Into<String>) -> Refused {
        Refused {
            refusal,
            description: description.into(),
        }
    }

    /// The OAuth error the token endpoint answers with: `invalid_request`
    /// for a malformed request, `temporarily_unavailable` when the issuer
    /// or the store cannot be reached, else `invalid_grant` (the subject
    /// token is not good).
    pub fn oauth(&self) -> OAuthError {
        match self.refusal {
            Refusal::CiRequest => OAuthError::invalid_request(&self.description),
            Refusal::CiIssuerUnavailable => OAuthError {
                error: "temporarily_unavailable",
                description: self.description.clone(),
                status: 503,
                retry_after: None,
            },
            Refusal::CredentialsUnavailable => OAuthError::unavailable(),
            _ => OAuthError::invalid_grant(&self.description),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_an_invalid_grant_unless_the_request_itself_is_malformed() {
        let bad = Refused::new(Refusal::CiTokenExpired, "the token expired");
        assert_eq!((bad.oauth().error, bad.oauth().status), ("invalid_grant", 400));
        assert_eq!(bad.oauth().description, "the token expired");
        let malformed = Refused::new(Refusal::CiRequest, "give subject_token");
        assert_eq!(malformed.oauth().error, "invalid_request");
        let down = Refused::new(Refusal::CiIssuerUnavailable, "the issuer is down");
        assert_eq!(
            (down.oauth().error, down.oauth().status),
            ("temporarily_unavailable", 503)
        );
    }
}
