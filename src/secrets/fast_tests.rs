//! The fast redactor against the parsed one, on random Secret answers
//! written with keys in any order, spaces, escaped keys, keys twice, and
//! then often broken by one edit: whatever the fast one passes, the parsed
//! one passes too, as the same document.

use super::{document, event};
use crate::secrets::{parsed_event, parsed_json, Target, LAST_APPLIED};
use base64::Engine;
use proptest::prelude::*;
use serde_json::{json, Value};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z0-9 é\"\\\\/\n\t\u{1F600}]{0,10}".prop_map(Value::from),
    ]
}

/// Anything a Secret answer may carry where nothing is hidden.
fn anything() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A `data` value: base64 (padded or not), text that is not, null, or a
/// number.
fn data_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => prop::collection::vec(any::<u8>(), 0..40)
            .prop_map(|bytes| Value::from(base64::engine::general_purpose::STANDARD.encode(bytes))),
        4 => prop::collection::vec(any::<u8>(), 0..40)
            .prop_map(|bytes| Value::from(base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes))),
        1 => leaf(),
    ]
}

fn values(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop_oneof![
        16 => prop::collection::btree_map("[a-z.]{1,8}", value, 0..4)
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        1 => leaf(),
    ]
}

fn secret() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec!["", "", "Secret", "Secret", "PartialObjectMetadata", "ConfigMap"]);
    // Annotations hidden, removed and kept, with text values (or, rarely,
    // others, which are refused).
    let name = prop::sample::select(vec![
        LAST_APPLIED,
        "team",
        "kapp.k14s.io/original",
        "meta.helm.sh/release-name",
        "k8s.io/initial-events-end",
    ]);
    let named = |value: BoxedStrategy<Value>| {
        prop::collection::btree_map(name.clone(), value, 0..4)
            .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
    };
    let annotations = prop_oneof![
        8 => named("[a-zé\"\n]{0,10}".prop_map(Value::from).boxed()),
        1 => named(leaf().boxed()),
        1 => leaf(),
    ];
    let managed_fields = prop_oneof![2 => Just(None), 1 => anything().prop_map(Some)];
    let string_data = values("[a-zé\"\n]{0,10}".prop_map(Value::from));
    (
        kind,
        annotations,
        managed_fields,
        values(data_value()),
        string_data,
        anything(),
    )
        .prop_map(|(kind, annotations, managed_fields, data, string_data, extra)| {
            let mut secret = json!({"apiVersion": "v1", "type": "Opaque", "extra": extra,
                "metadata": {"name": "db", "annotations": annotations}, "data": data, "stringData": string_data});
            if let Some(fields) = managed_fields {
                secret["metadata"]["managedFields"] = fields;
            }
            if !kind.is_empty() {
                secret["kind"] = json!(kind);
            }
            secret
        })
}

/// A document of any kind a Secret answer may be, right or wrong.
fn answer() -> impl Strategy<Value = Value> {
    let kinds = prop::sample::select(vec![
        "SecretList",
        "List",
        "PartialObjectMetadataList",
        "Table",
        "Table",
        "Status",
    ]);
    let items = prop::collection::vec(prop_oneof![16 => secret(), 1 => leaf()], 0..4);
    let row = prop_oneof![
        6 => secret().prop_map(|object| json!({"cells": ["db", 1], "object": object})),
        1 => Just(json!({"cells": []})),
        1 => leaf(),
    ];
    let rows = prop::collection::vec(row, 0..3);
    prop_oneof![
        secret(),
        (kinds, items, rows, anything()).prop_map(|(kind, items, rows, metadata)| {
            let (key, value) = if kind == "Table" {
                ("rows", rows)
            } else {
                ("items", items)
            };
            json!({"kind": kind, "apiVersion": "v1", "metadata": metadata, key: value})
        }),
    ]
}

/// Write `value` as JSON, its keys shuffled, spaced, sometimes escaped or
/// written twice (the earlier one then holds something else).
fn write(value: &Value, seed: &mut u64, out: &mut String) {
    match value {
        Value::Object(map) => {
            // Sorted (as serde_json writes), `kind` first (as the API
            // server does), or shuffled.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            match next(seed) % 3 {
                0 => {}
                1 => entries.sort_by_key(|(key, _)| *key != "kind"),
                _ => {
                    for i in (1..entries.len()).rev() {
                        entries.swap(i, (next(seed) % (i as u64 + 1)) as usize);
                    }
                }
            }
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                let roll = next(seed) % 256;
                let key = match (roll, key.chars().next()) {
                    (0, Some(first)) => format!("\"\\u{:04x}{}\"", first as u32, &key[first.len_utf8()..]),
                    _ => serde_json::to_string(key).unwrap(),
                };
                if i > 0 {
                    out.push(',');
                }
                if roll == 1 {
                    let earlier =
                        [json!(null), json!("Secret"), json!({}), json!([])][(next(seed) % 4) as usize].clone();
                    out.push_str(&format!("{key}:{earlier},"));
                }
                out.push_str(if roll >= 224 { " \n" } else { "" });
                out.push_str(&key);
                out.push(':');
                write(value, seed, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(item, seed, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// xorshift64: the writer's choices, from the case's seed.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// One edit of the text (a quarter of the time), from `edit`.
fn break_it(mut bytes: Vec<u8>, edit: (u8, usize, u8)) -> Vec<u8> {
    let (kind, at, byte) = edit;
    let at = at % (bytes.len() + 1);
    let byte = b"{}[]\",:\\0e-n \x01"[byte as usize % 14];
    match kind % 12 {
        0 if at < bytes.len() => {
            bytes.remove(at);
        }
        1 => bytes.insert(at, byte),
        2 if at < bytes.len() => bytes[at] = byte,
        _ => {}
    }
    bytes
}

fn same(fast: Option<Vec<u8>>, parsed: Result<Option<Vec<u8>>, crate::secrets::RedactError>, input: &[u8]) {
    let Some(fast) = fast else { return };
    let shown = String::from_utf8_lossy(input);
    let parsed = match parsed {
        Ok(Some(parsed)) => parsed,
        other => panic!("the fast redactor passed what the parsed one did not ({other:?}): {shown}"),
    };
    let fast: Value = serde_json::from_slice(&fast).unwrap_or_else(|e| panic!("not JSON ({e}): {shown}"));
    let parsed = serde_json::from_slice::<Value>(&parsed).unwrap();
    if !alike(&fast, &parsed) {
        assert_eq!(fast, parsed, "{shown}");
    }
}

/// Equal, but for numbers, which are equal within a few units in the last
/// place: the fast redactor copies a number's text as it came, the parsed
/// one writes the f64 serde_json read, and serde_json's reading of a
/// mantissa longer than an f64 holds (`501492.360056623585`) is not
/// correctly rounded, so the two texts can read back one unit apart.
fn alike(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| alike(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| alike(v, w)))
        }
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn whatever_the_fast_redactor_passes_the_parsed_one_passes_alike(
        answer in answer(),
        seed in 1u64..,
        edit in (any::<u8>(), any::<usize>(), any::<u8>()),
        typed in any::<bool>(),
        as_event in any::<bool>(),
    ) {
        let target = if typed { Target::TypedSecrets } else { Target::Secrets };
        let mut text = String::new();
        let mut seed = seed;
        if as_event {
            write(&json!({"type": "MODIFIED", "object": answer}), &mut seed, &mut text);
            let line = break_it(text.into_bytes(), edit);
            same(event(&line, target), parsed_event(&line, target), &line);
        } else {
            write(&answer, &mut seed, &mut text);
            let body = break_it(text.into_bytes(), edit);
            same(document(&body, target), parsed_json(&body, target), &body);
        }
    }
}

#[test]
fn the_fast_redactor_takes_the_shapes_the_cluster_answers_with() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "db", "annotations": {LAST_APPLIED: "{}", "team": "shop"}},
        "data": {"password": "czNjcjN0", "empty": null}, "stringData": {"note": "h\u{e9}\"llo\n"}});
    let mut item = secret.clone();
    item.as_object_mut().unwrap().remove("kind");
    let answers = [
        secret.clone(),
        json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": [item, secret.clone()]}),
        json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "columnDefinitions": [],
            "rows": [{"cells": ["db"], "object": secret.clone()}, {"cells": ["none"]}]}),
    ];
    for answer in answers {
        for target in [Target::Secrets, Target::TypedSecrets] {
            let body = serde_json::to_vec(&answer).unwrap();
            let fast = document(&body, target).expect("the fast redactor takes it");
            same(Some(fast.clone()), parsed_json(&body, target), &body);
            assert!(!String::from_utf8_lossy(&fast).contains("czNjcjN0"));
            let line = serde_json::to_vec(&json!({"type": "ADDED", "object": answer})).unwrap();
            same(
                Some(event(&line, target).expect("and its event")),
                parsed_event(&line, target),
                &line,
            );
        }
    }
}
