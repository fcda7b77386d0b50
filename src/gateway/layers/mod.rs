//! The stages that wrap both a request and its answer, as tower layers
//! around the send to the cluster. `forward` composes them in one
//! `ServiceBuilder`; each is a `…Layer` and its service, in its own file.
//! The audit record wraps every door's answer, so it stays at the door's
//! end (`gateway::trace`), not here.

pub mod cap;
pub mod redact;
