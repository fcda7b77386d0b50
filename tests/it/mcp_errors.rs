//! MCP tool results at their edges: the cluster's 409 and 422 with their
//! Status fields in `structuredContent`, list pages with continue tokens,
//! results cut at 256 KiB with a notice, and cluster answers over the
//! response limit discarded.

use crate::harness::Portcullis;
use crate::mcp::{ana_and_agent, connect, fails, ok, stateless};
use serde_json::json;

const C: &str = "sim";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_and_invalid_objects_come_back_with_their_status_fields() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, stateless()).await;
    // kubectl owns data.a: the agent's apply of another value conflicts.
    let kubectl_owned = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: shop}\ndata: {a: d}\n";
    let person = env.person("bob", &[("admin", Some("shop"))]);
    let path = env.dir.path().join("cm.yaml");
    std::fs::write(&path, kubectl_owned).unwrap();
    env.kubectl(&person, "shop")
        .ok(&["apply", "--server-side", "-f", path.to_str().unwrap()]);
    let manifest = kubectl_owned.replace("a: d", "a: b");
    let (text, structured) = fails(&client, "apply", json!({"cluster": C, "manifest": manifest})).await;
    assert!(text.starts_with("409 Conflict: "), "{text}");
    assert_eq!(structured["code"], 409);
    assert_eq!(structured["reason"], "Conflict");
    assert_eq!(structured["fieldReason"], "FieldManagerConflict");
    assert_eq!(structured["namespace"], "shop");
    assert!(structured["field"].as_str().unwrap().contains("data"), "{structured}");

    // A Deployment's selector is immutable; force takes the field over first.
    let invalid = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec: {selector: {matchLabels: {app: other}}}\n";
    let (text, structured) = fails(
        &client,
        "apply",
        json!({"cluster": C, "manifest": invalid, "force": true}),
    )
    .await;
    assert!(
        text.starts_with("422 Invalid: deployments.apps \"web\" is invalid")
            || text.starts_with("422 Invalid: Deployment"),
        "{text}"
    );
    assert_eq!(structured["code"], 422);
    assert_eq!(structured["reason"], "Invalid");
    assert_eq!(structured["name"], "web");
    // kube-apiserver validates the new spec before the update's immutable
    // fields: the selector no longer matching the template is the first cause.
    assert_eq!(structured["field"], "spec.template.metadata.labels", "{structured}");
    assert_eq!(structured["fieldReason"], "FieldValueInvalid", "{structured}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_page_with_continue_tokens() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, stateless()).await;
    for i in 0..5 {
        let manifest = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: page-{i}, namespace: shop}}\n");
        ok(&client, "apply", json!({"cluster": C, "manifest": manifest})).await;
    }
    let mut seen = Vec::new();
    let mut token_arg = None;
    for _ in 0..10 {
        let mut args =
            json!({"cluster": C, "kind": "configmaps", "namespace": "shop", "limit": 2, "label_selector": ""});
        if let Some(t) = &token_arg {
            args["continue"] = json!(t);
        }
        let page = ok(&client, "list_resources", args).await;
        seen.extend(
            page.lines()
                .filter(|l| l.starts_with("page-"))
                .map(|l| l.split_whitespace().next().unwrap().to_string()),
        );
        token_arg = page
            .lines()
            .find_map(|l| l.strip_prefix("continue: "))
            .map(|t| t.split(' ').next().unwrap().to_string());
        if token_arg.is_none() {
            break;
        }
    }
    assert_eq!(seen, ["page-0", "page-1", "page-2", "page-3", "page-4"]);
    let (text, _) = fails(
        &client,
        "list_resources",
        json!({"cluster": C, "kind": "cm", "namespace": "shop", "limit": 501}),
    )
    .await;
    assert!(
        text.starts_with("tool.invalid_argument: limit must be 1 to 500"),
        "{text}"
    );
    env.stop().await;
}

/// Arguments that do not deserialize at all get the error shape every
/// other bad argument gets, naming the argument, not rmcp's prose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_of_the_wrong_type_or_missing_are_invalid_argument_errors_naming_them() {
    let env = Portcullis::start().await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, stateless()).await;
    for (tool, arguments, argument) in [
        (
            "list_resources",
            json!({"cluster": C, "kind": "cm", "limit": -1}),
            "limit",
        ),
        (
            "list_resources",
            json!({"cluster": C, "kind": "cm", "limit": "20"}),
            "limit",
        ),
        ("get_logs", json!({"cluster": C, "pod": "web"}), "namespace"),
        (
            "scale",
            json!({"cluster": C, "kind": "deployments", "name": "web", "namespace": "shop", "replicas": "3"}),
            "replicas",
        ),
        // Misspelt, not dropped: the request would be for the whole cluster.
        (
            "request_access",
            json!({"cluster": C, "role": "developer", "namspace": "shop", "duration": "1h", "reason": "x"}),
            "namspace",
        ),
    ] {
        let (text, structured) = fails(&client, tool, arguments).await;
        assert_eq!(structured["code"], "tool.invalid_argument", "{tool}: {text}");
        assert_eq!(structured["params"]["argument"], argument, "{tool}: {text}");
        assert!(
            text.starts_with(&format!("tool.invalid_argument: argument {argument}: ")),
            "{text}"
        );
    }
    // apply takes no namespace argument: the manifest must name it.
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n";
    let (text, structured) = fails(&client, "apply", json!({"cluster": C, "manifest": manifest})).await;
    assert_eq!(structured["code"], "tool.invalid_argument", "{text}");
    assert_eq!(structured["params"]["argument"], "manifest", "{text}");
    assert!(text.contains("set metadata.namespace"), "{text}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_results_are_cut_with_a_notice_and_oversized_cluster_answers_discarded() {
    let env = Portcullis::start_with(|c| c.limits.response_bytes = 600 * 1024).await;
    let token = ana_and_agent(&env);
    let client = connect(&env, &token, stateless()).await;
    let lines: String = (0..6000).map(|i| format!("line {i:05} {}\n", "x".repeat(40))).collect();
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "shop"}, "data": {"text": lines}});
    ok(
        &client,
        "apply",
        json!({"cluster": C, "manifest": manifest.to_string()}),
    )
    .await;
    let got = ok(
        &client,
        "get_resource",
        json!({"cluster": C, "kind": "cm", "name": "big", "namespace": "shop"}),
    )
    .await;
    assert!(got.len() <= 256 * 1024, "{}", got.len());
    assert!(
        got.contains("[cut after ") && got.contains("KiB a tool returns"),
        "{}",
        &got[got.len() - 300..]
    );
    let huge = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge", "namespace": "shop"}, "data": {"a": "y".repeat(700 * 1024)}});
    // Its own answer is over the limit too: the write happened, its echo is discarded.
    let (text, structured) = fails(&client, "apply", json!({"cluster": C, "manifest": huge.to_string()})).await;
    assert!(text.starts_with("response.too_large: "), "{text}");
    assert_eq!(structured["params"]["limit"], 600 * 1024);
    let (text, _) = fails(
        &client,
        "get_resource",
        json!({"cluster": C, "kind": "cm", "name": "huge", "namespace": "shop"}),
    )
    .await;
    assert!(text.starts_with("response.too_large: "), "{text}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_writes_need_approval_gets_a_pending_approval_and_only_a_dry_run_reaches_the_cluster() {
    let env = Portcullis::start().await;
    let (_, grants) = env.person_with_ttl(
        "ana",
        &[("developer", Some("shop"))],
        std::time::Duration::from_secs(3600),
    );
    let person = portcullis::identity::Principal::person("ana");
    let agent = env
        .store
        .add_agent(&person, "careful", std::slice::from_ref(&grants[0].id), true)
        .unwrap();
    let (_, token) = env.store.issue_agent_credential(&agent, None).unwrap();
    let client = connect(&env, &token, stateless()).await;
    assert!(ok(&client, "whoami", json!({}))
        .await
        .contains("Your writes need a person's approval."));
    let scale = json!({"cluster": C, "kind": "deploy", "name": "web", "namespace": "shop", "replicas": 2});
    let (text, structured) = fails(&client, "scale", scale).await;
    assert!(text.starts_with("agent.approval_pending: "), "{text}");
    assert_eq!(structured["code"], "agent.approval_pending");
    let id = structured["params"]["approval_id"].as_str().unwrap();
    assert!(structured["params"]["url"]
        .as_str()
        .unwrap()
        .ends_with(&format!("/approvals/{id}")));
    assert!(structured["params"]["expires_at"].as_str().unwrap().ends_with('Z'));
    let real_patches = env
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch" && r.impersonated.is_some())
        .filter(|r| !r.query.as_deref().unwrap_or_default().contains("dryRun=All"))
        .count();
    assert_eq!(real_patches, 0, "only the dry run reached the cluster");
    env.stop().await;
}
