//! Run the simulated cluster alone and write an admin kubeconfig:
//! `cargo run --example sim -- /tmp/sim.kubeconfig`, then
//! `kubectl --kubeconfig /tmp/sim.kubeconfig get pods -A`.

use portcullis_sim::{Sim, SimConfig};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "sim.kubeconfig".into());
    let sim = Sim::start(SimConfig::new()).await?;
    std::fs::write(&path, sim.kubeconfig(sim.admin_token()))?;
    println!(
        "simulated cluster at {}; admin kubeconfig in {path}; Ctrl-C stops it",
        sim.url()
    );
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await;
    Ok(())
}
