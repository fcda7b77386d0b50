//! portcullis: an authenticating reverse proxy in front of the Kubernetes API
//! server.

pub mod body;
pub mod gateway;
pub mod sim;
pub mod status;
