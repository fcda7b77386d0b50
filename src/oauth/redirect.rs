//! Which redirect URIs a client may declare, and when a presented one
//! matches a declared one (OAuth 2.1 §2.3.1 and §4.1.1; RFC 8252 §7 for
//! native apps).
//!
//! The authorization code travels to the redirect URI, so a URI that a
//! browser would hand to a script (`javascript:`), a file, another app
//! wrapping the browser (`googlechrome:`) or anyone on the network
//! (`http://` to a real host) would leak it. Parsing is by hand on purpose:
//! a URI is compared as the string the client declared, never as a
//! normalised form, so the rules see exactly what the browser will be sent.

/// The longest redirect URI accepted.
pub const MAX_LENGTH: usize = 2000;

/// Schemes that are never a redirect URI: they run code, read local data,
/// are not HTTP, or hand the URI to a browser outside the person's session.
const REFUSED_SCHEMES: &[&str] = &[
    "javascript",
    "data",
    "file",
    "vbscript",
    "blob",
    "about",
    "ftp",
    "ws",
    "wss",
    "googlechrome",
    "googlechromes",
    "x-safari-http",
    "x-safari-https",
    "microsoft-edge",
    "microsoft-edge-http",
    "microsoft-edge-https",
    "firefox",
    "opera-http",
    "opera-https",
    "brave",
    "intent",
    // Handlers of the operating system or a browser's own pages, which a
    // page reached from portcullis's origin must not open: Office and
    // Windows search or troubleshooting (ms-msdt: "Follina"), mail,
    // telephony, file shares, and browser internals.
    "ms-msdt",
    "search-ms",
    "search",
    "ms-officecmd",
    "ms-word",
    "ms-excel",
    "ms-powerpoint",
    "ms-settings",
    "shell",
    "mailto",
    "tel",
    "sms",
    "smb",
    "view-source",
    "chrome",
    "chrome-extension",
    "moz-extension",
    "ms-cxh",
    "ms-cxh-full",
    "ms-appinstaller",
    "ms-search",
    "itms-services",
    "callto",
    "facetime",
    "skype",
];

/// The host names of the loopback interface a native app listens on.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// A URI split into the pieces the rules look at; every piece borrows the
/// original string unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Parts<'a> {
    /// The scheme as written (compare it case-insensitively).
    pub scheme: &'a str,
    /// The authority after `//`, if there is one.
    pub authority: Option<Authority<'a>>,
    /// Everything after the authority (or after `scheme:`): path and query.
    pub rest: &'a str,
}

/// The authority of a URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Authority<'a> {
    /// The host: a name, an IPv4 address, or an IPv6 literal in brackets.
    pub host: &'a str,
    /// The port's digits, if written.
    pub port: Option<u16>,
}

/// May a client declare `uri` as a redirect URI? `Err` says why not, in
/// words for the registration error or the consent-page refusal.
pub fn acceptable(uri: &str) -> Result<(), String> {
    let parts = split(uri)?;
    let scheme = parts.scheme.to_ascii_lowercase();
    if REFUSED_SCHEMES.contains(&scheme.as_str()) {
        return Err(format!("a redirect URI may not use the scheme {scheme:?}"));
    }
    match scheme.as_str() {
        "https" => match &parts.authority {
            Some(authority) if !authority.host.is_empty() => Ok(()),
            _ => Err("an https redirect URI needs a host".into()),
        },
        "http" => match &parts.authority {
            Some(authority) if is_loopback_host(authority.host) => Ok(()),
            _ => Err("an http redirect URI must go to localhost, 127.0.0.1 or [::1]; use https".into()),
        },
        // RFC 8252 §7.1: an app's private-use scheme, naming where in the
        // app (`myapp://` alone names nothing).
        _ if parts.authority.as_ref().is_none_or(|a| a.host.is_empty()) && parts.rest.trim_matches('/').is_empty() => {
            Err("a redirect URI with a private-use scheme needs a path".into())
        }
        _ => Ok(()),
    }
}

/// Does `presented` match one of `declared`? Exactly, except that an http
/// loopback URI may name any port (RFC 8252 §7.3: a native app listens on
/// whatever port it gets) with the same host, path and query.
pub fn matches(declared: &[String], presented: &str) -> bool {
    if acceptable(presented).is_err() {
        return false;
    }
    declared
        .iter()
        .any(|declared| declared == presented || same_loopback_but_port(declared, presented))
}

/// Does `uri` go to this machine's loopback interface (so the code stays on
/// the person's machine)? Private schemes are not loopback: another app may
/// have claimed the scheme.
pub fn is_loopback(uri: &str) -> bool {
    let Ok(parts) = split(uri) else {
        return false;
    };
    let web = parts.scheme.eq_ignore_ascii_case("http") || parts.scheme.eq_ignore_ascii_case("https");
    web && parts.authority.is_some_and(|a| is_loopback_host(a.host))
}

fn same_loopback_but_port(declared: &str, presented: &str) -> bool {
    let (Ok(declared), Ok(presented)) = (split(declared), split(presented)) else {
        return false;
    };
    let loopback_http = |parts: &Parts| {
        parts.scheme.eq_ignore_ascii_case("http") && parts.authority.as_ref().is_some_and(|a| is_loopback_host(a.host))
    };
    let host = |parts: &Parts<'_>| parts.authority.as_ref().map(|a| a.host.to_ascii_lowercase());
    loopback_http(&declared)
        && loopback_http(&presented)
        && host(&declared) == host(&presented)
        && declared.rest == presented.rest
}

fn is_loopback_host(host: &str) -> bool {
    LOOPBACK_HOSTS
        .iter()
        .any(|loopback| loopback.eq_ignore_ascii_case(host))
}

/// Split `uri` into scheme, authority and the rest, refusing what no
/// redirect URI (or metadata document URL) may hold: a fragment, userinfo,
/// whitespace, control or other characters outside RFC 3986, more than
/// [`MAX_LENGTH`] bytes.
pub(super) fn split(uri: &str) -> Result<Parts<'_>, String> {
    if uri.len() > MAX_LENGTH {
        return Err(format!("the URI is longer than {MAX_LENGTH} characters"));
    }
    if let Some(bad) = uri.chars().find(|c| !allowed(*c)) {
        return Err(match bad {
            '#' => "the URI has a fragment (#…), which it may not".into(),
            c if c.is_whitespace() || c.is_control() => "the URI holds whitespace or control characters".into(),
            c => format!("the URI holds {c:?}, which a URI may not (percent-encode it)"),
        });
    }
    let (scheme, after) = uri.split_once(':').ok_or("the URI has no scheme")?;
    let mut letters = scheme.chars();
    let first_is_letter = letters.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !first_is_letter || !letters.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) {
        return Err("the URI's scheme is malformed".into());
    }
    let Some(after) = after.strip_prefix("//") else {
        return Ok(Parts {
            scheme,
            authority: None,
            rest: after,
        });
    };
    let end = after.find(['/', '?']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(end);
    Ok(Parts {
        scheme,
        authority: Some(split_authority(authority)?),
        rest,
    })
}

fn split_authority(authority: &str) -> Result<Authority<'_>, String> {
    if authority.contains('@') {
        return Err("the URI has userinfo (user@host), which it may not".into());
    }
    let malformed = || "the URI's host is malformed".to_string();
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']').ok_or("the URI's IPv6 address has no closing ]")?;
        let inside = &authority[1..close];
        if inside.is_empty() || !inside.chars().all(|c| c.is_ascii_hexdigit() || ":.".contains(c)) {
            return Err("the URI's IPv6 address is malformed".into());
        }
        let port = match &authority[close + 1..] {
            "" => None,
            after => Some(after.strip_prefix(':').ok_or_else(malformed)?),
        };
        (&authority[..=close], port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if !host.chars().all(|c| c.is_ascii_alphanumeric() || "-.".contains(c)) {
            return Err(malformed());
        }
        (host, port)
    };
    let port = match port {
        None => None,
        Some(digits) if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) => {
            Some(digits.parse::<u16>().map_err(|_| "the URI's port is out of range")?)
        }
        Some(_) => return Err("the URI's port is not a number".into()),
    };
    Ok(Authority { host, port })
}

/// RFC 3986's characters (unreserved, reserved and `%`), `#` excepted.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~:/?[]@!$&'()*+,;=%".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refused_scheme_is_refused_in_any_case() {
        let refused = [
            "javascript",
            "data",
            "file",
            "vbscript",
            "blob",
            "about",
            "ftp",
            "ws",
            "wss",
            "googlechrome",
            "googlechromes",
            "x-safari-http",
            "x-safari-https",
            "microsoft-edge",
            "microsoft-edge-http",
            "microsoft-edge-https",
            "firefox",
            "opera-http",
            "opera-https",
            "brave",
            "intent",
            "ms-msdt",
            "search-ms",
            "mailto",
            "tel",
            "chrome-extension",
        ];
        for scheme in refused {
            for written in [scheme.to_string(), scheme.to_ascii_uppercase()] {
                let uri = format!("{written}://example.com/cb");
                let error = acceptable(&uri).unwrap_err();
                assert!(error.contains("scheme"), "{uri}: {error}");
                let opaque = format!("{written}:alert(1)");
                assert!(acceptable(&opaque).is_err(), "{opaque}");
            }
        }
    }

    #[test]
    fn https_private_schemes_and_http_on_loopback_are_acceptable() {
        for uri in [
            "https://client.example.com/callback",
            "https://client.example.com:8443/cb?x=1",
            "HTTPS://client.example.com/callback",
            "http://localhost/callback",
            "http://127.0.0.1:33418/callback",
            "http://[::1]:9000/",
            "http://LOCALHOST:80/cb",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
            "com.example.app:/oauth2redirect/example-provider",
        ] {
            assert_eq!(acceptable(uri), Ok(()), "{uri}");
        }
    }

    #[test]
    fn http_to_anything_but_loopback_is_refused() {
        for uri in [
            "http://example.com/cb",
            "http://127.0.0.2/cb",
            "http://localhost.example.com/cb",
            "http://10.0.0.1/cb",
            "http:/cb",
        ] {
            let error = acceptable(uri).unwrap_err();
            assert!(error.contains("http"), "{uri}: {error}");
        }
    }

    #[test]
    fn a_fragment_userinfo_whitespace_or_overlong_uri_is_refused() {
        let long = format!("https://example.com/{}", "a".repeat(MAX_LENGTH));
        let cases = [
            ("https://example.com/cb#x", "fragment"),
            ("https://example.com/cb#", "fragment"),
            ("cursor://cb#frag", "fragment"),
            ("https://user@example.com/cb", "userinfo"),
            ("https://user:pw@example.com/cb", "userinfo"),
            ("http://evil.com@127.0.0.1/cb", "userinfo"),
            ("https://example.com/c b", "whitespace"),
            ("https://example.com/cb\n", "whitespace"),
            ("https://example.com/\u{7}", "control"),
            ("https://example.com\\@good.com/", "percent-encode"),
            ("https://exämple.com/", "percent-encode"),
            (long.as_str(), "longer"),
        ];
        for (uri, why) in cases {
            let error = acceptable(uri).unwrap_err();
            assert!(error.contains(why), "{uri}: {error}");
        }
    }

    #[test]
    fn malformed_uris_are_refused() {
        for uri in [
            "",
            "no-scheme",
            "1abc://x/",
            "https://",
            "https:///path",
            "https://host:port/",
            "https://host:99999/",
            "https://[::1/",
            "https://[zz]/",
            "cursor:",
            "myapp://",
            "myapp:///",
            "myapp:/",
        ] {
            assert!(acceptable(uri).is_err(), "{uri}");
        }
    }

    #[test]
    fn an_http_loopback_uri_matches_on_any_port_with_the_same_host_and_path() {
        let declared = vec![
            "http://127.0.0.1/callback".to_string(),
            "http://localhost:3000/cb".to_string(),
        ];
        assert!(matches(&declared, "http://127.0.0.1/callback"));
        assert!(matches(&declared, "http://127.0.0.1:51234/callback"));
        assert!(matches(&declared, "http://localhost:4000/cb"));
        assert!(matches(&declared, "http://localhost/cb"));
        assert!(!matches(&declared, "http://127.0.0.1:51234/other"));
        assert!(!matches(&declared, "http://127.0.0.1:51234/callback?x=1"));
        assert!(
            !matches(&declared, "http://localhost:51234/callback"),
            "the host must be the same"
        );
        assert!(
            !matches(&declared, "https://127.0.0.1:51234/callback"),
            "the scheme must be the same"
        );
        assert!(!matches(&declared, "http://127.0.0.1:51234/callback#x"));
    }

    #[test]
    fn an_https_or_private_scheme_uri_matches_only_exactly() {
        let declared = vec![
            "https://client.example.com/cb".to_string(),
            "cursor://anysphere.cursor-retrieval/oauth/callback".to_string(),
        ];
        assert!(matches(&declared, "https://client.example.com/cb"));
        assert!(
            !matches(&declared, "https://client.example.com:443/cb"),
            "no port freedom on https"
        );
        assert!(!matches(&declared, "https://client.example.com:8443/cb"));
        assert!(!matches(&declared, "https://client.example.com/cb/"));
        assert!(!matches(&declared, "https://CLIENT.example.com/cb"));
        assert!(!matches(&declared, "https://client.example.com/cb?x=1"));
        assert!(matches(&declared, "cursor://anysphere.cursor-retrieval/oauth/callback"));
        assert!(!matches(
            &declared,
            "cursor://anysphere.cursor-retrieval/oauth/callback2"
        ));
        let https_localhost = vec!["https://localhost/cb".to_string()];
        assert!(
            !matches(&https_localhost, "https://localhost:8443/cb"),
            "port freedom is for http only"
        );
    }

    #[test]
    fn a_refused_uri_never_matches_even_when_declared() {
        let declared = vec![
            "javascript://x/%0aalert(1)".to_string(),
            "https://a.example/cb#f".to_string(),
        ];
        assert!(!matches(&declared, "javascript://x/%0aalert(1)"));
        assert!(!matches(&declared, "https://a.example/cb#f"));
    }

    #[test]
    fn loopback_is_http_or_https_to_the_loopback_names_only() {
        assert!(is_loopback("http://127.0.0.1:8000/cb"));
        assert!(is_loopback("http://[::1]/cb"));
        assert!(is_loopback("https://localhost/cb"));
        assert!(!is_loopback("https://client.example.com/cb"));
        assert!(
            !is_loopback("cursor://localhost/cb"),
            "a private scheme goes to whichever app claimed it"
        );
        assert!(!is_loopback("http://127.0.0.1.example.com/cb"));
    }
}
