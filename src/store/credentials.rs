//! The store as the authenticator's [`CredentialSource`]: a credential by
//! its token's hash, with its agent, and its last use.

use super::Store;
use crate::identity::authenticate::{CredentialLookup, CredentialSource, SourceError};
use crate::identity::Agent;
use chrono::{DateTime, Utc};

impl CredentialSource for Store {
    fn find(&self, token_sha256: &str) -> Result<Option<(CredentialLookup, Option<Agent>)>, SourceError> {
        let Some(lookup) = self.lookup_credential(token_sha256)? else {
            return Ok(None);
        };
        let agent = self.agent_of_credential(&lookup.credential.id)?;
        Ok(Some((lookup, agent)))
    }

    fn touch(&self, id: &str, at: DateTime<Utc>) -> Result<(), SourceError> {
        Ok(self.touch_credential(id, at)?)
    }
}

// The authenticator over the real store: what a request meets.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::authenticate::{AuthError, Authenticator};
    use crate::identity::{credential, Principal};
    use http::HeaderMap;

    fn headers(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        h
    }

    fn setup() -> (tempfile::TempDir, Store, Authenticator) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        store.add_principal(&Principal::person("ana"), false).unwrap();
        let auth = Authenticator::new(store.clone());
        (dir, store, auth)
    }

    #[tokio::test]
    async fn a_valid_token_authenticates_its_owner() {
        let (_dir, store, auth) = setup();
        let (cred, token) = store
            .issue_credential(&Principal::person("ana"), "laptop", None)
            .unwrap();
        let identity = auth.authenticate(&headers(&token)).await.unwrap();
        assert_eq!(identity.principal, Principal::person("ana"));
        assert_eq!(identity.credential_id, cred.id);
    }

    #[tokio::test]
    async fn each_kind_of_bad_token_is_told_apart() {
        let (_dir, store, auth) = setup();
        let ana = Principal::person("ana");
        assert_eq!(auth.authenticate(&HeaderMap::new()).await, Err(AuthError::Missing));
        assert!(matches!(
            auth.authenticate(&headers("hello")).await,
            Err(AuthError::Malformed { .. })
        ));
        let unknown = credential::mint().token;
        assert!(matches!(
            auth.authenticate(&headers(&unknown)).await,
            Err(AuthError::Unknown { .. })
        ));
        let past = Utc::now() - chrono::TimeDelta::minutes(1);
        let (_, expired) = store.issue_credential(&ana, "old", Some(past)).unwrap();
        assert!(matches!(
            auth.authenticate(&headers(&expired)).await,
            Err(AuthError::Expired { .. })
        ));
        let (cred, revoked) = store.issue_credential(&ana, "gone", None).unwrap();
        auth.authenticate(&headers(&revoked)).await.unwrap();
        store.revoke_credential(&cred.id).unwrap();
        auth.forget(&cred.id);
        assert!(matches!(
            auth.authenticate(&headers(&revoked)).await,
            Err(AuthError::Revoked { .. })
        ));
    }

    #[tokio::test]
    async fn errors_never_carry_the_whole_token() {
        let (_dir, _store, auth) = setup();
        let unknown = credential::mint().token;
        let err = auth.authenticate(&headers(&unknown)).await.unwrap_err();
        assert!(!format!("{err} {err:?}").contains(&unknown));
    }
}
