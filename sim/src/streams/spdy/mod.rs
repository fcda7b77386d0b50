//! SPDY/3.1, the server side: what kubectl's SPDY fallback and the
//! port-forward tunnel speak (moby/spdystream on the client).

pub mod conn;
pub mod dictionary;
pub mod frame;
pub mod headers;

pub use conn::{serve, Conn, Event};
