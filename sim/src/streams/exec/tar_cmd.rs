//! `tar c` and `tar x` on the container's filesystem: what `kubectl cp`
//! runs (`tar cf - PATH` from a pod, `tar -xmf - -C DIR` into one).

use super::commands::{Container, Shell};
use super::fs::{self, Node};
use super::io::Stdio;
use super::tar::{self, Entry, EntryKind};
use bytes::Bytes;

#[derive(Debug, Default)]
struct Options {
    mode: Option<char>,
    archive: Option<String>,
    dir: Option<String>,
    verbose: bool,
    gzip: bool,
    paths: Vec<String>,
}

fn parse(args: &[String]) -> Options {
    let mut opts = Options::default();
    let mut iter = args.iter().peekable();
    let mut first = true;
    while let Some(arg) = iter.next() {
        let bundle = if arg.starts_with("--") {
            None
        } else if let Some(b) = arg.strip_prefix('-') {
            Some(b)
        } else if first {
            // Old-style `tar cf -`: the first word is a bundle of letters.
            Some(arg.as_str())
        } else {
            None
        };
        first = false;
        match (arg.as_str(), bundle) {
            ("-C" | "--directory", _) => opts.dir = iter.next().cloned(),
            (_, Some(letters)) if !letters.is_empty() => {
                for letter in letters.chars() {
                    match letter {
                        'c' | 'x' | 't' => opts.mode = Some(letter),
                        'f' => opts.archive = iter.next().cloned(),
                        'v' => opts.verbose = true,
                        'z' => opts.gzip = true,
                        'C' => opts.dir = iter.next().cloned(),
                        _ => {}
                    }
                }
            }
            (a, _) if a.starts_with("--") => {}
            (a, _) => opts.paths.push(a.to_string()),
        }
    }
    opts
}

/// Run `tar` with `args`.
pub async fn tar(c: &Container, sh: &Shell, args: &[String], io: &mut Stdio) -> i32 {
    let opts = parse(args);
    if opts.gzip {
        io.err("tar: gzip compression is not supported here\n");
        return 2;
    }
    let base = opts
        .dir
        .as_deref()
        .map_or_else(|| sh.cwd.clone(), |d| fs::normalize(&sh.cwd, d));
    if !fs::lock(&c.fs).is_dir(&base) {
        io.err(format!(
            "tar: {}: Cannot open: No such file or directory\ntar: Error is not recoverable: exiting now\n",
            opts.dir.as_deref().unwrap_or(&base)
        ));
        return 2;
    }
    match opts.mode {
        Some('c') => create(c, &base, &opts, io),
        Some('x') | Some('t') => extract(c, &base, &opts, io).await,
        _ => {
            io.err("tar: You must specify one of the '-Acdtrux', '--delete' or '--test-label' options\n");
            2
        }
    }
}

fn create(c: &Container, base: &str, opts: &Options, io: &Stdio) -> i32 {
    if opts.paths.is_empty() {
        io.err("tar: Cowardly refusing to create an empty archive\n");
        return 2;
    }
    let fs = fs::lock(&c.fs);
    let mut entries = Vec::new();
    let mut failed = false;
    let mut warned = false;
    for arg in &opts.paths {
        let path = fs::normalize(base, arg);
        if fs.get(&path).is_none() {
            io.err(format!("tar: {arg}: Cannot stat: No such file or directory\n"));
            failed = true;
            continue;
        }
        if arg.starts_with('/') && !warned {
            io.err("tar: Removing leading `/' from member names\n");
            warned = true;
        }
        // Members are named as given (made relative), like GNU tar does.
        let given = arg.trim_start_matches('/').trim_end_matches('/');
        for (member, node) in fs.walk(&path) {
            let suffix = &member[path.len()..];
            let name = format!("{}{}", if given.is_empty() { "." } else { given }, suffix);
            let name = name.trim_start_matches('/').to_string();
            if opts.verbose {
                io.err(format!("{name}\n"));
            }
            let (kind, mode) = match node {
                Node::Dir => (EntryKind::Dir, 0o755),
                Node::File { data, mode } => (EntryKind::File(data), mode),
            };
            entries.push(Entry { name, kind, mode });
        }
    }
    drop(fs);
    let mtime = chrono::Utc::now().timestamp().max(0) as u64;
    let archive = Bytes::from(tar::write(&entries, mtime));
    if let Err(e) = write_archive(c, base, opts, archive, io) {
        io.err(format!("tar: {e}\n"));
        return 2;
    }
    if failed {
        io.err("tar: Exiting with failure status due to previous errors\n");
        return 2;
    }
    0
}

fn write_archive(c: &Container, base: &str, opts: &Options, archive: Bytes, io: &Stdio) -> Result<(), String> {
    match opts.archive.as_deref() {
        None | Some("-") => {
            // Chunked so a large archive streams as several frames.
            for chunk in archive.chunks(32 * 1024) {
                io.out(chunk);
            }
            Ok(())
        }
        Some(file) => fs::lock(&c.fs).write(&fs::normalize(base, file), archive, 0o644),
    }
}

async fn extract(c: &Container, base: &str, opts: &Options, io: &mut Stdio) -> i32 {
    let data = match opts.archive.as_deref() {
        None | Some("-") => io.read_all().await,
        Some(file) => match fs::lock(&c.fs).get(&fs::normalize(base, file)) {
            Some(Node::File { data, .. }) => data.to_vec(),
            _ => {
                io.err(format!("tar: {file}: Cannot open: No such file or directory\n"));
                return 2;
            }
        },
    };
    let entries = match tar::read(&data) {
        Ok(entries) => entries,
        Err(e) => {
            io.err(format!(
                "tar: {e}\ntar: Exiting with failure status due to previous errors\n"
            ));
            return 2;
        }
    };
    let mut fs = fs::lock(&c.fs);
    let mut status = 0;
    for entry in entries {
        if opts.verbose || opts.mode == Some('t') {
            io.out(format!("{}\n", entry.name));
        }
        if opts.mode == Some('t') {
            continue;
        }
        let path = fs::normalize(base, &entry.name);
        let result = match entry.kind {
            EntryKind::Dir => fs.mkdir_all(&path),
            EntryKind::File(data) => fs.write(&path, data, entry.mode),
            EntryKind::Other => Ok(()),
        };
        if let Err(e) = result {
            io.err(format!("tar: {}: Cannot open: {e}\n", entry.name));
            status = 2;
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn kubectl_cp_command_lines_parse() {
        let o = parse(&args("cf - /tmp/x"));
        assert_eq!(
            (o.mode, o.archive.as_deref(), o.paths.clone()),
            (Some('c'), Some("-"), vec!["/tmp/x".to_string()])
        );
        let o = parse(&args("--no-same-permissions --no-same-owner -xmf - -C /tmp"));
        assert_eq!(
            (o.mode, o.archive.as_deref(), o.dir.as_deref()),
            (Some('x'), Some("-"), Some("/tmp"))
        );
        let o = parse(&args("-xmf - -C /data/dir"));
        assert_eq!((o.mode, o.dir.as_deref()), (Some('x'), Some("/data/dir")));
    }
}
