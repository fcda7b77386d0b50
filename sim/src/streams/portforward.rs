//! pods/portforward: every `containerPort` a pod declares answers as an
//! echo server (what a connection writes is read back).
//!
//! Three transports, as kube-apiserver offers them:
//!
//! - SPDY/3.1 (`X-Stream-Protocol-Version: portforward.k8s.io`): per
//!   forwarded connection the client opens an `error` and a `data` stream
//!   carrying `port` and `requestid` headers.
//! - SPDY tunnelled in WebSocket (`SPDY/3.1+portforward.k8s.io`, what
//!   kubectl 1.31+ tries first): the same SPDY bytes carried in binary
//!   WebSocket messages.
//! - The kubelet's WebSocket channel protocol (`v4.channel.k8s.io`, or no
//!   subprotocol) with `?ports=`: channel 2n is port n's data, 2n+1 its
//!   errors, and the server's first message on each is the port as a
//!   little-endian u16.
//!
//! A port no container declares fails like a refused connection: an error
//! message on the error stream, then both streams close.

use super::pod::PodInfo;
use super::spdy::{self, frame::header, Conn, Event};
use super::upgrade::{Upgraded, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

/// The SPDY port-forward protocol.
pub const SPDY_PROTOCOL: &str = "portforward.k8s.io";
/// The WebSocket subprotocol that tunnels SPDY.
pub const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// The kubelet's WebSocket channel protocol for port-forward.
pub const CHANNEL_PROTOCOL: &str = "v4.channel.k8s.io";

/// The message the error stream carries for a port nobody listens on
/// (the kubelet's `portForwardErrResponse`, JSON plus a newline).
fn refused(pod: &PodInfo, port: u16) -> Bytes {
    let message = format!(
        "error forwarding port {port} to pod {}, uid {}: failed to connect to localhost:{port} inside namespace \"{}\": connect: connection refused",
        pod.name, pod.uid, pod.name
    );
    let body = serde_json::json!({"closeConnection": true, "message": message});
    Bytes::from(format!("{body}\n"))
}

#[derive(Debug, Default)]
struct Pair {
    data: Option<u32>,
    error: Option<u32>,
    port: u16,
}

/// The kubelet's stream validation: a `port` > 0 and a known `streamtype`.
fn validate(headers: &spdy::frame::Headers) -> Option<(u16, String)> {
    let port: u16 = header(headers, "port")?.parse().ok().filter(|&p| p > 0)?;
    let kind = header(headers, "streamtype")?;
    matches!(kind, "data" | "error").then(|| (port, kind.to_string()))
}

/// Serve port-forward over SPDY on `io` (a plain upgrade or a tunnel).
pub async fn serve_spdy<IO>(io: IO, pod: PodInfo)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (conn, mut events) = spdy::serve(io);
    let mut forwards = Forwards::default();
    let mut last_id = 0;
    while let Some(event) = events.recv().await {
        match event {
            Event::Open { id, headers } => {
                last_id = last_id.max(id);
                forwards.open(&conn, &pod, id, &headers);
            }
            Event::Data { id, data } if forwards.active.contains_key(&id) => conn.data(id, data),
            Event::Fin { id } | Event::Reset { id } => {
                if let Some((error, _)) = forwards.active.remove(&id) {
                    conn.fin(id);
                    conn.fin(error);
                }
            }
            Event::Closed => break,
            _ => {}
        }
    }
    conn.close(last_id);
}

/// The forwarded connections of one SPDY session.
#[derive(Debug, Default)]
struct Forwards {
    /// Request id -> the streams of a connection opened so far.
    pairs: HashMap<String, Pair>,
    /// data stream id -> (error stream id, request id)
    active: HashMap<u32, (u32, String)>,
}

impl Forwards {
    /// The client opened stream `id`: accept it if valid and, once both
    /// streams of its connection are there, echo the port or refuse it.
    fn open(&mut self, conn: &Conn, pod: &PodInfo, id: u32, headers: &spdy::frame::Headers) {
        let Some((port, kind)) = validate(headers) else {
            conn.refuse(id);
            return;
        };
        conn.reply(id);
        let request = header(headers, "requestid").map_or_else(|| legacy_request_id(id, &kind), str::to_string);
        let pair = self.pairs.entry(request.clone()).or_default();
        pair.port = port;
        if kind == "data" {
            pair.data = Some(id)
        } else {
            pair.error = Some(id)
        }
        if let (Some(data), Some(error)) = (pair.data, pair.error) {
            self.pairs.remove(&request);
            if pod.listens_on(port) {
                self.active.insert(data, (error, request));
            } else {
                conn.data(error, refused(pod, port));
                conn.fin(error);
                conn.fin(data);
            }
        }
    }
}

/// Old clients send no `requestid`: derive it from the stream ids as the
/// kubelet does (error stream id; data stream id minus 2).
fn legacy_request_id(id: u32, kind: &str) -> String {
    if kind == "data" {
        id.saturating_sub(2).to_string()
    } else {
        id.to_string()
    }
}

/// Carry the SPDY bytes of a tunnel in binary WebSocket messages.
pub async fn serve_tunnel(mut ws: WebSocket, pod: PodInfo) {
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    tokio::spawn(serve_spdy(theirs, pod));
    let (mut read, mut write) = tokio::io::split(ours);
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        tokio::select! {
            incoming = ws.next() => match incoming {
                Some(Ok(Message::Binary(data))) => {
                    if write.write_all(&data).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            n = read.read(&mut buf) => match n {
                Ok(0) | Err(_) => {
                    close(&mut ws).await;
                    break;
                }
                Ok(n) => {
                    if ws.send(Message::Binary(Bytes::copy_from_slice(&buf[..n]))).await.is_err() {
                        break;
                    }
                }
            },
        }
    }
    let _ = write.shutdown().await;
}

async fn close(ws: &mut WebSocket) {
    let frame = CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    };
    if ws.send(Message::Close(Some(frame))).await.is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
    }
}

/// The `ports` of a WebSocket port-forward request (`port` also accepted).
pub fn query_ports(query: Option<&str>) -> Result<Vec<u16>, String> {
    let mut ports = Vec::new();
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if key == "ports" || key == "port" {
            for part in value.split(',') {
                match part.trim().parse::<u16>() {
                    Ok(p) if p > 0 => ports.push(p),
                    _ => return Err(format!("unable to parse \"{part}\" as a port")),
                }
            }
        }
    }
    if ports.is_empty() {
        return Err("query parameter \"port\" is required".into());
    }
    Ok(ports)
}

/// Serve the kubelet's channel protocol: echo every data channel whose
/// port is declared; report the others on their error channel.
pub async fn serve_channels(mut ws: WebSocket, pod: PodInfo, ports: Vec<u16>) {
    let mut opening = Vec::new();
    for (i, &port) in ports.iter().enumerate() {
        let (data, error) = ((2 * i) as u8, (2 * i + 1) as u8);
        let le = port.to_le_bytes();
        opening.push(vec![data, le[0], le[1]]);
        opening.push(vec![error, le[0], le[1]]);
        if !pod.listens_on(port) {
            let mut message = vec![error];
            message.extend_from_slice(&refused(&pod, port));
            opening.push(message);
        }
    }
    for message in opening {
        if ws.send(Message::Binary(message.into())).await.is_err() {
            return;
        }
    }
    while let Some(Ok(message)) = ws.next().await {
        let Message::Binary(data) = message else {
            if matches!(message, Message::Close(_)) {
                break;
            }
            continue;
        };
        let Some(&channel) = data.first() else { continue };
        let listened = ports.get(usize::from(channel / 2)).is_some_and(|&p| pod.listens_on(p));
        if channel % 2 == 0 && listened && data.len() > 1 && ws.send(Message::Binary(data)).await.is_err() {
            break;
        }
    }
}

/// Run the transport the upgrade negotiated.
pub async fn run(io: Upgraded, pod: PodInfo, transport: Transport) {
    match transport {
        Transport::Spdy => serve_spdy(io, pod).await,
        Transport::Tunnel => serve_tunnel(super::upgrade::websocket(io).await, pod).await,
        Transport::Channels(ports) => serve_channels(super::upgrade::websocket(io).await, pod, ports).await,
    }
}

/// Which port-forward transport an upgrade chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Plain SPDY.
    Spdy,
    /// SPDY in WebSocket.
    Tunnel,
    /// The channel protocol, with its ports.
    Channels(Vec<u16>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_the_query() {
        assert_eq!(query_ports(Some("ports=80&ports=8080")).unwrap(), vec![80, 8080]);
        assert_eq!(query_ports(Some("port=81")).unwrap(), vec![81]);
        assert_eq!(query_ports(None).unwrap_err(), "query parameter \"port\" is required");
        assert!(query_ports(Some("ports=0")).is_err());
    }

    #[test]
    fn streams_need_a_port_and_a_known_type() {
        let h = |pairs: &[(&str, &str)]| -> spdy::frame::Headers {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
                .collect()
        };
        assert_eq!(
            validate(&h(&[("port", "80"), ("streamtype", "data")])),
            Some((80, "data".into()))
        );
        assert_eq!(validate(&h(&[("port", "0"), ("streamtype", "data")])), None);
        assert_eq!(validate(&h(&[("port", "80"), ("streamtype", "stdin")])), None);
        assert_eq!(legacy_request_id(5, "data"), "3");
    }
}
