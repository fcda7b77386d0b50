//! The consent page's HTML ([`super::consent`]): who asks and where the
//! answer goes (with a warning when that is not this computer), the
//! person's own grants to choose from, each with its narrower roles, how
//! long, and whether writes wait for their approval. The form's names and
//! ids are a contract with the end-to-end tests (see the design's "consent
//! page's form").

use super::consent::Ask;
use super::console::time::time;
use super::pages::{attr, escape, page, STYLE};
use crate::oauth::consent::{Offer, DEFAULT_DURATION, DURATIONS};
use crate::oauth::redirect;
use chrono::Utc;

/// What the consent page shows.
#[derive(Debug)]
pub struct View<'a> {
    /// The signed-in person.
    pub login: &'a str,
    /// The session's CSRF token.
    pub csrf: &'a str,
    /// The authorization request.
    pub ask: &'a Ask,
    /// The person's own grants in effect.
    pub offers: &'a [Offer],
}

/// The consent page.
pub fn consent(view: &View) -> String {
    let ask = view.ask;
    let name = escape(&ask.client_name());
    let hidden: String = ask
        .fields()
        .into_iter()
        .chain([("csrf", view.csrf)])
        .map(|(n, v)| format!("<input type=\"hidden\" name=\"{n}\" value=\"{}\">", attr(v)))
        .collect();
    let choices = if view.offers.is_empty() {
        "<p id=\"no-grants\">You hold no grant now, so there is nothing to hand over. \
         Ask for access on the <a href=\"/console\">console</a> first.</p>\
         <button type=\"submit\" name=\"decision\" value=\"deny\" id=\"deny\">Deny</button>"
            .to_string()
    } else {
        format!(
            "{}{}<button type=\"submit\" name=\"decision\" value=\"approve\" id=\"approve\">Allow</button>\
             <button type=\"submit\" name=\"decision\" value=\"deny\" id=\"deny\">Deny</button>",
            grants(view.offers),
            how_long()
        )
    };
    let body = format!(
        "<h1>Allow {name} to act for you?</h1>\
         <p><b id=\"client\">{name}</b> <span class=\"muted\">(client <code>{id}</code>)</span> asks to use \
         portcullis's MCP server as you, with only the access you choose here.</p>\
         <p>Its answer goes to <b id=\"redirect-host\">{host}</b>.</p>{warning}\
         <form method=\"post\" action=\"/oauth/authorize\">{hidden}{choices}</form>",
        id = escape(&ask.client.client_id),
        host = escape(&destination(&ask.redirect_uri)),
        warning = warning(ask, &name),
    );
    page("Allow an agent", Some((view.login, view.csrf)), &body)
}

/// The warning shown when the code leaves this computer.
fn warning(ask: &Ask, name: &str) -> String {
    if redirect::is_loopback(&ask.redirect_uri) {
        return String::new();
    }
    format!(
        "<p class=\"del\" id=\"warning\"><b>Careful:</b> the answer goes to {}, not to an address on this \
         computer. Allow only if you started this from {name} yourself and trust it with what you choose.</p>",
        escape(&destination(&ask.redirect_uri))
    )
}

/// Where a redirect URI goes, as a person can check it: the host (and
/// port) of a web address, or the scheme and what follows up to the path
/// of an app's private scheme (`cursor://anysphere.cursor-retrieval`).
fn destination(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return uri.to_string();
    };
    let after = rest.strip_prefix("//").unwrap_or(rest);
    let host = after.split(['/', '?']).next().unwrap_or_default();
    match scheme.to_ascii_lowercase().as_str() {
        "http" | "https" => host.to_string(),
        _ if host.is_empty() => format!("{scheme}:"),
        _ => format!("{scheme}://{host}"),
    }
}

/// One checkbox per grant, unchecked, and its role to hand over.
fn grants(offers: &[Offer]) -> String {
    let now = Utc::now();
    let items: String = offers
        .iter()
        .map(|offer| {
            let g = &offer.grant;
            let id = escape(&g.id);
            let scope = match &g.namespace {
                Some(ns) => format!("{} / {}", escape(&g.cluster), escape(ns)),
                None => format!("{} (whole cluster)", escape(&g.cluster)),
            };
            let narrower: String = offer
                .narrower
                .iter()
                .map(|r| format!("<option value=\"{0}\">{0}</option>", escape(r)))
                .collect();
            format!(
                "<li><label><input type=\"checkbox\" name=\"grant\" value=\"{id}\" id=\"grant-{id}\"> \
                 <b>{role}</b> on {scope} · ends {ends}</label>\
                 <label for=\"role-{id}\">Role the agent gets</label><select id=\"role-{id}\" name=\"role-{id}\">\
                 <option value=\"{role}\" selected>{role} (the grant's own)</option>{narrower}</select></li>",
                role = escape(&g.role),
                ends = time(g.expires_at, now),
            )
        })
        .collect();
    format!("<h2>Which of your grants the agent gets</h2><ul class=\"items\" id=\"grants\">{items}</ul>")
}

/// How long, and whether writes wait for the person.
fn how_long() -> String {
    let options: String = DURATIONS
        .iter()
        .map(|(secs, words)| {
            let selected = if *secs == DEFAULT_DURATION { " selected" } else { "" };
            format!("<option value=\"{secs}\"{selected}>{words}</option>")
        })
        .collect();
    format!(
        "<h2>For how long</h2><label for=\"duration\">The agent's access ends after</label>\
         <select id=\"duration\" name=\"duration\">{options}</select>\
         <p class=\"muted\">Never past the chosen grants' own end.</p>\
         <p><label><input type=\"checkbox\" name=\"writes_need_approval\" id=\"writes_need_approval\" value=\"yes\" checked> \
         Writes need my approval</label></p>"
    )
}

/// On to the client after a decision, by a page of ours (a redirect
/// answering the form would meet the pages' `form-action 'self'`). A
/// denial sends the browser on by itself only to this computer: anyone may
/// register a client with a web address that looks like this one's, and
/// the person who did the right thing must not land there unasked (RFC 9700
/// §4.11.2); the link names where it goes.
pub fn handoff(to: &str, client: &str, approved: bool, redirect_uri: &str) -> String {
    let (to, name) = (attr(to), escape(client));
    let said = if approved { "allowed" } else { "denied" };
    let (said, refresh, link) = if approved || redirect::is_loopback(redirect_uri) {
        (
            format!("You {said} {name}. Back to it now."),
            format!("<meta http-equiv=\"refresh\" content=\"0;url={to}\">"),
            format!("Continue to {name}"),
        )
    } else {
        (
            format!("You denied {name}: it was given nothing. You may close this page."),
            String::new(),
            format!("Go back to {} anyway", escape(&destination(redirect_uri))),
        )
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         {refresh}<title>Back to {name} · portcullis</title>\
         <style>{STYLE}</style></head><body><main><h1>Back to {name}</h1><p id=\"decided\">{said}</p>\
         <p><a id=\"continue\" href=\"{to}\">{link}</a></p></main></body></html>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_destination_is_the_host_of_a_web_address_or_the_apps_scheme() {
        assert_eq!(destination("http://127.0.0.1:4000/cb"), "127.0.0.1:4000");
        assert_eq!(destination("https://app.example.com/cb?x=1"), "app.example.com");
        assert_eq!(
            destination("cursor://anysphere.cursor-retrieval/oauth/callback"),
            "cursor://anysphere.cursor-retrieval"
        );
        assert_eq!(destination("com.example.app:/oauth2redirect"), "com.example.app:");
    }
}
