//! The person commands' way to the server: which portcullis, with which
//! credential, trusting which CA, and the calls to its person API
//! (`/api/portcullis/v1/…`, `crate::doors::api`).
//!
//! The server and credential come from the file `portcullis login` writes
//! (`$XDG_CONFIG_HOME/portcullis/login.json`, else
//! `~/.config/portcullis/login.json`, mode 0600), or for scripts and CI from
//! `--server` / `PORTCULLIS_SERVER` and `PORTCULLIS_TOKEN`; `--ca-file` /
//! `PORTCULLIS_CA_FILE` names a private CA.

use super::CliError;
use crate::signin::http::HttpClient;
use chrono::{DateTime, Utc};
use http::{header, Method, Request};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where the person API lives under a server's URL.
const API: &str = "/api/portcullis/v1/";

/// What the environment says, read once at start (`main`), never later.
#[derive(Debug, Clone, Default)]
pub struct PersonEnv {
    /// `PORTCULLIS_TOKEN`: a credential for scripts and CI.
    pub token: Option<String>,
    /// The directory the login file lives in.
    pub config_dir: Option<PathBuf>,
    /// A person at a terminal can answer a browser sign-in.
    pub interactive: bool,
    /// The kubeconfig `portcullis kubeconfig` merges into: `$KUBECONFIG`'s
    /// first file, else `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// `KUBERNETES_EXEC_INFO`, set by kubectl for the credential plugin.
    pub exec_info: Option<String>,
    /// `BROWSER`: the command `portcullis login` opens its URL with
    /// (else `xdg-open`, or `open` on macOS).
    pub browser: Option<String>,
}

impl PersonEnv {
    /// From the process's variables: `PORTCULLIS_TOKEN`, and
    /// `XDG_CONFIG_HOME` or `HOME` for the config directory.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>, interactive: bool) -> PersonEnv {
        let vars: std::collections::HashMap<String, String> = vars.into_iter().collect();
        let set = |name: &str| vars.get(name).filter(|v| !v.is_empty()).cloned();
        let config_dir = set("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| set("HOME").map(|home| Path::new(&home).join(".config")))
            .map(|dir| dir.join("portcullis"));
        let kubeconfig = set("KUBECONFIG")
            .and_then(|list| std::env::split_paths(&list).find(|p| !p.as_os_str().is_empty()))
            .or_else(|| set("HOME").map(|home| Path::new(&home).join(".kube/config")));
        PersonEnv {
            token: set("PORTCULLIS_TOKEN"),
            config_dir,
            interactive,
            kubeconfig,
            exec_info: set("KUBERNETES_EXEC_INFO"),
            browser: set("BROWSER"),
        }
    }

    /// The login file's path.
    pub fn login_file(&self) -> Result<PathBuf, CliError> {
        self.config_dir
            .as_ref()
            .map(|dir| dir.join("login.json"))
            .ok_or_else(|| CliError::Message("neither XDG_CONFIG_HOME nor HOME is set: nowhere to keep a login".into()))
    }
}

/// What `portcullis login` keeps: a short-lived credential for one server.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Login {
    /// The server's URL, e.g. `https://portcullis.example.com`.
    pub server: String,
    /// The bearer token.
    pub token: String,
    /// Its credential id (to revoke it on logout).
    pub credential_id: String,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    /// A private CA to trust for this server.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

impl Login {
    /// The login in `path`, if there is one.
    pub fn read(path: &Path) -> Result<Option<Login>, CliError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| CliError::Message(format!("{} is not a portcullis login: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CliError::Message(format!("cannot read {}: {e}", path.display()))),
        }
    }

    /// Write it to `path`, readable by its owner only (0600), replacing
    /// whatever was there.
    pub fn write(&self, path: &Path) -> Result<(), CliError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| CliError::Message(e.to_string()))?;
        // Owner only (an older file may have been created more open), and
        // replaced whole: a crash never leaves a login file cut short.
        super::kubeconfig::write(path, &text, true)
    }
}

/// The options every person command takes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RemoteArgs {
    /// The portcullis server, e.g. `https://portcullis.example.com`
    /// (default: the one `portcullis login` signed in to).
    #[arg(long, global = true, env = "PORTCULLIS_SERVER")]
    pub server: Option<String>,
    /// A CA bundle to trust for the server (a private CA).
    #[arg(long, global = true, env = "PORTCULLIS_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

/// A signed-in client of one server's person API.
#[derive(Debug)]
pub struct Remote {
    base: String,
    token: String,
    ca_file: Option<PathBuf>,
    http: HttpClient,
}

impl Remote {
    /// The server and credential to use: `PORTCULLIS_TOKEN` with
    /// `--server`, else the login file's (for the server asked for, if one
    /// was), refused plainly when there is none or it has expired.
    pub fn resolve(args: &RemoteArgs, env: &PersonEnv) -> Result<Remote, CliError> {
        let login = Login::read(&env.login_file()?)?;
        let (server, token, ca_file) = match (&env.token, login) {
            (Some(token), login) => {
                let server = args.server.clone().or(login.as_ref().map(|l| l.server.clone()));
                let server = server.ok_or_else(|| {
                    CliError::Message(
                        "PORTCULLIS_TOKEN is set: say which server with --server or PORTCULLIS_SERVER".into(),
                    )
                })?;
                let ca = args.ca_file.clone().or(login.and_then(|l| l.ca_file));
                (server, token.clone(), ca)
            }
            (None, Some(login)) if args.server.as_deref().is_none_or(|s| same_server(s, &login.server)) => {
                if login.expires_at <= Utc::now() {
                    return Err(CliError::Message(format!(
                        "your portcullis credential expired at {}: run `portcullis login {}`",
                        super::when(&login.expires_at),
                        login.server
                    )));
                }
                (login.server, login.token, args.ca_file.clone().or(login.ca_file))
            }
            (None, _) => {
                let server = args.server.as_deref().unwrap_or("https://<portcullis>");
                return Err(CliError::Message(format!(
                    "not signed in: run `portcullis login {server}` (or set PORTCULLIS_TOKEN)"
                )));
            }
        };
        Remote::new(&server, &token, ca_file.as_deref())
    }

    /// A client of `server` with `token`, trusting `ca_file` or the
    /// system's roots.
    pub fn new(server: &str, token: &str, ca_file: Option<&Path>) -> Result<Remote, CliError> {
        https_only(server)?;
        let http = client(ca_file)?;
        Ok(Remote {
            base: server.trim_end_matches('/').to_string(),
            token: token.to_string(),
            ca_file: ca_file.map(Path::to_path_buf),
            http,
        })
    }

    /// The server's URL, without a trailing `/`.
    pub fn server(&self) -> &str {
        &self.base
    }

    /// The private CA trusted for the server, if one is.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// `GET` an API path (after `/api/portcullis/v1/`).
    pub async fn get(&self, path: &str) -> Result<Value, CliError> {
        self.call(Method::GET, path, None).await
    }

    /// `POST` `body` to an API path.
    pub async fn post(&self, path: &str, body: Value) -> Result<Value, CliError> {
        self.call(Method::POST, path, Some(body)).await
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, CliError> {
        let url = format!("{}{API}{path}", self.base);
        let mut request = Request::builder()
            .method(method)
            .uri(&url)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token));
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let request = request
            .body(bytes)
            .map_err(|e| CliError::Message(format!("bad server URL {}: {e}", self.base)))?;
        let answer = self
            .http
            .send(request)
            .await
            .map_err(|e| CliError::Message(format!("portcullis at {}: {e}", self.base)))?;
        let value: Value = serde_json::from_slice(answer.body()).unwrap_or(Value::Null);
        if answer.status().is_success() {
            return Ok(value);
        }
        Err(CliError::Refused {
            status: answer.status().as_u16(),
            message: match value.get("error").and_then(Value::as_str) {
                Some(message) => crate::text::escape_control(message).into_owned(),
                None => format!("portcullis at {} answered {}", self.base, answer.status()),
            },
        })
    }
}

/// An HTTPS client trusting `ca_file`, or the system's roots.
pub fn client(ca_file: Option<&Path>) -> Result<HttpClient, CliError> {
    HttpClient::new(ca_file).map_err(|e| {
        CliError::Message(format!(
            "cannot use the CA file {}: {}",
            ca_file.map(|p| p.display().to_string()).unwrap_or_default(),
            e.message
        ))
    })
}

fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// `id` (of a held write, request, rule or credential) as one segment of
/// an API path: an id with `/`, `?`, `%` or `..` in it would name another
/// call.
pub fn segment(id: &str) -> Result<&str, CliError> {
    let plain = !id.is_empty()
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    match plain {
        true => Ok(id),
        false => Err(CliError::Message(format!(
            "{:?} is not an id: ids are letters, digits, '-', '_' and '.'",
            crate::text::escape_control(id)
        ))),
    }
}

/// `server` if it is an https:// URL: a token is never sent in the clear.
pub fn https_only(server: &str) -> Result<(), CliError> {
    if server
        .get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
    {
        Ok(())
    } else {
        Err(CliError::Message(format!(
            "{server} is not an https:// URL: portcullis sends your token only over TLS"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn an_id_that_would_name_another_call_is_refused() {
        for id in ["a/../b", "..", "", "x?y=1", "a%2Fb", "a b"] {
            assert!(segment(id).is_err(), "{id:?}");
        }
        assert_eq!(
            segment("01a250be-12e0-7667-8716-952535da21cb").unwrap(),
            "01a250be-12e0-7667-8716-952535da21cb"
        );
    }

    /// A token (a person's, or a CI job's replayable one) is never sent
    /// over plain http.
    #[test]
    fn a_server_that_is_not_https_is_refused_before_anything_is_sent() {
        for server in ["http://p.example", "p.example", "ftp://p.example"] {
            let refused = Remote::new(server, "pcl_x", None).err().map(|e| e.to_string());
            assert!(
                refused.is_some_and(|e| e.contains("is not an https:// URL")),
                "{server}"
            );
        }
        assert!(Remote::new("HTTPS://p.example", "pcl_x", None).is_ok());
    }

    #[test]
    fn the_login_file_lives_in_the_xdg_config_dir_else_under_home() {
        let env = PersonEnv::from_vars(vars(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")]), false);
        assert_eq!(env.login_file().unwrap(), Path::new("/x/portcullis/login.json"));
        let env = PersonEnv::from_vars(vars(&[("HOME", "/h")]), false);
        assert_eq!(env.login_file().unwrap(), Path::new("/h/.config/portcullis/login.json"));
        assert!(PersonEnv::from_vars(vars(&[]), false).login_file().is_err());
    }

    #[test]
    fn the_kubeconfig_is_kubeconfigs_first_file_else_the_one_under_home() {
        let env = PersonEnv::from_vars(vars(&[("KUBECONFIG", ":/a/one:/b/two"), ("HOME", "/h")]), false);
        assert_eq!(env.kubeconfig.unwrap(), Path::new("/a/one"));
        let env = PersonEnv::from_vars(vars(&[("HOME", "/h")]), false);
        assert_eq!(env.kubeconfig.unwrap(), Path::new("/h/.kube/config"));
    }

    #[test]
    fn a_login_is_written_readable_by_its_owner_only_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portcullis/login.json");
        let login = Login {
            server: "https://p.example".into(),
            token: "pcl_x".into(),
            credential_id: "c".into(),
            expires_at: Utc::now(),
            ca_file: None,
        };
        login.write(&path).unwrap();
        assert_eq!(Login::read(&path).unwrap(), Some(login));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(Login::read(&dir.path().join("none")).unwrap(), None);
    }

    #[test]
    fn without_a_login_or_token_the_command_says_to_sign_in() {
        let dir = tempfile::tempdir().unwrap();
        let env = PersonEnv {
            config_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let err = Remote::resolve(&RemoteArgs::default(), &env).unwrap_err().to_string();
        assert!(err.contains("run `portcullis login"), "{err}");
        let env = PersonEnv {
            token: Some("pcl_x".into()),
            ..env
        };
        let err = Remote::resolve(&RemoteArgs::default(), &env).unwrap_err().to_string();
        assert!(err.contains("--server"), "{err}");
    }
}
