use super::*;
use serde_json::json;

fn redacted(document: Value, target: Target) -> Value {
    let bytes = serde_json::to_vec(&document).unwrap();
    let out = redact_json(&bytes, target).unwrap().expect("changed");
    serde_json::from_slice(&out).unwrap()
}

fn db_credentials() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "db", "namespace": "shop", "annotations": {
            LAST_APPLIED: "{\"stringData\":{\"password\":\"s3cr3t-Pa55w0rd\"}}",
            "team": "checkout"
        }},
        "data": {"password": "czNjcjN0LVBhNTV3MHJk", "username": "c2hvcA==", "empty": ""},
        "stringData": {"note": "héllo"}
    })
}

#[test]
fn a_secret_loses_its_values_and_its_last_applied_annotation() {
    let secret = redacted(db_credentials(), Target::Secrets);
    assert_eq!(secret["data"]["password"], "<redacted, 15 bytes>");
    assert_eq!(secret["data"]["username"], "<redacted, 4 bytes>");
    assert_eq!(secret["data"]["empty"], "<redacted, 0 bytes>");
    assert_eq!(
        secret["stringData"]["note"], "<redacted, 6 bytes>",
        "stringData counts UTF-8 bytes"
    );
    assert_eq!(
        secret["metadata"]["annotations"],
        json!({"team": "<redacted, 8 bytes>"})
    );
    assert_eq!(
        (secret["type"].as_str(), secret["metadata"]["name"].as_str()),
        (Some("Opaque"), Some("db"))
    );
    assert!(!String::from_utf8(serde_json::to_vec(&secret).unwrap())
        .unwrap()
        .contains("s3cr3t"));
}

/// Tools copy the applied object, values and all, into annotations of
/// their own (kapp's `kapp.k14s.io/original`): every annotation's value is
/// hidden but those that name something, and `managedFields` goes (which
/// fields a dry-run patch changed would say whether a guess was right).
#[test]
fn a_secret_keeps_only_the_annotations_that_name_things_and_no_managed_fields() {
    let mut secret = db_credentials();
    secret["metadata"]["annotations"] = json!({
        "kapp.k14s.io/original": "{\"data\":{\"password\":\"czNjcjN0LVBhNTV3MHJk\"}}",
        "kubernetes.io/service-account.name": "builder",
        "meta.helm.sh/release-name": "shop",
        "k8s.io/initial-events-end": "true",
    });
    secret["metadata"]["managedFields"] = json!([{"manager": "probe", "operation": "Update",
        "fieldsV1": {"f:data": {"f:password": {}}}}]);
    let bytes = serde_json::to_vec(&secret).unwrap();
    let fast = super::fast::document(&bytes, Target::Secrets).expect("the fast redactor reads it");
    let parsed = parsed_json(&bytes, Target::Secrets).unwrap().unwrap();
    for out in [fast, parsed] {
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            out["metadata"]["annotations"],
            json!({
                "kapp.k14s.io/original": "<redacted, 44 bytes>",
                "kubernetes.io/service-account.name": "builder",
                "meta.helm.sh/release-name": "shop",
                "k8s.io/initial-events-end": "true",
            })
        );
        assert!(out["metadata"].get("managedFields").is_none(), "{out}");
        assert_eq!(out["metadata"]["name"], "db");
    }
    let not_text = br#"{"kind":"Secret","metadata":{"annotations":{"team":1}}}"#;
    assert!(redact_json(not_text, Target::Secrets).is_err());
}

#[test]
fn a_typed_client_gets_data_markers_it_can_decode_as_base64() {
    let secret = redacted(db_credentials(), Target::TypedSecrets);
    assert_eq!(
        secret["data"]["password"], "PHJlZGFjdGVkLCAxNSBieXRlcz4=",
        "base64 of <redacted, 15 bytes>"
    );
    assert_eq!(
        secret["stringData"]["note"], "<redacted, 6 bytes>",
        "stringData is text"
    );
    assert!(secret["metadata"]["annotations"].get(LAST_APPLIED).is_none());
}

#[test]
fn base64_lengths_are_the_decoded_lengths_padded_or_not() {
    for (text, len) in [
        ("", 0),
        ("YQ==", 1),
        ("YWI=", 2),
        ("YWJj", 3),
        ("YWJjZA", 4),
        ("YWJjZGU", 5),
        ("+/+/", 3),
    ] {
        assert_eq!(decoded_len(text).unwrap(), len, "{text}");
    }
    for bad in ["Y", "YWJjZ", "YW=j", "YQ=", "<redacted, 3 bytes>", "YWJj\n"] {
        assert!(matches!(decoded_len(bad), Err(RedactError::NotBase64)), "{bad}");
    }
}

#[test]
fn values_that_look_like_json_or_like_a_marker_are_redacted_too() {
    let json_text = r#"{"kind":"Status","apiVersion":"v1","data":{"x":"y"}}"#;
    let sneaky = json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sneaky"},
        "stringData": {
            "json": json_text,
            "marker": "<redacted, 3 bytes>",
            "quote": "\",\"data\":{}}"
        }
    });
    let secret = redacted(sneaky, Target::Secrets);
    assert_eq!(secret["stringData"]["json"], marker(json_text.len()));
    assert_eq!(secret["stringData"]["marker"], "<redacted, 19 bytes>");
    assert_eq!(secret["stringData"]["quote"], "<redacted, 12 bytes>");
}

#[test]
fn every_item_of_a_list_is_redacted_even_without_its_kind() {
    let mut item = db_credentials();
    item.as_object_mut().unwrap().remove("kind");
    let list = json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
        "items": [item, db_credentials()]});
    let list = redacted(list, Target::Secrets);
    for item in list["items"].as_array().unwrap() {
        assert_eq!(item["data"]["password"], "<redacted, 15 bytes>");
        assert!(item["metadata"]["annotations"].get(LAST_APPLIED).is_none());
    }
    assert_eq!(list["metadata"]["resourceVersion"], "7");
    let empty = redacted(
        json!({"kind": "SecretList", "apiVersion": "v1", "items": null}),
        Target::Secrets,
    );
    assert!(empty["items"].is_null());
}

#[test]
fn table_rows_lose_values_whether_they_carry_metadata_or_the_whole_object() {
    let metadata = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": db_credentials()["metadata"].clone()});
    let table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "columnDefinitions": [{"name": "Name"}],
        "rows": [{"cells": ["db"], "object": metadata}, {"cells": ["db"], "object": db_credentials()},
                 {"cells": ["none"]}]});
    let table = redacted(table, Target::Secrets);
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(
        rows[0]["object"]["metadata"]["annotations"],
        json!({"team": "<redacted, 8 bytes>"})
    );
    assert_eq!(rows[1]["object"]["data"]["password"], "<redacted, 15 bytes>");
    assert!(!serde_json::to_string(&table).unwrap().contains("s3cr3t"));
    assert_eq!(rows[2]["cells"], json!(["none"]));
}

#[test]
fn partial_object_metadata_and_its_list_lose_the_last_applied_annotation() {
    let one = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": db_credentials()["metadata"].clone()});
    assert_eq!(
        redacted(one.clone(), Target::Secrets)["metadata"]["annotations"],
        json!({"team": "<redacted, 8 bytes>"})
    );
    let list = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "items": [one]});
    assert_eq!(
        redacted(list, Target::Secrets)["items"][0]["metadata"]["annotations"],
        json!({"team": "<redacted, 8 bytes>"})
    );
}

#[test]
fn a_status_passes_unchanged() {
    let status =
        br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"NotFound","code":404}"#;
    assert_eq!(redact_json(status, Target::Secrets).unwrap(), None);
    assert_eq!(redact_json(status, Target::Token).unwrap(), None);
}

#[test]
fn a_token_request_loses_its_token_only() {
    let request = json!({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "spec": {"audiences": ["api"], "expirationSeconds": 3600},
        "status": {"token": "eyJhbGciOi.payload.sig", "expirationTimestamp": "2030-01-01T00:00:00Z"}});
    let request = redacted(request, Target::Token);
    assert_eq!(request["status"]["token"], "<redacted, 22 bytes>");
    assert_eq!(request["status"]["expirationTimestamp"], "2030-01-01T00:00:00Z");
    assert_eq!(request["spec"]["audiences"], json!(["api"]));
}

#[test]
fn malformed_or_unexpected_bodies_are_errors_never_passed() {
    let cases: &[&[u8]] = &[
        b"",
        b"{\"kind\":\"Secret\",\"data\":{\"a\":\"YQ==\"}",
        b"\x0a\x02v1\x12\x06Secret",
        b"[1,2]",
        br#"{"kind":"Secret","data":"YQ=="}"#,
        br#"{"kind":"Secret","data":{"a":1}}"#,
        br#"{"kind":"Secret","data":{"a":"not base64!"}}"#,
        br#"{"kind":"Secret","metadata":{"annotations":["x"]}}"#,
        br#"{"kind":"SecretList","items":{"a":{}}}"#,
        br#"{"kind":"SecretList","items":["x"]}"#,
        br#"{"kind":"Table","rows":[{"object":"x"}]}"#,
    ];
    for body in cases {
        assert!(
            redact_json(body, Target::Secrets).is_err(),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn error_messages_never_carry_the_body() {
    let error = redact_json(br#"{"kind":"Secret","data":{"a":"s3cr3t s3cr3t"}}"#, Target::Secrets).unwrap_err();
    assert!(!error.to_string().contains("s3cr3t"), "{error}");
    let error = redact_json(br#"{"data":{"a":"s3cr3t"}} s3cr3t"#, Target::Secrets).unwrap_err();
    assert!(!error.to_string().contains("s3cr3t"), "{error}");
}

#[test]
fn watch_events_are_redacted_and_errors_pass() {
    let event = serde_json::to_vec(&json!({"type": "MODIFIED", "object": db_credentials()})).unwrap();
    let out: Value = serde_json::from_slice(&redact_event(&event, Target::Secrets).unwrap().unwrap()).unwrap();
    assert_eq!(out["type"], "MODIFIED");
    assert_eq!(out["object"]["data"]["password"], "<redacted, 15 bytes>");
    let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"Secret","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
    let out: Value = serde_json::from_slice(&redact_event(bookmark, Target::Secrets).unwrap().unwrap()).unwrap();
    assert_eq!(out, serde_json::from_slice::<Value>(bookmark).unwrap());
    let error = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410,"reason":"Gone"}}"#;
    assert_eq!(redact_event(error, Target::Secrets).unwrap(), None);
    assert!(redact_event(br#"{"object":{}}"#, Target::Secrets).is_err());
}
