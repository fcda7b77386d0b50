//! The authorization code flow with PKCE (S256), `state` and `nonce`.
//!
//! [`SignIn::start`] gives the provider's authorization URL for an attempt
//! id (random, in the browser's short-lived sign-in cookie);
//! [`SignIn::finish`] takes the callback, checks its `state` against that
//! id, exchanges the code with the PKCE verifier, and checks the ID token.
//! State, nonce and verifier are MACs of the attempt id under the approvals
//! key: unguessable without the key, and the same on every replica.

use super::provider::{chain, Provider};
use super::{login, SetupError, SignInError};
use crate::approvals::seal::Key;
use crate::audit::refusal::Refusal;
use crate::config::OidcConfig;
use crate::store::ProviderPerson;
use base64::Engine;
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreClientAuthMethod, CoreIdToken, CoreIdTokenVerifier,
    CoreJwsSigningAlgorithm, CoreProviderMetadata,
};
use openidconnect::{
    AuthType, AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope, SignatureVerificationError,
    TokenResponse,
};

/// The ID token signatures accepted: public-key ones only, so neither an
/// unsigned token nor one MACed with the client secret passes.
const ALGORITHMS: [CoreJwsSigningAlgorithm; 9] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// What the provider sent the browser back with (`/login/callback`'s
/// query).
#[derive(Debug, Default, Clone)]
pub struct Callback {
    /// The authorization code.
    pub code: Option<String>,
    /// The `state` portcullis sent.
    pub state: Option<String>,
    /// The provider's error code (`access_denied`, …).
    pub error: Option<String>,
    /// The provider's words about it.
    pub error_description: Option<String>,
    /// The issuer that answered (RFC 9207), when the provider says.
    pub iss: Option<String>,
}

/// Sign-in with one provider.
#[derive(Debug)]
pub struct SignIn {
    config: OidcConfig,
    secret: ClientSecret,
    redirect: RedirectUrl,
    provider: Provider,
}

impl SignIn {
    /// Set up sign-in with `config`'s provider, coming back to
    /// `<public_url>/login/callback`. Reads the client secret; fetches
    /// nothing yet.
    pub fn new(config: &OidcConfig, public_url: &str) -> Result<SignIn, SetupError> {
        let path = &config.client_secret_file;
        let secret = std::fs::read_to_string(path).map_err(|source| SetupError::Secret {
            path: path.display().to_string(),
            source,
        })?;
        let issuer = IssuerUrl::new(config.issuer.clone()).map_err(|e| SetupError::Url(format!("issuer: {e}")))?;
        let callback = format!("{}/login/callback", public_url.trim_end_matches('/'));
        let redirect = RedirectUrl::new(callback).map_err(|e| SetupError::Url(format!("public_url: {e}")))?;
        let http = super::http::HttpClient::new(config.ca_file.as_deref())?;
        Ok(SignIn {
            config: config.clone(),
            secret: ClientSecret::new(secret.trim_end().to_string()),
            redirect,
            provider: Provider::new(issuer, http),
        })
    }

    /// The provider's issuer URL.
    pub fn issuer(&self) -> &str {
        self.provider.issuer().as_str()
    }

    /// Whether people are added at their first sign-in.
    pub fn create_people(&self) -> bool {
        self.config.create_people
    }

    /// A new attempt id, for the browser's sign-in cookie.
    pub fn new_attempt() -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
    }

    /// The provider's authorization URL for `attempt`.
    pub async fn start(&self, key: &Key, attempt: &str) -> Result<String, SignInError> {
        let client = self.client(self.provider.metadata().await?);
        let secrets = Secrets::of(key, attempt);
        let challenge = PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(secrets.verifier));
        let (state, nonce) = (secrets.state, secrets.nonce);
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                move || CsrfToken::new(state),
                move || Nonce::new(nonce),
            )
            .set_pkce_challenge(challenge);
        for scope in ["email", "profile"]
            .into_iter()
            .chain(self.config.scopes.iter().map(String::as_str))
        {
            request = request.add_scope(Scope::new(scope.to_string()));
        }
        Ok(request.url().0.to_string())
    }

    /// Check `callback` against the browser's `attempt`, exchange its code
    /// and check the ID token: the person it names.
    pub async fn finish(
        &self,
        key: &Key,
        attempt: Option<&str>,
        callback: &Callback,
    ) -> Result<ProviderPerson, SignInError> {
        // The state first, an error after: the provider sends its error
        // with the state (RFC 6749 §4.1.2.1), and text on portcullis's page
        // from a link anyone can make would read as portcullis's own.
        let attempt = attempt.ok_or(SignInError::StateMissing)?;
        let secrets = Secrets::of(key, attempt);
        let state = callback.state.as_deref().unwrap_or_default();
        if !key.verify(format!("oidc.state.{attempt}").as_bytes(), state) {
            return Err(SignInError::StateWrong);
        }
        if let Some(error) = &callback.error {
            let words = callback.error_description.as_deref().unwrap_or_default();
            return Err(SignInError::ProviderError(
                format!("{error} {words}").trim().to_string(),
            ));
        }
        if callback.iss.as_deref().is_some_and(|iss| iss != self.issuer()) {
            return Err(SignInError::IdToken(
                Refusal::IdTokenIssuer,
                "the answer came from another identity provider".into(),
            ));
        }
        let code = callback
            .code
            .clone()
            .ok_or(SignInError::CodeRefused("no code was sent".into()))?;
        let token = self.exchange(code, secrets.verifier).await?;
        let claims = self.verify(&token, &Nonce::new(secrets.nonce)).await?;
        login::person(&self.config, self.issuer(), &claims)
    }

    fn client(
        &self,
        metadata: CoreProviderMetadata,
    ) -> CoreClient<
        openidconnect::EndpointSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointMaybeSet,
        openidconnect::EndpointMaybeSet,
    > {
        // client_secret_basic unless the provider only takes the secret in
        // the body.
        let post_only = metadata.token_endpoint_auth_methods_supported().is_some_and(|m| {
            !m.contains(&CoreClientAuthMethod::ClientSecretBasic) && m.contains(&CoreClientAuthMethod::ClientSecretPost)
        });
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.config.client_id.clone()),
            Some(self.secret.clone()),
        )
        .set_redirect_uri(self.redirect.clone());
        if post_only {
            client.set_auth_type(AuthType::RequestBody)
        } else {
            client
        }
    }

    /// The ID token the provider gives for `code` and `verifier`.
    async fn exchange(&self, code: String, verifier: String) -> Result<CoreIdToken, SignInError> {
        let client = self.client(self.provider.metadata().await?);
        let client_to = self.provider.http();
        // Each call owns its client clone: the future borrows nothing.
        let http = move |request| {
            let client_to = client_to.clone();
            async move { client_to.send(request).await }
        };
        let request = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| SignInError::ProviderUnavailable(format!("it names no token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(verifier));
        let response = request.request_async(&http).await.map_err(|error| match error {
            RequestTokenError::ServerResponse(answer) => {
                let words = answer.error_description().map(String::as_str).unwrap_or_default();
                SignInError::CodeRefused(format!("{} {words}", answer.error()).trim().to_string())
            }
            RequestTokenError::Request(e) => SignInError::ProviderUnavailable(chain(&e)),
            RequestTokenError::Parse(e, _) => SignInError::IdToken(
                Refusal::IdTokenInvalid,
                format!("its token answer could not be read: {e}"),
            ),
            other => SignInError::ProviderUnavailable(chain(&other)),
        })?;
        response
            .id_token()
            .cloned()
            .ok_or_else(|| SignInError::IdToken(Refusal::IdTokenInvalid, "the token answer has no ID token".into()))
    }

    /// The claims of `token` once its signature, issuer, audience, expiry
    /// and nonce pass; an unknown key id has the keys fetched again once.
    async fn verify(&self, token: &CoreIdToken, nonce: &Nonce) -> Result<serde_json::Value, SignInError> {
        let metadata = self.provider.metadata().await?;
        let mut keys = metadata.jwks().clone();
        loop {
            let verifier = CoreIdTokenVerifier::new_public_client(
                ClientId::new(self.config.client_id.clone()),
                self.provider.issuer().clone(),
                keys,
            )
            .set_allowed_algs(ALGORITHMS);
            match token.claims(&verifier, nonce) {
                Ok(_) => return payload(token),
                Err(ClaimsVerificationError::SignatureVerification(SignatureVerificationError::NoMatchingKey)) => {
                    match self.provider.refetch_keys().await {
                        Some(fresh) => keys = fresh,
                        None => {
                            return Err(refused(&ClaimsVerificationError::SignatureVerification(
                                SignatureVerificationError::NoMatchingKey,
                            )))
                        }
                    }
                }
                Err(error) => return Err(refused(&error)),
            }
        }
    }
}

/// The secrets of one attempt, derived from its id.
struct Secrets {
    state: String,
    nonce: String,
    verifier: String,
}

impl Secrets {
    fn of(key: &Key, attempt: &str) -> Secrets {
        let mac = |what: &str| key.mac(format!("oidc.{what}.{attempt}").as_bytes());
        Secrets {
            state: mac("state"),
            nonce: mac("nonce"),
            // 64 hex characters: a valid PKCE verifier (43 to 128).
            verifier: mac("pkce"),
        }
    }
}

/// The audit's word and the person's message for a failed check.
fn refused(error: &ClaimsVerificationError) -> SignInError {
    use ClaimsVerificationError as C;
    use SignatureVerificationError as S;
    let (refusal, words) = match error {
        C::Expired(_) => (Refusal::IdTokenExpired, "it has expired"),
        C::InvalidAudience(_) => (Refusal::IdTokenAudience, "it was issued to another client"),
        C::InvalidIssuer(_) => (Refusal::IdTokenIssuer, "it was issued by another issuer"),
        C::InvalidNonce(_) => (Refusal::IdTokenNonce, "it was issued for another sign-in (nonce)"),
        C::SignatureVerification(S::NoMatchingKey) => (
            Refusal::IdTokenUnknownKey,
            "it is signed with a key the identity provider does not publish",
        ),
        C::SignatureVerification(S::NoSignature | S::DisallowedAlg(_) | S::UnsupportedAlg(_)) => (
            Refusal::IdTokenUnsigned,
            "it is unsigned or signed with an algorithm not accepted",
        ),
        C::SignatureVerification(_) => (
            Refusal::IdTokenSignature,
            "its signature is not by the identity provider",
        ),
        _ => (Refusal::IdTokenInvalid, "it could not be checked"),
    };
    tracing::warn!(refused = %refusal, error = %chain(error), "ID token refused");
    SignInError::IdToken(refusal, words.into())
}

/// The claims of an ID token whose signature has been checked, as JSON,
/// for the claims `openidconnect` does not model (groups, a custom login).
fn payload(token: &CoreIdToken) -> Result<serde_json::Value, SignInError> {
    let compact = token.to_string();
    let part = compact.split('.').nth(1).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| SignInError::IdToken(Refusal::IdTokenInvalid, "its claims could not be read".into()))
}
