//! `portcullis credential-plugin`: the exec credential plugin the
//! kubeconfig of `portcullis kubeconfig` names. It prints the login file's
//! credential as a `client.authentication.k8s.io/v1` `ExecCredential` with
//! its expiry, so kubectl, k9s and helm ask again when it ends. When it has
//! ended, a person at the terminal (kubectl's `KUBERNETES_EXEC_INFO` says
//! so) is signed in again with `portcullis login`; anything else gets one
//! line saying to run it.

use super::remote::{Login, PersonEnv, RemoteArgs};
use super::CliError;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

/// A credential this close to its end is not handed out: the request it is
/// for would meet it expired.
const MARGIN: TimeDelta = TimeDelta::seconds(10);

/// Print the `ExecCredential` for the server `args` names (else the login
/// file's) to `out`, signing in again first when a person is there to.
pub fn run(args: &RemoteArgs, env: &PersonEnv, out: &mut dyn Write) -> Result<(), CliError> {
    let path = env.login_file()?;
    let login = match usable(Login::read(&path)?, args.server.as_deref(), Utc::now()) {
        Ok(login) => login,
        Err(why) if interactive(env) => {
            let server = args.server.clone().or(why.server).ok_or(why.message)?;
            let ca = args.ca_file.clone().or(Login::read(&path)?.and_then(|l| l.ca_file));
            login_again(&server, ca.as_deref())?;
            usable(Login::read(&path)?, Some(&server), Utc::now()).map_err(|why| why.message)?
        }
        Err(why) => return Err(why.message),
    };
    let credential = exec_credential(&login.token, login.expires_at);
    writeln!(out, "{credential}").map_err(|e| CliError::Message(format!("cannot write the credential: {e}")))
}

/// The `ExecCredential` kubectl reads.
pub fn exec_credential(token: &str, expires_at: DateTime<Utc>) -> Value {
    json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {
            "token": token,
            "expirationTimestamp": expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        },
    })
}

/// Why there is no credential to hand out, and for which server.
#[derive(Debug)]
struct Unusable {
    server: Option<String>,
    message: CliError,
}

/// The login, if it is for `server` (when one is named) and not about to
/// expire at `now`.
fn usable(login: Option<Login>, server: Option<&str>, now: DateTime<Utc>) -> Result<Login, Unusable> {
    let wanted = server.map(|s| s.trim_end_matches('/').to_string());
    let again = |server: &str| format!("run `portcullis login {server}`");
    match login {
        None => {
            let named = wanted.clone().unwrap_or_else(|| "https://<portcullis>".into());
            Err(Unusable {
                message: CliError::Message(format!("not signed in to portcullis: {}", again(&named))),
                server: wanted,
            })
        }
        Some(l) if wanted.as_deref().is_some_and(|w| w != l.server.trim_end_matches('/')) => {
            let w = wanted.unwrap_or_default();
            Err(Unusable {
                message: CliError::Message(format!("signed in to {}, not to {w}: {}", l.server, again(&w))),
                server: Some(w),
            })
        }
        Some(l) if l.expires_at <= now + MARGIN => Err(Unusable {
            message: CliError::Message(format!(
                "your portcullis credential expired at {}: {}",
                super::when(&l.expires_at),
                again(&l.server)
            )),
            server: Some(l.server),
        }),
        Some(l) => Ok(l),
    }
}

/// Whether a person can answer a sign-in: kubectl says so in
/// `KUBERNETES_EXEC_INFO`; run by hand, the terminal does.
fn interactive(env: &PersonEnv) -> bool {
    match env.exec_info.as_deref() {
        Some(info) => serde_json::from_str::<Value>(info)
            .ok()
            .and_then(|v| v["spec"]["interactive"].as_bool())
            .unwrap_or(false),
        None => env.interactive,
    }
}

/// Run `portcullis login <server>` with the terminal; its output goes to
/// stderr, since stdout is kubectl's, for the credential alone.
fn login_again(server: &str, ca_file: Option<&Path>) -> Result<(), CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Message(format!("cannot find portcullis itself to sign in again: {e}")))?;
    let mut command = std::process::Command::new(exe);
    command.arg("login").arg(server);
    if let Some(ca) = ca_file {
        command.arg("--ca-file").arg(ca);
    }
    let status = command
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| CliError::Message(format!("cannot run `portcullis login`: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(CliError::Message(format!(
            "`portcullis login {server}` did not sign you in"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(server: &str, expires_at: DateTime<Utc>) -> Login {
        Login {
            server: server.into(),
            token: "pcl_t".into(),
            credential_id: "c".into(),
            expires_at,
            ca_file: None,
        }
    }

    #[test]
    fn the_credential_is_an_exec_credential_with_its_expiry() {
        let at = "2030-01-02T03:04:05Z".parse().unwrap();
        let credential = exec_credential("pcl_t", at);
        assert_eq!(credential["apiVersion"], "client.authentication.k8s.io/v1");
        assert_eq!(credential["kind"], "ExecCredential");
        assert_eq!(credential["status"]["token"], "pcl_t");
        assert_eq!(credential["status"]["expirationTimestamp"], "2030-01-02T03:04:05Z");
    }

    #[test]
    fn a_login_expired_missing_or_for_another_server_says_in_one_line_to_run_portcullis_login() {
        let now = Utc::now();
        let fresh = login("https://p.example/", now + TimeDelta::hours(1));
        assert!(usable(Some(fresh.clone()), Some("https://p.example"), now).is_ok());
        assert!(usable(Some(fresh.clone()), None, now).is_ok());
        let cases = [
            (Some(login("https://p.example", now - TimeDelta::minutes(1))), None),
            (Some(login("https://p.example", now + TimeDelta::seconds(2))), None),
            (Some(fresh), Some("https://other.example")),
            (None, Some("https://p.example")),
        ];
        for (login, server) in cases {
            let why = usable(login, server, now).unwrap_err();
            let message = why.message.to_string();
            assert!(message.contains("run `portcullis login https://"), "{message}");
            assert!(!message.contains('\n'), "{message}");
            assert!(why.server.is_some());
        }
    }

    #[test]
    fn only_kubectl_saying_a_person_is_there_makes_the_plugin_interactive() {
        let env = |info: Option<&str>, terminal: bool| PersonEnv {
            exec_info: info.map(Into::into),
            interactive: terminal,
            ..Default::default()
        };
        let yes =
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}}"#;
        let no = r#"{"kind":"ExecCredential","spec":{"interactive":false}}"#;
        assert!(interactive(&env(Some(yes), false)));
        assert!(!interactive(&env(Some(no), true)));
        assert!(!interactive(&env(Some("not json"), true)));
        assert!(interactive(&env(None, true)));
    }
}
