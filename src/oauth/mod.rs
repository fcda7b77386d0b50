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
pub mod metadata;
pub mod redirect;
pub mod register;
pub mod tokens;

use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;

/// Forget what OAuth keeps past its use: codes and refresh tokens past
/// their end, registered clients unused for `[oauth] unused_client_ttl`.
/// Runs beside serving, every ten minutes, on one replica at a time.
pub async fn sweep_periodically(store: Store, clients: Arc<client::Clients>) {
    let mut tick = tokio::time::interval(Duration::from_secs(600));
    loop {
        tick.tick().await;
        let (store2, clients) = (store.clone(), clients.clone());
        // Begun only once the lock is held.
        let sweep = async move {
            tokio::task::spawn_blocking(move || {
                let tokens = store2.sweep_oauth(chrono::Utc::now())?;
                Ok::<_, crate::store::StoreError>((tokens, clients.sweep_unused()?))
            })
            .await
        };
        let swept = match store.exclusive("oauth sweep", sweep).await {
            Ok(Some(swept)) => swept,
            Ok(None) => continue,
            Err(error) => Ok(Err(error)),
        };
        match swept {
            Ok(Ok((tokens, clients))) if tokens + clients > 0 => {
                tracing::info!(
                    tokens,
                    clients,
                    "expired OAuth codes, refresh tokens and unused clients forgotten"
                );
            }
            Ok(Err(error)) => tracing::warn!(%error, "cannot sweep OAuth codes, tokens and clients"),
            _ => {}
        }
    }
}
