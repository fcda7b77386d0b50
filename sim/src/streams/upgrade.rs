//! Recognizing and answering upgrade requests: WebSocket (RFC 6455) and
//! SPDY/3.1 with `X-Stream-Protocol-Version` negotiation, as kube-apiserver
//! and the kubelet do.

use crate::body::{self, Body};
use crate::status::Status;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;

/// The upgraded connection type.
pub type Upgraded = TokioIo<hyper::upgrade::Upgraded>;

/// A server-side WebSocket over an upgraded connection.
pub type WebSocket = WebSocketStream<Upgraded>;

/// Does `Connection` list `upgrade` (kube's `httpstream.IsUpgradeRequest`)?
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("upgrade"))
}

/// A WebSocket upgrade (`Upgrade: websocket` on an upgrade request).
pub fn is_websocket(headers: &HeaderMap) -> bool {
    is_upgrade(headers)
        && headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// A SPDY/3.1 upgrade.
pub fn is_spdy(headers: &HeaderMap) -> bool {
    is_upgrade(headers)
        && headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("SPDY/3.1"))
}

/// Comma-separated values of every `name` header, trimmed, in order.
pub fn header_list(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The first protocol the client offers that the server supports (kube's
/// `negotiateProtocol`: client order wins).
pub fn negotiate(offered: &[String], supported: &[&str]) -> Option<String> {
    offered.iter().find(|p| supported.contains(&p.as_str())).cloned()
}

/// The 400 kube-apiserver answers a stream request without an upgrade.
pub fn upgrade_required() -> Status {
    Status::bad_request("Upgrade request required")
}

/// The 101 answer to a WebSocket upgrade choosing `protocol`.
pub fn websocket_accept(headers: &HeaderMap, protocol: &str) -> Result<Response<Body>, Status> {
    let key = headers.get(header::SEC_WEBSOCKET_KEY).ok_or_else(|| {
        Status::bad_request("websocket: not a websocket handshake: 'Sec-WebSocket-Key' header is missing or blank")
    })?;
    let accept = derive_accept_key(key.as_bytes());
    let mut response = Response::new(body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    if !protocol.is_empty() {
        if let Ok(v) = HeaderValue::from_str(protocol) {
            h.insert(header::SEC_WEBSOCKET_PROTOCOL, v);
        }
    }
    Ok(response)
}

/// The 101 answer to a SPDY upgrade choosing `protocol`.
pub fn spdy_accept(protocol: &str) -> Response<Body> {
    let mut response = Response::new(body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    if let Ok(v) = HeaderValue::from_str(protocol) {
        h.insert("X-Stream-Protocol-Version", v);
    }
    response
}

/// SPDY's `httpstream.Handshake`: the negotiated protocol, or the error
/// answer (400 without the header, 403 with none in common).
pub fn spdy_negotiate(headers: &HeaderMap, supported: &[&str]) -> Result<String, Status> {
    let offered = header_list(headers, "x-stream-protocol-version");
    if offered.is_empty() {
        return Err(Status::bad_request(
            "unable to upgrade: X-Stream-Protocol-Version is required",
        ));
    }
    negotiate(&offered, supported).ok_or_else(|| {
        Status::failure(
            403,
            "Forbidden",
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports [{}], server accepts [{}]",
                offered.join(" "),
                supported.join(" ")
            ),
        )
    })
}

/// Wait for hyper to hand over the connection, then run `session` on it.
pub fn on_upgrade<F, Fut>(on: hyper::upgrade::OnUpgrade, session: F)
where
    F: FnOnce(Upgraded) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        match on.await {
            Ok(upgraded) => session(TokioIo::new(upgraded)).await,
            Err(e) => tracing::debug!(error = %e, "stream upgrade failed"),
        }
    });
}

/// Wrap an upgraded connection as the server end of a WebSocket.
pub async fn websocket(io: Upgraded) -> WebSocket {
    WebSocketStream::from_raw_socket(io, Role::Server, None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn upgrades_are_recognized_by_connection_and_upgrade_headers() {
        assert!(is_websocket(&headers(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "WebSocket")
        ])));
        assert!(is_spdy(&headers(&[("connection", "Upgrade"), ("upgrade", "SPDY/3.1")])));
        assert!(
            !is_spdy(&headers(&[("upgrade", "SPDY/3.1")])),
            "Connection: Upgrade is required"
        );
    }

    #[test]
    fn negotiation_follows_the_clients_order() {
        let h = headers(&[
            ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ("x-stream-protocol-version", "v5.channel.k8s.io, v3.channel.k8s.io"),
        ]);
        assert_eq!(
            spdy_negotiate(&h, &["v5.channel.k8s.io", "v4.channel.k8s.io"]).unwrap(),
            "v4.channel.k8s.io"
        );
        assert_eq!(spdy_negotiate(&headers(&[]), &["x"]).unwrap_err().code, 400);
        assert_eq!(spdy_negotiate(&h, &["portforward.k8s.io"]).unwrap_err().code, 403);
    }

    #[test]
    fn websocket_accept_derives_the_rfc6455_key() {
        let h = headers(&[("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")]);
        let response = websocket_accept(&h, "v5.channel.k8s.io").unwrap();
        assert_eq!(response.status(), 101);
        assert_eq!(
            response.headers()["sec-websocket-accept"],
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(response.headers()["sec-websocket-protocol"], "v5.channel.k8s.io");
    }
}
