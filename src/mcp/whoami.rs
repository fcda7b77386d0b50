//! `whoami` and `list_clusters`: what an agent may do, from portcullis's
//! own store (these reach no cluster). A delegated agent sees only the
//! grants it was given, as policy sends only those.

use super::context::ToolContext;
use super::error::ToolError;
use crate::identity::roles::Role;
use crate::identity::Grant;
use chrono::Utc;

/// The grants in effect for the caller on `clusters`, per cluster.
async fn grants(ctx: &ToolContext, clusters: Vec<String>) -> Result<Vec<(String, Vec<Grant>)>, ToolError> {
    let store = ctx.shared.store.clone();
    let identity = ctx.caller.identity.clone();
    let found = tokio::task::spawn_blocking(move || {
        let delegated = identity.agent.as_ref().and_then(|a| a.grant_ids.clone());
        let now = Utc::now();
        clusters
            .into_iter()
            .map(|cluster| {
                let grants = store.grants_of(&identity.principal, &cluster)?;
                let mine = grants
                    .into_iter()
                    .filter(|g| g.in_effect(now))
                    .filter(|g| delegated.as_ref().is_none_or(|ids| ids.contains(&g.id)))
                    .collect();
                Ok((cluster, mine))
            })
            .collect::<Result<Vec<_>, crate::store::StoreError>>()
    })
    .await;
    match found {
        Ok(Ok(grants)) => Ok(grants),
        _ => Err(ToolError::Unavailable(
            "portcullis cannot read grants now; try again".into(),
        )),
    }
}

fn grant_line(grant: &Grant) -> String {
    let scope = match &grant.namespace {
        Some(ns) => format!("namespace {ns}"),
        None => "the whole cluster".to_string(),
    };
    format!(
        "- {} on {scope}, until {} (grant {})",
        grant.role,
        grant.expires_at.format("%Y-%m-%dT%H:%M:%SZ"),
        grant.id
    )
}

/// `whoami`.
pub async fn whoami(ctx: &ToolContext) -> Result<String, ToolError> {
    let identity = &ctx.caller.identity;
    let mut text = match &identity.agent {
        Some(agent) => format!(
            "You are agent {:?} (session {}), acting for {} (seen by clusters as {}).\n",
            agent.name,
            agent.id,
            identity.principal,
            identity.principal.kube_user()
        ),
        None => format!("You are {}.\n", identity.principal),
    };
    let approval = identity.agent.as_ref().is_some_and(|a| a.writes_need_approval);
    text.push_str(if approval {
        "Your writes need a person's approval.\n"
    } else {
        "Your writes run at once, within what your roles allow.\n"
    });
    let all = grants(ctx, ctx.pipeline.cluster_names()).await?;
    if all.iter().all(|(_, g)| g.is_empty()) {
        text.push_str("You have no grants in effect: ask for one with request_access.\n");
    }
    for (cluster, grants) in all.iter().filter(|(_, g)| !g.is_empty()) {
        text.push_str(&format!("Cluster {cluster}:\n"));
        for grant in grants {
            text.push_str(&grant_line(grant));
            text.push('\n');
        }
    }
    text.push_str(&secrets_through_pods(
        &crate::identity::roles::all(&ctx.shared.config),
        &all,
    ));
    Ok(text)
}

/// Said plainly, because redaction makes Secrets look out of reach: a grant
/// whose role lets its holder run code in pods reads every Secret in its
/// scope through a pod that mounts it.
fn secrets_through_pods(roles: &[Role], all: &[(String, Vec<Grant>)]) -> String {
    let lines: Vec<String> = all
        .iter()
        .flat_map(|(cluster, grants)| grants.iter().map(move |g| (cluster, g)))
        .filter_map(|(cluster, grant)| {
            let role = roles.iter().find(|r| r.name == grant.role && !r.reveals_secrets)?;
            let through = role.reads_secrets_through_pods()?;
            let scope = match &grant.namespace {
                Some(ns) => format!("namespace {ns}"),
                None => "every namespace".to_string(),
            };
            let what = if through.any_secret {
                format!("any Secret in {scope}")
            } else {
                format!("every Secret that pods in {scope} mount or carry in their environment")
            };
            Some(format!(
                "- {} on cluster {cluster} lets you {}: you can read the values of {what} (grant {})\n",
                grant.role, through.how, grant.id
            ))
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "Redaction does not keep Secret values from these grants: a pod that mounts a Secret shows its values to whoever runs code in it or reads its logs.\n{}",
        lines.concat()
    )
}

/// `list_clusters`.
pub async fn list_clusters(ctx: &ToolContext) -> Result<String, ToolError> {
    let all = grants(ctx, ctx.pipeline.cluster_names()).await?;
    let lines: Vec<String> = all
        .iter()
        .map(|(cluster, grants)| {
            let roles: Vec<String> = grants
                .iter()
                .map(|g| {
                    format!(
                        "{} in {}",
                        g.role,
                        g.namespace.as_deref().unwrap_or("the whole cluster")
                    )
                })
                .collect();
            if roles.is_empty() {
                format!("{cluster}  (no grants)")
            } else {
                format!("{cluster}  ({})", roles.join(", "))
            }
        })
        .collect();
    Ok(lines.join("\n") + "\n")
}
