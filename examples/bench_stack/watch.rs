//! `watch`: open N watches of the watched ConfigMap's namespace through one
//! path, read a process's resident memory before and after (the memory one
//! open watch costs it), then change the ConfigMap directly in the cluster
//! and time the event's arrival on every watch.
//!
//! Over HTTP/2 the watches share connections, `--per-conn` streams each
//! (portcullis allows 250 per connection, the simulated cluster 200); over
//! HTTP/1.1 (`--http1`, for `kubectl proxy`) each has its own connection.

use super::tls::{Sender, Target};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};

/// Command-line arguments of `watch`.
#[derive(clap::Args)]
pub struct Args {
    /// `https://host:port` or `http://host:port`.
    #[arg(long)]
    base: String,
    /// Path prefix before `/api/v1/…` (`/clusters/sim` through portcullis).
    #[arg(long, default_value = "")]
    prefix: String,
    /// Bearer token, if the path needs one.
    #[arg(long)]
    token: Option<String>,
    /// CA to trust for an https base.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// Watches to open.
    #[arg(long, default_value_t = 10_000)]
    watches: usize,
    /// HTTP/2 streams per connection.
    #[arg(long, default_value_t = 200)]
    per_conn: usize,
    /// HTTP/1.1, one connection per watch.
    #[arg(long)]
    http1: bool,
    /// Process whose resident memory is read (portcullis's).
    #[arg(long)]
    pid: Option<u32>,
    /// The simulated cluster's URL, to change the watched object directly.
    #[arg(long)]
    cluster: String,
    /// Its admin token.
    #[arg(long)]
    cluster_token: String,
    /// Its CA.
    #[arg(long)]
    cluster_ca: PathBuf,
    /// How long to wait for every watch to open, and for every delivery.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

/// Open, measure, trigger, time; print one JSON object.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(args.timeout_secs);
    let rss_before = rss_kib(args.pid);
    let started = Instant::now();
    let (opened_tx, mut opened_rx) = mpsc::unbounded_channel::<bool>();
    let (event_tx, mut event_rx) = mpsc::unbounded_channel::<Instant>();
    let target = Target::new(&args.base, args.ca.as_deref(), args.http1)?;
    let path = format!(
        "{}/api/v1/namespaces/{}/configmaps?watch=1&resourceVersion={}",
        args.prefix,
        super::objects::WATCH_NAMESPACE,
        current_revision(&args).await?
    );
    let tasks = open_all(&args, target, &path, opened_tx, event_tx).await?;
    let (mut opened, mut failed) = (0usize, 0usize);
    while opened + failed < args.watches {
        match tokio::time::timeout_at((started + timeout).into(), opened_rx.recv()).await {
            Ok(Some(true)) => opened += 1,
            Ok(Some(false)) => failed += 1,
            _ => break,
        }
    }
    let open_seconds = started.elapsed().as_secs_f64();
    eprintln!("watch: {opened} open, {failed} refused in {open_seconds:.1} s");
    // Let allocations settle before reading memory again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = rss_kib(args.pid);
    let triggered = trigger(&args).await?;
    let mut latencies = Vec::with_capacity(opened);
    while latencies.len() < opened {
        match tokio::time::timeout_at((triggered + timeout).into(), event_rx.recv()).await {
            Ok(Some(at)) => latencies.push(at.saturating_duration_since(triggered).as_secs_f64() * 1000.0),
            _ => break,
        }
    }
    let delivered = latencies.len();
    let per_watch = match (rss_before, rss_after) {
        (Some(b), Some(a)) if opened > 0 => Some((a as f64 - b as f64) / opened as f64),
        _ => None,
    };
    let result = json!({
        "watches": args.watches,
        "opened": opened,
        "refused": failed,
        "delivered": delivered,
        "open_seconds": open_seconds,
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "kib_per_watch": per_watch,
        "delivery_ms": super::percentiles(&mut latencies),
    });
    println!("{result}");
    drop(tasks);
    Ok(())
}

/// Open every watch; each task reports when its watch is open and when the
/// first event arrives.
async fn open_all(
    args: &Args,
    target: Target,
    path: &str,
    opened: mpsc::UnboundedSender<bool>,
    events: mpsc::UnboundedSender<Instant>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    // Opening thousands at once only measures the accept queue.
    let opening = Arc::new(Semaphore::new(256));
    let mut tasks = Vec::with_capacity(args.watches);
    let mut shared: Option<Sender> = None;
    for i in 0..args.watches {
        if !args.http1 && i % args.per_conn.max(1) == 0 {
            shared = Some(target.connect(true).await?);
        }
        let sender = shared.as_ref().and_then(Sender::share);
        let request = target
            .request(http::Method::GET, path, args.token.as_deref(), args.http1)
            .body(Full::default())?;
        let (target, opened, events, opening) = (target.clone(), opened.clone(), events.clone(), opening.clone());
        tasks.push(tokio::spawn(async move {
            let permit = opening.acquire_owned().await;
            let response = match sender {
                Some(mut sender) => sender.send(request).await.map_err(anyhow::Error::from),
                None => match target.connect(false).await {
                    Ok(mut sender) => sender.send(request).await.map_err(anyhow::Error::from),
                    Err(e) => Err(e),
                },
            };
            drop(permit);
            let Ok(response) = response.map_err(|e| eprintln!("watch: {e}")) else {
                let _ = opened.send(false);
                return;
            };
            let ok = response.status() == http::StatusCode::OK;
            let _ = opened.send(ok);
            if !ok {
                return;
            }
            let mut body = response.into_body();
            while let Some(Ok(frame)) = body.frame().await {
                if frame.data_ref().is_some_and(|d| !d.is_empty()) {
                    let _ = events.send(Instant::now());
                    break;
                }
            }
            // Keep the watch open until the process ends.
            std::future::pending::<()>().await;
        }));
    }
    Ok(tasks)
}

/// The watched namespace's list revision, so that watches start after it
/// and see only the change.
async fn current_revision(args: &Args) -> anyhow::Result<String> {
    let path = format!("/api/v1/namespaces/{}/configmaps", super::objects::WATCH_NAMESPACE);
    let (_, body) = cluster_request(args, http::Method::GET, &path, None).await?;
    let list: serde_json::Value = serde_json::from_slice(&body)?;
    Ok(list["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_string())
}

/// Change the watched ConfigMap directly in the cluster; returns when the
/// request was sent.
async fn trigger(args: &Args) -> anyhow::Result<Instant> {
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/watched",
        super::objects::WATCH_NAMESPACE
    );
    let patch = json!({"data": {"changed": format!("{:?}", std::time::SystemTime::now())}}).to_string();
    let at = Instant::now();
    let (status, _) = cluster_request(args, http::Method::PATCH, &path, Some(patch)).await?;
    anyhow::ensure!(status.is_success(), "changing the watched ConfigMap failed: {status}");
    Ok(at)
}

async fn cluster_request(
    args: &Args,
    method: http::Method,
    path: &str,
    body: Option<String>,
) -> anyhow::Result<(http::StatusCode, Bytes)> {
    let target = Target::new(&args.cluster, Some(&args.cluster_ca), true)?;
    let request = target
        .request(method, path, Some(&args.cluster_token), true)
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(Full::from(body.unwrap_or_default()))?;
    let response = target.connect(false).await?.send(request).await?;
    let status = response.status();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

/// VmRSS of `pid`, in KiB.
fn rss_kib(pid: Option<u32>) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
