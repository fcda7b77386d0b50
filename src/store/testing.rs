//! Stores for tests, on both backends: every repository test runs on a
//! fresh SQLite file and on a fresh PostgreSQL database of the test
//! process's shared server (`tests/support/postgres.rs`).

use super::Store;

#[path = "../../tests/support/postgres.rs"]
pub(crate) mod pg_fixture;

/// A store and what keeps it alive.
pub(crate) struct TestStore {
    /// Which backend, for assertion messages.
    pub backend: &'static str,
    /// The store.
    pub store: Store,
    _dir: Option<tempfile::TempDir>,
}

impl std::ops::Deref for TestStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

/// A fresh SQLite store.
pub(crate) fn sqlite() -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    TestStore {
        backend: "sqlite",
        store,
        _dir: Some(dir),
    }
}

/// A fresh PostgreSQL store (its own database on the shared server).
pub(crate) fn postgres() -> TestStore {
    let url = pg_fixture::shared().create_database("store").unwrap();
    let store = Store::connect(url.parse().unwrap()).unwrap();
    TestStore {
        backend: "postgres",
        store,
        _dir: None,
    }
}

/// Runs `f(i)` for `i` in `0..n` on `n` threads released at the same
/// moment (on PostgreSQL each takes a connection of its own, as replicas
/// do); their answers, in order.
pub(crate) fn race<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let start = std::sync::Barrier::new(n);
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..n)
            .map(|i| {
                let (start, f) = (&start, &f);
                s.spawn(move || {
                    start.wait();
                    f(i)
                })
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    })
}

/// A fresh store of each backend, for a test to run on both.
pub(crate) fn both() -> [TestStore; 2] {
    [sqlite(), postgres()]
}

/// A PostgreSQL server of its own that also takes TLS, with a certificate
/// for 127.0.0.1 from a CA of its own; the server (stopped when dropped)
/// and the CA's PEM.
pub(crate) fn postgres_with_tls() -> (pg_fixture::PgServer, String) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let server = pg_fixture::PgServer::start().unwrap();
    let generated = crate::tls::generate(&[]).unwrap();
    let data = server.dir().join("data");
    for (name, pem) in [("server.crt", &generated.cert_pem), ("server.key", &generated.key_pem)] {
        let path = data.join(name);
        std::fs::write(&path, pem).unwrap();
        // PostgreSQL refuses a key others may read, and runs as postgres.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let owner = std::fs::metadata(&data).unwrap();
        std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid())).unwrap();
    }
    server.psql("postgres", "ALTER SYSTEM SET ssl = on").unwrap();
    server.psql("postgres", "SELECT pg_reload_conf()").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.psql("postgres", "SHOW ssl").unwrap().trim() != "on" {
        assert!(
            std::time::Instant::now() < deadline,
            "TLS never came on: {}",
            server.log_tail()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (server, generated.ca_pem)
}
