//! The standard streams a simulated process sees.

use bytes::Bytes;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::mpsc;

/// Where a process's output goes: each call is one chunk, in order.
pub type Output = Arc<dyn Fn(Bytes) + Send + Sync>;

/// An output that drops everything (a stream the client did not ask for).
pub fn discard() -> Output {
    Arc::new(|_| {})
}

/// An output that collects into a buffer (a pipeline stage, `$(…)`).
pub fn capture() -> (Output, Arc<Mutex<Vec<u8>>>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    let out: Output = Arc::new(move |chunk: Bytes| {
        sink.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(&chunk);
    });
    (out, buf)
}

/// Where stdin comes from.
#[derive(Debug)]
pub enum Stdin {
    /// No stdin stream: reads see end of input at once.
    None,
    /// Chunks as the client sends them; the channel closing is end of input.
    Stream(mpsc::UnboundedReceiver<Bytes>),
    /// A fixed buffer (the previous stage of a pipeline).
    Buffer(Option<Bytes>),
}

/// stdin, stdout and stderr of one process.
pub struct Stdio {
    /// Input.
    pub stdin: Stdin,
    /// Output.
    pub stdout: Output,
    /// Error output (the same as `stdout` with a TTY).
    pub stderr: Output,
    /// A terminal: output line feeds become CR LF, as a pty's `onlcr` does.
    pub tty: bool,
}

impl std::fmt::Debug for Stdio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stdio")
            .field("stdin", &self.stdin)
            .field("tty", &self.tty)
            .finish()
    }
}

impl Stdio {
    /// Write to stdout.
    pub fn out(&self, data: impl AsRef<[u8]>) {
        self.emit(&self.stdout, data.as_ref());
    }

    /// Write to stderr.
    pub fn err(&self, data: impl AsRef<[u8]>) {
        self.emit(&self.stderr, data.as_ref());
    }

    fn emit(&self, sink: &Output, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.tty {
            let mut converted = Vec::with_capacity(data.len() + 8);
            for &b in data {
                if b == b'\n' {
                    converted.push(b'\r');
                }
                converted.push(b);
            }
            sink(Bytes::from(converted));
        } else {
            sink(Bytes::copy_from_slice(data));
        }
    }

    /// The next chunk of stdin, `None` at end of input.
    pub async fn read(&mut self) -> Option<Bytes> {
        match &mut self.stdin {
            Stdin::None => None,
            Stdin::Stream(rx) => rx.recv().await,
            Stdin::Buffer(buf) => buf.take(),
        }
    }

    /// All of stdin until end of input.
    pub async fn read_all(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        while let Some(chunk) = self.read().await {
            all.extend_from_slice(&chunk);
        }
        all
    }

    /// One line of stdin (without the newline), `None` at end of input;
    /// `pending` keeps bytes read past the line.
    pub async fn read_line(&mut self, pending: &mut Vec<u8>) -> Option<String> {
        loop {
            if let Some(i) = pending.iter().position(|&b| b == b'\n' || b == b'\r') {
                let line: Vec<u8> = pending.drain(..=i).collect();
                return Some(String::from_utf8_lossy(&line[..i]).into_owned());
            }
            match self.read().await {
                Some(chunk) => pending.extend_from_slice(&chunk),
                None if pending.is_empty() => return None,
                None => {
                    let line = String::from_utf8_lossy(pending).into_owned();
                    pending.clear();
                    return Some(line);
                }
            }
        }
    }
}
