//! Each cluster's reconcile status: kept in memory by the running server and
//! written to the store after every pass, so `portcullis cluster status`
//! shows it from another process.

/// The status is what the store keeps of a cluster.
pub use crate::store::ClusterStatus;

use chrono::{DateTime, Utc};

/// What one pass did, or how it failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassOutcome {
    /// `false` when the cluster could not be reached at all.
    pub reachable: bool,
    /// ClusterRoles wanted.
    pub roles_wanted: usize,
    /// ClusterRoles in step at the end.
    pub roles_in_step: usize,
    /// Bindings wanted.
    pub bindings_wanted: usize,
    /// Bindings in step at the end.
    pub bindings_in_step: usize,
    /// Objects applied.
    pub applied: usize,
    /// Objects removed.
    pub removed: usize,
    /// Everything that went wrong (the pass carries on past a failed object).
    pub errors: Vec<String>,
}

impl PassOutcome {
    /// Did everything get into step?
    pub fn ok(&self) -> bool {
        self.reachable && self.errors.is_empty()
    }
}

impl ClusterStatus {
    /// The status after `outcome`, which ended at `at`; `self` is the
    /// previous status (for the "since" times).
    pub fn after(&self, cluster: &str, outcome: &PassOutcome, at: DateTime<Utc>) -> ClusterStatus {
        let since = if self.reachable == Some(outcome.reachable) {
            self.since
        } else {
            Some(at)
        };
        let (roles_in_step, bindings_in_step) = if outcome.reachable {
            (outcome.roles_in_step, outcome.bindings_in_step)
        } else {
            // Nothing is known about the cluster now; keep the last counts.
            (self.roles_in_step, self.bindings_in_step)
        };
        ClusterStatus {
            cluster: cluster.to_string(),
            reachable: Some(outcome.reachable),
            since,
            last_reconcile: Some(at),
            last_success: if outcome.ok() { Some(at) } else { self.last_success },
            last_error: (!outcome.errors.is_empty()).then(|| outcome.errors.join("; ")),
            roles_wanted: outcome.roles_wanted,
            roles_in_step,
            bindings_wanted: outcome.bindings_wanted,
            bindings_in_step,
            applied: outcome.applied,
            removed: outcome.removed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reachable_since_moves_only_when_reachability_changes() {
        let t0 = Utc::now();
        let t1 = t0 + chrono::TimeDelta::seconds(20);
        let t2 = t1 + chrono::TimeDelta::seconds(20);
        let ok = PassOutcome {
            reachable: true,
            roles_wanted: 6,
            roles_in_step: 6,
            ..Default::default()
        };
        let down = PassOutcome {
            reachable: false,
            errors: vec!["connection refused".into()],
            ..Default::default()
        };
        let first = ClusterStatus::default().after("prod", &ok, t0);
        let second = first.after("prod", &ok, t1);
        assert_eq!(
            (second.since, second.last_reconcile, second.last_success),
            (Some(t0), Some(t1), Some(t1))
        );
        let third = second.after("prod", &down, t2);
        assert_eq!(
            (third.reachable, third.since, third.last_success),
            (Some(false), Some(t2), Some(t1))
        );
        assert_eq!(third.last_error.as_deref(), Some("connection refused"));
        assert_eq!(
            third.roles_in_step, 6,
            "the last known counts are kept while unreachable"
        );
    }
}
