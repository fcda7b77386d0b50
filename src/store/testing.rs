//! Stores for tests, on both backends: every repository test runs on a
//! fresh SQLite file and on a fresh PostgreSQL database of the test
//! process's shared server (`tests/support/postgres.rs`).

use super::Store;

#[path = "../../tests/support/postgres.rs"]
#[allow(dead_code)]
mod pg_fixture;

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

/// A fresh store of each backend, for a test to run on both.
pub(crate) fn both() -> [TestStore; 2] {
    [sqlite(), postgres()]
}
