//! File commands: `cat`, `ls`, `mkdir`, `rm`, `touch`, `test`, `tail` and
//! shell redirects, on the container's in-memory filesystem.

use super::commands::{Container, Shell};
use super::fs::{self, Node};
use super::io::Stdio;
use bytes::Bytes;

fn flags_and_operands(args: &[String]) -> (String, Vec<&str>) {
    let mut flags = String::new();
    let mut operands = Vec::new();
    for arg in args {
        match arg.strip_prefix('-') {
            Some(f) if !f.is_empty() && operands.is_empty() => flags.push_str(f),
            _ => operands.push(arg.as_str()),
        }
    }
    (flags, operands)
}

/// `cat [FILE…]`: files, or stdin when there are none (or for `-`).
pub async fn cat(c: &Container, sh: &Shell, args: &[String], io: &mut Stdio) -> i32 {
    if args.is_empty() {
        while let Some(chunk) = io.read().await {
            io.out(&chunk);
        }
        return 0;
    }
    let mut status = 0;
    for arg in args {
        if arg == "-" {
            let all = io.read_all().await;
            io.out(all);
            continue;
        }
        let path = fs::normalize(&sh.cwd, arg);
        let node = fs::lock(&c.fs).get(&path).cloned();
        match node {
            Some(Node::File { data, .. }) => io.out(&data),
            Some(Node::Dir) => {
                io.err("cat: read error: Is a directory\n");
                status = 1;
            }
            None => {
                io.err(format!("cat: can't open '{arg}': No such file or directory\n"));
                status = 1;
            }
        }
    }
    status
}

fn long_line(name: &str, node: &Node) -> String {
    let (perm, size) = match node {
        Node::Dir => ("drwxr-xr-x".to_string(), 4096),
        Node::File { data, mode } => (format!("-{}", rwx(*mode)), data.len()),
    };
    format!("{perm}    1 root     root     {size:>9} Jan  1 00:00 {name}\n")
}

fn rwx(mode: u32) -> String {
    (0..9)
        .map(|i| {
            let bit = mode & (0o400 >> i) != 0;
            match (bit, i % 3) {
                (false, _) => '-',
                (true, 0) => 'r',
                (true, 1) => 'w',
                (true, _) => 'x',
            }
        })
        .collect()
}

/// `ls [-1al] [PATH…]`.
pub fn ls(c: &Container, sh: &Shell, args: &[String], io: &Stdio) -> i32 {
    let (flags, operands) = flags_and_operands(args);
    let long = flags.contains('l');
    let all = flags.contains('a');
    let targets: Vec<&str> = if operands.is_empty() { vec!["."] } else { operands };
    let fs = fs::lock(&c.fs);
    let mut status = 0;
    let mut text = String::new();
    for (i, target) in targets.iter().enumerate() {
        let path = fs::normalize(&sh.cwd, target);
        match fs.get(&path) {
            None => {
                io.err(format!("ls: {target}: No such file or directory\n"));
                status = 1;
            }
            Some(node @ Node::File { .. }) => {
                text.push_str(&if long {
                    long_line(target, node)
                } else {
                    format!("{target}\n")
                });
            }
            Some(Node::Dir) => {
                if targets.len() > 1 {
                    text.push_str(&format!("{}{target}:\n", if i > 0 { "\n" } else { "" }));
                }
                let mut names = fs.list(&path);
                if all {
                    names.splice(0..0, [".".to_string(), "..".to_string()]);
                }
                for name in names.iter().filter(|n| all || !n.starts_with('.')) {
                    let child = fs::normalize(&path, name);
                    let node = fs.get(&child).cloned().unwrap_or(Node::Dir);
                    text.push_str(&if long {
                        long_line(name, &node)
                    } else {
                        format!("{name}\n")
                    });
                }
            }
        }
    }
    io.out(text);
    status
}

/// `mkdir [-p] DIR…`.
pub fn mkdir(c: &Container, sh: &Shell, args: &[String], io: &Stdio) -> i32 {
    let (flags, operands) = flags_and_operands(args);
    let mut fs = fs::lock(&c.fs);
    let mut status = 0;
    for dir in operands {
        let path = fs::normalize(&sh.cwd, dir);
        let parent_ok = flags.contains('p') || fs.is_dir(&fs::normalize(&path, ".."));
        let exists = fs.get(&path).is_some();
        let result = match (parent_ok, exists && !flags.contains('p')) {
            (false, _) => Err(format!(
                "mkdir: can't create directory '{dir}': No such file or directory"
            )),
            (_, true) => Err(format!("mkdir: can't create directory '{dir}': File exists")),
            _ => fs.mkdir_all(&path).map_err(|e| format!("mkdir: {e}")),
        };
        if let Err(e) = result {
            io.err(format!("{e}\n"));
            status = 1;
        }
    }
    status
}

/// `rm [-rf] PATH…`.
pub fn rm(c: &Container, sh: &Shell, args: &[String], io: &Stdio) -> i32 {
    let (flags, operands) = flags_and_operands(args);
    let mut fs = fs::lock(&c.fs);
    let mut status = 0;
    for target in operands {
        let path = fs::normalize(&sh.cwd, target);
        if let Err(e) = fs.remove(&path, flags.contains('r') || flags.contains('R')) {
            if !(flags.contains('f') && fs.get(&path).is_none()) {
                io.err(format!(
                    "rm: can't remove '{target}': {}\n",
                    e.rsplit(": ").next().unwrap_or(&e)
                ));
                status = 1;
            }
        }
    }
    status
}

/// `touch FILE…`.
pub fn touch(c: &Container, sh: &Shell, args: &[String], io: &Stdio) -> i32 {
    let mut fs = fs::lock(&c.fs);
    let mut status = 0;
    for target in args.iter().filter(|a| !a.starts_with('-')) {
        let path = fs::normalize(&sh.cwd, target);
        if fs.get(&path).is_none() {
            if let Err(e) = fs.write(&path, Bytes::new(), 0o644) {
                io.err(format!("touch: {target}: {e}\n"));
                status = 1;
            }
        }
    }
    status
}

/// `test EXPR` / `[ EXPR ]`: file tests, string and integer comparisons.
pub fn test(c: &Container, sh: &Shell, name: &str, args: &[String], io: &Stdio) -> i32 {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    if name == "[" {
        if args.last() != Some(&"]") {
            io.err("sh: missing ]\n");
            return 2;
        }
        args.pop();
    }
    let (negate, args) = match args.split_first() {
        Some((&"!", rest)) => (true, rest.to_vec()),
        _ => (false, args),
    };
    let fs = fs::lock(&c.fs);
    let node = |p: &str| fs.get(&fs::normalize(&sh.cwd, p)).cloned();
    let int = |s: &str| s.parse::<i64>().ok();
    let result = match args.as_slice() {
        [] => Some(false),
        [s] => Some(!s.is_empty()),
        ["-d", p] => Some(matches!(node(p), Some(Node::Dir))),
        ["-f", p] => Some(matches!(node(p), Some(Node::File { .. }))),
        ["-e", p] => Some(node(p).is_some()),
        ["-s", p] => Some(matches!(node(p), Some(Node::File { data, .. }) if !data.is_empty())),
        ["-r" | "-w", p] => Some(node(p).is_some()),
        ["-z", s] => Some(s.is_empty()),
        ["-n", s] => Some(!s.is_empty()),
        [a, "=" | "==", b] => Some(a == b),
        [a, "!=", b] => Some(a != b),
        [a, op @ ("-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"), b] => match (int(a), int(b)) {
            (Some(a), Some(b)) => Some(match *op {
                "-eq" => a == b,
                "-ne" => a != b,
                "-lt" => a < b,
                "-le" => a <= b,
                "-gt" => a > b,
                _ => a >= b,
            }),
            _ => None,
        },
        _ => None,
    };
    match result {
        Some(r) => i32::from(r == negate),
        None => {
            io.err("sh: test: syntax error\n");
            2
        }
    }
}

/// `tail [-n N|+N] [-c N|+N] [FILE]`.
pub async fn tail(c: &Container, sh: &Shell, args: &[String], io: &mut Stdio) -> i32 {
    let mut bytes_mode = false;
    let mut spec = "10".to_string();
    let mut file = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if let Some(rest) = arg.strip_prefix("-c").or_else(|| arg.strip_prefix("-n")) {
            bytes_mode = arg.starts_with("-c");
            spec = if rest.is_empty() {
                iter.next().cloned().unwrap_or_default()
            } else {
                rest.to_string()
            };
        } else {
            file = Some(arg.clone());
        }
    }
    let data: Vec<u8> = match file {
        Some(f) => match fs::lock(&c.fs).get(&fs::normalize(&sh.cwd, &f)) {
            Some(Node::File { data, .. }) => data.to_vec(),
            _ => {
                io.err(format!("tail: can't open '{f}': No such file or directory\n"));
                return 1;
            }
        },
        None => io.read_all().await,
    };
    let from_start = spec.starts_with('+');
    let Ok(n) = spec.trim_start_matches('+').parse::<usize>() else {
        io.err(format!("tail: invalid number '{spec}'\n"));
        return 1;
    };
    io.out(tail_of(&data, bytes_mode, from_start, n));
    0
}

/// The part of `data` tail prints: the last `n` bytes or lines, or from the
/// `n`th on (`+N`); a final newline does not start another line.
fn tail_of(data: &[u8], bytes_mode: bool, from_start: bool, n: usize) -> &[u8] {
    if bytes_mode {
        if from_start {
            &data[n.saturating_sub(1).min(data.len())..]
        } else {
            &data[data.len().saturating_sub(n)..]
        }
    } else {
        let starts: Vec<usize> = std::iter::once(0)
            .chain(
                data.iter()
                    .enumerate()
                    .filter(|(i, &b)| b == b'\n' && i + 1 < data.len())
                    .map(|(i, _)| i + 1),
            )
            .collect();
        let index = if from_start {
            n.saturating_sub(1)
        } else {
            starts.len().saturating_sub(n)
        };
        starts.get(index).map_or(&data[data.len()..], |&s| &data[s..])
    }
}

/// An output appending to `file` (for `2> file`).
pub fn file_output(c: &Container, sh: &Shell, file: &str) -> super::io::Output {
    let path = fs::normalize(&sh.cwd, file);
    let fs = c.fs.clone();
    let _ = fs::lock(&fs).write(&path, Bytes::new(), 0o644);
    std::sync::Arc::new(move |chunk: Bytes| {
        let mut fs = fs::lock(&fs);
        let old = match fs.get(&path) {
            Some(Node::File { data, .. }) => data.clone(),
            _ => Bytes::new(),
        };
        let _ = fs.write(&path, Bytes::from([old.as_ref(), chunk.as_ref()].concat()), 0o644);
    })
}

/// `> FILE` / `>> FILE`: store a command's output in the filesystem.
pub fn redirect(c: &Container, sh: &Shell, file: &str, append: bool, data: Bytes, io: &Stdio) -> i32 {
    if file == "/dev/null" {
        return 0;
    }
    let path = fs::normalize(&sh.cwd, file);
    let mut fs = fs::lock(&c.fs);
    let contents = match (append, fs.get(&path)) {
        (true, Some(Node::File { data: old, .. })) => Bytes::from([old.as_ref(), data.as_ref()].concat()),
        _ => data,
    };
    let parent_exists = fs.is_dir(&fs::normalize(&path, ".."));
    let result = if parent_exists {
        fs.write(&path, contents, 0o644)
    } else {
        Err("nonexistent directory".into())
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            io.err(format!("sh: can't create {file}: {e}\n"));
            1
        }
    }
}
