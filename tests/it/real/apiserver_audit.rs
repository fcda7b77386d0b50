//! The real kube-apiserver's audit webhook pointed at portcullis (batch
//! mode, the Metadata policy of `deploy/apiserver-audit.md`): what passes
//! through portcullis is joined to the API server's events with RBAC's
//! reason, a request made with portcullis's token around it is an alert,
//! and ingesting the API server's log file gives the same joins.
//!
//! The webhook's URL names portcullis's port and CA before kube-apiserver
//! starts, so this file has a control plane of its own, and one portcullis
//! in front of it on a runtime of its own: both are started once and
//! shared by this file's tests (each with its own people and namespaces),
//! which is why the tests are plain `#[test]`s run on that runtime.

use super::cluster::{RealCluster, Tools};
use crate::harness::{Portcullis, Raw, RawResponse, REAL_CLUSTER};
use crate::support::{eventually, remove_at_exit};
use portcullis::audit::query::Filter;
use portcullis::audit::row::AuditRow;
use portcullis::config::{Config, TlsConfig};
use portcullis::identity::Principal;
use portcullis::store::{ApiserverEvent, Checked, Store};
use serde_json::Value;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// portcullis's grace time here: the webhook batches for at most a second.
const GRACE: Duration = Duration::from_secs(2);

/// The control plane whose audit webhook posts to portcullis, and it.
struct Webhooked {
    runtime: tokio::runtime::Runtime,
    cluster: RealCluster,
    env: Portcullis,
    _files: tempfile::TempDir,
}

static WEBHOOKED: OnceLock<Webhooked> = OnceLock::new();

/// Started on first use (not from inside a runtime).
fn webhooked() -> &'static Webhooked {
    WEBHOOKED.get_or_init(start)
}

/// The webhook's kubeconfig-format configuration, as deploy/ documents it.
fn webhook_config(port: u16, ca_file: &Path, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: portcullis\n  cluster:\n    \
         server: https://127.0.0.1:{port}/apiserver-audit/{REAL_CLUSTER}\n    certificate-authority: {}\n\
         users:\n- name: kube-apiserver\n  user:\n    token: {token}\ncontexts:\n- name: default\n  \
         context: {{cluster: portcullis, user: kube-apiserver}}\ncurrent-context: default\n",
        ca_file.display()
    )
}

fn start() -> Webhooked {
    let files = tempfile::tempdir().unwrap();
    let path = |name: &str| files.path().join(name);
    // Held until portcullis binds it, so that no control-plane port takes it.
    let reserved = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = reserved.local_addr().unwrap().port();
    let tls = portcullis::tls::generate(&["localhost"]).unwrap();
    let token = format!("webhook-{:032x}", rand::random::<u128>());
    std::fs::write(path("tls.crt"), &tls.cert_pem).unwrap();
    std::fs::write(path("tls.key"), &tls.key_pem).unwrap();
    std::fs::write(path("ca.pem"), &tls.ca_pem).unwrap();
    std::fs::write(path("webhook-token"), &token).unwrap();
    std::fs::write(path("webhook.yaml"), webhook_config(port, &path("ca.pem"), &token)).unwrap();
    let flags = [
        format!("--audit-webhook-config-file={}", path("webhook.yaml").display()),
        "--audit-webhook-mode=batch".to_string(),
        "--audit-webhook-batch-max-wait=1s".to_string(),
    ];
    let tools = Tools::of_repository(Path::new(env!("CARGO_MANIFEST_DIR")));
    let parent = std::env::temp_dir().join("portcullis-tests");
    let cluster = RealCluster::start_with_flags(&tools, &parent, &flags)
        .unwrap_or_else(|e| panic!("the webhooked control plane did not start: {e}"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    drop(reserved);
    let mut env = runtime.block_on(Portcullis::start_real_on(&cluster, |config| {
        config.listen = format!("127.0.0.1:{port}");
        config.tls = TlsConfig {
            cert_file: path("tls.crt"),
            key_file: path("tls.key"),
        };
        config.clusters[0].audit_webhook_token_file = Some(path("webhook-token"));
        config.audit.bypass_grace = GRACE;
    }));
    env.ca_pem = tls.ca_pem;
    // A static is never dropped: its folders (tokens, a store) go when the
    // test process ends, like the control plane's.
    remove_at_exit(files.path());
    remove_at_exit(env.dir.path());
    Webhooked {
        runtime,
        cluster,
        env,
        _files: files,
    }
}

/// portcullis's rows of `login` that it forwarded (not refused).
fn forwarded_rows(env: &Portcullis, login: &str) -> Vec<AuditRow> {
    let filter = Filter {
        login: Some(login.into()),
        ..Filter::default()
    };
    let rows = crate::audit::rows(env, filter).into_iter().map(|c| c.row);
    rows.filter(|r| r.refused.is_empty()).collect()
}

/// `store`'s events of `id`, once its last stage is there.
fn complete(store: &Store, id: &str) -> Option<Vec<ApiserverEvent>> {
    let events = store.apiserver_events(id).unwrap();
    events.iter().any(|e| e.stage == "ResponseComplete").then_some(events)
}

/// `rows` (at least `count` of them), once the webhook brought every one's
/// last stage.
async fn joined(env: &Portcullis, login: &str, count: usize) -> Vec<(AuditRow, Vec<ApiserverEvent>)> {
    eventually("every forwarded row joined to the API server's events", async || {
        let rows = forwarded_rows(env, login);
        let joined: Vec<_> = rows
            .iter()
            .filter_map(|r| complete(&env.store, &r.id).map(|e| (r.clone(), e)))
            .collect();
        match (rows.len() >= count, joined.len() == rows.len()) {
            (true, true) => Ok(joined),
            _ => Err(format!("{} of {} rows joined", joined.len(), rows.len())),
        }
    })
    .await
}

/// The API server's stages beside row `id`, as `GET /audit?id=` shows them.
async fn shown(env: &Portcullis, admin: &str, id: &str) -> Vec<Value> {
    let read = env.raw().get(&format!("/audit?id={id}"), admin).await;
    assert_eq!(read.status, 200, "{}", String::from_utf8_lossy(&read.body));
    let line: Value = serde_json::from_slice(read.body.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["id"], id, "{line}");
    line["apiserver"].as_array().cloned().unwrap_or_default()
}

fn admin(env: &Portcullis, login: &str) -> String {
    let token = env.person(login, &[]);
    env.store.set_admin(&Principal::person(login), true).unwrap();
    token
}

#[test]
fn requests_through_portcullis_are_joined_with_the_rbac_reason_of_an_allowed_and_a_denied_one() {
    let Webhooked {
        runtime, cluster, env, ..
    } = webhooked();
    let (ns, other) = (
        cluster.namespace("hook").unwrap(),
        cluster.namespace("hook-other").unwrap(),
    );
    runtime.block_on(async {
        let token = env.person("wanda", &[("viewer", Some(&ns))]);
        let kubectl = env.kubectl(&token, &ns);
        kubectl.ok(&["get", "pods"]);
        assert!(kubectl.fails(&["get", "pods", "-n", &other]).contains("Forbidden"));
        let joined = joined(env, "wanda", 2).await;
        for (row, events) in &joined {
            let last = events.last().unwrap();
            assert_eq!((last.code, last.impersonated_user.as_str()), (row.code, "user:wanda"));
        }
        let admin = admin(env, "warden");
        let id_of = |code: u16| joined.iter().find(|(r, _)| r.code == code).unwrap().0.id.clone();
        let allowed = shown(env, &admin, &id_of(200)).await;
        let last = allowed.last().unwrap();
        assert_eq!(last["decision"], "allow", "{last}");
        let reason = last["reason"].as_str().unwrap();
        assert!(
            reason.contains("RBAC: allowed by RoleBinding") && reason.contains("portcullis:grant:"),
            "{reason}"
        );
        let show = env.cli(&["admin", "audit", "show", &id_of(200)]);
        let show = String::from_utf8_lossy(&show.stdout);
        assert!(
            show.contains("who:      person:wanda") && show.contains(reason),
            "{show}"
        );
        // RBAC denies by finding no binding: it names none.
        let denied = shown(env, &admin, &id_of(403)).await;
        let last = denied.last().unwrap();
        let shown = (
            last["decision"].as_str(),
            last["reason"].as_str(),
            last["code"].as_u64(),
        );
        assert_eq!(shown, (Some("forbid"), Some(""), Some(403)), "{last}");
    });
}

/// A request straight to the API server with portcullis's own token.
async fn around_portcullis(cluster: &RealCluster, path: &str, impersonate: Option<&str>) -> RawResponse {
    let headers: Vec<(&str, &str)> = impersonate.map(|user| ("impersonate-user", user)).into_iter().collect();
    around_portcullis_with(cluster, path, &headers).await
}

/// [`around_portcullis`] with `headers` besides the token.
async fn around_portcullis_with(cluster: &RealCluster, path: &str, headers: &[(&str, &str)]) -> RawResponse {
    let auth = format!("Bearer {}", cluster.portcullis_token);
    let mut all = vec![("authorization", auth.as_str())];
    all.extend_from_slice(headers);
    let raw = Raw::with_ca(&cluster.ca_pem, cluster.url.clone());
    raw.send(http::Method::GET, path, &all, Vec::new()).await
}

/// The API server takes a client's `Audit-ID` as it is. Someone holding
/// portcullis's token sends requests under ids portcullis handed out: one
/// of a read it forwarded, as the same person with the same grant group
/// (a read is one request: a second is an alert), and one of a request it
/// refused and never sent (the 401 names its id to anyone).
#[test]
fn a_request_around_portcullis_under_an_audit_id_it_used_or_refused_is_an_alert() {
    let Webhooked {
        runtime, cluster, env, ..
    } = webhooked();
    let ns = cluster.namespace("reuse").unwrap();
    runtime.block_on(async {
        let token = env.person("rosa", &[("viewer", Some(&ns))]);
        let path = format!("/clusters/{REAL_CLUSTER}/api/v1/namespaces/{ns}/pods");
        let read = env.raw().get(&path, &token).await;
        assert_eq!(read.status, 200);
        let read = crate::audit::audit_id(&read);
        let refused = env.raw().get(&path, "").await;
        assert_eq!(refused.status, 401);
        let refused = crate::audit::audit_id(&refused);
        let rosa = Principal::person("rosa");
        let group = env
            .store
            .list_grants()
            .unwrap()
            .into_iter()
            .find(|g| g.subject == rosa)
            .unwrap()
            .group();
        let pods = format!("/api/v1/namespaces/{ns}/pods");
        let as_rosa = [
            ("audit-id", read.as_str()),
            ("impersonate-user", "user:rosa"),
            ("impersonate-group", group.as_str()),
        ];
        assert_eq!(around_portcullis_with(cluster, &pods, &as_rosa).await.status, 200);
        // Its own, unimpersonated, is forbidden pods: still audited.
        let nobody = [("audit-id", refused.as_str())];
        assert_eq!(around_portcullis_with(cluster, &pods, &nobody).await.status, 403);
        let raised = eventually("both reused ids are alerts", async || {
            let rows = crate::audit::alerts(env);
            let reason = |id: &str| rows.iter().find(|r| r.id == id).map(|r| r.reason.clone());
            Some((reason(&read)?, reason(&refused)?))
        })
        .await;
        assert_eq!(raised, ("ReusedAuditID".to_string(), "Bypass".to_string()));
    });
}

#[test]
fn a_request_around_portcullis_with_its_token_is_an_alert_impersonating_or_not() {
    let Webhooked {
        runtime, cluster, env, ..
    } = webhooked();
    let ns = cluster.namespace("bypass").unwrap();
    runtime.block_on(async {
        let token = env.person("bruno", &[("viewer", Some(&ns))]);
        let through = env
            .raw()
            .get(&format!("/clusters/{REAL_CLUSTER}/api/v1/namespaces/{ns}/pods"), &token)
            .await;
        let through = crate::audit::audit_id(&through);
        let pods = format!("/api/v1/namespaces/{ns}/pods");
        let bypasses = [
            crate::audit::audit_id(&around_portcullis(cluster, &pods, Some("user:bruno")).await),
            crate::audit::audit_id(&around_portcullis(cluster, &pods, None).await),
        ];
        let raised = eventually("both requests around portcullis are alerts", async || {
            let rows = crate::audit::alerts(env);
            let found = bypasses.iter().all(|id| rows.iter().any(|r| &r.id == id));
            found.then_some(rows)
        })
        .await;
        // Beside the alerts another test raises on purpose (in its own
        // namespaces, `reuse-…`).
        let ids: Vec<&str> = raised
            .iter()
            .filter(|r| !r.path.contains("/namespaces/reuse-"))
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(ids.len(), 2, "nothing portcullis sent itself is an alert: {ids:?}");
        let impersonating = raised.iter().find(|r| r.id == bypasses[0]).unwrap();
        assert!(
            impersonating.query.contains("impersonatedUser=user%3Abruno"),
            "{}",
            impersonating.query
        );
        let checked = eventually("the forwarded request checked", async || {
            env.store.apiserver_audit_checked(&through).unwrap()
        })
        .await;
        assert_eq!(checked, Checked::Matched);
    });
}

/// The API server's log so far, up to its last whole line.
fn log_so_far(cluster: &RealCluster) -> String {
    let text = std::fs::read_to_string(&cluster.audit_log).unwrap();
    text[..text.rfind('\n').map_or(0, |end| end + 1)].to_string()
}

/// `portcullis admin audit ingest --cluster real FILE` into a fresh store.
fn ingest_into_fresh_store(env: &Portcullis, log: &str) -> Store {
    let dir = env.dir.path().join("ingested");
    std::fs::create_dir_all(&dir).unwrap();
    let config = Config {
        data_dir: dir.join("data"),
        ..env.config.clone()
    };
    let (config_file, log_file) = (dir.join("portcullis.toml"), dir.join("audit.log"));
    std::fs::write(&config_file, toml::to_string(&config).unwrap()).unwrap();
    std::fs::write(&log_file, log).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("--config")
        .arg(&config_file)
        .args(["admin", "audit", "ingest", "--cluster", REAL_CLUSTER])
        .arg(&log_file)
        .env_remove("PORTCULLIS_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    portcullis::cli::open_store(&config).unwrap()
}

#[test]
fn ingesting_the_api_servers_log_file_gives_the_same_joins_as_the_webhook() {
    let Webhooked {
        runtime, cluster, env, ..
    } = webhooked();
    let ns = cluster.namespace("ingest").unwrap();
    runtime.block_on(async {
        let token = env.person("ingrid", &[("developer", Some(&ns))]);
        let kubectl = env.kubectl(&token, &ns);
        kubectl.ok(&["create", "configmap", "joined", "--from-literal=a=1"]);
        kubectl.ok(&["get", "configmaps"]);
        kubectl.fails(&["get", "secrets", "-n", "default"]);
        let joined = joined(env, "ingrid", 3).await;
        let log = eventually("every joined request's last stage in the log file", async || {
            let log = log_so_far(cluster);
            let complete = |id: &str| {
                let id = format!("\"auditID\":\"{id}\"");
                log.lines()
                    .any(|l| l.contains(&id) && l.contains("\"stage\":\"ResponseComplete\""))
            };
            joined.iter().all(|(row, _)| complete(&row.id)).then_some(log)
        })
        .await;
        let ingested = ingest_into_fresh_store(env, &log);
        for (row, by_webhook) in &joined {
            assert_eq!(&ingested.apiserver_events(&row.id).unwrap(), by_webhook, "{}", row.id);
        }
    });
}
