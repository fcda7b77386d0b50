//! `portcullis ci-login`: in a CI job, exchange the job's OpenID Connect
//! token at the server's token endpoint (RFC 8693, `crate::ci`) for a
//! short-lived credential of the bot that trusts it, and write a kubeconfig
//! with a context `portcullis-<cluster>` per cluster, so the next line of
//! the job is `kubectl apply`. The credential goes into the kubeconfig
//! itself: the job is short-lived, and the exec plugin a person's
//! kubeconfig runs needs a login the job does not have. Neither token is
//! ever printed.

use super::access::io;
use super::CliError;
use crate::ci::exchange::{GRANT_TYPE, JWT_TYPE};
use base64::Engine;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `ci-login` was given.
#[derive(Debug, Clone, Default)]
pub struct CiLogin {
    /// The server, e.g. `https://portcullis.example.com`.
    pub server: String,
    /// A private CA to trust for it.
    pub ca_file: Option<PathBuf>,
    /// The job's token, as read from its file or variable.
    pub token: String,
    /// The clusters to write contexts for; empty: every cluster the bot
    /// holds a grant on, as the server says.
    pub clusters: Vec<String>,
    /// The kubeconfig to write into.
    pub kubeconfig: PathBuf,
}

/// The job's token from `--token-file` or `--token-env` (read through
/// `var`, the process's environment in `main`).
pub fn read_token(
    file: Option<&Path>,
    env: Option<&str>,
    var: impl Fn(&str) -> Option<String>,
) -> Result<String, CliError> {
    let token = match (file, env) {
        (Some(path), _) => std::fs::read_to_string(path)
            .map_err(|e| CliError::Message(format!("cannot read the CI token file {}: {e}", path.display())))?,
        (None, Some(name)) => var(name)
            .ok_or_else(|| CliError::Message(format!("the variable {name} holding the CI token is not set")))?,
        (None, None) => return Err(CliError::Message("give --token-file or --token-env".into())),
    };
    let token = token.trim().to_string();
    if token.is_empty() {
        return Err(CliError::Message("the CI token is empty".into()));
    }
    Ok(token)
}

/// Exchange the token and write the kubeconfig; say what was written.
pub async fn run(login: &CiLogin, out: &mut dyn Write) -> Result<(), CliError> {
    let server = login.server.trim_end_matches('/');
    // The CI job's own token is replayable: never sent in the clear.
    super::remote::https_only(server)?;
    let answer = exchange(server, login).await?;
    let token = answer["access_token"].as_str().unwrap_or_default();
    if token.is_empty() {
        return Err(CliError::Message(format!(
            "{server} answered the exchange without a credential"
        )));
    }
    let clusters = clusters(login, &answer)?;
    let ca_pem = match &login.ca_file {
        Some(path) => read(path, "the CA file", false)?,
        None => None,
    };
    let ours = kubeconfig(server, ca_pem.as_deref(), &clusters, token)?;
    let existing = read(&login.kubeconfig, "the kubeconfig", true)?;
    let merged = super::kubeconfig::merge(existing.as_deref(), &ours)?;
    // The token is in it: owner only, even when the file was there before.
    super::kubeconfig::write(&login.kubeconfig, &current(&merged, &clusters[0])?, true)?;
    let names: Vec<String> = clusters.iter().map(|c| format!("portcullis-{c}")).collect();
    let minutes = answer["expires_in"].as_u64().unwrap_or_default() / 60;
    writeln!(
        out,
        "wrote context(s) {} to {} (current: {}); the credential lasts {minutes} min",
        crate::text::escape_control(&names.join(", ")),
        login.kubeconfig.display(),
        crate::text::escape_control(&names[0]),
    )
    .map_err(io)
}

/// The clusters asked for, else those the server says the bot holds a
/// grant on; never none.
fn clusters(login: &CiLogin, answer: &Value) -> Result<Vec<String>, CliError> {
    let clusters: Vec<String> = if login.clusters.is_empty() {
        let held = answer["clusters"].as_array().into_iter().flatten();
        held.filter_map(Value::as_str).map(str::to_string).collect()
    } else {
        login.clusters.clone()
    };
    if clusters.is_empty() {
        return Err(CliError::Message(
            "the bot holds no grant on any cluster: give --cluster, or ask an admin for a grant".into(),
        ));
    }
    Ok(clusters)
}

/// The text of `path` (`what`, for the message); `None` when it is not
/// there and may not be.
fn read(path: &Path, what: &str, missing_ok: bool) -> Result<Option<String>, CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::Message(format!("cannot read {what} {}: {e}", path.display()))),
    }
}

/// `POST /oauth/token` with the job's token: the answer, or the server's
/// error description.
async fn exchange(server: &str, login: &CiLogin) -> Result<Value, CliError> {
    let http = super::remote::client(login.ca_file.as_deref())?;
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", GRANT_TYPE)
        .append_pair("subject_token", &login.token)
        .append_pair("subject_token_type", JWT_TYPE)
        .finish();
    let request = http::Request::post(format!("{server}/oauth/token"))
        .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(http::header::ACCEPT, "application/json")
        .body(form.into_bytes())
        .map_err(|e| CliError::Message(format!("bad server URL {server}: {e}")))?;
    let answer = http
        .send(request)
        .await
        .map_err(|e| CliError::Message(format!("portcullis at {server}: {e}")))?;
    let value: Value = serde_json::from_slice(answer.body()).unwrap_or(Value::Null);
    if answer.status().is_success() {
        return Ok(value);
    }
    let why = value["error_description"].as_str().or(value["error"].as_str());
    Err(CliError::Message(match why {
        Some(why) => format!("portcullis refused the CI token: {}", crate::text::escape_control(why)),
        None => format!("portcullis at {server} answered {}", answer.status()),
    }))
}

/// Our kubeconfig: a context per cluster, one user holding the token.
fn kubeconfig(server: &str, ca_pem: Option<&str>, clusters: &[String], token: &str) -> Result<String, CliError> {
    let ca = ca_pem.map(|pem| base64::engine::general_purpose::STANDARD.encode(pem));
    let clusters_yaml: Vec<Value> = clusters
        .iter()
        .map(|c| {
            let mut cluster = json!({"server": format!("{server}/clusters/{c}")});
            if let Some(ca) = &ca {
                cluster["certificate-authority-data"] = json!(ca);
            }
            json!({"name": format!("portcullis-{c}"), "cluster": cluster})
        })
        .collect();
    // One user per server: a second server's token never lands on the
    // first's contexts (see `user_name`).
    let user = crate::doors::web::console::kubeconfig::user_name("portcullis-ci", server);
    let contexts: Vec<Value> = clusters
        .iter()
        .map(|c| json!({"name": format!("portcullis-{c}"), "context": {"cluster": format!("portcullis-{c}"), "user": user}}))
        .collect();
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": clusters_yaml, "contexts": contexts,
        "users": [{"name": user, "user": {"token": token}}],
        "current-context": format!("portcullis-{}", clusters[0]),
    });
    serde_yaml::to_string(&config).map_err(|e| CliError::Message(e.to_string()))
}

/// `text` with its current context set to the first cluster's: the job
/// asked for these contexts, so its next `kubectl` uses them.
fn current(text: &str, first: &str) -> Result<String, CliError> {
    let bad = |e: serde_yaml::Error| CliError::Message(format!("the kubeconfig cannot be written: {e}"));
    let mut config: serde_yaml::Value = serde_yaml::from_str(text).map_err(bad)?;
    config["current-context"] = serde_yaml::Value::from(format!("portcullis-{first}"));
    serde_yaml::to_string(&config).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_has_a_context_per_cluster_and_one_user_with_the_token_current_first() {
        let text = kubeconfig(
            "https://p.example",
            Some("PEM"),
            &["prod".into(), "dev".into()],
            "pcl_x",
        )
        .unwrap();
        let merged = super::super::kubeconfig::merge(Some("current-context: other\n"), &text).unwrap();
        let parsed: serde_json::Value = serde_yaml::from_str(&current(&merged, "prod").unwrap()).unwrap();
        assert_eq!(parsed["current-context"], "portcullis-prod");
        assert_eq!(
            parsed["clusters"][1]["cluster"]["server"],
            "https://p.example/clusters/dev"
        );
        assert_eq!(parsed["clusters"][0]["cluster"]["certificate-authority-data"], "UEVN");
        assert_eq!(parsed["contexts"][1]["context"]["user"], "portcullis-ci@p.example");
        assert_eq!(parsed["users"][0]["user"]["token"], "pcl_x");
    }

    /// The CI job's token is replayable: over http, it is not sent.
    #[tokio::test]
    async fn an_http_server_is_refused_before_the_job_token_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let login = CiLogin {
            server: "http://127.0.0.1:9".into(),
            ca_file: None,
            token: "eyJ.x.y".into(),
            clusters: Vec::new(),
            kubeconfig: dir.path().join("config"),
        };
        let refused = run(&login, &mut Vec::new()).await.unwrap_err().to_string();
        assert!(refused.contains("is not an https:// URL"), "{refused}");
        assert!(!dir.path().join("config").exists());
    }

    #[test]
    fn the_token_comes_from_its_file_or_variable_trimmed_and_never_empty() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, "eyJ.x.y\n").unwrap();
        let none = |_: &str| None;
        assert_eq!(read_token(Some(&file), None, none).unwrap(), "eyJ.x.y");
        let var = |name: &str| (name == "CI_TOKEN").then(|| " eyJ.a.b ".to_string());
        assert_eq!(read_token(None, Some("CI_TOKEN"), var).unwrap(), "eyJ.a.b");
        assert!(read_token(None, Some("OTHER"), var)
            .unwrap_err()
            .to_string()
            .contains("OTHER"));
        assert!(read_token(None, None, none).is_err());
        std::fs::write(&file, "\n").unwrap();
        assert!(read_token(Some(&file), None, none)
            .unwrap_err()
            .to_string()
            .contains("empty"));
    }
}
