//! Compact text for a model: a list is one line per object with the columns
//! the cluster's Table gives (and the continue token), an object is YAML
//! without `managedFields`, and nothing is longer than the response limit —
//! a cut says so, and how to ask for less.

use serde_json::Value;

/// The largest tool result, in bytes of text.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

/// A cluster `Table` (`meta.k8s.io/v1`) as lines: a header with the
/// columns the cluster shows by default (priority 0), `NAMESPACE` first when
/// rows come from several namespaces, one line per row, then the continue
/// token and the count of the rest. `what` names the objects for an empty
/// answer (`pods in shop`).
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

/// An object as YAML, without `metadata.managedFields` (noise for a model).
pub fn object_yaml(mut object: Value) -> String {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    serde_yaml::to_string(&object).unwrap_or_else(|_| object.to_string())
}

/// `text` cut to [`MAX_RESULT_BYTES`] on a line boundary, with a notice
/// saying so and `advice` on asking for less.
pub fn cut(text: String, advice: &str) -> String {
    cut_to(text, MAX_RESULT_BYTES, advice)
}

fn cut_to(text: String, limit: usize, advice: &str) -> String {
    if text.len() <= limit {
        return text;
    }
    let notice = format!(
        "\n[cut: the result was {} bytes, more than the {} KiB a tool returns; {advice}]\n",
        text.len(),
        limit / 1024
    );
    // Room for the line count the notice gains below.
    let mut end = limit.saturating_sub(notice.len() + 32);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let end = text[..end].rfind('\n').map_or(end, |i| i + 1);
    let shown = text[..end].lines().count();
    let mut out = text[..end].to_string();
    out.push_str(&notice.replace("[cut:", &format!("[cut after {shown} lines:")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            table(&document, "pods"),
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
            table(&document, "pods"),
            "NAMESPACE  NAME\nshop       a\npayments   b\n"
        );
        assert_eq!(table(&json!({"rows": []}), "pods in shop"), "No pods in shop found.\n");
    }

    #[test]
    fn objects_lose_managed_fields() {
        let yaml =
            object_yaml(json!({"kind": "ConfigMap", "metadata": {"name": "x", "managedFields": [{"manager": "k"}]}}));
        assert!(yaml.contains("name: x") && !yaml.contains("managedFields"), "{yaml}");
    }

    #[test]
    fn a_long_result_is_cut_on_a_line_with_a_notice() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let cut = cut_to(text.clone(), 300, "ask for less");
        assert!(cut.len() <= 300, "{}", cut.len());
        assert!(cut.starts_with("line 0\nline 1\n"));
        assert!(cut.contains("[cut after ") && cut.contains("ask for less]"), "{cut}");
        assert_eq!(cut_to("short".into(), 300, "x"), "short");
    }
}
