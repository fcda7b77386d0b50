//! `redact`: Secret redaction throughput on one core — the LIST of the
//! benchmark's 500 Secrets redacted again and again on this thread.

use portcullis::secrets::{redact_json, Target};
use std::time::{Duration, Instant};

/// Command-line arguments of `redact`.
#[derive(clap::Args)]
pub struct Args {
    /// How long to keep redacting.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
}

/// Redact for `seconds`; print one JSON object with MB/s (10^6 bytes of
/// input per second).
pub fn run(args: Args) -> anyhow::Result<()> {
    let secrets: Vec<_> = super::objects::all()
        .into_iter()
        .filter(|o| o["kind"] == "Secret")
        .collect();
    let list = serde_json::json!({
        "apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "1"}, "items": secrets,
    });
    let body = serde_json::to_vec(&list)?;
    let budget = Duration::from_secs_f64(args.seconds);
    let started = Instant::now();
    let mut rounds = 0u64;
    let mut out_bytes = 0;
    while started.elapsed() < budget || rounds == 0 {
        let redacted = redact_json(&body, Target::Secrets)?.ok_or_else(|| anyhow::anyhow!("nothing redacted"))?;
        anyhow::ensure!(redacted.windows(9).any(|w| w == b"<redacted"), "values not redacted");
        out_bytes = redacted.len();
        rounds += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let result = serde_json::json!({
        "input_bytes": body.len(),
        "output_bytes": out_bytes,
        "rounds": rounds,
        "mb_per_second": (body.len() as u64 * rounds) as f64 / seconds / 1e6,
    });
    println!("{result}");
    Ok(())
}
