//! Modules only import downwards (issue 16 item 4; STYLE.md, "Modules only
//! import downwards").
//!
//! Reads every file under `src/`, collects the top-level modules each one
//! names through `crate::…` (in `use` lines and inline paths, tests
//! included; comments and string literals are skipped), and checks the
//! graph against [`LAYERS`]: a module imports its own layer or lower ones,
//! and no imports go round in a circle. A module that needs something from
//! above it is a sign that the thing lives in the wrong place: move it down.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first, each with its top-level modules.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "wire types",
        &[
            "body",
            "document",
            "logs",
            "ratelimit",
            "secrets",
            "status",
            "text",
            "tls",
        ],
    ),
    ("config", &["config"]),
    ("identity", &["identity"]),
    ("store", &["store"]),
    (
        "domain",
        &["audit", "access", "approvals", "reconcile", "signin", "oauth", "ci"],
    ),
    ("pipeline", &["gateway"]),
    ("doors", &["doors", "mcp"]),
    ("app and CLI", &["app", "cli", "demo"]),
];

/// Imports that go against the order until a later item of issue 16 removes
/// them: (from, to, why it is still there).
const ALLOWED: &[(&str, &str, &str)] = &[];

/// One `crate::<module>` reference: where it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Site {
    file: PathBuf,
    line: usize,
}

/// from → to → where.
type Graph = BTreeMap<String, BTreeMap<String, Vec<Site>>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level modules: `src/<name>.rs` and `src/<name>/`.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .expect("src/ is readable")
        .map(|entry| entry.expect("src/ entry").path())
        .filter_map(|path| {
            let name = path.file_stem()?.to_str()?.to_string();
            let module = path.is_dir() || path.extension().is_some_and(|e| e == "rs");
            (module && name != "lib" && name != "main").then_some(name)
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("directory is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file under `src/` belongs to (`src/gateway/hold/run.rs` →
/// `gateway`); `None` for the crate root files.
fn owner(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The source with comments, string literals and character literals
/// blanked out (newlines kept, so lines still count).
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&chars, i) {
            chars[i..end].iter().for_each(|&c| blank(&mut out, c));
            i = end;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let skip = if chars[i] == '\\' { 2 } else { 1 };
                chars[i..(i + skip).min(chars.len())]
                    .iter()
                    .for_each(|&c| blank(&mut out, c));
                i += skip;
            }
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{1F600}'), not a lifetime.
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where a raw string (`r"…"`, `r#"…"#`, `br"…"`) starting at `i` ends.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let previous = i.checked_sub(1).map(|p| chars[p]);
    if previous.is_some_and(|p| p.is_alphanumeric() || p == '_') {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"' && chars[j + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}

/// The top-level modules `code` names after `crate::`, with their lines:
/// `crate::store::Store` and each item of `crate::{audit::row, store}`.
fn crate_references(code: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("crate::") {
        let before = at.checked_sub(1).map(|p| bytes[p]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = code[at + "crate::".len()..].trim_start();
        match rest.strip_prefix('{') {
            Some(group) => {
                let mut depth = 0;
                let mut item_start = true;
                for (offset, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        c if item_start && !c.is_whitespace() => {
                            item_start = false;
                            let name = identifier(&group[offset..]);
                            let lines = group[..offset].matches('\n').count();
                            found.push((name, line + lines));
                        }
                        _ => {}
                    }
                }
            }
            None => found.push((identifier(rest), line)),
        }
    }
    found
}

/// Lines of `code` (a file `depth` modules below the crate root) where a
/// `super::` path climbs to the crate root, which the scan would not read
/// as `crate::`. An inline module (`mod tests { … }`) is one level more.
fn climbs_to_root(code: &str, depth: usize) -> Vec<usize> {
    let mut found = Vec::new();
    let mut braces = 0usize;
    // The brace depth just inside each inline module open here.
    let mut inline: Vec<usize> = Vec::new();
    let (mut previous, mut module_named) = (String::new(), false);
    let mut at = 0;
    while let Some(c) = code[at..].chars().next() {
        if c.is_alphabetic() || c == '_' {
            let word = identifier(&code[at..]);
            if word == "super" {
                let (climbed, end) = super_chain(code, at);
                if climbed > 0 && climbed >= depth + inline.len() {
                    found.push(code[..at].matches('\n').count() + 1);
                }
                at = end;
                previous.clear();
                continue;
            }
            module_named = previous == "mod";
            at += word.len();
            previous = word;
            continue;
        }
        match c {
            '{' => {
                braces += 1;
                if module_named {
                    inline.push(braces);
                }
            }
            '}' => {
                if inline.last() == Some(&braces) {
                    inline.pop();
                }
                braces = braces.saturating_sub(1);
            }
            _ => {}
        }
        if !c.is_whitespace() {
            previous.clear();
            module_named = false;
        }
        at += c.len_utf8();
    }
    found
}

/// How many `super::` segments a path starting at `at` climbs, and where
/// the chain ends.
fn super_chain(code: &str, mut at: usize) -> (usize, usize) {
    let mut climbed = 0;
    while identifier(&code[at..]) == "super" {
        let rest = code[at + "super".len()..].trim_start();
        let Some(after) = rest.strip_prefix("::") else {
            return (climbed, at + "super".len());
        };
        climbed += 1;
        at = code.len() - after.trim_start().len();
    }
    (climbed, at)
}

fn identifier(text: &str) -> String {
    text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

fn graph() -> Graph {
    let src = src();
    let modules = top_level_modules(&src);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let Some(from) = owner(&src, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("source is readable");
        for (to, line) in crate_references(&code_only(&text)) {
            if to != from && modules.contains(&to) {
                let site = Site {
                    file: file.strip_prefix(&src).unwrap_or(&file).to_path_buf(),
                    line,
                };
                graph.entry(from.clone()).or_default().entry(to).or_default().push(site);
            }
        }
    }
    graph
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

fn allowed(from: &str, to: &str) -> bool {
    ALLOWED.iter().any(|(f, t, _)| *f == from && *t == to)
}

fn describe(from: &str, to: &str, sites: &[Site]) -> String {
    let places: Vec<String> = sites
        .iter()
        .take(5)
        .map(|s| format!("src/{}:{}", s.file.display(), s.line))
        .collect();
    let more = sites.len().saturating_sub(5);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("{from} -> {to} ({}{more})", places.join(", "))
}

#[test]
fn every_top_level_module_has_a_layer() {
    let missing: Vec<String> = top_level_modules(&src())
        .into_iter()
        .filter(|m| layer_of(m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "add these modules to LAYERS in tests/layers.rs: {missing:?}"
    );
}

#[test]
fn modules_import_only_their_own_layer_or_lower_ones() {
    let graph = graph();
    assert!(
        graph.get("gateway").is_some_and(|to| to.contains_key("store")),
        "the scan finds the imports it is meant to check"
    );
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        for (to, sites) in targets {
            let (Some(low), Some(high)) = (layer_of(from), layer_of(to)) else {
                continue;
            };
            if high > low && !allowed(from, to) {
                upward.push(format!(
                    "{} imports upward, {} -> {}",
                    describe(from, to, sites),
                    LAYERS[low].0,
                    LAYERS[high].0
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "modules import only downwards; move these down (or see ALLOWED):\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_imports_go_round_in_a_circle() {
    let graph = graph();
    let edges = |from: &str| -> Vec<String> {
        graph
            .get(from)
            .map(|to| to.keys().filter(|to| !allowed(from, to)).cloned().collect())
            .unwrap_or_default()
    };
    // Depth-first search; a module met again on the current path closes a
    // cycle.
    fn visit(
        module: &str,
        edges: &dyn Fn(&str) -> Vec<String>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| m == module) {
            let mut cycle = path[start..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if !done.insert(module.to_string()) {
            return None;
        }
        path.push(module.to_string());
        for next in edges(module) {
            if let Some(cycle) = visit(&next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(cycle) = visit(module, &edges, &mut Vec::new(), &mut done) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|pair| describe(&pair[0], &pair[1], &graph[&pair[0]][&pair[1]]))
                .collect();
            panic!("an import cycle between top-level modules:\n{}", steps.join("\n"));
        }
    }
}

#[test]
fn no_path_climbs_to_the_crate_root_with_super() {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut climbing = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap_or(&file);
        let parts = relative.components().count();
        let depth = if relative.ends_with("mod.rs") { parts - 1 } else { parts };
        let text = std::fs::read_to_string(&file).expect("source is readable");
        for line in climbs_to_root(&code_only(&text), depth) {
            climbing.push(format!("src/{}:{line}", relative.display()));
        }
    }
    assert!(
        climbing.is_empty(),
        "write these paths from `crate::`, so that the layer check reads them:\n{}",
        climbing.join("\n")
    );
}

#[test]
fn every_allowed_upward_import_still_exists() {
    let graph = graph();
    for (from, to, why) in ALLOWED {
        assert!(
            graph.get(*from).is_some_and(|targets| targets.contains_key(*to)),
            "{from} no longer imports {to}: remove it from ALLOWED in tests/layers.rs ({why})"
        );
    }
}

#[test]
fn the_scan_reads_paths_as_the_compiler_does() {
    let code = code_only(
        "use crate::{audit::row::AuditRow, store::{Store, StoreError}};\n\
         // crate::cli is a comment\n\
         let s = \"crate::mcp in a string\"; let c = '\"'; let r = r#\"crate::app\"#;\n\
         fn f<'a>(x: &'a crate::identity::Identity) {}\n\
         $crate::text::x; my_crate::demo::y;",
    );
    let found: Vec<(String, usize)> = crate_references(&code);
    let expected = [("audit", 1), ("store", 1), ("identity", 4)];
    assert_eq!(
        found,
        expected.map(|(m, l)| (m.to_string(), l)),
        "only real paths, with their lines"
    );
    let climbing = "use super::x;\nmod tests {\n    use super::*;\n    use super::super::y;\n}\npub(super) fn f() {}\n";
    assert_eq!(climbs_to_root(climbing, 1), [1, 4]);
    assert!(
        climbs_to_root(climbing, 2).is_empty(),
        "two levels down, they stay inside"
    );
}
