//! Arguments that do not deserialize into a tool's arguments (a string
//! where a number goes, a required one left out). rmcp answers them with a
//! tool error of its own, `failed to deserialize parameters: …` as text
//! and no structure; MCP.md's is `tool.invalid_argument` with the argument
//! named in `params`, as every other bad argument is, so that clients never
//! parse prose.

use super::error::ToolError;
use rmcp::model::{CallToolResponse, JsonObject};
use serde_json::Value;

/// What rmcp's own tool error for arguments that do not deserialize begins
/// with.
const RMCP_PREFIX: &str = "failed to deserialize parameters:";

/// What of the arguments given is kept to name the one that did not fit:
/// each one's JSON type, and its value when a number (a manifest's text is
/// not copied for each call).
pub fn shapes(given: Option<&JsonObject>) -> JsonObject {
    given
        .into_iter()
        .flatten()
        .map(|(name, value)| {
            let shape = match value {
                Value::String(_) => Value::String(String::new()),
                Value::Array(_) => Value::Array(Vec::new()),
                Value::Object(_) => Value::Object(JsonObject::new()),
                other => other.clone(),
            };
            (name.clone(), shape)
        })
        .collect()
}

/// `response`, or, when it is rmcp's error for arguments that did not
/// deserialize, the `tool.invalid_argument` error naming the argument
/// (found from serde's message, else by `schema`, the tool's input schema,
/// against the `given` arguments' [`shapes`]).
pub fn invalid(response: CallToolResponse, schema: Option<&JsonObject>, given: &JsonObject) -> CallToolResponse {
    let CallToolResponse::Complete(result) = &response else {
        return response;
    };
    if result.is_error != Some(true) || result.structured_content.is_some() {
        return response;
    }
    let Some(why) = result
        .content
        .first()
        .and_then(|content| content.as_text())
        .and_then(|text| text.text.strip_prefix(RMCP_PREFIX))
    else {
        return response;
    };
    let why = why.trim();
    let argument = misfit(schema, given, why);
    let message = format!("argument {argument}: {why}; the tool's input schema says what each argument takes");
    ToolError::InvalidArgument {
        argument: argument.into(),
        message,
    }
    .into_result()
    .into()
}

/// The argument `why` is about: the field serde names, else the first
/// given whose type the schema does not take, else `arguments`.
fn misfit(schema: Option<&JsonObject>, given: &JsonObject, why: &str) -> String {
    // Only at the start: a value quoted later in the message is the
    // caller's, which may say anything.
    for marker in ["missing field `", "unknown field `"] {
        if let Some(name) = why.strip_prefix(marker).and_then(|rest| rest.split('`').next()) {
            return name.to_string();
        }
    }
    let properties = schema
        .and_then(|schema| schema.get("properties"))
        .and_then(Value::as_object);
    given
        .iter()
        .find(|(name, value)| {
            properties
                .and_then(|properties| properties.get(name.as_str()))
                .is_some_and(|property| !fits(property, value))
        })
        .map_or_else(|| "arguments".into(), |(name, _)| name.clone())
}

/// Does `value` have a type `property` (a JSON Schema as schemars writes
/// an argument's) takes?
fn fits(property: &Value, value: &Value) -> bool {
    let types: Vec<&str> = match &property["type"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(several) => several.iter().filter_map(Value::as_str).collect(),
        _ => return true,
    };
    types.iter().any(|kind| match *kind {
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "integer" => match property["format"].as_str() {
            Some("uint32") => value.as_u64().is_some_and(|n| u32::try_from(n).is_ok()),
            Some("uint64" | "uint") => value.is_u64(),
            Some("int32") => value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
            _ => value.is_i64() || value.is_u64(),
        },
        "number" => value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ContentBlock};
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().unwrap().clone()
    }

    fn rmcp_error(why: &str) -> CallToolResponse {
        CallToolResult::error(vec![ContentBlock::text(format!("{RMCP_PREFIX} {why}"))]).into()
    }

    fn structured(response: CallToolResponse) -> Value {
        let CallToolResponse::Complete(result) = response else {
            panic!("not a result")
        };
        assert_eq!(result.is_error, Some(true));
        result.structured_content.expect("structured")
    }

    #[test]
    fn rmcp_s_error_becomes_invalid_argument_naming_the_argument_that_does_not_fit() {
        let schema = object(json!({"properties": {
            "cluster": {"type": "string"},
            "replicas": {"type": "integer", "format": "uint32", "minimum": 0},
            "tail_lines": {"type": ["integer", "null"], "format": "uint32"},
            "previous": {"type": ["boolean", "null"]},
        }}));
        let cases = [
            (
                json!({"cluster": "c", "replicas": "3"}),
                "invalid type: string \"\", expected u32",
                "replicas",
            ),
            (
                json!({"cluster": "c", "replicas": -1}),
                "invalid value: integer `-1`, expected u32",
                "replicas",
            ),
            (
                json!({"cluster": "c", "tail_lines": 1.5}),
                "invalid type: floating point `1.5`, expected u32",
                "tail_lines",
            ),
            (
                json!({"cluster": 7, "previous": true}),
                "invalid type: integer `7`, expected a string",
                "cluster",
            ),
            (json!({"cluster": "c"}), "missing field `namespace`", "namespace"),
            (
                json!({"cluster": "c", "tail_lines": null}),
                "something else",
                "arguments",
            ),
        ];
        for (given, why, argument) in cases {
            let given = shapes(Some(&object(given)));
            let out = structured(invalid(rmcp_error(why), Some(&schema), &given));
            assert_eq!(out["code"], "tool.invalid_argument", "{why}");
            assert_eq!(out["params"]["argument"], argument, "{why}");
            assert!(out["error"].as_str().unwrap().contains(why), "{out}");
        }
    }

    #[test]
    fn other_results_pass_as_they_are_and_shapes_keep_no_text() {
        let ours = ToolError::invalid("limit", "limit must be 1 to 500").into_result();
        let fine = CallToolResult::error(vec![ContentBlock::text("403 Forbidden: no")]);
        for result in [ours, fine] {
            let CallToolResponse::Complete(passed) = invalid(result.clone().into(), None, &JsonObject::new()) else {
                panic!("not a result")
            };
            assert_eq!(passed, result);
        }
        let shaped = shapes(Some(&object(json!({"manifest": "kind: Secret", "n": 2, "l": [1]}))));
        assert_eq!(Value::Object(shaped), json!({"manifest": "", "n": 2, "l": []}));
    }
}
