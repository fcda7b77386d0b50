//! Bounded parsing of the YAML and JSON documents a client sends: an MCP
//! `apply` manifest, a held write's body, a JSON-RPC message.
//!
//! serde_yaml bounds how many alias jumps a document makes, not how much
//! each one expands: a 30 KB manifest whose anchor of 6,000 scalars is
//! referenced 6,000 times becomes 36 million values. So a YAML document's
//! events are scanned first, expanding nothing, and one with an anchor or an
//! alias is refused (Kubernetes objects never need them). Every document is
//! also held to a size and a nesting depth before anything is built from it.
//!
//! Each error's message completes a sentence whose subject the caller names
//! ("the manifest …", "the request body …").

use saphyr_parser::{Event, Parser};
use serde_json::Value;

/// The largest manifest accepted: an object Kubernetes stores is at most
/// about 1.5 MiB in etcd, and a manifest written by hand or by an agent is
/// far smaller.
pub const MAX_MANIFEST_BYTES: usize = 1024 * 1024;

/// The deepest nesting of mappings and sequences accepted. A Deployment
/// nests about 8 levels and a CustomResourceDefinition's schema rarely 40;
/// serde_json and serde_yaml both stop at 128, so 100 keeps portcullis's
/// own refusal, with its message, in front of theirs.
pub const MAX_DEPTH: usize = 100;

/// The most values (scalars, mappings and sequences) a document may hold.
/// Each takes tens of bytes once read, and serde_yaml holds every parser
/// event of a document before it builds anything, so a body of short
/// values (`[a,a,a,…]`) would take some 80 times its size. A large
/// CustomResourceDefinition holds tens of thousands.
pub const MAX_NODES: usize = 250_000;

/// The limits a document is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The largest size in bytes.
    pub max_bytes: usize,
    /// The deepest nesting of mappings and sequences (objects and arrays).
    pub max_depth: usize,
    /// The most values.
    pub max_nodes: usize,
}

impl Bounds {
    /// An MCP `apply` manifest.
    pub const MANIFEST: Bounds = Bounds {
        max_bytes: MAX_MANIFEST_BYTES,
        max_depth: MAX_DEPTH,
        max_nodes: MAX_NODES,
    };

    /// A request body already read under `max_bytes` (the configured request
    /// body limit): the depth and values are bounded as a manifest's are.
    pub fn body(max_bytes: usize) -> Bounds {
        Bounds {
            max_bytes,
            max_depth: MAX_DEPTH,
            max_nodes: MAX_NODES,
        }
    }
}

/// Why a client's document was refused.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// Over the size limit; nothing was parsed.
    #[error("is {size} bytes, over portcullis's limit of {limit}")]
    TooLarge {
        /// The document's size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Nested deeper than the limit; refused where the scan first went past it.
    #[error("nests mappings or sequences deeper than portcullis's limit of {limit} levels")]
    TooDeep {
        /// The limit in levels.
        limit: usize,
    },
    /// More values than the limit; refused where the scan counted past it.
    #[error("holds more than portcullis's limit of {limit} values")]
    TooManyNodes {
        /// The limit in values.
        limit: usize,
    },
    /// A YAML anchor (`&name`) or alias (`*name`, also in a merge key
    /// `<<: *name`); refused before anything is expanded.
    #[error("uses YAML anchors or aliases, which portcullis refuses: write the object out in full")]
    AnchorOrAlias,
    /// A YAML tag other than the core schema's (`!!binary`, `!custom`):
    /// portcullis and the API server's Go YAML library read them apart
    /// (Go decodes `!!binary`'s base64; Rust keeps the text).
    #[error("uses the YAML tag {0}, which portcullis refuses: write the value out plainly")]
    Tag(String),
    /// Not a YAML document (JSON is YAML).
    #[error("is not one YAML or JSON object: {0}")]
    NotYaml(String),
    /// Not a JSON document.
    #[error("is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
}

impl DocumentError {
    /// A short name of what happened, for audit rows and error codes.
    pub fn code(&self) -> &'static str {
        match self {
            DocumentError::TooLarge { .. } => "too_large",
            DocumentError::TooDeep { .. } => "too_deep",
            DocumentError::TooManyNodes { .. } => "too_many_nodes",
            DocumentError::AnchorOrAlias => "yaml_anchor_or_alias",
            DocumentError::Tag(_) => "yaml_tag",
            DocumentError::NotYaml(_) => "not_yaml",
            DocumentError::NotJson(_) => "not_json",
        }
    }

    /// The document is within bounds but malformed (as opposed to refused
    /// for its size, depth or aliases).
    pub fn is_malformed(&self) -> bool {
        matches!(self, DocumentError::NotYaml(_) | DocumentError::NotJson(_))
    }
}

/// A YAML (or JSON) document within `bounds`, with no anchor or alias.
pub fn parse_yaml(text: &str, bounds: Bounds) -> Result<Value, DocumentError> {
    check_size(text.len(), bounds)?;
    scan_yaml(text, bounds)?;
    serde_yaml::from_str(text).map_err(|e| DocumentError::NotYaml(e.to_string()))
}

/// A JSON document within `bounds`.
pub fn parse_json(bytes: &[u8], bounds: Bounds) -> Result<Value, DocumentError> {
    check_size(bytes.len(), bounds)?;
    scan_json(bytes, bounds)?;
    serde_json::from_slice(bytes).map_err(DocumentError::NotJson)
}

/// A JSON document, or else a YAML one, within `bounds`: JSON keeps JSON's
/// exact reading; anything else is read as YAML, anchors refused.
pub fn parse_json_or_yaml(bytes: &[u8], bounds: Bounds) -> Result<Value, DocumentError> {
    check_size(bytes.len(), bounds)?;
    // Syntax only: `IgnoredAny` builds nothing.
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        return parse_json(bytes, bounds);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| DocumentError::NotYaml(e.to_string()))?;
    parse_yaml(text, bounds)
}

fn check_size(size: usize, bounds: Bounds) -> Result<(), DocumentError> {
    match size > bounds.max_bytes {
        true => Err(DocumentError::TooLarge {
            size,
            limit: bounds.max_bytes,
        }),
        false => Ok(()),
    }
}

/// The core schema's tags (`!!str` and its kin), which both readers take
/// alike; any other is refused.
const CORE_TAGS: &[&str] = &["str", "int", "float", "bool", "null", "seq", "map"];

fn refuse_tag(tag: Option<&saphyr_parser::Tag>) -> Result<(), DocumentError> {
    match tag {
        None => Ok(()),
        Some(tag) if tag.is_yaml_core_schema() && CORE_TAGS.contains(&tag.suffix.as_str()) => Ok(()),
        Some(tag) => Err(DocumentError::Tag(format!("{}{}", tag.handle, tag.suffix))),
    }
}

/// Walk the document's YAML events (nothing is built or expanded): refuse
/// the first anchor or alias, tag outside the core schema, and level past
/// the depth limit.
fn scan_yaml(text: &str, bounds: Bounds) -> Result<(), DocumentError> {
    let (mut depth, mut nodes) = (0usize, 0usize);
    for event in Parser::new_from_str(text) {
        let (event, _) = event.map_err(|e| match e.info().contains("unknown anchor") {
            // An alias of an anchor that is not there (the parser names it
            // only so): the same advice as for one that is.
            true => DocumentError::AnchorOrAlias,
            false => DocumentError::NotYaml(e.to_string()),
        })?;
        let anchor = match event {
            Event::Alias(_) => return Err(DocumentError::AnchorOrAlias),
            Event::Scalar(_, _, anchor, tag) => {
                refuse_tag(tag.as_deref())?;
                nodes += 1;
                anchor
            }
            Event::MappingStart(anchor, tag) | Event::SequenceStart(anchor, tag) => {
                refuse_tag(tag.as_deref())?;
                depth += 1;
                nodes += 1;
                anchor
            }
            Event::MappingEnd | Event::SequenceEnd => {
                depth = depth.saturating_sub(1);
                0
            }
            _ => 0,
        };
        // Anchor ids start at 1; 0 is "no anchor".
        if anchor != 0 {
            return Err(DocumentError::AnchorOrAlias);
        }
        if depth > bounds.max_depth {
            return Err(DocumentError::TooDeep {
                limit: bounds.max_depth,
            });
        }
        if nodes > bounds.max_nodes {
            return Err(DocumentError::TooManyNodes {
                limit: bounds.max_nodes,
            });
        }
    }
    Ok(())
}

/// Refuse JSON text that nests objects and arrays deeper than the limit,
/// or holds more values (keys count, as in YAML's events): exact for valid
/// JSON (brackets, commas and colons inside strings do not count);
/// whatever it says of invalid JSON, serde_json refuses that next.
fn scan_json(bytes: &[u8], bounds: Bounds) -> Result<(), DocumentError> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    // The document itself, and each container's first value.
    let mut nodes = 1usize;
    let mut opened = false;
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        if opened && !byte.is_ascii_whitespace() {
            opened = false;
            if byte != b'}' && byte != b']' {
                nodes += 1;
            }
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                opened = true;
                if depth > bounds.max_depth {
                    return Err(DocumentError::TooDeep {
                        limit: bounds.max_depth,
                    });
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            // Each value but a container's first follows a comma; each
            // object value, a colon (its key is counted as YAML counts it).
            b',' | b':' => nodes += 1,
            _ => {}
        }
        if nodes > bounds.max_nodes {
            return Err(DocumentError::TooManyNodes {
                limit: bounds.max_nodes,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: nginx:1.27
          args: [\"--schedule\", \"*/5 * * * *\"]
          command:
            - sh
            - -c
            - echo a && echo b *
          ports:
            - containerPort: 80
";

    fn yaml(text: &str) -> Result<Value, DocumentError> {
        parse_yaml(text, Bounds::MANIFEST)
    }

    /// `levels` nested block mappings.
    fn nested_yaml(levels: usize) -> String {
        (0..levels)
            .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
            .collect::<String>()
            + &"  ".repeat(levels)
            + "x"
    }

    /// `levels` nested JSON arrays.
    fn nested_json(levels: usize) -> String {
        "[".repeat(levels) + &"]".repeat(levels)
    }

    #[test]
    fn a_deployment_manifest_with_stars_and_ampersands_in_its_strings_passes() {
        let value = yaml(DEPLOYMENT).unwrap();
        assert_eq!(
            value["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
            80
        );
        assert_eq!(
            value["spec"]["template"]["spec"]["containers"][0]["args"][1],
            "*/5 * * * *"
        );
    }

    #[test]
    fn a_json_manifest_passes_whichever_way_it_is_read() {
        let text = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"[[{{\"&x *y"}}"#;
        let json = parse_json(text.as_bytes(), Bounds::MANIFEST).unwrap();
        assert_eq!(json["data"]["k"], "[[{{\"&x *y");
        assert_eq!(yaml(text).unwrap(), json);
        assert_eq!(parse_json_or_yaml(text.as_bytes(), Bounds::MANIFEST).unwrap(), json);
        assert_eq!(
            parse_json_or_yaml(DEPLOYMENT.as_bytes(), Bounds::MANIFEST).unwrap(),
            yaml(DEPLOYMENT).unwrap()
        );
    }

    #[test]
    fn an_anchor_is_refused_even_when_nothing_refers_to_it() {
        for text in ["a: &x 1\n", "a: &x {b: 1}\n", "a: &x\n  - 1\n", "&x a: 1\n"] {
            assert!(matches!(yaml(text), Err(DocumentError::AnchorOrAlias)), "{text}");
        }
    }

    #[test]
    fn an_alias_is_refused_with_or_without_its_anchor() {
        for text in ["a: &x 1\nb: *x\n", "b: *x\n", "list: [*x]\n"] {
            assert!(matches!(yaml(text), Err(DocumentError::AnchorOrAlias)), "{text}");
        }
    }

    /// Go's YAML library decodes `!!binary`'s base64 where serde_yaml keeps
    /// the text: `name: !!binary dXNlcjphbmE=` is `user:ana` to the API
    /// server and not to portcullis. Only the core schema's tags pass.
    #[test]
    fn a_tag_outside_the_core_schema_is_refused_and_core_ones_pass() {
        for text in [
            "name: !!binary dXNlcjphbmE=\n",
            "name: !custom x\n",
            "name: !<tag:yaml.org,2002:binary> dXNlcjphbmE=\n",
            "list: !!set {a: null}\n",
            "%TAG !! tag:example.com,2000:\n---\nname: !!str x\n",
        ] {
            assert!(
                matches!(yaml(text), Err(DocumentError::Tag(_))),
                "{text}: {:?}",
                yaml(text)
            );
        }
        let value = yaml("name: !!str 123\nreplicas: !!int 3\nlabels: !!map {a: b}\n").unwrap();
        assert_eq!(value["name"], "123");
        assert_eq!(value["replicas"], 3);
    }

    #[test]
    fn a_merge_key_is_refused() {
        let text = "base: &base {a: 1}\nderived:\n  <<: *base\n  b: 2\n";
        assert!(matches!(yaml(text), Err(DocumentError::AnchorOrAlias)));
        let dangling = "derived:\n  <<: *base\n  b: 2\n";
        assert!(matches!(yaml(dangling), Err(DocumentError::AnchorOrAlias)));
    }

    #[test]
    fn the_alias_bomb_is_refused_without_being_expanded() {
        let scalars = vec!["x"; 6000].join(",");
        let refs = vec!["*a"; 6000].join(",");
        let bomb = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b}}\nx: &a [{scalars}]\ny: [{refs}]\n");
        let error = yaml(&bomb).unwrap_err();
        assert!(matches!(error, DocumentError::AnchorOrAlias), "{error}");
        assert_eq!(
            error.to_string(),
            "uses YAML anchors or aliases, which portcullis refuses: write the object out in full"
        );
    }

    #[test]
    fn a_document_nested_past_the_limit_is_refused_and_one_at_it_passes() {
        assert!(yaml(&nested_yaml(MAX_DEPTH)).is_ok());
        assert!(matches!(
            yaml(&nested_yaml(MAX_DEPTH + 1)),
            Err(DocumentError::TooDeep { limit: MAX_DEPTH })
        ));
        let flow = nested_json(MAX_DEPTH + 1);
        assert!(matches!(yaml(&flow), Err(DocumentError::TooDeep { .. })));
        assert!(parse_json(nested_json(MAX_DEPTH).as_bytes(), Bounds::MANIFEST).is_ok());
        assert!(matches!(
            parse_json(flow.as_bytes(), Bounds::MANIFEST),
            Err(DocumentError::TooDeep { limit: MAX_DEPTH })
        ));
        // Past serde_json's own 128: still our refusal, not a syntax error.
        let deeper = nested_json(200);
        assert!(matches!(
            parse_json_or_yaml(deeper.as_bytes(), Bounds::MANIFEST),
            Err(DocumentError::TooDeep { .. })
        ));
    }

    #[test]
    fn brackets_inside_json_strings_do_not_count_as_depth() {
        let text = format!(r#"{{"a":"{}\"{}"}}"#, "[".repeat(500), "{".repeat(500));
        assert!(parse_json(text.as_bytes(), Bounds::MANIFEST).is_ok());
    }

    #[test]
    fn a_document_over_the_size_limit_is_refused_before_it_is_read() {
        let big = format!("a: \"{}\"\n", "x".repeat(MAX_MANIFEST_BYTES));
        let error = yaml(&big).unwrap_err();
        assert!(
            matches!(error, DocumentError::TooLarge { size, limit: MAX_MANIFEST_BYTES } if size == big.len()),
            "{error}"
        );
        assert!(matches!(
            parse_json_or_yaml(big.as_bytes(), Bounds::MANIFEST),
            Err(DocumentError::TooLarge { .. })
        ));
        assert!(parse_json_or_yaml(big.as_bytes(), Bounds::body(2 * MAX_MANIFEST_BYTES)).is_ok());
    }

    #[test]
    fn malformed_documents_are_told_apart_from_refused_ones() {
        let error = yaml("a: [1\n").unwrap_err();
        assert!(error.is_malformed() && error.code() == "not_yaml", "{error}");
        let error = parse_json(b"{", Bounds::MANIFEST).unwrap_err();
        assert!(error.is_malformed() && error.code() == "not_json", "{error}");
        assert!(!DocumentError::AnchorOrAlias.is_malformed());
    }

    /// `[a,a,…]`: short values a body holds many of, each tens of bytes
    /// once read (and serde_yaml holds an event for each first).
    #[test]
    fn a_document_of_more_values_than_the_limit_is_refused_before_it_is_read() {
        let bounds = Bounds {
            max_nodes: 1000,
            ..Bounds::body(1 << 20)
        };
        let list = |n: usize, comment: &str| format!("[{}]{comment}", vec!["1"; n].join(","));
        // The list and each of its items.
        for (text, reader) in [(list(999, ""), "json"), (list(999, " #yaml"), "yaml")] {
            assert!(parse_json_or_yaml(text.as_bytes(), bounds).is_ok(), "{reader}");
        }
        for (text, reader) in [(list(1000, ""), "json"), (list(1000, " #yaml"), "yaml")] {
            let refused = parse_json_or_yaml(text.as_bytes(), bounds).unwrap_err();
            assert!(
                matches!(refused, DocumentError::TooManyNodes { limit: 1000 }),
                "{reader}: {refused:?}"
            );
            assert_eq!(refused.to_string(), "holds more than portcullis's limit of 1000 values");
        }
        // Keys and values of objects count alike in both readers; brackets
        // and commas inside strings do not.
        let object = r#"{"a": "[,,,]", "b": {"c": [1, {}], "d": []}}"#;
        let counted = |max_nodes| {
            let bounds = Bounds { max_nodes, ..bounds };
            (
                parse_json(object.as_bytes(), bounds).is_ok(),
                parse_yaml(object, bounds).is_ok(),
            )
        };
        assert_eq!(counted(11), (true, true));
        assert_eq!(counted(10), (false, false));
    }
}
