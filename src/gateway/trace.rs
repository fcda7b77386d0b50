//! Trace: what one request's stages learnt, kept as its audit row, and the
//! request's end — its refusal as a Status, its log line and metrics, and
//! its audit row attached to the response. Every door ends a request here,
//! so every request is one row and one line.

use super::error::RequestError;
use super::{headers, metrics, Pipeline};
use crate::audit::row::AuditRow;
use crate::body::Body;
use crate::status::Status;
use http::{HeaderValue, Response};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

/// The one place a request's error becomes what the caller and the audit
/// see: note its refusal reason in the row, and give its Status.
pub fn refuse(trace: &mut Trace, error: &RequestError) -> Status {
    if let Some(reason) = error.refused() {
        trace.row.refuse(reason);
    }
    error.status()
}

/// The challenge sent with every 401.
const CHALLENGE: &str = "Bearer realm=\"portcullis\"";

/// What the request path learnt: the audit row being filled, which the log
/// line reads too.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The request's audit row, filled in by each stage. Boxed: the trace
    /// moves in and out of extensions several times per request, and the
    /// futures that hold it would each carry the row's 600 bytes.
    pub row: Box<AuditRow>,
    /// Request body bytes forwarded, counted by `forward`.
    pub sent: Arc<AtomicU64>,
    /// Probes and scrapes are not audited.
    pub audited: bool,
}

impl Trace {
    /// The trace of a request whose row is `row`.
    pub fn new(row: AuditRow) -> Trace {
        Trace {
            row: Box::new(row),
            sent: Arc::default(),
            audited: true,
        }
    }

    /// What a door keeps while it lends its trace to the stages: not a
    /// request of its own, so no row is written of it.
    pub fn lent() -> Trace {
        Trace {
            audited: false,
            ..Trace::new(AuditRow::default())
        }
    }
}

impl Pipeline {
    /// The response, or the refusal's Status response.
    pub fn respond(&self, trace: &mut Trace, result: Result<Response<Body>, RequestError>) -> Response<Body> {
        match result {
            Ok(response) => response,
            Err(error) => self.refusal(trace, &error),
        }
    }

    /// `error` as its Status response (a 401 with the challenge), its
    /// reasons noted in the row.
    pub fn refusal(&self, trace: &mut Trace, error: &RequestError) -> Response<Body> {
        let status = refuse(trace, error);
        trace.row.reason = status.reason.clone();
        let challenge = status.code == 401;
        let mut response = status.response();
        if challenge {
            response
                .headers_mut()
                .insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
        }
        response
    }

    /// Stamp the audit id, log the request, and arrange for its audit row.
    pub fn finish(
        &self,
        trace: Trace,
        mut response: Response<Body>,
        audit_id: uuid::Uuid,
        started: Instant,
    ) -> Response<Body> {
        response
            .headers_mut()
            .insert(headers::AUDIT_ID, headers::audit_id_value(audit_id));
        self.record(&trace, response.status().as_u16(), started);
        if !trace.audited {
            return response;
        }
        // Written when the body ends or an upgraded stream closes, so that
        // bytes and truncation are known.
        crate::audit::record::attach(self.audit.writer(), *trace.row, trace.sent, response)
    }

    /// The request's log line (its prefix names the audit id, `logs`) and
    /// metrics. The line is at debug: the audit row is the record of every
    /// request, and formatting and writing a line per request cost the
    /// proxy more than a sixth of its CPU on small GETs (benches/RESULTS.md).
    fn record(&self, trace: &Trace, code: u16, started: Instant) {
        use crate::text::Escaped;
        let row = &trace.row;
        if !row.cluster.is_empty() {
            // Labels from a fixed set only: the cluster name and the method
            // are the client's, and each new value would be a series kept
            // for the process's life (anyone could grow it without a token).
            let cluster = if self.clusters.contains_key(row.cluster.as_str()) {
                row.cluster.clone()
            } else {
                "unknown".to_string()
            };
            self.metrics
                .requests
                .get_or_create(&metrics::RequestLabels {
                    cluster,
                    verb: metrics::verb_label(&row.verb).to_string(),
                    code,
                })
                .inc();
        }
        // Escaped: the path (and the cluster and verb read from it) are the
        // client's, and a raw newline or escape sequence would forge a line.
        tracing::debug!(
            cluster = %Escaped(&row.cluster),
            principal = %format_args!("{}:{}", row.principal_kind, Escaped(&row.login)),
            client = %row.client,
            method = %Escaped(&row.method),
            path = %Escaped(&row.path),
            verb = %Escaped(&row.verb),
            code,
            refused = %row.refused,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "request"
        );
    }
}
