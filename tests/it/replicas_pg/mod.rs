//! Several `portcullis serve` processes on one PostgreSQL database (issue
//! 22): changes made through one replica reach the others' caches, a held
//! write decided on one wakes a call waiting on another and runs once, the
//! replicas append to one audit chain (a SIGKILL loses no answered row),
//! and the reconciler's Lease moves when its holder stops.
//!
//! Each test starts a harness [`Portcullis`] on a fresh database of the
//! shared test server, to set people up and to open the store as the
//! operator's CLI does, halts its in-process server, and starts replicas
//! as processes on that database, each with a data folder of its own as
//! pods have.

mod audit;
mod changes;
mod held;
mod lease;

use crate::harness::{Portcullis, Raw};
use crate::serve::Serve;
use http::Method;
use portcullis::audit::query::Filter;
use portcullis::audit::row::AuditRow;
use portcullis::config::Config;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

/// A harness on a fresh database of the shared PostgreSQL server, adjusted
/// by `adjust`; its in-process server still runs (set people up, then
/// [`Portcullis::halt`] it).
pub async fn on_postgres(adjust: impl FnOnce(&mut Config)) -> Portcullis {
    let url = tokio::task::spawn_blocking(|| crate::pg_fixture::shared().create_database("replicas"))
        .await
        .unwrap()
        .expect("a database of the test's own");
    Portcullis::start_with(move |c| {
        c.store.url = Some(url);
        adjust(c);
    })
    .await
}

/// One `portcullis serve` process on `env`'s database.
pub struct Replica {
    pub serve: Serve,
    /// Its configuration (its own data folder), to start it again with.
    pub config: Config,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
}

impl Replica {
    /// Start replica `name` (its data folder `<name>-data` in `env`'s
    /// folder), and wait until it answers `token`.
    pub async fn start(env: &Portcullis, name: &str, token: &str) -> Replica {
        let mut config = env.config.clone();
        config.data_dir = env.dir.path().join(format!("{name}-data"));
        Replica::start_with(env, config, name, token).await
    }

    /// Start `config` as replica `name` (again, after a kill: the same data
    /// folder, a new port and log).
    pub async fn start_with(env: &Portcullis, config: Config, name: &str, token: &str) -> Replica {
        let serve = Serve::start_with(env, config.clone(), token, name).await;
        // `Serve` wrote the configuration it runs with, its port included.
        let written = std::fs::read_to_string(env.dir.path().join(format!("{name}.toml"))).unwrap();
        let listen = toml::from_str::<Config>(&written).unwrap().listen;
        Replica {
            serve,
            config,
            url: format!("https://{listen}"),
        }
    }

    pub fn raw(&self) -> &Raw {
        &self.serve.raw
    }

    /// Call the person API (`/api/portcullis/v1/<call>`) with `token`; the
    /// status and the JSON answer.
    pub async fn api(&self, method: Method, call: &str, token: &str, body: Value) -> (u16, Value) {
        let auth = format!("Bearer {token}");
        let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
        let path = format!("/api/portcullis/v1/{call}");
        let answer = self
            .raw()
            .send(method, &path, &headers, body.to_string().into_bytes())
            .await;
        (answer.status.as_u16(), answer.json())
    }

    /// Run a person command (`approvals …`, `access …`) as the binary a
    /// person runs, against this replica with `token`.
    pub fn person_cli(&self, env: &Portcullis, token: &str, args: &[&str]) -> Output {
        let ca = env.dir.path().join("portcullis-ca.pem");
        std::fs::write(&ca, &env.ca_pem).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(args)
            .env("PORTCULLIS_SERVER", &self.url)
            .env("PORTCULLIS_CA_FILE", &ca)
            .env("PORTCULLIS_TOKEN", token)
            .env("HOME", env.dir.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("PORTCULLIS_CONFIG")
            .output()
            .expect("portcullis runs")
    }

    /// What the replica logged so far.
    pub fn log(env: &Portcullis, name: &str) -> String {
        std::fs::read_to_string(log_path(env, name)).unwrap_or_default()
    }
}

fn log_path(env: &Portcullis, name: &str) -> PathBuf {
    env.dir.path().join(format!("{name}.log"))
}

/// How soon a change committed through one replica must show on another:
/// well below the caches' lifetime in these tests ([`CACHE_TTL`]), so that
/// only the store's word of the change meets it, never the entry's expiry,
/// and with room for a loaded machine.
pub const WITHIN: Duration = Duration::from_secs(30);

/// How long the replicas of the change tests keep credentials and grants
/// they looked up (`[store] cache_ttl`; 2 s by default).
pub const CACHE_TTL: Duration = Duration::from_secs(150);

/// Poll `check` until it holds, failing once `deadline` has passed
/// (`what` and the last value seen say what did not happen).
pub async fn by<T: std::fmt::Debug>(deadline: Instant, what: &str, mut check: impl AsyncFnMut() -> Result<(), T>) {
    loop {
        let last = match check().await {
            Ok(()) => return,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "{what}: not by the deadline (last: {last:?})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every audit row `filter` picks (all of them, oldest first), read from
/// the database as `portcullis admin audit` reads it.
pub fn audit_rows(env: &Portcullis, filter: Filter) -> Vec<AuditRow> {
    let mut audit = portcullis::audit::open(&env.store).unwrap();
    audit.query(&filter).unwrap().into_iter().map(|c| c.row).collect()
}

/// `portcullis admin audit verify` with the PostgreSQL configuration: what
/// it printed, once it says the chain is intact.
pub fn verify_audit(env: &Portcullis) -> String {
    let verified = env.cli(&["admin", "audit", "verify"]);
    let said = String::from_utf8_lossy(&verified.stdout).into_owned();
    assert!(
        verified.status.success() && said.contains("audit chain intact"),
        "{said}{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    said
}
