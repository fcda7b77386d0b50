//! pods/log: deterministic access-log lines per container.
//!
//! Each container instance has a history of [`HISTORY`] lines, one a
//! second, starting when it started (`state.running.startedAt`, else the
//! pod's creation time); a container younger than that has its history
//! shifted back so no line is in the future. `previous=true` serves an
//! older instance's history (ending with its SIGTERM), for containers whose
//! `restartCount` is above zero. `follow=true` then adds a live line every
//! 200 ms until the client goes away.

use super::pod::{ContainerInfo, PodInfo};
use crate::body::{self, Body, BoxError};
use crate::status::{Status, StatusCause, StatusDetails};
use bytes::Bytes;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use http::{header, HeaderValue, Response};
use std::time::Duration;

/// Lines of history per container instance.
pub const HISTORY: u64 = 50;
/// Pause between live lines with `follow=true`.
pub const FOLLOW_INTERVAL: Duration = Duration::from_millis(200);

/// `PodLogOptions` from the query string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// `container`.
    pub container: String,
    /// `follow`.
    pub follow: bool,
    /// `previous`.
    pub previous: bool,
    /// `timestamps`.
    pub timestamps: bool,
    /// `tailLines`.
    pub tail_lines: Option<i64>,
    /// `sinceSeconds`.
    pub since_seconds: Option<i64>,
    /// `sinceTime` (RFC 3339).
    pub since_time: Option<DateTime<Utc>>,
    /// `limitBytes`.
    pub limit_bytes: Option<i64>,
}

fn parse_int(name: &str, value: &str) -> Result<i64, Status> {
    value
        .parse()
        .map_err(|_| Status::bad_request(format!("{name}: strconv.ParseInt: parsing \"{value}\": invalid syntax")))
}

fn parse_flag(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

impl LogOptions {
    /// Parse and validate the query of a log request for pod `name`.
    pub fn from_query(query: Option<&str>, name: &str) -> Result<Self, Status> {
        let mut o = LogOptions::default();
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match &*key {
                "container" => o.container = value.into_owned(),
                "follow" => o.follow = parse_flag(&value),
                "previous" => o.previous = parse_flag(&value),
                "timestamps" => o.timestamps = parse_flag(&value),
                "tailLines" => o.tail_lines = Some(parse_int("tailLines", &value)?),
                "sinceSeconds" => o.since_seconds = Some(parse_int("sinceSeconds", &value)?),
                "limitBytes" => o.limit_bytes = Some(parse_int("limitBytes", &value)?),
                "sinceTime" => {
                    let t = DateTime::parse_from_rfc3339(&value).map_err(|_| {
                        Status::bad_request(format!("sinceTime: parsing time \"{value}\" as RFC3339 failed"))
                    })?;
                    o.since_time = Some(t.with_timezone(&Utc));
                }
                _ => {}
            }
        }
        o.validate(name)?;
        Ok(o)
    }

    /// `ValidatePodLogOptions`: 422 Invalid naming each bad field.
    fn validate(&self, name: &str) -> Result<(), Status> {
        let causes = self.problems();
        if causes.is_empty() {
            return Ok(());
        }
        Err(invalid_options(name, causes))
    }

    /// What is wrong with these options, one cause per field, in the order
    /// kube-apiserver checks them.
    fn problems(&self) -> Vec<StatusCause> {
        let mut causes = Vec::new();
        let mut invalid = |field: &str, value: i64, msg: &str| {
            causes.push(StatusCause {
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: {value}: {msg}"),
                field: field.into(),
            });
        };
        if let Some(n) = self.tail_lines.filter(|n| *n < 0) {
            invalid("tailLines", n, "must be greater than or equal to 0");
        }
        if let Some(n) = self.limit_bytes.filter(|n| *n < 1) {
            invalid("limitBytes", n, "must be greater than 0");
        }
        if let Some(n) = self.since_seconds.filter(|n| *n < 1) {
            invalid("sinceSeconds", n, "must be greater than 0");
        }
        if self.since_seconds.is_some() && self.since_time.is_some() {
            causes.push(StatusCause {
                reason: "FieldValueForbidden".into(),
                message: "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".into(),
                field: String::new(),
            });
        }
        causes
    }
}

/// The 422 Invalid Status for pod `name`'s log options, its message listing
/// the causes as kube-apiserver's aggregate error does.
fn invalid_options(name: &str, causes: Vec<StatusCause>) -> Status {
    let listed: Vec<String> = causes
        .iter()
        .map(|c| {
            if c.field.is_empty() {
                c.message.clone()
            } else {
                format!("{}: {}", c.field, c.message)
            }
        })
        .collect();
    let message = if listed.len() == 1 {
        listed[0].clone()
    } else {
        format!("[{}]", listed.join(", "))
    };
    Status::failure(
        422,
        "Invalid",
        format!("PodLogOptions \"{name}\" is invalid: {message}"),
    )
    .with_details(StatusDetails {
        name: name.into(),
        kind: "PodLogOptions".into(),
        causes,
        ..Default::default()
    })
}

const PATHS: &[(&str, &str, u16)] = &[
    ("GET", "/healthz", 200),
    ("GET", "/", 200),
    ("GET", "/api/products", 200),
    ("POST", "/api/cart", 201),
    ("GET", "/api/products/42", 200),
    ("GET", "/static/app.js", 304),
    ("GET", "/missing", 404),
    ("POST", "/api/checkout", 500),
];

/// Line `n` of an instance, written at `at`.
fn line(pod: &str, container: &str, n: u64, at: DateTime<Utc>, previous: bool) -> String {
    let (method, path, status) = PATHS[(n * 7 % PATHS.len() as u64) as usize];
    let ms = 1 + n * 37 % 120;
    let instance = if previous { " [previous]" } else { "" };
    format!(
        "{} {pod} {container}{instance} #{n} {method} {path} {status} {ms}ms\n",
        at.format("%Y-%m-%dT%H:%M:%SZ")
    )
}

/// When history line 1 of the current instance was written.
fn history_start(pod: &PodInfo, c: &ContainerInfo, now: DateTime<Utc>) -> DateTime<Utc> {
    let fallback = DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z").map_or(now, |t| t.with_timezone(&Utc));
    let started = c.started_at.or(pod.created).unwrap_or(fallback);
    started.min(now - ChronoDuration::seconds(HISTORY as i64))
}

/// The history lines with their times, after `sinceSeconds`/`sinceTime`
/// and `tailLines`.
pub fn history(
    pod: &PodInfo,
    c: &ContainerInfo,
    opts: &LogOptions,
    now: DateTime<Utc>,
) -> Vec<(DateTime<Utc>, String)> {
    let mut start = history_start(pod, c, now);
    if opts.previous {
        start -= ChronoDuration::seconds(3600);
    }
    let mut lines: Vec<(DateTime<Utc>, String)> = (1..=HISTORY)
        .map(|n| {
            let at = start + ChronoDuration::seconds(n as i64);
            (at, line(&pod.name, &c.name, n, at, opts.previous))
        })
        .collect();
    if opts.previous {
        let at = start + ChronoDuration::seconds(HISTORY as i64 + 1);
        lines.push((
            at,
            format!(
                "{} {} {} [previous] received SIGTERM, shutting down\n",
                at.format("%Y-%m-%dT%H:%M:%SZ"),
                pod.name,
                c.name
            ),
        ));
    }
    let since = opts
        .since_time
        .or_else(|| opts.since_seconds.map(|s| now - ChronoDuration::seconds(s)));
    if let Some(since) = since {
        lines.retain(|(at, _)| *at >= since);
    }
    if let Some(tail) = opts.tail_lines {
        let keep = usize::try_from(tail).unwrap_or(0);
        let skip = lines.len().saturating_sub(keep);
        lines.drain(..skip);
    }
    lines
}

/// The kubelet's `timestamps=true` prefix: RFC 3339 with nanoseconds.
fn stamp(at: DateTime<Utc>, text: &str) -> String {
    format!("{} {text}", at.format("%Y-%m-%dT%H:%M:%S%.9fZ"))
}

/// Answer a log request.
pub fn serve(pod: &PodInfo, query: Option<&str>) -> Result<Response<Body>, Status> {
    let opts = LogOptions::from_query(query, &pod.name)?;
    let container = pod.container(&opts.container)?;
    if opts.previous && container.restart_count == 0 {
        return Err(Status::bad_request(format!(
            "previous terminated container \"{}\" in pod \"{}\" not found",
            container.name, pod.name
        )));
    }
    let mut response = Response::new(body::empty());
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    if pod.node_name.is_empty() {
        // No kubelet: kube-apiserver answers with an empty log.
        return Ok(response);
    }
    let now = Utc::now();
    let lines: Vec<String> = history(pod, container, &opts, now)
        .into_iter()
        .map(|(at, text)| if opts.timestamps { stamp(at, &text) } else { text })
        .collect();
    let limit = opts.limit_bytes.and_then(|n| usize::try_from(n).ok());
    *response.body_mut() = if opts.follow && !opts.previous {
        follow(lines, pod.name.clone(), container.name.clone(), opts.timestamps, limit)
    } else {
        let mut text = lines.concat();
        if let Some(limit) = limit {
            text.truncate(floor_char_boundary(&text, limit));
        }
        body::full(text)
    };
    Ok(response)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// History, then a live line every [`FOLLOW_INTERVAL`], each its own body
/// frame, until `limit` bytes were sent or the client goes away.
fn follow(history: Vec<String>, pod: String, container: String, timestamps: bool, limit: Option<usize>) -> Body {
    struct State {
        queued: std::collections::VecDeque<String>,
        n: u64,
        sent: usize,
    }
    let state = State {
        queued: history.into(),
        n: HISTORY,
        sent: 0,
    };
    let stream = futures_util::stream::unfold(state, move |mut st| {
        let (pod, container) = (pod.clone(), container.clone());
        async move {
            if limit.is_some_and(|l| st.sent >= l) {
                return None;
            }
            let mut text = match st.queued.pop_front() {
                Some(text) => text,
                None => {
                    tokio::time::sleep(FOLLOW_INTERVAL).await;
                    st.n += 1;
                    let now = Utc::now();
                    let text = line(&pod, &container, st.n, now, false);
                    if timestamps {
                        stamp(now, &text)
                    } else {
                        text
                    }
                }
            };
            if let Some(l) = limit {
                text.truncate(floor_char_boundary(&text, l - st.sent));
            }
            st.sent += text.len();
            Some((Ok::<Bytes, BoxError>(Bytes::from(text)), st))
        }
    });
    body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(started_secs_ago: i64) -> PodInfo {
        let started = (Utc::now() - ChronoDuration::seconds(started_secs_ago)).to_rfc3339();
        PodInfo::from_object(&json!({
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u"},
            "spec": {"nodeName": "n", "containers": [{"name": "web"}]},
            "status": {"containerStatuses": [{"name": "web", "restartCount": 1, "state": {"running": {"startedAt": started}}}]}
        }))
    }

    #[test]
    fn history_is_deterministic_and_tail_keeps_the_last_lines() {
        let p = pod(3600);
        let c = &p.containers[0];
        let now = Utc::now();
        let all = history(&p, c, &LogOptions::default(), now);
        assert_eq!(all.len() as u64, HISTORY);
        assert_eq!(all, history(&p, c, &LogOptions::default(), now));
        let tail = history(
            &p,
            c,
            &LogOptions {
                tail_lines: Some(3),
                ..Default::default()
            },
            now,
        );
        assert_eq!(tail, all[47..].to_vec());
        assert!(tail[2].1.contains(" #50 "));
    }

    #[test]
    fn since_seconds_keeps_only_recent_lines() {
        let p = pod(100);
        let now = Utc::now();
        let recent = history(
            &p,
            &p.containers[0],
            &LogOptions {
                since_seconds: Some(75),
                ..Default::default()
            },
            now,
        );
        assert!(
            !recent.is_empty() && (recent.len() as u64) < HISTORY,
            "{}",
            recent.len()
        );
    }

    #[test]
    fn previous_instance_has_different_lines() {
        let p = pod(3600);
        let now = Utc::now();
        let prev = history(
            &p,
            &p.containers[0],
            &LogOptions {
                previous: true,
                ..Default::default()
            },
            now,
        );
        assert!(prev.iter().all(|(_, l)| l.contains("[previous]")));
        assert!(prev.last().is_some_and(|(_, l)| l.contains("SIGTERM")));
    }

    #[test]
    fn invalid_options_are_422_and_bad_numbers_400() {
        let err = LogOptions::from_query(Some("tailLines=-1"), "web").unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            err.message,
            "PodLogOptions \"web\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            LogOptions::from_query(Some("limitBytes=x"), "web").unwrap_err().code,
            400
        );
        let o = LogOptions::from_query(Some("follow=true&timestamps=1&sinceSeconds=10&limitBytes=5"), "web").unwrap();
        assert!(o.follow && o.timestamps && o.since_seconds == Some(10) && o.limit_bytes == Some(5));
    }

    #[test]
    fn timestamps_use_the_kubelets_nanosecond_format() {
        let at = DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(stamp(at, "x\n"), "2026-12-02T10:00:00.000000000Z x\n");
    }
}
