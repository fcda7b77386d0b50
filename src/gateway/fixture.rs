//! A pipeline for the stages' unit tests: one cluster `c` whose "API
//! server" is a TCP listener that counts the connections it is offered and
//! closes them, so a test can tell whether a stage let a request reach the
//! cluster without any cluster behaviour standing in for the real one.

use super::Pipeline;
use crate::identity::{Agent, Identity, Principal};
use crate::store::Store;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A pipeline and what its cluster saw.
pub struct Fixture {
    /// The pipeline under test (shared, as the doors hold it).
    pub pipeline: Arc<Pipeline>,
    /// Connections offered to the cluster.
    pub connections: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// A pipeline with `[limits]` lines `limits` (TOML, may be empty).
    pub async fn new(limits: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, crate::tls::generate(&[]).unwrap().ca_pem).unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "sa-token").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = connections.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        let config = format!(
            r#"
listen = "127.0.0.1:0"
public_url = "https://127.0.0.1:8443"
data_dir = {data:?}
[tls]
cert_file = "c.pem"
key_file = "k.pem"
[limits]
{limits}
[[clusters]]
name = "c"
server = "https://127.0.0.1:{port}"
ca_file = {ca:?}
token_file = {token:?}
"#,
            data = dir.path(),
        );
        let config = crate::config::Config::from_sources(&config, Vec::new()).unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        let pipeline = Arc::new(Pipeline::new(&config, store).unwrap());
        Fixture {
            pipeline,
            connections,
            _dir: dir,
        }
    }

    /// Connections the cluster was offered so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A person's identity.
pub fn person() -> Identity {
    Identity {
        principal: Principal::person("ana"),
        credential_id: "c1".into(),
        origin: None,
        agent: None,
    }
}

/// An agent of ana's whose writes wait for a person's approval.
pub fn held_agent() -> Identity {
    Identity {
        agent: Some(Arc::new(Agent {
            id: "s1".into(),
            name: "helper".into(),
            principal: Principal::person("ana"),
            writes_need_approval: true,
            grant_ids: None,
            disabled: false,
        })),
        ..person()
    }
}
