//! The 2025-11-25 sessions (`Mcp-Session-Id`) kept in the store, so that
//! they survive a restart and work on any replica sharing it.
//!
//! rmcp keeps a session's worker in memory; when a request names a session
//! this process does not hold (it restarted, another replica began the
//! session, or the worker idled out), rmcp loads the session's state from
//! here and replays the client's `initialize` into a fresh [`super::server::Tools`].
//!
//! What is kept is the client's `initialize` parameters only (client info,
//! capabilities, protocol version; its `_meta` is dropped), under the
//! SHA-256 of the session id. A session unused for [`UNUSED_FOR`] is
//! forgotten, and `DELETE /mcp` forgets it at once.
//!
//! A session is its beginner's ([`Owners`]): a request naming a session
//! another agent began is answered 404, as if it did not exist, since rmcp
//! would let it resume the session's stream or end it.
//!
//! Beyond that, a session id grants nothing, restored or not: `Endpoint::serve`
//! authenticates every request by its own bearer token before rmcp sees it,
//! and puts that request's [`super::Caller`] into its parts. rmcp hands each
//! message its own request's parts (the replayed `initialize` gets those of
//! the request that triggered the restore), and the tools hold no identity:
//! every tool call reads the caller from the parts of the request carrying
//! it (`Tools::context`). Whoever presents a session id acts as the agent
//! whose token they present, never as the one that began the session.

use crate::identity::credential;
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use rmcp::transport::streamable_http_server::session::{SessionState, SessionStore, SessionStoreError};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A session unused this long is forgotten: its client initializes anew.
pub const UNUSED_FOR: Duration = Duration::from_secs(24 * 3600);

/// rmcp's session store over the portcullis store.
#[derive(Debug, Clone)]
pub struct StoredSessions {
    store: Store,
}

/// What rmcp's `SessionStore` methods return (the trait is declared with
/// `async_trait`, which portcullis does not depend on).
type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, SessionStoreError>> + Send + 'a>>;

impl StoredSessions {
    /// Sessions kept in `store`.
    pub fn new(store: Store) -> StoredSessions {
        StoredSessions { store }
    }

    /// Run `f` on the store off the async threads (SQLite blocks).
    fn blocking<'a, T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Pending<'a, T> {
        let store = self.store.clone();
        Box::pin(async move { Ok(tokio::task::spawn_blocking(move || f(&store)).await??) })
    }
}

/// Sessions last used before this are forgotten.
fn cutoff() -> DateTime<Utc> {
    let age = chrono::TimeDelta::from_std(UNUSED_FOR).unwrap_or(chrono::TimeDelta::MAX);
    Utc::now().checked_sub_signed(age).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

impl SessionStore for StoredSessions {
    fn load<'a, 'b, 'f>(&'a self, session_id: &'b str) -> Pending<'f, Option<SessionState>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        let id = credential::hash(session_id);
        let state = self.blocking(move |store| store.mcp_session(&id, cutoff()));
        Box::pin(async move {
            // Unreadable state (written by another version) is an unknown
            // session: the client gets 404 and initializes anew.
            Ok(state.await?.and_then(|json| {
                serde_json::from_str(&json)
                    .inspect_err(|error| tracing::warn!(%error, "an MCP session's stored state is unreadable"))
                    .ok()
            }))
        })
    }

    fn store<'a, 'b, 'c, 'f>(&'a self, session_id: &'b str, state: &'c SessionState) -> Pending<'f, ()>
    where
        'a: 'f,
        'b: 'f,
        'c: 'f,
        Self: 'f,
    {
        let id = credential::hash(session_id);
        let mut params = state.initialize_params.clone();
        // Per-request metadata, free-form: not needed to replay the handshake.
        params.meta = None;
        let json = serde_json::to_string(&SessionState::new(params));
        Box::pin(async move {
            let json = json?;
            // Sweeping as sessions begin keeps the table as small as the
            // number of sessions in use, without a task of its own.
            self.blocking(move |store| {
                store.sweep_mcp_sessions(cutoff())?;
                store.save_mcp_session(&id, &json)
            })
            .await
        })
    }

    fn delete<'a, 'b, 'f>(&'a self, session_id: &'b str) -> Pending<'f, ()>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        let id = credential::hash(session_id);
        self.blocking(move |store| store.delete_mcp_session(&id))
    }
}

/// Which agent began each session. rmcp lets whoever names a session
/// resume its stream (replaying its cached answers) or end it; so a request
/// naming a session another agent began is answered as if the session did
/// not exist. Kept in the store beside the session, cached here (an owner
/// never changes).
#[derive(Debug)]
pub struct Owners {
    store: Store,
    cache: dashmap::DashMap<String, String>,
}

/// The cache holds at most this many owners; past it, the store answers.
const OWNERS_CACHED: usize = 100_000;

impl Owners {
    /// Owners kept in `store`.
    pub fn new(store: Store) -> Owners {
        Owners {
            store,
            cache: dashmap::DashMap::new(),
        }
    }

    /// May agent `agent_id` use session `session_id`? Only if it began it;
    /// `Err` when the store cannot say (fail closed).
    pub async fn allows(&self, session_id: &str, agent_id: &str) -> Result<bool, StoreError> {
        let id = credential::hash(session_id);
        if let Some(owner) = self.cache.get(&id) {
            return Ok(*owner == agent_id);
        }
        let store = self.store.clone();
        let key = id.clone();
        let owner = tokio::task::spawn_blocking(move || store.mcp_session_owner(&key))
            .await
            .map_err(|_| StoreError::Invalid("the session lookup stopped".into()))??;
        let Some(owner) = owner else {
            return Ok(false);
        };
        let allowed = owner == agent_id;
        if self.cache.len() < OWNERS_CACHED {
            self.cache.insert(id, owner);
        }
        Ok(allowed)
    }

    /// Note that agent `agent_id` began session `session_id` (before its
    /// `initialize` is answered, so the client's next request finds it).
    pub async fn record(&self, session_id: &str, agent_id: &str) -> Result<(), StoreError> {
        let (store, id, agent) = (self.store.clone(), credential::hash(session_id), agent_id.to_string());
        tokio::task::spawn_blocking(move || store.own_mcp_session(&id, &agent))
            .await
            .map_err(|_| StoreError::Invalid("recording the session stopped".into()))?
    }
}
