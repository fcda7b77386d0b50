//! Fetching a Client ID Metadata Document from its URL, which anyone may
//! choose: so only over https, only from a public address, without
//! following redirects, within [`TIMEOUT`] and [`LIMIT`]. The host name is
//! resolved here and the connection goes to the very address that was
//! checked, so a name that resolves to a public address for the check and
//! to an internal one for the connection (DNS rebinding) reaches nothing.

use crate::oauth::redirect;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// The largest document read (the draft's suggestion, 5 KB, is far below).
pub(super) const LIMIT: usize = 64 * 1024;
/// How long resolving, connecting, TLS, the request and reading the
/// document may take together.
pub(super) const TIMEOUT: Duration = Duration::from_secs(5);

/// Where a document is fetched from, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The host name, or the IP address without brackets.
    host: String,
    /// The host and port as written, for the `Host` header.
    authority: String,
    port: u16,
    path_and_query: String,
}

impl Target {
    /// The URL of a metadata document: https, a host, a path without `.`
    /// or `..` segments, no userinfo, no fragment (the draft's rules).
    pub(super) fn parse(url: &str) -> Result<Target, String> {
        let parts = redirect::split(url)?;
        let authority = match (&parts.authority, parts.scheme) {
            (Some(authority), "https") if !authority.host.is_empty() => authority,
            _ => return Err("it is not an https URL with a host".into()),
        };
        let path = parts.rest.split('?').next().unwrap_or_default();
        if !path.starts_with('/') {
            return Err("it has no path".into());
        }
        let dot = |segment: &str| matches!(segment.to_ascii_lowercase().replace("%2e", ".").as_str(), "." | "..");
        if path.split('/').any(dot) {
            return Err("its path has . or .. segments".into());
        }
        let host = authority.host.trim_start_matches('[').trim_end_matches(']');
        Ok(Target {
            host: host.to_string(),
            authority: match authority.port {
                Some(port) => format!("{}:{port}", authority.host),
                None => authority.host.to_string(),
            },
            port: authority.port.unwrap_or(443),
            path_and_query: parts.rest.to_string(),
        })
    }
}

/// Fetches documents; built once.
pub(super) struct Fetcher {
    tls: tokio_rustls::TlsConnector,
    /// Tests only: skip the public-address check.
    private_allowed: bool,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("private_allowed", &self.private_allowed)
            .finish()
    }
}

impl Fetcher {
    /// A fetcher trusting the system's roots and `ca_file`'s CAs.
    pub(super) fn new(ca_file: Option<&Path>, private_allowed: bool) -> Result<Fetcher, String> {
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots(ca_file)?)
            .with_no_client_auth();
        let mut tls = tls;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Fetcher {
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
            private_allowed,
        })
    }

    /// The document at `target`, or why not, in words completing "the
    /// document …" (nothing is retried).
    pub(super) async fn get(&self, target: &Target) -> Result<Vec<u8>, String> {
        tokio::time::timeout(TIMEOUT, self.exchange(target))
            .await
            .map_err(|_| format!("did not arrive within {} s", TIMEOUT.as_secs()))?
    }

    async fn exchange(&self, target: &Target) -> Result<Vec<u8>, String> {
        let tcp = connect(&self.addresses(target).await?).await?;
        let name = ServerName::try_from(target.host.clone()).map_err(|e| format!("has a host TLS cannot name: {e}"))?;
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("could not be fetched: TLS with its host failed: {e}"))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("could not be fetched: {e}"))?;
        let request = http::Request::get(target.path_and_query.as_str())
            .header(http::header::HOST, target.authority.as_str())
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, "portcullis")
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("could not be asked for: {e}"))?;
        let answer = async {
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| format!("could not be fetched: {e}"))?;
            read(response).await
        };
        // The connection is driven here, not spawned: when the time is up,
        // dropping this future closes it.
        tokio::pin!(answer, connection);
        tokio::select! {
            result = &mut answer => result,
            closed = &mut connection => {
                closed.map_err(|e| format!("could not be fetched: {e}"))?;
                answer.await
            }
        }
    }

    /// Every address the host resolves to, each checked.
    async fn addresses(&self, target: &Target) -> Result<Vec<SocketAddr>, String> {
        let found: Vec<SocketAddr> = match target.host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, target.port)],
            Err(_) => match tokio::net::lookup_host((target.host.as_str(), target.port)).await {
                Ok(found) => found.collect(),
                Err(error) => {
                    tracing::info!(host = %target.host, %error, "a client metadata document's host does not resolve");
                    Vec::new()
                }
            },
        };
        // One answer for a name that does not resolve and one that leads
        // inside: anyone may name any URL, and would otherwise learn which
        // internal names exist and where they lead. The log says which.
        let refused = || String::from("is refused: its host is not at a public address");
        if found.is_empty() {
            return Err(refused());
        }
        if let Some(private) = found.iter().find(|a| !self.private_allowed && !public(a.ip())) {
            tracing::info!(host = %target.host, address = %private.ip(), "a client metadata document's host is not at a public address");
            return Err(refused());
        }
        Ok(found)
    }
}

/// A connection to the first of `addresses` that answers.
async fn connect(addresses: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut last = String::new();
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = format!("could not be fetched: cannot connect to {address}: {e}"),
        }
    }
    Err(last)
}

async fn read(response: http::Response<hyper::body::Incoming>) -> Result<Vec<u8>, String> {
    let status = response.status();
    if status.is_redirection() {
        return Err(format!(
            "is refused: its URL answers with a redirect (HTTP {status}), which is not followed"
        ));
    }
    if status != http::StatusCode::OK {
        return Err(format!("could not be fetched: its URL answers HTTP {status}"));
    }
    let too_large = || format!("is refused: it is larger than {} KiB", LIMIT / 1024);
    let declared = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > LIMIT as u64) {
        return Err(too_large());
    }
    let body =
        Limited::new(response.into_body(), LIMIT)
            .collect()
            .await
            .map_err(|e| match e.downcast_ref::<http_body_util::LengthLimitError>() {
                Some(_) => too_large(),
                None => format!("could not be fetched: it broke off: {e}"),
            })?;
    Ok(body.to_bytes().to_vec())
}

fn roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, String> {
    crate::tls::system_roots_and(ca_file).map_err(|message| {
        let path = ca_file.map(|p| p.display().to_string()).unwrap_or_default();
        format!("cannot use client_metadata_ca_file {path}: {message}")
    })
}

/// May portcullis fetch from `ip`? Only a globally reachable unicast
/// address: never this machine, a private or shared network, link-local
/// (cloud metadata at 169.254.169.254), documentation, multicast or
/// reserved space, nor an IPv6 address that embeds one of those.
pub(super) fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

/// IPv4 blocks that are not globally reachable (RFC 6890 and after).
const NOT_PUBLIC_V4: &[([u8; 4], u32)] = &[
    ([0, 0, 0, 0], 8),       // "this network"
    ([10, 0, 0, 0], 8),      // private, RFC 1918
    ([100, 64, 0, 0], 10),   // shared (CGNAT), RFC 6598
    ([127, 0, 0, 0], 8),     // loopback
    ([169, 254, 0, 0], 16),  // link-local: cloud metadata at 169.254.169.254
    ([172, 16, 0, 0], 12),   // private, RFC 1918
    ([192, 0, 0, 0], 24),    // IETF protocol assignments
    ([192, 0, 2, 0], 24),    // documentation
    ([192, 88, 99, 0], 24),  // 6to4 relay anycast
    ([192, 168, 0, 0], 16),  // private, RFC 1918
    ([198, 18, 0, 0], 15),   // benchmarking
    ([198, 51, 100, 0], 24), // documentation
    ([203, 0, 113, 0], 24),  // documentation
    ([224, 0, 0, 0], 4),     // multicast
    ([240, 0, 0, 0], 4),     // reserved, and the broadcast address
];

/// IPv6 blocks outside global unicast's public part. Only 2000::/3 is
/// accepted at all; these are the special blocks inside it.
const NOT_PUBLIC_V6: &[(u128, u32)] = &[
    (0x2001_0000 << 96, 23), // IETF protocol assignments, Teredo
    (0x2001_0db8 << 96, 32), // documentation
    (0x2002 << 112, 16),     // 6to4: embeds any IPv4 address
    (0x3fff << 112, 20),     // documentation, RFC 9637
];

fn public_v4(ip: Ipv4Addr) -> bool {
    let ip = u32::from(ip);
    let inside =
        |&(network, length): &([u8; 4], u32)| ip >> (32 - length) == u32::from_be_bytes(network) >> (32 - length);
    !NOT_PUBLIC_V4.iter().any(inside)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return public_v4(v4);
    }
    let bits = u128::from(ip);
    // NAT64 (RFC 6052): the IPv4 address in the last 32 bits is what is reached.
    if bits >> 32 == 0x0064_ff9b << 64 {
        return public_v4(Ipv4Addr::from(bits as u32));
    }
    let inside = |&(network, length): &(u128, u32)| bits >> (128 - length) == network >> (128 - length);
    let global_unicast = bits >> 125 == 0b001;
    global_unicast && !NOT_PUBLIC_V6.iter().any(inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_globally_reachable_addresses_are_public() {
        let refused = [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.1.2.3",
            "169.254.169.254",
            "169.254.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0.0.0.0",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "3fff::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "ff0e::1",
        ];
        for address in refused {
            let ip: IpAddr = address.parse().unwrap();
            assert!(!public(ip), "{address} must not be public");
        }
        let accepted = [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "169.253.1.1",
            "192.0.1.1",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.254",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450:4001::1",
        ];
        for address in accepted {
            let ip: IpAddr = address.parse().unwrap();
            assert!(public(ip), "{address} must be public");
        }
    }

    #[test]
    fn a_document_url_is_https_with_a_host_and_a_path_without_dot_segments() {
        let target = Target::parse("https://client.example.com:8443/oauth/client.json?v=1").unwrap();
        assert_eq!(target.host, "client.example.com");
        assert_eq!(target.authority, "client.example.com:8443");
        assert_eq!(target.port, 8443);
        assert_eq!(target.path_and_query, "/oauth/client.json?v=1");
        let literal = Target::parse("https://[::1]/c").unwrap();
        assert_eq!(
            (literal.host.as_str(), literal.authority.as_str(), literal.port),
            ("::1", "[::1]", 443)
        );
        for url in [
            "http://client.example.com/c.json",
            "https://client.example.com",
            "https:///c.json",
            "https://client.example.com/a/../c.json",
            "https://client.example.com/./c.json",
            "https://client.example.com/%2E%2e/c.json",
            "https://user@client.example.com/c.json",
            "https://client.example.com/c.json#x",
            "https://client.example.com/c json",
        ] {
            assert!(Target::parse(url).is_err(), "{url}");
        }
    }
}
