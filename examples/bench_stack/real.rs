//! `real DIR`: the real control plane (etcd, kube-apiserver and
//! kube-controller-manager, as the real-cluster tests start it) with the
//! objects the small-GET and LIST scenarios read.

use super::cluster::{RealCluster, Tools};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the controller manager may take to give namespace `bench` its
/// `default` ServiceAccount, without which no pod can be created.
const SERVICE_ACCOUNT_WITHIN: Duration = Duration::from_secs(60);

/// Start the control plane, create the objects as its admin, write its
/// files, run until SIGTERM or Ctrl-C.
pub async fn run(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let dir = dir.canonicalize()?;
    let started = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || start(&dir)).await??
    };
    let (cluster, objects_in) = started;
    std::fs::write(dir.join("real-cluster-ca.pem"), &cluster.ca_pem)?;
    std::fs::write(dir.join("real-cluster-token"), &cluster.portcullis_token)?;
    std::fs::write(dir.join("real-admin.kubeconfig"), kubeconfig(&cluster, &dir))?;
    let info = json!({
        "url": cluster.url,
        "admin_token": cluster.admin_token,
        "ca_file": dir.join("real-cluster-ca.pem"),
        "pid": std::process::id(),
        "started_seconds": cluster.started_in.as_secs_f64(),
        "objects_seconds": objects_in.as_secs_f64(),
    });
    // Written last and renamed into place: its presence means "ready".
    let tmp = dir.join("real.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&info)?)?;
    std::fs::rename(&tmp, dir.join("real.json"))?;
    eprintln!(
        "real control plane at {} (started in {:.1?}, objects created in {objects_in:.1?})",
        cluster.url, cluster.started_in
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tokio::task::spawn_blocking(move || cluster.stop()).await?;
    Ok(())
}

/// The control plane with the benchmark's objects, and how long creating
/// them took.
fn start(dir: &Path) -> anyhow::Result<(RealCluster, Duration)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cluster = RealCluster::start(&Tools::of_repository(root), dir)?;
    let began = Instant::now();
    create_objects(&cluster, dir)?;
    Ok((cluster, began.elapsed()))
}

/// Namespace `bench`, the 1 KiB ConfigMap `small` and 500 pods, created by
/// the admin as the simulator holds them.
fn create_objects(cluster: &RealCluster, dir: &Path) -> anyhow::Result<()> {
    use super::objects::{self, NAMESPACE};
    cluster.admin(&["create", "namespace", NAMESPACE])?;
    let deadline = Instant::now() + SERVICE_ACCOUNT_WITHIN;
    while cluster
        .admin(&["get", "serviceaccount", "default", "-n", NAMESPACE])
        .is_err()
    {
        anyhow::ensure!(Instant::now() < deadline, "no default ServiceAccount in {NAMESPACE}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let items: Vec<Value> = objects::all()
        .into_iter()
        .filter(|o| o["metadata"]["namespace"] == NAMESPACE && matches!(o["kind"].as_str(), Some("ConfigMap" | "Pod")))
        .map(without_status)
        .collect();
    anyhow::ensure!(
        items.len() == objects::COUNT + 1,
        "expected the ConfigMap and {} pods",
        objects::COUNT
    );
    // `create`, not `apply`: no last-applied annotation doubling each pod.
    // Four kubectl processes, so the 501 requests overlap.
    let chunks: Vec<_> = items.chunks(items.len().div_ceil(4)).enumerate().collect();
    std::thread::scope(|scope| {
        let runs: Vec<_> = chunks
            .iter()
            .map(|(i, chunk)| {
                let file = dir.join(format!("real-objects-{i}.json"));
                scope.spawn(move || -> anyhow::Result<()> {
                    std::fs::write(
                        &file,
                        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": chunk}))?,
                    )?;
                    cluster.admin(&["create", "-f", &file.display().to_string(), "-o", "name"])?;
                    Ok(std::fs::remove_file(&file)?)
                })
            })
            .collect();
        runs.into_iter()
            .try_for_each(|run| run.join().map_err(|_| anyhow::anyhow!("a kubectl create panicked"))?)
    })
}

/// The object as a client creates it: the API server sets a new pod's
/// status itself (Pending: there is no scheduler and no kubelet).
fn without_status(mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    object
}

/// An admin kubeconfig (for `kubectl proxy`) with the CA in `dir`, so that
/// nothing outside `dir` is needed while the cluster runs.
fn kubeconfig(cluster: &RealCluster, dir: &Path) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
         users:\n- name: admin\n  user:\n    token: {}\ncontexts:\n- name: real\n  context: {{cluster: real, user: admin}}\n\
         current-context: real\n",
        cluster.url,
        dir.join("real-cluster-ca.pem").display(),
        cluster.admin_token
    )
}
