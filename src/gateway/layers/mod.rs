//! The stages that wrap both a request and its answer, as tower layers
//! around the send to the cluster. `forward` composes them in one
//! `ServiceBuilder`; each is a `…Layer` and its service, in its own file.
//! The audit record ([`record`]) wraps every door, not only the send.

pub mod cap;
pub mod forward;
pub mod record;
pub mod redact;
