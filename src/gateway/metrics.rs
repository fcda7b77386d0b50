//! Prometheus metrics at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of a forwarded or refused request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// Cluster name (empty when the request named none).
    pub cluster: String,
    /// Kubernetes verb.
    pub verb: String,
    /// HTTP status code.
    pub code: u16,
}

/// The verb as a label: Kubernetes's verbs and the standard methods (a
/// non-resource request's verb) as they are, anything else `other`.
pub fn verb_label(verb: &str) -> &str {
    const KNOWN: &[&str] = &[
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
        "proxy",
        "post",
        "put",
        "head",
        "options",
        "connect",
        "trace",
        "",
    ];
    if KNOWN.contains(&verb) {
        verb
    } else {
        "other"
    }
}

/// Labels of a rejected credential.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectLabels {
    /// missing, malformed, unknown, expired, revoked.
    pub reason: String,
}

/// Labels of an upstream call.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    /// Cluster name.
    pub cluster: String,
}

/// Counts one in a gauge while it lives (a stream open, a call waiting),
/// and no longer once dropped, however that comes (an end, an error, the
/// client going away).
pub struct Counted(Gauge);

impl Counted {
    /// Count one in `gauge` (a handle on the registered one) from now.
    pub fn in_gauge(gauge: Gauge) -> Counted {
        gauge.inc();
        Counted(gauge)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The process's metrics.
pub struct Metrics {
    registry: Registry,
    /// Requests by cluster, verb and code.
    pub requests: Family<RequestLabels, Counter>,
    /// Time to the cluster's response headers.
    pub upstream_latency: Family<ClusterLabels, Histogram>,
    /// Watches, follows and upgraded streams open now.
    pub open_streams: Gauge,
    /// Credentials refused, by reason.
    pub rejected_credentials: Family<RejectLabels, Counter>,
    /// Audit rows waiting for the writer.
    pub audit_queue_depth: Gauge,
    /// Audit rows committed.
    pub audit_rows: Counter,
    /// Audit commits that failed.
    pub audit_commit_failures: Counter,
    /// Bypass alerts raised: API server events portcullis never sent.
    pub bypass_alerts: Counter,
    /// API server audit events of other users, counted and not kept.
    pub apiserver_audit_ignored: Counter,
    /// Calls waiting now for a person's decision on their held write.
    pub held_writes_waiting: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("portcullis");
        let requests = Family::<RequestLabels, Counter>::default();
        let upstream_latency = Family::<ClusterLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let open_streams = Gauge::default();
        let rejected_credentials = Family::<RejectLabels, Counter>::default();
        registry.register("requests", "Requests by cluster, verb and code", requests.clone());
        registry.register(
            "upstream_latency_seconds",
            "Time from forwarding to the cluster's response headers",
            upstream_latency.clone(),
        );
        registry.register(
            "open_streams",
            "Watches, log follows and upgraded streams open now",
            open_streams.clone(),
        );
        registry.register(
            "rejected_credentials",
            "Credentials refused, by reason",
            rejected_credentials.clone(),
        );
        let (audit_queue_depth, audit_rows, audit_commit_failures) = Default::default();
        registry.register(
            "audit_queue_depth",
            "Audit rows waiting for the writer",
            Gauge::clone(&audit_queue_depth),
        );
        registry.register("audit_rows", "Audit rows committed", Counter::clone(&audit_rows));
        registry.register(
            "audit_commit_failures",
            "Audit commits that failed",
            Counter::clone(&audit_commit_failures),
        );
        let (bypass_alerts, apiserver_audit_ignored) = Default::default();
        registry.register(
            "bypass_alerts",
            "API server audit events made as portcullis that portcullis never sent",
            Counter::clone(&bypass_alerts),
        );
        registry.register(
            "apiserver_audit_ignored_events",
            "API server audit events of other users, counted and not kept",
            Counter::clone(&apiserver_audit_ignored),
        );
        let held_writes_waiting = Gauge::default();
        registry.register(
            "held_writes_waiting",
            "Calls waiting now for a person's decision on their held write",
            held_writes_waiting.clone(),
        );
        Metrics {
            held_writes_waiting,
            bypass_alerts,
            apiserver_audit_ignored,
            registry,
            requests,
            upstream_latency,
            open_streams,
            rejected_credentials,
            audit_queue_depth,
            audit_rows,
            audit_commit_failures,
        }
    }
}

impl Metrics {
    /// The audit writer's metrics (shared with the registered ones).
    pub fn audit_writer(&self) -> crate::audit::writer::WriterMetrics {
        crate::audit::writer::WriterMetrics {
            queue_depth: self.audit_queue_depth.clone(),
            rows: self.audit_rows.clone(),
            failures: self.audit_commit_failures.clone(),
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
