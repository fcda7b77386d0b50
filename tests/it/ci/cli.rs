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

/// `words` split at spaces, `issuer` put for `ISSUER` and `env`'s own URL
/// for `AUDIENCE`.
fn args(words: &str, issuer: &CiIssuer, env: &Portcullis) -> Vec<String> {
    words
        .split_whitespace()
        .map(|w| {
            if w == "ISSUER" {
                issuer.issuer.clone()
            } else if w == "AUDIENCE" {
                env.config.public_url.clone()
            } else {
                w.to_string()
            }
        })
        .collect()
}

const ADD: &str = "bot trust add --bot deployer --issuer ISSUER --audience AUDIENCE";

/// An issuer, portcullis with bot [`BOT`], admin ana and bob; their tokens.
async fn with_admin() -> (CiIssuer, Portcullis, String, String) {
    let issuer = CiIssuer::start().await;
    let env = Portcullis::start().await;
    env.store.add_principal(&Principal::bot(BOT), false).unwrap();
    let (ana, bob) = (env.person("ana", &[]), env.person("bob", &[]));
    env.store.set_admin(&Principal::person("ana"), true).unwrap();
    (issuer, env, ana, bob)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_adds_lists_and_removes_a_bots_trust_rules_as_themselves_audited() {
    let (issuer, env, ana, _) = with_admin().await;
    let add = args(
        &format!("{ADD} --claim repository=acme/shop --claim ref=refs/tags/v* --duration 30m"),
        &issuer,
        &env,
    );
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    let (out, err) = text(&env.person_cli(&ana, &add));
    let said = format!("bot {BOT} trusts tokens from {}", issuer.issuer);
    assert!(out.contains(&said), "{out}{err}");
    assert!(out.contains("ref=refs/tags/v* repository=acme/shop"), "{out}");
    let rules = env.store.trust_rules(Some(BOT)).unwrap();
    let rule = (rules.len(), rules[0].duration_seconds, rules[0].created_by.as_str());
    assert_eq!(rule, (1, 1800, "ana"));

    let (out, _) = text(&env.person_cli(&ana, &["bot", "trust", "list", "--bot", BOT]));
    assert!(
        out.contains(&rules[0].id) && out.contains(&format!("aud={}", env.config.public_url)),
        "{out}"
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
async fn someone_not_an_admin_is_refused_and_a_rule_must_name_a_claim() {
    let (issuer, env, ana, bob) = with_admin().await;
    let refused = env.person_cli(&bob, &["bot", "trust", "list"]);
    assert!(!refused.status.success());
    assert!(text(&refused).1.contains("not an admin"), "{}", text(&refused).1);
    let add = args(&format!("{ADD} --claim repository=acme/shop"), &issuer, &env);
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    let (_, err) = text(&env.person_cli(&bob, &add));
    assert!(err.contains("not an admin"), "{err}");
    let bare = args(ADD, &issuer, &env);
    let bare: Vec<&str> = bare.iter().map(String::as_str).collect();
    let (_, err) = text(&env.person_cli(&ana, &bare));
    assert!(err.contains("at least one --claim"), "{err}");
    // An audience another service also takes: whoever receives such a
    // token there must not be able to exchange it here.
    let elsewhere = ADD.replace("AUDIENCE", "sts.amazonaws.com");
    let elsewhere = args(&format!("{elsewhere} --claim repository=acme/shop"), &issuer, &env);
    let elsewhere: Vec<&str> = elsewhere.iter().map(String::as_str).collect();
    let (_, err) = text(&env.person_cli(&ana, &elsewhere));
    assert!(err.contains("is not this portcullis's own URL"), "{err}");
    assert!(env.store.trust_rules(None).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operator_manages_trust_rules_on_the_store_and_bots_still_list_and_disable() {
    let issuer = CiIssuer::start().await;
    let env = Portcullis::start().await;
    let added = env.cli(&["admin", "bot", "add", BOT]);
    assert!(added.status.success(), "{}", text(&added).1);
    let add = args(
        &format!("admin {ADD} --claim repository=acme/shop --max-token-age 5m"),
        &issuer,
        &env,
    );
    let add = env.cli(&add.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(add.status.success(), "{}", text(&add).1);
    let rules = env.store.trust_rules(Some(BOT)).unwrap();
    let rule = (rules[0].max_token_age_seconds, rules[0].created_by.as_str());
    assert_eq!(rule, (300, "cli"));
    let (out, _) = text(&env.cli(&["admin", "bot", "trust", "list"]));
    assert!(out.contains(&rules[0].id), "{out}");
    let (out, _) = text(&env.cli(&["admin", "bot", "list"]));
    assert!(out.contains(BOT), "{out}");
    let removed = env.cli(&["admin", "bot", "trust", "remove", &rules[0].id]);
    assert!(removed.status.success(), "{}", text(&removed).1);
    assert!(env.store.trust_rules(None).unwrap().is_empty());
    let rows = crate::approvals::audit_rows(&env).await;
    let by_operator = rows.iter().filter(|r| r.resource == "trustrules" && r.login == "cli");
    assert_eq!(by_operator.count(), 2);
}

/// `portcullis ci-login` against `ci`'s portcullis (trusting its CA) with
/// `args` and the environment `vars`.
fn ci_login(ci: &super::Ci, args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    let ca = ci.env.dir.path().join("p-ca.pem");
    std::fs::write(&ca, &ci.env.ca_pem).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["ci-login", "--server", &format!("https://{}", ci.env.addr)])
        .arg("--ca-file")
        .arg(&ca)
        .args(args)
        .envs(vars.iter().copied())
        .env_remove("PORTCULLIS_CONFIG")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn ci_login_exchanges_the_jobs_token_and_writes_a_kubeconfig_kubectl_lists_pods_with_as_the_bot() {
    let ci = super::Ci::start().await;
    let dir = ci.env.dir.path();
    let (token_file, kubeconfig) = (dir.join("ci-token"), dir.join("kube/config"));
    let kubeconfig_arg = kubeconfig.display().to_string();
    let token = ci.issuer.key("rsa-1").sign(&ci.claims("3003"));
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let file_arg = token_file.display().to_string();
    let login = ci_login(&ci, &["--token-file", &file_arg, "--kubeconfig", &kubeconfig_arg], &[]);
    let (out, err) = text(&login);
    assert!(login.status.success(), "{err}");
    assert!(err.contains(&format!("portcullis-{}", ci.env.cluster)), "{err}");
    assert!(
        !format!("{out}{err}").contains("pcl_") && !err.contains(&token),
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

    let vars = [("JOB_TOKEN", token.as_str())];
    let again = ci_login(
        &ci,
        &["--token-env", "JOB_TOKEN", "--kubeconfig", &kubeconfig_arg],
        &vars,
    );
    assert!(!again.status.success());
    assert!(text(&again).1.contains("exchanged already"), "{}", text(&again).1);
}
