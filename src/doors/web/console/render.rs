//! The console's HTML: one page of sections, each a list that wraps on a
//! phone (no wide tables), times relative with the exact UTC time on hover,
//! agents and clients by name. Every form carries the session's CSRF token.

use super::time::time;
use crate::doors::web::pages::{escape, page_with_links};
use crate::identity::{Credential, Grant};
use crate::store::{AccessRequest, AgentSession, GroupRule, HeldWrite};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// What the console shows the signed-in person.
#[derive(Debug, Default)]
pub struct View {
    /// Their login.
    pub login: String,
    /// The session's CSRF token.
    pub csrf: String,
    /// Now, for relative times.
    pub now: DateTime<Utc>,
    /// Their grants in effect.
    pub grants: Vec<Grant>,
    /// The group rules (to name where a grant came from).
    pub rules: Vec<GroupRule>,
    /// Configured clusters.
    pub clusters: Vec<String>,
    /// Roles one may ask for.
    pub roles: Vec<String>,
    /// Their own access requests, newest first.
    pub mine: Vec<AccessRequest>,
    /// Pending access requests they may decide.
    pub to_decide: Vec<AccessRequest>,
    /// Held writes waiting on them.
    pub held: Vec<HeldWrite>,
    /// Their credentials not revoked.
    pub credentials: Vec<Credential>,
    /// The session's own credential (not offered for revocation here).
    pub session_credential: String,
    /// Their agents: those an operator added, and the agent sessions their
    /// consents to OAuth clients made.
    pub agents: Vec<AgentSession>,
    /// Every grant by id, to name an agent's (a narrowed one is not the
    /// person's own).
    pub agent_grants: HashMap<String, Grant>,
    /// Is the person an admin (who may read the audit)?
    pub admin: bool,
    /// Every agent's name by id, to say an access request is an agent's.
    pub agent_names: crate::doors::web::pages::AgentNames,
}

/// The admin's link to the audit page, in the console's navigation.
pub const AUDIT_LINK: &str = "<a id=\"audit-link\" href=\"/console/audit\">Audit</a>";

/// The console's navigation links beyond the common ones: the audit page,
/// for admins only.
pub fn links(admin: bool) -> &'static str {
    if admin {
        AUDIT_LINK
    } else {
        ""
    }
}

/// The console page.
pub fn console(view: &View) -> String {
    let body = [
        format!("<h1>Console</h1>{}", grants(view)),
        request_form(view),
        my_requests(view),
        waiting(view),
        credentials(view),
        agents(view),
    ]
    .concat();
    page_with_links("Console", Some((&view.login, &view.csrf)), links(view.admin), &body)
}

fn grants(view: &View) -> String {
    let items: String = view
        .grants
        .iter()
        .map(|g| {
            let from = match g.granted_by.strip_prefix("rule:") {
                Some(id) => {
                    let group = view.rules.iter().find(|r| r.id == id).map_or("?", |r| r.group.as_str());
                    format!("from group {}", escape(group))
                }
                None => format!("granted by {}", escape(&g.granted_by)),
            };
            format!(
                "<li><b>{}</b> on {} · ends {} · <span class=\"muted\">{from}</span></li>",
                escape(&g.role),
                scope(&g.cluster, g.namespace.as_deref()),
                time(g.expires_at, view.now)
            )
        })
        .collect();
    let list = if items.is_empty() {
        "<p>You hold no grant now. Ask for access below.</p>".to_string()
    } else {
        format!("<ul class=\"items\" id=\"grants\">{items}</ul>")
    };
    let download = if view.grants.is_empty() {
        String::new()
    } else {
        "<p><a id=\"kubeconfig\" href=\"/console/kubeconfig\">Download a kubeconfig</a> \
         <span class=\"muted\">(kubectl signs in through <code>portcullis credential-plugin</code>)</span></p>"
            .to_string()
    };
    format!("<h2>My access</h2>{list}{download}")
}

fn scope(cluster: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{} / {}", escape(cluster), escape(ns)),
        None => format!("{} (whole cluster)", escape(cluster)),
    }
}

fn options(values: &[String]) -> String {
    values
        .iter()
        .map(|v| format!("<option>{}</option>", escape(v)))
        .collect()
}

fn request_form(view: &View) -> String {
    format!(
        "<h2>Request access</h2><form method=\"post\" action=\"/console/access\">{csrf}\
         <label for=\"role\">Role</label><select id=\"role\" name=\"role\">{roles}</select>\
         <label for=\"cluster\">Cluster</label><select id=\"cluster\" name=\"cluster\">{clusters}</select>\
         <label for=\"namespace\">Namespace (empty for the whole cluster)</label>\
         <input id=\"namespace\" name=\"namespace\" autocomplete=\"off\">\
         <label for=\"duration\">For</label><select id=\"duration\" name=\"duration\">\
         <option value=\"1h\">1 hour</option><option value=\"4h\">4 hours</option>\
         <option value=\"8h\" selected>8 hours</option><option value=\"24h\">1 day</option></select>\
         <label for=\"reason\">Reason</label><textarea id=\"reason\" name=\"reason\" rows=\"2\" maxlength=\"1000\" required></textarea>\
         <button type=\"submit\" id=\"ask\">Ask</button></form>",
        csrf = csrf_field(&view.csrf),
        roles = options(&view.roles),
        clusters = options(&view.clusters),
    )
}

fn my_requests(view: &View) -> String {
    if view.mine.is_empty() {
        return String::new();
    }
    let items: String = view
        .mine
        .iter()
        .map(|r| {
            let decided = r
                .decided_by
                .as_deref()
                .map(|by| format!(" by {}", escape(by)))
                .unwrap_or_default();
            let why = r
                .decision_reason
                .as_deref()
                .map(|why| format!(": {}", escape(why)))
                .unwrap_or_default();
            let by_agent = r
                .agent_id
                .as_ref()
                .map(|agent| {
                    let name = view.agent_names.get(agent).map_or("(removed)", String::as_str);
                    format!(" by your agent {}", escape(name))
                })
                .unwrap_or_default();
            format!(
                "<li><b>{}</b> on {} · asked {}{by_agent} · <span class=\"state\">{}</span>{decided}{why}</li>",
                escape(&r.role),
                scope(&r.cluster, r.namespace.as_deref()),
                time(r.created_at, view.now),
                r.state.as_str()
            )
        })
        .collect();
    format!("<h2>My requests</h2><ul class=\"items\" id=\"requests\">{items}</ul>")
}

fn waiting(view: &View) -> String {
    let held: String = view
        .held
        .iter()
        .map(|h| {
            format!(
                "<li><a href=\"/approvals/{}\">{}</a> · expires {}</li>",
                escape(&h.id),
                escape(&h.request.summary()),
                time(h.expires_at, view.now)
            )
        })
        .collect();
    let access: String = view.to_decide.iter().map(|r| decide_item(view, r)).collect();
    if held.is_empty() && access.is_empty() {
        return "<h2>Waiting on me</h2><p>Nothing waits on you.</p>".into();
    }
    let held = if held.is_empty() {
        String::new()
    } else {
        format!("<h3>Held writes</h3><ul class=\"items\" id=\"held\">{held}</ul>")
    };
    let access = if access.is_empty() {
        String::new()
    } else {
        format!("<h3>Access requests</h3><ul class=\"items\" id=\"to-decide\">{access}</ul>")
    };
    format!("<h2>Waiting on me</h2>{held}{access}")
}

/// Who asked: the person, and their agent when an agent asked (an agent
/// steered by what it read must not pass for its person).
fn requester(view: &View, r: &AccessRequest) -> String {
    // A bot named as a person is: `bot:ana` is not ana.
    let person = match r.requester.kind {
        crate::identity::PrincipalKind::Person => format!("<b>{}</b>", escape(&r.requester.name)),
        _ => format!("<b>{}</b>", escape(&r.requester.to_string())),
    };
    match &r.agent_id {
        None => person,
        Some(agent) => {
            let name = view.agent_names.get(agent).map_or("(removed)", String::as_str);
            format!("{person}&#39;s agent <b>{}</b>", escape(name))
        }
    }
}

fn decide_item(view: &View, r: &AccessRequest) -> String {
    let id = escape(&r.id);
    let whose = if r.agent_id.is_some() {
        "The agent&#39;s reason: "
    } else {
        ""
    };
    format!(
        "<li>{who} asks for <b>{role}</b> on {scope} for {duration} · asked {asked}\
         <p>{whose}{reason}</p><form method=\"post\" action=\"/console/access/{id}\">{csrf}\
         <label for=\"reason-{id}\">Your reason (optional)</label>\
         <input id=\"reason-{id}\" name=\"reason\" maxlength=\"1000\" autocomplete=\"off\">\
         <button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button>\
         <button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form></li>",
        who = requester(view, r),
        role = escape(&r.role),
        scope = scope(&r.cluster, r.namespace.as_deref()),
        duration = humantime::format_duration(r.duration),
        asked = time(r.created_at, view.now),
        reason = escape(&r.reason),
        csrf = csrf_field(&view.csrf),
    )
}

fn credentials(view: &View) -> String {
    let items: String = view
        .credentials
        .iter()
        .map(|c| {
            let used = c.last_used_at.map_or("never".into(), |t| time(t, view.now));
            let expires = c.expires_at.map_or("never".into(), |t| time(t, view.now));
            let action = if c.id == view.session_credential {
                "<span class=\"muted\">this sign-in</span>".to_string()
            } else {
                revoke_form(&format!("/console/credentials/{}/revoke", c.id), &view.csrf, &c.name)
            };
            format!(
                "<li><b>{}</b> <code>{}</code> · created {} · last used {used} · expires {expires} {action}</li>",
                escape(&c.name),
                escape(&c.display_prefix),
                time(c.created_at, view.now)
            )
        })
        .collect();
    format!("<h2>My credentials</h2><ul class=\"items\" id=\"credentials\">{items}</ul>")
}

fn agents(view: &View) -> String {
    if view.agents.is_empty() {
        return "<h2>My agents</h2><p>No agent acts for you.</p>".into();
    }
    let items: String = view.agents.iter().map(|s| agent_item(view, s)).collect();
    format!("<h2>My agents</h2><ul class=\"items\" id=\"agents\">{items}</ul>")
}

/// One agent: who (the OAuth client, or the name an operator gave it),
/// when made and last used, until when, its grants and approval switch.
fn agent_item(view: &View, s: &AgentSession) -> String {
    let a = &s.agent;
    let client = s
        .client_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or(s.client_id.as_deref());
    let name = client.unwrap_or(&a.name);
    let id_note = match &s.client_id {
        Some(id) if id != name => format!(" <span class=\"muted\">(client <code>{}</code>)</span>", escape(id)),
        _ => String::new(),
    };
    let state = if a.disabled {
        "<span class=\"state\">revoked</span>".to_string()
    } else {
        revoke_form(&format!("/console/agents/{}/revoke", a.id), &view.csrf, name)
    };
    let grants: Vec<String> = a
        .grant_ids
        .iter()
        .flatten()
        .map(|id| match view.agent_grants.get(id) {
            Some(g) => format!("{} on {}", escape(&g.role), scope(&g.cluster, g.namespace.as_deref())),
            None => "a grant no longer there".into(),
        })
        .collect();
    let grants = if a.grant_ids.is_none() {
        "all of the bot's".into()
    } else {
        grants.join(", ")
    };
    format!(
        "<li id=\"agent-{id}\"><b>{name}</b>{id_note} · created {created} · last used {used} · expires {expires} \
         · grants: {grants} · writes need approval: {approval} {state}</li>",
        id = escape(&a.id),
        name = escape(name),
        created = time(s.created_at, view.now),
        used = s.last_used_at.map_or("never".into(), |t| time(t, view.now)),
        expires = s.expires_at.map_or("never".into(), |t| time(t, view.now)),
        approval = if a.writes_need_approval { "yes" } else { "no" },
    )
}

fn revoke_form(action: &str, csrf: &str, name: &str) -> String {
    format!(
        "<form class=\"inline\" method=\"post\" action=\"{}\">{}\
         <button type=\"submit\" aria-label=\"Revoke {}\">Revoke</button></form>",
        escape(action),
        csrf_field(csrf),
        escape(name)
    )
}

fn csrf_field(csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        crate::doors::web::pages::attr(csrf)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Principal;

    fn asked(id: &str, agent_id: Option<&str>) -> AccessRequest {
        AccessRequest {
            role: "admin".into(),
            reason: "Ana: prod is down".into(),
            ..crate::store::pending_for_tests(id, &Principal::person("carol"), agent_id)
        }
    }

    /// An agent steered by what it read asks in its person's name: the
    /// decider sees it is the agent, and whose words the reason is.
    #[test]
    fn an_access_request_of_an_agent_says_so_to_whoever_decides_and_to_its_person() {
        let view = View {
            now: Utc::now(),
            to_decide: vec![asked("r1", None), asked("r2", Some("a1"))],
            mine: vec![asked("r2", Some("a1"))],
            agent_names: [("a1".to_string(), "deploy-helper".to_string())].into(),
            ..View::default()
        };
        let page = waiting(&view);
        assert!(page.contains("<li><b>carol</b> asks for <b>admin</b>"), "{page}");
        assert!(
            page.contains("<li><b>carol</b>&#39;s agent <b>deploy-helper</b> asks for <b>admin</b>"),
            "{page}"
        );
        assert_eq!(
            page.matches("<p>The agent&#39;s reason: Ana: prod is down</p>").count(),
            1,
            "{page}"
        );
        let mine = my_requests(&view);
        assert!(mine.contains(" by your agent deploy-helper · "), "{mine}");
    }

    /// A bot's request (made through its agent's `request_access`) does not
    /// pass for the request of a person of the same name.
    #[test]
    fn a_bots_access_request_names_it_a_bot() {
        let bots = AccessRequest {
            role: "admin".into(),
            reason: "deploy".into(),
            ..crate::store::pending_for_tests("r3", &Principal::bot("carol"), None)
        };
        let view = View {
            now: Utc::now(),
            to_decide: vec![bots],
            ..View::default()
        };
        let page = waiting(&view);
        assert!(page.contains("<li><b>bot:carol</b> asks for <b>admin</b>"), "{page}");
    }
}
