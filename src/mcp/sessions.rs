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
use std::time::{Duration, Instant};

/// A session unused this long is forgotten: its client initializes anew.
pub const UNUSED_FOR: Duration = Duration::from_secs(24 * 3600);

/// The largest session state kept in the store.
pub const MAX_STORED: usize = 16 * 1024;

/// The most sessions one agent keeps: beginning another forgets its least
/// recently used (each IDE window or agent run is one).
pub const SESSIONS_PER_AGENT: usize = 100;

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
        // Per-request metadata, free-form, and the client's icons (inline
        // images): not needed to replay the handshake.
        params.meta = None;
        params.client_info.icons = None;
        let json = serde_json::to_string(&SessionState::new(params));
        Box::pin(async move {
            let json = json?;
            // Kept a day: a state larger than any client's info is not kept
            // (rmcp goes on; the session is not restored elsewhere).
            if json.len() > MAX_STORED {
                tracing::warn!(bytes = json.len(), "an MCP session's state is too large to keep");
                return Err(format!("an MCP session's state is over {MAX_STORED} bytes").into());
            }
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
///
/// A session rmcp serves from memory is never loaded, so its use is noted
/// here ([`TOUCH_EVERY`]): else it would be swept after [`UNUSED_FOR`] while
/// in use, and its client, sent to another replica or after a restart,
/// answered 404.
#[derive(Debug)]
pub struct Owners {
    store: Store,
    cache: dashmap::DashMap<String, Owner>,
    /// The most owners cached ([`OWNERS_CACHED`]), and how long unused an
    /// owner is forgotten when the cache is full ([`UNUSED_FOR`]) and how
    /// often (a minute): tests make them small.
    capacity: usize,
    forget_after: Duration,
    sweep_every: Duration,
    /// When the cache last forgot the owners of sessions unused for
    /// [`UNUSED_FOR`] (the store has forgotten those sessions).
    swept: std::sync::Mutex<Instant>,
}

#[derive(Debug)]
struct Owner {
    agent: String,
    /// When this process last noted the session's use in the store.
    touched: Instant,
}

/// Whether an agent may use a session it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// It began it.
    Own,
    /// Another agent began it.
    Foreign,
    /// No such session is kept: never begun, ended, forgotten unused, or
    /// forgotten as its agent's least recently used.
    Unknown,
}

/// The cache holds at most this many owners; past it, the store answers.
const OWNERS_CACHED: usize = 100_000;

/// How often a session in use has its use noted in the store: far within
/// [`UNUSED_FOR`], and at most a write an hour a session.
const TOUCH_EVERY: Duration = Duration::from_secs(3600);

impl Owners {
    /// Owners kept in `store`.
    pub fn new(store: Store) -> Owners {
        Owners::holding(store, OWNERS_CACHED, UNUSED_FOR, Duration::from_secs(60))
    }

    fn holding(store: Store, capacity: usize, forget_after: Duration, sweep_every: Duration) -> Owners {
        Owners {
            store,
            cache: dashmap::DashMap::new(),
            capacity,
            forget_after,
            sweep_every,
            swept: std::sync::Mutex::new(Instant::now()),
        }
    }

    /// A full cache forgets what the store has forgotten (sessions unused
    /// for [`UNUSED_FOR`]), at most once a minute: else, once full, every
    /// new session is looked up in the store for good.
    fn make_room(&self) {
        let mut swept = self.swept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if swept.elapsed() < self.sweep_every {
            return;
        }
        *swept = Instant::now();
        drop(swept);
        self.cache
            .retain(|_, owner| owner.touched.elapsed() < self.forget_after);
    }

    /// May agent `agent_id` use session `session_id`? Only if it began it;
    /// `Err` when the store cannot say (fail closed).
    pub async fn allows(&self, session_id: &str, agent_id: &str) -> Result<Use, StoreError> {
        self.allows_touching(session_id, agent_id, TOUCH_EVERY).await
    }

    async fn allows_touching(&self, session_id: &str, agent_id: &str, every: Duration) -> Result<Use, StoreError> {
        let id = credential::hash(session_id);
        if let Some(mut owner) = self.cache.get_mut(&id) {
            if owner.agent != agent_id {
                return Ok(Use::Foreign);
            }
            if owner.touched.elapsed() >= every {
                owner.touched = Instant::now();
                drop(owner);
                self.touch(id);
            }
            return Ok(Use::Own);
        }
        let store = self.store.clone();
        let key = id.clone();
        let owner = tokio::task::spawn_blocking(move || store.mcp_session_owner_and_use(&key))
            .await
            .map_err(|_| StoreError::Invalid("the session lookup stopped".into()))??;
        let Some((owner, used)) = owner else {
            return Ok(Use::Unknown);
        };
        if owner != agent_id {
            return Ok(Use::Foreign);
        }
        if self.cache.len() >= self.capacity {
            self.make_room();
        }
        if self.cache.len() < self.capacity {
            let touched = Instant::now();
            self.cache.insert(id.clone(), Owner { agent: owner, touched });
        }
        // Past the cache's size every request comes here: it writes only
        // when the store's last use is as old as the interval.
        let every = chrono::TimeDelta::from_std(every).unwrap_or(chrono::TimeDelta::MAX);
        if used.is_some_and(|used| Utc::now().signed_duration_since(used) >= every) {
            self.touch(id);
        }
        Ok(Use::Own)
    }

    /// Note the session's use in the store, in the background: a failure
    /// costs only an earlier sweep.
    fn touch(&self, id: String) {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(error) = store.touch_mcp_session(&id) {
                tracing::warn!(%error, "cannot note an MCP session's use");
            }
        });
    }

    /// Forget session `session_id`'s owner here (its client ended it; the
    /// store's row goes with the session).
    pub fn forget(&self, session_id: &str) {
        self.cache.remove(&credential::hash(session_id));
    }

    /// Note that agent `agent_id` began session `session_id` (before its
    /// `initialize` is answered, so the client's next request finds it).
    pub async fn record(&self, session_id: &str, agent_id: &str) -> Result<(), StoreError> {
        let (store, id, agent) = (self.store.clone(), credential::hash(session_id), agent_id.to_string());
        tokio::task::spawn_blocking(move || store.own_mcp_session(&id, &agent, SESSIONS_PER_AGENT))
            .await
            .map_err(|_| StoreError::Invalid("recording the session stopped".into()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    /// Whether `id`'s session counts as used within the day; polled until
    /// it does (the use is noted in the background).
    async fn used_within_a_day(store: &Store, id: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let day_ago = || Utc::now() - chrono::TimeDelta::days(1);
        while store.mcp_session(id, day_ago()).unwrap().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the session's use was never noted"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Make every session look unused for two days.
    fn age(store: &Store) {
        store
            .set_mcp_sessions_last_used(Utc::now() - chrono::TimeDelta::days(2))
            .unwrap();
    }

    /// A full cache forgets the owners of sessions unused for a day, so
    /// new sessions are cached again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_owner_cache_forgets_sessions_unused_for_a_day() {
        let store = testing::sqlite();
        // Long enough that no stall of a loaded machine ages "old" early.
        let day = Duration::from_secs(20);
        let owners = Owners::holding(store.clone(), 1, day, Duration::ZERO);
        for session in ["old", "new"] {
            store.save_mcp_session(&credential::hash(session), "{}").unwrap();
            owners.record(session, "agent-1").await.unwrap();
        }
        assert_eq!(owners.allows("old", "agent-1").await.unwrap(), Use::Own);
        assert_eq!(owners.allows("new", "agent-1").await.unwrap(), Use::Own);
        assert!(owners.cache.contains_key(&credential::hash("old")) && owners.cache.len() == 1);
        assert!(!owners.cache.contains_key(&credential::hash("new")), "full: not cached");
        // "old" unused for longer than this cache's day.
        let long_ago = Instant::now()
            .checked_sub(2 * day)
            .expect("a machine up for forty seconds");
        owners.cache.get_mut(&credential::hash("old")).unwrap().touched = long_ago;
        assert_eq!(owners.allows("new", "agent-1").await.unwrap(), Use::Own);
        assert!(owners.cache.contains_key(&credential::hash("new")), "cached again");
        assert!(!owners.cache.contains_key(&credential::hash("old")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_in_use_is_noted_so_a_sweep_keeps_it_and_only_its_owner_may_use_it() {
        for store in testing::both() {
            let b = store.backend;
            let owners = Owners::new(store.clone());
            let id = credential::hash("s");
            store.save_mcp_session(&id, "{}").unwrap();
            owners.record("s", "agent-1").await.unwrap();
            assert_eq!(owners.allows("s", "agent-2").await.unwrap(), Use::Foreign, "{b}");
            assert_eq!(owners.allows("t", "agent-1").await.unwrap(), Use::Unknown, "{b}");
            // First use in this process: looked up, and noted.
            age(&store);
            assert_eq!(owners.allows("s", "agent-1").await.unwrap(), Use::Own, "{b}");
            used_within_a_day(&store, &id).await;
            // Served from the cache: noted once its interval has passed.
            age(&store);
            let used = owners.allows_touching("s", "agent-1", Duration::ZERO).await.unwrap();
            assert_eq!(used, Use::Own, "{b}");
            used_within_a_day(&store, &id).await;
            let foreign = owners.allows("s", "agent-2").await.unwrap();
            assert_eq!(foreign, Use::Foreign, "{b}: cached, still its owner's");
        }
    }
}
