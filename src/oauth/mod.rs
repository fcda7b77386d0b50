//! OAuth 2.1 for agents: portcullis is the authorization server of its own
//! `/mcp`, as the MCP authorization specification asks (2026-07-28 and
//! 2025-11-25). A person signs in (`crate::signin`), consents on a page
//! that names the client, and chooses which of their grants the agent gets,
//! for how long, and whether its writes wait for their approval; the
//! consent makes a delegated agent (an *agent session*), whose access
//! tokens are portcullis credentials accepted on `/mcp` only.
//!
//! Layout: [`error`] (RFC 6749 errors), [`redirect`] (which redirect URIs
//! are acceptable and how they match), [`client`] (who the client is:
//! a Client ID Metadata Document fetched from its URL, or a registered
//! client), [`consent`] (what a person may hand over), [`tokens`] (codes,
//! access and refresh tokens, reuse detection). The HTTP endpoints are the
//! door `crate::doors::oauth`.

pub mod client;
pub mod consent;
pub mod error;
pub mod redirect;
pub mod register;
pub mod tokens;
