//! One integration-test binary with a module per area.

mod harness;
/// The PostgreSQL server of the store's tests, shared with the library's
/// unit tests.
#[path = "../support/postgres.rs"]
mod pg_fixture;
/// Ports for the servers tests start, shared with the benchmark driver and
/// PostgreSQL's (one counter of the ports handed out).
use pg_fixture::port;
mod support;

mod apiserver_audit;
mod apiserver_audit_certs;
mod approvals;
mod approvals_mcp;
mod approvals_python;
mod approvals_secrets;
mod approvals_web;
mod audit;
mod audit_crash;
mod audit_outage;
mod audit_query;
mod body_limit_h2;
mod ci;
mod cli;
mod demo;
mod document_limits;
mod mcp;
mod mcp_errors;
mod mcp_python;
mod mcp_sessions;
mod mcp_timeouts;
mod mcp_tools;
mod oauth;
mod postgres_fixture;
mod postgres_schema;
mod proxy;
mod proxy_streams;
mod proxy_upgrades;
mod rbac;
mod rbac_access;
mod rbac_instances;
mod rbac_lease;
mod rbac_roles;
mod real;
mod replicas;
mod replicas_pg;
mod secrets;
mod serve;
mod signin;
mod sim_auth;
mod sim_classification;
mod sim_discovery;
mod sim_patch;
mod sim_protobuf;
mod sim_streams;
mod sim_verbs;
mod sim_writes;
mod store_migrate;
