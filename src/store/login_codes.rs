//! The codes of `portcullis login`, as kept: loopback codes and device
//! codes with their user codes (RFC 8628). They live in the store so that
//! a code given by one replica is exchanged at another. Every code is kept
//! only as its SHA-256, given by the caller; each is taken once,
//! atomically; expired ones are swept whenever new ones are given.

use super::sql::{params, OptionalExt};
use super::{Store, StoreError};
use chrono::{DateTime, TimeDelta, Utc};

/// A loopback code's login, waiting for its exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliCode {
    /// Who allowed it.
    pub login: String,
    /// Their sign-in session's id's SHA-256: the credential ends with it.
    pub session: String,
    /// The PKCE challenge (S256).
    pub challenge: String,
    /// The command line's loopback address.
    pub redirect_uri: String,
    /// When the code stops working.
    pub expires_at: DateTime<Utc>,
}

/// The person's decision on a device code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceDecision {
    /// Allowed by `login`, signed in with the session hashing to `session`.
    Allowed {
        /// Who.
        login: String,
        /// Their sign-in session's id's SHA-256.
        session: String,
    },
    /// Denied.
    Denied,
}

/// Where and when a waiting device code was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRequest {
    /// The client address that asked (empty on a row an older release gave).
    pub from: String,
    /// When (`None` on a row an older release gave).
    pub at: Option<DateTime<Utc>>,
}

/// What a poll of a device code finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevicePoll {
    /// Unknown, used or expired.
    Unknown,
    /// Not decided yet.
    Pending,
    /// Not decided yet, and polled faster than the interval (which grows).
    SlowDown,
    /// Denied (and now used).
    Denied,
    /// Allowed (and now used).
    Allowed {
        /// Who.
        login: String,
        /// Their sign-in session's id's SHA-256.
        session: String,
    },
}

/// A device code's row as a poll reads it.
type DeviceRow = (
    DateTime<Utc>,
    i64,
    Option<DateTime<Utc>>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl Store {
    /// Keep a loopback code (by its SHA-256), sweeping expired ones.
    pub fn give_cli_code(&self, code_sha256: &str, code: &CliCode) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "DELETE FROM cli_login_codes WHERE expires_at <= ?1",
                params![Utc::now()],
            )?;
            c.execute(
                "INSERT INTO cli_login_codes (code_sha256, login, session_sha256, challenge, redirect_uri, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    code_sha256,
                    code.login,
                    code.session,
                    code.challenge,
                    code.redirect_uri,
                    code.expires_at
                ],
            )?;
            Ok(())
        })
    }

    /// Take a loopback code: it is gone whatever is found, so it is used
    /// once; `None` when unknown, used or expired at `now`.
    pub fn take_cli_code(&self, code_sha256: &str, now: DateTime<Utc>) -> Result<Option<CliCode>, StoreError> {
        let taken = self.with(|c| {
            Ok(c.query_row(
                "DELETE FROM cli_login_codes WHERE code_sha256 = ?1 \
                 RETURNING login, session_sha256, challenge, redirect_uri, expires_at",
                params![code_sha256],
                |r| {
                    Ok(CliCode {
                        login: r.get(0)?,
                        session: r.get(1)?,
                        challenge: r.get(2)?,
                        redirect_uri: r.get(3)?,
                        expires_at: r.get(4)?,
                    })
                },
            )
            .optional()?)
        })?;
        Ok(taken.filter(|code| code.expires_at > now))
    }

    /// Keep a device code and its user code (both by their SHA-256),
    /// sweeping expired ones; false when a waiting device has this user
    /// code already (the caller draws another).
    pub fn give_device_code(
        &self,
        device_sha256: &str,
        user_sha256: &str,
        expires_at: DateTime<Utc>,
        interval: i64,
        (requested_from, now): (&str, DateTime<Utc>),
    ) -> Result<bool, StoreError> {
        self.with(|c| {
            c.execute("DELETE FROM device_codes WHERE expires_at <= ?1", params![now])?;
            let added = c.execute(
                "INSERT INTO device_codes \
                 (device_sha256, user_sha256, expires_at, interval_seconds, requested_from, requested_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                params![device_sha256, user_sha256, expires_at, interval, requested_from, now],
            )?;
            Ok(added == 1)
        })
    }

    /// Where and when the device waiting with the user code hashing to
    /// `user_sha256` was asked for; `None` when none waits with it. (A
    /// row an older release gave has no time: `None` there.)
    pub fn device_request(&self, user_sha256: &str, now: DateTime<Utc>) -> Result<Option<DeviceRequest>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT requested_from, requested_at FROM device_codes \
                 WHERE user_sha256 = ?1 AND decision IS NULL AND expires_at > ?2",
                params![user_sha256, now],
                |r| {
                    Ok(DeviceRequest {
                        from: r.get(0)?,
                        at: r.get(1)?,
                    })
                },
            )
            .optional()?)
        })
    }

    /// Record the person's decision on the waiting device whose user code
    /// hashes to `user_sha256`; false when none waits with it.
    pub fn decide_device_code(
        &self,
        user_sha256: &str,
        decision: &DeviceDecision,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let (word, login, session) = match decision {
            DeviceDecision::Allowed { login, session } => ("allowed", Some(login), Some(session)),
            DeviceDecision::Denied => ("denied", None, None),
        };
        self.with(|c| {
            let decided = c.execute(
                "UPDATE device_codes SET decision = ?2, login = ?3, session_sha256 = ?4 \
                 WHERE user_sha256 = ?1 AND decision IS NULL AND expires_at > ?5",
                params![user_sha256, word, login, session, now],
            )?;
            Ok(decided == 1)
        })
    }

    /// Poll a device code at `now`, in one write transaction: a decided
    /// one is used (gone) as it is answered; an undecided one polled
    /// sooner than its interval after the last poll slows down, its
    /// interval growing by five seconds.
    pub fn poll_device_code(&self, device_sha256: &str, now: DateTime<Utc>) -> Result<DevicePoll, StoreError> {
        self.write(|tx| {
            let found: Option<DeviceRow> = tx
                .query_row(
                    "SELECT expires_at, interval_seconds, last_poll, decision, login, session_sha256 \
                     FROM device_codes WHERE device_sha256 = ?1",
                    params![device_sha256],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
                )
                .optional()?;
            let Some((expires_at, interval, last_poll, decision, login, session)) = found else {
                return Ok(DevicePoll::Unknown);
            };
            let early = last_poll.is_some_and(|t| now < t + TimeDelta::seconds(interval));
            let poll = match (decision.as_deref(), login, session) {
                _ if expires_at <= now => DevicePoll::Unknown,
                (None, ..) if early => DevicePoll::SlowDown,
                (None, ..) => DevicePoll::Pending,
                (Some("allowed"), Some(login), Some(session)) => DevicePoll::Allowed { login, session },
                _ => DevicePoll::Denied,
            };
            if matches!(poll, DevicePoll::Pending | DevicePoll::SlowDown) {
                let grown = interval + if poll == DevicePoll::SlowDown { 5 } else { 0 };
                tx.execute(
                    "UPDATE device_codes SET last_poll = ?2, interval_seconds = ?3 WHERE device_sha256 = ?1",
                    params![device_sha256, now, grown],
                )?;
                return Ok(poll);
            }
            // Used as answered: only the poll whose delete took the row gets
            // the decision, so it is handed out once.
            let gone = tx.execute(
                "DELETE FROM device_codes WHERE device_sha256 = ?1",
                params![device_sha256],
            )?;
            Ok(if gone == 1 { poll } else { DevicePoll::Unknown })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;
    use chrono::SubsecRound;

    /// Another handle on the same rows: a second connection to the SQLite
    /// file; on PostgreSQL, every statement takes a connection of the pool.
    fn other_handle(store: &Store) -> Store {
        match store.sqlite_path() {
            Some(path) => Store::open(path).unwrap(),
            None => store.clone(),
        }
    }

    #[test]
    fn a_loopback_code_is_taken_once_by_any_handle_on_the_store() {
        for store in testing::both() {
            let b = store.backend;
            let other = other_handle(&store);
            // Whole microseconds, as PostgreSQL keeps them.
            let now = Utc::now().trunc_subsecs(6);
            let code = CliCode {
                login: "ana".into(),
                session: "s".into(),
                challenge: "c".into(),
                redirect_uri: "http://127.0.0.1:1/".into(),
                expires_at: now + TimeDelta::minutes(2),
            };
            store.give_cli_code("h", &code).unwrap();
            assert_eq!(other.take_cli_code("h", now).unwrap(), Some(code.clone()), "{b}");
            assert_eq!(store.take_cli_code("h", now).unwrap(), None, "{b}");
            store.give_cli_code("late", &code).unwrap();
            let after = code.expires_at + TimeDelta::seconds(1);
            assert_eq!(store.take_cli_code("late", after).unwrap(), None, "{b}: expired");
        }
    }

    #[test]
    fn expired_codes_are_swept_when_new_ones_are_given() {
        for store in testing::both() {
            let b = store.backend;
            let now = Utc::now();
            let old = now - TimeDelta::seconds(1);
            store.give_device_code("d1", "u1", old, 3, ("", now)).unwrap();
            assert!(
                store
                    .give_device_code("d2", "u1", now + TimeDelta::minutes(10), 3, ("", now))
                    .unwrap(),
                "{b}: the expired device's user code is free again"
            );
            assert!(
                !store
                    .give_device_code("d3", "u1", now + TimeDelta::minutes(10), 3, ("", now))
                    .unwrap(),
                "{b}"
            );
            let count: i64 = store
                .with(|c| Ok(c.query_row("SELECT COUNT(*) FROM device_codes", params![], |r| r.get(0))?))
                .unwrap();
            assert_eq!(count, 1, "{b}");
        }
    }

    #[test]
    fn a_waiting_devices_requester_is_known_until_it_is_decided_or_expires() {
        for store in testing::both() {
            let b = store.backend;
            // Whole microseconds, as PostgreSQL keeps them.
            let now = Utc::now().trunc_subsecs(6);
            let expires = now + TimeDelta::minutes(10);
            store
                .give_device_code("d", "u", expires, 3, ("203.0.113.7", now))
                .unwrap();
            let asked = Some(DeviceRequest {
                from: "203.0.113.7".into(),
                at: Some(now),
            });
            assert_eq!(store.device_request("u", now).unwrap(), asked, "{b}");
            assert_eq!(store.device_request("other", now).unwrap(), None, "{b}");
            assert_eq!(store.device_request("u", expires).unwrap(), None, "{b}: expired");
            assert!(store.decide_device_code("u", &DeviceDecision::Denied, now).unwrap());
            assert_eq!(store.device_request("u", now).unwrap(), None, "{b}: decided");
        }
    }

    #[test]
    fn a_device_polled_early_slows_down_and_its_interval_grows() {
        for store in testing::both() {
            let b = store.backend;
            let now = Utc::now();
            store
                .give_device_code("d", "u", now + TimeDelta::minutes(10), 3, ("", now))
                .unwrap();
            assert_eq!(store.poll_device_code("d", now).unwrap(), DevicePoll::Pending, "{b}");
            let at = |s| now + TimeDelta::seconds(s);
            assert_eq!(store.poll_device_code("d", at(4)).unwrap(), DevicePoll::Pending, "{b}");
            assert_eq!(store.poll_device_code("d", at(5)).unwrap(), DevicePoll::SlowDown, "{b}");
            assert_eq!(
                store.poll_device_code("d", at(12)).unwrap(),
                DevicePoll::SlowDown,
                "{b}: the interval is 8 s now"
            );
            assert_eq!(store.poll_device_code("d", at(40)).unwrap(), DevicePoll::Pending, "{b}");
        }
    }

    #[test]
    fn a_decided_device_code_is_answered_once_even_to_concurrent_polls() {
        for store in testing::both() {
            let b = store.backend;
            let now = Utc::now();
            store
                .give_device_code("d", "u", now + TimeDelta::minutes(10), 3, ("", now))
                .unwrap();
            let allowed = DeviceDecision::Allowed {
                login: "ana".into(),
                session: "s".into(),
            };
            assert!(store.decide_device_code("u", &allowed, now).unwrap(), "{b}");
            assert!(
                !store.decide_device_code("u", &DeviceDecision::Denied, now).unwrap(),
                "{b}: decided once"
            );
            let polls: Vec<DevicePoll> = std::thread::scope(|scope| {
                let pollers: Vec<_> = (0..4)
                    .map(|_| scope.spawn(|| store.poll_device_code("d", now).unwrap()))
                    .collect();
                pollers.into_iter().map(|poller| poller.join().unwrap()).collect()
            });
            let granted = DevicePoll::Allowed {
                login: "ana".into(),
                session: "s".into(),
            };
            assert_eq!(polls.iter().filter(|p| **p == granted).count(), 1, "{b}: {polls:?}");
            assert_eq!(
                polls.iter().filter(|p| **p == DevicePoll::Unknown).count(),
                3,
                "{b}: {polls:?}"
            );
        }
    }
}
