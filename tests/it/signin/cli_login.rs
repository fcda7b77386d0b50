//! `portcullis login` through the browser (issue 18, item 4): the command
//! listens on a loopback port, Chromium signs the person in at the
//! provider and allows it, the command exchanges the code with its PKCE
//! verifier and keeps a short-lived credential; without a browser, the
//! person allows the command's code from a second browser; `portcullis
//! logout` revokes it.

use super::browser::Chromium;
use super::kubectl_plugin::{said, Machine};
use super::{free_port, portcullis, Idp};
use crate::approvals::audit_rows;
use crate::harness::Portcullis;
use crate::support::{eventually, Kubectl};
use chrono::{TimeDelta, Utc};
use fantoccini::Locator;
use http::Method;
use portcullis::cli::remote::Login;
use portcullis::identity::Principal;
use std::io::{BufRead, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_portcullis");

/// `portcullis <args>` on a person's machine whose home is `home`.
fn person_command(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("PORTCULLIS_TOKEN")
        .env_remove("PORTCULLIS_SERVER")
        .env_remove("PORTCULLIS_CA_FILE")
        .env_remove("PORTCULLIS_CONFIG")
        .stdin(Stdio::null());
    command
}

/// Lines the child writes to stderr, as they come.
fn lines_of(stderr: std::process::ChildStderr) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

async fn allow_in_chromium(browser: &Chromium, url: &str) {
    let client = &browser.client;
    client.goto(url).await.unwrap();
    let login = client.wait().for_element(Locator::Id("login")).await.unwrap();
    login.send_keys("ana").await.unwrap();
    client.find(Locator::Id("signin")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Id("allow")).await.unwrap();
    assert!(browser.text().await.contains("Sign in the command line?"));
    browser
        .assert_fits_a_phone_and_passes_axe("the command-line sign-in page")
        .await;
    client.find(Locator::Id("allow")).await.unwrap().click().await.unwrap();
    browser
        .wait_for_text("Signed in to portcullis. You can close this tab")
        .await;
    browser
        .assert_fits_a_phone_and_passes_axe("the command line's signed-in page")
        .await;
}

/// The loopback login's URL at `server`, from the lines a command prints.
fn login_url(lines: &mpsc::Receiver<String>, server: &str) -> String {
    let prefix = format!("{server}/login/cli?");
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the command prints its URL");
        if line.starts_with(&prefix) {
            return line;
        }
    }
}

/// `portcullis login <server>` on the machine whose home is `home`,
/// allowed as ana in `browser`; asserts that it signs in.
async fn login_through_chromium(browser: &Chromium, home: &Path, server: &str, ca: &Path) {
    let mut child = person_command(home, &["login", server, "--ca-file", ca.to_str().unwrap()])
        // The URL is opened by the test's Chromium, not this machine's browser.
        .env("BROWSER", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(child.stderr.take().unwrap());
    let url = login_url(&lines, server);
    allow_in_chromium(browser, &url).await;
    let status = eventually("portcullis login to finish", async || child.try_wait().unwrap()).await;
    let said: Vec<String> = lines.try_iter().collect();
    assert!(status.success(), "{said:?}");
    assert!(
        said.iter()
            .any(|l| l.starts_with(&format!("signed in to {server} as ana until "))),
        "{said:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portcullis_login_signs_the_command_line_in_through_chromium_and_logout_revokes_its_credential() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let home = tempfile::tempdir().unwrap();
    let ca = home.path().join("ca.pem");
    std::fs::write(&ca, &env.ca_pem).unwrap();
    let server = format!("https://127.0.0.1:{port}");
    let browser = Chromium::start().await;
    login_through_chromium(&browser, home.path(), &server, &ca).await;

    let file = home.path().join(".config/portcullis/login.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let login = Login::read(&file).unwrap().expect("the login is kept");
    assert_eq!(login.server, server);
    assert!(login.expires_at <= Utc::now() + TimeDelta::hours(12));
    assert!(login.expires_at > Utc::now() + TimeDelta::hours(11));
    let whoami = person_command(home.path(), &["whoami"]).output().unwrap();
    assert!(whoami.status.success(), "{}", String::from_utf8_lossy(&whoami.stderr));
    assert!(String::from_utf8_lossy(&whoami.stdout).starts_with("ana"));
    let rows = audit_rows(&env).await;
    let logins: Vec<_> = rows.iter().filter(|r| r.verb == "login").collect();
    assert_eq!(logins.len(), 1, "{logins:?}");
    assert_eq!((logins[0].login.as_str(), logins[0].code), ("ana", 200));
    assert_eq!(logins[0].credential_id, login.credential_id);

    let out = person_command(home.path(), &["logout"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!file.exists(), "the login file is deleted");
    let after = env.raw().get("/api/portcullis/v1/whoami", &login.token).await;
    assert_eq!(after.status, 401, "the credential is revoked");
    browser.stop().await;
    env.stop().await;
}

/// Signing out on the web revokes the command line's credential too: the
/// command line's own logout then has nothing to revoke, and still ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_of_a_credential_revoked_elsewhere_still_signs_the_command_line_out() {
    let env = crate::harness::Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let credential_id = env.store.list_credentials(Some(&Principal::person("ana"))).unwrap()[0]
        .id
        .clone();
    let home = tempfile::tempdir().unwrap();
    let ca = home.path().join("ca.pem");
    std::fs::write(&ca, &env.ca_pem).unwrap();
    let file = home.path().join(".config/portcullis/login.json");
    let login = Login {
        server: format!("https://{}", env.addr),
        token,
        credential_id: credential_id.clone(),
        expires_at: Utc::now() + TimeDelta::hours(1),
        ca_file: Some(ca),
    };
    login.write(&file).unwrap();
    env.store.revoke_credential(&credential_id).unwrap();
    let out = person_command(home.path(), &["logout"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("credential already revoked"), "{said}");
    assert!(!file.exists(), "the login file is deleted");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_portcullis_login_in_chromium_kubectl_through_the_exec_plugin_lists_pods_as_the_person_until_the_credential_is_revoked(
) {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    // ana exists with a grant before she signs in; the harness token is never used.
    env.person("ana", &[("viewer", Some("shop"))]);
    Kubectl::admin(env.sim()).ok(&["-n", "shop", "run", "web", "--image=nginx"]);
    let machine = Machine {
        home: tempfile::tempdir().unwrap(),
        server: format!("https://127.0.0.1:{port}"),
    };
    let ca = machine.home.path().join("ca.pem");
    std::fs::write(&ca, &env.ca_pem).unwrap();
    let browser = Chromium::start().await;
    login_through_chromium(&browser, machine.home.path(), &machine.server, &ca).await;
    let login = Login::read(&machine.home.path().join(".config/portcullis/login.json"))
        .unwrap()
        .expect("the login is kept");

    let wrote = machine.portcullis(&["kubeconfig"]);
    assert!(wrote.status.success(), "{}", said(&wrote));
    let kubeconfig = std::fs::read_to_string(machine.kubeconfig()).unwrap();
    assert!(!kubeconfig.contains(&login.token), "no token in the kubeconfig");
    let get_pods = ["--context", "portcullis-sim", "-n", "shop", "get", "pods", "-o", "name"];
    let listed = machine.kubectl(&get_pods);
    assert!(listed.status.success(), "{}", said(&listed));
    let names = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(names.lines().any(|l| l == "pod/web"), "{names}");
    let rows = audit_rows(&env).await;
    let list = rows
        .iter()
        .find(|r| r.path.ends_with("/namespaces/shop/pods"))
        .expect("the list is audited");
    assert_eq!((list.login.as_str(), list.code), ("ana", 200));
    assert_eq!(list.credential_id, login.credential_id, "the login's credential");

    let revoked = machine.portcullis(&["credential", "revoke", &login.credential_id]);
    assert!(revoked.status.success(), "{}", said(&revoked));
    let refused = machine.kubectl(&get_pods);
    assert!(!refused.status.success(), "{}", said(&refused));
    assert!(said(&refused).contains("Unauthorized"), "{}", said(&refused));
    browser.stop().await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_not_given_out_or_a_redirect_off_this_machine_is_refused_and_audited() {
    let env = Portcullis::start().await;
    let raw = env.raw();
    let off = "/login/cli?redirect_uri=https%3A%2F%2Fevil.example%2Fcb&code_challenge_method=S256\
               &code_challenge=E9Melhoa2OwvFrEMTJguCQ0oW6gcQIAq4hKFGrIRKaM&state=s";
    assert_eq!(raw.send(Method::GET, off, &[], Vec::new()).await.status, 400);
    let form = b"grant_type=authorization_code&client_id=portcullis-cli&code=made-up&code_verifier=v&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcallback".to_vec();
    let refused = raw
        .send(
            Method::POST,
            "/oauth/token",
            &[("content-type", "application/x-www-form-urlencoded")],
            form,
        )
        .await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["error"], "invalid_grant");
    let rows = audit_rows(&env).await;
    let row = rows
        .iter()
        .find(|r| r.verb == "login")
        .expect("the exchange is audited");
    assert_eq!((row.code, row.refused.as_str()), (400, "signin_code_refused"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portcullis_login_without_a_browser_is_allowed_with_its_code_from_a_second_browser() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let home = tempfile::tempdir().unwrap();
    let ca = home.path().join("ca.pem");
    std::fs::write(&ca, &env.ca_pem).unwrap();
    let server = format!("https://127.0.0.1:{port}");
    let mut child = person_command(
        home.path(),
        &["login", &server, "--no-browser", "--ca-file", ca.to_str().unwrap()],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let lines = lines_of(child.stderr.take().unwrap());
    let first = lines
        .recv_timeout(Duration::from_secs(60))
        .expect("the command prints the code");
    assert_eq!(
        first,
        format!(
            "On any device, open {server}/login/device and type the code {}",
            &first[first.len() - 9..]
        )
    );
    let code = &first[first.len() - 9..];

    // The second browser. Even a link carrying the code (as someone
    // phishing for a sign-in would send it) leaves the field empty: the
    // person types the code their own terminal shows.
    let browser = Chromium::start().await;
    let client = &browser.client;
    client
        .goto(&format!("{server}/login/device?user_code={code}"))
        .await
        .unwrap();
    let login = client.wait().for_element(Locator::Id("login")).await.unwrap();
    login.send_keys("ana").await.unwrap();
    client.find(Locator::Id("signin")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Id("user_code")).await.unwrap();
    browser.assert_fits_a_phone_and_passes_axe("the device code page").await;
    let field = client.find(Locator::Id("user_code")).await.unwrap();
    assert_eq!(
        field.prop("value").await.unwrap().as_deref(),
        Some(""),
        "never filled in from the link"
    );
    field.send_keys(&code.to_lowercase()).await.unwrap();
    client
        .find(Locator::Id("continue"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // Before allowing it, the person sees where and when the code was
    // asked for: here, by the command on this machine, just now.
    client.wait().for_element(Locator::Id("allow")).await.unwrap();
    let asked = client.find(Locator::Id("asked")).await.unwrap().text().await.unwrap();
    assert!(
        asked.starts_with(&format!("The code {code} was asked for less than a minute ago ("))
            && asked.ends_with("UTC) from 127.0.0.1; this page is open from 127.0.0.1."),
        "{asked}"
    );
    browser
        .assert_fits_a_phone_and_passes_axe("the device confirmation page")
        .await;
    client.find(Locator::Id("allow")).await.unwrap().click().await.unwrap();
    browser
        .wait_for_text("Allowed: the command line on your other device")
        .await;
    browser
        .assert_fits_a_phone_and_passes_axe("the device allowed page")
        .await;

    let status = eventually("portcullis login to finish", async || child.try_wait().unwrap()).await;
    let said: Vec<String> = lines.try_iter().collect();
    assert!(status.success(), "{said:?}");
    assert!(
        said.iter()
            .any(|l| l.starts_with(&format!("signed in to {server} as ana until "))),
        "{said:?}"
    );
    let login = Login::read(&home.path().join(".config/portcullis/login.json"))
        .unwrap()
        .unwrap();
    let me = env.raw().get("/api/portcullis/v1/whoami", &login.token).await;
    assert_eq!(me.json()["login"], "ana");
    let rows = audit_rows(&env).await;
    let granted: Vec<_> = rows.iter().filter(|r| r.verb == "login" && r.code == 200).collect();
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert_eq!(granted[0].credential_id, login.credential_id);
    browser.stop().await;
    env.stop().await;
}

/// ana, with a grant, whose login file on `machine` (trusting the
/// server's CA, as `portcullis login --ca-file` keeps it) expired five
/// minutes ago; the login and its file.
fn expired_login(env: &Portcullis, machine: &Machine) -> (Login, std::path::PathBuf) {
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let credential_id = env.store.list_credentials(Some(&Principal::person("ana"))).unwrap()[0]
        .id
        .clone();
    let ca = machine.home.path().join("ca.pem");
    std::fs::write(&ca, &env.ca_pem).unwrap();
    let file = machine.home.path().join(".config/portcullis/login.json");
    let login = Login {
        server: machine.server.clone(),
        token,
        credential_id,
        expires_at: Utc::now() - TimeDelta::minutes(5),
        ca_file: Some(ca),
    };
    login.write(&file).unwrap();
    (login, file)
}

/// The token of the ExecCredential the plugin printed, checked to be one
/// that expires hours from now.
fn fresh_exec_credential(printed: &str) -> String {
    let credential: serde_json::Value = serde_json::from_str(printed).expect(printed);
    assert_eq!(credential["apiVersion"], "client.authentication.k8s.io/v1");
    assert_eq!(credential["kind"], "ExecCredential");
    let until = credential["status"]["expirationTimestamp"].as_str().unwrap();
    let until: chrono::DateTime<Utc> = until.parse().unwrap();
    assert!(until > Utc::now() + TimeDelta::hours(11), "{until}");
    credential["status"]["token"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_expired_login_and_a_person_at_the_terminal_the_exec_plugin_signs_in_again_through_chromium_and_hands_kubectl_the_new_credential(
) {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let machine = Machine {
        home: tempfile::tempdir().unwrap(),
        server: format!("https://127.0.0.1:{port}"),
    };
    let (old, file) = expired_login(&env, &machine);

    // As kubectl runs the kubeconfig's plugin when it has a terminal.
    let exec_info =
        r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}}"#;
    let mut plugin = person_command(machine.home.path(), &["credential-plugin", "--server", &machine.server])
        .env("KUBERNETES_EXEC_INFO", exec_info)
        .env("BROWSER", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(plugin.stderr.take().unwrap());
    let url = login_url(&lines, &machine.server);
    let browser = Chromium::start().await;
    allow_in_chromium(&browser, &url).await;
    let status = eventually("the plugin to finish", async || plugin.try_wait().unwrap()).await;
    let mut printed = String::new();
    plugin.stdout.take().unwrap().read_to_string(&mut printed).unwrap();
    let told: Vec<String> = lines.try_iter().collect();
    assert!(status.success(), "{told:?}");

    let token = &fresh_exec_credential(&printed);
    assert_ne!(token, &old.token, "a new credential");
    let me = env.raw().get("/api/portcullis/v1/whoami", token).await;
    assert_eq!(me.status, 200, "the new credential works");
    assert_eq!(me.json()["login"], "ana");
    let login = Login::read(&file).unwrap().expect("the new login is kept");
    assert_eq!(&login.token, token);
    let rows = audit_rows(&env).await;
    let logins: Vec<_> = rows.iter().filter(|r| r.verb == "login").collect();
    assert_eq!(logins.len(), 1, "{logins:?}");
    assert_eq!((logins[0].login.as_str(), logins[0].code), ("ana", 200));
    assert_eq!(logins[0].credential_id, login.credential_id);
    assert_ne!(login.credential_id, old.credential_id);
    browser.stop().await;
    env.stop().await;
}
