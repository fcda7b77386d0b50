//! The command line: an admin adds, lists and removes a bot's trust rules
//! as themselves (`portcullis bot trust`), the operator on the server's
//! store (`portcullis admin bot trust`), each change audited; anyone else
//! is refused.

use super::issuer::CiIssuer;
use super::BOT;
use crate::harness::Portcullis;
use portcullis::identity::Principal;

fn text(output: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_adds_lists_and_removes_a_bots_trust_rules_as_themselves_and_others_are_refused() {
    let issuer = CiIssuer::start().await;
    let env = Portcullis::start().await;
    env.store.add_principal(&Principal::bot(BOT), false).unwrap();
    let ana = env.person("ana", &[]);
    let bob = env.person("bob", &[]);
    env.store.set_admin(&Principal::person("ana"), true).unwrap();
    let add = [
        "bot",
        "trust",
        "add",
        "--bot",
        BOT,
        "--issuer",
        &issuer.issuer,
        "--audience",
        "https://p.example",
        "--claim",
        "repository=acme/shop",
        "--claim",
        "ref=refs/tags/v*",
        "--duration",
        "30m",
    ];
    let (out, err) = text(&env.person_cli(&ana, &add));
    assert!(
        out.contains(&format!("bot {BOT} trusts tokens from {}", issuer.issuer)),
        "{out}{err}"
    );
    assert!(out.contains("ref=refs/tags/v* repository=acme/shop"), "{out}");
    let rules = env.store.trust_rules(Some(BOT)).unwrap();
    assert_eq!(
        (rules.len(), rules[0].duration_seconds, rules[0].created_by.as_str()),
        (1, 1800, "ana")
    );

    let (out, _) = text(&env.person_cli(&ana, &["bot", "trust", "list", "--bot", BOT]));
    assert!(
        out.contains(&rules[0].id) && out.contains("aud=https://p.example"),
        "{out}"
    );
    let refused = env.person_cli(&bob, &["bot", "trust", "list"]);
    assert!(!refused.status.success());
    assert!(text(&refused).1.contains("not an admin"), "{}", text(&refused).1);
    let no_claim = env.person_cli(&ana, &add[..9]);
    assert!(
        text(&no_claim).1.contains("at least one --claim"),
        "{}",
        text(&no_claim).1
    );

    let (out, _) = text(&env.person_cli(&ana, &["bot", "trust", "remove", &rules[0].id]));
    assert!(out.contains(&format!("removed trust rule {}", rules[0].id)), "{out}");
    assert!(env.store.trust_rules(None).unwrap().is_empty());
    let rows = crate::approvals::audit_rows(&env).await;
    let changes: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r.resource == "trustrules" && r.api_group == "portcullis.dev")
        .map(|r| (r.verb.as_str(), r.login.as_str()))
        .collect();
    assert_eq!(changes, [("create", "ana"), ("delete", "ana")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operator_manages_trust_rules_on_the_store_and_bots_still_list_and_disable() {
    let issuer = CiIssuer::start().await;
    let env = Portcullis::start().await;
    let added = env.cli(&["admin", "bot", "add", BOT]);
    assert!(added.status.success(), "{}", text(&added).1);
    let add = env.cli(&[
        "admin",
        "bot",
        "trust",
        "add",
        "--bot",
        BOT,
        "--issuer",
        &issuer.issuer,
        "--audience",
        "https://p.example",
        "--claim",
        "repository=acme/shop",
        "--max-token-age",
        "5m",
    ]);
    assert!(add.status.success(), "{}", text(&add).1);
    let rules = env.store.trust_rules(Some(BOT)).unwrap();
    assert_eq!(
        (rules[0].max_token_age_seconds, rules[0].created_by.as_str()),
        (300, "cli")
    );
    let (out, _) = text(&env.cli(&["admin", "bot", "trust", "list"]));
    assert!(out.contains(&rules[0].id), "{out}");
    let (out, _) = text(&env.cli(&["admin", "bot", "list"]));
    assert!(out.contains(BOT), "{out}");
    let removed = env.cli(&["admin", "bot", "trust", "remove", &rules[0].id]);
    assert!(removed.status.success(), "{}", text(&removed).1);
    assert!(env.store.trust_rules(None).unwrap().is_empty());
    let rows = crate::approvals::audit_rows(&env).await;
    assert_eq!(
        rows.iter()
            .filter(|r| r.resource == "trustrules" && r.login == "cli")
            .count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ci_login_exchanges_the_jobs_token_and_writes_a_kubeconfig_kubectl_lists_pods_with_as_the_bot() {
    let ci = super::Ci::start().await;
    let dir = ci.env.dir.path();
    let (ca, token_file, kubeconfig) = (dir.join("p-ca.pem"), dir.join("ci-token"), dir.join("kube/config"));
    std::fs::write(&ca, &ci.env.ca_pem).unwrap();
    let token = ci.issuer.key("rsa-1").sign(&ci.claims("3003"));
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let login = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["ci-login", "--server", &format!("https://{}", ci.env.addr)])
        .arg("--ca-file")
        .arg(&ca)
        .arg("--token-file")
        .arg(&token_file)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("PORTCULLIS_CONFIG")
        .output()
        .unwrap();
    let (out, err) = text(&login);
    assert!(login.status.success(), "{err}");
    assert!(err.contains(&format!("portcullis-{}", ci.env.cluster)), "{err}");
    assert!(
        !out.contains("pcl_") && !err.contains("pcl_") && !err.contains(&token),
        "no token printed"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kubeconfig).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the kubeconfig holds a credential");
    }
    let kubectl = crate::support::Kubectl::with_kubeconfig(&std::fs::read_to_string(&kubeconfig).unwrap());
    let pods = kubectl.ok(&["get", "pods", "-n", "shop", "-o", "name"]);
    assert!(pods.contains("pod/"), "{pods}");
    let rows = crate::approvals::audit_rows(&ci.env).await;
    let listed = rows
        .iter()
        .find(|r| r.resource == "pods")
        .expect("kubectl's request is audited");
    assert_eq!(listed.login, BOT);
    assert!(
        listed.via.ends_with("repository=acme/shop run_id=3003"),
        "{}",
        listed.via
    );

    let again = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args([
            "ci-login",
            "--server",
            &format!("https://{}", ci.env.addr),
            "--token-env",
            "JOB_TOKEN",
        ])
        .arg("--ca-file")
        .arg(&ca)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("JOB_TOKEN", &token)
        .env_remove("PORTCULLIS_CONFIG")
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(text(&again).1.contains("exchanged already"), "{}", text(&again).1);
}
