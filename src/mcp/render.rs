//! Compact text for a model: an object is YAML without `managedFields` (a
//! list is a [`super::table::Table`]), and nothing is longer than the
//! response limit — a cut says so, and how to ask for less.

use serde_json::Value;

/// The largest tool result, in bytes of text.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

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
    let whole = text.len();
    cut_to(text, whole, MAX_RESULT_BYTES, advice)
}

/// [`cut`] for a text whose making stopped past the limit: `whole` is the
/// size it would have had, which the notice gives.
pub fn cut_made(text: String, whole: usize, advice: &str) -> String {
    cut_to(text, whole, MAX_RESULT_BYTES, advice)
}

fn cut_to(text: String, whole: usize, limit: usize, advice: &str) -> String {
    if text.len() <= limit {
        return text;
    }
    let notice = format!(
        "\n[cut: the result was {whole} bytes, more than the {} KiB a tool returns; {advice}]\n",
        limit / 1024
    );
    // Room for the line count the notice gains below.
    let end = crate::text::floor_char_boundary(&text, limit.saturating_sub(notice.len() + 32));
    let end = text[..end].rfind('\n').map_or(end, |i| i + 1);
    let shown = text[..end].lines().count();
    let mut out = text[..end].to_string();
    let lines = if shown == 1 { "line" } else { "lines" };
    out.push_str(&notice.replace("[cut:", &format!("[cut after {shown} {lines}:")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_lose_managed_fields() {
        let yaml =
            object_yaml(json!({"kind": "ConfigMap", "metadata": {"name": "x", "managedFields": [{"manager": "k"}]}}));
        assert!(yaml.contains("name: x") && !yaml.contains("managedFields"), "{yaml}");
    }

    #[test]
    fn a_long_result_is_cut_on_a_line_with_a_notice() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let cut = cut_to(text.clone(), text.len(), 300, "ask for less");
        assert!(cut.len() <= 300, "{}", cut.len());
        assert!(cut.starts_with("line 0\nline 1\n"));
        assert!(cut.contains("[cut after ") && cut.contains("ask for less]"), "{cut}");
        assert_eq!(cut_to("short".into(), 5, 300, "x"), "short");
    }
}
