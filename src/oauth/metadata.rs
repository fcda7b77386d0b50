//! The discovery documents: Protected Resource Metadata (RFC 9728) for
//! `/mcp`, and Authorization Server Metadata (RFC 8414, also served at the
//! OpenID discovery path). With a `public_url` that has a path, each is at
//! the host's root with that path inserted after the well-known part, as
//! the RFCs say (and the OpenID one also with it appended, as OpenID
//! Connect Discovery says).

use serde_json::{json, Value};

/// Where portcullis is, as its clients reach it.
#[derive(Debug, Clone)]
pub struct Issuer {
    /// `public_url` without a trailing slash: the issuer identifier.
    pub issuer: String,
    /// The path part of `public_url` (`""` or `/pc`).
    path: String,
}

/// Which document a well-known path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document {
    /// RFC 9728, for `/mcp`.
    ProtectedResource,
    /// RFC 8414 (or OpenID discovery).
    AuthorizationServer,
}

impl Issuer {
    /// From `public_url`.
    pub fn new(public_url: &str) -> Issuer {
        let issuer = public_url.trim_end_matches('/').to_string();
        let after_scheme = issuer.split_once("://").map_or(issuer.as_str(), |(_, rest)| rest);
        let path = after_scheme.find('/').map_or("", |i| &after_scheme[i..]).to_string();
        Issuer { issuer, path }
    }

    /// Where the Protected Resource Metadata of `/mcp` is: at the host's
    /// root, the public URL's path inserted after the well-known part.
    pub fn resource_metadata_url(&self) -> String {
        let origin = &self.issuer[..self.issuer.len() - self.path.len()];
        format!("{origin}/.well-known/oauth-protected-resource{}/mcp", self.path)
    }

    /// The resource agents' tokens are for: `/mcp`.
    pub fn resource(&self) -> String {
        format!("{}/mcp", self.issuer)
    }

    /// The document `path` asks for, if it names one of ours.
    pub fn document(&self, path: &str) -> Option<Document> {
        let p = &self.path;
        if path == format!("/.well-known/oauth-protected-resource{p}/mcp") {
            return Some(Document::ProtectedResource);
        }
        let server = [
            format!("/.well-known/oauth-authorization-server{p}"),
            format!("/.well-known/openid-configuration{p}"),
            format!("{p}/.well-known/openid-configuration"),
        ];
        server
            .iter()
            .any(|known| known == path)
            .then_some(Document::AuthorizationServer)
    }

    /// RFC 9728 §2.
    pub fn protected_resource(&self) -> Value {
        json!({
            "resource": self.resource(),
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "portcullis MCP server",
            "resource_documentation": format!("{}/", self.issuer),
        })
    }

    /// RFC 8414 §2, with the Client ID Metadata Document support flag of
    /// the MCP authorization specification, and no scopes: what an agent
    /// may do is what its person chose. The device grant of `portcullis
    /// login` is not offered here: it gives a person's whole command-line
    /// credential, never an agent's, and a client reading this document
    /// must not be led to it.
    pub fn authorization_server(&self) -> Value {
        let i = &self.issuer;
        json!({
            "issuer": i,
            "authorization_endpoint": format!("{i}/oauth/authorize"),
            "token_endpoint": format!("{i}/oauth/token"),
            "registration_endpoint": format!("{i}/oauth/register"),
            "revocation_endpoint": format!("{i}/oauth/revoke"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": [
                "authorization_code",
                "refresh_token",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "client_id_metadata_document_supported": true,
            "authorization_response_iss_parameter_supported": true,
            "scopes_supported": [],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_path_the_documents_are_at_the_plain_well_known_paths() {
        let issuer = Issuer::new("https://pc.example.com/");
        assert_eq!(issuer.issuer, "https://pc.example.com");
        assert_eq!(
            issuer.document("/.well-known/oauth-protected-resource/mcp"),
            Some(Document::ProtectedResource)
        );
        for path in [
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ] {
            assert_eq!(issuer.document(path), Some(Document::AuthorizationServer), "{path}");
        }
        assert_eq!(issuer.document("/.well-known/oauth-protected-resource"), None);
        assert_eq!(issuer.protected_resource()["resource"], "https://pc.example.com/mcp");
    }

    #[test]
    fn with_a_path_it_is_inserted_after_the_well_known_part() {
        let issuer = Issuer::new("https://example.com/pc");
        assert_eq!(
            issuer.document("/.well-known/oauth-protected-resource/pc/mcp"),
            Some(Document::ProtectedResource)
        );
        assert_eq!(issuer.document("/.well-known/oauth-protected-resource/mcp"), None);
        for path in [
            "/.well-known/oauth-authorization-server/pc",
            "/.well-known/openid-configuration/pc",
            "/pc/.well-known/openid-configuration",
        ] {
            assert_eq!(issuer.document(path), Some(Document::AuthorizationServer), "{path}");
        }
        assert_eq!(issuer.document("/.well-known/oauth-authorization-server"), None);
        let server = issuer.authorization_server();
        assert_eq!(server["issuer"], "https://example.com/pc");
        assert_eq!(server["token_endpoint"], "https://example.com/pc/oauth/token");
        assert_eq!(
            issuer.protected_resource()["authorization_servers"][0],
            "https://example.com/pc"
        );
        assert_eq!(
            issuer.resource_metadata_url(),
            "https://example.com/.well-known/oauth-protected-resource/pc/mcp"
        );
    }
}
