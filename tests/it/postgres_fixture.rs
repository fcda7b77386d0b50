//! The PostgreSQL server the store's tests run against
//! (`tests/support/postgres.rs`): started in a folder of its own, one
//! database per test, stopped and started again under a test, and gone
//! with everything it made when dropped.

use crate::pg_fixture::{self, PgServer};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::Path;

/// The pid of the server's postmaster (first line of its postmaster.pid).
fn postmaster_pid(server: &PgServer) -> String {
    let pid_file = std::fs::read_to_string(server.dir().join("data/postmaster.pid")).unwrap();
    pid_file.lines().next().unwrap().to_string()
}

/// The effective uid of a process, from the `Uid:` line of its status.
fn effective_uid(pid: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let ids = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    ids.split_whitespace().nth(1).map(str::to_string)
}

fn connects(ip: std::net::IpAddr, port: u16) -> bool {
    TcpStream::connect_timeout(&SocketAddr::new(ip, port), std::time::Duration::from_secs(5)).is_ok()
}

#[test]
fn a_server_runs_as_the_postgres_user_under_root_and_dropping_it_stops_it_and_removes_its_folder() {
    let server = PgServer::start().unwrap();
    let url = server.create_database("dropped").unwrap();
    assert_eq!(server.psql(&url, "SELECT 40 + 2").unwrap(), "42");
    let (dir, port, pid) = (server.dir().to_path_buf(), server.port(), postmaster_pid(&server));
    let postgres_uid = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find_map(|line| {
            line.strip_prefix("postgres:x:")
                .map(|rest| rest.split(':').next().unwrap().to_string())
        });
    if effective_uid("self").as_deref() == Some("0") {
        assert_eq!(effective_uid(&pid), postgres_uid, "initdb and postgres refuse root");
    }
    drop(server);
    assert!(effective_uid(&pid).is_none(), "the postmaster {pid} has gone");
    assert!(!dir.exists(), "{} is removed", dir.display());
    assert!(!connects(Ipv4Addr::LOCALHOST.into(), port), "nothing listens on {port}");
}

#[test]
fn two_databases_of_one_server_are_independent() {
    let server = pg_fixture::shared();
    let first = server.create_database("independent").unwrap();
    let second = server.create_database("independent").unwrap();
    assert_ne!(first, second);
    server
        .psql(&first, "CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('first')")
        .unwrap();
    let tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 't'";
    assert_eq!(server.psql(&second, tables).unwrap(), "0", "the second has no table t");
    server
        .psql(&second, "CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('second')")
        .unwrap();
    assert_eq!(server.psql(&first, "SELECT v FROM t").unwrap(), "first");
    assert_eq!(server.psql(&second, "SELECT v FROM t").unwrap(), "second");
}

#[test]
fn a_server_stopped_and_started_again_keeps_its_data_on_the_same_port() {
    let server = PgServer::start().unwrap();
    let url = server.create_database("restarted").unwrap();
    server
        .psql(&url, "CREATE TABLE kept (n BIGINT); INSERT INTO kept VALUES (1), (2)")
        .unwrap();
    server.stop().unwrap();
    assert!(!server.is_ready());
    let refused = server.psql(&url, "SELECT 1").unwrap_err().to_string();
    assert!(refused.contains("Connection refused"), "{refused}");
    server.start_again().unwrap();
    assert_eq!(server.psql(&url, "SELECT sum(n) FROM kept").unwrap(), "3");
    assert!(url.contains(&format!("127.0.0.1:{}/", server.port())));
    server.stop().unwrap();
    server.stop().unwrap();
    server.start_again().unwrap();
    server.start_again().unwrap();
    assert_eq!(
        server.psql(&url, "INSERT INTO kept VALUES (3) RETURNING n").unwrap(),
        "3"
    );
}

#[test]
fn the_shared_server_listens_on_the_loopback_address_only_with_its_socket_in_its_folder() {
    let server = pg_fixture::shared();
    assert!(std::ptr::eq(server, pg_fixture::shared()), "one server per process");
    let port = server.port();
    assert_eq!(server.psql("postgres", "SHOW listen_addresses").unwrap(), "127.0.0.1");
    assert!(connects(Ipv4Addr::LOCALHOST.into(), port));
    assert!(
        !connects(Ipv4Addr::new(127, 0, 0, 2).into(), port),
        "not on every address"
    );
    assert!(!connects(Ipv6Addr::LOCALHOST.into(), port), "not on ::1");
    let sockets = server.psql("postgres", "SHOW unix_socket_directories").unwrap();
    assert_eq!(Path::new(&sockets), server.dir());
    assert!(server.dir().join(format!(".s.PGSQL.{port}")).exists());
    assert!(!Path::new(&format!("/var/run/postgresql/.s.PGSQL.{port}")).exists());
}
