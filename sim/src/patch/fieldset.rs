//! Sets of field paths, as structured-merge-diff's `fieldpath.Set`, and
//! their `FieldsV1` encoding in `metadata.managedFields`.
//!
//! A path element is kept in its `FieldsV1` spelling: `f:<field>`,
//! `k:<json of the key fields>`, `v:<json value>` or `i:<index>`. A node is
//! a *member* when its own path is in the set (`{}` for a leaf, `".": {}`
//! beside children for a map or list item).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A set of field paths, stored as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

/// One path: its elements in `FieldsV1` spelling.
pub type Path = Vec<String>;

impl FieldSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// No path at all.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Whether this node's own path is in the set.
    pub fn is_member(&self) -> bool {
        self.member
    }

    /// Mark this node's own path as a member.
    pub fn set_member(&mut self) {
        self.member = true;
    }

    /// The child node under `element`, if any path goes through it.
    pub fn child(&self, element: &str) -> Option<&FieldSet> {
        self.children.get(element)
    }

    /// The child node under `element`, created empty if needed. Callers
    /// that may leave it empty must [`FieldSet::prune`] afterwards.
    pub fn child_mut(&mut self, element: &str) -> &mut FieldSet {
        self.children.entry(element.to_string()).or_default()
    }

    /// The children, by path element.
    pub fn children(&self) -> impl Iterator<Item = (&String, &FieldSet)> {
        self.children.iter()
    }

    /// Add `path`.
    pub fn insert(&mut self, path: &[String]) {
        let mut node = self;
        for element in path {
            node = node.child_mut(element);
        }
        node.member = true;
    }

    /// Whether `path` is in the set.
    pub fn contains(&self, path: &[String]) -> bool {
        self.node(path).is_some_and(|node| node.member)
    }

    /// The node at `path`, if the set has any path through it.
    pub fn node(&self, path: &[String]) -> Option<&FieldSet> {
        let mut node = self;
        for element in path {
            node = node.children.get(element)?;
        }
        Some(node)
    }

    /// Add every path of `other` under `prefix`.
    pub fn insert_all_under(&mut self, prefix: &[String], other: &FieldSet) {
        let mut node = self;
        for element in prefix {
            node = node.child_mut(element);
        }
        node.union_with(other);
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    fn union_with(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (element, child) in &other.children {
            self.child_mut(element).union_with(child);
        }
    }

    /// Paths of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(element.clone(), rest);
            }
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            if let Some(theirs) = other.children.get(element) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(element.clone(), both);
                }
            }
        }
        out
    }

    /// Drop nodes that hold no path.
    pub fn prune(&mut self) {
        self.children.retain(|_, child| {
            child.prune();
            !child.is_empty()
        });
    }

    /// Every member path, parents before children.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        if self.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// Decode a `fieldsV1` object.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, String> {
        let Value::Object(map) = value else {
            return Err(format!("fieldsV1 must be an object, got {value}"));
        };
        let mut out = FieldSet::new();
        for (key, child) in map {
            if key == "." {
                out.member = true;
                continue;
            }
            if !is_path_element(key) {
                return Err(format!("unknown path element {key:?}"));
            }
            let mut node = FieldSet::from_fields_v1(child)?;
            if node.children.is_empty() {
                // `{}`: a leaf, which is always a member.
                node.member = true;
            }
            out.children.insert(key.clone(), node);
        }
        Ok(out)
    }

    /// Encode as a `fieldsV1` object.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        for (element, child) in &self.children {
            map.insert(element.clone(), child.encode_node());
        }
        Value::Object(map)
    }

    fn encode_node(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (element, child) in &self.children {
            map.insert(element.clone(), child.encode_node());
        }
        Value::Object(map)
    }
}

fn is_path_element(key: &str) -> bool {
    ["f:", "k:", "v:", "i:"].iter().any(|prefix| key.starts_with(prefix))
}

/// `f:<name>`.
pub fn field(name: &str) -> String {
    format!("f:{name}")
}

/// A path as structured-merge-diff prints it in conflict causes:
/// `.spec.containers[name="web"].image`, `[=value]`, `[0]`.
pub fn path_string(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        let (kind, rest) = element.split_at(element.len().min(2));
        match kind {
            "f:" => {
                out.push('.');
                out.push_str(rest);
            }
            "k:" => match serde_json::from_str::<Map<String, Value>>(rest) {
                Ok(key) => {
                    let fields: Vec<String> = key
                        .iter()
                        .map(|(name, value)| format!("{name}={}", value_string(value)))
                        .collect();
                    out.push_str(&format!("[{}]", fields.join(",")));
                }
                Err(_) => out.push_str(&format!("[{rest}]")),
            },
            "v:" => match serde_json::from_str::<Value>(rest) {
                Ok(value) => out.push_str(&format!("[={}]", value_string(&value))),
                Err(_) => out.push_str(&format!("[={rest}]")),
            },
            "i:" => out.push_str(&format!("[{rest}]")),
            _ => out.push_str(element),
        }
    }
    out
}

/// structured-merge-diff's `value.ToString`: strings quoted, the rest as
/// JSON.
fn value_string(value: &Value) -> String {
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(elements: &[&str]) -> Path {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn fields_v1_round_trips_with_dot_for_member_parents() {
        let encoded = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}
        });
        let set = FieldSet::from_fields_v1(&encoded).unwrap();
        assert!(set.contains(&p(&["f:metadata", "f:labels"])));
        assert!(set.contains(&p(&["f:metadata", "f:labels", "f:app"])));
        assert!(!set.contains(&p(&["f:metadata"])));
        assert!(set.contains(&p(&["f:spec", "f:containers", "k:{\"name\":\"web\"}"])));
        assert_eq!(set.to_fields_v1(), encoded);
    }

    #[test]
    fn difference_and_intersection_work_path_by_path() {
        let mut a = FieldSet::new();
        a.insert(&p(&["f:data", "f:x"]));
        a.insert(&p(&["f:data", "f:y"]));
        let mut b = FieldSet::new();
        b.insert(&p(&["f:data", "f:y"]));
        b.insert(&p(&["f:data", "f:z"]));
        assert_eq!(a.difference(&b).paths(), vec![p(&["f:data", "f:x"])]);
        assert_eq!(a.intersection(&b).paths(), vec![p(&["f:data", "f:y"])]);
        assert_eq!(a.union(&b).paths().len(), 3);
        assert!(a.difference(&a).is_empty());
    }

    #[test]
    fn paths_print_like_structured_merge_diff() {
        let path = p(&["f:spec", "f:containers", "k:{\"name\":\"web\"}", "f:image"]);
        assert_eq!(path_string(&path), ".spec.containers[name=\"web\"].image");
        let ports = p(&["f:ports", "k:{\"containerPort\":80,\"protocol\":\"TCP\"}"]);
        assert_eq!(path_string(&ports), ".ports[containerPort=80,protocol=\"TCP\"]");
        assert_eq!(
            path_string(&p(&["f:metadata", "f:finalizers", "v:\"a\""])),
            ".metadata.finalizers[=\"a\"]"
        );
    }

    #[test]
    fn bad_fields_v1_is_refused() {
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
    }
}
