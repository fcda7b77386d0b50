//! The audit row: one per request, and one per upgraded stream.
//!
//! Its fields are what a security team asks of a request ("who did what, on
//! which cluster, when, through which credential or agent, and what came of
//! it"), in Kubernetes' own words so that a row and the API server's audit
//! event read alike. Never a token (only its display prefix) and never a
//! body, so no Secret value can reach a row.

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};

/// One audited request. Serialized as one JSON line for the export sink,
/// `portcullis audit --json` and `GET /audit`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuditRow {
    /// UUIDv7, also sent upstream as `Audit-ID` and returned as `Audit-Id`.
    pub id: String,
    /// When the request arrived (microseconds).
    #[serde(serialize_with = "super::stamp::serialize")]
    pub started_at: DateTime<Utc>,
    /// When its response ended, or its stream closed (microseconds).
    #[serde(serialize_with = "super::stamp::serialize")]
    pub ended_at: DateTime<Utc>,
    /// Cluster name; empty for requests that named none.
    pub cluster: String,
    /// `person` or `bot`; empty when not authenticated.
    pub principal_kind: String,
    /// Login or bot name; empty when not authenticated.
    pub login: String,
    /// Id of the credential that authenticated the request.
    pub credential_id: String,
    /// Display prefix of a presented token (never the token itself).
    pub credential_prefix: String,
    /// Agent session (empty until MCP exists).
    pub session: String,
    /// MCP tool (empty until MCP exists).
    pub tool: String,
    /// Client address (the peer, or `X-Forwarded-For` from a trusted proxy).
    pub client: String,
    /// HTTP method.
    pub method: String,
    /// Kubernetes path (after `/clusters/<name>`), or the whole path of a
    /// request that named no cluster; raw, at most [`MAX_TEXT`] bytes.
    pub path: String,
    /// Query string, with credential-like parameters hidden (see
    /// [`clean_query`]).
    pub query: String,
    /// Kubernetes verb (get, list, watch, create, …; the lower-case method
    /// for non-resource requests).
    pub verb: String,
    /// API group; empty for the core group.
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource (exec, log, status, …).
    pub subresource: String,
    /// Namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// HTTP status answered (101 for an upgraded stream; 0 if unknown).
    pub code: u16,
    /// Kubernetes Status reason of a failure (Forbidden, NotFound, …).
    pub reason: String,
    /// Why portcullis itself refused the request: a
    /// [`super::refusal::Refusal`]'s word (`path`, `identity_header`,
    /// `expired`, `not_agent`, …), set with [`AuditRow::refuse`]; empty
    /// otherwise.
    pub refused: String,
    /// Request body bytes sent on (client to cluster for a stream).
    pub bytes_in: u64,
    /// Response body bytes relayed (cluster to client for a stream).
    pub bytes_out: u64,
    /// Milliseconds from arrival to the end of the response or stream.
    pub duration_ms: u64,
    /// create, update, patch, delete or deletecollection of a resource.
    pub write: bool,
    /// Discovery (`/api`, `/apis`, `/openapi`, `/version`): hidden from
    /// queries unless asked for.
    pub discovery: bool,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Secret values were redacted from the response.
    pub redacted: bool,
    /// The response was cut (size cap, deadline, or the cluster broke off).
    pub truncated: bool,
    /// A Secret value was revealed to an agent.
    pub secret_revealed: bool,
    /// The write was held for approval.
    pub held: bool,
    /// The write ran after a person approved it.
    pub approved: bool,
    /// What issued the credential, when not simply handed over: the OAuth
    /// client of an agent session, or a CI job's rule and token. Left out
    /// of the hashed JSON when empty, so rows from before it keep their
    /// hashes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub via: String,
    /// What the row records: empty for a request, `alert` for a bypass
    /// alert (see `audit::bypass`), `system` for portcullis's own requests.
    /// Left out of the hashed JSON when empty, as `via`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

/// A row with its place in the hash chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainedRow {
    /// Position in the chain, from 1, without gaps.
    pub seq: i64,
    /// The previous row's hash (or the anchor's, or the genesis hash).
    pub prev_hash: String,
    /// SHA-256 over `seq`, `prev_hash` and the row (see `audit::chain`).
    pub hash: String,
    /// The row.
    #[serde(flatten)]
    pub row: AuditRow,
}

/// Longest path or query kept in a row: enough for any Kubernetes request,
/// and a bound on what a client can make portcullis store.
pub const MAX_TEXT: usize = 2048;

/// Words that mark a query parameter whose value could be a credential:
/// its value is replaced, its name kept. Matched anywhere in the name,
/// whatever its case, so `api_key`, `X-Amz-Signature`, `id_token`,
/// `user_code` and `client_assertion` are hidden with `token`. None is part
/// of a Kubernetes parameter's name (`labelSelector`, `resourceVersion`,
/// `dryRun`, `container`, `command`, …), whose values stay readable.
const HIDDEN_WORDS: &[&str] = &[
    "token",
    "key",
    "secret",
    "pass",
    "auth",
    "sig",
    "credential",
    "assertion",
    "session",
    "code",
    "jwt",
];

impl AuditRow {
    /// A row for a request that arrived now with id `id`.
    pub fn new(id: uuid::Uuid, started_at: DateTime<Utc>) -> AuditRow {
        AuditRow {
            id: id.to_string(),
            started_at: started_at.trunc_subsecs(6),
            ..AuditRow::default()
        }
    }

    /// Close the row at `ended_at`.
    pub fn finish(&mut self, ended_at: DateTime<Utc>) {
        self.ended_at = ended_at.trunc_subsecs(6);
        self.duration_ms = (self.ended_at - self.started_at).num_milliseconds().max(0) as u64;
    }

    /// Did portcullis or the cluster deny it (401, 403, or refused)?
    pub fn denied(&self) -> bool {
        !self.refused.is_empty() || matches!(self.code, 401 | 403)
    }
}

/// Cut `text` to at most [`MAX_TEXT`] bytes on a character boundary.
pub fn bounded(text: &str) -> String {
    text[..crate::text::floor_char_boundary(text, MAX_TEXT)].to_string()
}

/// `text` [`bounded`], each NUL replaced by U+FFFD: PostgreSQL's text
/// cannot hold a NUL. Replaced first, as U+FFFD is three bytes.
pub fn bounded_nul_free(text: &str) -> String {
    bounded(&text.replace('\0', "\u{fffd}"))
}

/// The query as recorded: raw, except that the values of credential-like
/// parameters are replaced by `<hidden>`, and bounded in length.
pub fn clean_query(query: &str) -> String {
    let cleaned: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            // Compared decoded, as the server reading it decodes it:
            // `subject%5Ftoken=` is `subject_token=`.
            Some((key, _)) if is_hidden(key) => format!("{key}=<hidden>"),
            _ => pair.to_string(),
        })
        .collect();
    bounded(&cleaned.join("&"))
}

/// Is a query parameter's raw name one whose value is never recorded?
fn is_hidden(raw_name: &str) -> bool {
    let name = percent_encoding::percent_decode_str(raw_name)
        .decode_utf8_lossy()
        .to_ascii_lowercase();
    HIDDEN_WORDS.iter().any(|word| name.contains(word))
}

/// Is a non-resource `path` discovery (what clients fetch to learn the API)?
pub fn is_discovery(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    path.is_empty()
        || path == "/api"
        || path == "/apis"
        || path == "/version"
        || path.starts_with("/api/")
        || path.starts_with("/apis/")
        || path.starts_with("/openapi/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_like_query_values_are_hidden() {
        assert_eq!(
            clean_query("watch=1&access_token=abc&limit=500"),
            "watch=1&access_token=<hidden>&limit=500"
        );
        assert_eq!(clean_query("TOKEN=x"), "TOKEN=<hidden>");
        assert_eq!(clean_query("dryRun=All"), "dryRun=All");
        assert_eq!(
            clean_query("grant_type=x&subject%5Ftoken=eyJ&%74oken=abc&%E9=1"),
            "grant_type=x&subject%5Ftoken=<hidden>&%74oken=<hidden>&%E9=1",
            "a name is compared percent-decoded"
        );
        for name in [
            "api_key",
            "apikey",
            "id_token",
            "auth_token",
            "jwt",
            "client_assertion",
            "X-Amz-Signature",
            "X-Amz-Security-Token",
            "sig",
            "private_token",
            "user_code",
            "sessionid",
            "passwd",
            "Authorization",
        ] {
            assert_eq!(
                clean_query(&format!("{name}=v&limit=1")),
                format!("{name}=<hidden>&limit=1")
            );
        }
        // Kubernetes' own parameters stay readable.
        let kube = "labelSelector=a%3Db&fieldSelector=x&resourceVersion=5&resourceVersionMatch=NotOlderThan&watch=1\
                    &allowWatchBookmarks=true&sendInitialEvents=true&timeoutSeconds=5&limit=500&continue=c&dryRun=All\
                    &fieldManager=m&fieldValidation=Strict&force=true&propagationPolicy=Orphan&gracePeriodSeconds=0\
                    &orphanDependents=false&pretty=true&container=c&command=ls&stdin=true&stdout=true&stderr=true\
                    &tty=false&follow=true&previous=false&sinceSeconds=1&sinceTime=t&tailLines=1&timestamps=true\
                    &limitBytes=1&insecureSkipTLSVerifyBackend=true&ports=80&path=/x";
        assert_eq!(clean_query(kube), kube);
    }

    #[test]
    fn long_text_is_bounded_on_a_character_boundary() {
        let long = "é".repeat(MAX_TEXT);
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_TEXT);
        assert!(cut.chars().all(|c| c == 'é'));
        let nuls = bounded_nul_free(&"\0".repeat(MAX_TEXT));
        assert!(nuls.len() <= MAX_TEXT && nuls.chars().all(|c| c == '\u{fffd}'));
    }

    #[test]
    fn discovery_paths_are_recognised() {
        for path in [
            "/api",
            "/apis",
            "/apis/apps/v1",
            "/api/v1",
            "/openapi/v3",
            "/version",
            "/",
        ] {
            assert!(is_discovery(path), "{path}");
        }
        for path in ["/healthz", "/metrics", "/logs"] {
            assert!(!is_discovery(path), "{path}");
        }
    }

    #[test]
    fn a_rows_json_holds_its_times_as_chrono_writes_them() {
        let started = DateTime::from_timestamp(1_764_918_146, 120_000_000).unwrap();
        let mut row = AuditRow::new(uuid::Uuid::now_v7(), started);
        row.finish(started + chrono::Duration::microseconds(1_234_567));
        let json: serde_json::Value = serde_json::from_slice(&serde_json::to_vec(&row).unwrap()).unwrap();
        assert_eq!(json["started_at"], serde_json::to_value(row.started_at).unwrap());
        assert_eq!(json["ended_at"], serde_json::to_value(row.ended_at).unwrap());
        assert_eq!(json["started_at"], "2025-12-05T07:02:26.120Z");
        assert_eq!(json["ended_at"], "2025-12-05T07:02:27.354567Z");
    }

    #[test]
    fn a_row_survives_a_json_round_trip() {
        let mut row = AuditRow::new(uuid::Uuid::now_v7(), Utc::now());
        row.login = "ana".into();
        row.finish(Utc::now());
        let line = serde_json::to_string(&row).unwrap();
        assert_eq!(serde_json::from_str::<AuditRow>(&line).unwrap(), row);
    }
}
