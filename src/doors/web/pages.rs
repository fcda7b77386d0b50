//! The approval pages' HTML: server-rendered, one small inline style sheet
//! (allowed by its hash in the CSP), no script, readable on a phone.

use super::console::time::time;
use crate::approvals::{preview, HeldState, HeldWrite};
use chrono::Utc;
use std::collections::HashMap;

/// Agents' names by id, so pages name them as their people do.
pub type AgentNames = HashMap<String, String>;
use sha2::{Digest, Sha256};

/// The one style sheet.
pub const STYLE: &str = ":root{color-scheme:light dark;--bg:#fff;--fg:#1b1b1b;--muted:#555;--line:#ccc;--code:#f2f2f2;\
--add:#0a5d0a;--del:#a30d0d;--link:#0645ad;--btn:#0b5cad}\
@media (prefers-color-scheme:dark){:root{--bg:#15171a;--fg:#e8e8e8;--muted:#b4b4b4;--line:#444;--code:#23272c;\
--add:#8fe08f;--del:#ffa3a3;--link:#9cc0ff;--btn:#2f6fbd}}\
body{font:16px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;background:var(--bg);color:var(--fg);\
overflow-wrap:anywhere}a{color:var(--link)}h1{font-size:1.3rem}h2{font-size:1.1rem;margin-top:1.6rem}h3{font-size:1rem}\
pre{overflow-x:auto;background:var(--code);padding:.6rem;font-size:.85rem}code{word-break:break-all}\
.add{color:var(--add)}.del{color:var(--del)}.muted{color:var(--muted)}table{border-collapse:collapse;width:100%}\
td,th{text-align:left;padding:.3rem;border-bottom:1px solid var(--line);vertical-align:top}form{margin:1rem 0}\
form.inline{display:inline;margin:0}label{display:block;margin-top:.6rem}\
textarea,input,select{width:100%;box-sizing:border-box;font:inherit;background:var(--bg);color:var(--fg);\
border:1px solid var(--muted);padding:.35rem}input[type=checkbox]{width:auto}\
button{font-size:1rem;padding:.45rem 1rem;margin:.3rem .3rem 0 0;background:var(--btn);color:#fff;border:0;border-radius:4px}\
.state{font-weight:bold}ul.items{list-style:none;padding:0}ul.items li{border-bottom:1px solid var(--line);padding:.5rem 0}\
nav a{margin-right:1rem}";

/// The Content-Security-Policy of every page: nothing but this style
/// sheet, forms posting to this origin, no framing.
pub fn csp() -> String {
    use base64::Engine;
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
}

/// Escape text for HTML, and show its controls and the characters that
/// reorder what is shown (bidirectional overrides and isolates) as visible
/// escapes, line breaks kept, as the command line shows them
/// ([`crate::text`]): a held write's value could otherwise show a person
/// its lines in another order than the cluster gets them.
///
/// Not for a form's value or a link, which must go back as they came: see
/// [`attr`].
pub fn escape(text: &str) -> String {
    attr(&crate::text::escape_control_lines(text))
}

/// Escape text for an HTML attribute whose value goes back to portcullis
/// or on to a client as it is (a form's hidden field, a link): only the
/// characters HTML gives a meaning.
pub fn attr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page.
pub fn page(title: &str, signed_in: Option<(&str, &str)>, body: &str) -> String {
    page_with_links(title, signed_in, "", body)
}

/// A whole page whose navigation ends with `links` (trusted HTML: the
/// admin's link to the audit page).
pub fn page_with_links(title: &str, signed_in: Option<(&str, &str)>, links: &str, body: &str) -> String {
    let header = match signed_in {
        Some((login, csrf)) => format!(
            "<nav><a href=\"/console\">Console</a><a href=\"/approvals\">Approvals</a>{links}</nav>\
             <p>Signed in as <b>{}</b></p>\
             <form method=\"post\" action=\"/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><button>Sign out</button></form>",
            escape(login),
            attr(csrf)
        ),
        None => String::new(),
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · portcullis</title><style>{STYLE}</style></head><body><header>{header}</header><main>{body}</main></body></html>",
        escape(title)
    )
}

/// The sign-in form; `next` is where to go afterwards, `csrf` the form's
/// token (bound to the sign-in page's pre-session cookie).
pub fn login(next: &str, csrf: &str, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!("<p class=\"del\">{}</p>", escape(e)))
        .unwrap_or_default();
    page(
        "Sign in",
        None,
        &format!(
            "<h1>Sign in to portcullis</h1>{error}<form method=\"post\" action=\"/login\">\
             <label for=\"token\">Your portcullis token (the one in your kubeconfig)</label>\
             <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"off\" required>\
             <input type=\"hidden\" name=\"next\" value=\"{}\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\">Sign in</button></form>",
            attr(next),
            attr(csrf)
        ),
    )
}

/// With an identity provider: a link that starts signing in, then goes to
/// `next`.
pub fn sign_in_link(next: &str, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!("<p class=\"del\">{}</p>", escape(e)))
        .unwrap_or_default();
    let next: String = form_urlencoded::byte_serialize(next.as_bytes()).collect();
    page(
        "Sign in",
        None,
        &format!(
            "<h1>Sign in to portcullis</h1>{error}\
             <p><a id=\"signin\" href=\"/login?next={}\">Sign in with your company account</a></p>",
            attr(&next)
        ),
    )
}

/// Why signing in with the identity provider failed, and a way to start
/// again.
pub fn sign_in_refused(why: &str) -> String {
    page(
        "Not signed in",
        None,
        &format!(
            "<h1>Not signed in</h1><p id=\"why\">Sign-in refused: {}.</p><p><a href=\"/login\">Start again</a></p>",
            escape(why)
        ),
    )
}

/// After the provider sent the browser back, or the command line was given
/// its code: on to `next` by the page's refresh, with a link for a browser
/// that does not follow it.
pub fn signed_in(next: &str) -> String {
    let next = attr(next);
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={next}\"><title>Signed in · portcullis</title>\
         <style>{STYLE}</style></head><body><h1>Signed in</h1><p><a id=\"continue\" href=\"{next}\">Continue</a></p></body></html>"
    )
}

/// After signing out: not straight back to the provider, which may still
/// have the person signed in.
pub fn signed_out() -> String {
    page(
        "Signed out",
        None,
        "<h1>Signed out</h1><p>You are signed out of portcullis.</p><p><a id=\"signin\" href=\"/login\">Sign in again</a></p>",
    )
}

/// The list of held writes waiting on the signed-in person.
pub fn list(login: &str, csrf: &str, waiting: &[HeldWrite], agents: &AgentNames) -> String {
    let now = Utc::now();
    let rows: String = waiting
        .iter()
        .map(|h| {
            format!(
                "<tr><td><a href=\"/approvals/{id}\">{what}</a></td><td>{who}</td><td>{expires}</td></tr>",
                id = escape(&h.id),
                what = escape(&h.request.summary()),
                who = escape(&asker(h, agents)),
                expires = time(h.expires_at, now)
            )
        })
        .collect();
    let body = if waiting.is_empty() {
        "<h1>Approvals</h1><p>Nothing waits on you.</p>".to_string()
    } else {
        format!("<h1>Approvals</h1><table><tr><th>Write</th><th>Asked by</th><th>Expires</th></tr>{rows}</table>")
    };
    page("Approvals", Some((login, csrf)), &body)
}

/// One held write: who asked, what, where, the diff and the dry-run result,
/// and (when `may_decide` is `Ok`) the decision form.
pub fn held(login: &str, csrf: &str, held: &HeldWrite, may_decide: Result<(), String>, agents: &AgentNames) -> String {
    let (r, now) = (&held.request, Utc::now());
    let mut body = format!(
        "<h1>{}</h1><table>\
         <tr><th>State</th><td class=\"state\" id=\"state\">{}</td></tr>\
         <tr><th>Asked by</th><td>{}</td></tr>\
         <tr><th>Request</th><td><code>{} {}{}</code></td></tr>\
         <tr><th>Held at</th><td>{}</td></tr><tr><th>Expires at</th><td>{}</td></tr>",
        escape(&r.summary()),
        state_text(held),
        escape(&asker(held, agents)),
        escape(&r.method),
        escape(&r.path),
        escape(&if r.query.is_empty() {
            String::new()
        } else {
            format!("?{}", r.query)
        }),
        time(held.created_at, now),
        time(held.expires_at, now),
    );
    body.push_str("</table><h2>Change</h2>");
    if !r.preview.current_note.is_empty() {
        body.push_str(&format!("<p>Current object: {}</p>", escape(&r.preview.current_note)));
    }
    body.push_str(&format!("<pre id=\"diff\">{}</pre>", diff_html(&r.preview.diff)));
    body.push_str(&format!(
        "<details><summary>Dry-run result</summary><pre>{}</pre></details>",
        escape(&preview::yaml(&r.preview.result))
    ));
    match (held.state, may_decide) {
        (HeldState::Pending, Ok(())) => body.push_str(&decision_form(&held.id, csrf)),
        (HeldState::Pending, Err(why)) => {
            body.push_str(&format!("<p>You cannot decide this write: {}</p>", escape(&why)))
        }
        _ => {}
    }
    page(&r.summary(), Some((login, csrf)), &body)
}

/// A short message page (errors, refusals).
pub fn message(title: &str, text: &str) -> String {
    page(
        title,
        None,
        &format!(
            "<h1>{}</h1><p>{}</p><p><a href=\"/approvals\">Approvals</a></p>",
            escape(title),
            escape(text)
        ),
    )
}

fn decision_form(id: &str, csrf: &str) -> String {
    format!(
        "<h2>Decide</h2><form method=\"post\" action=\"/approvals/{id}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label for=\"reason\">Reason (optional, shown to the asker)</label>\
         <textarea id=\"reason\" name=\"reason\" rows=\"2\" maxlength=\"1000\"></textarea>\
         <p><label><input type=\"checkbox\" id=\"confirm\" name=\"confirm\" value=\"yes\" required> \
         I have read the change above and decide it</label></p>\
         <button type=\"submit\" id=\"approve\" name=\"decision\" value=\"approve\">Approve</button>\
         <button type=\"submit\" id=\"deny\" name=\"decision\" value=\"deny\">Deny</button></form>",
        id = attr(id),
        csrf = attr(csrf)
    )
}

fn diff_html(diff: &str) -> String {
    if diff.is_empty() {
        return "(no change)".into();
    }
    diff.lines()
        .map(|line| {
            let class = match line.get(..2) {
                Some("+ ") => " class=\"add\"",
                Some("- ") => " class=\"del\"",
                _ => "",
            };
            format!("<span{class}>{}</span>\n", escape(line))
        })
        .collect()
}

fn asker(held: &HeldWrite, agents: &AgentNames) -> String {
    let r = &held.request;
    let mut who = r.requester.clone();
    if let Some(agent) = &r.agent_id {
        let name = agents.get(agent).map_or("(removed)", String::as_str);
        who.push_str(&format!(", agent {name}"));
    }
    if !r.tool.is_empty() {
        who.push_str(&format!(", tool {}", r.tool));
    }
    if !r.client.is_empty() {
        who.push_str(&format!(", from {}", r.client));
    }
    who
}

fn state_text(held: &HeldWrite) -> String {
    let by = held
        .decided_by
        .as_deref()
        .map(|b| format!(" by {}", escape(b)))
        .unwrap_or_default();
    let reason = held
        .decision_reason
        .as_deref()
        .map(|r| format!(" ({})", escape(r)))
        .unwrap_or_default();
    match &held.outcome {
        Some(outcome) => format!(
            "{}{by}; the write ran and the cluster answered {}",
            held.state.as_str(),
            outcome.code
        ),
        None => format!("{}{by}{reason}", held.state.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text shown is made safe to read; a form's value goes back as it came
    /// (a client's OAuth `state` with a tab in it must reach it unchanged).
    #[test]
    fn shown_text_escapes_what_reorders_it_and_attribute_values_only_html() {
        let text = "a\t\u{202e}<b>\"x\"";
        assert_eq!(escape(text), "a\\t\\u{202e}&lt;b&gt;&quot;x&quot;");
        assert_eq!(attr(text), "a\t\u{202e}&lt;b&gt;&quot;x&quot;");
        assert_eq!(escape("two\nlines"), "two\nlines");
    }
}
