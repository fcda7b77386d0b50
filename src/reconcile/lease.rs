//! The Lease that lets exactly one replica reconcile a cluster at a time,
//! as client-go's leader election (which controller-runtime uses) does.
//!
//! Each installation has one `coordination.k8s.io/v1` Lease per cluster,
//! `portcullis-reconciler-<instance id>` in `[reconcile] lease_namespace`.
//! A replica (named by [`replica_identity`]: host name and a random part)
//! writes itself as `holderIdentity` and renews `renewTime` every third of
//! the lease duration; another replica takes it over once it has expired
//! or been released (holder cleared, on graceful shutdown).
//!
//! Expiry is judged as client-go judges it: the Lease's times were written
//! by other replicas' clocks, so they are not compared with ours. Instead
//! the record's last change (a new resourceVersion) is timed on this
//! replica's monotonic clock, and the Lease has expired when it has not
//! changed for its own `leaseDurationSeconds`. Races are decided by the API
//! server: every write is a create or an update at the resourceVersion read,
//! and a 409 means another replica won. A holder that cannot renew for two
//! thirds of the duration stops reconciling before anyone may take over.
//!
//! [`Election`] is the state machine (pure); [`ClusterLease`] runs it with
//! the cluster's client.

use super::cluster::ClusterClient;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use sha2::{Digest, Sha256};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The Lease's name before the instance id.
pub const NAME_PREFIX: &str = "portcullis-reconciler-";

/// The Lease's name for the installation `instance`. Instance ids may hold
/// '_', and dots where an object name's may not (`a..b`, `a.-b`): such an
/// id is spelt with '-' for each and a digest of the id, so that `a_b` and
/// `a-b` never share a Lease and every name is a DNS subdomain.
pub fn lease_name(instance: &str) -> String {
    let name = format!("{NAME_PREFIX}{instance}");
    if is_dns_subdomain(&name) {
        return name;
    }
    let digest = Sha256::digest(instance.as_bytes());
    let short: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    // '_' spelt '-' as the previous release did (its replicas hold the
    // same Lease during an upgrade); dots too only where that is no name.
    let spelt = format!("{NAME_PREFIX}{}-{short}", instance.replace('_', "-"));
    match is_dns_subdomain(&spelt) {
        true => spelt,
        false => format!("{NAME_PREFIX}{}-{short}", instance.replace(['_', '.'], "-")),
    }
}

/// Is `name` a DNS-1123 subdomain (an object name the API server takes)?
fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| alnum(b) || b == b'-')
                && label.bytes().next().is_some_and(alnum)
                && label.bytes().last().is_some_and(alnum)
        })
}

/// This replica's name in the Lease: the host name (a pod's name in
/// Kubernetes) and a random part, so that a restarted replica is a new
/// holder, as client-go names candidates.
pub fn replica_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "portcullis".into());
    format!("{host}_{}", uuid::Uuid::new_v4().simple())
}

/// What the election reads of a Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `holderIdentity`; `None` when released or never held.
    pub holder: Option<String>,
    /// `leaseDurationSeconds`.
    pub duration: Duration,
    /// `renewTime` as written, to notice a renewal that kept the holder.
    pub renewed_at: Option<String>,
    /// The object's `resourceVersion`.
    pub resource_version: String,
}

impl Record {
    /// The record of `lease` as read from the API server.
    pub fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64),
            renewed_at: spec.renew_time.map(|t| t.0.to_string()),
            resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet: create it, naming this replica.
    Create,
    /// Expired or released: write this replica as holder.
    Acquire,
    /// This replica holds it: write a new `renewTime`.
    Renew,
    /// Another replica holds it and it has not expired.
    Wait {
        /// Its holder.
        holder: String,
    },
}

/// One replica's view of one Lease: what it last saw and when, and when it
/// last renewed its hold.
#[derive(Debug)]
pub struct Election {
    identity: String,
    duration: Duration,
    observed: Option<(Record, Instant)>,
    renewed: Option<Instant>,
}

impl Election {
    /// A replica named `identity` that holds Leases for `duration`.
    pub fn new(identity: String, duration: Duration) -> Election {
        Election {
            identity,
            duration,
            observed: None,
            renewed: None,
        }
    }

    /// The step after reading `current` (`None`: no Lease) at `now`.
    pub fn next(&mut self, current: Option<&Record>, now: Instant) -> Step {
        let Some(current) = current else {
            return Step::Create;
        };
        if self.observed.as_ref().is_none_or(|(seen, _)| seen != current) {
            self.observed = Some((current.clone(), now));
        }
        let changed_at = self.observed.as_ref().map_or(now, |(_, at)| *at);
        match current.holder.as_deref() {
            Some(holder) if holder == self.identity => Step::Renew,
            Some(holder) if now < changed_at + current.duration => {
                self.renewed = None;
                Step::Wait {
                    holder: holder.to_string(),
                }
            }
            _ => Step::Acquire,
        }
    }

    /// This replica's create or update, sent at `now`, succeeded, leaving
    /// `record`: its hold counts from when it was sent.
    pub fn written(&mut self, record: Record, now: Instant) {
        self.observed = Some((record, now));
        self.renewed = Some(now);
    }

    /// A write was refused with 409: another replica wrote first.
    pub fn lost(&mut self) {
        self.renewed = None;
    }

    /// Does this replica hold the Lease at `now`? Only while its last
    /// renewal is younger than the renew deadline, two thirds of the
    /// duration: it stops before another replica could see it expired.
    pub fn leads(&self, now: Instant) -> bool {
        self.renewed.is_some_and(|at| now < at + self.duration * 2 / 3)
    }

    /// How often to renew, or to try again to acquire: a third of the
    /// duration.
    pub fn retry_period(&self) -> Duration {
        self.duration / 3
    }

    /// This replica's name.
    pub fn identity(&self) -> &str {
        &self.identity
    }
}

/// One cluster's Lease, kept through its client.
#[derive(Debug)]
pub struct ClusterLease {
    client: ClusterClient,
    namespace: String,
    name: String,
    election: Mutex<Election>,
}

impl ClusterLease {
    /// The Lease `name` in `namespace` of `client`'s cluster, held as
    /// `identity` for `duration`.
    pub fn new(client: ClusterClient, namespace: &str, name: String, identity: String, duration: Duration) -> Self {
        ClusterLease {
            client,
            namespace: namespace.to_string(),
            name,
            election: Mutex::new(Election::new(identity, duration)),
        }
    }

    /// Does this replica hold the Lease now?
    pub fn leads(&self) -> bool {
        self.election().leads(Instant::now())
    }

    /// Return once this replica holds the Lease.
    pub async fn acquire(&self) {
        while !self.try_once().await {
            let wait = self.election().retry_period();
            tokio::time::sleep(wait).await;
        }
    }

    /// Keep renewing; return when the Lease is lost (taken, or not renewed
    /// within the deadline).
    pub async fn hold(&self) {
        loop {
            let wait = self.election().retry_period();
            tokio::time::sleep(wait).await;
            if !self.try_once().await {
                return;
            }
        }
    }

    /// Give the Lease up if this replica holds it (graceful shutdown), so
    /// another takes over at once instead of after the duration.
    pub async fn release(&self) {
        self.election().lost();
        let identity = self.election().identity().to_string();
        let Ok(Some(mut lease)) = self.client.get_lease(&self.namespace, &self.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        match self.client.replace_lease(&self.namespace, &lease).await {
            Ok(_) => tracing::info!(cluster = %self.client.name, "released the reconciler's Lease"),
            Err(error) => {
                tracing::warn!(cluster = %self.client.name, %error, "could not release the reconciler's Lease")
            }
        }
    }

    /// Read the Lease and take the election's step; whether this replica
    /// holds it afterwards.
    async fn try_once(&self) -> bool {
        let read = self.client.get_lease(&self.namespace, &self.name).await;
        let current = match read {
            Ok(current) => current,
            Err(error) => {
                tracing::warn!(cluster = %self.client.name, %error, "cannot read the reconciler's Lease");
                return self.leads();
            }
        };
        let step = self
            .election()
            .next(current.as_ref().map(Record::of).as_ref(), Instant::now());
        // The hold counts from before the write is sent, as client-go's
        // does: a slow answer must not stretch it past what the others see.
        let sent = Instant::now();
        let written = match step {
            Step::Wait { .. } => return false,
            Step::Create => {
                let lease = self.claimed(Lease::default(), true);
                self.client.create_lease(&self.namespace, &lease).await
            }
            Step::Acquire | Step::Renew => {
                let lease = self.claimed(current.unwrap_or_default(), step == Step::Acquire);
                self.client.replace_lease(&self.namespace, &lease).await
            }
        };
        self.record(written, sent)
    }

    fn record(&self, written: Result<Lease, kube::Error>, sent: Instant) -> bool {
        let mut election = self.election();
        match written {
            Ok(lease) => election.written(Record::of(&lease), sent),
            Err(kube::Error::Api(status)) if status.code == 409 => election.lost(),
            Err(error) => {
                tracing::warn!(cluster = %self.client.name, %error, "cannot write the reconciler's Lease");
            }
        }
        election.leads(Instant::now())
    }

    /// `lease` naming this replica as holder, renewed now; `acquired`: the
    /// holder changes (a new acquire time, one more transition).
    fn claimed(&self, mut lease: Lease, acquired: bool) -> Lease {
        let (identity, duration) = {
            let election = self.election();
            (election.identity.clone(), election.duration)
        };
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        if lease.metadata.name.is_none() {
            lease.metadata = ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..Default::default()
            };
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if acquired {
            let before = spec.lease_transitions;
            spec.lease_transitions = Some(before.map_or(0, |n| n + 1));
            spec.acquire_time = Some(now.clone());
        }
        spec.holder_identity = Some(identity);
        spec.lease_duration_seconds = Some(duration.as_secs().try_into().unwrap_or(i32::MAX));
        spec.renew_time = Some(now);
        lease
    }

    fn election(&self) -> std::sync::MutexGuard<'_, Election> {
        self.election.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn record(holder: Option<&str>, version: &str) -> Record {
        Record {
            holder: holder.map(str::to_string),
            duration: 15 * SECOND,
            renewed_at: None,
            resource_version: version.into(),
        }
    }

    fn election() -> Election {
        Election::new("me".into(), 15 * SECOND)
    }

    #[test]
    fn no_lease_is_created_and_writing_it_makes_this_replica_lead() {
        let (mut me, t0) = (election(), Instant::now());
        assert_eq!(me.next(None, t0), Step::Create);
        assert!(!me.leads(t0), "not before the write succeeded");
        me.written(record(Some("me"), "1"), t0);
        assert!(me.leads(t0));
        assert_eq!(me.next(Some(&record(Some("me"), "1")), t0 + 5 * SECOND), Step::Renew);
    }

    #[test]
    fn a_lease_held_by_another_waits_until_it_has_not_changed_for_its_duration() {
        let (mut me, t0) = (election(), Instant::now());
        let theirs = record(Some("other"), "7");
        let wait = Step::Wait { holder: "other".into() };
        assert_eq!(me.next(Some(&theirs), t0), wait);
        assert_eq!(me.next(Some(&theirs), t0 + 14 * SECOND), wait);
        // Renewed: the clock starts again from this sighting.
        let renewed = record(Some("other"), "8");
        assert_eq!(me.next(Some(&renewed), t0 + 14 * SECOND), wait);
        assert_eq!(me.next(Some(&renewed), t0 + 28 * SECOND), wait);
        assert_eq!(me.next(Some(&renewed), t0 + 29 * SECOND), Step::Acquire);
        assert!(!me.leads(t0 + 29 * SECOND));
    }

    #[test]
    fn a_released_lease_is_acquired_at_once() {
        let (mut me, t0) = (election(), Instant::now());
        assert_eq!(me.next(Some(&record(None, "9")), t0), Step::Acquire);
    }

    #[test]
    fn a_holder_that_cannot_renew_stops_leading_before_the_lease_expires() {
        let (mut me, t0) = (election(), Instant::now());
        me.written(record(Some("me"), "1"), t0);
        assert!(me.leads(t0 + 9 * SECOND));
        assert!(!me.leads(t0 + 10 * SECOND), "two thirds of the duration");
        me.written(record(Some("me"), "2"), t0 + 5 * SECOND);
        assert!(me.leads(t0 + 14 * SECOND), "a renewal extends it");
    }

    #[test]
    fn a_conflict_means_another_replica_won_and_this_one_stops_leading() {
        let (mut me, t0) = (election(), Instant::now());
        me.written(record(Some("me"), "1"), t0);
        me.lost();
        assert!(!me.leads(t0));
        let taken = record(Some("other"), "2");
        assert!(matches!(me.next(Some(&taken), t0 + SECOND), Step::Wait { .. }));
    }

    #[test]
    fn a_lease_taken_by_another_while_held_ends_this_replicas_lead() {
        let (mut me, t0) = (election(), Instant::now());
        me.written(record(Some("me"), "1"), t0);
        let next = me.next(Some(&record(Some("other"), "2")), t0 + SECOND);
        assert!(matches!(next, Step::Wait { .. }));
        assert!(!me.leads(t0 + SECOND));
    }

    #[test]
    fn lease_names_are_object_names_and_distinct_per_instance() {
        assert_eq!(lease_name("production"), "portcullis-reconciler-production");
        let (underscore, dash) = (lease_name("ci_42"), lease_name("ci-42"));
        assert_ne!(underscore, dash);
        assert!(underscore.starts_with("portcullis-reconciler-ci-42-"), "{underscore}");
        assert!(!underscore.contains('_'));
        // Dots are kept where they make labels, else spelt as '-'.
        assert_eq!(lease_name("prod.eu"), "portcullis-reconciler-prod.eu");
        for odd in ["a..b", "a.-b", "a_.b", "a-.b"] {
            let name = lease_name(odd);
            assert!(is_dns_subdomain(&name), "{odd}: {name}");
            assert!(crate::config::valid_instance_id(odd), "{odd} is a valid instance id");
        }
        assert_ne!(lease_name("a..b"), lease_name("a--b"));
        // An id with '_' and dots keeps the name the previous release gave.
        assert!(
            lease_name("a_b.c").starts_with("portcullis-reconciler-a-b.c-"),
            "{}",
            lease_name("a_b.c")
        );
    }

    #[test]
    fn replica_identities_differ_between_processes_on_one_host() {
        assert_ne!(replica_identity(), replica_identity());
    }
}
