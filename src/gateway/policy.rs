//! Policy: which grants are in effect for this request, and so which groups
//! the cluster is sent.
//!
//! portcullis does not authorize Kubernetes requests itself; the cluster's
//! RBAC does, against the groups sent here. Expiry is checked on every
//! request (so an expired grant stops being sent at once, even from the
//! cache); the cache only spares the store. It is dropped when the store
//! tells of a change (PostgreSQL's notifications; the server calls
//! [`Policy::forget`]), and a lookup under way then is not cached; it lasts
//! two seconds (`[store] cache_ttl`), so a grant revoked without that word
//! (on SQLite, or when the word is missed) stops applying within that time.

use super::classify::RequestInfo;
pub use crate::identity::clock::GrantClock;
use crate::identity::roles::Role;
use crate::identity::{Grant, Identity, Principal};
use crate::store::Store;
use dashmap::DashMap;
use foldhash::fast::RandomState;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What policy decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward, sending these groups (one per grant in effect).
    Allow {
        /// `portcullis:grant:<id>` for each grant in effect.
        groups: Vec<String>,
        /// Whether Secret values may reach the caller: never for an agent;
        /// for people and bots, when a grant in effect is of a role that
        /// reveals Secrets.
        reveal_secrets: bool,
        /// Whether a grant in effect that covers the request is of a role
        /// that reveals Secrets, whoever asks: what an agent's
        /// `read_secret` needs, so that it never reveals what its person's
        /// own grants would hide.
        role_reveals: bool,
    },
}

impl Policy {
    /// The field selector terms that keep the protected namespaces out of
    /// a list or watch of Secrets across namespaces. A grant for the whole
    /// cluster covers them too, and a path that names one is refused its
    /// groups, but `get secrets -A` names none: portcullis's own Secrets
    /// (cluster tokens, the approvals key, the store's URL) would be in it.
    pub fn outside_protected(&self, info: &RequestInfo) -> Option<Arc<str>> {
        let across = info.is_secrets() && info.namespace.is_empty() && matches!(info.verb.as_str(), "list" | "watch");
        across.then(|| self.outside_protected.clone()).flatten()
    }
}

/// The store could not be asked: fail closed.
#[derive(Debug, thiserror::Error)]
#[error("grant store unavailable")]
pub struct PolicyUnavailable;

/// Decides the groups a request carries.
#[derive(Debug)]
pub struct Policy {
    store: Store,
    /// A short list from the config, searched in order: the namespace is
    /// the client's, and a `HashSet` hashed it with SipHash on every
    /// request.
    protected: Vec<String>,
    revealing_roles: HashSet<String, RandomState>,
    /// `metadata.namespace!=<ns>` for each protected namespace, joined:
    /// what a list of Secrets across namespaces is narrowed by.
    outside_protected: Option<Arc<str>>,
    /// By principal, then cluster: looked up with the request's own
    /// principal and cluster name, not copies of them made for a key. Not
    /// SipHash: the keys are authenticated principals and configured
    /// clusters, which no client can pick to collide.
    cache: DashMap<Principal, HashMap<String, CachedGrants, RandomState>, RandomState>,
    /// Bumped by [`Policy::forget`]: grants read before a revocation are
    /// not cached after it (see `grants`).
    generation: std::sync::atomic::AtomicU64,
    clock: GrantClock,
    /// How long grants read are kept.
    ttl: Duration,
}

/// A subject's grants on one cluster, and when they were read.
type CachedGrants = (Arc<Vec<Grant>>, Instant);

impl Policy {
    /// A policy over `store`, with `protected` namespaces where no grant
    /// applies, and `roles` (built-in and custom).
    pub fn new(store: Store, protected: impl IntoIterator<Item = String>, roles: &[Role]) -> Self {
        let revealing_roles = roles
            .iter()
            .filter(|r| r.reveals_secrets)
            .map(|r| r.name.clone())
            .collect();
        let protected: Vec<String> = protected.into_iter().collect();
        let outside_protected = (!protected.is_empty()).then(|| {
            let terms: Vec<String> = protected.iter().map(|ns| format!("metadata.namespace!={ns}")).collect();
            Arc::from(terms.join(","))
        });
        Policy {
            store,
            protected,
            revealing_roles,
            outside_protected,
            cache: DashMap::default(),
            generation: std::sync::atomic::AtomicU64::new(0),
            clock: GrantClock::default(),
            ttl: crate::config::store::DEFAULT_CACHE_TTL,
        }
    }

    /// Keep grants read for `ttl` (`[store] cache_ttl`).
    pub fn keeping_grants_for(self, ttl: Duration) -> Self {
        Policy { ttl, ..self }
    }

    /// The clock grants are judged by.
    pub fn clock(&self) -> &GrantClock {
        &self.clock
    }

    /// Decide for `identity` on `cluster` doing `info`.
    pub async fn decide(
        &self,
        identity: &Identity,
        cluster: &str,
        info: &RequestInfo,
    ) -> Result<Decision, PolicyUnavailable> {
        if !info.namespace.is_empty() && self.protected.contains(&info.namespace) {
            return Ok(Decision::Allow {
                groups: Vec::new(),
                reveal_secrets: false,
                role_reveals: false,
            });
        }
        let grants = self.grants(&identity.principal, cluster).await?;
        let in_effect = self.in_effect(identity, &grants);
        // A revealing grant reveals only where it applies: its namespace, or
        // everywhere for a cluster-wide grant (so `-A` needs a cluster-wide one).
        let covers = |g: &Grant| {
            g.namespace
                .as_deref()
                .is_none_or(|ns| !info.namespace.is_empty() && ns == info.namespace)
        };
        let role_reveals = in_effect
            .iter()
            .any(|g| self.revealing_roles.contains(&g.role) && covers(g));
        let reveal_secrets = !identity.is_agent() && role_reveals;
        let groups = in_effect.iter().map(|g| g.group()).collect();
        Ok(Decision::Allow {
            groups,
            reveal_secrets,
            role_reveals,
        })
    }

    /// The grants of `identity` in effect now (a delegated agent is sent
    /// only the grants it was given).
    fn in_effect<'g>(&self, identity: &Identity, grants: &'g [Grant]) -> Vec<&'g Grant> {
        let now = self.clock.now();
        let delegated = identity.agent.as_ref().and_then(|a| a.grant_ids.as_ref());
        grants
            .iter()
            .filter(|g| g.in_effect(now))
            .filter(|g| delegated.is_none_or(|ids| ids.contains(&g.id)))
            .collect()
    }

    /// The groups of the grants in effect that can authorize a request in
    /// `namespace` (empty: across namespaces or cluster-scoped): the
    /// cluster-wide ones and that namespace's. An open stream is ended
    /// when one of these ends, not when a grant elsewhere does.
    pub async fn groups_for(&self, identity: &Identity, cluster: &str, namespace: &str) -> Option<Vec<String>> {
        let grants = self.grants(&identity.principal, cluster).await.ok()?;
        let applies = |g: &&Grant| {
            g.namespace
                .as_deref()
                .is_none_or(|ns| !namespace.is_empty() && ns == namespace)
        };
        Some(
            self.in_effect(identity, &grants)
                .into_iter()
                .filter(applies)
                .map(Grant::group)
                .collect(),
        )
    }

    /// Are `groups` (those an open stream was sent with) all still in
    /// effect for `identity` on `cluster`? `None` when the store cannot say.
    pub async fn still_granted(&self, identity: &Identity, cluster: &str, groups: &[String]) -> Option<bool> {
        let grants = self.grants(&identity.principal, cluster).await.ok()?;
        let now: Vec<String> = self.in_effect(identity, &grants).iter().map(|g| g.group()).collect();
        Some(groups.iter().all(|group| now.contains(group)))
    }

    /// Forget cached grants (after a change made in this process or told
    /// of by the store).
    pub fn forget(&self) {
        self.generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.cache.clear();
    }

    async fn grants(&self, principal: &Principal, cluster: &str) -> Result<Arc<Vec<Grant>>, PolicyUnavailable> {
        if let Some(entry) = self
            .cache
            .get(principal)
            .as_ref()
            .and_then(|clusters| clusters.get(cluster))
        {
            if entry.1.elapsed() < self.ttl {
                return Ok(entry.0.clone());
            }
        }
        let began = self.begin_read();
        let store = self.store.clone();
        let (p, c) = (principal.clone(), cluster.to_string());
        let grants = tokio::task::spawn_blocking(move || store.grants_of(&p, &c))
            .await
            .map_err(|_| PolicyUnavailable)?
            .map_err(|error| {
                tracing::error!(%error, "grant lookup failed");
                PolicyUnavailable
            })?;
        let grants = Arc::new(grants);
        self.keep(principal, cluster, &grants, began);
        Ok(grants)
    }

    /// Before reading the store: when, and which generation.
    fn begin_read(&self) -> Read {
        Read {
            generation: self.generation.load(std::sync::atomic::Ordering::SeqCst),
            at: Instant::now(),
        }
    }

    /// Cache `grants` read since `began`, unless a forget came since.
    fn keep(&self, principal: &Principal, cluster: &str, grants: &Arc<Vec<Grant>>, began: Read) {
        self.cache
            .entry(principal.clone())
            .or_default()
            .insert(cluster.to_string(), (grants.clone(), began.at));
        // As the authenticator does: a forget since the read began means
        // what was read may be revoked already; checked after inserting, so
        // that a later forget still finds the entry to drop.
        if self.generation.load(std::sync::atomic::Ordering::SeqCst) != began.generation {
            self.cache.remove(principal);
        }
    }
}

/// When a read of the store began, and the cache's generation then.
struct Read {
    generation: u64,
    at: Instant,
}

/// What the policy stage decided about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The groups of the grants in effect, sent to the cluster.
    pub groups: Vec<String>,
    /// Secret values may reach the caller (else they are redacted).
    pub reveal_secrets: bool,
    /// `read_secret`: this one get of one Secret is recorded as a reveal.
    pub reveal_one: bool,
    /// Field selector terms added to the query (see
    /// [`Policy::outside_protected`]).
    pub narrowed_by: Option<Arc<str>>,
}

impl super::Pipeline {
    /// The policy stage: the grants in effect decide the groups the cluster
    /// is sent, and whether Secret values reach the caller.
    pub(super) async fn judge(
        &self,
        stages: &super::Stages<'_>,
        info: &RequestInfo,
        trace: &mut super::Trace,
    ) -> Result<Judged, super::error::RequestError> {
        let identity = stages.identity;
        let (groups, reveal_secrets, role_reveals) =
            match self.policy.decide(identity, &stages.upstream.name, info).await {
                Ok(Decision::Allow {
                    groups,
                    reveal_secrets,
                    role_reveals,
                }) => (groups, reveal_secrets, role_reveals),
                Err(e) => return Err(super::error::RequestError::GrantsUnavailable { cause: e.to_string() }),
            };
        // `read_secret`: one get of one Secret, recorded as a reveal; only
        // under a grant whose role reveals Secrets where it asks (a custom
        // role that may read Secrets without revealing them hides them from
        // its person, and so from the person's agent).
        let reveal_one = stages.reveal_secret && info.is_secrets() && info.verb == "get" && !info.name.is_empty();
        if reveal_one && !role_reveals {
            return Err(super::error::RequestError::RevealNotGranted {
                namespace: info.namespace.clone(),
            });
        }
        trace.row.secret_revealed = reveal_one;
        let reveal_secrets = reveal_secrets || reveal_one;
        trace.row.redacted = super::redact::hides_values(info, identity, reveal_secrets);
        Ok(Judged {
            groups,
            reveal_secrets,
            reveal_one,
            narrowed_by: self.policy.outside_protected(info),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::classify::classify;
    use crate::identity::Agent;
    use chrono::Utc;

    fn grant(id: &str, ns: Option<&str>, expires_in: i64) -> Grant {
        Grant {
            id: id.into(),
            subject: Principal::person("ana"),
            cluster: "c".into(),
            namespace: ns.map(Into::into),
            role: "viewer".into(),
            expires_at: Utc::now() + chrono::TimeDelta::seconds(expires_in),
            granted_by: "admin".into(),
            created_at: Utc::now(),
            revoked_at: None,
        }
    }

    #[test]
    fn grants_read_before_a_forget_are_not_cached_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        let policy = Policy::new(store, [], &crate::identity::roles::builtin());
        let ana = Principal::person("ana");
        let grants = Arc::new(vec![grant("g1", Some("shop"), 3600)]);
        let cached = |policy: &Policy| policy.cache.get(&ana).is_some_and(|c| c.contains_key("c"));
        // A read with no forget during it is kept.
        let began = policy.begin_read();
        policy.keep(&ana, "c", &grants, began);
        assert!(cached(&policy));
        policy.forget();
        assert!(!cached(&policy));
        // A read under way while a revocation forgets is not kept: it may
        // hold the revoked grant.
        let began = policy.begin_read();
        policy.forget();
        policy.keep(&ana, "c", &grants, began);
        assert!(!cached(&policy), "read before the forget, cached after it");
    }

    /// The configured life of the cache: a grant added in the store, with
    /// no word of it, is seen at the next look with none, and not within a
    /// long one until the cache is forgotten.
    #[tokio::test]
    async fn grants_read_are_kept_for_the_configured_life() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        let ana = Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let roles = crate::identity::roles::builtin();
        let uncached = Policy::new(store.clone(), [], &roles).keeping_grants_for(Duration::ZERO);
        let kept = Policy::new(store.clone(), [], &roles).keeping_grants_for(Duration::from_secs(3600));
        for policy in [&uncached, &kept] {
            assert!(policy.grants(&ana, "c").await.unwrap().is_empty());
        }
        store.add_grant(&grant("g1", Some("shop"), 3600)).unwrap();
        assert_eq!(uncached.grants(&ana, "c").await.unwrap().len(), 1);
        assert!(kept.grants(&ana, "c").await.unwrap().is_empty(), "kept for the hour");
        kept.forget();
        assert_eq!(kept.grants(&ana, "c").await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn only_grants_in_effect_are_sent_and_protected_namespaces_get_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        store.add_principal(&Principal::person("ana"), false).unwrap();
        store.add_grant(&grant("g1", Some("shop"), 3600)).unwrap();
        store.add_grant(&grant("g2", None, -1)).unwrap();
        store.add_grant(&grant("g3", None, 3600)).unwrap();
        store.revoke_grant("g3").unwrap();
        let policy = Policy::new(store, ["kube-system".to_string()], &crate::identity::roles::builtin());
        let ana = Identity {
            principal: Principal::person("ana"),
            credential_id: "c1".into(),
            origin: None,
            agent: None,
        };
        let pods = classify(&http::Method::GET, "/api/v1/namespaces/shop/pods", None);
        let allow = |groups: &[&str], reveal_secrets| Decision::Allow {
            groups: groups.iter().map(|g| g.to_string()).collect(),
            reveal_secrets,
            role_reveals: reveal_secrets,
        };
        assert_eq!(
            policy.decide(&ana, "c", &pods).await.unwrap(),
            allow(&["portcullis:grant:g1"], false)
        );
        let system = classify(&http::Method::GET, "/api/v1/namespaces/kube-system/pods", None);
        assert_eq!(policy.decide(&ana, "c", &system).await.unwrap(), allow(&[], false));
        assert_eq!(policy.decide(&ana, "other", &pods).await.unwrap(), allow(&[], false));
    }

    #[tokio::test]
    async fn cached_grants_stay_with_their_principal_and_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        for name in ["ana", "ben"] {
            store.add_principal(&Principal::person(name), false).unwrap();
        }
        store.add_grant(&grant("on-c", None, 3600)).unwrap();
        let mut on_d = grant("on-d", None, 3600);
        on_d.cluster = "d".into();
        store.add_grant(&on_d).unwrap();
        let mut bens = grant("bens", None, 3600);
        bens.subject = Principal::person("ben");
        store.add_grant(&bens).unwrap();
        let policy = Policy::new(store.clone(), Vec::new(), &crate::identity::roles::builtin());
        let ben = Identity {
            principal: Principal::person("ben"),
            ..person()
        };
        let pods = classify(&http::Method::GET, "/api/v1/namespaces/shop/pods", None);
        let groups = |decision: Decision| match decision {
            Decision::Allow { groups, .. } => groups,
        };
        // Twice round, the second time from the cache.
        for _ in 0..2 {
            assert_eq!(
                groups(policy.decide(&person(), "c", &pods).await.unwrap()),
                ["portcullis:grant:on-c"]
            );
            assert_eq!(
                groups(policy.decide(&person(), "d", &pods).await.unwrap()),
                ["portcullis:grant:on-d"]
            );
            assert_eq!(
                groups(policy.decide(&ben, "c", &pods).await.unwrap()),
                ["portcullis:grant:bens"]
            );
            assert!(groups(policy.decide(&ben, "d", &pods).await.unwrap()).is_empty());
        }
        // Cached: a grant added behind the cache's back shows only once it is forgotten.
        let mut more = grant("more", None, 3600);
        more.cluster = "d".into();
        store.add_grant(&more).unwrap();
        assert_eq!(groups(policy.decide(&person(), "d", &pods).await.unwrap()).len(), 1);
        policy.forget();
        assert_eq!(groups(policy.decide(&person(), "d", &pods).await.unwrap()).len(), 2);
    }

    fn person() -> Identity {
        Identity {
            principal: Principal::person("ana"),
            credential_id: "c1".into(),
            origin: None,
            agent: None,
        }
    }

    #[tokio::test]
    async fn a_stream_is_held_to_the_grants_that_could_authorize_it_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        store.add_principal(&Principal::person("ana"), false).unwrap();
        for (id, ns) in [("shop1", Some("shop")), ("pay1", Some("payments")), ("all1", None)] {
            store.add_grant(&grant(id, ns, 3600)).unwrap();
        }
        let policy = Policy::new(store.clone(), Vec::new(), &crate::identity::roles::builtin());
        let mut shop = policy.groups_for(&person(), "c", "shop").await.unwrap();
        shop.sort();
        assert_eq!(shop, ["portcullis:grant:all1", "portcullis:grant:shop1"]);
        let across = policy.groups_for(&person(), "c", "").await.unwrap();
        assert_eq!(
            across,
            ["portcullis:grant:all1"],
            "across namespaces: cluster-wide grants only"
        );
        // payments' grant ending leaves the shop stream's grants in effect.
        store.revoke_grant("pay1").unwrap();
        policy.forget();
        assert_eq!(policy.still_granted(&person(), "c", &shop).await, Some(true));
        store.revoke_grant("shop1").unwrap();
        policy.forget();
        assert_eq!(policy.still_granted(&person(), "c", &shop).await, Some(false));
    }

    #[tokio::test]
    async fn agents_get_only_their_grants_and_never_secret_values() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        store.add_principal(&Principal::person("ana"), false).unwrap();
        let mut reader = grant("g1", Some("shop"), 3600);
        reader.role = "secrets-reader".into();
        store.add_grant(&reader).unwrap();
        store.add_grant(&grant("g2", Some("shop"), 3600)).unwrap();
        let policy = Policy::new(store, Vec::new(), &crate::identity::roles::builtin());
        let pods = classify(&http::Method::GET, "/api/v1/namespaces/shop/secrets", None);
        let ana = Identity {
            principal: Principal::person("ana"),
            credential_id: "c1".into(),
            origin: None,
            agent: None,
        };
        let Decision::Allow {
            groups, reveal_secrets, ..
        } = policy.decide(&ana, "c", &pods).await.unwrap();
        assert_eq!(groups.len(), 2);
        assert!(reveal_secrets, "secrets-reader reveals");
        let agent = Agent {
            id: "a1".into(),
            name: "helper".into(),
            principal: Principal::person("ana"),
            writes_need_approval: false,
            grant_ids: Some(vec!["g1".into()]),
            disabled: false,
        };
        let delegated = Identity {
            agent: Some(std::sync::Arc::new(agent)),
            ..ana
        };
        let Decision::Allow {
            groups, reveal_secrets, ..
        } = policy.decide(&delegated, "c", &pods).await.unwrap();
        assert_eq!(groups, ["portcullis:grant:g1"]);
        assert!(!reveal_secrets, "an agent never sees Secret values");
        let elsewhere = classify(&http::Method::GET, "/api/v1/namespaces/payments/secrets", None);
        let Decision::Allow { reveal_secrets, .. } = policy.decide(&person(), "c", &elsewhere).await.unwrap();
        assert!(!reveal_secrets, "a grant in shop reveals nothing in payments");
        let everywhere = classify(&http::Method::GET, "/api/v1/secrets", None);
        let Decision::Allow { reveal_secrets, .. } = policy.decide(&person(), "c", &everywhere).await.unwrap();
        assert!(
            !reveal_secrets,
            "a namespaced grant reveals nothing in a list across namespaces"
        );
    }
}
