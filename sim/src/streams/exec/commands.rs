//! The commands a simulated container can run, busybox-style.
//!
//! Every process runs against the container's in-memory filesystem
//! ([`super::fs`]) and an environment built from the pod spec. Error
//! messages follow busybox's wording.

use super::fs::{self, Node, SharedFs};
use super::io::{capture, Stdin, Stdio};
use super::shell::{self, Simple};
use super::{files, tar_cmd};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The container a process runs in.
#[derive(Debug, Clone)]
pub struct Container {
    /// Pod name (also the hostname).
    pub pod: String,
    /// Container name.
    pub container: String,
    /// Environment, in order.
    pub env: Vec<(String, String)>,
    /// The container's filesystem.
    pub fs: SharedFs,
}

/// A shell's state: variables, working directory, last status.
#[derive(Debug, Clone)]
pub struct Shell {
    /// Variables (the environment plus `?`).
    pub vars: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: String,
    /// Set by `exit`: the shell stops with this status.
    pub exit: Option<i32>,
}

impl Shell {
    /// A shell starting in `/` with `container`'s environment.
    pub fn new(container: &Container) -> Self {
        let mut vars: BTreeMap<String, String> = container.env.iter().cloned().collect();
        vars.insert("?".into(), "0".into());
        Shell {
            vars,
            cwd: "/".into(),
            exit: None,
        }
    }
}

type Run<'a> = Pin<Box<dyn Future<Output = i32> + Send + 'a>>;

/// Run `argv` in `container`; returns the exit status.
pub async fn exec(container: &Container, argv: Vec<String>, io: Stdio) -> i32 {
    let mut shell = Shell::new(container);
    let mut io = io;
    run(container, &mut shell, argv, &mut io).await
}

/// Run one command (a builtin of the shell or a "binary").
pub fn run<'a>(c: &'a Container, sh: &'a mut Shell, argv: Vec<String>, io: &'a mut Stdio) -> Run<'a> {
    Box::pin(async move {
        let Some(first) = argv.first() else { return 0 };
        let name = first.rsplit('/').next().unwrap_or(first).to_string();
        let args = &argv[1..];
        if let Some(text) = fact(c, sh, &name, args) {
            io.out(text);
            return 0;
        }
        match name.as_str() {
            "sh" | "bash" | "ash" | "dash" => sh_command(c, sh, args, io).await,
            "exit" => exit(sh, args),
            "cd" => cd(c, sh, args, io),
            "export" => export(sh, args),
            "true" | ":" => 0,
            "false" => 1,
            "echo" => echo(args, io),
            "env" | "printenv" => env(sh, &name, args, io),
            "sleep" => sleep(args, io).await,
            "cat" => files::cat(c, sh, args, io).await,
            "ls" => files::ls(c, sh, args, io),
            "mkdir" => files::mkdir(c, sh, args, io),
            "rm" => files::rm(c, sh, args, io),
            "touch" => files::touch(c, sh, args, io),
            "test" | "[" => files::test(c, sh, &name, args, io),
            "tail" => files::tail(c, sh, args, io).await,
            "tar" => tar_cmd::tar(c, sh, args, io).await,
            _ => {
                io.err(format!("sh: {first}: not found\n"));
                127
            }
        }
    })
}

/// The output of a command that only prints a fact about the container or
/// the shell (`pwd`, `hostname`, `uname`, ...); `None` for any other command.
fn fact(c: &Container, sh: &Shell, name: &str, args: &[String]) -> Option<String> {
    Some(match name {
        "pwd" => format!("{}\n", sh.cwd),
        "hostname" => format!("{}\n", c.pod),
        "whoami" => "root\n".into(),
        "id" => "uid=0(root) gid=0(root) groups=0(root)\n".into(),
        "uname" if args.iter().any(|a| a == "-a") => format!("Linux {} 6.8.0-sim #1 SMP x86_64 GNU/Linux\n", c.pod),
        "uname" => "Linux\n".into(),
        "date" => chrono::Utc::now().format("%a %b %e %H:%M:%S UTC %Y\n").to_string(),
        _ => return None,
    })
}

/// `exit [n]`: stop the shell, with the last command's status by default.
fn exit(sh: &mut Shell, args: &[String]) -> i32 {
    let code = args.first().map_or_else(|| last_status(sh), |a| a.parse().unwrap_or(2));
    sh.exit = Some(code);
    code
}

fn cd(c: &Container, sh: &mut Shell, args: &[String], io: &Stdio) -> i32 {
    let target = fs::normalize(&sh.cwd, args.first().map_or("/root", String::as_str));
    if fs::lock(&c.fs).is_dir(&target) {
        sh.cwd = target;
        0
    } else {
        io.err(format!(
            "sh: cd: can't cd to {}: No such file or directory\n",
            args.first().map_or("", String::as_str)
        ));
        2
    }
}

fn export(sh: &mut Shell, args: &[String]) -> i32 {
    for arg in args {
        if let Some((k, v)) = arg.split_once('=') {
            sh.vars.insert(k.into(), v.into());
        }
    }
    0
}

fn last_status(sh: &Shell) -> i32 {
    sh.vars.get("?").and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn echo(args: &[String], io: &Stdio) -> i32 {
    let (newline, words) = match args.first().map(String::as_str) {
        Some("-n") => (false, &args[1..]),
        _ => (true, args),
    };
    let mut text = words.join(" ");
    if newline {
        text.push('\n');
    }
    io.out(text);
    0
}

fn env(sh: &Shell, name: &str, args: &[String], io: &Stdio) -> i32 {
    if name == "printenv" && !args.is_empty() {
        let mut status = 0;
        for var in args {
            match sh.vars.get(var) {
                Some(v) if var != "?" => io.out(format!("{v}\n")),
                _ => status = 1,
            }
        }
        return status;
    }
    let text: String = sh
        .vars
        .iter()
        .filter(|(k, _)| k.as_str() != "?")
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    io.out(text);
    0
}

async fn sleep(args: &[String], io: &Stdio) -> i32 {
    let secs: Option<f64> = args.first().and_then(|a| a.trim_end_matches('s').parse().ok());
    match secs {
        Some(s) if s >= 0.0 && s.is_finite() => {
            tokio::time::sleep(Duration::from_secs_f64(s.min(86_400.0))).await;
            0
        }
        _ => {
            io.err(format!(
                "sleep: invalid number '{}'\n",
                args.first().map_or("", String::as_str)
            ));
            1
        }
    }
}

/// `sh -c SCRIPT`, `sh FILE`, or an interactive shell reading stdin.
async fn sh_command(c: &Container, sh: &mut Shell, args: &[String], io: &mut Stdio) -> i32 {
    let mut sub = sh.clone();
    sub.exit = None;
    match args.first().map(String::as_str) {
        Some("-c") => match args.get(1) {
            Some(script) => script_status(c, &mut sub, script, io).await,
            None => {
                io.err("sh: -c requires an argument\n");
                2
            }
        },
        Some(path) => {
            let file = fs::normalize(&sh.cwd, path);
            let script = match fs::lock(&c.fs).get(&file) {
                Some(Node::File { data, .. }) => String::from_utf8_lossy(data).into_owned(),
                _ => {
                    io.err(format!("sh: can't open '{path}': No such file or directory\n"));
                    return 2;
                }
            };
            script_status(c, &mut sub, &script, io).await
        }
        None => interactive(c, &mut sub, io).await,
    }
}

async fn script_status(c: &Container, sh: &mut Shell, script: &str, io: &mut Stdio) -> i32 {
    let status = run_script(c, sh, script, io).await;
    sh.exit.unwrap_or(status)
}

/// A shell reading commands from stdin, one line at a time, with a prompt
/// when it has a terminal.
async fn interactive(c: &Container, sh: &mut Shell, io: &mut Stdio) -> i32 {
    let mut pending = Vec::new();
    let mut status = 0;
    loop {
        if io.tty {
            io.out(format!("{}:{}# ", c.pod, sh.cwd));
        }
        let Some(line) = io.read_line(&mut pending).await else {
            return status;
        };
        if io.tty {
            // A terminal echoes what was typed.
            io.out(format!("{line}\n"));
        }
        status = run_script(c, sh, &line, io).await;
        if let Some(code) = sh.exit {
            return code;
        }
    }
}

/// Run a script in `sh`; returns the last status.
pub async fn run_script(c: &Container, sh: &mut Shell, script: &str, io: &mut Stdio) -> i32 {
    let steps = match shell::tokenize(script, &sh.vars).and_then(shell::parse) {
        Ok(steps) => steps,
        Err(e) => {
            io.err(format!("{e}\n"));
            return 2;
        }
    };
    let mut status = 0;
    let mut skip = false;
    for (pipeline, op) in steps {
        if !skip {
            status = run_pipeline(c, sh, pipeline, io).await;
            sh.vars.insert("?".into(), status.to_string());
            if sh.exit.is_some() {
                return status;
            }
        }
        skip = match op {
            "&&" => status != 0,
            "||" => status == 0,
            _ => false,
        };
    }
    status
}

/// Run a pipeline: each stage's output is the next one's input, the last
/// stage writes to `io`.
async fn run_pipeline(c: &Container, sh: &mut Shell, stages: Vec<Simple>, io: &mut Stdio) -> i32 {
    let count = stages.len();
    let mut input: Option<Bytes> = None;
    let mut status = 0;
    for (i, stage) in stages.into_iter().enumerate() {
        let last = i + 1 == count;
        let (out, buf) = capture();
        let stdout = if last && stage.redirect.is_none() {
            io.stdout.clone()
        } else {
            out
        };
        let stderr = match &stage.stderr_file {
            Some(file) if file == "/dev/null" => super::io::discard(),
            Some(file) => files::file_output(c, sh, file),
            None => io.stderr.clone(),
        };
        let (stdout, stderr) = match stage.dup {
            Some(">&2") => (stderr.clone(), stderr),
            Some(_) => (stdout.clone(), stdout),
            None => (stdout, stderr),
        };
        let mut stage_io = Stdio {
            stdin: if i == 0 {
                std::mem::replace(&mut io.stdin, Stdin::None)
            } else {
                Stdin::Buffer(input.take())
            },
            stdout,
            stderr,
            tty: io.tty,
        };
        status = run(c, sh, stage.argv, &mut stage_io).await;
        if i == 0 {
            io.stdin = std::mem::replace(&mut stage_io.stdin, Stdin::None);
        }
        let produced = Bytes::from(std::mem::take(
            &mut *buf.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
        ));
        if let Some((file, append)) = stage.redirect {
            status = files::redirect(c, sh, &file, append, produced, io).max(status);
        } else {
            input = Some(produced);
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::exec::io::capture;

    fn container(uid: &str) -> Container {
        Container {
            pod: "web-1".into(),
            container: "web".into(),
            env: vec![("HOME".into(), "/root".into()), ("MODE".into(), "demo".into())],
            fs: fs::for_container(uid, "web", "web-1"),
        }
    }

    async fn run_capture(c: &Container, argv: &[&str], stdin: Option<&'static [u8]>) -> (i32, String, String) {
        let (out, out_buf) = capture();
        let (err, err_buf) = capture();
        let io = Stdio {
            stdin: stdin.map_or(Stdin::None, |b| Stdin::Buffer(Some(Bytes::from_static(b)))),
            stdout: out,
            stderr: err,
            tty: false,
        };
        let code = exec(c, argv.iter().map(|s| s.to_string()).collect(), io).await;
        let text =
            |b: &std::sync::Arc<std::sync::Mutex<Vec<u8>>>| String::from_utf8_lossy(&b.lock().unwrap()).into_owned();
        (code, text(&out_buf), text(&err_buf))
    }

    #[tokio::test]
    async fn echo_env_and_hostname_answer_from_the_pod() {
        let c = container("cmd-test-1");
        assert_eq!(
            run_capture(&c, &["echo", "hi", "there"], None).await,
            (0, "hi there\n".into(), String::new())
        );
        assert_eq!(run_capture(&c, &["hostname"], None).await.1, "web-1\n");
        assert!(run_capture(&c, &["env"], None).await.1.contains("MODE=demo\n"));
    }

    #[tokio::test]
    async fn sh_c_propagates_exit_codes_and_runs_lists() {
        let c = container("cmd-test-2");
        assert_eq!(run_capture(&c, &["sh", "-c", "exit 3"], None).await.0, 3);
        assert_eq!(run_capture(&c, &["false"], None).await.0, 1);
        let (code, out, _) = run_capture(&c, &["sh", "-c", "false || echo fallback; echo $MODE && exit 0"], None).await;
        assert_eq!((code, out.as_str()), (0, "fallback\ndemo\n"));
    }

    #[tokio::test]
    async fn unknown_commands_exit_127_with_a_not_found_message() {
        let c = container("cmd-test-3");
        assert_eq!(
            run_capture(&c, &["nope", "x"], None).await,
            (127, String::new(), "sh: nope: not found\n".into())
        );
    }

    #[tokio::test]
    async fn cat_copies_stdin_and_files_written_by_redirects() {
        let c = container("cmd-test-4");
        assert_eq!(run_capture(&c, &["cat"], Some(b"piped")).await.1, "piped");
        run_capture(&c, &["sh", "-c", "echo saved > /tmp/f; echo more >> /tmp/f"], None).await;
        assert_eq!(run_capture(&c, &["cat", "/tmp/f"], None).await.1, "saved\nmore\n");
        assert_eq!(
            run_capture(&c, &["sh", "-c", "cat /tmp/f | tail -n 1"], None).await.1,
            "more\n"
        );
    }

    #[tokio::test]
    async fn interactive_sh_reads_commands_from_stdin() {
        let c = container("cmd-test-5");
        let (code, out, _) = run_capture(&c, &["sh"], Some(b"echo one\nexit 4\necho never\n")).await;
        assert_eq!((code, out.as_str()), (4, "one\n"));
    }
}
