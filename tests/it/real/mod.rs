//! The 'real cluster' tier: portcullis in front of a real kube-apiserver
//! (and the simulator compared with it). One control plane is started the
//! first time a test asks for it and shared by every test of this binary;
//! each test works in namespaces of its own, and each portcullis in front of
//! it has an instance id of its own, so tests sharing it never meet.

pub mod cluster;

use cluster::{RealCluster, Tools};
use std::path::Path;
use std::sync::OnceLock;

static SHARED: OnceLock<RealCluster> = OnceLock::new();

/// The control plane every test of this binary shares, started on first use.
/// Its processes end when the binary exits (their supervisors see their
/// stdin close), and the folder goes with them.
pub fn shared() -> &'static RealCluster {
    SHARED.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let parent = std::env::temp_dir().join("portcullis-tests");
        match RealCluster::start(&Tools::of_repository(root), &parent) {
            Ok(cluster) => {
                eprintln!(
                    "real control plane ready in {:.1?} at {}",
                    cluster.started_in, cluster.url
                );
                cluster
            }
            Err(err) => panic!("the real control plane did not start: {err}"),
        }
    })
}

mod apiserver_audit;
mod audit_join;
mod differential;
mod differential_cases;
mod differential_cases_more;
mod differential_shape;
mod fixture;
mod grants;
mod held_writes;
mod helm;
mod helm_postgres;
mod instances;
mod kubectl;
mod lease;
mod mcp;
mod secrets;
