//! A readable line diff (`-` removed, `+` added, two-space context), for a
//! person deciding a held write.

/// Lines of context kept around each change.
const CONTEXT: usize = 3;
/// Past this many cells the middle is shown as all removed then all added,
/// rather than spending quadratic time and memory on it.
const MAX_CELLS: usize = 4_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Keep,
    Remove,
    Add,
}

/// The diff of `before` and `after`, line by line; empty when equal.
pub fn diff(before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let ops = operations(&a, &b);
    if ops.iter().all(|(op, _)| *op == Op::Keep) {
        return String::new();
    }
    render(&ops)
}

/// Each line with what happened to it, in order.
fn operations<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(Op, &'a str)> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops: Vec<(Op, &str)> = a[..prefix].iter().map(|l| (Op::Keep, *l)).collect();
    if (ma.len() + 1) * (mb.len() + 1) > MAX_CELLS {
        ops.extend(ma.iter().map(|l| (Op::Remove, *l)));
        ops.extend(mb.iter().map(|l| (Op::Add, *l)));
    } else {
        ops.extend(lcs(ma, mb));
    }
    ops.extend(a[a.len() - suffix..].iter().map(|l| (Op::Keep, *l)));
    ops
}

/// Longest common subsequence, walked back into operations.
fn lcs<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(Op, &'a str)> {
    let width = b.len() + 1;
    let mut table = vec![0u32; (a.len() + 1) * width];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            table[i * width + j] = if a[i] == b[j] {
                table[(i + 1) * width + j + 1] + 1
            } else {
                table[(i + 1) * width + j].max(table[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j, mut ops) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((Op::Keep, a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || table[(i + 1) * width + j] >= table[i * width + j + 1]) {
            // Removals first, so a changed line reads `-` old then `+` new.
            ops.push((Op::Remove, a[i]));
            i += 1;
        } else {
            ops.push((Op::Add, b[j]));
            j += 1;
        }
    }
    ops
}

/// Changes with [`CONTEXT`] lines around them; `…` between distant hunks.
fn render(ops: &[(Op, &str)]) -> String {
    // Marked in one pass, not by asking each line about every change: a
    // held write's size is the writer's to choose, and that was quadratic.
    let mut near = vec![false; ops.len()];
    for (i, (op, _)) in ops.iter().enumerate() {
        if *op != Op::Keep {
            let end = (i + CONTEXT).min(ops.len() - 1);
            near[i.saturating_sub(CONTEXT)..=end].fill(true);
        }
    }
    let mut out = String::new();
    let mut skipped = false;
    for (i, (op, line)) in ops.iter().enumerate() {
        if *op == Op::Keep && !near[i] {
            skipped = true;
            continue;
        }
        if skipped && !out.is_empty() {
            out.push_str("  …\n");
        }
        skipped = false;
        let mark = match op {
            Op::Keep => "  ",
            Op::Remove => "- ",
            Op::Add => "+ ",
        };
        out.push_str(mark);
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_shows_as_removed_then_added_with_context() {
        let before = "a: 1\nb: 2\nc: 3\n";
        let after = "a: 1\nb: 5\nc: 3\n";
        assert_eq!(diff(before, after), "  a: 1\n- b: 2\n+ b: 5\n  c: 3\n");
    }

    #[test]
    fn equal_texts_have_no_diff_and_distant_context_is_elided() {
        assert_eq!(diff("x\n", "x\n"), "");
        let before: String = (0..20).map(|i| format!("l{i}\n")).collect();
        let after = before.replace("l1\n", "L1\n").replace("l18\n", "L18\n");
        let shown = diff(&before, &after);
        assert!(
            shown.contains("- l1\n+ L1\n") && shown.contains("- l18\n+ L18\n"),
            "{shown}"
        );
        assert!(shown.contains("  …\n") && !shown.contains("l10"), "{shown}");
    }

    #[test]
    fn context_reaches_three_lines_each_way_and_no_further_even_at_the_ends() {
        let before: String = (0..12).map(|i| format!("l{i}\n")).collect();
        let first = before.replace("l0\n", "L0\n");
        assert_eq!(diff(&before, &first), "- l0\n+ L0\n  l1\n  l2\n  l3\n");
        let last = before.replace("l11\n", "L11\n");
        assert_eq!(diff(&before, &last), "  l8\n  l9\n  l10\n- l11\n+ L11\n");
        let middle = before.replace("l6\n", "L6\n");
        assert_eq!(
            diff(&before, &middle),
            "  l3\n  l4\n  l5\n- l6\n+ L6\n  l7\n  l8\n  l9\n"
        );
    }

    #[test]
    fn a_new_object_is_all_added() {
        assert_eq!(diff("", "a: 1\n"), "+ a: 1\n");
    }
}
