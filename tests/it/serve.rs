//! `portcullis serve` as its own process, as an operator runs it: the
//! tests of crashes and of several replicas start it beside a harness
//! [`Portcullis`] whose configuration (cluster, CA, keys) it reuses. What
//! the process asks of the kernel for its memory is tested here.

use crate::audit::audit_id;
use crate::harness::{Portcullis, Raw, CLUSTER};
use crate::signin::free_port;
use crate::support::eventually;
use portcullis::config::Config;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A small GET: the shop namespace's ConfigMaps.
pub fn configmaps() -> String {
    format!("/clusters/{CLUSTER}/api/v1/namespaces/shop/configmaps")
}

/// `portcullis serve` as its own process, as an operator runs it, with
/// `env`'s configuration on a port of its own.
pub struct Serve {
    pub child: Child,
    pub raw: Arc<Raw>,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
}

impl Serve {
    /// Start it (its log in `<name>.log`) and wait until it answers `token`.
    pub async fn start(env: &Portcullis, token: &str, name: &str) -> Serve {
        Serve::start_with(env, env.config.clone(), token, name).await
    }

    /// Start it with `config` (its listen address replaced by a free port).
    pub async fn start_with(env: &Portcullis, mut config: Config, token: &str, name: &str) -> Serve {
        config.listen = format!("127.0.0.1:{}", free_port());
        let path = env.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
        let log = std::fs::File::create(env.dir.path().join(format!("{name}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .arg("--config")
            .arg(&path)
            .arg("serve")
            .env_remove("PORTCULLIS_CONFIG")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("portcullis serve starts");
        let raw = Arc::new(Raw::with_ca(&env.ca_pem, format!("https://{}", config.listen)));
        let addr = config.listen.parse().unwrap();
        let serve = Serve { child, raw, addr };
        let answered = async || serve.raw.try_get(&configmaps(), token).await.map(|r| r.status);
        eventually(&format!("{name} answering"), async || {
            answered().await.filter(|s| *s == 200)
        })
        .await;
        serve
    }

    /// Kill it as the OOM killer would: SIGKILL, no shutdown.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Stop it as Kubernetes stops a pod (SIGTERM), and wait for its exit.
    pub async fn terminate(mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let exited = eventually("serve exiting", async || self.child.try_wait().unwrap()).await;
        assert!(exited.success(), "a clean shutdown: {exited}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET until `stop`, keeping the audit id of every 2xx answer received
/// whole.
pub async fn load(raw: Arc<Raw>, token: String, answered: Arc<Mutex<Vec<String>>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        if let Some(response) = raw.try_get(&configmaps(), &token).await {
            if response.status.is_success() {
                answered.lock().unwrap().push(audit_id(&response));
            }
        }
    }
}

/// The memory mappings of process `pid` that ask the kernel for
/// transparent huge pages (`hg` among their `VmFlags` in
/// `/proc/<pid>/smaps`), by address range; and how many mappings there are.
fn huge_page_mappings(pid: u32) -> (Vec<String>, usize) {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let (mut asked, mut mappings, mut range) = (Vec::new(), 0, "");
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            mappings += 1;
            if flags.split_whitespace().any(|flag| flag == "hg") {
                asked.push(range.to_string());
            }
        } else if let Some(first) = line.split_whitespace().next().filter(|w| !w.ends_with(':')) {
            // A mapping's first line: its address range, then the rest.
            range = first;
        }
    }
    (asked, mappings)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_process_asks_for_no_transparent_huge_pages() {
    // mimalloc marks its arenas MADV_HUGEPAGE unless built with `no_thp`;
    // the kernel then zeroes 2 MiB at each first touch, which the audit
    // thread paid for over and over (benches/RESULTS.md).
    let mut env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    env.halt().await;
    let serve = Serve::start(&env, &token, "pages").await;
    for _ in 0..200 {
        assert_eq!(serve.raw.get(&configmaps(), &token).await.status, 200);
    }
    let (asked, mappings) = huge_page_mappings(serve.child.id());
    assert!(mappings > 10, "smaps lists the process's mappings with their flags");
    assert!(asked.is_empty(), "mappings marked for huge pages: {asked:?}");
    drop(serve);
    env.stop().await;
}
