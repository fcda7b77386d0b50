//! `portcullis login <url>` and `portcullis logout`.
//!
//! Login works as `gh auth login` and `gcloud auth login` do (RFC 8252):
//! the command listens on a loopback port, the browser opens portcullis's
//! `/login/cli` (signing the person in with the identity provider first if
//! need be), and after the person allows it the browser brings a one-time
//! code back to the loopback port; the command exchanges it with its PKCE
//! verifier (S256) for a credential lasting at most 12 hours and never
//! beyond the sign-in session, kept in the login file (0600,
//! [`super::remote::Login`]). Without a browser (`--no-browser`) it is the
//! device authorization grant (RFC 8628): the person allows a short code
//! on any device while the command polls. Logout revokes that credential at the server
//! and deletes the file.

use super::remote::{client, Login, PersonEnv, Remote};
use super::CliError;
use crate::doors::web::cli_login::challenge_of;
use base64::Engine;
use chrono::{DateTime, Utc};
use http::{header, Method, Request};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long the command waits for the person in the browser.
const WAIT: Duration = Duration::from_secs(600);
/// The largest request the loopback port reads.
const REQUEST_LIMIT: usize = 16 * 1024;
/// How long the loopback listener waits for a connection's request.
const REQUEST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Sign in to `server` through the browser (here, or on another device
/// without `open_browser`) and keep the credential;
/// progress goes to `out` (stderr when the credential plugin runs it).
pub async fn login(
    server: &str,
    ca_file: Option<&Path>,
    env: &PersonEnv,
    open_browser: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let server = server.trim_end_matches('/');
    super::remote::https_only(server)?;
    let path = env.login_file()?;
    let answer = if open_browser {
        through_loopback(server, ca_file, env, out).await?
    } else {
        through_device(server, ca_file, out).await?
    };
    let expires_at: DateTime<Utc> = serde_json::from_value(answer["expires_at"].clone())
        .map_err(|_| CliError::Message("portcullis answered the sign-in without an expiry".into()))?;
    let ca_file = ca_file.map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));
    let login = Login {
        server: server.to_string(),
        token: text(&answer["token"]),
        credential_id: text(&answer["credential_id"]),
        expires_at,
        ca_file,
    };
    login.write(&path)?;
    let login_name = text(&answer["login"]);
    let who = crate::text::escape_control(&login_name);
    say(
        out,
        &format!("signed in to {server} as {who} until {}", super::when(&expires_at)),
    )
}

/// The browser on this machine brings a code to a loopback port; the code
/// and its PKCE verifier are exchanged for the credential.
async fn through_loopback(
    server: &str,
    ca_file: Option<&Path>,
    env: &PersonEnv,
    out: &mut dyn Write,
) -> Result<Value, CliError> {
    let listen = |e| fail("listen on a loopback port", e);
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(listen)?;
    let port = listener.local_addr().map_err(listen)?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let (verifier, state) = (random(), random());
    let url = format!(
        "{server}/login/cli?redirect_uri={}&code_challenge={}&code_challenge_method=S256&state={state}",
        encode(&redirect_uri),
        challenge_of(&verifier)
    );
    say(
        out,
        "Sign in to portcullis in your browser; if it does not open, open this URL:",
    )?;
    say(out, &url)?;
    open(env.browser.as_deref(), &url);
    let code = tokio::time::timeout(WAIT, receive(&listener, &state))
        .await
        .map_err(|_| {
            CliError::Message("no sign-in came back within 10 minutes: run `portcullis login` again".into())
        })??;
    let pairs = [
        ("grant_type", "authorization_code"),
        ("client_id", "portcullis-cli"),
        ("code", code.as_str()),
        ("code_verifier", &verifier),
        ("redirect_uri", &redirect_uri),
    ];
    let (ok, answer) = post_form(server, ca_file, "/oauth/token", &pairs).await?;
    if ok && answer["token"].is_string() {
        return Ok(answer);
    }
    Err(refused(server, &answer))
}

/// The device authorization grant (RFC 8628): the person allows the user
/// code on any device while the command polls.
async fn through_device(server: &str, ca_file: Option<&Path>, out: &mut dyn Write) -> Result<Value, CliError> {
    let (ok, asked) = post_form(server, ca_file, "/login/device/code", &[]).await?;
    let device_code = text(&asked["device_code"]);
    if !ok || device_code.is_empty() {
        return Err(refused(server, &asked));
    }
    let esc = |v: &Value| crate::text::escape_control(&text(v)).into_owned();
    say(
        out,
        &format!(
            "On any device, open {} and type the code {}",
            esc(&asked["verification_uri"]),
            esc(&asked["user_code"])
        ),
    )?;
    let mut interval = asked["interval"].as_u64().unwrap_or(5).max(1);
    let deadline = std::time::Instant::now() + Duration::from_secs(asked["expires_in"].as_u64().unwrap_or(600));
    let grant = "urn:ietf:params:oauth:grant-type:device_code";
    while std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(interval)).await;
        let pairs = [("grant_type", grant), ("device_code", device_code.as_str())];
        let (ok, answer) = post_form(server, ca_file, "/oauth/token", &pairs).await?;
        match answer["error"].as_str() {
            _ if ok && answer["token"].is_string() => return Ok(answer),
            Some("authorization_pending") => {}
            Some("slow_down") => interval += 5,
            _ => return Err(refused(server, &answer)),
        }
    }
    Err(CliError::Message(
        "no one allowed the code within 10 minutes: run `portcullis login` again".into(),
    ))
}

/// Revoke the login file's credential at its server, then delete the file.
pub async fn logout(env: &PersonEnv, out: &mut dyn Write) -> Result<(), CliError> {
    let path = env.login_file()?;
    let Some(login) = Login::read(&path)? else {
        return Err(CliError::Message(
            "not signed in: there is nothing to log out of".into(),
        ));
    };
    let remote = Remote::new(&login.server, &login.token, login.ca_file.as_deref())?;
    let revoked = match remote
        .post(&format!("credentials/{}/revoke", login.credential_id), json!({}))
        .await
    {
        Ok(_) => "revoked",
        // An expired or already revoked credential needs no revoking (a
        // sign-out on the web revokes it: the server no longer knows it).
        Err(_) if login.expires_at <= Utc::now() => "already expired",
        Err(CliError::Refused { status: 401, .. }) => "already revoked",
        Err(e) => {
            return Err(CliError::Message(format!(
                "could not revoke your credential, still signed in: {e}"
            )))
        }
    };
    std::fs::remove_file(&path).map_err(|e| fail(&format!("delete {}", path.display()), e))?;
    writeln!(
        out,
        "logged out of {}: credential {revoked}, {} deleted",
        login.server,
        path.display()
    )
    .map_err(|e| fail("write", e))
}

/// Wait on the loopback port for the browser bringing the code for
/// `state`; anything else gets a 404 and is waited past.
async fn receive(listener: &TcpListener, state: &str) -> Result<String, CliError> {
    loop {
        let (mut stream, _) = listener.accept().await.map_err(|e| fail("accept the browser", e))?;
        // A connection that says nothing (a browser's speculative one, or
        // another local process) is given up, not waited on.
        let Ok(Some(target)) = tokio::time::timeout(REQUEST_WAIT, request_target(&mut stream)).await else {
            continue;
        };
        let Some(query) = target.strip_prefix("/callback?") else {
            let _ = respond(&mut stream, "404 Not Found", "Not found.").await;
            continue;
        };
        let param = |name: &str| crate::doors::web::query_param(Some(query), name);
        if param("state").as_deref() != Some(state) {
            let _ = respond(
                &mut stream,
                "400 Bad Request",
                "This sign-in is not the one the command waits for.",
            )
            .await;
            continue;
        }
        if let Some(error) = param("error") {
            let _ = respond(&mut stream, "400 Bad Request", "Not signed in.").await;
            let error = crate::text::escape_control(&error);
            return Err(CliError::Message(format!("portcullis refused the sign-in: {error}")));
        }
        if let Some(code) = param("code") {
            let done = "Signed in to portcullis. You can close this tab and go back to the terminal.";
            let _ = respond(&mut stream, "200 OK", done).await;
            return Ok(code);
        }
    }
}

/// The request target of the first request on `stream`.
async fn request_target(stream: &mut TcpStream) -> Option<String> {
    let mut read = Vec::new();
    let mut buffer = [0u8; 4096];
    while !read.windows(4).any(|w| w == b"\r\n\r\n") && read.len() < REQUEST_LIMIT {
        let n = stream.read(&mut buffer).await.ok()?;
        if n == 0 {
            break;
        }
        read.extend_from_slice(&buffer[..n]);
    }
    let line = std::str::from_utf8(&read).ok()?.lines().next()?.to_string();
    let mut parts = line.split(' ');
    (parts.next() == Some("GET")).then_some(())?;
    parts.next().map(str::to_string)
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) -> std::io::Result<()> {
    let body = format!(
        "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>portcullis</title><p>{text}</p></html>"
    );
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// POST `pairs` as a form to `path` on `server`: whether it succeeded,
/// and the JSON answer.
async fn post_form(
    server: &str,
    ca_file: Option<&Path>,
    path: &str,
    pairs: &[(&str, &str)],
) -> Result<(bool, Value), CliError> {
    let form = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("{server}{path}"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form.into_bytes())
        .map_err(|e| CliError::Message(format!("bad server URL {server}: {e}")))?;
    let answer = client(ca_file)?
        .send(request)
        .await
        .map_err(|e| CliError::Message(format!("portcullis at {server}: {e}")))?;
    let value = serde_json::from_slice(answer.body()).unwrap_or(Value::Null);
    Ok((answer.status().is_success(), value))
}

/// Why the server refused, in its words.
fn refused(server: &str, answer: &Value) -> CliError {
    CliError::Message(match answer["error_description"].as_str() {
        Some(why) => format!("portcullis refused the sign-in: {}", crate::text::escape_control(why)),
        None => format!("portcullis at {server} did not sign you in"),
    })
}

/// Open `url` with `browser` (`$BROWSER`), else the system's opener, if
/// this machine has one; the URL is printed either way.
fn open(browser: Option<&str>, url: &str) {
    let system = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let _ = std::process::Command::new(browser.unwrap_or(system))
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

fn random() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn say(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    writeln!(out, "{text}").map_err(|e| fail("write", e))
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

fn fail(what: &str, e: std::io::Error) -> CliError {
    CliError::Message(format!("cannot {what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A connection that says nothing (a browser's speculative one, or
    /// another local process) does not keep the browser's callback
    /// waiting.
    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_does_not_hold_up_the_callback() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent = TcpStream::connect(addr).await.unwrap();
        let browser = tokio::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream
                .write_all(b"GET /callback?state=s1&code=c1 HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            answer
        });
        let code = tokio::time::timeout(REQUEST_WAIT * 3, receive(&listener, "s1")).await;
        assert_eq!(code.expect("the callback is read").unwrap(), "c1");
        assert!(browser.await.unwrap().starts_with(b"HTTP/1.1 200"));
        drop(silent);
    }
}
