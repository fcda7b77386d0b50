//! Route a request by its raw path, and refuse ambiguous paths before
//! anything else looks at them.
//!
//! The path is never decoded: what is forwarded is byte for byte what was
//! routed and what is audited. A percent-encoded slash or a dot segment could
//! make portcullis and the API server disagree about which object is meant,
//! so such paths are refused with a 400 Status before authentication.

use super::error::RequestError;
use crate::config::valid_cluster_name;

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/clusters/<name><path>`: the raw Kubernetes API of a cluster.
    Cluster {
        /// Cluster name.
        name: &'a str,
        /// The Kubernetes path, starting with `/` (just `/` when empty).
        path: &'a str,
    },
    /// `/healthz`: the process is up.
    Healthz,
    /// `/readyz`: some cluster is reachable (see `doors::health`).
    Readyz,
    /// `/metrics`: Prometheus metrics.
    Metrics,
    /// `/audit`: the audit, for admins (`crate::doors::audit`).
    Audit,
    /// `/mcp`: the MCP server for AI agents (`crate::mcp`).
    Mcp,
    /// `/apiserver-audit/<cluster>`: the cluster's API server delivers its
    /// audit events (`crate::doors::apiserver_audit`).
    ApiserverAudit(&'a str),
    /// `/api/portcullis/v1/<rest>`: the JSON API people's command line
    /// uses, as the person (`crate::doors::api`); `rest` is what follows
    /// the prefix, unchecked.
    Api(&'a str),
    /// `/login`, `/logout`, `/approvals`, `/approvals/<id>`: the approval
    /// pages for people (`crate::doors::web`).
    Web(Page<'a>),
    /// `/.well-known/…` (the OAuth metadata documents; which ones depends
    /// on the public URL's path, so the OAuth door matches the whole path)
    /// and `/oauth/token`, `/oauth/register`, `/oauth/revoke`.
    OAuth(OAuthEndpoint<'a>),
    /// Anything else.
    NotFound,
}

/// An OAuth endpoint other than the consent page (which is a page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthEndpoint<'a> {
    /// A path under `/.well-known/`: the whole path.
    WellKnown(&'a str),
    /// `/oauth/token`: codes, refresh tokens, the CI token exchange.
    Token,
    /// `/oauth/register`: Dynamic Client Registration (RFC 7591).
    Register,
    /// `/oauth/revoke`: token revocation (RFC 7009).
    Revoke,
}

/// Which approval page (the pages themselves are `crate::doors::web`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page<'a> {
    /// `/login`.
    Login,
    /// `/login/callback`: the identity provider sends the browser back.
    LoginCallback,
    /// `/logout`.
    Logout,
    /// `/login/cli`: the person lets `portcullis login` sign in.
    CliLogin,
    /// `/login/device`: the person allows a device's user code.
    DeviceLogin,
    /// `/login/device/code`: `portcullis login --no-browser` asks for codes.
    DeviceCode,
    /// `/login/device/check`: the person is shown where a typed code was
    /// asked from (its own path, so that a replica of the release before,
    /// which denies any decision but allow, answers 404 instead).
    DeviceCheck,
    /// `/approvals`.
    List,
    /// `/approvals/<id>`.
    Held(&'a str),
    /// `/` and `/console`: the signed-in person's console.
    Console,
    /// `/console/<action>`: the console's forms and its kubeconfig.
    ConsoleAction(&'a str),
    /// `/oauth/authorize`: an agent's client asks; the person consents.
    Authorize,
    /// A path under the pages' own (`/approvals/`, `/console/`, `/login/`)
    /// that is none of them: a browser is answered with a page, not a
    /// Kubernetes Status.
    NotFound,
}

/// Where the person-facing JSON API lives: apart from `/clusters/`, `/mcp`
/// and the pages, so that no cluster or page path can ever mean it.
pub const API_PREFIX: &str = "/api/portcullis/v1/";

/// Route `path` (the raw, undecoded path of the request URI).
pub fn route(path: &str) -> Result<Route<'_>, RequestError> {
    match path {
        "/healthz" => return Ok(Route::Healthz),
        "/readyz" => return Ok(Route::Readyz),
        "/metrics" => return Ok(Route::Metrics),
        "/audit" => return Ok(Route::Audit),
        "/mcp" => return Ok(Route::Mcp),
        "/login" => return Ok(Route::Web(Page::Login)),
        "/login/callback" => return Ok(Route::Web(Page::LoginCallback)),
        "/logout" => return Ok(Route::Web(Page::Logout)),
        "/login/cli" => return Ok(Route::Web(Page::CliLogin)),
        "/login/device" => return Ok(Route::Web(Page::DeviceLogin)),
        "/login/device/code" => return Ok(Route::Web(Page::DeviceCode)),
        "/login/device/check" => return Ok(Route::Web(Page::DeviceCheck)),
        "/approvals" => return Ok(Route::Web(Page::List)),
        "/" | "/console" => return Ok(Route::Web(Page::Console)),
        "/oauth/authorize" => return Ok(Route::Web(Page::Authorize)),
        "/oauth/token" => return Ok(Route::OAuth(OAuthEndpoint::Token)),
        "/oauth/register" => return Ok(Route::OAuth(OAuthEndpoint::Register)),
        "/oauth/revoke" => return Ok(Route::OAuth(OAuthEndpoint::Revoke)),
        _ => {}
    }
    if let Some(action) = path.strip_prefix("/console/") {
        // Form paths are ids and words: anything else is simply not found.
        let valid = action.len() <= 120
            && action
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'/');
        return Ok(Route::Web(if valid {
            Page::ConsoleAction(action)
        } else {
            Page::NotFound
        }));
    }
    // OpenID discovery of an issuer with a path puts the path first; a
    // cluster's own discovery (its service-account issuer) is the cluster's.
    let well_known = path.starts_with("/.well-known/")
        || (path.ends_with("/.well-known/openid-configuration") && !path.starts_with("/clusters/"));
    if well_known && path.len() <= 300 {
        return Ok(Route::OAuth(OAuthEndpoint::WellKnown(path)));
    }
    if let Some(cluster) = path.strip_prefix("/apiserver-audit/") {
        return Ok(if valid_cluster_name(cluster) {
            Route::ApiserverAudit(cluster)
        } else {
            Route::NotFound
        });
    }
    if let Some(rest) = path.strip_prefix(API_PREFIX) {
        return Ok(Route::Api(rest));
    }
    if let Some(id) = path.strip_prefix("/approvals/") {
        // Held write ids are UUIDs: anything else is simply not found.
        let valid = id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
        return Ok(Route::Web(if valid { Page::Held(id) } else { Page::NotFound }));
    }
    if path.starts_with("/login/") {
        return Ok(Route::Web(Page::NotFound));
    }
    let Some(rest) = path.strip_prefix("/clusters/") else {
        return Ok(Route::NotFound);
    };
    let (name, k8s_path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if !valid_cluster_name(name) {
        return Err(RequestError::InvalidClusterName { name: name.to_string() });
    }
    check_path(k8s_path)?;
    Ok(Route::Cluster { name, path: k8s_path })
}

/// Go's limit on a query's parameters (`net/url`, since Go 1.24.12 and
/// 1.25.6): past it, `URL.Query()` is empty.
pub const MAX_QUERY_PARAMETERS: usize = 10_000;

/// Refuse a query the API server would read as empty: with 10,000 `&`
/// after `dryRun=All` it would run as real a write portcullis read as a
/// dry run (and not held), and read a `?watch` as a list.
pub fn check_query(query: Option<&str>) -> Result<(), RequestError> {
    let query = query.unwrap_or_default();
    // Counted by Go as `&`s plus one; a shorter query cannot hold that many.
    if query.len() >= MAX_QUERY_PARAMETERS && query.bytes().filter(|&b| b == b'&').count() >= MAX_QUERY_PARAMETERS {
        return Err(RequestError::TooManyQueryParameters);
    }
    Ok(())
}

fn check_path(path: &str) -> Result<(), RequestError> {
    if path.as_bytes().contains(&b'%') {
        check_encoded_path(path)
    } else {
        check_plain_path(path)
    }
}

/// [`check_path`] for a path with percent-encoding: each segment is
/// checked as the API server would decode it.
fn check_encoded_path(path: &str) -> Result<(), RequestError> {
    let lower = path.to_ascii_lowercase();
    if lower.contains("%2f") || lower.contains("%5c") || path.contains('\\') {
        return Err(RequestError::EncodedSlash);
    }
    if percent_encoding::percent_decode_str(path).decode_utf8().is_err() {
        return Err(RequestError::PathNotUtf8);
    }
    let segments: Vec<&str> = lower.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    for (i, segment) in segments.iter().enumerate() {
        let decoded = percent_encoding::percent_decode_str(segment).decode_utf8_lossy();
        if decoded == "." || decoded == ".." {
            return Err(RequestError::DotSegment);
        }
        if segment.is_empty() && i != last {
            return Err(RequestError::EmptySegment);
        }
    }
    Ok(())
}

/// [`check_path`] for a path without any percent-encoding, the usual
/// kind: nothing to decode, so its segments are checked as they are,
/// without copies (it runs on every request).
fn check_plain_path(path: &str) -> Result<(), RequestError> {
    if path.as_bytes().contains(&b'\\') {
        return Err(RequestError::EncodedSlash);
    }
    // Split as bytes: `str::split`'s searcher, set up for each of a
    // path's short segments, was 1.4k instructions per request in the
    // issue-23 profile.
    let mut segments = path.as_bytes().split(|&b| b == b'/').skip(1).peekable();
    while let Some(segment) = segments.next() {
        if segment == b"." || segment == b".." {
            return Err(RequestError::DotSegment);
        }
        if segment.is_empty() && segments.peek().is_some() {
            return Err(RequestError::EmptySegment);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::refusal::Refusal;

    #[test]
    fn cluster_paths_keep_their_raw_bytes() {
        assert_eq!(
            route("/clusters/kind-local/api/v1/namespaces/shop/pods").unwrap(),
            Route::Cluster {
                name: "kind-local",
                path: "/api/v1/namespaces/shop/pods"
            }
        );
        assert_eq!(route("/clusters/a").unwrap(), Route::Cluster { name: "a", path: "/" });
        assert_eq!(
            route("/clusters/a/api/v1/namespaces/x/configmaps/caf%C3%A9").unwrap(),
            Route::Cluster {
                name: "a",
                path: "/api/v1/namespaces/x/configmaps/caf%C3%A9"
            }
        );
        assert_eq!(
            route("/clusters/a/apis/").unwrap(),
            Route::Cluster {
                name: "a",
                path: "/apis/"
            }
        );
    }

    #[test]
    fn ambiguous_paths_are_refused() {
        for bad in [
            "/clusters/a/api/v1/namespaces/x%2Fy/pods",
            "/clusters/a/api/v1/namespaces/x%2fy/pods",
            "/clusters/a/api/v1/../../secrets",
            "/clusters/a/api/v1/%2e%2e/secrets",
            "/clusters/a/api/v1/%2E/secrets",
            "/clusters/a/./api",
            "/clusters/a/api//v1",
            "/clusters/a/api\\v1",
            "/clusters/A/api",
            "/clusters/a_b/api",
            "/clusters//api",
            "/clusters/%61/api",
            "/clusters/a/api/v1/namespaces/%FF/pods",
        ] {
            let err = route(bad).unwrap_err().status();
            assert_eq!(err.code, 400, "{bad}");
        }
    }

    #[test]
    fn a_clusters_own_openid_discovery_goes_to_the_cluster_and_portcullis_own_to_the_oauth_door() {
        let cluster = route("/clusters/a/.well-known/openid-configuration").unwrap();
        assert_eq!(
            cluster,
            Route::Cluster {
                name: "a",
                path: "/.well-known/openid-configuration"
            }
        );
        for own in [
            "/pc/.well-known/openid-configuration",
            "/.well-known/openid-configuration",
        ] {
            assert!(
                matches!(route(own), Ok(Route::OAuth(OAuthEndpoint::WellKnown(_)))),
                "{own}"
            );
        }
    }

    #[test]
    fn a_query_go_would_read_as_empty_is_refused_and_one_it_reads_is_not() {
        let with = |ampersands: usize| format!("dryRun=All{}", "&".repeat(ampersands));
        // Go counts `&`s plus one: 10,000 parameters are read, 10,001 not.
        assert!(check_query(Some(&with(MAX_QUERY_PARAMETERS - 1))).is_ok());
        let refused = check_query(Some(&with(MAX_QUERY_PARAMETERS))).unwrap_err();
        assert_eq!(refused.status().code, 400);
        assert_eq!(refused.refused(), Some(Refusal::Path));
        assert!(check_query(Some(&"a".repeat(50_000))).is_ok(), "long is not many");
        assert!(check_query(None).is_ok());
    }

    #[test]
    fn a_plain_path_is_judged_as_the_decoding_check_judges_it() {
        for path in [
            "/api/v1/pods",
            "/api/v1/pods/",
            "/api//v1",
            "/api/./v1",
            "/api/../v1",
            "/api/v1/..",
            "/api/v1/.",
            "/api/v1/...",
            "/api/.x/v1",
            "/api\\v1",
            "/",
            "",
            "//",
            "/CAFÉ/Ümlaut",
        ] {
            let plain = check_plain_path(path).map_err(|e| format!("{e:?}"));
            let decoded = check_encoded_path(path).map_err(|e| format!("{e:?}"));
            assert_eq!(plain, decoded, "{path:?}");
        }
    }

    #[test]
    fn service_routes_are_exact() {
        assert_eq!(route("/healthz").unwrap(), Route::Healthz);
        assert_eq!(route("/readyz").unwrap(), Route::Readyz);
        assert_eq!(route("/metrics").unwrap(), Route::Metrics);
        assert_eq!(route("/audit").unwrap(), Route::Audit);
        assert_eq!(route("/audit/x").unwrap(), Route::NotFound);
        assert_eq!(route("/mcp").unwrap(), Route::Mcp);
        assert_eq!(route("/mcp/x").unwrap(), Route::NotFound);
        assert_eq!(route("/healthz/x").unwrap(), Route::NotFound);
        assert_eq!(route("/api/v1").unwrap(), Route::NotFound);
        assert_eq!(route("/approvals").unwrap(), Route::Web(Page::List));
        assert_eq!(route("/login/callback").unwrap(), Route::Web(Page::LoginCallback));
        let id = "0190a0b0-0000-7000-8000-000000000001";
        assert_eq!(route(&format!("/approvals/{id}")).unwrap(), Route::Web(Page::Held(id)));
        assert_eq!(route("/approvals/../x").unwrap(), Route::Web(Page::NotFound));
        assert_eq!(route("/console/Upper").unwrap(), Route::Web(Page::NotFound));
        assert_eq!(route("/login/elsewhere").unwrap(), Route::Web(Page::NotFound));
        assert_eq!(route("/api/portcullis/v1/whoami").unwrap(), Route::Api("whoami"));
        assert_eq!(route("/api/portcullis/v1").unwrap(), Route::NotFound);
        assert_eq!(route("/apiserver-audit/prod").unwrap(), Route::ApiserverAudit("prod"));
        assert_eq!(route("/apiserver-audit/a/b").unwrap(), Route::NotFound);
    }
}
