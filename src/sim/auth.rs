//! Bearer-token authentication and impersonation, as kube-apiserver does them.
//! (Interface stub: owned by the auth/RBAC work.)

use super::rbac::RbacObjects;
use super::UserInfo;
use crate::status::Status;
use http::HeaderMap;
use std::collections::HashMap;

/// Static bearer tokens the simulator accepts.
#[derive(Debug, Clone, Default)]
pub struct TokenAuthenticator {
    /// token → user
    pub tokens: HashMap<String, UserInfo>,
}

impl TokenAuthenticator {
    /// Authenticate the `Authorization: Bearer` header; 401 Status otherwise.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<UserInfo, Status> {
        let _ = headers;
        Err(Status::unauthorized("Unauthorized"))
    }
}

/// Apply `Impersonate-*` headers: returns the user RBAC should then see
/// (the requester itself when there are none). 400 for a group, uid or extra
/// without a user; 403 (the API server's wording) when RBAC refuses.
pub fn impersonate(
    requester: &UserInfo,
    headers: &HeaderMap,
    rbac: &dyn RbacObjects,
) -> Result<Option<UserInfo>, Status> {
    let _ = (requester, headers, rbac);
    Ok(None)
}
