//! exec and attach over WebSocket (the channel protocols).
//!
//! Every binary message starts with its channel: 0 stdin, 1 stdout,
//! 2 stderr, 3 error (the exit Status), 4 resize. `v5.channel.k8s.io` adds
//! channel 255, "close": `[255, 0]` from the client ends stdin. The server
//! first sends an empty message on the lowest channel it writes, runs the
//! process, sends the Status on channel 3 and closes with 1000 (normal).
//!
//! `v4.channel.k8s.io` has no way to close stdin, so a process that reads
//! stdin to its end (`cat`) only ends when the client disconnects.

use super::commands::Container;
use super::io::{discard, Output, Stdin, Stdio};
use super::{exit_status, exit_text, run_process, ExecOptions, Reporter};
use crate::streams::upgrade::WebSocket;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

/// Subprotocols served, best first. v5 is what kube-apiserver itself
/// serves (translating to SPDY); the older ones are the kubelet's.
pub const PROTOCOLS: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const CLOSE: u8 = 255;

enum Out {
    Message(u8, Bytes),
    Finish,
}

fn channel_output(tx: &mpsc::UnboundedSender<Out>, channel: u8, wanted: bool) -> Output {
    if !wanted {
        return discard();
    }
    let tx = tx.clone();
    Arc::new(move |data: Bytes| {
        let _ = tx.send(Out::Message(channel, data));
    })
}

/// Serve one exec/attach session on an accepted WebSocket.
pub async fn serve(mut ws: WebSocket, protocol: String, container: Container, opts: ExecOptions) {
    let v5 = protocol == "v5.channel.k8s.io";
    let json = v5 || protocol == "v4.channel.k8s.io";
    let (out_tx, mut out_rx) = mpsc::unbounded_channel();
    let (stdin_tx, stdin_rx) = mpsc::unbounded_channel::<Bytes>();
    let mut stdin_tx = opts.stdin.then_some(stdin_tx);
    // Tell the client the streams are established.
    let _ = out_tx.send(Out::Message(first_channel(&opts), Bytes::new()));
    let stdio = Stdio {
        stdin: if opts.stdin {
            Stdin::Stream(stdin_rx)
        } else {
            Stdin::None
        },
        stdout: channel_output(&out_tx, STDOUT, opts.stdout),
        stderr: channel_output(&out_tx, STDERR, opts.stderr),
        tty: opts.tty,
    };
    let process = spawn_process(container, opts, stdio, json, out_tx.clone());
    drop(out_tx);
    relay(&mut ws, &mut out_rx, &mut stdin_tx, v5).await;
    process.abort();
}

/// The lowest channel the server writes: its first, empty message goes there.
fn first_channel(opts: &ExecOptions) -> u8 {
    if opts.stdout {
        STDOUT
    } else if opts.stderr {
        STDERR
    } else {
        ERROR
    }
}

/// Run the process, then queue its exit Status (on channel 3) and the close.
fn spawn_process(
    container: Container,
    opts: ExecOptions,
    stdio: Stdio,
    json: bool,
    out_tx: mpsc::UnboundedSender<Out>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let code = run_process(&container, &opts, stdio).await;
        let status = if json {
            exit_status(code, &opts.command, Reporter::Translator)
        } else {
            exit_text(code, &opts.command)
        };
        if json || !status.is_empty() {
            let _ = out_tx.send(Out::Message(ERROR, status));
        }
        let _ = out_tx.send(Out::Finish);
    })
}

/// Carry the client's stdin to the process and the process's output to the
/// client, until either side ends.
async fn relay(
    ws: &mut WebSocket,
    out_rx: &mut mpsc::UnboundedReceiver<Out>,
    stdin_tx: &mut Option<mpsc::UnboundedSender<Bytes>>,
    v5: bool,
) {
    loop {
        tokio::select! {
            incoming = ws.next() => match incoming {
                Some(Ok(Message::Binary(data))) => match data.first() {
                    Some(&STDIN) => {
                        if let Some(tx) = stdin_tx {
                            let _ = tx.send(data.slice(1..));
                        }
                    }
                    Some(&CLOSE) if v5 && data.get(1) == Some(&STDIN) => *stdin_tx = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            out = out_rx.recv() => match out {
                Some(Out::Message(channel, data)) => {
                    let mut message = Vec::with_capacity(data.len() + 1);
                    message.push(channel);
                    message.extend_from_slice(&data);
                    if ws.send(Message::Binary(message.into())).await.is_err() {
                        break;
                    }
                }
                Some(Out::Finish) | None => {
                    close(ws).await;
                    break;
                }
            },
        }
    }
}

/// Close normally and wait (briefly) for the client's close reply.
async fn close(ws: &mut WebSocket) {
    let frame = CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    };
    if ws.send(Message::Close(Some(frame))).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
}
