//! Ports for servers the tests start, shared by the integration tests and
//! the benchmark driver (which starts the real control plane with
//! `tests/it/real/cluster.rs`). One file, so that a process has one counter
//! of the ports it handed out.

/// A port on 127.0.0.1 for a server a test starts on a port it must know
/// first (a callback URL registered at the provider, a replica's address).
///
/// Taken below the kernel's ephemeral range, and never handed out twice by
/// this process: a port found by binding port 0 and letting it go was
/// itself ephemeral, so a client connection's local port or a server
/// bound to port 0 could take it before the test's server bound it
/// ("Address already in use", seen in CI).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static HANDED_OUT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 10_000;
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768)
        .min(65_536);
    let span = ephemeral.saturating_sub(FIRST);
    assert!(
        span >= 1_000,
        "the ephemeral ports begin at {ephemeral}: too few ports below them"
    );
    // Two test runs at once start at different places.
    let offset = std::process::id() % span;
    for _ in 0..span {
        let port = FIRST + (offset + HANDED_OUT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = u16::try_from(port).expect("below 65536");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 between {FIRST} and {ephemeral}");
}

#[test]
fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
    let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
    let distinct: std::collections::HashSet<_> = ports.iter().collect();
    assert_eq!(distinct.len(), ports.len());
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let ephemeral: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    for port in ports {
        assert!(port < ephemeral, "{port} is an ephemeral port");
        std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    }
}
