//! Waiting for a decision, and expiry.
//!
//! A waiting call polls the store (a decision may come from the CLI, or
//! from another replica), so waiting holds no lock and claims nothing: a
//! caller that goes away simply stops polling. Overdue held writes expire
//! when anyone looks at them, and every 30 seconds in the server.

use super::decide::DecideError;
use super::{HeldState, HeldWrite};
use crate::store::Store;
use chrono::Utc;
use std::time::Duration;

/// How often a waiting call looks at the store.
const POLL: Duration = Duration::from_millis(200);

/// Expire every open held write past its expiry (each recorded once, by
/// whichever process notices first); returns them.
pub fn expire_overdue(store: &Store) -> Result<Vec<HeldWrite>, DecideError> {
    let now = Utc::now();
    let mut expired = Vec::new();
    for held in store.list_open_held()? {
        if held.overdue(now) && store.expire_held(&held.id)? {
            let actor = held
                .request
                .principal()
                .unwrap_or_else(|| crate::identity::Principal::bot("-"));
            super::decide::record(store, "expire", &actor, &held, None)?;
            expired.push(HeldWrite {
                state: HeldState::Expired,
                ..held
            });
        }
    }
    Ok(expired)
}

/// Read held write `id`, expiring it first if it is overdue.
pub fn current(store: &Store, id: &str) -> Result<Option<HeldWrite>, DecideError> {
    let Some(held) = store.held(id)? else {
        return Ok(None);
    };
    if held.overdue(Utc::now()) {
        expire_overdue(store)?;
        return Ok(store.held(id)?);
    }
    Ok(Some(held))
}

/// Wait up to `wait` for held write `id` to leave `pending` (and, when
/// another call is running it, `executing`); returns it as last seen.
pub async fn until_decided(store: &Store, id: &str, wait: Duration) -> Result<Option<HeldWrite>, DecideError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let (store2, id2) = (store.clone(), id.to_string());
        let held = tokio::task::spawn_blocking(move || current(&store2, &id2))
            .await
            .map_err(|e| DecideError::NotAllowed(format!("the store could not be read: {e}")))??;
        let open = held
            .as_ref()
            .is_some_and(|h| matches!(h.state, HeldState::Pending | HeldState::Executing));
        if !open || tokio::time::Instant::now() >= deadline {
            return Ok(held);
        }
        tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + POLL)).await;
    }
}

/// Expire overdue held writes every 30 seconds (run by the server).
pub async fn expire_periodically(store: Store) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tick.tick().await;
        let store = store.clone();
        match tokio::task::spawn_blocking(move || expire_overdue(&store)).await {
            Ok(Ok(expired)) if !expired.is_empty() => tracing::info!(count = expired.len(), "held writes expired"),
            Ok(Err(error)) => tracing::warn!(%error, "cannot expire held writes"),
            _ => {}
        }
    }
}
