use super::*;
use portcullis_sim::table::{table_at, IncludeObject};
use serde_json::json;
use std::sync::Arc;

fn lenient(document: &Value, what: &str) -> String {
    Table::from_value(document).render(what).0
}

/// The typed read of `body` was taken, and gives what the lenient reading
/// of the whole document gives.
fn assert_typed_reads_as_lenient(body: &str) {
    let document = serde_json::from_str(body).unwrap();
    let lenient = Table::from_value(&document);
    let typed = typed(body.as_bytes()).unwrap_or_else(|| panic!("the typed read refused {body}"));
    assert_eq!(typed, lenient, "{body}");
    assert_eq!(typed.render("pods").0, former::table(&document, "pods"), "{body}");
}

/// The text as it was made before the typed read: the whole answer as a
/// `Value`, looked at field by field.
mod former {
    use serde_json::Value;

    pub fn table(document: &Value, what: &str) -> String {
        let columns: Vec<(usize, String)> = document["columnDefinitions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, c)| c["priority"].as_i64().unwrap_or(0) == 0)
            .map(|(i, c)| (i, c["name"].as_str().unwrap_or_default().to_ascii_uppercase()))
            .collect();
        let rows = document["rows"].as_array().map(Vec::as_slice).unwrap_or_default();
        let namespaces: Vec<&str> = rows
            .iter()
            .map(|r| r["object"]["metadata"]["namespace"].as_str().unwrap_or_default())
            .collect();
        let several = namespaces.iter().any(|ns| *ns != namespaces[0]);
        let mut lines: Vec<Vec<String>> = Vec::with_capacity(rows.len() + 1);
        let mut header: Vec<String> = columns.iter().map(|(_, name)| name.clone()).collect();
        if several {
            header.insert(0, "NAMESPACE".into());
        }
        lines.push(header);
        for (row, namespace) in rows.iter().zip(&namespaces) {
            let cells = row["cells"].as_array().map(Vec::as_slice).unwrap_or_default();
            let mut line: Vec<String> = columns.iter().map(|(i, _)| cell(cells.get(*i))).collect();
            if several {
                line.insert(0, namespace.to_string());
            }
            lines.push(line);
        }
        let mut text = if rows.is_empty() {
            format!("No {what} found.\n")
        } else {
            aligned(&lines)
        };
        let metadata = &document["metadata"];
        if let Some(token) = metadata["continue"].as_str().filter(|t| !t.is_empty()) {
            let rest = metadata["remainingItemCount"]
                .as_u64()
                .map(|n| format!(" ({n} more)"))
                .unwrap_or_default();
            text.push_str(&format!("continue: {token}{rest}\n"));
        }
        text
    }

    fn cell(value: Option<&Value>) -> String {
        match value {
            None | Some(Value::Null) => "<none>".into(),
            Some(Value::String(s)) if s.is_empty() => "<none>".into(),
            Some(Value::String(s)) => s.replace(['\n', '\r', '\t'], " "),
            Some(other) => other.to_string(),
        }
    }

    fn aligned(lines: &[Vec<String>]) -> String {
        let count = lines.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..count)
            .map(|i| {
                lines
                    .iter()
                    .filter_map(|l| l.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut text = String::new();
        for line in lines {
            let last = line.len().saturating_sub(1);
            for (i, cell) in line.iter().enumerate() {
                text.push_str(cell);
                if i != last {
                    text.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
                }
            }
            text.push('\n');
        }
        text
    }
}

#[test]
fn a_table_is_one_aligned_line_per_row_with_the_continue_token() {
    let document = json!({
        "metadata": {"continue": "abc", "remainingItemCount": 3},
        "columnDefinitions": [{"name": "Name", "priority": 0}, {"name": "Ready", "priority": 0}, {"name": "IP", "priority": 1}],
        "rows": [
            {"cells": ["web-1", "1/1", "10.0.0.1"], "object": {"metadata": {"namespace": "shop"}}},
            {"cells": ["db", "0/1", "10.0.0.2"], "object": {"metadata": {"namespace": "shop"}}}
        ]
    });
    assert_eq!(
        lenient(&document, "pods"),
        "NAME   READY\nweb-1  1/1\ndb     0/1\ncontinue: abc (3 more)\n"
    );
}

#[test]
fn rows_from_several_namespaces_name_theirs_and_an_empty_list_says_so() {
    let document = json!({
        "columnDefinitions": [{"name": "Name", "priority": 0}],
        "rows": [
            {"cells": ["a"], "object": {"metadata": {"namespace": "shop"}}},
            {"cells": ["b"], "object": {"metadata": {"namespace": "payments"}}}
        ]
    });
    assert_eq!(
        lenient(&document, "pods"),
        "NAMESPACE  NAME\nshop       a\npayments   b\n"
    );
    assert_eq!(
        lenient(&json!({"rows": []}), "pods in shop"),
        "No pods in shop found.\n"
    );
}

#[test]
fn cells_of_every_json_type_align_by_characters_and_missing_ones_show_none() {
    let document = json!({
        "columnDefinitions": [{"name": "Name"}, {"name": "Data", "priority": null}, {"name": "x", "priority": 0}],
        "rows": [
            {"cells": ["café", 3, {"a": [1]}]},
            {"cells": ["two\nlines\tand\rtab", "", null]},
            {"cells": [true, 1.5]},
            {"object": null}
        ]
    });
    assert_eq!(
        lenient(&document, "pods"),
        "NAME               DATA    X\n\
         café               3       {\"a\":[1]}\n\
         two lines and tab  <none>  <none>\n\
         true               1.5     <none>\n\
         <none>             <none>  <none>\n"
    );
}

#[test]
fn a_wide_cell_is_shown_cut_and_does_not_widen_every_row_past_the_limit() {
    // An Event's reason of 1 MiB in the middle column of 500 rows: padded
    // into every row it would be 500 MiB of text.
    let wide = "é".repeat(1024 * 1024);
    let rows: Vec<Value> = (0..500)
        .map(|i| {
            let reason = if i == 0 { wide.as_str() } else { "Pulled" };
            json!({"cells": [format!("e{i}"), reason, "ok"]})
        })
        .collect();
    let document = json!({
        "columnDefinitions": [{"name": "Name"}, {"name": "Rea\nson"}, {"name": "m".repeat(100_000)}],
        "rows": rows,
    });
    let (text, whole) = Table::from_value(&document).render("events");
    let header = text.lines().next().unwrap();
    assert!(
        header.starts_with("NAME  REA SON  "),
        "a column's name is on one line: {header}"
    );
    assert!(
        header.ends_with(&format!("{}…", "M".repeat(MAX_CELL_CHARS - 1))),
        "a column's name is cut too"
    );
    let first = text.lines().nth(1).unwrap();
    assert_eq!(
        first,
        format!("e0    {}…  ok", "é".repeat(MAX_CELL_CHARS - 1)),
        "the wide cell shows its first characters and says it goes on"
    );
    assert_eq!(text.len(), whole, "under the limit, every line is made");
    assert!(whole < 500 * (MAX_CELL_CHARS * 2 + 16), "{whole}");
}

#[test]
fn lines_past_the_result_limit_are_counted_not_made_and_the_cut_gives_the_whole_size() {
    // Three full-width cells a row: 500 rows are some 385 KiB of text,
    // more than a tool returns.
    let cell = "x".repeat(MAX_CELL_CHARS);
    let rows: Vec<Value> = (0..500).map(|_| json!({"cells": [cell, cell, cell]})).collect();
    let document = json!({
        "metadata": {"continue": "next", "remainingItemCount": 9},
        "columnDefinitions": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
        "rows": rows,
    });
    let every_line = former::table(&document, "things");
    let (text, whole) = Table::from_value(&document).render("things");
    assert_eq!(whole, every_line.len(), "the whole is counted as if made");
    assert!(every_line.starts_with(&text), "the lines made are the first ones");
    let line = MAX_CELL_CHARS * 3 + 5;
    assert!(
        text.len() > super::super::render::MAX_RESULT_BYTES
            && text.len() <= super::super::render::MAX_RESULT_BYTES + line,
        "making stops a line past the limit: {}",
        text.len()
    );
    let body = serde_json::to_vec(&document).unwrap();
    let cut = text_of(&body);
    assert!(cut.len() <= super::super::render::MAX_RESULT_BYTES, "{}", cut.len());
    assert!(
        cut.contains(&format!("the result was {} bytes", every_line.len())),
        "the notice gives the size of the whole: {}",
        &cut[cut.len() - 200..]
    );
}

fn text_of(body: &[u8]) -> String {
    text(body, "things", "ask for less").unwrap()
}

#[test]
fn the_typed_read_gives_what_the_whole_document_gives_on_every_shape_it_takes() {
    for body in [
        r#"{"kind":"Table","metadata":{"continue":"a\"b","remainingItemCount":7},"columnDefinitions":[{"name":"Name","type":"string","priority":0},{"name":"Ready","priority":0},{"name":"IP","priority":1},{"priority":0},{"name":null}],"rows":[{"cells":["w\u00e9b","1/1","10.0.0.1"],"object":{"kind":"PartialObjectMetadata","metadata":{"name":"w","namespace":"shop","labels":{"a":"b"},"managedFields":[{"manager":"k","fieldsV1":{"f:x":{}}}]}}},{"cells":["db",null,2,true,{"x":[1,2.5]}],"object":null}]}"#,
        r#"{"metadata":{"continue":""},"rows":[{"cells":[],"object":{}},{"object":{"metadata":{}}},{"cells":null,"object":{"metadata":null}},{}]}"#,
        r#"{"metadata":{"remainingItemCount":3},"columnDefinitions":null,"rows":null}"#,
        r#"{"columnDefinitions":[{"name":"Name","priority":0}],"rows":[{"cells":["a"],"object":{"metadata":{"namespace":"x"}}},{"cells":["b"],"object":{"metadata":{"namespace":"y"}}}]}"#,
        r#"{"metadata":null,"rows":[]}"#,
        r#"{}"#,
        r#"{"columnDefinitions":[{"name":"A","priority":1}],"rows":[{"cells":[1]},{"cells":[2]}]}"#,
        r#"{"rows":[{"object":{"metadata":{"namespace":"a"}}},{"object":{"metadata":{"namespace":"b\u00e9"}}}]}"#,
    ] {
        assert_typed_reads_as_lenient(body);
    }
}

#[test]
fn a_body_of_another_shape_is_read_whole_and_leniently() {
    for body in [
        // A row as an array: a derived struct would read it by position.
        r#"{"columnDefinitions":[{"name":"Name"}],"rows":[[["x"],{"metadata":{"namespace":"a"}}],{"cells":["y"]}]}"#,
        r#"{"columnDefinitions":[["Name",0]],"rows":[{"cells":["x"]}]}"#,
        r#"{"columnDefinitions":{"name":"Name"},"rows":[{"cells":["x"]}]}"#,
        r#"{"columnDefinitions":[{"name":"A","priority":"1"},{"name":"B","priority":1.0},{"name":7}],"rows":[{"cells":[1,2,3]}]}"#,
        r#"{"columnDefinitions":[{"name":"A"}],"rows":[{"cells":"x"},{"cells":[1],"object":"pod"},{"cells":[2],"object":{"metadata":{"namespace":5}}}]}"#,
        r#"{"metadata":{"continue":5,"remainingItemCount":-1},"rows":[{"cells":[1]}],"columnDefinitions":[{"name":"A"}]}"#,
        r#"{"metadata":{"continue":"t","remainingItemCount":2.5},"rows":[{"cells":[1]}],"columnDefinitions":[{"name":"A"}]}"#,
        r#"{"metadata":"x","rows":[7]}"#,
        r#"{"rows":[{"cells":["a"]}],"columnDefinitions":[{"name":"A"}],"rows":[{"cells":["b"]}]}"#,
        r#"[{"rows":[]}]"#,
        r#"null"#,
        r#""text""#,
    ] {
        assert!(typed(body.as_bytes()).is_none(), "the typed read took {body}");
        let former = former::table(&serde_json::from_str(body).unwrap(), "pods");
        assert_eq!(text(body.as_bytes(), "pods", "x").unwrap(), former, "{body}");
    }
}

#[test]
fn a_body_that_is_not_json_is_refused_even_where_the_typed_read_skips() {
    let mut bad_utf8 = br#"{"rows":[{"cells":["a"],"object":{"metadata":{"labels":{"x":"#.to_vec();
    bad_utf8.extend_from_slice(b"\"\xff\xfe\"}}}}]}");
    for body in [&b"{\"rows\": ["[..], b"<html>502</html>", &bad_utf8] {
        let error = text(body, "pods", "x").unwrap_err();
        assert!(
            matches!(
                error,
                ToolError::Refused {
                    code: "cluster.invalid_response",
                    ..
                }
            ),
            "{error:?}"
        );
    }
}

/// Every kind the simulated cluster serves, listed from the demo seed as
/// kube-apiserver's Tables, with and without the rows' objects.
#[test]
fn the_typed_read_gives_the_former_text_for_every_seeded_kind_s_table() {
    let now = chrono::Utc::now();
    let objects = portcullis_sim::seed::demo_objects();
    let mut tables = 0;
    for resource in portcullis_sim::registry::RESOURCES {
        let of_kind: Vec<Arc<Value>> = objects
            .iter()
            .filter(|o| o["kind"] == resource.kind && o["apiVersion"] == resource.api_version().as_str())
            .cloned()
            .map(Arc::new)
            .collect();
        if of_kind.is_empty() {
            continue;
        }
        for include in [IncludeObject::Metadata, IncludeObject::None, IncludeObject::Object] {
            let table = table_at(
                resource,
                &of_kind,
                include,
                json!({"continue": "c", "remainingItemCount": 1}),
                now,
            );
            assert_typed_reads_as_lenient(&table.to_string());
            tables += 1;
        }
    }
    assert!(tables >= 30, "only {tables} Tables: the seed lost its kinds");
}

/// An aggregated API may ignore `as=Table` and answer its list: its
/// objects are listed by name, not reported as none found.
#[test]
fn a_list_answered_as_a_plain_list_names_its_objects() {
    let list = json!({
        "kind": "FooList", "apiVersion": "example.com/v1",
        "metadata": {"continue": "x"},
        "items": [
            {"metadata": {"name": "a", "namespace": "shop"}},
            {"metadata": {"name": "b", "namespace": "lab"}},
        ],
    });
    let shown = text(list.to_string().as_bytes(), "foos", "narrow").unwrap();
    assert!(!shown.contains("No foos found"), "{shown}");
    let lines: Vec<&str> = shown.lines().map(str::trim_end).collect();
    assert_eq!(
        lines,
        ["NAMESPACE  NAME", "shop       a", "lab        b", "continue: x"],
        "{shown}"
    );
    let empty = json!({"kind": "FooList", "metadata": {}, "items": []});
    assert_eq!(
        text(empty.to_string().as_bytes(), "foos", "narrow").unwrap(),
        "No foos found.\n"
    );
}
