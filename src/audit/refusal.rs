//! Why portcullis itself refused a request or an act: the one list of the
//! words the audit row's `refused` column holds, whichever door or domain
//! module refused. A row is written with a [`Refusal`], never with a string,
//! so a reason cannot be misspelt in one place and queried under another
//! name elsewhere. The words are stored and queried (`portcullis audit`,
//! `GET /audit`, the export): changing one is a change of the audit's
//! format.

use super::row::AuditRow;
use crate::document::DocumentError;
use crate::identity::authenticate::AuthError;

/// A refusal reason, as the audit row records it ([`Refusal::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The path was malformed or ambiguous (encoded slash, dot segment, …).
    Path,
    /// The client sent an `Impersonate-*` header.
    IdentityHeader,
    /// No bearer token was sent.
    TokenMissing,
    /// The bearer token is not shaped like a portcullis token.
    TokenMalformed,
    /// The bearer token matches no credential.
    TokenUnknown,
    /// The credential has expired.
    TokenExpired,
    /// The credential was revoked, or its owner disabled.
    TokenRevoked,
    /// The token is bound to another place (an OAuth access token, for
    /// `/mcp` only, sent elsewhere).
    TokenWrongAudience,
    /// A token not looked up: its address sent too many unknown ones of
    /// late (`[limits] failed_authentications_per_minute`).
    TooManyFailures,
    /// The token endpoint refused a grant (the OAuth error is the row's
    /// reason).
    OAuthToken,
    /// An MCP request named a session another agent began.
    McpSessionForeign,
    /// An MCP request named a session not kept (never begun, ended, or
    /// forgotten unused).
    McpSessionUnknown,
    /// The store did not answer: credentials, or an MCP session's owner,
    /// could not be checked or kept.
    CredentialsUnavailable,
    /// The audit was read by someone not an admin.
    NotAdmin,
    /// A write or a Secret reveal could not be committed to the audit first.
    AuditUnavailable,
    /// A write needs approval, but this portcullis cannot hold writes.
    ApprovalsUnconfigured,
    /// A held write's preview is over its limit.
    PreviewTooLarge,
    /// A write held while its requester had the most held writes open.
    TooManyHeld,
    /// A held Secret write's preview could not be redacted.
    PreviewUnredactable,
    /// An answer carrying Secrets could not have its values hidden.
    Unredactable,
    /// A JSON Patch of a Secret by a caller who sees its values hidden
    /// (its `copy`, `move` and `test` would read them).
    SecretJsonPatch,
    /// A Secret write carrying a redaction marker back in place of a value
    /// (the cluster would store the marker).
    SecretMarker,
    /// `read_secret` where no grant in effect is of a role that reveals
    /// Secrets.
    RevealNotGranted,
    /// A binding write naming one of portcullis's identities.
    BindsIdentity,
    /// A binding write whose subjects could not be read.
    BindingUnreadable,
    /// A request body over the size limit.
    BodyTooLarge,
    /// A request body read whole that did not arrive within the request
    /// timeout.
    BodyTimedOut,
    /// A request body that broke off before its end (the client went
    /// away, or sent a malformed frame).
    BodyCutShort,
    /// A long-running request past the caller's `[limits]
    /// streams_per_caller` on its cluster.
    TooManyStreams,
    /// A request body nested deeper than the limit.
    BodyTooDeep,
    /// A request body holding more values than the limit.
    BodyTooManyNodes,
    /// A YAML request body with anchors or aliases.
    BodyAnchorOrAlias,
    /// A YAML request body with a tag outside the core schema.
    BodyYamlTag,
    /// A request body that is not YAML.
    BodyNotYaml,
    /// A request body that is not JSON.
    BodyNotJson,
    /// A write to hold in a body its run's precondition cannot be
    /// written into (protobuf, CBOR).
    UnguardableHeldBody,
    /// The approval id names no held write of the caller's.
    ApprovalUnknown,
    /// The approval id names a held write for another write.
    ApprovalMismatch,
    /// `/mcp` was called with a credential that is not an agent's.
    NotAgent,
    /// The credential sent more MCP requests than its rate allows.
    RateLimited,
    /// A JSON-RPC batch was sent to `/mcp`.
    Batch,
    /// A form's CSRF token was missing, expired or not this site's.
    Csrf,
    /// The approval pages were signed into with a token that is not a
    /// person's own.
    NotPerson,
    /// A decision by someone who may not decide it.
    NotApprover,
    /// An access request approved whose requester (or requesting agent)
    /// is disabled or gone since it asked.
    RequesterDisabled,
    /// Sign-in: the identity provider could not be reached.
    ProviderUnavailable,
    /// Sign-in: the identity provider answered with an error (the person
    /// cancelled, or the provider refused them).
    ProviderError,
    /// Sign-in: the callback came without the browser's sign-in state.
    SignInStateMissing,
    /// Sign-in: the callback's `state` is not the browser's.
    SignInStateWrong,
    /// Sign-in: the provider refused the authorization code (reused, or
    /// not issued for this PKCE verifier).
    SignInCodeRefused,
    /// An ID token whose signature is not the provider's key's.
    IdTokenSignature,
    /// An ID token unsigned (`alg: none`) or signed with an algorithm not
    /// accepted (a shared-secret MAC).
    IdTokenUnsigned,
    /// An ID token signed with a key the provider does not publish.
    IdTokenUnknownKey,
    /// An expired ID token.
    IdTokenExpired,
    /// An ID token for another client.
    IdTokenAudience,
    /// An ID token from another issuer.
    IdTokenIssuer,
    /// An ID token whose nonce is not this sign-in's.
    IdTokenNonce,
    /// No ID token, or one that could not be read.
    IdTokenInvalid,
    /// The login claim is missing or cannot be a login.
    LoginClaim,
    /// The email is unverified or outside the allowed domains.
    EmailDomain,
    /// No such person, and people are not added at sign-in.
    PersonUnknown,
    /// The person is disabled.
    PersonDisabled,
    /// The login belongs to another identity at the provider.
    LoginTaken,
    /// OAuth: the client is unknown, or its metadata document could not be
    /// fetched or is not acceptable.
    OAuthClientRefused,
    /// OAuth: a redirect URI that is not acceptable, or matches none the
    /// client declared.
    OAuthRedirectRefused,
    /// OAuth: a Dynamic Client Registration request with unacceptable
    /// metadata.
    OAuthRegistrationRefused,
    /// CI token exchange: the request is malformed (no subject token, or one
    /// of another type).
    CiRequest,
    /// CI token exchange: the subject token is not a readable JWT.
    CiTokenMalformed,
    /// CI token exchange: the token is unsigned (`alg: none`).
    CiTokenUnsigned,
    /// CI token exchange: the token is signed with an algorithm not accepted
    /// (an HMAC with a shared secret, or one not on the list).
    CiTokenAlgorithm,
    /// CI token exchange: the token's key is not one its issuer publishes.
    CiTokenUnknownKey,
    /// CI token exchange: the token's signature is not its key's.
    CiTokenSignature,
    /// CI token exchange: no trust rule trusts the token's issuer.
    CiTokenIssuer,
    /// CI token exchange: the token is for an audience no rule of its issuer
    /// names.
    CiTokenAudience,
    /// CI token exchange: the token has expired.
    CiTokenExpired,
    /// CI token exchange: the token is not valid yet (`nbf`).
    CiTokenNotYetValid,
    /// CI token exchange: the token was issued longer ago than the rule allows.
    CiTokenTooOld,
    /// CI token exchange: the token was exchanged already.
    CiTokenReplayed,
    /// CI token exchange: the token's claims match no trust rule (or rules
    /// of several bots).
    CiNoRule,
    /// CI token exchange: the rule's bot is disabled.
    CiBotDisabled,
    /// CI token exchange: the issuer's discovery or keys could not be fetched.
    CiIssuerUnavailable,
    /// OAuth: an authorization request that is malformed (response_type,
    /// the PKCE challenge, state, resource, a repeated parameter).
    OAuthAuthorizeInvalid,
    /// OAuth: a consent beyond what the person may hand over (no grant, one
    /// not their own, a role not narrower, a duration not offered).
    OAuthConsentRefused,
    /// The API server's audit webhook: a call without the cluster's own
    /// webhook token (or for a cluster that has none).
    AuditWebhookCredential,
    /// The API server's audit webhook: a batch that is not an
    /// `audit.k8s.io/v1` `EventList` (nothing of it kept).
    AuditWebhookBatch,
}

impl Refusal {
    /// The word in the audit row's `refused` column.
    pub fn as_str(self) -> &'static str {
        use Refusal as R;
        match self {
            R::Path => "path",
            R::IdentityHeader => "identity_header",
            R::TokenMissing => "missing",
            R::TokenMalformed => "malformed",
            R::TokenUnknown => "unknown",
            R::TokenExpired => "expired",
            R::TokenRevoked => "revoked",
            R::TokenWrongAudience => "wrong_audience",
            R::TooManyFailures => "too_many_failures",
            R::OAuthToken => "oauth_token",
            R::McpSessionForeign => "mcp_session_foreign",
            R::McpSessionUnknown => "mcp_session_unknown",
            R::CredentialsUnavailable => "store_unavailable",
            R::NotAdmin => "not_admin",
            R::AuditUnavailable => "audit_unavailable",
            R::ApprovalsUnconfigured => "approvals_unconfigured",
            R::PreviewTooLarge => "preview_too_large",
            R::TooManyHeld => "too_many_held",
            R::PreviewUnredactable => "preview_unredactable",
            R::Unredactable => "unredactable",
            R::SecretJsonPatch => "secret_json_patch",
            R::SecretMarker => "secret_marker",
            R::RevealNotGranted => "reveal_not_granted",
            R::BindsIdentity => "binds_identity",
            R::BindingUnreadable => "binding_unreadable",
            R::BodyTooLarge => "body_too_large",
            R::BodyTimedOut => "body_timed_out",
            R::BodyCutShort => "body_cut_short",
            R::TooManyStreams => "too_many_streams",
            R::BodyTooDeep => "body_too_deep",
            R::BodyTooManyNodes => "body_too_many_nodes",
            R::BodyAnchorOrAlias => "body_yaml_anchor_or_alias",
            R::BodyYamlTag => "body_yaml_tag",
            R::BodyNotYaml => "body_not_yaml",
            R::BodyNotJson => "body_not_json",
            R::UnguardableHeldBody => "held_body_unguardable",
            R::ApprovalUnknown => "approval_unknown",
            R::ApprovalMismatch => "approval_mismatch",
            R::NotAgent => "not_agent",
            R::RateLimited => "rate_limited",
            R::Batch => "batch",
            R::Csrf => "csrf",
            R::NotPerson => "not_person",
            R::NotApprover => "not_approver",
            R::RequesterDisabled => "requester_disabled",
            R::ProviderUnavailable => "provider_unavailable",
            R::ProviderError => "provider_error",
            R::SignInStateMissing => "signin_state_missing",
            R::SignInStateWrong => "signin_state_wrong",
            R::SignInCodeRefused => "signin_code_refused",
            R::IdTokenSignature => "id_token_signature",
            R::IdTokenUnsigned => "id_token_unsigned",
            R::IdTokenUnknownKey => "id_token_unknown_key",
            R::IdTokenExpired => "id_token_expired",
            R::IdTokenAudience => "id_token_audience",
            R::IdTokenIssuer => "id_token_issuer",
            R::IdTokenNonce => "id_token_nonce",
            R::IdTokenInvalid => "id_token_invalid",
            R::LoginClaim => "login_claim",
            R::EmailDomain => "email_domain",
            R::PersonUnknown => "person_unknown",
            R::PersonDisabled => "person_disabled",
            R::LoginTaken => "login_taken",
            R::OAuthClientRefused => "oauth_client_refused",
            R::OAuthRedirectRefused => "oauth_redirect_refused",
            R::OAuthRegistrationRefused => "oauth_registration_refused",
            R::CiRequest => "ci_request",
            R::CiTokenMalformed => "ci_token_malformed",
            R::CiTokenUnsigned => "ci_token_unsigned",
            R::CiTokenAlgorithm => "ci_token_algorithm",
            R::CiTokenUnknownKey => "ci_token_unknown_key",
            R::CiTokenSignature => "ci_token_signature",
            R::CiTokenIssuer => "ci_token_issuer",
            R::CiTokenAudience => "ci_token_audience",
            R::CiTokenExpired => "ci_token_expired",
            R::CiTokenNotYetValid => "ci_token_not_yet_valid",
            R::CiTokenTooOld => "ci_token_too_old",
            R::CiTokenReplayed => "ci_token_replayed",
            R::CiNoRule => "ci_no_rule",
            R::CiBotDisabled => "ci_bot_disabled",
            R::CiIssuerUnavailable => "ci_issuer_unavailable",
            R::OAuthAuthorizeInvalid => "oauth_authorize_invalid",
            R::OAuthConsentRefused => "oauth_consent_refused",
            R::AuditWebhookCredential => "audit_webhook_credential",
            R::AuditWebhookBatch => "audit_webhook_batch",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused credential's reason (the word is `AuthError::reason`'s).
impl From<&AuthError> for Refusal {
    fn from(error: &AuthError) -> Refusal {
        match error {
            AuthError::Missing => Refusal::TokenMissing,
            AuthError::Malformed { .. } => Refusal::TokenMalformed,
            AuthError::Unknown { .. } => Refusal::TokenUnknown,
            AuthError::Expired { .. } => Refusal::TokenExpired,
            AuthError::Revoked { .. } => Refusal::TokenRevoked,
            AuthError::WrongAudience { .. } => Refusal::TokenWrongAudience,
            AuthError::StoreUnavailable => Refusal::CredentialsUnavailable,
            AuthError::TooManyFailures { .. } => Refusal::TooManyFailures,
        }
    }
}

/// A refused body's reason (the word is `body_` and `DocumentError::code`).
impl From<&DocumentError> for Refusal {
    fn from(error: &DocumentError) -> Refusal {
        match error {
            DocumentError::TooLarge { .. } => Refusal::BodyTooLarge,
            DocumentError::TooDeep { .. } => Refusal::BodyTooDeep,
            DocumentError::TooManyNodes { .. } => Refusal::BodyTooManyNodes,
            DocumentError::AnchorOrAlias => Refusal::BodyAnchorOrAlias,
            DocumentError::Tag(_) => Refusal::BodyYamlTag,
            DocumentError::NotYaml(_) => Refusal::BodyNotYaml,
            DocumentError::NotJson(_) => Refusal::BodyNotJson,
        }
    }
}

impl AuditRow {
    /// Note that portcullis refused this request or act, and why.
    pub fn refuse(&mut self, why: Refusal) {
        self.refused = why.as_str().into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_credential_is_recorded_under_the_credential_checks_own_reason() {
        let prefix = || "pc_abc".to_string();
        for error in [
            AuthError::Missing,
            AuthError::Malformed { prefix: prefix() },
            AuthError::Unknown { prefix: prefix() },
            AuthError::Expired { prefix: prefix() },
            AuthError::Revoked { prefix: prefix() },
            AuthError::WrongAudience { prefix: prefix() },
            AuthError::StoreUnavailable,
            AuthError::TooManyFailures {
                prefix: prefix(),
                retry_after_secs: 1,
            },
        ] {
            assert_eq!(Refusal::from(&error).as_str(), error.reason(), "{error:?}");
        }
    }

    #[test]
    fn a_refused_body_is_recorded_as_body_and_the_parsers_own_code() {
        let not_json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        for error in [
            DocumentError::TooLarge { size: 2, limit: 1 },
            DocumentError::TooDeep { limit: 1 },
            DocumentError::TooManyNodes { limit: 1 },
            DocumentError::AnchorOrAlias,
            DocumentError::Tag("!x".into()),
            DocumentError::NotYaml("x".into()),
            DocumentError::NotJson(not_json),
        ] {
            assert_eq!(Refusal::from(&error).as_str(), format!("body_{}", error.code()));
        }
    }

    #[test]
    fn a_refusal_is_written_to_the_row_as_its_word() {
        let mut row = AuditRow::default();
        row.refuse(Refusal::NotApprover);
        assert_eq!(row.refused, "not_approver");
        assert_eq!(Refusal::Csrf.to_string(), "csrf");
    }
}
