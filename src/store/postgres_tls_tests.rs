//! TLS to PostgreSQL: the server's certificate is checked, against the
//! system's roots and `[store] ca_file`.

use crate::store::testing;
use crate::store::Store;

/// Is this connection encrypted, as the server sees it?
fn encrypted(store: &Store) -> bool {
    store
        .with(|db| {
            Ok(db.query_row(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                crate::store::sql::params![],
                |r| r.get::<_, bool>(0),
            )?)
        })
        .unwrap()
}

#[test]
fn a_server_whose_certificate_chains_to_the_ca_file_is_reached_over_tls_and_one_that_does_not_is_refused() {
    let (server, ca_pem) = testing::postgres_with_tls();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let database = server.create_database("tls").unwrap();
    let required: tokio_postgres::Config = format!("{database}?sslmode=require").parse().unwrap();
    let store = Store::connect_with_ca(required.clone(), Some(&ca_file)).unwrap();
    assert!(encrypted(&store), "sslmode=require is encrypted");
    // The default, prefer: TLS whenever the server offers it.
    let preferred = Store::connect_with_ca(database.parse().unwrap(), Some(&ca_file)).unwrap();
    assert!(encrypted(&preferred), "TLS when offered");

    let Err(refused) = Store::connect(required) else {
        panic!("an unknown CA is refused")
    };
    assert!(refused.to_string().to_lowercase().contains("certificate"), "{refused}");
    let Err(unknown) = Store::connect(database.parse().unwrap()) else {
        panic!("never plain text in its place")
    };
    assert!(unknown.to_string().to_lowercase().contains("certificate"), "{unknown}");
}

#[test]
fn a_ca_file_without_a_certificate_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate").unwrap();
    let config: tokio_postgres::Config = "postgres://p@127.0.0.1:1/p".parse().unwrap();
    let err = Store::connect_with_ca(config, Some(&empty)).err().unwrap().to_string();
    assert!(err.contains("ca_file") && err.contains("empty.pem"), "{err}");
}
