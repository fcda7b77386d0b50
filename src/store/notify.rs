//! Every replica hears at once of a change another made (issue 22, items 2
//! and 3).
//!
//! On PostgreSQL, triggers (`migrations/postgres/0016_notify.sql`) notify
//! the channel `portcullis_changes` with the name of each table a committed
//! transaction changed, when it is one whose rows replicas cache or wait on.
//! One listener per store, on a connection of its own outside the pool and
//! on the store's runtime, turns each notification into a [`Change`] and
//! broadcasts it to every [`Store::changes`] receiver: the credential and
//! grant caches drop their entries, a call waiting on a held write looks at
//! it again. When its connection drops, the listener connects again on its
//! own, backing off, and then sends [`Change::Lost`], since what changed in
//! between was not heard. The caches' lifetime and the waiters' polling
//! stay as the fallback for that gap.
//!
//! SQLite has one process and no notifications: [`Store::changes`] is
//! `None` there.

use super::Store;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::broadcast;

/// The channel the triggers notify.
const CHANNEL: &str = "portcullis_changes";
/// Changes a slow receiver may fall behind by before it is told
/// [`Change::Lost`] instead.
const CAPACITY: usize = 256;
/// The first wait before connecting again, doubled after each failure.
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait before connecting again.
const LAST_RETRY: Duration = Duration::from_secs(5);
/// How the listener's connection is named in `pg_stat_activity`.
pub(crate) const APPLICATION_NAME: &str = "portcullis-listener";

/// A table another replica (or this one) changed, or word that changes
/// may have been missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// People and bots (disabled, made admin, added).
    Principals,
    /// Credentials (issued, revoked).
    Credentials,
    /// Grants (given, revoked, ended with their parent).
    Grants,
    /// Agents and agent sessions (disabled, ended).
    Agents,
    /// The grants delegated to agents.
    AgentGrants,
    /// Access requests (asked, decided, expired).
    AccessRequests,
    /// Held writes (held, decided, claimed, run, expired).
    HeldWrites,
    /// Notifications may have been missed (the listener connected again,
    /// or a receiver fell behind): anything may have changed.
    Lost,
}

impl Change {
    /// The change a notification names, if it is one of the tables
    /// watched.
    pub fn of_table(table: &str) -> Option<Change> {
        Some(match table {
            "principals" => Change::Principals,
            "credentials" => Change::Credentials,
            "grants" => Change::Grants,
            "agents" => Change::Agents,
            "agent_grants" => Change::AgentGrants,
            "access_requests" => Change::AccessRequests,
            "held_writes" => Change::HeldWrites,
            _ => return None,
        })
    }

    /// Whether a cached authentication (a credential, its owner, its
    /// agent and the agent's delegated grants) may be stale now.
    pub fn stales_credentials(self) -> bool {
        matches!(
            self,
            Change::Principals | Change::Credentials | Change::Agents | Change::AgentGrants | Change::Lost
        )
    }

    /// Whether cached grants may be stale now.
    pub fn stales_grants(self) -> bool {
        matches!(self, Change::Principals | Change::Grants | Change::Lost)
    }

    /// Whether a held write may have been decided, run or expired.
    pub fn moves_held_writes(self) -> bool {
        matches!(self, Change::HeldWrites | Change::Lost)
    }
}

/// The next change, [`Change::Lost`] when the receiver fell behind; `None`
/// once the store is gone.
pub async fn next(changes: &mut broadcast::Receiver<Change>) -> Option<Change> {
    match changes.recv().await {
        Ok(change) => Some(change),
        Err(broadcast::error::RecvError::Lagged(_)) => Some(Change::Lost),
        Err(broadcast::error::RecvError::Closed) => None,
    }
}

/// Completes at the next change `matters` picks (let it pick
/// [`Change::Lost`] too); never once the store is gone (bound it with a
/// timeout).
pub async fn wait_for(changes: &mut broadcast::Receiver<Change>, matters: impl Fn(Change) -> bool) {
    loop {
        match next(changes).await {
            Some(change) if matters(change) => return,
            Some(_) => {}
            None => std::future::pending().await,
        }
    }
}

impl Store {
    /// Changes committed from now on by any replica on this database, each
    /// as its table; `None` on SQLite. The first call starts the store's
    /// listener, which sends [`Change::Lost`] once it listens (and again
    /// after each reconnection). Dropping the receiver unsubscribes.
    pub fn changes(&self) -> Option<broadcast::Receiver<Change>> {
        let pg = self.postgres_pool()?;
        Some(pg.listener().subscribe(pg.handle(), pg.config(), pg.tls()))
    }
}

/// A store's listener: started by its first subscriber, it runs on the
/// store's runtime until the store is dropped.
#[derive(Default)]
pub(crate) struct Listener {
    sender: OnceLock<broadcast::Sender<Change>>,
}

impl Listener {
    fn subscribe(
        &self,
        runtime: &tokio::runtime::Handle,
        config: &tokio_postgres::Config,
        tls: &super::postgres::Tls,
    ) -> broadcast::Receiver<Change> {
        self.sender
            .get_or_init(|| {
                let (sender, _) = broadcast::channel(CAPACITY);
                runtime.spawn(listen(listener_config(config), tls.clone(), sender.clone()));
                sender
            })
            .subscribe()
    }
}

/// The pool's settings, named for `pg_stat_activity`, with TCP keepalives
/// so that a peer gone silent ends the connection and the listener
/// reconnects.
fn listener_config(config: &tokio_postgres::Config) -> tokio_postgres::Config {
    let mut config = config.clone();
    config
        .application_name(APPLICATION_NAME)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30));
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config
}

/// Listen, and listen again whenever the connection ends, forever (until
/// the store's runtime stops).
async fn listen(config: tokio_postgres::Config, tls: super::postgres::Tls, sender: broadcast::Sender<Change>) {
    let mut retry = FIRST_RETRY;
    loop {
        let ended = match connect(&config, &tls, &sender).await {
            Ok((client, connection)) => {
                retry = FIRST_RETRY;
                // What changed while nobody listened was not heard.
                let _ = sender.send(Change::Lost);
                let ended = connection.await;
                drop(client);
                match ended {
                    Ok(Err(error)) => error.to_string(),
                    _ => "the server closed the connection".to_string(),
                }
            }
            Err(error) => error.to_string(),
        };
        tracing::warn!(error = %ended, retry_in = ?retry, "not hearing other replicas' changes; listening again shortly");
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(LAST_RETRY);
    }
}

type Connection = tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>;

/// A connection that listens, and the task that drives it, forwarding its
/// notifications until it ends.
async fn connect(
    config: &tokio_postgres::Config,
    tls: &super::postgres::Tls,
    sender: &broadcast::Sender<Change>,
) -> Result<(tokio_postgres::Client, Connection), tokio_postgres::Error> {
    let (client, connection) = config.connect(tls.clone()).await?;
    let connection = tokio::spawn(forward(connection, sender.clone()));
    match client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
        Ok(()) => Ok((client, connection)),
        Err(error) => {
            connection.abort();
            Err(error)
        }
    }
}

async fn forward<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut connection: tokio_postgres::Connection<tokio_postgres::Socket, T>,
    sender: broadcast::Sender<Change>,
) -> Result<(), tokio_postgres::Error> {
    loop {
        match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            Some(Ok(tokio_postgres::AsyncMessage::Notification(notification))) => {
                if notification.channel() != CHANNEL {
                    continue;
                }
                match Change::of_table(notification.payload()) {
                    Some(change) => {
                        // No receiver is no error: nobody caches anything yet.
                        let _ = sender.send(change);
                    }
                    None => tracing::debug!(table = notification.payload(), "change of a table nobody watches"),
                }
            }
            Some(Ok(_)) => {}
            Some(Err(error)) => return Err(error),
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "notify_tests.rs"]
mod tests;
