//! Bearer-token authentication and impersonation, as kube-apiserver does them
//! (`authentication/request/bearertoken`, `AuthenticatedGroupAdder`,
//! `endpoints/filters/impersonation.go`).
//!
//! # Known differences from kube-apiserver
//!
//! - Anonymous authentication is off (as with `--anonymous-auth=false`): a
//!   request without a usable bearer token is 401 `Unauthorized`, where a
//!   default kube-apiserver would treat it as `system:anonymous`.
//! - Only static tokens. A token whose user is a ServiceAccount and that
//!   lists no groups gets the ServiceAccount groups, as a real
//!   ServiceAccount token would; no token extras (pod name, credential id).
//! - Extra keys whose percent-decoding is not UTF-8 are kept raw (Go keeps
//!   the raw bytes). Header values that are not UTF-8 are read lossily.
//! - Impersonation extras are authorized in header order; kube-apiserver
//!   iterates a Go map (random order), so with several refused extras the
//!   one named in the 403 may differ.

// The interfaces return `Status` by value, as the server expects; the
// error path is cold, so boxing it would buy nothing.
#![allow(clippy::result_large_err)]

mod impersonate;

pub use impersonate::impersonate;

use super::UserInfo;
use crate::status::Status;
use http::{header, HeaderMap};
use std::collections::HashMap;

/// Every authenticated user is in this group (unless it is anonymous or
/// already marked unauthenticated).
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The group of unauthenticated (anonymous) users.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The anonymous user's name.
pub const ANONYMOUS: &str = "system:anonymous";

/// Static bearer tokens the simulator accepts.
#[derive(Debug, Clone, Default)]
pub struct TokenAuthenticator {
    /// token → user
    pub tokens: HashMap<String, UserInfo>,
}

impl TokenAuthenticator {
    /// Authenticate the `Authorization: Bearer` header; 401 Status
    /// (`Unauthorized`) for a missing header, another scheme or an unknown
    /// token. The user gets `system:authenticated` (and, for a
    /// ServiceAccount without groups, its ServiceAccount groups).
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<UserInfo, Status> {
        bearer_token(headers)
            .and_then(|token| self.user_for_token(token))
            .ok_or_else(|| Status::unauthorized("Unauthorized"))
    }

    /// The user a token stands for, as authentication would return it (for
    /// TokenReview); `None` for an unknown token.
    pub fn user_for_token(&self, token: &str) -> Option<UserInfo> {
        let mut user = self.tokens.get(token)?.clone();
        if user.groups.is_empty() {
            if let Some((namespace, _)) = split_service_account(&user.name) {
                user.groups = service_account_groups(namespace);
            }
        }
        add_authenticated_group(&mut user);
        Some(user)
    }
}

/// The token of `Authorization: Bearer <token>`, as Go's bearer-token
/// authenticator reads it: the first header, trimmed, split on single
/// spaces; scheme case-insensitive; the second field is the token (so
/// `Bearer  x`, with two spaces, has an empty token and fails).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = auth.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// `AuthenticatedGroupAdder`: append `system:authenticated` unless the user
/// is anonymous or already in it or in `system:unauthenticated`.
fn add_authenticated_group(user: &mut UserInfo) {
    let marked = user
        .groups
        .iter()
        .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED);
    if user.name != ANONYMOUS && !marked {
        user.groups.push(ALL_AUTHENTICATED.to_string());
    }
}

/// `system:serviceaccount:<ns>:<name>` → (ns, name), only when both are
/// valid names (`serviceaccount.SplitUsername`).
pub fn split_service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (is_dns_label(namespace) && !name.contains(':') && is_dns_subdomain(name)).then_some((namespace, name))
}

/// The groups every ServiceAccount of `namespace` is in.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

/// RFC 1123 label: what a namespace name must be.
fn is_dns_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// RFC 1123 subdomain: what a ServiceAccount name must be.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests;
