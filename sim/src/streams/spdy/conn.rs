//! A server-side SPDY/3.1 connection: a reader task that turns frames into
//! [`Event`]s, and a writer task that sends what a [`Conn`] handle queues.
//!
//! The client (moby/spdystream) opens every stream; the server only replies
//! (SYN_REPLY), refuses (RST_STREAM), writes data and half-closes. PINGs
//! from the client are echoed. Received data is acknowledged with
//! WINDOW_UPDATEs, as a SPDY/3.1 peer must; spdystream itself never sends
//! WINDOW_UPDATE, so the server does not hold its own output to the client's
//! window (it would stall any output over 64 KiB).

use super::frame::{self, Frame, HeaderDecoder, HeaderEncoder, Headers, RST_REFUSED_STREAM};
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// Largest data frame written: small enough to interleave streams.
const CHUNK: usize = 32 * 1024;
/// Largest frame accepted from the peer.
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Something the client did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// SYN_STREAM: a new stream with its headers. Reply or refuse it.
    Open {
        /// Stream id.
        id: u32,
        /// Its headers (`streamtype`, `port`, `requestid`, …).
        headers: Headers,
    },
    /// Data on a stream.
    Data {
        /// Stream id.
        id: u32,
        /// Payload.
        data: Bytes,
    },
    /// The client half-closed a stream (FIN).
    Fin {
        /// Stream id.
        id: u32,
    },
    /// The client reset a stream.
    Reset {
        /// Stream id.
        id: u32,
    },
    /// The connection is gone (GOAWAY, EOF or a protocol error).
    Closed,
}

enum Command {
    Frame(Frame),
    Shutdown,
}

/// A handle for writing to the connection; cheap to clone.
#[derive(Debug, Clone)]
pub struct Conn {
    tx: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Frame(frame) => frame.fmt(f),
            Command::Shutdown => f.write_str("Shutdown"),
        }
    }
}

impl Conn {
    fn send(&self, frame: Frame) {
        // A closed writer means the connection is gone; nothing to do.
        let _ = self.tx.send(Command::Frame(frame));
    }

    /// Accept stream `id` (SYN_REPLY).
    pub fn reply(&self, id: u32) {
        self.send(Frame::SynReply {
            stream_id: id,
            fin: false,
            headers: Headers::new(),
        });
    }

    /// Refuse stream `id` (RST_STREAM REFUSED_STREAM).
    pub fn refuse(&self, id: u32) {
        self.send(Frame::RstStream {
            stream_id: id,
            status: RST_REFUSED_STREAM,
        });
    }

    /// Write `data` on stream `id`.
    pub fn data(&self, id: u32, data: Bytes) {
        let mut rest = data;
        while !rest.is_empty() {
            let chunk = rest.split_to(rest.len().min(CHUNK));
            self.send(Frame::Data {
                stream_id: id,
                fin: false,
                data: chunk,
            });
        }
    }

    /// Half-close stream `id` (an empty DATA frame with FLAG_FIN).
    pub fn fin(&self, id: u32) {
        self.send(Frame::Data {
            stream_id: id,
            fin: true,
            data: Bytes::new(),
        });
    }

    /// Send GOAWAY, flush everything queued before, and close.
    pub fn close(&self, last_good: u32) {
        self.send(Frame::GoAway { last_good, status: 0 });
        let _ = self.tx.send(Command::Shutdown);
    }
}

/// Serve a SPDY connection on `io` (already upgraded). Returns the write
/// handle and the client's events; the tasks end when the connection does.
pub fn serve<IO>(io: IO) -> (Conn, mpsc::UnboundedReceiver<Event>)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, writer) = tokio::io::split(io);
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (event_tx, event_rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = oneshot::channel();
    let conn = Conn { tx: cmd_tx };
    tokio::spawn(write_loop(writer, cmd_rx, stop_tx));
    tokio::spawn(read_loop(reader, conn.clone(), event_tx, stop_rx));
    (conn, event_rx)
}

async fn write_loop<W: AsyncWrite>(
    writer: W,
    mut rx: mpsc::UnboundedReceiver<Command>,
    stop_reader: oneshot::Sender<()>,
) {
    tokio::pin!(writer);
    let Ok(mut encoder) = HeaderEncoder::new() else { return };
    'outer: while let Some(cmd) = rx.recv().await {
        let mut batch = vec![cmd];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        for cmd in batch {
            let Command::Frame(frame) = cmd else { break 'outer };
            let Ok(bytes) = frame::encode(&frame, &mut encoder) else {
                continue;
            };
            if writer.write_all(&bytes).await.is_err() {
                break 'outer;
            }
        }
        if writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.flush().await;
    let _ = writer.shutdown().await;
    let _ = stop_reader.send(());
}

async fn read_loop<R: AsyncRead>(
    reader: R,
    conn: Conn,
    events: mpsc::UnboundedSender<Event>,
    stop: oneshot::Receiver<()>,
) {
    tokio::pin!(reader);
    let mut decoder = HeaderDecoder::new();
    tokio::select! {
        _ = stop => {}
        _ = async {
            while let Some(frame) = read_frame(&mut reader, &mut decoder).await {
                if !dispatch(frame, &conn, &events) {
                    break;
                }
            }
        } => {}
    }
    let _ = events.send(Event::Closed);
}

async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R, decoder: &mut HeaderDecoder) -> Option<Frame> {
    let mut prefix = [0u8; 8];
    reader.read_exact(&mut prefix).await.ok()?;
    let (_, _, _, len) = frame::parse_prefix(prefix);
    if len > MAX_FRAME {
        return None;
    }
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).await.ok()?;
    frame::decode(prefix, Bytes::from(payload), decoder).ok()
}

/// Handle one frame; false when the connection is over.
fn dispatch(frame: Frame, conn: &Conn, events: &mpsc::UnboundedSender<Event>) -> bool {
    let event = match frame {
        Frame::SynStream {
            stream_id,
            flags,
            headers,
            ..
        } => {
            let _ = events.send(Event::Open { id: stream_id, headers });
            (flags & frame::FLAG_FIN != 0).then_some(Event::Fin { id: stream_id })
        }
        Frame::Data { stream_id, fin, data } => {
            if !data.is_empty() {
                let delta = data.len() as u32;
                conn.send(Frame::WindowUpdate { stream_id, delta });
                conn.send(Frame::WindowUpdate { stream_id: 0, delta });
                let _ = events.send(Event::Data { id: stream_id, data });
            }
            fin.then_some(Event::Fin { id: stream_id })
        }
        Frame::Headers {
            stream_id, fin: true, ..
        } => Some(Event::Fin { id: stream_id }),
        Frame::RstStream { stream_id, .. } => Some(Event::Reset { id: stream_id }),
        // Odd ids are the client's pings: echo them.
        Frame::Ping(id) if id % 2 == 1 => {
            conn.send(Frame::Ping(id));
            None
        }
        Frame::GoAway { .. } => return false,
        _ => None,
    };
    match event {
        Some(event) => events.send(event).is_ok(),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, enc: &mut HeaderEncoder, frame: Frame) {
        w.write_all(&frame::encode(&frame, enc).unwrap()).await.unwrap();
    }

    #[tokio::test]
    async fn streams_data_pings_and_goaway_become_events_and_replies() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (conn, mut events) = serve(server);
        let (mut cr, mut cw) = tokio::io::split(client);
        let mut enc = HeaderEncoder::new().unwrap();
        let headers = vec![("streamtype".to_string(), vec!["stdout".to_string()])];
        write_frame(
            &mut cw,
            &mut enc,
            Frame::SynStream {
                stream_id: 1,
                associated: 0,
                priority: 0,
                flags: 0,
                headers: headers.clone(),
            },
        )
        .await;
        assert_eq!(events.recv().await, Some(Event::Open { id: 1, headers }));
        conn.reply(1);
        write_frame(
            &mut cw,
            &mut enc,
            Frame::Data {
                stream_id: 1,
                fin: true,
                data: Bytes::from_static(b"in"),
            },
        )
        .await;
        assert_eq!(
            events.recv().await,
            Some(Event::Data {
                id: 1,
                data: Bytes::from_static(b"in")
            })
        );
        assert_eq!(events.recv().await, Some(Event::Fin { id: 1 }));
        let mut dec = HeaderDecoder::new();
        let mut seen = Vec::new();
        // The echo of a ping arrives before anything queued after it.
        write_frame(&mut cw, &mut enc, Frame::Ping(7)).await;
        while !seen.contains(&Frame::Ping(7)) {
            seen.push(read_frame(&mut cr, &mut dec).await.unwrap());
        }
        conn.data(1, Bytes::from_static(b"out"));
        conn.fin(1);
        conn.close(1);
        while let Some(frame) = read_frame(&mut cr, &mut dec).await {
            seen.push(frame);
        }
        assert!(matches!(seen[0], Frame::SynReply { stream_id: 1, .. }));
        assert!(seen.contains(&Frame::WindowUpdate { stream_id: 1, delta: 2 }));
        assert!(seen.contains(&Frame::Data {
            stream_id: 1,
            fin: false,
            data: Bytes::from_static(b"out")
        }));
        assert!(seen.contains(&Frame::Data {
            stream_id: 1,
            fin: true,
            data: Bytes::new()
        }));
        assert!(matches!(seen.last(), Some(Frame::GoAway { .. })));
        assert_eq!(events.recv().await, Some(Event::Closed));
    }
}
