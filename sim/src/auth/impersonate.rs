//! `Impersonate-*` headers, as kube-apiserver's `WithImpersonation` filter
//! reads, authorizes and applies them.

use super::{service_account_groups, split_service_account, ALL_AUTHENTICATED};
use super::{ALL_UNAUTHENTICATED, ANONYMOUS};
use crate::rbac::{self, RbacObjects};
use crate::request_info::RequestInfo;
use crate::status::Status;
use crate::UserInfo;
use http::HeaderMap;
use std::fmt;

const USER: &str = "impersonate-user";
const UID: &str = "impersonate-uid";
const GROUP: &str = "impersonate-group";
const EXTRA_PREFIX: &str = "impersonate-extra-";
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

/// One thing the requester asks to act as; each is authorized on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    ServiceAccount { namespace: String, name: String },
    User(String),
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Request {
    /// The attributes RBAC checks: verb `impersonate` on the matching
    /// resource.
    fn attributes(&self) -> RequestInfo {
        let (group, namespace, resource, subresource, name) = match self {
            Request::ServiceAccount { namespace, name } => ("", namespace.as_str(), "serviceaccounts", "", name),
            Request::User(name) => ("", "", "users", "", name),
            Request::Group(name) => ("", "", "groups", "", name),
            Request::Extra { key, value } => (AUTHENTICATION_GROUP, "", "userextras", key.as_str(), value),
            Request::Uid(uid) => (AUTHENTICATION_GROUP, "", "uids", "", uid),
        };
        RequestInfo {
            is_resource_request: true,
            verb: "impersonate".into(),
            api_prefix: if group.is_empty() { "api" } else { "apis" }.into(),
            api_group: group.into(),
            api_version: "v1".into(),
            namespace: namespace.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.clone(),
            path: String::new(),
        }
    }
}

/// Go's `%v` of the `v1.ObjectReference` kube-apiserver builds:
/// `{Kind Namespace Name UID APIVersion ResourceVersion FieldPath}`.
impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v1 = "authentication.k8s.io/v1";
        let (kind, namespace, name, api_version, field_path) = match self {
            Request::ServiceAccount { namespace, name } => {
                ("ServiceAccount", namespace.as_str(), name.as_str(), "", "")
            }
            Request::User(name) => ("User", "", name.as_str(), "", ""),
            Request::Group(name) => ("Group", "", name.as_str(), "", ""),
            Request::Extra { key, value } => ("UserExtra", "", value.as_str(), v1, key.as_str()),
            Request::Uid(uid) => ("UID", "", uid.as_str(), v1, ""),
        };
        write!(f, "{{{kind} {namespace} {name}  {api_version}  {field_path}}}")
    }
}

/// Apply `Impersonate-*` headers: returns the user RBAC should then see
/// (`None` when there are none, so the requester acts as itself). 400 for a
/// group, uid or extra without a user; 403 (the API server's wording, naming
/// the first refused resource) when RBAC refuses any part.
pub fn impersonate(
    requester: &UserInfo,
    headers: &HeaderMap,
    rbac: &dyn RbacObjects,
) -> Result<Option<UserInfo>, Status> {
    let requests = requests(headers)?;
    if requests.is_empty() {
        return Ok(None);
    }
    for request in &requests {
        rbac::check(rbac, requester, &request.attributes())?;
    }
    Ok(Some(user_from(&requests, headers.contains_key(GROUP))))
}

/// Read the headers (`buildImpersonationRequests`): user first, then groups
/// in order, extras, uid.
fn requests(headers: &HeaderMap) -> Result<Vec<Request>, Status> {
    let mut requests = Vec::new();
    let user = first(headers, USER);
    if !user.is_empty() {
        requests.push(match split_service_account(&user) {
            Some((namespace, name)) => Request::ServiceAccount {
                namespace: namespace.into(),
                name: name.into(),
            },
            None => Request::User(user.clone()),
        });
    }
    requests.extend(
        headers
            .get_all(GROUP)
            .iter()
            .map(|v| Request::Group(text(v.as_bytes()))),
    );
    for name in headers.keys() {
        let Some(encoded) = name.as_str().strip_prefix(EXTRA_PREFIX) else {
            continue;
        };
        // http already lower-cases header names, as kube-apiserver's
        // strings.ToLower does after Go canonicalised them.
        let key = unescape_extra_key(encoded);
        for value in headers.get_all(name) {
            requests.push(Request::Extra {
                key: key.clone(),
                value: text(value.as_bytes()),
            });
        }
    }
    let uid = first(headers, UID);
    if !uid.is_empty() {
        requests.push(Request::Uid(uid));
    }
    let asks_more = requests
        .iter()
        .any(|r| !matches!(r, Request::User(_) | Request::ServiceAccount { .. }));
    if asks_more && user.is_empty() {
        let listed: Vec<String> = requests.iter().map(Request::to_string).collect();
        return Err(Status::bad_request(format!(
            "requested [{}] without impersonating a user",
            listed.join(" ")
        )));
    }
    Ok(requests)
}

/// The impersonated user. Groups as given; a ServiceAccount given no groups
/// gets its ServiceAccount groups; `system:authenticated` is appended unless
/// it or `system:unauthenticated` is there (anonymous gets
/// `system:unauthenticated` instead).
fn user_from(requests: &[Request], groups_specified: bool) -> UserInfo {
    let mut user = UserInfo::default();
    for request in requests {
        match request {
            Request::ServiceAccount { namespace, name } => {
                user.name = format!("system:serviceaccount:{namespace}:{name}");
                if !groups_specified {
                    user.groups = service_account_groups(namespace);
                }
            }
            Request::User(name) => user.name = name.clone(),
            Request::Group(group) => user.groups.push(group.clone()),
            Request::Extra { key, value } => user.extra.entry(key.clone()).or_default().push(value.clone()),
            Request::Uid(uid) => user.uid = uid.clone(),
        }
    }
    let has = |group: &str| user.groups.iter().any(|g| g == group);
    let missing = if user.name == ANONYMOUS {
        (!has(ALL_UNAUTHENTICATED)).then_some(ALL_UNAUTHENTICATED)
    } else {
        (!has(ALL_AUTHENTICATED) && !has(ALL_UNAUTHENTICATED)).then_some(ALL_AUTHENTICATED)
    };
    if let Some(group) = missing {
        user.groups.push(group.to_string());
    }
    user
}

/// The first value of header `name`, verbatim ("" when absent), as Go's
/// `Header.Get`.
fn first(headers: &HeaderMap, name: &str) -> String {
    headers.get(name).map(|v| text(v.as_bytes())).unwrap_or_default()
}

/// A header value as text, never decoded.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Go's `url.PathUnescape`, keeping the key as it came when it is not valid
/// percent-encoding (or decodes to something that is not UTF-8).
fn unescape_extra_key(encoded: &str) -> String {
    let bytes = encoded.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return encoded.to_string();
    }
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .map_or_else(|_| encoded.to_string(), |key| key.into_owned())
}
