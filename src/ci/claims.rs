//! Claim conditions of a trust rule: `name=value`, where the value is
//! matched exactly or, when it holds `*`, as a glob in which `*` stands for
//! any run of characters (`refs/tags/v*`, `repo:acme/*:ref:refs/heads/main`).
//! All conditions of a rule must hold; a claim the token lacks fails its
//! condition. Strings, numbers and booleans are compared by their text
//! (`run_attempt=1`); any other claim (an object, a list) matches nothing.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The largest number of conditions on one rule, and the longest name or
/// pattern: rules are written by people, and matched at every exchange.
pub const MAX_CONDITIONS: usize = 32;
const MAX_LEN: usize = 512;

/// Parse `name=value` (as `--claim` gives it) into its name and pattern.
pub fn parse_condition(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!("claim condition {text:?} is not name=value"));
    };
    let name = name.trim();
    check_condition(name, value)?;
    Ok((name.to_string(), value.to_string()))
}

/// Whether `name` and `pattern` make a usable condition.
pub fn check_condition(name: &str, pattern: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_LEN || name.chars().any(char::is_control) {
        return Err(format!(
            "claim name {name:?} is empty, too long or has control characters"
        ));
    }
    if pattern.is_empty() || pattern.len() > MAX_LEN || pattern.chars().any(char::is_control) {
        return Err(format!(
            "the value for claim {name:?} is empty, too long or has control characters"
        ));
    }
    Ok(())
}

/// Whether every condition holds for `claims`.
pub fn all_hold(conditions: &BTreeMap<String, String>, claims: &Map<String, Value>) -> bool {
    conditions
        .iter()
        .all(|(name, pattern)| claims.get(name).and_then(text).is_some_and(|v| glob(pattern, &v)))
}

/// A claim's text, when it is a scalar.
pub fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Does `value` match `pattern` (`*`: any run of characters, nothing else
/// special)? Linear in practice: each `*` is matched greedily with the
/// backtracking of the classic wildcard algorithm, no regex.
pub fn glob(pattern: &str, value: &str) -> bool {
    let (p, v): (Vec<char>, Vec<char>) = (pattern.chars().collect(), value.chars().collect());
    let (mut pi, mut vi) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while vi < v.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, vi));
            pi += 1;
        } else if pi < p.len() && p[pi] == v[vi] {
            pi += 1;
            vi += 1;
        } else if let Some((sp, sv)) = star {
            pi = sp + 1;
            vi = sv + 1;
            star = Some((sp, sv + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pattern_matches_exactly_unless_it_holds_a_star() {
        assert!(glob("refs/heads/main", "refs/heads/main"));
        assert!(!glob("refs/heads/main", "refs/heads/main2"));
        assert!(!glob("refs/heads/main", "refs/heads/mai"));
        assert!(glob("refs/tags/v*", "refs/tags/v1.2.3"));
        assert!(glob("refs/tags/v*", "refs/tags/v"));
        assert!(!glob("refs/tags/v*", "refs/heads/v1"));
        assert!(glob(
            "repo:acme/*:ref:refs/heads/main",
            "repo:acme/shop:ref:refs/heads/main"
        ));
        assert!(!glob(
            "repo:acme/*:ref:refs/heads/main",
            "repo:acme/shop:ref:refs/heads/dev"
        ));
        assert!(glob("*a*b", "xxaxxab"));
        assert!(!glob("*a*b", "xxaxxa"));
        assert!(glob("*", ""));
        assert!(!glob("a.c", "abc"), "a dot is a dot, not any character");
    }

    #[test]
    fn every_condition_must_hold_and_a_missing_or_structured_claim_fails_its_condition() {
        let claims = json!({"repository": "acme/shop", "ref": "refs/heads/main", "run_attempt": 1, "x": ["a"]});
        let claims = claims.as_object().unwrap();
        let rule = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert!(all_hold(
            &rule(&[("repository", "acme/shop"), ("ref", "refs/heads/*")]),
            claims
        ));
        assert!(all_hold(&rule(&[("run_attempt", "1")]), claims));
        assert!(!all_hold(
            &rule(&[("repository", "acme/shop"), ("ref", "refs/tags/*")]),
            claims
        ));
        assert!(!all_hold(&rule(&[("environment", "*")]), claims));
        assert!(!all_hold(&rule(&[("x", "*")]), claims));
    }

    #[test]
    fn a_condition_is_name_equals_value_and_the_value_may_hold_equals_signs() {
        assert_eq!(
            parse_condition("repository=acme/shop").unwrap(),
            ("repository".into(), "acme/shop".into())
        );
        assert_eq!(parse_condition("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(parse_condition("repository").is_err());
        assert!(parse_condition("=x").is_err());
        assert!(parse_condition("ref=").is_err());
        assert!(parse_condition("ref=a\nb").is_err());
    }
}
