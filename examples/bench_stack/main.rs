//! The benchmark's driver (`scripts/bench` runs it; see `benches/README.md`).
//!
//! One binary, several parts, so that a release build links the crate once:
//!
//! - `sim DIR`: the simulated cluster with the benchmark's objects, until
//!   SIGTERM or Ctrl-C; writes `DIR/sim.json`, the CA, tokens and an admin
//!   kubeconfig (for `kubectl proxy`).
//! - `real DIR`: the real control plane (`tests/it/real/cluster.rs`, the
//!   one the real-cluster tests start) with the ConfigMap and the 500 pods
//!   the small-GET and LIST scenarios read, until SIGTERM or Ctrl-C; writes
//!   `DIR/real.json`, its CA, portcullis's ServiceAccount token and an admin
//!   kubeconfig.
//! - `setup DIR`: portcullis's configuration, TLS files and store in front
//!   of both clusters (`sim` and `real`): person `bench` (admin of namespace
//!   `bench` on each, so Secret values are revealed) and an agent acting
//!   for it on `sim` (values redacted); writes `DIR/portcullis.toml` and
//!   `DIR/stack.json`. `portcullis serve` is then started on it by the
//!   script, as an operator would.
//! - `watch …`: open N watches through one path over HTTP/2 (or HTTP/1.1),
//!   read a process's resident memory before and after, change the watched
//!   object and time its delivery to every watch.
//! - `mcp …`: latency per MCP `get_resource` and `list_resources` call.
//! - `audit …`: rows per second the audit writer sustains alone, and rows
//!   lost.
//! - `redact …`: Secret redaction throughput on one core.
//! - `train DIR`: the requests a profile-guided build learns from
//!   (`scripts/pgo-build`).
//!
//! Every result is one JSON object on stdout; progress goes to stderr.

mod audit;
// The real-cluster tests' control plane, shared rather than copied.
#[path = "../../tests/it/real/cluster.rs"]
mod cluster;
mod mcp;
mod objects;
#[path = "../../tests/support/port.rs"]
mod port;
mod real;
mod redact;
mod setup;
mod sim;
mod tls;
mod train;
mod watch;

use std::path::PathBuf;

/// What to run.
#[derive(clap::Parser)]
enum Command {
    /// Run the simulated cluster with the benchmark's objects.
    Sim {
        /// Where to write sim.json and the cluster's files.
        dir: PathBuf,
    },
    /// Run the real control plane with the benchmark's objects.
    Real {
        /// Where to write real.json and the cluster's files.
        dir: PathBuf,
    },
    /// Write portcullis's configuration and store for the running clusters.
    Setup {
        /// The directory `sim` and `real` wrote to.
        dir: PathBuf,
    },
    /// Watches: memory per watch and delivery latency of one event.
    Watch(watch::Args),
    /// MCP tool call latency.
    Mcp(mcp::Args),
    /// Audit writer throughput.
    Audit(audit::Args),
    /// Secret redaction throughput on one core.
    Redact(redact::Args),
    /// The requests a profile-guided build learns from.
    Train(train::Args),
}

fn main() -> anyhow::Result<()> {
    use clap::Parser;
    let command = Command::parse();
    if let Command::Redact(args) = command {
        return redact::run(args);
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        match command {
            Command::Sim { dir } => sim::run(&dir).await,
            Command::Real { dir } => real::run(&dir).await,
            Command::Setup { dir } => setup::run(&dir).await,
            Command::Watch(args) => watch::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
            Command::Audit(args) => audit::run(args).await,
            Command::Train(args) => train::run(args).await,
            Command::Redact(_) => Ok(()),
        }
    })
}

/// Median, 99th percentile and maximum of `samples` (sorted in place), in
/// the samples' unit.
pub fn percentiles(samples: &mut [f64]) -> serde_json::Value {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if samples.is_empty() {
            return 0.0;
        }
        let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[index]
    };
    serde_json::json!({"count": samples.len(), "p50": at(0.5), "p99": at(0.99), "max": at(1.0)})
}
