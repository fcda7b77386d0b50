//! Label and field selectors, as `labels.Parse` and `fields.ParseSelector`
//! read them.
//!
//! Labels: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`.
//! Fields: `=`, `==` and `!=` on `metadata.name`, `metadata.namespace` and
//! the few per-kind fields kube-apiserver indexes (pods' `spec.nodeName`,
//! `status.phase`…, events' `involvedObject.*`, secrets' `type`).

use crate::status::Status;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A parsed label selector (every requirement must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<(String, Op)>,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<(String, bool, String)>,
}

/// Split at commas outside parentheses.
fn split_top(input: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

fn bad(input: &str) -> Status {
    Status::bad_request(format!("unable to parse requirement: {input}"))
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, Status> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(whole))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_requirement(req: &str) -> Result<(String, Op), Status> {
    if let Some(key) = req.strip_prefix('!') {
        let key = key.trim();
        return if valid_key(key) {
            Ok((key.to_string(), Op::DoesNotExist))
        } else {
            Err(bad(req))
        };
    }
    let (key, op) = if let Some((k, v)) = req.split_once("!=") {
        (k, Op::NotEquals(v.trim().to_string()))
    } else if let Some((k, v)) = req.split_once("==") {
        (k, Op::Equals(v.trim().to_string()))
    } else if let Some((k, v)) = req.split_once('=') {
        (k, Op::Equals(v.trim().to_string()))
    } else if let Some((k, rest)) = req.split_once(" notin ") {
        (k, Op::NotIn(parse_set(rest, req)?))
    } else if let Some((k, rest)) = req.split_once(" in ") {
        (k, Op::In(parse_set(rest, req)?))
    } else {
        (req, Op::Exists)
    };
    let key = key.trim();
    if valid_key(key) {
        Ok((key.to_string(), op))
    } else {
        Err(bad(req))
    }
}

impl LabelSelector {
    /// Parse a `labelSelector`; 400 BadRequest when malformed.
    pub fn parse(input: Option<&str>) -> Result<Self, Status> {
        let requirements = split_top(input.unwrap_or_default())
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<_, _>>()?;
        Ok(LabelSelector { requirements })
    }

    /// Does the object's `metadata.labels` satisfy every requirement?
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        self.requirements.iter().all(|(key, op)| {
            let value = labels.get(key).and_then(Value::as_str);
            match op {
                Op::Equals(v) => value == Some(v.as_str()),
                Op::NotEquals(v) => value != Some(v.as_str()),
                Op::In(set) => value.is_some_and(|l| set.iter().any(|s| s == l)),
                Op::NotIn(set) => value.is_none_or(|l| set.iter().all(|s| s != l)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
            }
        })
    }

    /// True when there is no requirement.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// Fields kube-apiserver can select `kind` objects by, besides metadata.
fn extra_fields(group: &str, kind: &str) -> &'static [&'static str] {
    match (group, kind) {
        ("", "Pod") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "Secret") => &["type"],
        ("", "Service") => &["spec.clusterIP", "spec.type"],
        ("", "Namespace") => &["status.phase"],
        ("", "Node") => &["spec.unschedulable"],
        ("batch", "Job") => &["status.successful"],
        _ => &[],
    }
}

/// kube-apiserver 1.37's refusal of a field a kind cannot be selected by:
/// the kinds that still convert field labels with a function of their own
/// keep the older wording (a Job names itself); those selectable only by
/// `metadata.name` and `metadata.namespace` list what is known.
fn unsupported_field(group: &str, kind: &str, field: &str) -> Status {
    let message = match (group, kind) {
        ("batch", "Job") => format!("field label \"{field}\" not supported for Job"),
        ("", "Pod" | "Event" | "Secret" | "Namespace" | "Node" | "Service" | "ReplicationController")
        | ("events.k8s.io", "Event")
        | ("certificates.k8s.io", "CertificateSigningRequest") => format!("field label not supported: {field}"),
        _ => format!("\"{field}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""),
    };
    Status::bad_request(message)
}

impl FieldSelector {
    /// Parse a `fieldSelector` for objects of `group`/`kind`; 400 for a
    /// field the kind cannot be selected by.
    pub fn parse(input: Option<&str>, group: &str, kind: &str) -> Result<Self, Status> {
        let mut requirements = Vec::new();
        for req in split_top(input.unwrap_or_default()) {
            let (field, equal, value) = if let Some((f, v)) = req.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
                (f, true, v)
            } else {
                return Err(Status::bad_request(format!(
                    "invalid selector: '{req}'; can't understand '{req}'"
                )));
            };
            requirements.push((field.trim().to_string(), equal, value.trim().to_string()));
        }
        // kube-apiserver checks the requirements in field order.
        let supported =
            |f: &str| matches!(f, "metadata.name" | "metadata.namespace") || extra_fields(group, kind).contains(&f);
        let unsupported = requirements
            .iter()
            .map(|(f, _, _)| f.as_str())
            .filter(|f| !supported(f))
            .min();
        match unsupported {
            Some(field) => Err(unsupported_field(group, kind, field)),
            None => Ok(FieldSelector { requirements }),
        }
    }

    /// Does the object satisfy every requirement?
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|(field, equal, value)| {
            let found = field.split('.').try_fold(obj, |v, key| v.get(key));
            let text = match found {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (text == *value) == *equal
        })
    }

    /// True when there is no requirement.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "namespace": "shop", "labels": labels}})
    }

    #[test]
    fn every_label_operator_matches_like_kubernetes() {
        let obj = labelled(json!({"app": "web", "tier": "front"}));
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("env!=prod", true),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("env notin (prod)", true),
            ("tier", true),
            ("!tier", false),
            ("!env", true),
            ("app=web,tier=back", false),
            ("app in (api,web),tier", true),
            ("", true),
        ];
        for (selector, want) in cases {
            let parsed = LabelSelector::parse(Some(selector)).unwrap();
            assert_eq!(parsed.matches(&obj), want, "{selector}");
        }
    }

    #[test]
    fn a_malformed_label_selector_is_a_bad_request() {
        let err = LabelSelector::parse(Some("app in web")).unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn field_selectors_cover_metadata_and_refuse_unknown_fields() {
        let obj = labelled(json!({}));
        let by = |s: &str| FieldSelector::parse(Some(s), "", "ConfigMap").unwrap().matches(&obj);
        assert!(by("metadata.name=x"));
        assert!(!by("metadata.name!=x"));
        assert!(by("metadata.namespace==shop,metadata.name!=y"));
        assert!(FieldSelector::parse(Some("status.phase=Running"), "", "Pod").is_ok());
        assert!(FieldSelector::parse(Some("spec.type=ClusterIP"), "", "Service").is_ok());
    }

    #[test]
    fn an_unknown_field_label_is_refused_in_kube_apiserver_1_37_s_words_for_the_kind() {
        let refused = |s: &str, group: &str, kind: &str| FieldSelector::parse(Some(s), group, kind).unwrap_err();
        let err = refused("spec.foo=1", "", "ConfigMap");
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            r#""spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace""#
        );
        let err = refused("status.replicas=1", "apps", "ReplicaSet");
        assert!(err
            .message
            .starts_with(r#""status.replicas" is not a known field selector"#));
        assert_eq!(refused("zz=c,aa=v", "", "Pod").message, "field label not supported: aa");
        assert_eq!(
            refused("data.k=v", "", "Service").message,
            "field label not supported: data.k"
        );
        assert_eq!(
            refused("data.k=v", "batch", "Job").message,
            r#"field label "data.k" not supported for Job"#
        );
    }
}
