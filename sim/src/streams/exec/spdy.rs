//! exec and attach over SPDY, as the kubelet serves them.
//!
//! The client opens an `error` stream, then `stdin`, `stdout`, `stderr`
//! and (with a TTY) `resize` as requested; each is replied to at once. When
//! all expected streams are there (within 30 s, the kubelet's stream
//! creation timeout) the process runs; its output goes to the stdout/stderr
//! streams, then the exit Status to the error stream, then every stream is
//! half-closed and the connection goes away.

use super::commands::Container;
use super::io::{discard, Output, Stdin, Stdio};
use super::{exit_status, exit_text, run_process, ExecOptions, Reporter};
use crate::streams::spdy::{self, frame::header, Conn, Event};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

/// How long the client has to open its streams.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The remote-command protocol versions served over SPDY, best first.
pub const PROTOCOLS: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

#[derive(Debug, Default)]
struct Streams {
    by_type: HashMap<String, u32>,
    last_id: u32,
}

impl Streams {
    fn id(&self, kind: &str) -> Option<u32> {
        self.by_type.get(kind).copied()
    }

    /// The process's stdio wired to the streams the client opened; output
    /// for a stream it did not open is dropped.
    fn stdio(&self, conn: &Conn, stdin_rx: mpsc::UnboundedReceiver<Bytes>, tty: bool) -> Stdio {
        let output = |stream: Option<u32>| -> Output {
            match stream {
                Some(sid) => {
                    let conn = conn.clone();
                    Arc::new(move |data: Bytes| conn.data(sid, data))
                }
                None => discard(),
            }
        };
        Stdio {
            stdin: if self.id("stdin").is_some() {
                Stdin::Stream(stdin_rx)
            } else {
                Stdin::None
            },
            stdout: output(self.id("stdout")),
            stderr: output(self.id("stderr")),
            tty,
        }
    }
}

fn expected(opts: &ExecOptions, protocol: &str) -> usize {
    let resize = opts.tty
        && matches!(
            protocol,
            "v3.channel.k8s.io" | "v4.channel.k8s.io" | "v5.channel.k8s.io"
        );
    1 + usize::from(opts.stdin) + usize::from(opts.stdout) + usize::from(opts.stderr) + usize::from(resize)
}

/// Serve one exec/attach session on an upgraded connection.
pub async fn serve<IO>(io: IO, protocol: String, container: Container, opts: ExecOptions)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (conn, mut events) = spdy::serve(io);
    let (stdin_tx, stdin_rx) = mpsc::unbounded_channel::<Bytes>();
    let mut stdin_tx = Some(stdin_tx);
    let want = expected(&opts, &protocol);
    let Some(streams) = open_streams(&conn, &mut events, want).await else {
        return;
    };
    let stdio = streams.stdio(&conn, stdin_rx, opts.tty);
    let finish = Finish {
        conn: conn.clone(),
        error: streams.id("error"),
        ours: streams.by_type.values().copied().collect(),
        last_id: streams.last_id,
        json: matches!(protocol.as_str(), "v4.channel.k8s.io" | "v5.channel.k8s.io"),
    };
    let process = tokio::spawn(async move {
        let code = run_process(&container, &opts, stdio).await;
        finish.done(code, &opts.command);
    });
    feed_stdin(&conn, &mut events, streams.id("stdin"), &mut stdin_tx).await;
    // The client went away (or the process finished and closed): stop it.
    process.abort();
}

/// Reply to each stream the client opens until the `want` expected ones are
/// there; `None`, with the connection closed, if the client goes away or
/// takes longer than the kubelet would wait.
async fn open_streams(conn: &Conn, events: &mut mpsc::UnboundedReceiver<Event>, want: usize) -> Option<Streams> {
    let mut streams = Streams::default();
    let wait = tokio::time::timeout(STREAM_CREATION_TIMEOUT, async {
        while streams.by_type.len() < want {
            match events.recv().await {
                Some(Event::Open { id, headers }) => {
                    conn.reply(id);
                    streams.last_id = streams.last_id.max(id);
                    let kind = header(&headers, "streamtype").unwrap_or("").to_string();
                    if matches!(kind.as_str(), "error" | "stdin" | "stdout" | "stderr" | "resize") {
                        streams.by_type.insert(kind, id);
                    }
                }
                Some(Event::Closed) | None => return false,
                Some(_) => {}
            }
        }
        true
    });
    if !matches!(wait.await, Ok(true)) {
        conn.close(streams.last_id);
        return None;
    }
    Some(streams)
}

/// Pass the client's stdin stream to the process until the connection
/// closes; a stream the client opens late is still replied to.
async fn feed_stdin(
    conn: &Conn,
    events: &mut mpsc::UnboundedReceiver<Event>,
    stdin_id: Option<u32>,
    stdin_tx: &mut Option<mpsc::UnboundedSender<Bytes>>,
) {
    while let Some(event) = events.recv().await {
        match event {
            Event::Data { id, data } if Some(id) == stdin_id => {
                if let Some(tx) = stdin_tx {
                    let _ = tx.send(data);
                }
            }
            Event::Fin { id } | Event::Reset { id } if Some(id) == stdin_id => *stdin_tx = None,
            Event::Open { id, .. } => conn.reply(id),
            Event::Closed => break,
            _ => {}
        }
    }
}

/// What to send when the process ends.
struct Finish {
    conn: Conn,
    error: Option<u32>,
    ours: Vec<u32>,
    last_id: u32,
    json: bool,
}

impl Finish {
    fn done(self, code: i32, argv: &[String]) {
        if let Some(error) = self.error {
            let status = if self.json {
                exit_status(code, argv, Reporter::Kubelet)
            } else {
                exit_text(code, argv)
            };
            self.conn.data(error, status);
        }
        for id in self.ours {
            self.conn.fin(id);
        }
        self.conn.close(self.last_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_waits_for_the_streams_the_options_ask_for() {
        let opts = ExecOptions {
            stdin: true,
            stdout: true,
            stderr: true,
            ..Default::default()
        };
        assert_eq!(expected(&opts, "v4.channel.k8s.io"), 4);
        let tty = ExecOptions {
            stdin: true,
            stdout: true,
            tty: true,
            ..Default::default()
        };
        assert_eq!(expected(&tty, "v4.channel.k8s.io"), 4, "error, stdin, stdout, resize");
        assert_eq!(expected(&tty, "v2.channel.k8s.io"), 3, "v2 has no resize stream");
    }
}
