//! One integration-test binary with a module per area.

mod harness;
mod support;

mod sim_auth;
mod sim_discovery;
mod sim_patch;
mod sim_protobuf;
mod sim_streams;
mod sim_verbs;
mod proxy;
mod proxy_streams;
mod secrets;
mod audit;
mod audit_query;
mod demo;
mod mcp;
mod mcp_tools;
