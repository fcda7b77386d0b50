//! Log lines, and the request each is about.
//!
//! Every log line written while a request is handled carries its audit id,
//! as `request{audit_id=…}:` before the line's spans, the way a tracing span
//! named `request` shows in tracing's default format. It is not a span:
//! a span per request cost the proxy 2% of a small GET's instructions
//! (made, its id formatted into a string, entered and left at each poll,
//! closed; benches/RESULTS.md), for lines that are rarely written. Here the
//! request's audit id is kept in a thread-local while its future is polled
//! or dropped ([`in_request`]), and formatted only when a line is written
//! ([`Lines`]). Unlike a span's, the prefix does not depend on the log
//! filter: a line about a request names it whatever the filter lets
//! through. Span-based filters (`PORTCULLIS_LOG='[request]=debug'`)
//! therefore do not select the raw API's requests; filter by target.
//!
//! The MCP door is the exception ([`in_request_span`]): rmcp spawns its
//! serve loop and tool handlers inside the current span, where a
//! thread-local does not follow, so there the request is a real span.

use pin_project_lite::pin_project;
use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tracing::instrument::Instrumented;
use tracing::{Event, Instrument, Level, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

thread_local! {
    /// The audit id of the request whose future this thread is polling.
    static REQUEST: Cell<Option<uuid::Uuid>> = const { Cell::new(None) };
}

/// The audit id of the request being handled on this thread, if any.
fn current_request() -> Option<uuid::Uuid> {
    REQUEST.get()
}

/// `future`, handled as the request `audit_id`: the lines it logs say so.
pub fn in_request<F: Future>(audit_id: uuid::Uuid, future: F) -> InRequest<F> {
    InRequest {
        inner: Some(future),
        audit_id: Some(audit_id),
    }
}

/// `future` (to be spawned) as part of the request being handled now, and
/// inside the current span, as tracing's `in_current_span` would.
pub fn in_current_request<F: Future>(future: F) -> InRequest<Instrumented<F>> {
    InRequest {
        inner: Some(future.in_current_span()),
        audit_id: current_request(),
    }
}

/// `future`, handled as the request `audit_id` inside a `request` span
/// instead of the thread-local, for a library that spawns its own tasks
/// in the current span (rmcp): the lines those tasks log name the request
/// too. Where the log filter leaves the span out, the thread-local names
/// it, as for any request.
pub fn in_request_span<F: Future>(audit_id: uuid::Uuid, future: F) -> InRequest<Instrumented<F>> {
    let span = tracing::info_span!("request", %audit_id);
    let audit_id = span.is_disabled().then_some(audit_id);
    InRequest {
        inner: Some(future.instrument(span)),
        audit_id,
    }
}

pin_project! {
    /// A future polled, and dropped, as part of a request ([`in_request`]).
    pub struct InRequest<F> {
        // `None` only while it is dropped, so that what its drop logs is
        // in the request too (as tracing's `Instrumented` does).
        #[pin]
        inner: Option<F>,
        audit_id: Option<uuid::Uuid>,
    }

    impl<F> PinnedDrop for InRequest<F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            let _entered = Entered::new(*this.audit_id);
            this.inner.set(None);
        }
    }
}

impl<F: Future> Future for InRequest<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = Entered::new(*this.audit_id);
        match this.inner.as_pin_mut() {
            Some(inner) => inner.poll(cx),
            None => unreachable!("the future is only taken when it is dropped"),
        }
    }
}

/// While it lives, this thread handles the request it was made with; then
/// whichever it handled before (also when the poll panics).
struct Entered(Option<uuid::Uuid>);

impl Entered {
    fn new(audit_id: Option<uuid::Uuid>) -> Entered {
        Entered(REQUEST.replace(audit_id))
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        REQUEST.set(self.0);
    }
}

/// tracing's default line format, with the request the line is about:
/// `<time> <LEVEL> request{audit_id=…}:<spans>: <target>: <fields>`, byte
/// for byte what an enabled `request` span with an `audit_id` field, the
/// root of the line's spans, gave, colours included.
#[derive(Debug)]
pub struct Lines<T = SystemTime> {
    timer: T,
    /// Spans, target and fields, as tracing writes them.
    rest: Format<Full, ()>,
}

impl Default for Lines {
    fn default() -> Self {
        Lines::with_timer(SystemTime)
    }
}

impl<T> Lines<T> {
    /// Lines whose time `timer` writes.
    pub fn with_timer(timer: T) -> Self {
        Lines {
            timer,
            rest: Format::default().without_time().with_level(false),
        }
    }
}

// The escapes tracing's default format writes (through `nu-ansi-term`).
const DIMMED: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const ITALIC: &str = "\x1b[3m";
const RESET: &str = "\x1b[0m";

impl<S, N, T> FormatEvent<S, N> for Lines<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let ansi = writer.has_ansi_escapes();
        if ansi {
            writer.write_str(DIMMED)?;
        }
        if self.timer.format_time(&mut writer).is_err() {
            writer.write_str("<unknown time>")?;
        }
        if ansi {
            writer.write_str(RESET)?;
        }
        writer.write_char(' ')?;
        write_level(&mut writer, event.metadata().level(), ansi)?;
        writer.write_char(' ')?;
        if let Some(audit_id) = current_request() {
            let mut buf = uuid::Uuid::encode_buffer();
            let id = audit_id.hyphenated().encode_lower(&mut buf);
            if ansi {
                write!(
                    writer,
                    "{BOLD}request{RESET}{BOLD}{{{RESET}{ITALIC}audit_id{RESET}{DIMMED}={RESET}{id}{BOLD}}}{RESET}{DIMMED}:{RESET}"
                )?;
            } else {
                write!(writer, "request{{audit_id={id}}}:")?;
            }
            // tracing ends the spans with a space; its own spans follow
            // this one without.
            let spans = ctx
                .event_scope()
                .is_some_and(|scope| scope.from_root().next().is_some());
            if !spans {
                writer.write_char(' ')?;
            }
        }
        self.rest.format_event(ctx, writer, event)
    }
}

/// The level as tracing writes it: five wide, in its colour.
fn write_level(writer: &mut Writer<'_>, level: &Level, ansi: bool) -> fmt::Result {
    let (text, colour) = match *level {
        Level::TRACE => ("TRACE", "\x1b[35m"),
        Level::DEBUG => ("DEBUG", "\x1b[34m"),
        Level::INFO => (" INFO", "\x1b[32m"),
        Level::WARN => (" WARN", "\x1b[33m"),
        Level::ERROR => ("ERROR", "\x1b[31m"),
    };
    if ansi {
        write!(writer, "{colour}{text}{RESET}")
    } else {
        writer.write_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Lines written to memory.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl tracing_subscriber::fmt::MakeWriter<'_> for Sink {
        type Writer = Sink;
        fn make_writer(&self) -> Sink {
            self.clone()
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// A fixed time, so that two runs' lines compare.
    struct At;

    impl FormatTime for At {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            w.write_str("2026-12-06T08:00:00.000001Z")
        }
    }

    /// Events of every level, outside any request, in one, and in one with
    /// a span inside it (as an MCP tool call opens), each logged from a
    /// future polled more than once.
    async fn events(in_request: bool, audit_id: uuid::Uuid) {
        async fn logging(audit_id: uuid::Uuid) {
            tracing::error!(code = 500, "failed");
            tokio::task::yield_now().await;
            tracing::warn!(path = "/api/v1/pods", "refused \"quoted\"");
            let inner = tracing::info_span!("request", audit_id = %audit_id, tool = "get_resource");
            async {
                tracing::info!(n = 1, "inside");
                tokio::task::yield_now().await;
                tracing::debug!("inside again");
            }
            .instrument(inner)
            .await;
            tracing::trace!(elapsed_ms = 3u64, "done");
        }
        if in_request {
            let span = tracing::info_span!("request", %audit_id);
            logging(audit_id).instrument(span).await;
        } else {
            logging(audit_id).await;
        }
    }

    /// What tracing's own format wrote for `events` (the request a span),
    /// and what [`Lines`] writes (the request entered with [`in_request`]).
    fn both(ansi: bool) -> (String, String) {
        let audit_id = uuid::Uuid::now_v7();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let theirs = Sink::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::TRACE)
            .with_ansi(ansi)
            .with_timer(At)
            .with_writer(theirs.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            runtime.block_on(events(false, audit_id));
            runtime.block_on(events(true, audit_id));
        });
        let ours = logged(Level::TRACE, ansi, |runtime| {
            runtime.block_on(events(false, audit_id));
            runtime.block_on(in_request(audit_id, events(false, audit_id)));
        });
        (theirs.text(), ours)
    }

    #[test]
    fn lines_read_as_tracing_wrote_them_with_a_request_span() {
        let (theirs, ours) = both(false);
        assert_eq!(ours, theirs);
        assert_eq!(theirs.lines().count(), 10);
        assert_eq!(theirs.matches("request{audit_id=").count(), 9, "{theirs}");
    }

    #[test]
    fn coloured_lines_read_as_tracing_wrote_them_too() {
        let (theirs, ours) = both(true);
        assert!(theirs.contains(BOLD) && theirs.contains("\x1b[31mERROR"), "{theirs:?}");
        assert_eq!(ours, theirs);
    }

    #[test]
    fn the_request_is_left_when_its_poll_returns_and_when_it_panics() {
        let audit_id = uuid::Uuid::now_v7();
        let outer = uuid::Uuid::now_v7();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(in_request(outer, async {
            let seen = in_request(audit_id, async {
                tokio::task::yield_now().await;
                current_request()
            })
            .await;
            assert_eq!(seen, Some(audit_id));
            assert_eq!(current_request(), Some(outer));
        }));
        assert_eq!(current_request(), None);
        let panicked =
            std::panic::catch_unwind(|| runtime.block_on(in_request(audit_id, async { panic!("in the request") })));
        assert!(panicked.is_err());
        assert_eq!(current_request(), None);
    }

    /// Lines logged by `run` under a subscriber with `Lines` and `level` as
    /// its most verbose.
    fn logged(level: Level, ansi: bool, run: impl FnOnce(&tokio::runtime::Runtime)) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let sink = Sink::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(ansi)
            .event_format(Lines::with_timer(At))
            .with_writer(sink.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || run(&runtime));
        sink.text()
    }

    #[test]
    fn what_a_request_logs_while_it_is_dropped_unfinished_names_it() {
        struct LogsOnDrop;
        impl Drop for LogsOnDrop {
            fn drop(&mut self) {
                tracing::warn!("dropped unfinished");
            }
        }
        let audit_id = uuid::Uuid::now_v7();
        let text = logged(Level::INFO, false, |runtime| {
            let mut request = Box::pin(in_request(audit_id, async {
                let _held = LogsOnDrop;
                std::future::pending::<()>().await;
            }));
            let polled = runtime.block_on(futures_util::future::poll_immediate(request.as_mut()));
            assert!(polled.is_none());
            drop(request);
            assert_eq!(current_request(), None);
        });
        assert_eq!(
            text,
            format!("2026-12-06T08:00:00.000001Z  WARN request{{audit_id={audit_id}}}: portcullis::logs::tests: dropped unfinished\n")
        );
    }

    #[test]
    fn tasks_spawned_in_a_request_span_name_it_once_and_a_filtered_out_span_leaves_it_to_the_thread_local() {
        let audit_id = uuid::Uuid::now_v7();
        // As the MCP door: inside a request, a span-based one whose
        // library spawns its work in the current span.
        let run = |runtime: &tokio::runtime::Runtime| {
            runtime.block_on(in_request(
                audit_id,
                in_request_span(audit_id, async {
                    tracing::warn!("in the door");
                    let spawned = async { tracing::warn!("spawned") }.instrument(tracing::Span::current());
                    tokio::spawn(spawned).await.unwrap();
                }),
            ))
        };
        let prefix =
            format!("2026-12-06T08:00:00.000001Z  WARN request{{audit_id={audit_id}}}: portcullis::logs::tests: ");
        let text = logged(Level::INFO, false, run);
        assert_eq!(text, format!("{prefix}in the door\n{prefix}spawned\n"));
        // The INFO span filtered out: the door's own line is named by the
        // thread-local; the spawned task, in no span, by nothing (as
        // before, when the span was filtered out).
        let text = logged(Level::WARN, false, run);
        assert_eq!(
            text,
            format!("{prefix}in the door\n2026-12-06T08:00:00.000001Z  WARN portcullis::logs::tests: spawned\n")
        );
    }

    #[test]
    fn a_spawned_part_of_a_request_is_in_it_and_in_its_span() {
        let audit_id = uuid::Uuid::now_v7();
        let text = logged(Level::INFO, false, |runtime| {
            // The spawned part runs after the request's own future has
            // returned (the task is handed out, not awaited inside it).
            let [spawned] = runtime.block_on(in_request(audit_id, async {
                [tracing::info_span!("stream")
                    .in_scope(|| tokio::spawn(in_current_request(async { tracing::info!("from the spawned part") })))]
            }));
            assert_eq!(current_request(), None);
            runtime.block_on(spawned).unwrap();
            // Spawned outside any request: in none.
            runtime
                .block_on(async { tokio::spawn(in_current_request(async { tracing::info!("alone") })).await })
                .unwrap();
        });
        let at = "2026-12-06T08:00:00.000001Z  INFO";
        assert_eq!(
            text,
            format!(
                "{at} request{{audit_id={audit_id}}}:stream: portcullis::logs::tests: from the spawned part\n\
                 {at} portcullis::logs::tests: alone\n"
            )
        );
    }
}
