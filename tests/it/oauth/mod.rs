//! OAuth for agents (issue 19): clients, consent, tokens.

pub mod cimd;
pub mod dcr;
pub mod python_flow;
