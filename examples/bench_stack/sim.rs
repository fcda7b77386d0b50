//! `sim DIR`: the simulated cluster with the benchmark's objects.

use portcullis_sim::{Sim, SimConfig};
use std::path::Path;

/// Start the cluster, write its files, run until SIGTERM or Ctrl-C.
pub async fn run(dir: &Path) -> anyhow::Result<()> {
    let mut config = SimConfig::new();
    config.objects.extend(super::objects::all());
    let sim = Sim::start(config).await?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("cluster-ca.pem"), sim.ca_pem())?;
    std::fs::write(dir.join("cluster-token"), sim.portcullis_token())?;
    std::fs::write(dir.join("admin.kubeconfig"), sim.kubeconfig(sim.admin_token()))?;
    let info = serde_json::json!({
        "url": sim.url(),
        "admin_token": sim.admin_token(),
        "ca_file": dir.join("cluster-ca.pem"),
        "pid": std::process::id(),
    });
    // Written last and renamed into place: its presence means "ready".
    let tmp = dir.join("sim.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&info)?)?;
    std::fs::rename(&tmp, dir.join("sim.json"))?;
    eprintln!("simulated cluster at {}", sim.url());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    sim.shutdown().await;
    Ok(())
}
