//! Watching Secrets on the real kube-apiserver as an agent: every event,
//! in each form the API server streams them (objects, Tables,
//! PartialObjectMetadata), and with kubectl as the events happen.

use super::{agent_beside_a_secret, assert_hidden, distinctive, plant};
use http::Method;
use std::io::BufRead;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_watching_secrets_gets_every_event_redacted_in_every_form_the_api_server_streams() {
    let (env, ns, first, agent) = agent_beside_a_secret("secrets-watch").await;
    let cluster = crate::real::shared();
    // Watched from before `later` was planted and changed, the API server
    // replays both events (ADDED, MODIFIED) and then ends the stream.
    // (`kubectl get -o jsonpath` prints a list kubectl made, without one.)
    let list = cluster
        .admin(&["get", "--raw", &format!("/api/v1/namespaces/{ns}/secrets")])
        .unwrap();
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let since = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let (planted, changed) = (distinctive(), distinctive());
    plant(&ns, "later", &planted);
    plant(&ns, "later", &changed);
    let path = format!(
        "/clusters/real/api/v1/namespaces/{ns}/secrets?watch=1&resourceVersion={since}&timeoutSeconds=2&fieldSelector=metadata.name%3Dlater"
    );
    let auth = format!("Bearer {agent}");
    for (accept, object) in [
        ("application/json", "\"kind\":\"Secret\""),
        ("application/json;as=Table;v=v1;g=meta.k8s.io", "\"kind\":\"Table\""),
        (
            "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            "\"kind\":\"PartialObjectMetadata\"",
        ),
    ] {
        let headers = [("authorization", auth.as_str()), ("accept", accept)];
        let response = env.raw().send(Method::GET, &path, &headers, Vec::new()).await;
        let text = String::from_utf8_lossy(&response.body).into_owned();
        assert_eq!(response.status, 200, "{accept}: {text}");
        assert_hidden(
            &format!("a watch as {accept}"),
            &response.body,
            &[&first, &planted, &changed],
        );
        let events: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(types, ["ADDED", "MODIFIED"], "{accept}: {text}");
        assert_eq!(text.matches(object).count(), 2, "{accept}: {text}");
        if accept == "application/json" {
            assert_eq!(events[1]["object"]["data"]["password"], "<redacted, 24 bytes>");
        }
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watching_as_an_agent_gets_a_change_made_meanwhile_redacted() {
    let (env, ns, first, agent) = agent_beside_a_secret("secrets-kubectl-watch").await;
    let kubectl = env.kubectl(&agent, &ns);
    let mut child = std::process::Command::new(crate::support::kubectl_path())
        .arg("--kubeconfig")
        .arg(kubectl.kubeconfig())
        .args(["get", "secret", "db", "-w", "-o", "json", "--output-watch-events"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| tx.send(line)));
    let mut seen = String::new();
    let mut read_until = |needle: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !seen.contains(needle) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => seen.push_str(&(line + "\n")),
                Err(_) => panic!("no {needle:?} from kubectl: {seen}"),
            }
        }
    };
    read_until("ADDED");
    // Changed by the admin while kubectl watches.
    let changed = distinctive();
    plant(&ns, "db", &changed);
    read_until("MODIFIED");
    child.kill().unwrap();
    let _ = child.wait();
    assert_hidden("kubectl get -w", seen.as_bytes(), &[&first, &changed]);
    assert_eq!(seen.matches("redacted, 24 bytes").count(), 2, "{seen}");
    env.stop().await;
}
