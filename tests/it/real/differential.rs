//! The simulator checked against kube-apiserver: the same sequence of
//! requests ([`super::differential_cases`]) goes to both, as the same admin,
//! in a namespace of the same name, and every answer is compared
//! ([`super::differential_shape`]). A difference must be listed, with why it
//! is acceptable, in the table of `docs/sim.md`; the test fails on a
//! difference the table does not list and on a listed one that is gone.

use super::cluster::RealCluster;
use super::differential_cases::{Case, Read, CASES};
use super::differential_cases_more::MORE_CASES;
use super::differential_shape::{self as shape, Depth, Difference};
use crate::harness::Raw;
use bytes::Bytes;
use http::Method;
use portcullis_sim::{Sim, SimConfig, UserInfo};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// How long one answer may take; watches end by their `timeoutSeconds`
/// (at most 3 s) well before.
const READ_DEADLINE: Duration = Duration::from_secs(30);

/// The heading of the accepted-differences table in `docs/sim.md`.
const TABLE_HEADING: &str = "## Differences the differential test accepts";

/// The whole sequence, in order.
fn all_cases() -> impl Iterator<Item = &'static Case> {
    CASES.iter().chain(MORE_CASES)
}

/// One server, and what the sequence has learnt from its answers so far.
struct Side {
    raw: Raw,
    admin_token: String,
    vars: HashMap<&'static str, String>,
}

/// An answer, read whole.
struct Answer {
    status: u16,
    content_type: String,
    warnings: Vec<String>,
    body: Bytes,
}

impl Side {
    fn new(ca_pem: &str, url: String, admin_token: &str, portcullis_token: &str, ns: &str) -> Side {
        let vars = HashMap::from([
            ("ns", ns.to_string()),
            ("portcullis", portcullis_token.to_string()),
            // One `&` past the 10,000 parameters Go's `net/url` reads.
            ("too_many_parameters", "&".repeat(10_000)),
        ]);
        Side {
            raw: Raw::with_ca(ca_pem, url),
            admin_token: admin_token.to_string(),
            vars,
        }
    }

    fn fill(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, value) in &self.vars {
            out = out.replace(&format!("{{{name}}}"), value);
        }
        out
    }

    async fn send(&mut self, case: &Case) -> Answer {
        let mut headers: Vec<(String, String)> = case
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), self.fill(v)))
            .collect();
        if !headers.iter().any(|(n, _)| n == "authorization") {
            headers.push(("authorization".into(), format!("Bearer {}", self.admin_token)));
        }
        let borrowed: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let method = Method::from_bytes(case.method.as_bytes()).expect("a method");
        let path = self.fill(case.path);
        let sent = self
            .raw
            .send(method, &path, &borrowed, self.fill(case.body).into_bytes());
        let response = tokio::time::timeout(READ_DEADLINE, sent)
            .await
            .unwrap_or_else(|_| panic!("{}: no whole answer within {READ_DEADLINE:?}", case.name));
        let header = |name: &str| {
            response
                .headers
                .get_all(name)
                .iter()
                .map(|v| v.to_str().unwrap_or("?").to_string())
        };
        let answer = Answer {
            status: response.status.as_u16(),
            content_type: header("content-type").collect::<Vec<_>>().join(","),
            warnings: header("warning").collect(),
            body: response.body,
        };
        self.remember(&answer);
        answer
    }

    /// Keep the top-level `metadata`'s resourceVersion, uid and continue
    /// token of a successful JSON answer for later cases' placeholders.
    fn remember(&mut self, answer: &Answer) {
        if !(200..300).contains(&answer.status) {
            return;
        }
        let Ok(body) = serde_json::from_slice::<Value>(&answer.body) else {
            return;
        };
        for (var, key) in [("rv", "resourceVersion"), ("uid", "uid"), ("continue", "continue")] {
            if let Some(value) = body["metadata"][key].as_str().filter(|v| !v.is_empty()) {
                self.vars.insert(var, value.to_string());
            }
        }
    }
}

/// What differs between the two answers to `case`.
fn compare(case: &Case, real: &Answer, sim: &Answer) -> Vec<Difference> {
    let mut out = Vec::new();
    if real.status != sim.status {
        out.push(Difference::new("code", real.status.to_string(), sim.status.to_string()));
    }
    if real.content_type != sim.content_type {
        out.push(Difference::new("content-type", &real.content_type, &sim.content_type));
    }
    let warnings = |a: &Answer| {
        a.warnings
            .iter()
            .map(|w| shape::normalise(w))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    if warnings(real) != warnings(sim) {
        out.push(Difference::new("warning", warnings(real), warnings(sim)));
    }
    match case.read {
        Read::Values => compare_json(Depth::Values, parse_json(&real.body), parse_json(&sim.body), &mut out),
        Read::Shape => compare_json(Depth::Shape, parse_json(&real.body), parse_json(&sim.body), &mut out),
        Read::Yaml => compare_json(Depth::Values, parse_yaml(&real.body), parse_yaml(&sim.body), &mut out),
        Read::Text => compare_text(&real.body, &sim.body, &mut out),
        Read::Protobuf => compare_protobuf(real, sim, &mut out),
        Read::Watch if real.status == 200 && sim.status == 200 => compare_watch(real, sim, &mut out),
        Read::Watch => compare_json(Depth::Values, parse_json(&real.body), parse_json(&sim.body), &mut out),
    }
    dedupe(out)
}

fn parse_json(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|_| String::from_utf8_lossy(body).into_owned())
}

fn parse_yaml(body: &[u8]) -> Result<Value, String> {
    serde_yaml::from_slice(body).map_err(|_| String::from_utf8_lossy(body).into_owned())
}

/// A Status is always compared by its values (reason, code, message),
/// whatever the case's depth.
fn compare_json(depth: Depth, real: Result<Value, String>, sim: Result<Value, String>, out: &mut Vec<Difference>) {
    match (real, sim) {
        (Ok(real), Ok(sim)) => {
            let depth = if real["kind"] == "Status" { Depth::Values } else { depth };
            shape::compare(depth, &real, &sim, out);
        }
        (Err(real), Err(sim)) => compare_text(real.as_bytes(), sim.as_bytes(), out),
        (real, sim) => out.push(Difference::new("body", kind_of(&real), kind_of(&sim))),
    }
}

fn kind_of(body: &Result<Value, String>) -> String {
    match body {
        Ok(value) => format!("JSON {}", shape::type_name(value)),
        Err(text) => format!("not JSON: {:?}", text.chars().take(120).collect::<String>()),
    }
}

fn compare_text(real: &[u8], sim: &[u8], out: &mut Vec<Difference>) {
    // A trailing newline is framing, not content.
    let (real, sim) = (String::from_utf8_lossy(real), String::from_utf8_lossy(sim));
    let (real, sim) = (real.trim_end(), sim.trim_end());
    if shape::normalise(real) != shape::normalise(sim) {
        let cut = |s: &str| s.chars().take(200).collect::<String>();
        out.push(Difference::new("body", cut(real), cut(sim)));
    }
}

/// The `k8s\0` envelope every protobuf answer starts with.
fn compare_protobuf(real: &Answer, sim: &Answer, out: &mut Vec<Difference>) {
    let magic = |a: &Answer| a.body.starts_with(b"k8s\0");
    if magic(real) != magic(sim) {
        out.push(Difference::new(
            "protobuf-magic",
            magic(real).to_string(),
            magic(sim).to_string(),
        ));
    }
}

/// Event types in order, then each event's object.
fn compare_watch(real: &Answer, sim: &Answer, out: &mut Vec<Difference>) {
    let events = |a: &Answer| -> Vec<Value> {
        String::from_utf8_lossy(&a.body)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or(Value::String(l.to_string())))
            .collect()
    };
    // BOOKMARKs are progress notes sent on a timer: how many fall within
    // the watch is timing, so a run of them counts as one.
    let bookmarks_collapsed = |mut events: Vec<Value>| {
        events.dedup_by(|a, b| a["type"] == "BOOKMARK" && b["type"] == "BOOKMARK");
        events
    };
    let (real, sim) = (bookmarks_collapsed(events(real)), bookmarks_collapsed(events(sim)));
    let types = |e: &[Value]| {
        e.iter()
            .map(|e| e["type"].as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join(",")
    };
    if types(&real) != types(&sim) {
        out.push(Difference::new("events", types(&real), types(&sim)));
    }
    for (a, b) in real.iter().zip(&sim) {
        let mut inner = Vec::new();
        shape::compare(Depth::Values, &a["object"], &b["object"], &mut inner);
        out.extend(inner.into_iter().map(|d| Difference {
            location: format!("event{}", d.location),
            ..d
        }));
    }
}

fn dedupe(found: Vec<Difference>) -> Vec<Difference> {
    let mut out: Vec<Difference> = Vec::new();
    for d in found {
        if !out.iter().any(|o| o.location == d.location) {
            out.push(d);
        }
    }
    out
}

/// A row of the accepted-differences table: a case (a trailing `*` makes it
/// a prefix), the location it differs at (and everything below it), why.
#[derive(Debug)]
struct Accepted {
    case: String,
    location: String,
    /// The reason starts `Varies:` when kube-apiserver's answer depends on
    /// the shared cluster's history: such a row is never stale.
    varies: bool,
}

impl Accepted {
    fn covers(&self, case: &str, location: &str) -> bool {
        let case_matches = match self.case.strip_suffix('*') {
            Some(prefix) => case.starts_with(prefix),
            None => case == self.case,
        };
        let below = |at: &str| {
            location
                .strip_prefix(at)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
        };
        let located = match self.location.as_str() {
            "*" => true,
            // `*.a.b`: `.a.b` anywhere (in a list's items, a Table's rows, an event).
            anywhere if anywhere.starts_with('*') => {
                let inner = &anywhere[1..];
                location
                    .match_indices(inner)
                    .any(|(i, _)| below(&location[..i + inner.len()]))
            }
            exact => below(exact),
        };
        case_matches && located
    }
}

fn sim_doc() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/sim.md");
    std::fs::read_to_string(&path).expect("docs/sim.md is readable")
}

/// The table under [`TABLE_HEADING`]: `| \`case\` | \`location\` … | why |`.
fn accepted_table(doc: &str) -> Vec<Accepted> {
    let after = doc.split_once(TABLE_HEADING).map(|(_, rest)| rest).unwrap_or_default();
    let rows = after
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    let ticked = |cell: &str| cell.split('`').nth(1).map(str::to_string);
    rows.filter_map(|row| {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        Some(Accepted {
            case: ticked(cells.get(1)?)?,
            location: ticked(cells.get(2)?)?,
            varies: cells.get(3)?.starts_with("Varies:"),
        })
    })
    .collect()
}

fn sim_config(cluster: &RealCluster) -> SimConfig {
    let mut config = SimConfig::new();
    // kube-apiserver sends a watch's first bookmark 2 s before its
    // timeout; `watch-bookmarks` (3 s) then sees one bookmark on each side.
    config.bookmark_interval = Duration::from_secs(2);
    config.portcullis_token = cluster.portcullis_token.clone();
    let admin = UserInfo {
        name: "admin".into(),
        uid: "admin".into(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        ..Default::default()
    };
    config.extra_tokens.insert(cluster.admin_token.clone(), admin);
    config
}

/// Before this case the simulator forgets its event history (as an etcd
/// compaction does), so that its watch from resourceVersion 1 takes the
/// 410 path. kube-apiserver's answer to the same watch depends on how much
/// its watch cache still holds; see the accepted-differences table.
const COMPACT_BEFORE: &str = "watch-too-old-resource-version";

/// Send the whole sequence to both; the differences found, by case.
async fn run_sequence(sim: &Sim, real: &mut Side, simulated: &mut Side) -> Vec<(&'static str, Difference)> {
    let mut found = Vec::new();
    for case in all_cases() {
        if case.name == COMPACT_BEFORE {
            sim.store().compact();
        }
        let (a, b) = (real.send(case).await, simulated.send(case).await);
        found.extend(compare(case, &a, &b).into_iter().map(|d| (case.name, d)));
    }
    found
}

fn report(title: &str, lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("{title} ({}):\n  {}\n", lines.len(), lines.join("\n  "))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_simulator_answers_the_differential_sequence_as_kube_apiserver_does() {
    let cluster = super::shared();
    let ns = cluster.namespace("diff").unwrap();
    let sim = Sim::start(sim_config(cluster)).await.expect("the simulator starts");
    let mut real = Side::new(
        &cluster.ca_pem,
        cluster.url.clone(),
        &cluster.admin_token,
        &cluster.portcullis_token,
        &ns,
    );
    let mut simulated = Side::new(
        sim.ca_pem(),
        sim.url(),
        &cluster.admin_token,
        &cluster.portcullis_token,
        &ns,
    );
    let namespace = Case {
        name: "setup",
        method: "POST",
        // As kubectl created the real one: the same field manager.
        path: "/api/v1/namespaces?fieldManager=kubectl-create",
        headers: &[("content-type", "application/json")],
        body: r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"{ns}"}}"#,
        read: Read::Values,
    };
    assert_eq!(
        simulated.send(&namespace).await.status,
        201,
        "the simulator's namespace is created"
    );
    let found = run_sequence(&sim, &mut real, &mut simulated).await;
    let _ = cluster.admin(&[
        "delete",
        "clusterrole",
        &format!("{ns}-pod-reader"),
        "--ignore-not-found",
    ]);
    let _ = cluster.admin(&["delete", "namespace", &ns, "--ignore-not-found", "--wait=false"]);

    let table = accepted_table(&sim_doc());
    let unlisted: Vec<String> = found
        .iter()
        .filter(|(case, d)| !table.iter().any(|row| row.covers(case, &d.location)))
        .map(|(case, d)| format!("`{case}` `{}`: real {} / sim {}", d.location, d.real, d.sim))
        .collect();
    let stale: Vec<String> = table
        .iter()
        .filter(|row| !row.varies && !found.iter().any(|(case, d)| row.covers(case, &d.location)))
        .map(|row| format!("`{}` `{}`", row.case, row.location))
        .collect();
    let text = report("differences docs/sim.md does not list", &unlisted)
        + &report("listed differences that no longer differ", &stale);
    assert!(text.is_empty(), "{text}");
}

#[test]
fn the_differential_sequence_has_at_least_150_uniquely_named_requests() {
    let names: Vec<&str> = all_cases().map(|c| c.name).collect();
    assert!(names.len() >= 150, "only {} requests", names.len());
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "case names repeat");
}

#[test]
fn the_simulator_docs_state_the_differential_counts_and_name_only_real_cases() {
    let doc = sim_doc();
    let table = accepted_table(&doc);
    let requests = all_cases().count();
    let stated = format!("sends {requests} requests");
    assert!(doc.contains(&stated), "docs/sim.md should say it {stated}");
    let listed = format!("{} accepted differences", table.len());
    assert!(doc.contains(&listed), "docs/sim.md should say it lists {listed}");
    for row in &table {
        let prefix = row.case.trim_end_matches('*');
        assert!(all_cases().any(|c| c.name.starts_with(prefix)), "no case {}", row.case);
    }
}
