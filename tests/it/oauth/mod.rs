//! OAuth for agents (issue 19): clients, consent, tokens.

pub mod cimd;
pub mod consent;
pub mod consent_agents;
pub mod consent_page;
pub mod dcr;
pub mod endpoints;
pub mod python_flow;
