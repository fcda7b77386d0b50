//! A cluster's request URI, built from its server URL parsed once: a
//! `format!` of the whole URL and a parse of it again, scheme and
//! authority included, on every request cost the request path more than
//! building the path and query alone.

use http::uri::{Authority, InvalidUri, PathAndQuery, Scheme};
use http::{HeaderValue, Uri};

/// The longest URI `http` parses from a string; a built one is held to it
/// too, so both ways refuse the same requests.
const MAX_URI_LEN: usize = u16::MAX as usize - 1;

/// A cluster's server URL (without its trailing `/`), split once.
#[derive(Debug, Clone)]
pub struct ServerUrl {
    base: String,
    /// Scheme, authority and path prefix, when the URL is plainly
    /// `scheme://authority/prefix`; else every URI is parsed whole.
    parts: Option<(Scheme, Authority, String)>,
    /// The `Host` an HTTP/1.1 request carries, made once: hyper's client
    /// formats it again for every request.
    host: Option<HeaderValue>,
    /// The URL parsed: where connections go.
    server: Uri,
}

impl ServerUrl {
    /// `base`, a server URL without its trailing `/`.
    pub fn new(base: &str) -> Result<ServerUrl, InvalidUri> {
        let uri: Uri = base.parse()?;
        let parts = match (uri.scheme(), uri.authority()) {
            (Some(scheme), Some(authority)) => {
                let head = format!("{scheme}://{authority}");
                base.strip_prefix(head.as_str())
                    .filter(|prefix| prefix.is_empty() || prefix.starts_with('/'))
                    .filter(|prefix| !prefix.contains(['?', '#']))
                    .map(|prefix| (scheme.clone(), authority.clone(), prefix.to_string()))
            }
            _ => None,
        };
        Ok(ServerUrl {
            base: base.to_string(),
            parts,
            host: host(&uri),
            server: uri,
        })
    }

    /// The server URL, parsed: what a connection is made to.
    pub fn server(&self) -> &Uri {
        &self.server
    }

    /// The `Host` header of a request to this server, as hyper's client
    /// would write it: the host, and the port unless it is the scheme's
    /// default; `None` for a URL without a host.
    pub fn host(&self) -> Option<&HeaderValue> {
        self.host.as_ref()
    }

    /// The server URL, as configured less its trailing `/`.
    pub fn as_str(&self) -> &str {
        &self.base
    }

    /// The URI of Kubernetes path `path` (starting with `/`) and `query`:
    /// what `format!("{base}{path}?{query}").parse()` gives.
    pub fn uri(&self, path: &str, query: Option<&str>) -> Result<Uri, InvalidUri> {
        let Some((scheme, authority, prefix)) = self.parts.as_ref().filter(|_| path.starts_with('/')) else {
            return self.parsed(path, query);
        };
        let len = prefix.len() + path.len() + query.map_or(0, |q| q.len() + 1);
        if self.base.len() + len > MAX_URI_LEN {
            return self.parsed(path, query);
        }
        let mut rest = String::with_capacity(len);
        rest.push_str(prefix);
        rest.push_str(path);
        if let Some(query) = query {
            rest.push('?');
            rest.push_str(query);
        }
        let path_and_query = PathAndQuery::from_maybe_shared(bytes::Bytes::from(rest))?;
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(scheme.clone());
        parts.authority = Some(authority.clone());
        parts.path_and_query = Some(path_and_query);
        Uri::from_parts(parts).or_else(|_| self.parsed(path, query))
    }

    /// The URI parsed whole, the way anything unusual is built.
    fn parsed(&self, path: &str, query: Option<&str>) -> Result<Uri, InvalidUri> {
        match query {
            Some(q) => format!("{}{path}?{q}", self.base).parse(),
            None => format!("{}{path}", self.base).parse(),
        }
    }
}

fn host(uri: &Uri) -> Option<HeaderValue> {
    let host = uri.host()?;
    let secure = matches!(uri.scheme_str(), Some("https" | "wss"));
    let value = match uri.port_u16() {
        Some(443) if secure => host.to_string(),
        Some(80) if !secure => host.to_string(),
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    HeaderValue::from_str(&value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_uri_is_the_one_parsed_from_the_whole_url() {
        let bases = [
            "https://127.0.0.1:6443",
            "https://api.example.org",
            "https://api.example.org/k8s/clusters/c-1",
            "http://[::1]:8080",
            "https://user@host:1",
        ];
        let paths = [
            "/",
            "/api/v1/namespaces/shop/configmaps/a",
            "/api/v1/namespaces/x/configmaps/caf%C3%A9",
            "/apis/apps/v1/deployments#frag",
            "/a b",
            "/a\u{7f}",
            "api/v1",
            "",
        ];
        let queries = [
            None,
            Some(""),
            Some("watch=1&labelSelector=a%3Db"),
            Some("a=b c"),
            Some("x#y"),
        ];
        for base in bases {
            let server = ServerUrl::new(base).unwrap();
            assert!(server.parts.is_some(), "{base}");
            for path in paths {
                for query in queries {
                    let built = server.uri(path, query).map(|u| u.to_string()).ok();
                    let parsed = server.parsed(path, query).map(|u| u.to_string()).ok();
                    assert_eq!(built, parsed, "{base} {path:?} {query:?}");
                }
            }
        }
    }

    #[test]
    fn an_overlong_uri_is_refused_either_way() {
        let server = ServerUrl::new("https://h").unwrap();
        let path = format!("/{}", "a".repeat(MAX_URI_LEN));
        assert!(server.uri(&path, None).is_err());
        assert!(server.parsed(&path, None).is_err());
    }

    #[test]
    fn the_host_header_names_the_host_and_any_port_but_the_schemes_own() {
        let cases = [
            ("https://127.0.0.1:6443", "127.0.0.1:6443"),
            ("https://api.example.org", "api.example.org"),
            ("https://api.example.org:443/k8s/clusters/c-1", "api.example.org"),
            ("http://api.example.org:80", "api.example.org"),
            ("http://api.example.org:443", "api.example.org:443"),
            ("https://api.example.org:80", "api.example.org:80"),
            ("http://[::1]:8080", "[::1]:8080"),
            ("https://user@host:1", "host:1"),
        ];
        for (base, host) in cases {
            let server = ServerUrl::new(base).unwrap();
            assert_eq!(server.host().map(|h| h.to_str().unwrap()), Some(host), "{base}");
        }
        assert!(ServerUrl::new("/relative").unwrap().host().is_none());
    }
}
