//! kubectl through the exec credential plugin (issue 18, item 5):
//! `portcullis kubeconfig` merges a context per granted cluster into the
//! person's kubeconfig, whose user runs `portcullis credential-plugin`
//! reading the login file; never a token in the kubeconfig.

use crate::approvals::audit_rows;
use crate::harness::Portcullis;
use crate::support::{kubectl_path, Kubectl};
use chrono::{TimeDelta, Utc};
use portcullis::cli::remote::Login;
use portcullis::identity::Principal;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A person's machine: a home with a login file and a kubeconfig, and
/// `portcullis` on the PATH as the kubeconfig's plugin expects.
pub(super) struct Machine {
    pub(super) home: tempfile::TempDir,
    pub(super) server: String,
}

impl Machine {
    /// A machine signed in to `env` with `token` until `expires_at`.
    fn signed_in(env: &Portcullis, token: &str, expires_at: chrono::DateTime<Utc>) -> Machine {
        let home = tempfile::tempdir().unwrap();
        let ca = home.path().join("portcullis-ca.pem");
        std::fs::write(&ca, &env.ca_pem).unwrap();
        let server = format!("https://{}", env.addr);
        let credential_id = env
            .store
            .list_credentials(Some(&Principal::person("ana")))
            .unwrap()
            .into_iter()
            .next()
            .unwrap()
            .id;
        let login = Login {
            server: server.clone(),
            token: token.into(),
            credential_id,
            expires_at,
            ca_file: Some(ca),
        };
        login.write(&home.path().join(".config/portcullis/login.json")).unwrap();
        Machine { home, server }
    }

    pub(super) fn kubeconfig(&self) -> PathBuf {
        self.home.path().join(".kube/config")
    }

    fn command(&self, program: &Path) -> Command {
        let bin = Path::new(env!("CARGO_BIN_EXE_portcullis")).parent().unwrap();
        let path = std::env::join_paths(
            std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
        )
        .unwrap();
        let mut command = Command::new(program);
        command
            .env("HOME", self.home.path())
            .env("PATH", path)
            .env("KUBECONFIG", self.kubeconfig())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("PORTCULLIS_TOKEN")
            .env_remove("PORTCULLIS_SERVER")
            .env_remove("PORTCULLIS_CA_FILE")
            .env_remove("PORTCULLIS_CONFIG");
        command
    }

    /// `portcullis <args>` as the person.
    pub(super) fn portcullis(&self, args: &[&str]) -> Output {
        self.command(Path::new(env!("CARGO_BIN_EXE_portcullis")))
            .args(args)
            .output()
            .unwrap()
    }

    /// kubectl with the person's kubeconfig (no terminal: not interactive).
    pub(super) fn kubectl(&self, args: &[&str]) -> Output {
        self.command(&kubectl_path())
            .arg("--cache-dir")
            .arg(self.home.path().join("kube-cache"))
            .args(args)
            .output()
            .unwrap()
    }
}

/// What `out` wrote, stdout then stderr.
pub(super) fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_through_the_exec_plugin_lists_pods_as_the_person_and_loses_access_once_the_credential_is_revoked() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    Kubectl::admin(env.sim()).ok(&["-n", "shop", "run", "web", "--image=nginx"]);
    let machine = Machine::signed_in(&env, &token, Utc::now() + TimeDelta::hours(1));

    let wrote = machine.portcullis(&["kubeconfig"]);
    assert!(wrote.status.success(), "{}", said(&wrote));
    let kubeconfig = std::fs::read_to_string(machine.kubeconfig()).unwrap();
    assert!(!kubeconfig.contains(&token), "no token in the kubeconfig: {kubeconfig}");
    assert!(kubeconfig.contains("credential-plugin"), "{kubeconfig}");

    let listed = machine.kubectl(&["--context", "portcullis-sim", "-n", "shop", "get", "pods", "-o", "name"]);
    assert!(listed.status.success(), "{}", said(&listed));
    let names = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(names.lines().any(|l| l == "pod/web"), "{names}");
    let rows = audit_rows(&env).await;
    let list = rows
        .iter()
        .find(|r| r.path.ends_with("/namespaces/shop/pods"))
        .expect("the list is audited");
    assert_eq!((list.login.as_str(), list.code), ("ana", 200));

    let id = env.store.list_credentials(Some(&Principal::person("ana"))).unwrap()[0]
        .id
        .clone();
    let revoked = machine.portcullis(&["credential", "revoke", &id]);
    assert!(revoked.status.success(), "{}", said(&revoked));
    let refused = machine.kubectl(&["--context", "portcullis-sim", "-n", "shop", "get", "pods"]);
    assert!(!refused.status.success(), "{}", said(&refused));
    assert!(said(&refused).contains("Unauthorized"), "{}", said(&refused));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_expired_login_kubectl_fails_with_one_line_saying_to_run_portcullis_login() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let machine = Machine::signed_in(&env, &token, Utc::now() - TimeDelta::minutes(5));
    let kubeconfig =
        portcullis::doors::web::console::kubeconfig_text(&machine.server, Some(&env.ca_pem), &["sim".into()]);
    std::fs::create_dir_all(machine.kubeconfig().parent().unwrap()).unwrap();
    std::fs::write(machine.kubeconfig(), kubeconfig).unwrap();

    let failed = machine.kubectl(&["-n", "shop", "get", "pods"]);
    assert!(!failed.status.success(), "{}", said(&failed));
    let stderr = String::from_utf8_lossy(&failed.stderr).into_owned();
    // kubectl asks the plugin again as it retries; each time it says one line.
    let ours: Vec<&str> = stderr.lines().filter(|l| l.contains("portcullis login")).collect();
    assert!(!ours.is_empty(), "{stderr}");
    assert!(ours.iter().all(|l| *l == ours[0]), "{stderr}");
    assert!(
        ours[0].starts_with("portcullis: your portcullis credential expired at "),
        "{stderr}"
    );
    assert!(
        ours[0].ends_with(&format!("run `portcullis login {}`", machine.server)),
        "{stderr}"
    );
    let rows = audit_rows(&env).await;
    assert!(
        !rows.iter().any(|r| r.path.contains("/pods")),
        "no request was sent: {rows:?}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portcullis_kubeconfig_merges_into_the_first_kubeconfig_file_and_leaves_other_entries_untouched() {
    let env = Portcullis::start().await;
    let token = env.person("ana", &[("viewer", Some("shop"))]);
    let machine = Machine::signed_in(&env, &token, Utc::now() + TimeDelta::hours(1));
    let theirs = "apiVersion: v1\nkind: Config\ncurrent-context: work\nclusters:\n\
        - name: work\n  cluster:\n    server: https://work.example\n\
        contexts:\n- name: work\n  context:\n    cluster: work\n    user: me\n    namespace: team\n\
        users:\n- name: me\n  user:\n    token: someone-elses-token\n";
    std::fs::create_dir_all(machine.kubeconfig().parent().unwrap()).unwrap();
    std::fs::write(machine.kubeconfig(), theirs).unwrap();
    let second = machine.home.path().join("second-config");
    std::fs::write(&second, theirs).unwrap();
    let list = std::env::join_paths([machine.kubeconfig(), second.clone()]).unwrap();

    let wrote = machine
        .command(Path::new(env!("CARGO_BIN_EXE_portcullis")))
        .env("KUBECONFIG", &list)
        .arg("kubeconfig")
        .output()
        .unwrap();
    assert!(wrote.status.success(), "{}", said(&wrote));
    let before: serde_yaml::Value = serde_yaml::from_str(theirs).unwrap();
    let after: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(machine.kubeconfig()).unwrap()).unwrap();
    assert_eq!(after["current-context"], "work");
    for list in ["clusters", "contexts", "users"] {
        assert_eq!(after[list][0], before[list][0], "{list}");
        assert_eq!(after[list].as_sequence().unwrap().len(), 2, "{list}");
    }
    assert_eq!(after["contexts"][1]["name"], "portcullis-sim");
    assert_eq!(
        std::fs::read_to_string(&second).unwrap(),
        theirs,
        "only the first file is written"
    );

    let listed = machine.kubectl(&["--context", "portcullis-sim", "-n", "shop", "get", "pods"]);
    assert!(listed.status.success(), "{}", said(&listed));
    env.stop().await;
}
