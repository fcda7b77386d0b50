//! A PostgreSQL server for tests: Debian's PostgreSQL 15 (`scripts/setup`
//! installs it), made with `initdb` in a fresh temporary folder and listening
//! on a free port of 127.0.0.1 only, its unix socket inside the folder.
//!
//! Depends on nothing but std, so that the library's unit tests and the
//! integration tests include the same file:
//!
//! ```ignore
//! #[cfg(test)]
//! #[path = "../../tests/support/postgres.rs"]
//! mod pg_fixture;
//! ```
//!
//! `initdb`, `postgres` and `pg_ctl` refuse to run as root, and CI runs as
//! root: then they run as the `postgres` user, which owns the folder.
//!
//! The server dies with the test process however it ends: it runs under a
//! small shell that shuts it down (immediately) when the test process's end
//! of the shell's stdin closes, and a janitor removes the folder once it is
//! gone. So a [`shared`] server, which is never dropped, is stopped too.

#![allow(dead_code)]

/// Ports for the servers tests start: one counter for the whole process,
/// so the integration tests take theirs from here too.
#[path = "port.rs"]
pub mod port;

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where Debian's PostgreSQL 15 binaries are.
pub const BIN_DIR: &str = "/usr/lib/postgresql/15/bin";

/// The superuser `initdb` makes; every connection is trusted.
pub const SUPERUSER: &str = "postgres";

/// How long a start may take: about a second on a loaded 2-core machine;
/// this only bounds a broken one.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Ports are chosen free and then bound by the server: another process may
/// take one in between, so a start tries this many ports.
const START_ATTEMPTS: usize = 3;

/// A running PostgreSQL server in a folder of its own. Dropping it stops
/// the server and removes the folder.
pub struct PgServer {
    port: u16,
    dir: PathBuf,
    as_postgres: bool,
    /// The supervising shell of the running server, if it runs.
    server: Mutex<Option<Child>>,
    janitor: Mutex<Option<Child>>,
}

impl std::fmt::Debug for PgServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgServer(127.0.0.1:{}, {})", self.port, self.dir.display())
    }
}

/// One server for every test of this process that asks for it, each using
/// a database of its own ([`PgServer::create_database`]). Started at the
/// first call; stopped when the process ends. Tests that stop the server
/// start their own with [`PgServer::start`].
pub fn shared() -> &'static PgServer {
    static SHARED: OnceLock<PgServer> = OnceLock::new();
    SHARED.get_or_init(|| PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL for the tests: {e}")))
}

impl PgServer {
    /// Make a new database cluster in a temporary folder and start a server
    /// on it, listening on a free port of 127.0.0.1; returns once it
    /// accepts connections.
    pub fn start() -> io::Result<PgServer> {
        for program in ["initdb", "pg_ctl", "postgres", "pg_isready", "psql", "createdb"] {
            if !Path::new(BIN_DIR).join(program).exists() {
                return Err(io::Error::other(format!(
                    "{BIN_DIR}/{program} is missing: scripts/setup installs postgresql-15"
                )));
            }
        }
        let mut server = PgServer {
            port: 0,
            dir: new_folder()?,
            as_postgres: effective_uid_is_root(),
            server: Mutex::new(None),
            janitor: Mutex::new(None),
        };
        server.spawn_janitor()?;
        if server.as_postgres {
            checked(
                Command::new("chown")
                    .arg(format!("{SUPERUSER}:"))
                    .arg(&server.dir)
                    .output(),
                "chown",
            )?;
        }
        server.init()?;
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            // Below the ephemeral range: a server stopped and started again
            // on it (`start_again`) would otherwise find it taken meanwhile
            // as some connection's local port.
            server.port = port::free_port();
            match server.start_again() {
                Ok(()) => return Ok(server),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("PostgreSQL did not start")))
    }

    /// The port the server listens on (127.0.0.1 only).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder of the server's files: the data directory (`data/`), the
    /// unix socket and the server's log (`postgres.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The URL of `database` on this server, as the superuser.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{database}", self.port)
    }

    /// A new, empty database named `<prefix>_<number>` (lower-cased, only
    /// letters, digits and `_` kept from `prefix`); its URL.
    pub fn create_database(&self, prefix: &str) -> io::Result<String> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut name: String = prefix
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(40)
            .collect();
        if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
            name.insert_str(0, "db_");
        }
        let name = format!("{name}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let out = self.client("createdb").arg(&name).output();
        checked(out, "createdb")?;
        Ok(self.url(&name))
    }

    /// Run `sql` with psql in `database` (a name, or a URL of this server),
    /// stopping at the first error; the rows it printed, unaligned, fields
    /// separated by `|`, without headers.
    pub fn psql(&self, database: &str, sql: &str) -> io::Result<String> {
        self.psql_with(database, &["-c", sql])
    }

    /// Run the SQL file `path` with psql in `database`, in one transaction,
    /// stopping at the first error; what it printed.
    pub fn psql_file(&self, database: &str, path: &Path) -> io::Result<String> {
        self.psql_with(database, &["--single-transaction", "-f", &path.display().to_string()])
    }

    fn psql_with(&self, database: &str, args: &[&str]) -> io::Result<String> {
        let out = self
            .client("psql")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", database])
            .args(args)
            .output();
        let out = checked(out, "psql")?;
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    }

    /// Does the server accept connections now?
    pub fn is_ready(&self) -> bool {
        self.client("pg_isready")
            .arg("-q")
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Stop the server as `pg_ctl stop -m fast` does (sessions are ended,
    /// everything committed is kept); returns once it is down. Nothing
    /// happens if it is not running.
    pub fn stop(&self) -> io::Result<()> {
        let mut server = lock(&self.server);
        let Some(mut child) = server.take() else {
            return Ok(());
        };
        let stopped = checked(
            self.as_owner("pg_ctl")
                .args(["stop", "-m", "fast", "-w", "-t", "60", "-D"])
                .arg(self.dir.join("data"))
                .output(),
            "pg_ctl stop",
        );
        // Its supervisor ends with it; closing its stdin ends it regardless.
        drop(child.stdin.take());
        child.wait()?;
        stopped.map(|_| ())
    }

    /// Start the server again on the same folder and port; returns once it
    /// accepts connections. Nothing happens if it is running.
    pub fn start_again(&self) -> io::Result<()> {
        let mut server = lock(&self.server);
        if server.is_some() {
            return Ok(());
        }
        let mut child = self.spawn_server()?;
        let deadline = Instant::now() + READY_WITHIN;
        while !self.is_ready() {
            let exited = child.try_wait()?;
            if exited.is_some() || Instant::now() > deadline {
                drop(child.stdin.take());
                let _ = child.wait();
                return Err(io::Error::other(format!(
                    "PostgreSQL on port {} did not start ({}):\n{}",
                    self.port,
                    exited.map_or("not ready in time".to_string(), |s| s.to_string()),
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        *server = Some(child);
        Ok(())
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn init(&self) -> io::Result<()> {
        let out = self
            .as_owner("initdb")
            .args([
                "--auth=trust",
                "--locale=C",
                "--encoding=UTF8",
                "--no-sync",
                "--no-instructions",
            ])
            .args(["-U", SUPERUSER, "-D"])
            .arg(self.dir.join("data"))
            .output();
        checked(out, "initdb").map(|_| ())
    }

    /// `postgres` under [`SUPERVISE`], logging into the folder.
    fn spawn_server(&self) -> io::Result<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("postgres.log"))?;
        let server = self.as_owner("postgres");
        let mut supervised = Command::new("bash");
        supervised
            .arg("-c")
            .arg(SUPERVISE)
            .arg("postgres")
            .arg(server.get_program())
            .args(server.get_args())
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(&self.dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300"])
            // A test's data lives as long as its process: what a commit
            // writes reaches the kernel, which is all a server killed or
            // stopped needs; not the disk.
            .args(["-c", "fsync=off"])
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log);
        supervised.spawn()
    }

    /// Removes the folder once the test process has closed its stdin (by
    /// dropping the server, or by ending) and the server has gone.
    fn spawn_janitor(&self) -> io::Result<()> {
        let janitor = Command::new("bash")
            .arg("-c")
            .arg(JANITOR)
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        *lock(&self.janitor) = Some(janitor);
        Ok(())
    }

    /// A client program of this server, as the superuser over TCP.
    fn client(&self, program: &str) -> Command {
        let mut command = Command::new(Path::new(BIN_DIR).join(program));
        command
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", SUPERUSER])
            .env_remove("PGDATABASE")
            .env_remove("PGSERVICE");
        command
    }

    /// A server program, as the folder's owner: the `postgres` user when
    /// the tests run as root.
    fn as_owner(&self, program: &str) -> Command {
        let path = Path::new(BIN_DIR).join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("setpriv");
            command
                .args([
                    &format!("--reuid={SUPERUSER}"),
                    &format!("--regid={SUPERUSER}"),
                    "--init-groups",
                    "--",
                ])
                .arg(path);
            command
        } else {
            Command::new(path)
        };
        command.current_dir(&self.dir);
        command
    }
}

impl Drop for PgServer {
    /// As if the test process ended: the supervisor shuts the server down
    /// at once, then the janitor removes the folder.
    fn drop(&mut self) {
        if let Some(mut child) = lock(&self.server).take() {
            drop(child.stdin.take());
            let _ = child.wait();
        }
        if let Some(mut janitor) = lock(&self.janitor).take() {
            drop(janitor.stdin.take());
            let _ = janitor.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs "$@" (without the pipe: fd 3 is closed for it) and shuts it down
/// immediately (SIGQUIT: the postmaster ends its backends and exits) at
/// the end of stdin, fd 3 here since a background command's own stdin is
/// /dev/null; exits when it exits, taking the reader with it so that it
/// signals no later process that reused the pid.
const SUPERVISE: &str = r#"exec 3<&0
"$@" 3<&- &
pid=$!
{ read -r _ <&3; kill -QUIT "$pid" 2>/dev/null; } &
reader=$!
wait "$pid"
status=$?
kill "$reader" 2>/dev/null
exit "$status""#;

/// Waits for the end of stdin, then for the server of the folder ($0) to
/// go (the pid in its postmaster.pid), then removes the folder.
const JANITOR: &str = r#"read -r _
pidfile="$0/data/postmaster.pid"
while [ -e "$pidfile" ] && kill -0 "$(head -n 1 "$pidfile")" 2>/dev/null; do sleep 0.05; done
rm -rf "$0""#;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The output of a finished command, or an error with its stderr.
fn checked(out: io::Result<Output>, what: &str) -> io::Result<Output> {
    let out = out.map_err(|e| io::Error::other(format!("{what}: {e}")))?;
    if out.status.success() {
        return Ok(out);
    }
    Err(io::Error::other(format!(
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// A new folder in the temporary directory, which the `postgres` user can
/// reach (a unix socket path is at most 107 bytes: keep it short).
fn new_folder() -> io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "pg-{}-{}-{nanos:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// Whether this process runs as root (the effective uid, second on the
/// `Uid:` line of /proc/self/status).
fn effective_uid_is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}
