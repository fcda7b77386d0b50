//! Who may decide an access request, as a pure function over the decider's
//! grants in effect.
//!
//! - an `admin` or `cluster-admin` of the request's scope (a grant in effect
//!   on that cluster: cluster-wide, or in the requested namespace; a
//!   cluster-wide request needs a cluster-wide one), and the new grant ends
//!   no later than that admin grant;
//! - for a delegated agent's request, the agent's own person, up to that
//!   person's own roles: a grant in effect of the same role covering the
//!   scope, and the new grant ends no later than that one, and is revoked
//!   with it;
//! - an admin deciding their own agent's request (whose grant is theirs as
//!   well) likewise only until their own admin grant ends;
//! - never the requester itself, and only a person.

use super::AccessRequest;
use crate::identity::{Agent, Grant, Principal, PrincipalKind};
use chrono::{DateTime, Utc};

/// Why a person may decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authority {
    /// Admin of the request's scope until `until` (the end of their admin
    /// grant covering it that ends last): an approval never outlasts the
    /// authority that gave it, so a passing admin grant cannot leave access
    /// behind it for longer.
    Admin {
        /// The new grant ends no later than this.
        until: DateTime<Utc>,
    },
    /// The requesting agent's own person, holding the role (or the scope's
    /// admin) until `until`.
    AgentOwner {
        /// The new grant ends no later than this.
        until: DateTime<Utc>,
        /// The decider's grant that ends then: the new grant rests on it,
        /// and is revoked with it.
        under: String,
    },
}

/// Roles whose holders administer their scope.
const ADMIN_ROLES: &[&str] = &["admin", "cluster-admin"];

/// Does `person` (holding `grants`) administer `namespace` (`None`: the
/// whole cluster) of `cluster` at `now`? A cluster-wide admin grant covers
/// every namespace; a namespace's covers only it. Held writes of bots are
/// decided by such a person too.
pub fn administers(
    person: &Principal,
    grants: &[Grant],
    cluster: &str,
    namespace: Option<&str>,
    now: DateTime<Utc>,
) -> bool {
    grants.iter().any(|g| {
        g.cluster == cluster
            && g.in_effect(now)
            && g.subject == *person
            && (g.namespace.is_none() || g.namespace.as_deref() == namespace)
            && ADMIN_ROLES.contains(&g.role.as_str())
    })
}

/// May `decider` (holding `grants`) decide `request` at `now`? `agent` is
/// the requesting agent, if an agent asked. The error says why not.
pub fn authority(
    request: &AccessRequest,
    decider: &Principal,
    grants: &[Grant],
    agent: Option<&Agent>,
    now: DateTime<Utc>,
) -> Result<Authority, String> {
    if decider.kind != PrincipalKind::Person {
        return Err("only a person decides access requests".into());
    }
    if request.agent_id.is_none() && *decider == request.requester {
        return Err(format!("{decider} asked for this access and cannot decide the request"));
    }
    let covers = |g: &Grant| {
        g.cluster == request.cluster
            && g.in_effect(now)
            && g.subject == *decider
            && (g.namespace.is_none() || g.namespace == request.namespace)
    };
    // The decider's grant covering the scope, of a role that `fits`, that
    // ends last: what their agent's new grant rests on.
    let last_end = |fits: &dyn Fn(&str) -> bool| {
        grants
            .iter()
            .filter(|g| covers(g) && fits(&g.role))
            .max_by_key(|g| g.expires_at)
            .map(|g| Authority::AgentOwner {
                until: g.expires_at,
                under: g.id.clone(),
            })
    };
    if administers(decider, grants, &request.cluster, request.namespace.as_deref(), now) {
        if *decider != request.requester {
            let until = grants
                .iter()
                .filter(|g| covers(g) && ADMIN_ROLES.contains(&g.role.as_str()))
                .map(|g| g.expires_at)
                .max()
                .unwrap_or(now);
            return Ok(Authority::Admin { until });
        }
        // Their own agent's request: the grant is theirs too, so deciding it
        // as admin must not outlast their own admin grant, or an admin
        // would lengthen their own access with no second person.
        if let Some(owner) = last_end(&|role| ADMIN_ROLES.contains(&role)) {
            return Ok(owner);
        }
    }
    let owner = agent.filter(|a| a.grant_ids.is_some() && a.principal == *decider);
    if owner.is_some() {
        return last_end(&|role| role == request.role).ok_or_else(|| {
            format!(
                "{decider} may approve their agent's request only up to their own roles, and does not hold {} {}",
                request.role,
                scope(request)
            )
        });
    }
    Err(format!(
        "{decider} is not admin {} on cluster {}",
        scope(request),
        request.cluster
    ))
}

fn scope(request: &AccessRequest) -> String {
    request
        .namespace
        .as_deref()
        .map_or("of the whole cluster".into(), |ns| format!("in namespace {ns}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::AccessState;
    use std::time::Duration;

    fn request(requester: Principal, agent_id: Option<&str>, namespace: Option<&str>, role: &str) -> AccessRequest {
        AccessRequest {
            id: "r1".into(),
            requester,
            agent_id: agent_id.map(Into::into),
            cluster: "prod".into(),
            namespace: namespace.map(Into::into),
            role: role.into(),
            duration: Duration::from_secs(3600),
            reason: "incident".into(),
            state: AccessState::Pending,
            created_at: Utc::now(),
            expires_at: Utc::now() + chrono::TimeDelta::hours(1),
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            grant_id: None,
        }
    }

    fn grant(who: &str, namespace: Option<&str>, role: &str, hours: i64) -> Grant {
        Grant {
            id: format!("{who}-{role}"),
            subject: Principal::person(who),
            cluster: "prod".into(),
            namespace: namespace.map(Into::into),
            role: role.into(),
            expires_at: Utc::now() + chrono::TimeDelta::hours(hours),
            granted_by: "t".into(),
            created_at: Utc::now(),
            revoked_at: None,
        }
    }

    fn agent_of(login: &str) -> Agent {
        Agent {
            id: "a1".into(),
            name: "helper".into(),
            principal: Principal::person(login),
            writes_need_approval: false,
            grant_ids: Some(Vec::new()),
            disabled: false,
        }
    }

    #[test]
    fn an_admin_of_the_namespace_or_cluster_may_decide_but_not_elsewhere() {
        let now = Utc::now();
        let ask = request(Principal::person("bo"), None, Some("shop"), "developer");
        let ana = Principal::person("ana");
        let admin = grant("ana", Some("shop"), "admin", 1);
        assert_eq!(
            authority(&ask, &ana, std::slice::from_ref(&admin), None, now),
            Ok(Authority::Admin {
                until: admin.expires_at
            })
        );
        // Of several admin grants covering it, the one that ends last.
        let longer = grant("ana", None, "cluster-admin", 3);
        assert_eq!(
            authority(&ask, &ana, &[admin.clone(), longer.clone()], None, now),
            Ok(Authority::Admin {
                until: longer.expires_at
            })
        );
        let err = authority(&ask, &ana, &[grant("ana", Some("payments"), "admin", 1)], None, now).unwrap_err();
        assert!(err.contains("not admin in namespace shop"), "{err}");
        assert!(authority(&ask, &ana, &[grant("ana", Some("shop"), "developer", 1)], None, now).is_err());
        assert!(
            authority(&ask, &ana, &[grant("ana", Some("shop"), "admin", -1)], None, now).is_err(),
            "expired"
        );
        let whole = request(Principal::person("bo"), None, None, "viewer");
        assert!(authority(&whole, &ana, &[grant("ana", Some("shop"), "admin", 1)], None, now).is_err());
    }

    #[test]
    fn the_requester_never_decides_its_own_request_even_as_admin() {
        let ana = Principal::person("ana");
        let ask = request(ana.clone(), None, Some("shop"), "viewer");
        let err = authority(&ask, &ana, &[grant("ana", None, "cluster-admin", 1)], None, Utc::now()).unwrap_err();
        assert!(err.contains("cannot decide"), "{err}");
        assert!(
            authority(&ask, &Principal::bot("ci"), &[], None, Utc::now()).is_err(),
            "bots never decide"
        );
    }

    #[test]
    fn an_agents_person_approves_up_to_their_own_roles_and_until_their_own_grant_ends() {
        let now = Utc::now();
        let ana = Principal::person("ana");
        let agent = agent_of("ana");
        let ask = request(ana.clone(), Some("a1"), Some("shop"), "viewer");
        let hers = grant("ana", Some("shop"), "viewer", 2);
        assert_eq!(
            authority(&ask, &ana, std::slice::from_ref(&hers), Some(&agent), now),
            Ok(Authority::AgentOwner {
                until: hers.expires_at,
                under: hers.id.clone()
            })
        );
        let more = request(ana.clone(), Some("a1"), Some("shop"), "secrets-reader");
        let err = authority(&more, &ana, &[hers], Some(&agent), now).unwrap_err();
        assert!(err.contains("only up to their own roles"), "{err}");
        let bo = Principal::person("bo");
        assert!(authority(&ask, &bo, &[grant("bo", Some("shop"), "viewer", 2)], Some(&agent), now).is_err());
    }

    #[test]
    fn an_admin_deciding_their_own_agents_request_gives_no_more_time_than_their_own_admin_grant() {
        let now = Utc::now();
        let ana = Principal::person("ana");
        let agent = agent_of("ana");
        let admin = grant("ana", Some("shop"), "admin", 1);
        for role in ["admin", "developer"] {
            let ask = request(ana.clone(), Some("a1"), Some("shop"), role);
            assert_eq!(
                authority(&ask, &ana, std::slice::from_ref(&admin), Some(&agent), now),
                Ok(Authority::AgentOwner {
                    until: admin.expires_at,
                    under: admin.id.clone()
                }),
                "{role}"
            );
        }
        let cluster = grant("ana", None, "cluster-admin", 4);
        let ask = request(ana.clone(), Some("a1"), None, "cluster-admin");
        assert_eq!(
            authority(&ask, &ana, std::slice::from_ref(&cluster), Some(&agent), now),
            Ok(Authority::AgentOwner {
                until: cluster.expires_at,
                under: cluster.id.clone()
            })
        );
        // Another admin decides it as admin, within their own limit.
        let bo = Principal::person("bo");
        let theirs = grant("bo", None, "cluster-admin", 4);
        assert_eq!(
            authority(&ask, &bo, std::slice::from_ref(&theirs), Some(&agent), now),
            Ok(Authority::Admin {
                until: theirs.expires_at
            })
        );
    }
}
