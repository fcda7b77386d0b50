//! Identity headers: refuse the ones a client may not send, strip the ones
//! that must not reach the cluster, and build the impersonation headers
//! portcullis sends instead.
//!
//! Client libraries add `Authorization` and `Impersonate-User` only when a
//! request does not carry them already, so anything a client sends that
//! claims an identity would otherwise travel with portcullis's own
//! credentials. Header names are case-insensitive (`http` lower-cases them).

use http::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, UPGRADE};
use ipnet::IpNet;
use std::net::IpAddr;

/// `Audit-ID`, named once: a name given as a string is parsed and
/// hashed again on every request.
pub const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");
/// `Impersonate-User`.
pub const IMPERSONATE_USER: HeaderName = HeaderName::from_static("impersonate-user");
/// `Impersonate-Group`.
pub const IMPERSONATE_GROUP: HeaderName = HeaderName::from_static("impersonate-group");

/// Does the request carry any `Impersonate-*` header (any letter case, or
/// spelt with `_`, which a proxy between portcullis and the cluster may
/// turn into `-`)?
pub fn has_impersonation(headers: &HeaderMap) -> Option<&HeaderName> {
    headers.keys().find(|name| claims_impersonation(name.as_str()))
}

fn claims_impersonation(name: &str) -> bool {
    name.starts_with("impersonate-") || name.starts_with("impersonate_")
}

/// The WebSocket subprotocol that carries a bearer token (a browser cannot
/// set `Authorization` on a WebSocket): a client's token for portcullis
/// must not travel on to the cluster in it.
const TOKEN_SUBPROTOCOL: &str = "base64url.bearer.authorization.k8s.io.";

/// The `Audit-ID` header's value for `id`.
///
/// Marked sensitive, which HTTP/2 sends as "never indexed": an id is never
/// repeated, so adding it to the HPACK table only evicts headers that do
/// repeat, and the encoder compared each new id against every old one still
/// there (over 6% of the proxy's CPU on small GETs).
pub fn audit_id_value(id: uuid::Uuid) -> HeaderValue {
    let mut buf = uuid::Uuid::encode_buffer();
    let mut value =
        HeaderValue::from_str(id.hyphenated().encode_lower(&mut buf)).unwrap_or_else(|_| HeaderValue::from_static(""));
    value.set_sensitive(true);
    value
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) plus `Proxy-Connection`.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Remove what must not travel upstream: credentials and claimed identities,
/// forwarding headers, cookies, the client's Audit-ID, hop-by-hop headers and
/// every header the client's `Connection` names. For exec, attach and
/// port-forward (`upgrade`) the request then carries exactly
/// `Connection: Upgrade` and the client's `Upgrade`.
///
/// The client's own `Connection` never travels: a proxy between portcullis
/// and the cluster would otherwise remove the headers it names, and
/// `Connection: Upgrade, Impersonate-User` would strip portcullis's
/// impersonation and run the request as portcullis itself. Call this before
/// portcullis adds any header of its own, so that a named header can never
/// remove one of those.
pub fn strip_request(headers: &mut HeaderMap, upgrade: bool) {
    let protocol = upgrade.then(|| headers.get(UPGRADE).cloned()).flatten();
    remove_connection_listed(headers, false);
    let mut subprotocols = false;
    let doomed: Vec<HeaderName> = headers
        .keys()
        .filter(|name| {
            let n = name.as_str();
            subprotocols |= n == "sec-websocket-protocol";
            never_travels(n)
        })
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(name);
    }
    if subprotocols {
        without_token_subprotocol(headers);
    }
    if let Some(protocol) = protocol {
        headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(UPGRADE, protocol);
    }
}

/// Must a request header named `n` not travel upstream: a hop-by-hop
/// header ([`HOP_BY_HOP`]), a credential, a claimed identity, a forwarding
/// header (with its `_` spellings too: a proxy on the way may read them as
/// `-`), the client's `Audit-ID` or `Host`? Looked at by its first byte
/// first: every header of every request passes here.
fn never_travels(n: &str) -> bool {
    // Rare: only then the copy that reads every `_` as `-`.
    if n.contains('_') {
        return never_travels_dashed(&n.replace('_', "-"));
    }
    never_travels_dashed(n)
}

fn never_travels_dashed(n: &str) -> bool {
    match n.as_bytes().first() {
        Some(b'a') => n == "authorization" || n == "audit-id",
        Some(b'c') => n == "connection" || n == "cookie",
        Some(b'h') => n == "host",
        Some(b'i') => claims_impersonation(n),
        Some(b'k') => n == "keep-alive",
        Some(b'p') => n == "proxy-connection" || n == "proxy-authenticate" || n == "proxy-authorization",
        Some(b't') => n == "te" || n == "trailer" || n == "transfer-encoding",
        Some(b'u') => n == "upgrade",
        Some(b'x') => n == "x-real-ip" || n.starts_with("x-remote-") || n.starts_with("x-forwarded-"),
        _ => false,
    }
}

/// `Sec-WebSocket-Protocol` without the subprotocol that carries a bearer
/// token ([`TOKEN_SUBPROTOCOL`]); gone if nothing else is left.
fn without_token_subprotocol(headers: &mut HeaderMap) {
    let name = http::header::SEC_WEBSOCKET_PROTOCOL;
    let mut token = false;
    let kept: Vec<String> = headers
        .get_all(&name)
        .iter()
        // Not text: kept out whole, as the cluster could not read it either.
        .flat_map(|value| value.to_str().unwrap_or(TOKEN_SUBPROTOCOL).split(','))
        .map(str::trim)
        .filter(|offered| {
            let carries = offered.starts_with(TOKEN_SUBPROTOCOL);
            token |= carries;
            !carries && !offered.is_empty()
        })
        .map(str::to_string)
        .collect();
    if !token {
        return;
    }
    headers.remove(&name);
    if let Ok(value) = HeaderValue::from_str(&kept.join(", ")) {
        if !kept.is_empty() {
            headers.insert(name, value);
        }
    }
}

/// Remove hop-by-hop headers from a response (keeping the upgrade pair on a
/// 101).
pub fn strip_response(headers: &mut HeaderMap, keep_upgrade: bool) {
    // An HTTP/2 answer carries none: one pass over its few names is
    // cheaper than looking each hop-by-hop name up (and `Connection`
    // names nothing when there is no `Connection`).
    if !headers.keys().any(|name| HOP_BY_HOP.contains(&name.as_str())) {
        return;
    }
    remove_connection_listed(headers, keep_upgrade);
    for name in HOP_BY_HOP {
        if keep_upgrade && matches!(*name, "connection" | "upgrade") {
            continue;
        }
        headers.remove(*name);
    }
}

/// Headers named in `Connection` are hop-by-hop too.
fn remove_connection_listed(headers: &mut HeaderMap, keep_upgrade: bool) {
    let listed: Vec<String> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .filter(|s| !keep_upgrade || s != "upgrade")
        .collect();
    for name in listed {
        headers.remove(name.as_str());
    }
}

/// The client's address: the peer, or — only when the peer is a trusted
/// proxy — the right-most `X-Forwarded-For` entry that is not itself
/// trusted.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let hops: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    hops.iter().rev().find(|ip| !is_trusted(ip)).copied().unwrap_or(peer)
}

/// `ip` as `to_string` writes it. An IPv4 address (the usual peer) is
/// written digit by digit: `Display` formats each octet through
/// `core::fmt`, about 1.3k instructions on every request's audit row.
pub fn address_text(ip: std::net::IpAddr) -> String {
    let std::net::IpAddr::V4(v4) = ip else {
        return ip.to_string();
    };
    let mut text = String::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            text.push('.');
        }
        if octet >= 100 {
            text.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            text.push(char::from(b'0' + octet / 10 % 10));
        }
        text.push(char::from(b'0' + octet % 10));
    }
    text
}

/// Percent-encode an extra key for `Impersonate-Extra-<key>`: the API server
/// lower-cases the suffix, then percent-decodes it, so every byte outside the
/// RFC 7230 token set, and `%` itself, is encoded. Keys must be lower-case to
/// round-trip.
pub fn encode_extra_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        let token = byte.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&byte);
        if token {
            out.push(byte.to_ascii_lowercase() as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A user, group or extra that cannot be sent as a header value unaltered.
#[derive(Debug, thiserror::Error)]
#[error("identity value {0:?} cannot be sent in a header")]
pub struct UnsendableIdentity(pub String);

/// Append the impersonation headers for `user`, `groups` and `extras`.
/// Values are sent verbatim (never percent-encoded); a value that is not a
/// valid header value is an error rather than being altered.
pub fn impersonate(
    headers: &mut HeaderMap,
    user: String,
    groups: &[String],
    extras: &[(&str, &str)],
) -> Result<(), UnsendableIdentity> {
    headers.insert(IMPERSONATE_USER, owned_identity_value(user)?);
    for group in groups {
        headers.append(IMPERSONATE_GROUP, identity_value(group)?);
    }
    for (key, extra) in extras {
        headers.append(extra_name(key)?, identity_value(extra)?);
    }
    Ok(())
}

/// `value` as a header value, verbatim, or why it cannot be one.
fn identity_value(value: &str) -> Result<HeaderValue, UnsendableIdentity> {
    HeaderValue::from_str(value).map_err(|_| UnsendableIdentity(value.to_string()))
}

/// The same for a value made for this request: its bytes become the
/// header value's, not copied into another allocation.
fn owned_identity_value(value: String) -> Result<HeaderValue, UnsendableIdentity> {
    if !value.bytes().all(header_value_byte) {
        return Err(UnsendableIdentity(value));
    }
    HeaderValue::from_maybe_shared(bytes::Bytes::from(value)).map_err(|e| UnsendableIdentity(e.to_string()))
}

/// A byte `HeaderValue` accepts: tab, visible ASCII and space, and bytes
/// from 0x80 (checked first, so that a refused value can still be named).
fn header_value_byte(byte: u8) -> bool {
    byte == b'\t' || (byte >= 0x20 && byte != 0x7f)
}

/// `Impersonate-Extra-<key>`, encoded. The keys portcullis sends on every
/// request are named once; any other is encoded and parsed.
fn extra_name(key: &str) -> Result<HeaderName, UnsendableIdentity> {
    const CREDENTIAL: HeaderName = HeaderName::from_static("impersonate-extra-portcullis.dev%2fcredential-id");
    const AGENT: HeaderName = HeaderName::from_static("impersonate-extra-portcullis.dev%2fagent-session");
    match key {
        super::forward::CREDENTIAL_EXTRA => Ok(CREDENTIAL),
        super::forward::AGENT_EXTRA => Ok(AGENT),
        _ => {
            let name = format!("impersonate-extra-{}", encode_extra_key(key));
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| UnsendableIdentity(key.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_written_as_to_string_writes_it() {
        for text in [
            "127.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "10.200.9.99",
            "::1",
            "fe80::1:2",
            "::ffff:1.2.3.4",
        ] {
            let ip: std::net::IpAddr = text.parse().unwrap();
            assert_eq!(address_text(ip), ip.to_string());
        }
    }

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn impersonation_headers_are_found_in_any_case() {
        for name in [
            "Impersonate-User",
            "impersonate-uid",
            "IMPERSONATE-EXTRA-x",
            "Impersonate-Group",
            "Impersonate_User",
            "IMPERSONATE_GROUP",
        ] {
            assert!(has_impersonation(&map(&[(name, "x")])).is_some(), "{name}");
        }
        assert!(has_impersonation(&map(&[("accept", "x")])).is_none());
    }

    #[test]
    fn identity_and_forwarding_headers_never_travel() {
        let mut h = map(&[
            ("Authorization", "Bearer pcl_x"),
            ("X-Remote-User", "admin"),
            ("X-Remote-Group", "system:masters"),
            ("X-Forwarded-For", "1.2.3.4"),
            ("X-Forwarded-Proto", "https"),
            ("X-Real-Ip", "1.2.3.4"),
            ("X_Remote_User", "admin"),
            ("x_forwarded_for", "1.2.3.4"),
            ("X_Real_IP", "1.2.3.4"),
            ("X-Remote_Group", "system:masters"),
            ("Proxy_Authorization", "Basic x"),
            ("Cookie", "a=b"),
            ("Audit-ID", "mine"),
            ("Connection", "keep-alive, X-Secret"),
            ("X-Secret", "1"),
            ("Accept", "application/json"),
            ("User-Agent", "kubectl/v1.37.1"),
        ]);
        strip_request(&mut h, false);
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["accept", "user-agent"]);
    }

    #[test]
    fn every_hop_by_hop_header_is_one_that_never_travels() {
        for name in HOP_BY_HOP {
            assert!(never_travels(name), "{name}");
        }
        for name in ["accept", "content-type", "user-agent", "x-request-id", "if-match", ""] {
            assert!(!never_travels(name), "{name}");
        }
    }

    #[test]
    fn upgrade_headers_survive_only_for_upgrades() {
        let mut h = map(&[
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Protocol", "v5.channel.k8s.io"),
        ]);
        strip_request(&mut h, true);
        assert!(h.contains_key("upgrade") && h.contains_key("connection") && h.contains_key("sec-websocket-protocol"));
        strip_request(&mut h, false);
        assert!(!h.contains_key("upgrade") && !h.contains_key("connection"));
    }

    #[test]
    fn a_bearer_token_offered_as_a_websocket_subprotocol_never_travels() {
        let token = "base64url.bearer.authorization.k8s.io.cGNsX3NlY3JldA";
        let mut h = map(&[
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Protocol", &format!("v5.channel.k8s.io, {token}")),
            ("Sec-WebSocket-Protocol", "v4.channel.k8s.io"),
        ]);
        strip_request(&mut h, true);
        let offered: Vec<_> = h.get_all("sec-websocket-protocol").iter().collect();
        assert_eq!(offered, ["v5.channel.k8s.io, v4.channel.k8s.io"]);
        let mut h = map(&[("Sec-WebSocket-Protocol", token)]);
        strip_request(&mut h, true);
        assert!(!h.contains_key("sec-websocket-protocol"));
        let mut h = map(&[("Sec-WebSocket-Protocol", "v5.channel.k8s.io")]);
        strip_request(&mut h, true);
        assert_eq!(h["sec-websocket-protocol"], "v5.channel.k8s.io", "left as it came");
    }

    #[test]
    fn an_upgrade_carries_exactly_connection_upgrade_and_drops_what_the_client_named() {
        let mut h = map(&[
            ("Connection", "Upgrade, Impersonate-User"),
            ("CONNECTION", "keep-alive,X-Hop ,  sec-websocket-extensions"),
            ("Upgrade", "websocket"),
            ("X-Hop", "1"),
            ("Sec-WebSocket-Extensions", "permessage-deflate"),
            ("Sec-WebSocket-Protocol", "v5.channel.k8s.io"),
        ]);
        strip_request(&mut h, true);
        let connection: Vec<_> = h.get_all("connection").iter().collect();
        assert_eq!(connection, ["Upgrade"]);
        assert_eq!(h["upgrade"], "websocket");
        assert!(!h.contains_key("x-hop") && !h.contains_key("sec-websocket-extensions"));
        assert!(h.contains_key("sec-websocket-protocol"));
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_peers() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let h = map(&[("X-Forwarded-For", "6.6.6.6, 203.0.113.9, 10.0.0.7")]);
        let untrusted_peer: IpAddr = "198.51.100.1".parse().unwrap();
        assert_eq!(client_address(untrusted_peer, &h, &trusted), untrusted_peer);
        let lb: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(
            client_address(lb, &h, &trusted),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
        assert_eq!(client_address(lb, &HeaderMap::new(), &trusted), lb);
    }

    #[test]
    fn extra_keys_are_encoded_and_values_are_not() {
        assert_eq!(
            encode_extra_key("portcullis.dev/credential-id"),
            "portcullis.dev%2Fcredential-id"
        );
        assert_eq!(encode_extra_key("a%b c"), "a%25b%20c");
        let mut h = HeaderMap::new();
        impersonate(
            &mut h,
            "user:ana".into(),
            &["Domain Admins".into(), "portcullis:grant:1".into()],
            &[("portcullis.dev/credential-id", "x%41 y")],
        )
        .unwrap();
        assert_eq!(h["impersonate-user"], "user:ana");
        let groups: Vec<_> = h.get_all("impersonate-group").iter().collect();
        assert_eq!(groups, ["Domain Admins", "portcullis:grant:1"]);
        assert_eq!(h["impersonate-extra-portcullis.dev%2fcredential-id"], "x%41 y");
    }

    #[test]
    fn a_user_is_refused_by_name_where_http_refuses_the_header_value() {
        for byte in 0..=255u8 {
            let http = HeaderValue::from_bytes(&[b'a', byte]).is_ok();
            assert_eq!(header_value_byte(byte), http, "{byte:#x}");
        }
        let mut h = HeaderMap::new();
        let refused = impersonate(&mut h, "user:ana\nImpersonate-Group: system:masters".into(), &[], &[]).unwrap_err();
        assert_eq!(refused.0, "user:ana\nImpersonate-Group: system:masters");
        assert!(h.is_empty());
        impersonate(&mut h, "user:zoë\tx".into(), &[], &[]).unwrap();
        assert_eq!(h["impersonate-user"].as_bytes(), "user:zoë\tx".as_bytes());
    }

    #[test]
    fn the_extra_names_named_once_are_the_ones_encoding_gives() {
        for key in [
            crate::gateway::forward::CREDENTIAL_EXTRA,
            crate::gateway::forward::AGENT_EXTRA,
            "example.org/other key",
        ] {
            let encoded = format!("impersonate-extra-{}", encode_extra_key(key));
            let parsed = HeaderName::from_bytes(encoded.as_bytes()).unwrap();
            assert_eq!(extra_name(key).unwrap(), parsed, "{key}");
        }
    }

    #[test]
    fn a_response_without_hop_by_hop_headers_keeps_every_header_and_one_with_them_loses_them() {
        let mut h = map(&[("Content-Type", "application/json"), ("Audit-ID", "a")]);
        strip_response(&mut h, false);
        assert_eq!(h.len(), 2);
        let mut h = map(&[
            ("Content-Type", "application/json"),
            ("Connection", "close, X-Hop"),
            ("X-Hop", "1"),
            ("Keep-Alive", "timeout=5"),
        ]);
        strip_response(&mut h, false);
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["content-type"]);
    }
}
