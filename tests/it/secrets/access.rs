//! Who sees Secret values (a revealing role) and who does not (a role
//! without it, any agent), ServiceAccount tokens for agents, and a cluster
//! answer that cannot be redacted.

use super::{assert_hidden, operator, start, LAST_APPLIED, OPERATOR, PASSWORD_B64};
use portcullis_sim::faults::{FaultAction, FaultRule};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_reader_sees_values_but_a_non_revealing_role_and_its_delegated_agent_do_not() {
    let env = start().await;
    let (reader, grants) = env.person_with_ttl("ana", &[("secrets-reader", Some("shop"))], Duration::from_secs(3600));
    let agent = env.agent("ana", &[&grants[0]]);
    let (operator_token, _) = operator(&env, Some("shop"));
    let path = "/clusters/sim/api/v1/namespaces/shop/secrets/db-credentials";

    let revealed = env.raw().get(path, &reader).await;
    assert_eq!(revealed.json()["data"]["password"], PASSWORD_B64);
    assert!(
        !crate::audit::row(&env, &crate::audit::audit_id(&revealed))
            .await
            .redacted
    );
    for token in [&agent, &operator_token] {
        let hidden = env.raw().get(path, token).await;
        assert_eq!(hidden.status, 200);
        assert_hidden(&String::from_utf8_lossy(&hidden.body));
        assert!(
            crate::audit::row(&env, &crate::audit::audit_id(&hidden)).await.redacted,
            "the audit row says so"
        );
    }
    // kube-rs, as the agent: the same answer through a real client.
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        env.kube(&agent),
        "shop",
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
    );
    let secret = api.get("db-credentials").await.unwrap();
    assert_eq!(secret.data["data"]["password"], "<redacted, 15 bytes>");
    assert!(secret
        .metadata
        .annotations
        .unwrap_or_default()
        .keys()
        .all(|k| !k.contains(LAST_APPLIED)));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_minting_a_service_account_token_gets_it_redacted_and_a_person_does_not() {
    let env = start().await;
    let (person, grants) = env.person_with_ttl("cy", &[(OPERATOR, Some("shop"))], Duration::from_secs(3600));
    let agent = env.agent("cy", &[&grants[0]]);
    let minted = env.kubectl(&person, "shop").ok(&["create", "token", "default"]);
    assert!(
        minted.trim().starts_with("eyJ") && minted.trim().split('.').count() == 3,
        "{minted}"
    );
    let hidden = env.kubectl(&agent, "shop").ok(&["create", "token", "default"]);
    assert!(
        hidden.trim().starts_with("<redacted, ") && !hidden.contains("eyJ"),
        "{hidden}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_secret_response_from_the_cluster_is_refused_with_502_and_recorded() {
    let env = start().await;
    let (token, kubectl) = operator(&env, Some("shop"));
    let bodies: [(&str, &[u8]); 2] = [
        (
            "application/json",
            br#"{"kind":"Secret","apiVersion":"v1","data":{"password":"czNjcjN0LVBhNTV3MHJk"#,
        ),
        (
            "application/vnd.kubernetes.protobuf",
            b"k8s\x00\n\x0c\n\x02v1\x12\x06Secret\x12\x14czNjcjN0LVBhNTV3MHJk",
        ),
    ];
    for (content_type, body) in bodies {
        env.sim().faults().clear();
        env.sim().faults().add(FaultRule::new(
            "/api/v1/namespaces/shop/secrets",
            FaultAction::Body {
                content_type: content_type.into(),
                body: bytes::Bytes::from_static(body),
                code: 200,
            },
        ));
        let response = env
            .raw()
            .get("/clusters/sim/api/v1/namespaces/shop/secrets/db-credentials", &token)
            .await;
        assert_eq!(
            (response.status.as_u16(), response.json()["reason"].as_str()),
            (502, Some("BadGateway"))
        );
        assert_hidden(&String::from_utf8_lossy(&response.body));
        let row = crate::audit::row(&env, &crate::audit::audit_id(&response)).await;
        assert_eq!((row.code, row.reason.as_str(), row.redacted), (502, "BadGateway", true));
    }
    let err = kubectl.fails(&["get", "secret", "db-credentials", "-o", "yaml"]);
    assert!(err.contains("could not hide the Secret values"), "{err}");
    assert_hidden(&err);
    env.stop().await;
}
