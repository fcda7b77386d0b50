//! watch: a chunked stream of newline-delimited JSON events, each flushed as
//! its own frame.
//!
//! Without a resourceVersion (or with `0`) the stream starts with ADDED for
//! every existing object; from a resourceVersion it replays later events
//! (410 before streaming when they are no longer retained). With
//! `sendInitialEvents=true` and `allowWatchBookmarks=true` the initial
//! ADDEDs end with a BOOKMARK annotated `k8s.io/initial-events-end: "true"`.
//! `allowWatchBookmarks=true` adds a BOOKMARK every [`super::Settings::bookmark_interval`]. The stream ends
//! after `timeoutSeconds` (default: a random 30–60 minutes, as
//! kube-apiserver), or with an ERROR event when the watcher falls too far
//! behind.

use super::read::{in_version, Filter};
use super::respond::{self, Shape};
use super::Ctx;
use crate::body::{self, Body, BoxError};
use crate::registry::ResourceType;
use crate::status::Status;
use crate::store::watch::{too_old, EventType, WatchEvent};
use crate::store::{meta_str, Store, Subscription};
use crate::validate::{self, ErrorType, FieldError};
use bytes::Bytes;
use http::{header, HeaderValue, Response};
use rand::Rng;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

/// How a watch was asked to behave.
struct Plan {
    since: Option<u64>,
    initial_events: bool,
    initial_end_bookmark: bool,
    bookmarks: Option<Duration>,
    timeout: Duration,
}

fn plan(ctx: &Ctx<'_>) -> Result<Plan, Status> {
    let q = &ctx.query;
    let send_initial = q.get("sendInitialEvents").map(|_| q.flag("sendInitialEvents"));
    let bookmarks = q.flag("allowWatchBookmarks");
    if send_initial.is_some() {
        check_initial_events(ctx)?;
    }
    let parsed = resource_version(q.get("resourceVersion").filter(|v| !v.is_empty()))?;
    let (since, initial_events) = match send_initial {
        Some(true) => (None, true),
        Some(false) => (parsed.or(Some(ctx.store.current_revision())), false),
        None => (parsed, parsed.is_none()),
    };
    let timeout = match q.number("timeoutSeconds") {
        Some(seconds) => Duration::from_secs(seconds),
        None => Duration::from_secs(rand::rng().random_range(1800..3600)),
    };
    Ok(Plan {
        since,
        initial_events,
        initial_end_bookmark: send_initial == Some(true) && bookmarks,
        bookmarks: bookmarks.then_some(ctx.settings.bookmark_interval),
        timeout,
    })
}

/// `sendInitialEvents` (a watch-list) needs `resourceVersionMatch=NotOlderThan`.
/// kube-apiserver 1.37 no longer requires `allowWatchBookmarks` with it:
/// without bookmarks the initial events simply carry no end marker.
fn check_initial_events(ctx: &Ctx<'_>) -> Result<(), Status> {
    if ctx.query.get("resourceVersionMatch") == Some("NotOlderThan") {
        return Ok(());
    }
    let error = FieldError::new(
        ErrorType::Forbidden,
        "resourceVersionMatch",
        String::new(),
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
    );
    validate::options("ListOptions", &[error])
}

/// The resourceVersion to watch from; `None` (and `0`) means "from now,
/// after the current objects".
fn resource_version(rv: Option<&str>) -> Result<Option<u64>, Status> {
    match rv {
        None | Some("0") => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
            validate::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[FieldError::new(
                    ErrorType::Invalid,
                    "resourceVersion",
                    validate::quote(v),
                    "must be a non-negative integer",
                )],
            )
        }),
    }
}

/// Start a watch: 410 now if the resourceVersion is already too old.
pub(super) fn watch(ctx: &Ctx<'_>) -> Result<Response<Body>, Status> {
    let shape = respond::negotiate(ctx.headers, ctx.query.get("includeObject"), true)
        .or_else(|_| respond::negotiate(ctx.headers, ctx.query.get("includeObject"), false))?;
    let plan = plan(ctx)?;
    let filter = Filter::from_query(ctx)?;
    let subscription = ctx.store.watch(ctx.rt, plan.since)?;
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, BoxError>>(64);
    let stream = Stream {
        tx,
        rt: ctx.rt,
        shape,
        filter,
        namespace: ctx.namespace().to_string(),
        name: ctx.info.name.clone(),
        store: Arc::clone(ctx.store),
    };
    tokio::spawn(stream.run(subscription, plan));
    let body = body::from_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    Ok(response)
}

#[derive(serde::Serialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: &'a Value,
}

/// The task writing one watch's events.
struct Stream {
    tx: mpsc::Sender<Result<Bytes, BoxError>>,
    rt: &'static ResourceType,
    shape: Shape,
    filter: Filter,
    namespace: String,
    name: String,
    store: Arc<Store>,
}

impl Stream {
    fn wanted(&self, object: &Value) -> bool {
        (self.namespace.is_empty() || meta_str(object, "namespace") == self.namespace)
            && (self.name.is_empty() || meta_str(object, "name") == self.name)
            && self.filter.matches(object)
    }

    /// Send one event; false once the client is gone.
    async fn send(&self, kind: &str, object: &Value) -> bool {
        let event = Event { kind, object };
        let mut line = serde_json::to_vec(&event).unwrap_or_default();
        line.push(b'\n');
        self.tx.send(Ok(Bytes::from(line))).await.is_ok()
    }

    async fn send_object(&self, kind: EventType, object: Arc<Value>) -> bool {
        if !self.wanted(&object) {
            return true;
        }
        let object = in_version(self.rt, object);
        match self.shape {
            Shape::Json => self.send(kind.as_str(), &object).await,
            shape => {
                self.send(kind.as_str(), &respond::shape_object(self.rt, &object, shape))
                    .await
            }
        }
    }

    async fn bookmark(&self, revision: u64, initial_end: bool) -> bool {
        let mut object = json!({
            "kind": self.rt.kind,
            "apiVersion": self.rt.api_version(),
            "metadata": {"resourceVersion": revision.to_string()},
        });
        if initial_end {
            object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        self.send("BOOKMARK", &object).await
    }

    async fn error(&self, status: Status) {
        if let Ok(object) = serde_json::to_value(&status) {
            self.send("ERROR", &object).await;
        }
    }

    async fn run(self, subscription: Subscription, plan: Plan) {
        let Subscription {
            initial,
            replay,
            events,
            revision,
        } = subscription;
        let deadline = Instant::now() + plan.timeout;
        let Some(last) = self.catch_up(initial, replay, revision, &plan).await else {
            return;
        };
        self.follow(events, last, deadline, plan.bookmarks).await;
    }

    /// What happened before the watch began: the initial ADDEDs (and the
    /// bookmark ending them) or the replayed events. The revision reached,
    /// or `None` once the client is gone.
    async fn catch_up(
        &self,
        initial: Vec<Arc<Value>>,
        replay: Vec<WatchEvent>,
        revision: u64,
        plan: &Plan,
    ) -> Option<u64> {
        if plan.initial_events {
            for object in initial {
                if !self.send_object(EventType::Added, object).await {
                    return None;
                }
            }
        }
        if plan.initial_end_bookmark && !self.bookmark(revision, true).await {
            return None;
        }
        let mut last = revision;
        for event in replay {
            last = last.max(event.revision);
            if !self.send_object(event.kind, event.object).await {
                return None;
            }
        }
        Some(last)
    }

    /// Live events as they come, with a bookmark every period if asked,
    /// until the deadline, the client leaves or the watcher falls behind.
    async fn follow(
        &self,
        mut events: broadcast::Receiver<WatchEvent>,
        mut last: u64,
        deadline: Instant,
        bookmarks: Option<Duration>,
    ) {
        let period = bookmarks.unwrap_or(Duration::from_secs(3600));
        let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = self.tx.closed() => return,
                _ = ticker.tick(), if bookmarks.is_some() => {
                    if !self.bookmark_committed(&mut events, &mut last).await { return; }
                }
                received = events.recv() => match received {
                    Ok(WatchEvent { kind, object, revision }) => {
                        last = last.max(revision);
                        if !self.send_object(kind, object).await { return; }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => return self.lagged(last).await,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    }

    /// A bookmark at the store's committed revision. Every event up to it is
    /// already in the channel: send those first so the bookmark never
    /// overtakes an event. False once the stream is over.
    async fn bookmark_committed(&self, events: &mut broadcast::Receiver<WatchEvent>, last: &mut u64) -> bool {
        let committed = self.store.current_revision();
        loop {
            match events.try_recv() {
                Ok(event) => {
                    *last = (*last).max(event.revision);
                    if !self.send_object(event.kind, event.object).await {
                        return false;
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => {
                    self.lagged(*last).await;
                    return false;
                }
                Err(_) => break,
            }
        }
        *last = (*last).max(committed);
        self.bookmark(*last, false).await
    }

    /// The watcher fell behind the live events: end with 410 so the client
    /// relists, as kube-apiserver does for a watcher its cache dropped.
    async fn lagged(&self, last: u64) {
        self.error(too_old(last, self.store.current_revision())).await;
    }
}
